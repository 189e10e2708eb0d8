"""Sampling perf events: ``profile:``, ``interval:``, ``software:`` and ``hardware:`` probes.

As bpftrace does (src/attached_probe.cpp): ``profile:hz:N`` samples the
software cpu-clock N times a second on every online CPU; ``profile:ms:N``
every N ms of it; ``interval:ms:N`` uses the same clock with a period of N
ms on *one* CPU, so the probe fires once per interval, not once per CPU;
``software:EVENT:COUNT`` and ``hardware:EVENT:COUNT`` fire every COUNT
events on every CPU.  The program is BPF_PROG_TYPE_PERF_EVENT.  One
:class:`~pycore.link.base.Link` holds the events of every CPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pycore.errors import BpfError
from pycore.link.base import Link, online_cpus, prog_fd_name
from pycore.link.perf_event import (PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, PerfEventAttr,
                                    attach_bpf, perf_event_open)

__all__ = ["attach_perf", "attach_events", "attach_profile", "attach_interval", "attach_software", "attach_hardware",
           "period_ns"]

_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def period_ns(unit: str, n: int) -> int:
    """A ``profile``/``interval`` rate as nanoseconds between samples (``hz``: N per second)."""
    if n <= 0:
        raise ValueError(f"rate {unit}:{n}: must be positive")
    if unit == "hz":
        return max(1, 10**9 // n)
    try:
        return _UNIT_NS[unit] * n
    except KeyError:
        raise ValueError(f"unknown unit {unit!r} (hz, s, ms, us, ns)") from None


def attach_perf(prog: object, event_type: int, config: int, *, sample_period: int = 0, sample_freq: int = 0,
                cpus: Iterable[int] | None = None, pid: int = -1, kind: str = "perf", target: str = "") -> Link:
    """Run a perf_event program every ``sample_period`` events (or ``sample_freq`` times a second) on each CPU.

    ``cpus`` defaults to every online CPU; ``pid`` >= 0 counts only that process.
    """
    fd, prog_name = prog_fd_name(prog)
    if bool(sample_period) == bool(sample_freq):
        raise ValueError("attach_perf: give exactly one of sample_period and sample_freq")
    target = target or f"type {event_type} config {config}"
    attr = PerfEventAttr(event_type, config=config, sample_period=sample_freq or sample_period,
                         freq=bool(sample_freq))
    return attach_events(fd, prog_name, attr, online_cpus() if cpus is None else list(cpus), pid=pid,
                         kind=kind, target=target)


def attach_events(prog_fd: int, prog_name: str, attr: PerfEventAttr, cpus: Iterable[int], *, pid: int = -1,
                  kind: str, target: str) -> Link:
    """Open ``attr``'s event on each of ``cpus`` (-1: wherever ``pid`` runs) and run the program on its
    samples: one Link for them all, or nothing left open if one fails."""
    perf_fds: list[int] = []
    link_fds: list[int] = []
    try:
        for cpu in cpus:
            what = f"{kind} {target}" + (f" in process {pid}" if cpu < 0 else f" on cpu {cpu}") + \
                f" <- program {prog_name}"
            pfd = perf_event_open(attr, pid, cpu, what=what)
            perf_fds.append(pfd)
            link_fd = attach_bpf(prog_fd, pfd, what=what)
            if link_fd is not None:
                link_fds.append(link_fd)
    except BaseException:
        for f in link_fds + perf_fds:
            os.close(f)
        raise
    return Link(kind, target, prog_name, link_fds=link_fds, perf_fds=perf_fds)


def attach_profile(prog: object, rate: int, unit: str = "hz", *, pid: int = -1) -> Link:
    """``profile:UNIT:RATE``: sample every CPU's cpu-clock (``hz``: RATE times a second; else every RATE UNITs)."""
    target = f"profile:{unit}:{rate}"
    if unit == "hz":
        if rate <= 0:
            raise ValueError(f"{target}: rate must be positive")
        return attach_perf(prog, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, sample_freq=rate, pid=pid,
                           kind="profile", target=target)
    return attach_perf(prog, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, sample_period=period_ns(unit, rate),
                       pid=pid, kind="profile", target=target)


def attach_interval(prog: object, period: int, *, cpu: int | None = None) -> Link:
    """``interval:``: fire every ``period`` ns on one CPU (the first online one unless given)."""
    if period <= 0:
        raise ValueError(f"interval of {period} ns: must be positive")
    if cpu is None:
        cpus = online_cpus()
        if not cpus:
            raise BpfError("interval: find an online CPU", 19)
        cpu = cpus[0]
    return attach_perf(prog, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, sample_period=period, cpus=[cpu],
                       kind="interval", target=f"every {period} ns")


def attach_software(prog: object, config: int, count: int, *, pid: int = -1) -> Link:
    """``software:EVENT:COUNT``: every COUNT occurrences of software event ``config`` (PERF_COUNT_SW_*), every CPU."""
    return attach_perf(prog, PERF_TYPE_SOFTWARE, config, sample_period=count, pid=pid, kind="software",
                       target=f"config {config} every {count}")


def attach_hardware(prog: object, config: int, count: int, *, pid: int = -1) -> Link:
    """``hardware:EVENT:COUNT``: every COUNT hardware events ``config`` (PERF_COUNT_HW_*), every CPU."""
    return attach_perf(prog, PERF_TYPE_HARDWARE, config, sample_period=count, pid=pid, kind="hardware",
                       target=f"config {config} every {count}")
