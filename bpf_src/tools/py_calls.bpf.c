// SPDX-License-Identifier: GPL-2.0
/*
 * py-calls: CPython's python:function__entry / function__return(filename,
 * funcname, lineno) probes, as a call flow (bcc's uflow): one event per call
 * and return, with the depth tracked per thread.
 */
#include "tools/tools.bpf.h"
#include "pycore_usdt.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct py_call_event {
	__u32 pid;
	__u32 tid;
	__s32 depth;
	__s32 lineno;
	__u8 is_return;
	__u8 pad[7];
	char filename[96];
	char funcname[64];
};

PYCORE_EVENT(py_call_event);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __s32);
} depths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

static __always_inline int emit(struct pt_regs *ctx, int is_return)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct py_call_event *e;
	__s32 zero = 0, *d, depth;
	long file = 0, func = 0, line = 0;

	if (pycore_filtered())
		return 0;
	d = bpf_map_lookup_elem(&depths, &tid);
	if (!d) {
		bpf_map_update_elem(&depths, &tid, &zero, BPF_NOEXIST);
		d = bpf_map_lookup_elem(&depths, &tid);
		if (!d)
			return 0;
	}
	if (is_return) {
		depth = *d;
		*d = depth > 0 ? depth - 1 : 0;
	} else {
		depth = ++*d;
	}
	pycore_usdt_arg(ctx, 0, &file);
	pycore_usdt_arg(ctx, 1, &func);
	pycore_usdt_arg(ctx, 2, &line);
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->tid = tid;
	e->depth = depth;
	e->lineno = line;
	e->is_return = is_return;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_probe_read_user_str(e->filename, sizeof(e->filename), (void *)file);
	bpf_probe_read_user_str(e->funcname, sizeof(e->funcname), (void *)func);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uprobe")
int function_entry(struct pt_regs *ctx)
{
	return emit(ctx, 0);
}

SEC("uprobe")
int function_return(struct pt_regs *ctx)
{
	return emit(ctx, 1);
}
