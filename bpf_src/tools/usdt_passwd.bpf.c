// SPDX-License-Identifier: GPL-2.0
/*
 * usdt-passwd: passwd:passwdfound(username, homedir) of examples/usdt-passwd,
 * attached at every location by pycore/tools/usdt_passwd.py through
 * pycore.usdt (arguments read by pycore_usdt_arg, not libbpf's USDT code).
 */
#include "tools/tools.bpf.h"
#include "pycore_usdt.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct passwd_event {
	__u32 pid;
	__u32 cookie;
	char username[64];
	char homedir[128];
};

PYCORE_EVENT(passwd_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct passwd_event);

SEC("uprobe")
int passwdfound(struct pt_regs *ctx)
{
	struct passwd_event *e;
	long user = 0, home = 0;

	if (pycore_filtered())
		return 0;
	if (pycore_usdt_arg(ctx, 0, &user) || pycore_usdt_arg(ctx, 1, &home))
		return 0;
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->cookie = (__u32)bpf_get_attach_cookie(ctx);
	bpf_probe_read_user_str(e->username, sizeof(e->username), (void *)user);
	bpf_probe_read_user_str(e->homedir, sizeof(e->homedir), (void *)home);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
