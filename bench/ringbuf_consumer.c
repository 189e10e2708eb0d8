// SPDX-License-Identifier: GPL-2.0
/*
 * ringbuf_consumer.c - the reference consumer for bench/ringbuf.py: libbpf's
 * own ring_buffer__poll() with a callback that only counts (the limit any
 * consumer can reach on this producer).  Compiled by the bench with
 * gcc -O2 ... -lbpf.
 *
 * usage: ringbuf_consumer RING_FD BSS_FD BSS_SIZE DROPPED_OFFSET EXPECTED
 *
 * The fds are inherited from the bench, which loaded and attached the
 * producer.  Prints "ready", waits until the bench has started the producer,
 * and polls until consumed + dropped (pycore_dropped in .bss) reaches
 * EXPECTED.  Prints "CONSUMED LAST" where LAST is the CLOCK_MONOTONIC time
 * (seconds) at which the last events were consumed; the bench, on the same
 * clock, measures from the moment it started the producer.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t count;
static struct timespec last;

static int on_event(void *ctx, void *data, size_t size)
{
	count++;
	return 0;
}

static uint64_t dropped(int bss_fd, size_t bss_size, size_t off)
{
	static char buf[1 << 16];
	uint32_t key = 0;
	uint64_t v = 0;

	if (bss_size > sizeof(buf) || bpf_map_lookup_elem(bss_fd, &key, buf))
		return 0;
	memcpy(&v, buf + off, sizeof(v));
	return v;
}

int main(int argc, char **argv)
{
	struct ring_buffer *rb;
	int ring_fd, bss_fd;
	size_t bss_size, off;
	uint64_t expected, lost = 0;
	int err;

	if (argc != 6) {
		fprintf(stderr, "usage: %s RING_FD BSS_FD BSS_SIZE DROPPED_OFFSET EXPECTED\n", argv[0]);
		return 2;
	}
	ring_fd = atoi(argv[1]);
	bss_fd = atoi(argv[2]);
	bss_size = strtoull(argv[3], NULL, 0);
	off = strtoull(argv[4], NULL, 0);
	expected = strtoull(argv[5], NULL, 0);

	rb = ring_buffer__new(ring_fd, on_event, NULL, NULL);
	if (!rb) {
		perror("ring_buffer__new");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (count + lost < expected) {
		err = ring_buffer__poll(rb, 100);
		if (err < 0) {
			fprintf(stderr, "ring_buffer__poll: %d\n", err);
			return 1;
		}
		if (err > 0)
			clock_gettime(CLOCK_MONOTONIC, &last);
		lost = dropped(bss_fd, bss_size, off);
	}
	printf("%llu %.9f\n", (unsigned long long)count, last.tv_sec + last.tv_nsec / 1e9);
	ring_buffer__free(rb);
	return 0;
}
