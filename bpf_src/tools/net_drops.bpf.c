// SPDX-License-Identifier: GPL-2.0
/*
 * net-drops: packets the kernel drops, per (network namespace, interface,
 * drop reason), from the skb:kfree_skb tracepoint.  pycore/tools/net_drops.py
 * names interfaces and namespaces (pycore/netctx.py) and reasons (the
 * running kernel's enum skb_drop_reason).
 *
 * One object for every kernel: kfree_skb gained its `reason` argument in
 * 5.17 together with enum skb_drop_reason, so the argument is read only
 * where the enum exists (otherwise 0, reported as NOT_SPECIFIED); 6.12
 * appended `rx_sk`, which is not needed.  Freeing a packet that was used
 * (SKB_CONSUMED, where the enum has it) is not a drop and is skipped.
 *
 * The interface is skb->dev; without one, skb->skb_iif (the interface the
 * packet came in on) and the namespace of its socket.  Counts go to
 * `drops`; with emit_events, each drop is also a ring-buffer event.
 */
#include "tools/tools.bpf.h"
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 targ_netns = 0;	/* netns inode, 0: every namespace */
const volatile __u32 targ_ifindex = 0;	/* 0: every interface (of targ_netns) */
const volatile bool emit_events = true;

struct drop_key {
	__u32 netns;
	__u32 ifindex;
	__u32 reason;
	__u32 pad;
};

struct net_drops_event {
	__u64 ts;
	__u64 location;		/* kernel address that freed the packet */
	__u32 pid;
	__u32 tid;
	__u32 netns;
	__u32 ifindex;
	__u32 reason;
	__u16 protocol;		/* host order: 0x0800 IPv4, 0x86dd IPv6 */
	__u16 pad;
	char comm[TASK_COMM_LEN];
};

PYCORE_EVENT(net_drops_event);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct drop_key);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct net_drops_event);

static __always_inline __u32 netns_of(struct net *net)
{
	return net ? BPF_CORE_READ(net, ns.inum) : 0;
}

static __always_inline int record(struct sk_buff *skb, void *location, __u32 reason)
{
	struct drop_key key = { .reason = reason };
	struct net_drops_event *ev;
	struct net_device *dev;
	__u64 one = 1, *count, id;
	struct sock *sk;

	if (bpf_core_enum_value_exists(enum skb_drop_reason, SKB_CONSUMED) &&
	    reason == bpf_core_enum_value(enum skb_drop_reason, SKB_CONSUMED))
		return 0;
	if (pycore_filtered())
		return 0;
	/* skb->dev shares a union with dev_scratch (UDP's queued skbs): only a
	 * kernel address (negative on x86-64) is a device */
	dev = BPF_CORE_READ(skb, dev);
	if (dev && (long)dev < 0) {
		key.ifindex = BPF_CORE_READ(dev, ifindex);
		key.netns = netns_of(BPF_CORE_READ(dev, nd_net.net));
	} else {
		key.ifindex = BPF_CORE_READ(skb, skb_iif);
		sk = BPF_CORE_READ(skb, sk);
		if (sk)
			key.netns = netns_of(BPF_CORE_READ(sk, __sk_common.skc_net.net));
	}
	if (targ_netns && key.netns != targ_netns)
		return 0;
	if (targ_ifindex && key.ifindex != targ_ifindex)
		return 0;

	count = bpf_map_lookup_elem(&drops, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	else if (bpf_map_update_elem(&drops, &key, &one, BPF_NOEXIST))
		/* another CPU created it first */
		if ((count = bpf_map_lookup_elem(&drops, &key)))
			__sync_fetch_and_add(count, 1);

	if (!emit_events)
		return 0;
	ev = pycore_reserve(&events, sizeof(*ev));
	if (!ev)
		return 0;
	id = bpf_get_current_pid_tgid();
	ev->ts = bpf_ktime_get_ns();
	ev->location = (__u64)location;
	ev->pid = id >> 32;
	ev->tid = (__u32)id;
	ev->netns = key.netns;
	ev->ifindex = key.ifindex;
	ev->reason = reason;
	ev->protocol = bpf_ntohs(BPF_CORE_READ(skb, protocol));
	ev->pad = 0;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(tp_btf_kfree_skb, struct sk_buff *skb, void *location)
{
	__u32 reason = 0;

	/* the third argument exists where the enum does (Linux >= 5.17) */
	if (bpf_core_type_exists(enum skb_drop_reason))
		reason = (__u32)ctx[2];
	return record(skb, location, reason);
}

SEC("tracepoint/skb/kfree_skb")
int tp_kfree_skb(struct trace_event_raw_kfree_skb *ctx)
{
	__u32 reason = 0;

	if (bpf_core_field_exists(ctx->reason))
		reason = ctx->reason;
	return record((struct sk_buff *)ctx->skbaddr, ctx->location, reason);
}
