// SPDX-License-Identifier: GPL-2.0
/*
 * fget-crack: which processes get files whose name contains a pattern
 * (the kernel lab's kretfunc:fget exercise).  pycore/tools/fget_crack.py.
 *
 * fget_exit (fexit/fget) is the real thing: every fd -> file lookup.  Where
 * fexit cannot attach, sys_exit_fd (tp_btf/sys_exit) watches the syscalls
 * that hand out new descriptors (open*, creat, dup*, fcntl F_DUPFD*) and resolves the
 * returned fd through the task's file table.  Both match the pattern here,
 * in the kernel.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile char pattern[PYCORE_PATTERN_LEN] = "crack";
const volatile __u32 pattern_len = 5;

struct fget_event {
	__u32 pid;
	__u32 tid;
	__s32 fd;
	__u32 via_syscall;	/* 0: fget, else the syscall number */
	char comm[TASK_COMM_LEN];
	char name[PYCORE_NAME_LEN];
};

PYCORE_EVENT(fget_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct fget_event);

static __always_inline int emit(struct file *file, long fd, __u32 via)
{
	char buf[PYCORE_NAME_LEN + PYCORE_PATTERN_LEN] = {};
	struct fget_event *e;
	__u64 id;

	if (!file || pycore_filtered())
		return 0;
	pycore_file_name(file, buf);
	if (!pycore_contains(buf, pattern, pattern_len))
		return 0;
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	id = bpf_get_current_pid_tgid();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->fd = fd;
	e->via_syscall = via;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__builtin_memcpy(e->name, buf, PYCORE_NAME_LEN);
	e->name[PYCORE_NAME_LEN - 1] = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("fexit/fget")
int BPF_PROG(fget_exit, unsigned int fd, struct file *ret)
{
	return emit(ret, fd, 0);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_fd, struct pt_regs *regs, long ret)
{
	long nr;

	if (ret < 0)
		return 0;
	nr = BPF_CORE_READ(regs, orig_ax);
	if (!pycore_returns_fd(nr, regs))
		return 0;
	return emit(pycore_file_of_fd(ret), ret, nr);
}
