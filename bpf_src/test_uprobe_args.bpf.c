// SPDX-License-Identifier: GPL-2.0
/*
 * test_uprobe_args.bpf.c - a uprobe that records its function's first two
 * arguments and a uretprobe that records the return value, one ring-buffer
 * event per hit, for tests/test_shared_lib_probes.py (functions of a shared
 * library, attached by symbol and by symbol+offset, checked value by value).
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum uprobe_args_kind {
	UPROBE_ENTRY = 1,
	UPROBE_RETURN = 2,
};

struct uprobe_args_event {
	__u32 pid;
	__u32 kind;		/* enum uprobe_args_kind */
	__u64 cookie;
	__s64 arg0;		/* entry: first argument; return: return value */
	__s64 arg1;		/* entry: second argument */
};

struct uprobe_args_event *__keep_uprobe_args_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct uprobe_args_event);

static __always_inline void emit(struct pt_regs *ctx, __u32 kind, __s64 a0, __s64 a1)
{
	struct uprobe_args_event *e = pycore_reserve(&events, sizeof(*e));

	if (!e)
		return;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->kind = kind;
	e->cookie = bpf_get_attach_cookie(ctx);
	e->arg0 = a0;
	e->arg1 = a1;
	bpf_ringbuf_submit(e, 0);
}

SEC("uprobe")
int BPF_KPROBE(uprobe_args, long a0, long a1)
{
	emit(ctx, UPROBE_ENTRY, a0, a1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(uretprobe_value, long ret)
{
	emit(ctx, UPROBE_RETURN, ret, 0);
	return 0;
}
