// SPDX-License-Identifier: GPL-2.0
/*
 * pg-queries: PostgreSQL's postgresql:query__start(query) / query__done(query)
 * probes (like bcc's dbslower): the start time is kept per backend thread,
 * and queries slower than min_ns are sent with their text and latency.
 */
#include "tools/tools.bpf.h"
#include "pycore_usdt.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define QUERY_LEN 256

const volatile __u64 min_ns = 0;

struct pg_query_event {
	__u32 pid;
	__u32 pad;
	__u64 start_ns;
	__u64 latency_ns;
	char query[QUERY_LEN];
};

PYCORE_EVENT(pg_query_event);

struct start {
	__u64 ts;
	__u64 query;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct pg_query_event);

SEC("uprobe")
int query_start(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start s = { .ts = bpf_ktime_get_ns() };
	long q = 0;

	if (pycore_filtered())
		return 0;
	pycore_usdt_arg(ctx, 0, &q);
	s.query = q;
	bpf_map_update_elem(&starts, &id, &s, BPF_ANY);
	return 0;
}

SEC("uprobe")
int query_done(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start *s = bpf_map_lookup_elem(&starts, &id);
	struct pg_query_event *e;
	__u64 now = bpf_ktime_get_ns(), lat;

	if (!s)
		return 0;
	lat = now - s->ts;
	if (lat < min_ns)
		goto out;
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		goto out;
	e->pid = id >> 32;
	e->pad = 0;
	e->start_ns = s->ts;
	e->latency_ns = lat;
	bpf_probe_read_user_str(e->query, sizeof(e->query), (void *)s->query);
	bpf_ringbuf_submit(e, 0);
out:
	bpf_map_delete_elem(&starts, &id);
	return 0;
}
