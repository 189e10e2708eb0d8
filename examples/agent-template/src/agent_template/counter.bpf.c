/* SPDX-License-Identifier: GPL-2.0 */
/*
 * counter.bpf.c - the agent's BPF side: every exec on the system as an event
 * on a ring buffer, and system calls counted per process in a hash map.
 * Tracepoints only, so it attaches on any kernel with BTF (no fentry or
 * kprobes needed).
 *
 * Built by pycore_add_bpf_object(counter ... SKELETON) in CMakeLists.txt into
 * counter.bpf.o and its typed skeleton counter_skel.py, both installed in the
 * package. pycore.bpf.h brings vmlinux.h, libbpf's helpers and pycore_reserve().
 */
#include "pycore.bpf.h"

#define FILENAME_LEN 128

/* Settings (.rodata): set from Python before load, constant afterwards. */
const volatile __u32 ignore_tgid = 0;	/* a process whose system calls are not counted: the agent itself */

/* Live counters (.bss): read from Python while the programs run. */
__u64 execs_seen = 0;

struct exec_event {
	__u32 pid;
	__u32 ppid;
	__u32 uid;
	char comm[TASK_COMM_LEN];
	char filename[FILENAME_LEN];
};

struct syscall_count {
	__u64 count;
	char comm[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct exec_event);	/* what the ring carries, for the typed skeleton */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);	/* the oldest processes make room */
	__uint(max_entries, 10240);
	__type(key, __u32);			/* tgid */
	__type(value, struct syscall_count);
} syscalls SEC(".maps");

SEC("tracepoint/sched/sched_process_exec")
int on_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	unsigned int filename = ctx->__data_loc_filename & 0xFFFF;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct syscall_count *counted;
	struct exec_event *e;

	__sync_fetch_and_add(&execs_seen, 1);
	counted = bpf_map_lookup_elem(&syscalls, &tgid);
	if (counted)	/* the process has a new name now */
		bpf_get_current_comm(counted->comm, sizeof(counted->comm));

	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;	/* counted in pycore_dropped */
	e->pid = tgid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), (void *)ctx + filename);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int on_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct syscall_count *counted, first = {};

	if (tgid == ignore_tgid)
		return 0;
	counted = bpf_map_lookup_elem(&syscalls, &tgid);
	if (!counted) {
		bpf_get_current_comm(first.comm, sizeof(first.comm));
		bpf_map_update_elem(&syscalls, &tgid, &first, BPF_NOEXIST);
		counted = bpf_map_lookup_elem(&syscalls, &tgid);
		if (!counted)
			return 0;	/* the map is full */
	}
	__sync_fetch_and_add(&counted->count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
