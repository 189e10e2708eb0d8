// SPDX-License-Identifier: GPL-2.0
/*
 * vm_smoke.bpf.c - the smallest proof that a kernel runs fexit and kprobe
 * programs (tests/test_kernel_smoke.py, in the QEMU VM of tests/vm/).
 *
 * Both programs count calls per process into `hits` (key: tgid), so a test
 * reads its own row with one lookup and needs no configuration before load.
 * - fexit/fget: BPF trampolines (refused by the host kernel, see KERNEL-LAB.md)
 * - kprobe/vfs_read: needs CONFIG_KPROBES (absent on the host kernel)
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct vm_smoke_hits {
	__u64 fget;		/* fexit/fget calls */
	__u64 vfs_read;		/* kprobe/vfs_read calls */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);	/* tgid */
	__type(value, struct vm_smoke_hits);
} hits SEC(".maps");

static __always_inline struct vm_smoke_hits *my_hits(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct vm_smoke_hits zero = {}, *h;

	h = bpf_map_lookup_elem(&hits, &tgid);
	if (h)
		return h;
	bpf_map_update_elem(&hits, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&hits, &tgid);
}

SEC("fexit/fget")
int BPF_PROG(vm_smoke_fexit_fget, unsigned int fd, struct file *ret)
{
	struct vm_smoke_hits *h = my_hits();

	if (h)
		__sync_fetch_and_add(&h->fget, 1);
	return 0;
}

SEC("kprobe/vfs_read")
int BPF_KPROBE(vm_smoke_kprobe_vfs_read)
{
	struct vm_smoke_hits *h = my_hits();

	if (h)
		__sync_fetch_and_add(&h->vfs_read, 1);
	return 0;
}
