"""net-drops: packets the kernel drops, by network namespace, interface and
drop reason (what ``dropwatch`` or bcc's ``tcpdrop`` answer, for every
protocol, with the kernel's own reason).

Every drop goes through the ``skb:kfree_skb`` tracepoint with a reason from
``enum skb_drop_reason`` (Linux >= 5.17); the names are read from the
running kernel's BTF, without the ``SKB_DROP_REASON_`` prefix, as the
tracepoint's own output prints them (``NO_SOCKET``, ``NETFILTER_DROP``).
Interfaces are named inside their namespace over rtnetlink
(:mod:`pycore.kernel.netctx`), namespaces by their ``/run/netns`` name, ``host``
for ours, else by inode.  Events are printed as they come, and a table of
counts per (namespace, interface, reason) at the end::

    TIME     PID     COMM             NETNS        INTERFACE        PROTO REASON            LOCATION
    20:41:07 7150    python3          pycore-t-1   veth-b           IPv4  NO_SOCKET         __udp4_lib_rcv+0x5b3

``--netns`` and ``--interface`` filter in the kernel.  ``-p`` keeps drops
that happen while that process is the current task (softirq drops run in
whatever task was interrupted).
"""

from __future__ import annotations

import argparse
import struct
import time
import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, Tool

PREFIXES = ("SKB_DROP_REASON_", "SKB_")
# drop reasons of other subsystems carry the subsystem in the upper 16 bits
SUBSYS_SHIFT = 16
PROTOCOLS = {0x0800: "IPv4", 0x86DD: "IPv6", 0x0806: "ARP", 0x8100: "VLAN", 0x88CC: "LLDP", 0x0003: "ALL"}

_KEY = struct.Struct("<IIII")
_U64 = struct.Struct("<Q")


def drop_reason_names(spec: Any = None) -> dict[int, str]:
    """value -> name of the running kernel's ``enum skb_drop_reason`` ({} if it has none)."""
    from btf.kinds import Kind

    if spec is None:
        from btf.spec import load_kernel_spec

        spec = load_kernel_spec()
    names: dict[int, str] = {}
    ids = spec.ids_named("skb_drop_reason", (Kind.ENUM, Kind.ENUM64))
    for v in spec.type(ids[0]).values if ids else ():
        if v.name.endswith(("_MAX", "_SUBSYS_MASK")):
            continue
        name = v.name
        for p in PREFIXES:
            if name.startswith(p):
                name = name[len(p):]
                break
        names.setdefault(v.value, name)
    ids = spec.ids_named("skb_drop_reason_subsys", (Kind.ENUM, Kind.ENUM64))
    for v in spec.type(ids[0]).values if ids else ():
        if v.value and not v.name.endswith("_NUM"):
            names[-v.value] = v.name.removeprefix("SKB_DROP_REASON_SUBSYS_")  # subsystem names, negative
    return names


def reason_name(value: int, names: dict[int, str]) -> str:
    """The kernel's name for a drop reason; NOT_SPECIFIED where the kernel has no reasons."""
    if not names:
        return "NOT_SPECIFIED"
    if value in names:
        return names[value]
    sub = value >> SUBSYS_SHIFT
    if sub and -sub in names:
        return f"{names[-sub]}:{value & 0xFFFF}"
    return f"reason {value}"


def protocol_name(proto: int) -> str:
    return PROTOCOLS.get(proto, f"{proto:#06x}")


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """One dropped packet: one event (``struct net_drops_event``), as ``open_tool`` yields it."""

    ts: int = 0
    location: int = 0
    pid: int = 0
    tid: int = 0
    netns: int = 0
    ifindex: int = 0
    reason: int = 0
    protocol: int = 0
    pad: int = 0
    comm: str = ""


class NetDrops(Tool):
    name = "net-drops"
    description = "dropped packets by network namespace, interface and the kernel's drop reason"
    object = "net_drops"
    methods = (
        Method("tp_btf/kfree_skb", ("tp_btf_kfree_skb",), "tp_btf"),
        Method("tracepoint/skb/kfree_skb", ("tp_kfree_skb",), "tracepoint"),
    )
    event = "net_drops_event"
    event_type = Event

    options = (
        Option("netns", str, help="only this network namespace: a name in /run/netns, 'host', or an inode",
               metavar="NAME_OR_INODE"),
        Option("interface", str, help="only this interface (of --netns, or of ours)", metavar="NAME"),
        Option("no_events", bool, help="print only the summary table (no line per drop)"),
    )

    def __init__(self, args: argparse.Namespace, out: Any = None) -> None:
        super().__init__(args, out)
        self._net: Any = None
        self._closed = False
        self._reasons: dict[int, str] | None = None
        from pycore.kernel.kallsyms import TextSymbols

        self._symbols = TextSymbols()

    # -- context -----------------------------------------------------------------

    @property
    def net(self) -> Any:
        if self._net is None:
            from pycore.kernel.netctx import NetContext

            if self._closed:
                raise ValueError("net-drops: closed")
            self._net = NetContext()
        return self._net

    @property
    def reasons(self) -> dict[int, str]:
        if self._reasons is None:
            self._reasons = drop_reason_names()
        return self._reasons

    def configure(self, obj, method: Method) -> None:
        try:
            self._configure(obj)
        except BaseException:
            self.close()
            raise

    def _configure(self, obj) -> None:
        netns = 0
        if self.args.netns:
            netns = self.net.resolve_netns(self.args.netns)
            obj.globals["targ_netns"] = netns
        if self.args.interface:
            where = netns or self.net.own
            index = self.net.ifindex(where, self.args.interface)
            if index is None:
                raise ValueError(f"net-drops: no interface {self.args.interface!r} in network namespace "
                                 f"{self.net.netns_label(where)}")
            obj.globals["targ_netns"] = where
            obj.globals["targ_ifindex"] = index
        obj.globals["emit_events"] = not self.args.no_events
        self.reasons  # read BTF now, not at the first event

    def started(self, obj) -> None:
        if not self.args.json and not self.args.no_events:
            self.out.write(f"{'TIME':<8} {'PID':<7} {'COMM':<16} {'NETNS':<12} {'INTERFACE':<16} "
                           f"{'PROTO':<5} {'REASON':<24} LOCATION\n")
            self.out.flush()

    # -- events ------------------------------------------------------------------

    def format_event(self, ev: Any) -> str | None:
        return (f"{time.strftime('%H:%M:%S')} {ev.pid:<7} {ev.comm:<16} {self.net.netns_label(ev.netns):<12} "
                f"{self.net.label(ev.netns, ev.ifindex):<16} {protocol_name(ev.protocol):<5} "
                f"{reason_name(ev.reason, self.reasons):<24} {self._symbols(ev.location)}")

    def event_json(self, ev: Any) -> dict[str, Any] | None:
        return {"time": time.time(), "pid": ev.pid, "tid": ev.tid, "comm": ev.comm,
                "netns": ev.netns, "netns_name": self.net.netns_name(ev.netns),
                "ifindex": ev.ifindex, "interface": self.net.ifname(ev.netns, ev.ifindex),
                "protocol": protocol_name(ev.protocol), "reason": reason_name(ev.reason, self.reasons),
                "reason_code": ev.reason, "location": f"{ev.location:#x}"}

    # -- aggregation ---------------------------------------------------------------

    def counts(self, obj) -> list[dict[str, Any]]:
        """One row per (netns, interface, reason) seen, most drops first."""
        rows = []
        for k, v in obj.maps["drops"].items_raw():
            netns, ifindex, reason, _ = _KEY.unpack(k)
            rows.append({"netns": netns, "netns_name": self.net.netns_label(netns),
                         "ifindex": ifindex, "interface": self.net.label(netns, ifindex),
                         "reason": reason_name(reason, self.reasons), "count": _U64.unpack(v)[0]})
        rows.sort(key=lambda r: (-r["count"], r["netns"], r["ifindex"], r["reason"]))
        return rows

    def summary(self, obj) -> str:
        rows = self.counts(obj)
        if not rows:
            return "no packets dropped\n"
        lines = [f"{'NETNS':<12} {'INTERFACE':<16} {'REASON':<24} {'COUNT':>8}"]
        for r in rows:
            lines.append(f"{r['netns_name']:<12} {r['interface']:<16} {r['reason']:<24} {r['count']:>8}")
        return "\n" + "\n".join(lines) + "\n"

    def summary_json(self, obj) -> dict[str, Any]:
        return {"drops": self.counts(obj)}

    def close(self) -> None:
        """Close the netlink sockets (the Runner and sessions call it after detaching)."""
        self._closed = True
        if self._net is not None:
            self._net.close()
            self._net = None


TOOL = NetDrops
