// SPDX-License-Identifier: GPL-2.0
/*
 * bench_ringbuf.bpf.c - ring buffer producer for bench/ringbuf.py.
 *
 * On every getpid() by the process whose tgid is target_tgid, the
 * tp_btf/sys_enter program emits events_per_call (1..256) 32-byte
 * struct bench_event records into `events` through pycore_reserve(), so the
 * load is a plain loop of getpid() calls in user space and every consumer
 * under test sees the same records. Failed reservations are counted in
 * pycore_dropped (see pycore.bpf.h). Size the ring with the map's
 * max_entries before load.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#ifndef __NR_getpid
#if defined(__TARGET_ARCH_arm64) || defined(__TARGET_ARCH_riscv)
#define __NR_getpid 172
#else
#define __NR_getpid 39		/* x86_64 */
#endif
#endif

#define BENCH_MAX_PER_CALL 256

struct bench_event {
	__u64 seq;		/* global sequence number, from 0 */
	__u64 ts;		/* bpf_ktime_get_ns() of the syscall */
	__u32 pid;		/* thread id */
	__u32 cpu;
	__u64 value;		/* index within the syscall's burst */
};

/* set before load */
const volatile __u32 target_tgid = 0;
const volatile __u32 events_per_call = 8;

/* next sequence number; also the number of events attempted */
__u64 bench_seq SEC(".bss");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct bench_event);

/* Force BTF for the event type so user space can decode it from the object. */
struct bench_event _bench_event_btf = {};

struct burst {
	__u64 seq;
	__u64 ts;
	__u32 pid;
	__u32 cpu;
};

static long emit_one(__u32 i, void *ctx)
{
	struct burst *b = ctx;
	struct bench_event *e;

	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;	/* lost, counted; keep going so the count is exact */
	e->seq = b->seq + i;
	e->ts = b->ts;
	e->pid = b->pid;
	e->cpu = b->cpu;
	e->value = i;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(bench_sys_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct burst b;
	__u32 n = events_per_call;

	if (id != __NR_getpid || target_tgid == 0 || (pid_tgid >> 32) != target_tgid)
		return 0;
	if (n > BENCH_MAX_PER_CALL)
		n = BENCH_MAX_PER_CALL;
	b.seq = __sync_fetch_and_add(&bench_seq, n);
	b.ts = bpf_ktime_get_ns();
	b.pid = (__u32)pid_tgid;
	b.cpu = bpf_get_smp_processor_id();
	bpf_loop(n, emit_one, &b, 0);
	return 0;
}
