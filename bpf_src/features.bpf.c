// SPDX-License-Identifier: GPL-2.0
/*
 * features.bpf.c - tiny trial programs for pycore.features.
 *
 * Every program is declared with a "?" section prefix (autoload off), so
 * pycore.features loads exactly one of them per check: a program type the
 * kernel refuses (fentry here, EPERM) cannot make the other checks fail.
 *
 * Each program records that it ran for the probing process in `seen`
 * (key: tgid and check number, value: 1 or the attach cookie), so a check
 * can tell "attached and fired" from "attached".
 *
 * Targets are chosen to exist on every kernel we support: vfs_read for
 * fentry/fexit/kprobe (set_attach_target can retarget), sys_enter for
 * tp_btf, syscalls/sys_enter_getpid for the cookie check.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum feature_check {
	FEAT_FENTRY = 1,
	FEAT_FEXIT = 2,
	FEAT_KPROBE = 3,
	FEAT_TP_BTF = 4,
	FEAT_COOKIE = 5,
};

struct feature_key {
	__u32 tgid;
	__u32 check;		/* enum feature_check */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);	/* never full: old probers age out */
	__uint(max_entries, 1024);
	__type(key, struct feature_key);
	__type(value, __u64);
} seen SEC(".maps");

static __always_inline void mark(__u32 check, __u64 value)
{
	struct feature_key key = {
		.tgid = bpf_get_current_pid_tgid() >> 32,
		.check = check,
	};

	bpf_map_update_elem(&seen, &key, &value, BPF_ANY);
}

SEC("?fentry/vfs_read")
int BPF_PROG(feat_fentry)
{
	mark(FEAT_FENTRY, 1);
	return 0;
}

SEC("?fexit/vfs_read")
int BPF_PROG(feat_fexit)
{
	mark(FEAT_FEXIT, 1);
	return 0;
}

SEC("?kprobe/vfs_read")
int BPF_KPROBE(feat_kprobe)
{
	mark(FEAT_KPROBE, 1);
	return 0;
}

SEC("?tp_btf/sys_enter")
int BPF_PROG(feat_tp_btf, struct pt_regs *regs, long id)
{
	mark(FEAT_TP_BTF, 1);
	return 0;
}

/* tracepoint (perf-event link): the oldest attach type that takes a cookie */
SEC("?tracepoint/syscalls/sys_enter_getpid")
int feat_cookie(void *ctx)
{
	mark(FEAT_COOKIE, bpf_get_attach_cookie(ctx));
	return 0;
}
