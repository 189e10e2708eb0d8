// SPDX-License-Identifier: GPL-2.0
/*
 * vfs-unlink: who unlinks which file, and in which directory (the kernel
 * lab's kfunc:vfs_unlink exercise).  pycore/tools/vfs_unlink.py.
 *
 * vfs_unlink's arguments moved across kernels: (dir, dentry, ...) before
 * 5.12, (mnt_userns, dir, dentry, ...) until 6.2, (idmap, dir, dentry, ...)
 * since.  So the fentry program reads the argument whose index user space
 * found in the kernel's BTF (dentry_arg, .rodata) with bpf_get_func_arg().
 *
 * Fallback: the unlink/unlinkat syscall tracepoints.  Enter records the
 * user's path and the name of the directory it is relative to (dirfd or
 * cwd); exit reports it if the syscall succeeded.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define PATH_LEN 256
#define AT_FDCWD -100
#define AT_REMOVEDIR 0x200

const volatile __u32 dentry_arg = 2;

struct unlink_event {
	__u32 pid;
	__u32 tid;
	__u32 via_syscall;	/* 0: vfs_unlink, else 1 */
	__u32 pad;
	char comm[TASK_COMM_LEN];
	char name[PYCORE_NAME_LEN];	/* fentry: the dentry's name */
	char parent[PYCORE_NAME_LEN];	/* fentry: its parent; syscalls: dirfd's/cwd's name */
	char path[PATH_LEN];		/* syscalls: the path as given */
};

PYCORE_EVENT(unlink_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct unlink_event);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, struct unlink_event);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unlink_event);
} scratch SEC(".maps");

static __always_inline struct unlink_event *new_event(__u32 via)
{
	__u32 zero = 0;
	struct unlink_event *e = bpf_map_lookup_elem(&scratch, &zero);
	__u64 id = bpf_get_current_pid_tgid();

	if (!e)
		return NULL;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->via_syscall = via;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->name[0] = e->parent[0] = e->path[0] = 0;
	return e;
}

static __always_inline void send(struct unlink_event *e)
{
	if (bpf_ringbuf_output(&events, e, sizeof(*e), 0))
		__sync_fetch_and_add(&pycore_dropped, 1);
}

SEC("fentry/vfs_unlink")
int vfs_unlink_entry(unsigned long long *ctx)
{
	struct unlink_event *e;
	struct dentry *dentry;
	__u64 arg = 0;

	if (pycore_filtered() || bpf_get_func_arg(ctx, dentry_arg, &arg))
		return 0;
	e = new_event(0);
	if (!e)
		return 0;
	dentry = (struct dentry *)arg;
	bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(dentry, d_name.name));
	bpf_probe_read_kernel_str(e->parent, sizeof(e->parent), BPF_CORE_READ(dentry, d_parent, d_name.name));
	send(e);
	return 0;
}

static __always_inline int enter(long dfd, const char *path)
{
	struct task_struct *task;
	struct unlink_event *e;
	const unsigned char *dname;

	if (pycore_filtered())
		return 0;
	e = new_event(1);
	if (!e)
		return 0;
	bpf_probe_read_user_str(e->path, sizeof(e->path), path);
	if (dfd == AT_FDCWD) {
		task = (struct task_struct *)bpf_get_current_task();
		dname = BPF_CORE_READ(task, fs, pwd.dentry, d_name.name);
	} else {
		struct file *f = pycore_file_of_fd(dfd);

		dname = f ? BPF_CORE_READ(f, f_path.dentry, d_name.name) : NULL;
	}
	if (dname)
		bpf_probe_read_kernel_str(e->parent, sizeof(e->parent), dname);
	bpf_map_update_elem(&pending, &e->tid, e, BPF_ANY);
	return 0;
}

static __always_inline int leave(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct unlink_event *e = bpf_map_lookup_elem(&pending, &tid);

	if (!e)
		return 0;
	if (ret == 0)
		send(e);
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_unlinkat")
int unlinkat_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (ctx->args[2] & AT_REMOVEDIR)	/* rmdir: not vfs_unlink */
		return 0;
	return enter((int)ctx->args[0], (const char *)ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_exit_unlinkat")
int unlinkat_exit(struct trace_event_raw_sys_exit *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_unlink")
int unlink_enter(struct trace_event_raw_sys_enter *ctx)
{
	return enter(AT_FDCWD, (const char *)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_exit_unlink")
int unlink_exit(struct trace_event_raw_sys_exit *ctx)
{
	return leave(ctx->ret);
}
