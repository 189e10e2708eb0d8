/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tools.bpf.h - what the programs of pycore's tools (bpf_src/tools/) share.
 *
 * - targ_tgid: the -p/-c process filter, a .rodata constant set by
 *   pycore/tools/base.py before load (0: every process), so the verifier
 *   drops the test when it is unused;
 * - pycore_file_of_fd(): a task's struct file for an fd, read through
 *   task->files->fdt with CO-RE reads (works from tp_btf/raw_tp, where there
 *   is no fget() to hook);
 * - pycore_contains(): bounded substring search, so name patterns are
 *   matched in the kernel and unmatched events never reach the ring buffer.
 */
#ifndef PYCORE_TOOLS_BPF_H
#define PYCORE_TOOLS_BPF_H

#include "pycore.bpf.h"

#define PYCORE_NAME_LEN 64
#define PYCORE_PATTERN_LEN 32

const volatile __u32 targ_tgid = 0;

/* Keep `struct NAME` in the object's BTF (locals alone do not put it there),
 * so pycore/ringbuf.py can decode events by name. */
#define PYCORE_EVENT(NAME) struct NAME *__pycore_event_##NAME __attribute__((unused))

/* True when the current task is not the one -p/-c asked for. */
static __always_inline int pycore_filtered(void)
{
	return targ_tgid && (bpf_get_current_pid_tgid() >> 32) != targ_tgid;
}

/* The file behind descriptor `fd` of the current task, or NULL. */
static __always_inline struct file *pycore_file_of_fd(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *file = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/* Copy the last path component of `file` into name[PYCORE_NAME_LEN]. */
static __always_inline void pycore_file_name(struct file *file, char *name)
{
	const unsigned char *s = BPF_CORE_READ(file, f_path.dentry, d_name.name);

	bpf_probe_read_kernel_str(name, PYCORE_NAME_LEN, s);
}

/*
 * Does the NUL-terminated `s` (a buffer of PYCORE_NAME_LEN + PYCORE_PATTERN_LEN
 * bytes, zero past the string) contain pattern[0..len)?  Empty patterns match.
 */
static __always_inline int pycore_contains(const char *s, const volatile char *pattern, __u32 len)
{
	if (len == 0)
		return 1;
	for (int i = 0; i < PYCORE_NAME_LEN; i++) {
		if (s[i] == 0)
			return 0;
		int j;
		for (j = 0; j < PYCORE_PATTERN_LEN; j++) {
			if (j >= len || s[i + j] != pattern[j])
				break;
		}
		if (j >= len)
			return 1;
	}
	return 0;
}

/* x86-64 numbers of the syscalls that return a new descriptor. */
static __always_inline int pycore_returns_fd(long nr, struct pt_regs *regs)
{
	long cmd;

	switch (nr) {
	case 72:  /* fcntl(fd, F_DUPFD or F_DUPFD_CLOEXEC, ...): Python's os.dup */
		cmd = BPF_CORE_READ(regs, si);
		return cmd == 0 || cmd == 1030;
	case 2:   /* open */
	case 32:  /* dup */
	case 33:  /* dup2 */
	case 85:  /* creat */
	case 257: /* openat */
	case 292: /* dup3 */
	case 304: /* open_by_handle_at */
	case 437: /* openat2 */
		return 1;
	}
	return 0;
}

#endif /* PYCORE_TOOLS_BPF_H */
