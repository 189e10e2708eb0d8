/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pycore.bpf.h - shared header for pycore's BPF programs.
 *
 * Every bpf_src/NAME.bpf.c includes this first, and so can an agent's own
 * programs (`pycore build`, pycore_add_bpf_object(): installed as
 * pycore/include/pycore.bpf.h). It pulls in the kernel types (vmlinux.h:
 * bpf_src/vmlinux.h for pycore's own objects, else one written from the
 * kernel's BTF) and libbpf's helper headers (Debian's libbpf-dev,
 * /usr/include/bpf), and defines the project's lost-event convention.
 *
 * Lost events
 * -----------
 * Programs must not call bpf_ringbuf_reserve() directly; they call
 * pycore_reserve(&ringbuf_map, size) instead. When the ring buffer is full
 * the reservation fails and the global counter `pycore_dropped` (in the
 * object's .bss map) is incremented atomically. User space reads it from the
 * .bss map to report how many events were lost. The counter is a single
 * shared __u64 updated with an atomic add, so it is exact across CPUs.
 */
#ifndef PYCORE_BPF_H
#define PYCORE_BPF_H

/* <>, not "": the vmlinux.h the build chose (-I), never one that happens to sit beside this file */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#ifndef TASK_COMM_LEN
#define TASK_COMM_LEN 16
#endif

/* Number of ring-buffer reservations that failed (events lost). Weak, so that
 * several sources including this header link into one object (pycore build
 * a.bpf.c b.bpf.c: bpftool gen object) and share one counter. */
__u64 pycore_dropped SEC(".bss") __weak;

/*
 * Reserve `size` bytes in `ringbuf` (a BPF_MAP_TYPE_RINGBUF map). Returns the
 * sample, to be finished with bpf_ringbuf_submit()/bpf_ringbuf_discard(), or
 * NULL after counting the loss in pycore_dropped.
 */
static __always_inline void *pycore_reserve(void *ringbuf, __u64 size)
{
	void *sample = bpf_ringbuf_reserve(ringbuf, size, 0);

	if (!sample)
		__sync_fetch_and_add(&pycore_dropped, 1);
	return sample;
}

/*
 * Which struct a ring buffer carries, for typed skeletons (`pycore skel`):
 *
 *	struct { __uint(type, BPF_MAP_TYPE_RINGBUF); ... } events SEC(".maps");
 *	PYCORE_RING_EVENT(events, struct exec_event);
 *
 * Ring buffer maps have no value type, so this leaves one in the object's
 * BTF: a pointer variable __pycore_ring_event__MAP of the event's type, in a
 * section of its own (.pycore.ring) that libbpf skips (no map, no global);
 * weak, so that several linked sources may say it. `pycore skel` reads it
 * (`--ring MAP=STRUCT` on its command line overrides it).
 */
#define PYCORE_RING_EVENT(map, type) \
	type *__pycore_ring_event__##map SEC(".pycore.ring") __attribute__((weak, unused))

#endif /* PYCORE_BPF_H */
