/* SPDX-License-Identifier: GPL-2.0 */
/*
 * calls.bpf.c - the BPF side of examples/embed_skeleton_pins.py: a process's getppid()
 * calls counted three ways. A hash map pinned by name (its counts outlive the agent and
 * continue in its next run), a per-CPU array (the total, without atomics), and a ring
 * buffer of events. Built with `pycore build`, typed with `pycore skel`.
 */
#include "pycore.bpf.h"

const volatile __u32 targ_tgid = 0;	/* .rodata: the process to count, set before load */

struct call_event {
	__u32 pid;
	__u32 tid;
	__u64 seq;			/* this process's count, this call included */
	char comm[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct call_event);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);		/* tgid */
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);	/* kept across runs when opened with a pin_dir */
} by_pid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} total SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_getppid(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, zero = 0;
	__u64 one = 1, *count, *sum, seq = 1;
	struct call_event *e;

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	sum = bpf_map_lookup_elem(&total, &zero);
	if (sum)
		*sum += 1;		/* this CPU's slot: no other CPU writes it */
	count = bpf_map_lookup_elem(&by_pid, &tgid);
	if (count)
		seq = __sync_fetch_and_add(count, 1) + 1;
	else
		bpf_map_update_elem(&by_pid, &tgid, &one, BPF_NOEXIST);
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->pid = tgid;
	e->tid = (__u32)id;
	e->seq = seq;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
