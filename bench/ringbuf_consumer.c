// SPDX-License-Identifier: GPL-2.0
/*
 * ringbuf_consumer.c - the reference consumers for bench/ringbuf.py: libbpf's
 * own ring_buffer__poll() with a callback that
 *
 *   count   only counts (the limit any consumer can reach on this producer);
 *   decode  copies each record's fields into the next element of an array
 *           of struct bench_event, what RingBuffer.read_batch() hands back
 *           (a numpy structured array): the fair baseline for it.  The
 *           array holds EXPECTED records, allocated and touched before
 *           "ready", so page faults are not timed (read_batch's are);
 *   latency keeps, for each record, CLOCK_MONOTONIC now minus its ts (set by
 *           the program with bpf_ktime_get_ns(): the same clock), the wake-up
 *           latency from the BPF event to the callback (bench/wakeup.py), and
 *           prints a second line "P50_NS P99_NS".
 *
 * Compiled by the bench with gcc -O2 ... -lbpf.
 *
 * usage: ringbuf_consumer RING_FD BSS_FD BSS_SIZE DROPPED_OFFSET EXPECTED [count|decode|latency]
 *
 * The fds are inherited from the bench, which loaded and attached the
 * producer.  Prints "ready", waits for a line on stdin (the bench's go,
 * given once the ring is filled or the producer started), and polls until
 * consumed + dropped (pycore_dropped in .bss) reaches EXPECTED.  Prints
 * "CONSUMED START LAST CHECKSUM": START and LAST are the CLOCK_MONOTONIC
 * times (seconds) at which it began polling and last consumed events (the
 * bench times a drain from START, a live run from the moment it started the
 * producer, on the same clock) and CHECKSUM, in decode mode, the sum of the
 * decoded seq and value fields, read back from the array after the clock
 * stopped (0 when counting), which the bench checks against what the
 * producer wrote.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* bpf_src/bench_ringbuf.bpf.c's record */
struct bench_event {
	uint64_t seq;
	uint64_t ts;
	uint32_t pid;
	uint32_t cpu;
	uint64_t value;
};

static uint64_t count;
static struct timespec start, last;
static struct bench_event *events;	/* decode mode: EXPECTED of them */
static uint64_t capacity;

static int on_event(void *ctx, void *data, size_t size)
{
	count++;
	return 0;
}

static int on_event_decode(void *ctx, void *data, size_t size)
{
	const struct bench_event *e = data;
	struct bench_event *out;

	if (size < sizeof(*e) || count >= capacity)
		return -1;	/* not the bench's record, or more than announced: stop */
	out = &events[count++];
	out->seq = e->seq;
	out->ts = e->ts;
	out->pid = e->pid;
	out->cpu = e->cpu;
	out->value = e->value;
	return 0;
}

static uint64_t *latencies;	/* latency mode: EXPECTED of them, ns */

static int on_event_latency(void *ctx, void *data, size_t size)
{
	const struct bench_event *e = data;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (size < sizeof(*e) || count >= capacity)
		return -1;
	latencies[count++] = (uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec - e->ts;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
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
	uint64_t expected, lost = 0, checksum = 0, i;
	ring_buffer_sample_fn fn = on_event;
	int err;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: %s RING_FD BSS_FD BSS_SIZE DROPPED_OFFSET EXPECTED [count|decode]\n",
			argv[0]);
		return 2;
	}
	ring_fd = atoi(argv[1]);
	bss_fd = atoi(argv[2]);
	bss_size = strtoull(argv[3], NULL, 0);
	off = strtoull(argv[4], NULL, 0);
	expected = strtoull(argv[5], NULL, 0);
	if (argc == 7 && strcmp(argv[6], "decode") == 0) {
		capacity = expected;
		events = malloc(capacity * sizeof(*events) + 1);
		if (!events) {
			perror("malloc");
			return 1;
		}
		/* fault the pages in now (not 0: gcc would turn malloc+memset into a lazy calloc) */
		memset(events, 0xff, capacity * sizeof(*events));
		fn = on_event_decode;
	} else if (argc == 7 && strcmp(argv[6], "latency") == 0) {
		capacity = expected;
		latencies = calloc(capacity + 1, sizeof(*latencies));
		if (!latencies) {
			perror("calloc");
			return 1;
		}
		memset(latencies, 0xff, capacity * sizeof(*latencies));
		fn = on_event_latency;
	} else if (argc == 7 && strcmp(argv[6], "count") != 0) {
		fprintf(stderr, "%s: mode must be count or decode, not %s\n", argv[0], argv[6]);
		return 2;
	}

	rb = ring_buffer__new(ring_fd, fn, NULL, NULL);
	if (!rb) {
		perror("ring_buffer__new");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (!fgets((char[16]){0}, 16, stdin))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	last = start;
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
	for (i = 0; events && i < count; i++)
		checksum += events[i].seq + events[i].value;
	printf("%llu %.9f %.9f %llu\n", (unsigned long long)count, start.tv_sec + start.tv_nsec / 1e9,
	       last.tv_sec + last.tv_nsec / 1e9, (unsigned long long)checksum);
	if (latencies && count) {
		qsort(latencies, count, sizeof(*latencies), cmp_u64);
		printf("%llu %llu\n", (unsigned long long)latencies[count / 2],
		       (unsigned long long)latencies[count * 99 / 100]);
	}
	ring_buffer__free(rb);
	return 0;
}
