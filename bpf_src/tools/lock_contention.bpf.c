// SPDX-License-Identifier: GPL-2.0
/*
 * lock-contention: how long threads block on contended kernel locks (the
 * kernel lab's lock:contention_begin/end script, with its exercises done):
 * begin stamps (tid, lock), end measures; blocks of at least threshold_ns
 * (.rodata) go into a log2 histogram per lock address, with the lock's flags
 * remembered alongside.  pycore/tools/lock_contention.py prints it.
 *
 * tp_btf (typed, no tracefs) first, the classic tracepoints as fallback.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 threshold_ns = 100000;

struct start_key {
	__u64 lock;
	__u32 tid;
	__u32 pad;
};

struct start_val {
	__u64 ts;
	__u32 flags;
	__u32 pad;
};

struct hist_key {
	__u64 lock;
	__u32 slot;	/* bpftrace's hist() bucket: 1 + bit length of the value */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct start_key);
	__type(value, struct start_val);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hist_key);
	__type(value, __u64);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lock_flags SEC(".maps");

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 bits = 0;

	for (int i = 0; i < 64 && v; i++) {
		v >>= 1;
		bits++;
	}
	return bits + 1;
}

static __always_inline int begin(void *lock, __u32 flags)
{
	struct start_key k = { .lock = (__u64)lock, .tid = (__u32)bpf_get_current_pid_tgid() };
	struct start_val v = { .ts = bpf_ktime_get_ns(), .flags = flags };

	if (pycore_filtered())
		return 0;
	bpf_map_update_elem(&start, &k, &v, BPF_ANY);
	return 0;
}

static __always_inline int end(void *lock)
{
	struct start_key k = { .lock = (__u64)lock, .tid = (__u32)bpf_get_current_pid_tgid() };
	struct start_val *v = bpf_map_lookup_elem(&start, &k);
	struct hist_key hk = { .lock = (__u64)lock };
	__u64 one = 1, *count, delta;
	__u32 flags;

	if (!v)
		return 0;
	delta = bpf_ktime_get_ns() - v->ts;
	flags = v->flags;
	bpf_map_delete_elem(&start, &k);
	if (delta < threshold_ns)
		return 0;
	hk.slot = log2_slot(delta);
	count = bpf_map_lookup_elem(&hist, &hk);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&hist, &hk, &one, BPF_NOEXIST);
	bpf_map_update_elem(&lock_flags, &hk.lock, &flags, BPF_ANY);
	return 0;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(tp_btf_begin, void *lock, unsigned int flags)
{
	return begin(lock, flags);
}

SEC("tp_btf/contention_end")
int BPF_PROG(tp_btf_end, void *lock, int ret)
{
	return end(lock);
}

SEC("tracepoint/lock/contention_begin")
int tp_begin(struct trace_event_raw_contention_begin *ctx)
{
	return begin(ctx->lock_addr, ctx->flags);
}

SEC("tracepoint/lock/contention_end")
int tp_end(struct trace_event_raw_contention_end *ctx)
{
	return end(ctx->lock_addr);
}
