"""OpenMetrics/Prometheus families for running tools (``prometheus_client`` collector).

Everything is read when scraped, not pushed: event and loss counters kept
by the consumers, each program's run count and run time from the kernel
(:mod:`pycore.native.progstats`, needs statistics on), and the tools' own
aggregations read live from their maps (lock-contention's log2 histogram
becomes a Prometheus histogram, fd-leak's table a gauge, net-drops' counts
a counter).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from pycore.native.progstats import prog_stats
from pycore.embed.session import ToolSession

__all__ = ["ToolCollector", "TOOL_METRICS"]


class ToolCollector(Collector):
    """pycore_* families for a set of :class:`ToolSession`; :meth:`count` is called by consumers."""

    def __init__(self, sessions: list[ToolSession]) -> None:
        self.sessions = sessions
        self._events = {s.name: 0 for s in sessions}
        self._lock = threading.Lock()

    def count(self, tool: str, n: int = 1) -> None:
        with self._lock:
            self._events[tool] += n

    def collect(self) -> Iterator[Any]:
        events = CounterMetricFamily("pycore_events", "events received from the tool's ring buffer",
                                     labels=["tool"])
        lost = CounterMetricFamily("pycore_lost_events", "events dropped because the ring buffer was full",
                                   labels=["tool"])
        runs = CounterMetricFamily("pycore_prog_runs", "times the kernel ran the BPF program (BPF stats)",
                                   labels=["tool", "program"])
        secs = CounterMetricFamily("pycore_prog_run_time_seconds", "time spent in the BPF program (BPF stats)",
                                   labels=["tool", "program"])
        with self._lock:
            counted = dict(self._events)
        extra: list[Any] = []
        for s in self.sessions:
            if s.closed:
                continue
            if s.has_events:
                events.add_metric([s.name], counted[s.name])
                lost.add_metric([s.name], s.lost)
            for name in s.method.programs:
                st = prog_stats(s.obj.programs[name].fd)
                runs.add_metric([s.name, name], st.run_cnt)
                secs.add_metric([s.name, name], st.run_time_ns / 1e9)
            hook = TOOL_METRICS.get(s.name)
            if hook is not None:
                extra.extend(hook(s))
        yield from (events, lost, runs, secs, *extra)


def _lock_contention(s: ToolSession) -> list[Any]:
    """The log2 histogram of long blocks (all locks together), bucket bounds in seconds."""
    h = HistogramMetricFamily("pycore_lock_contention_block_seconds",
                              "time threads blocked on contended kernel locks (blocks over --threshold)",
                              labels=["tool"])
    slots: dict[int, int] = {}
    for hist in s.tool.histograms(s.obj).values():
        for slot, n in hist.items():
            slots[slot] = slots.get(slot, 0) + n
    buckets, total = [], 0
    for slot in sorted(slots):
        total += slots[slot]
        upper = 0 if slot < 2 else 1 << (slot - 1)   # slot s >= 2 holds [2^(s-2), 2^(s-1)) ns
        buckets.append((repr(upper / 1e9), total))
    buckets.append(("+Inf", total))
    h.add_metric(["lock-contention"], buckets, None)
    return [h]


def _fd_leak(s: ToolSession) -> list[Any]:
    g = GaugeMetricFamily("pycore_fd_leak_open_descriptors",
                          "descriptors opened during the run and not closed, per process", labels=["pid", "comm"])
    per: dict[tuple[str, str], int] = {}
    for row in s.tool.leaks(s.obj):
        key = (str(row["pid"]), row["comm"])
        per[key] = per.get(key, 0) + 1
    for (pid, comm), n in sorted(per.items()):
        g.add_metric([pid, comm], n)
    return [g]


def _net_drops(s: ToolSession) -> list[Any]:
    c = CounterMetricFamily("pycore_net_drops", "packets the kernel dropped, per network namespace, "
                            "interface and drop reason", labels=["netns", "interface", "reason"])
    per: dict[tuple[str, str, str], int] = {}
    for row in s.tool.counts(s.obj):
        key = (row["netns_name"], row["interface"], row["reason"])
        per[key] = per.get(key, 0) + row["count"]
    for labels, n in sorted(per.items()):
        c.add_metric(list(labels), n)
    return [c]


#: tool name -> its own families, read from its maps at scrape time
TOOL_METRICS: dict[str, Callable[[ToolSession], list[Any]]] = {
    "lock-contention": _lock_contention,
    "fd-leak": _fd_leak,
    "net-drops": _net_drops,
}
