// SPDX-License-Identifier: GPL-2.0
/*
 * test_ringbuf.bpf.c - events for tests/test_ringbuf.py.
 *
 * On every getpid() by target_tgid (tracepoint syscalls/sys_enter_getpid),
 * emits one struct ringbuf_test_event (nested struct, char array, enum) into
 * `events`. Every discard_every-th event (0 = never) is reserved, filled and
 * then discarded, so the consumer has to skip it. Losses are counted in
 * pycore_dropped (pycore.bpf.h).
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum ringbuf_test_kind {
	RB_TEST_KEPT = 1,
	RB_TEST_DISCARDED = 2,
};

struct ringbuf_test_ids {
	__u32 pid;
	__u32 tgid;
};

struct ringbuf_test_event {
	__u64 seq;			/* 0, 1, 2 ... per attempted event */
	struct ringbuf_test_ids ids;
	char comm[TASK_COMM_LEN];
	enum ringbuf_test_kind kind;
	__s32 neg;			/* -seq, to check signedness */
};

const volatile __u32 target_tgid = 0;
const volatile __u32 discard_every = 0;

__u64 test_seq SEC(".bss");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct ringbuf_test_event);

struct ringbuf_test_event _ringbuf_test_event_btf = {};

SEC("tracepoint/syscalls/sys_enter_getpid")
int test_ringbuf_getpid(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ringbuf_test_event *e;
	__u64 seq;

	if (target_tgid == 0 || (pid_tgid >> 32) != target_tgid)
		return 0;
	seq = __sync_fetch_and_add(&test_seq, 1);
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->seq = seq;
	e->ids.pid = (__u32)pid_tgid;
	e->ids.tgid = pid_tgid >> 32;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->neg = -(__s32)seq;
	if (discard_every && seq % discard_every == discard_every - 1) {
		e->kind = RB_TEST_DISCARDED;
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	e->kind = RB_TEST_KEPT;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
