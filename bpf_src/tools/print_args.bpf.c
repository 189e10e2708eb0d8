// SPDX-License-Identifier: GPL-2.0
/*
 * print-args: bpftrace's print(args) for any kernel function with BTF.
 * One generic fentry program; user space retargets it with
 * set_attach_target() before load, so nothing is compiled at run time.
 * Arguments are captured raw (u64s, bpf_get_func_arg); with deref_arg >= 0
 * the deref_size bytes (sizeof from BTF, .rodata) that argument points to
 * are copied too.  pycore/tools/print_args.py renders them from BTF.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define MAX_ARGS 16	/* room for the kernel's 12, a power of two for masking */
#define DEREF_MAX 4096

const volatile __s32 deref_arg = -1;
const volatile __u32 deref_size = 0;

struct args_event {
	__u32 pid;
	__u32 nargs;
	__u64 args[MAX_ARGS];
	__u32 deref_len;
	__u32 pad;
	__u8 deref[DEREF_MAX];
};

PYCORE_EVENT(args_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct args_event);

SEC("fentry/vfs_read")
int print_args_entry(unsigned long long *ctx)
{
	struct args_event *e;
	__u64 n = bpf_get_func_arg_cnt(ctx);

	if (pycore_filtered())
		return 0;
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->nargs = n;
	for (int i = 0; i < 12; i++) {
		e->args[i] = 0;
		if (i < n)
			bpf_get_func_arg(ctx, i, &e->args[i]);
	}
	e->deref_len = 0;
	if (deref_arg >= 0 && deref_arg < MAX_ARGS) {
		__u32 size = deref_size < DEREF_MAX ? deref_size : DEREF_MAX;

		if (bpf_probe_read_kernel(e->deref, size, (void *)e->args[deref_arg & (MAX_ARGS - 1)]) == 0)
			e->deref_len = size;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}
