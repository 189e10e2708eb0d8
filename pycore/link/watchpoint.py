"""Hardware watchpoints: ``watchpoint:ADDRESS:LENGTH:MODE`` probes.

A perf event of type PERF_TYPE_BREAKPOINT puts ADDRESS in a debug register;
the CPU traps when an instruction reads (``r``), writes (``w``) or executes
(``x``) LENGTH bytes there, and the BPF_PROG_TYPE_PERF_EVENT program runs
on each hit, as in bpftrace (src/attached_probe.cpp, attach_watchpoint).
With a pid the event follows that task on every CPU; without one it is
opened on every CPU for everyone (kernel addresses).
"""

from __future__ import annotations

from pycore.link.base import Link, online_cpus, prog_fd_name
from pycore.link.perf import attach_events
from pycore.link.perf_event import PERF_TYPE_BREAKPOINT, PerfEventAttr

__all__ = ["attach_watchpoint", "breakpoint_type", "LENGTHS"]

HW_BREAKPOINT_R, HW_BREAKPOINT_W, HW_BREAKPOINT_X = 1, 2, 4
LENGTHS = (1, 2, 4, 8)            # what x86's debug registers can watch


def breakpoint_type(mode: str) -> int:
    """``r``, ``w``, ``rw``, ``x`` as HW_BREAKPOINT_* bits; ValueError for anything else (the
    kernel refuses, at open, what the CPU cannot watch: execution together with data access)."""
    bits = {"r": HW_BREAKPOINT_R, "w": HW_BREAKPOINT_W, "x": HW_BREAKPOINT_X}
    if not mode or len(set(mode)) != len(mode) or any(c not in bits for c in mode):
        raise ValueError(f"mode {mode!r}: give r, w, x or a combination (rw)")
    out = 0
    for c in mode:
        out |= bits[c]
    return out


def attach_watchpoint(prog: object, address: int, length: int, bp_type: int, *, pid: int = -1) -> Link:
    """Run ``prog`` when ``length`` bytes at ``address`` are accessed as ``bp_type`` says."""
    fd, prog_name = prog_fd_name(prog)
    target = f"{address:#x}:{length}:{bp_type}"
    attr = PerfEventAttr(PERF_TYPE_BREAKPOINT, sample_period=1, config1=address, config2=length, bp_type=bp_type)
    cpus = [-1] if pid >= 0 else online_cpus()
    return attach_events(fd, prog_name, attr, cpus, pid=pid, kind="watchpoint", target=target)
