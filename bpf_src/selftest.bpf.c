// SPDX-License-Identifier: GPL-2.0
/*
 * selftest.bpf.c - a small real object for the libbpf-layer tests.
 *
 * - `events`: ring buffer of struct selftest_event, filled through
 *   pycore_reserve() (losses counted in pycore_dropped).
 * - `syscall_counts`: hash map syscall id -> number of calls by target_tgid.
 * - tp_btf/sys_enter and tracepoint/syscalls/sys_enter_getpid: emit events
 *   for the process whose tgid is in the .rodata constant target_tgid
 *   (0 = nobody; set it before load).
 * - uprobe: attached by the test to a function of its choice (manual attach).
 * - fexit/fget: needs BPF trampolines; the host kernel refuses to load it
 *   (EPERM, see KERNEL-LAB.md), so loaders disable its autoload there.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum selftest_source {
	SELFTEST_SRC_TP_BTF = 1,
	SELFTEST_SRC_TRACEPOINT = 2,
	SELFTEST_SRC_UPROBE = 3,
	SELFTEST_SRC_FEXIT = 4,
};

struct selftest_event {
	__u32 pid;		/* kernel pid = user-space thread id */
	__u32 tgid;		/* user-space process id */
	__u64 ts;		/* bpf_ktime_get_ns() */
	char comm[TASK_COMM_LEN];
	__s64 id;		/* syscall id, or fget's fd */
	__u64 value;		/* uprobe: first argument; fexit: returned pointer != 0 */
	__u32 source;		/* enum selftest_source */
	__u32 cpu;
};

/* set by user space before load; 0 matches no process */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct selftest_event);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);	/* syscall id */
	__type(value, __u64);	/* count */
} syscall_counts SEC(".maps");

/* Force BTF for the event type so user space can decode it from the object. */
struct selftest_event _selftest_event_btf = {};

static __always_inline int is_target(__u32 *pid, __u32 *tgid)
{
	__u64 id = bpf_get_current_pid_tgid();

	*pid = (__u32)id;
	*tgid = id >> 32;
	return target_tgid != 0 && *tgid == target_tgid;
}

static __always_inline void emit(__u32 pid, __u32 tgid, __s64 id, __u64 value,
				 __u32 source)
{
	struct selftest_event *e;

	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return;
	e->pid = pid;
	e->tgid = tgid;
	e->ts = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->id = id;
	e->value = value;
	e->source = source;
	e->cpu = bpf_get_smp_processor_id();
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(selftest_sys_enter, struct pt_regs *regs, long id)
{
	__u32 pid, tgid, key;
	__u64 one = 1, *count;

	if (!is_target(&pid, &tgid))
		return 0;

	key = (__u32)id;
	count = bpf_map_lookup_elem(&syscall_counts, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&syscall_counts, &key, &one, BPF_NOEXIST);

	emit(pid, tgid, id, 0, SELFTEST_SRC_TP_BTF);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int selftest_getpid(struct trace_event_raw_sys_enter *ctx)
{
	__u32 pid, tgid;

	if (!is_target(&pid, &tgid))
		return 0;
	emit(pid, tgid, BPF_CORE_READ(ctx, id), 0, SELFTEST_SRC_TRACEPOINT);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(selftest_uprobe, unsigned long arg0)
{
	__u32 pid, tgid;

	if (!is_target(&pid, &tgid))
		return 0;
	emit(pid, tgid, 0, arg0, SELFTEST_SRC_UPROBE);
	return 0;
}

SEC("fexit/fget")
int BPF_PROG(selftest_fexit_fget, unsigned int fd, struct file *ret)
{
	__u32 pid, tgid;

	if (!is_target(&pid, &tgid))
		return 0;
	emit(pid, tgid, fd, ret != 0, SELFTEST_SRC_FEXIT);
	return 0;
}
