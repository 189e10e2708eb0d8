// SPDX-License-Identifier: GPL-2.0
/*
 * test_pin_v2.bpf.c - version 2 of the agent in tests/test_pins.py: the maps
 * of version 1 (test_pin_v1.bpf.c) with the same layouts, new logic (getpid
 * also stamps last_ns; getppid is counted in stats[1]) and a new map,
 * `seen`, which a restart creates beside the reused ones.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct pin_stats {
	__u64 calls;
	__u64 last_ns;
};

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct pin_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} by_tid SEC(".maps");

/* new in version 2: calls this build has seen, by stats index (0 getpid, 1 getppid) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} seen SEC(".maps");

static __always_inline int count(__u32 key)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 one = 1, *n;
	struct pin_stats *s;

	if ((id >> 32) != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&stats, &key);
	if (s) {
		__sync_fetch_and_add(&s->calls, 1);
		s->last_ns = bpf_ktime_get_ns();
	}
	n = bpf_map_lookup_elem(&seen, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&seen, &key, &one, BPF_NOEXIST);
	if (key != 0)
		return 0;
	n = bpf_map_lookup_elem(&by_tid, &tid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&by_tid, &tid, &one, BPF_NOEXIST);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int count_getpid(void *ctx)
{
	return count(0);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int count_getppid(void *ctx)
{
	return count(1);
}
