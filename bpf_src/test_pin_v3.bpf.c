// SPDX-License-Identifier: GPL-2.0
/*
 * test_pin_v3.bpf.c - an incompatible version of the agent in
 * tests/test_pins.py: struct pin_stats gained a field, so the `stats` map
 * pinned by versions 1 and 2 (16-byte values) cannot be reused and loading
 * with their pin_dir must be refused, naming the map and the field.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct pin_stats {
	__u64 calls;
	__u64 last_ns;
	__u64 bytes;
};

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct pin_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int count_getpid(void *ctx)
{
	__u32 key = 0;
	struct pin_stats *s;

	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&stats, &key);
	if (s) {
		__sync_fetch_and_add(&s->calls, 1);
		s->bytes += 1;
	}
	return 0;
}
