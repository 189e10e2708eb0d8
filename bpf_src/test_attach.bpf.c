// SPDX-License-Identifier: GPL-2.0
/*
 * test_attach.bpf.c - programs for tests/test_attach.py, one per attach type.
 *
 * Every program counts its hits per process in `counts` (key: tgid and
 * source), so a test triggers events from its own process (or a child it
 * started) and checks exact numbers.  Syscall programs count getpid only.
 *
 * Sections with a "?" prefix do not load unless a test enables them:
 * fentry/fexit (refused on the sandboxed host, EPERM), kprobe (absent there)
 * pat_fentry_missing (its target does not exist) and pat_oob, which the
 * verifier must reject (out-of-bounds map read).
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#if defined(__TARGET_ARCH_arm64)
#define NR_GETPID 172
#else
#define NR_GETPID 39	/* x86_64 */
#endif

enum attach_source {
	SRC_TP_BTF = 1,
	SRC_TRACEPOINT = 2,
	SRC_RAW_TP = 3,
	SRC_UPROBE = 4,
	SRC_URETPROBE = 5,
	SRC_URETPROBE_SUM = 6,	/* sum of the probed function's return values */
	SRC_FENTRY = 7,
	SRC_FEXIT = 8,
	SRC_KPROBE = 9,
};

struct count_key {
	__u32 tgid;
	__u32 source;		/* enum attach_source */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct count_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} oob_array SEC(".maps");

static __always_inline void add(__u32 source, __u64 n)
{
	struct count_key key = {
		.tgid = bpf_get_current_pid_tgid() >> 32,
		.source = source,
	};
	__u64 *value = bpf_map_lookup_elem(&counts, &key);

	if (!value) {
		if (bpf_map_update_elem(&counts, &key, &n, BPF_NOEXIST) == 0)
			return;
		value = bpf_map_lookup_elem(&counts, &key);	/* lost a race */
		if (!value)
			return;
	}
	__sync_fetch_and_add(value, n);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(pat_tp_btf, struct pt_regs *regs, long id)
{
	if (id == NR_GETPID)
		add(SRC_TP_BTF, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int pat_tracepoint(void *ctx)
{
	add(SRC_TRACEPOINT, 1);
	return 0;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(pat_raw_tp, struct pt_regs *regs, long id)
{
	if (id == NR_GETPID)
		add(SRC_RAW_TP, 1);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(pat_uprobe, int x)
{
	add(SRC_UPROBE, 1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(pat_uretprobe, int ret)
{
	add(SRC_URETPROBE, 1);
	add(SRC_URETPROBE_SUM, ret);
	return 0;
}

SEC("?fentry/vfs_read")
int BPF_PROG(pat_fentry)
{
	add(SRC_FENTRY, 1);
	return 0;
}

SEC("?fexit/vfs_read")
int BPF_PROG(pat_fexit)
{
	add(SRC_FEXIT, 1);
	return 0;
}

/* fentry on a function no kernel has: libbpf fails to find it in the BTF at load */
SEC("?fentry/pycore_no_such_function")
int BPF_PROG(pat_fentry_missing)
{
	return 0;
}

SEC("?kprobe/vfs_read")
int BPF_KPROBE(pat_kprobe)
{
	add(SRC_KPROBE, 1);
	return 0;
}

/* Reads 8 bytes at offset 64 of an 8-byte map value: the verifier says no. */
SEC("?tp_btf/sys_enter")
int BPF_PROG(pat_oob)
{
	__u32 zero = 0;
	__u64 *value = bpf_map_lookup_elem(&oob_array, &zero);

	if (!value)
		return 0;
	return *(volatile __u64 *)((char *)value + 64) != 0;
}
