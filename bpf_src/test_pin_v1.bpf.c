// SPDX-License-Identifier: GPL-2.0
/*
 * test_pin_v1.bpf.c - version 1 of the agent in tests/test_pins.py (state
 * across upgrades): counts getpid() calls of the process target_tgid.
 *
 * stats[0].calls: getpid calls; `stats` is declared LIBBPF_PIN_BY_NAME, so it
 * is pinned whenever the agent gives a pin_dir.  by_tid (calls per thread)
 * is pinned only when the agent names it (pin_maps).  Version 2
 * (test_pin_v2.bpf.c) keeps both layouts and changes the logic; version 3
 * (test_pin_v3.bpf.c) adds a field to struct pin_stats and must be refused.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct pin_stats {
	__u64 calls;
	__u64 last_ns;		/* version 2 sets it; version 1 leaves it 0 */
};

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct pin_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} by_tid SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int count_getpid(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 key = 0, tid = (__u32)id;
	__u64 one = 1, *n;
	struct pin_stats *s;

	if ((id >> 32) != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&stats, &key);
	if (s)
		__sync_fetch_and_add(&s->calls, 1);
	n = bpf_map_lookup_elem(&by_tid, &tid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&by_tid, &tid, &one, BPF_NOEXIST);
	return 0;
}
