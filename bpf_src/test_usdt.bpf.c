// SPDX-License-Identifier: GPL-2.0
/*
 * test_usdt.bpf.c - every USDT hit with all its decoded arguments, for
 * tests/test_usdt_attach.py (attach all probes of a binary, check values).
 */
#include "pycore.bpf.h"
#include "pycore_usdt.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct usdt_hit_event {
	__u32 pid;
	__u32 cookie;
	__s32 cnt;
	__s32 err;	/* first failing argument's error, 0 if none */
	__s64 args[PYCORE_USDT_MAX_ARGS];
};

struct usdt_hit_event *__keep_usdt_hit_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct usdt_hit_event);

SEC("uprobe")
int usdt_hit(struct pt_regs *ctx)
{
	struct usdt_hit_event *e = pycore_reserve(&events, sizeof(*e));
	long v;
	int i, cnt;

	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->cookie = (__u32)bpf_get_attach_cookie(ctx);
	cnt = pycore_usdt_arg_cnt(ctx);
	e->cnt = cnt;
	e->err = 0;
	for (i = 0; i < PYCORE_USDT_MAX_ARGS; i++) {
		v = 0;
		if (i < cnt) {
			int err = pycore_usdt_arg(ctx, i, &v);
			if (err && !e->err)
				e->err = err;
		}
		e->args[i] = v;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}
