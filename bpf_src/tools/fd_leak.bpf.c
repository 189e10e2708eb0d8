// SPDX-License-Identifier: GPL-2.0
/*
 * fd-leak: descriptors opened and never closed (the kernel lab's "is
 * kprobeme leaking file descriptors?" question, answered with a map).
 * pycore/tools/fd_leak.py.
 *
 * sys_exit of a syscall returning a new fd records (tgid, fd) -> when, which
 * file, which thread; close() removes it.  What is left at the end was
 * opened during the run and not closed.  dup2/dup3 over an open fd replace
 * the entry, as the kernel replaces the file.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct fd_key {
	__u32 tgid;
	__s32 fd;
};

struct fd_info {
	__u64 ts;
	__u32 tid;
	__u32 nr;
	char comm[TASK_COMM_LEN];
	char name[PYCORE_NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fd_key);
	__type(value, struct fd_info);
} open_fds SEC(".maps");

SEC("tp_btf/sys_exit")
int BPF_PROG(fd_opened, struct pt_regs *regs, long ret)
{
	struct fd_info info = {};
	struct fd_key key;
	struct file *file;
	__u64 id;
	long nr;

	if (ret < 0 || pycore_filtered())
		return 0;
	nr = BPF_CORE_READ(regs, orig_ax);
	if (!pycore_returns_fd(nr, regs))
		return 0;
	id = bpf_get_current_pid_tgid();
	key.tgid = id >> 32;
	key.fd = ret;
	info.ts = bpf_ktime_get_ns();
	info.tid = (__u32)id;
	info.nr = nr;
	bpf_get_current_comm(info.comm, sizeof(info.comm));
	file = pycore_file_of_fd(ret);
	if (file)
		pycore_file_name(file, info.name);
	bpf_map_update_elem(&open_fds, &key, &info, BPF_ANY);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(fd_closed, struct pt_regs *regs, long id)
{
	struct fd_key key;

	if (id != 3 /* close */ || pycore_filtered())
		return 0;
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	key.fd = BPF_CORE_READ(regs, di);
	bpf_map_delete_elem(&open_fds, &key);
	return 0;
}
