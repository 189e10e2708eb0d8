"""The Link every attach function returns, and the small kernel facts attaching needs.

A :class:`Link` owns file descriptors: bpf_link fds (closing one detaches
the program) and perf event fds (closing one ends the event, and with it an
attachment made by ioctl).  It closes them on :meth:`Link.close`, at the end
of a ``with`` block, or when garbage-collected, bpf links first.

The readers here (tracefs, PMU types, CPU lists) are a few lines each on
purpose: this layer sits below :mod:`pycore.kernel`.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable

from pycore.errors import BpfError, Closed, FeatureMissing

__all__ = ["Link", "prog_fd_name", "tracefs_events", "pmu_type", "pmu_format_bit", "online_cpus", "parse_cpu_list",
           "TRACEFS_ROOTS", "EVENT_SOURCE"]

TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
EVENT_SOURCE = "/sys/bus/event_source/devices"


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class Link:
    """One attachment of a program (possibly several events, e.g. one per CPU); detached by :meth:`close`."""

    def __init__(self, kind: str, target: str, prog_name: str, *, link_fds: Iterable[int] = (),
                 perf_fds: Iterable[int] = ()) -> None:
        self.kind = kind                    #: tracepoint, raw_tracepoint, kprobe, uprobe, perf, tracing, ...
        self.target = target                #: what it is attached to, as the user would name it
        self.prog_name = prog_name
        self.link_fds = tuple(link_fds)     #: bpf_link fds (empty when attached by PERF_EVENT_IOC_SET_BPF)
        self.perf_fds = tuple(perf_fds)     #: perf event fds
        self._finalizer = weakref.finalize(self, _close_all, self.link_fds + self.perf_fds)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    @property
    def fds(self) -> tuple[int, ...]:
        return self.link_fds + self.perf_fds

    def close(self) -> None:
        """Detach: close the bpf links, then the perf events; safe twice."""
        self._finalizer()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def link_ids(self) -> list[int]:
        """The kernel's ids of our bpf_links (what ``bpftool link show`` lists)."""
        from pycore.native import libbpf as L

        if self.closed:
            raise Closed(f"link {self.kind} {self.target}")

        ids = []
        for fd in self.link_fds:
            info = L.ffi.new("struct bpf_link_info *")
            size = L.ffi.new("__u32 *", L.ffi.sizeof("struct bpf_link_info"))
            ret = L.lib.bpf_obj_get_info_by_fd(fd, info, size)
            if ret < 0:
                raise BpfError(f"{self.describe()}: get link info", -ret)
            ids.append(int(info.id))
        return ids

    def describe(self) -> str:
        """One line: what is attached to what, and how."""
        how = []
        if self.link_fds:
            how.append(f"{len(self.link_fds)} bpf_link" + ("s" if len(self.link_fds) > 1 else ""))
        if self.perf_fds:
            how.append(f"{len(self.perf_fds)} perf event" + ("s" if len(self.perf_fds) > 1 else ""))
        state = ", closed" if self.closed else ""
        return f"{self.kind} {self.target} <- program {self.prog_name} ({', '.join(how) or 'no fds'}{state})"

    def __repr__(self) -> str:
        return f"<Link {self.describe()}>"


def prog_fd_name(prog: object) -> tuple[int, str]:
    """(fd, name) of a program: a LoadedProgram, anything with ``.fd`` (and ``.name``), or an fd."""
    if isinstance(prog, int):
        return prog, f"fd {prog}"
    fd = getattr(prog, "fd", None)
    if not isinstance(fd, int):
        raise TypeError(f"not a loaded program: {prog!r}")
    return fd, str(getattr(prog, "name", f"fd {fd}"))


def tracefs_events(root: str | None = None) -> str:
    """The ``events`` directory of a mounted tracefs (given, or the first of :data:`TRACEFS_ROOTS`)."""
    for r in (root,) if root else TRACEFS_ROOTS:
        events = os.path.join(r, "events")
        try:
            if os.path.isdir(events):
                return events
        except OSError:
            pass
    where = root or " or ".join(TRACEFS_ROOTS)
    raise BpfError(f"find tracefs at {where}", 2,
                   hint="tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing")


def pmu_type(pmu: str, feature: str, advice: str) -> int:
    """The perf ``type`` of a dynamic PMU (kprobe, uprobe), or FeatureMissing naming ``feature``."""
    path = os.path.join(EVENT_SOURCE, pmu, "type")
    try:
        with open(path) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        raise FeatureMissing(feature, f"there is no {pmu} PMU ({os.path.dirname(path)} is absent); {advice}") from None
    except (OSError, ValueError) as exc:
        raise BpfError(f"read {path}", getattr(exc, "errno", None) or 22) from None


def pmu_format_bit(pmu: str, name: str) -> int:
    """The config bit a PMU's ``format/NAME`` file names (``config:0`` for kprobe's retprobe)."""
    path = os.path.join(EVENT_SOURCE, pmu, "format", name)
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError as exc:
        raise BpfError(f"read {path}", exc.errno or 2) from None
    field, _, bits = text.partition(":")
    if field != "config" or not bits.split("-")[0].isdigit():
        raise BpfError(f"read {path}", 22, hint=f"unexpected format {text!r}")
    return int(bits.split("-")[0])


def parse_cpu_list(text: str) -> list[int]:
    """``0-3,5`` -> [0, 1, 2, 3, 5] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def online_cpus() -> list[int]:
    """The CPUs online now (/sys/devices/system/cpu/online)."""
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpu_list(f.read())
