"""Per-program run counts and run time, as the kernel keeps them (``bpftool prog`` shows the same).

The kernel counts only while someone asks: ``bpf_enable_stats(BPF_STATS_RUN_TIME)``
returns an fd, and statistics stay on for every program while it is open
(or while the ``kernel.bpf_stats_enabled`` sysctl is 1).  Counting costs a
few ns per program run, so :class:`RunTimeStats` is opened by whoever
exports the figures (``pycore serve``) and closed with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pycore.errors import BpfError
from pycore.native.libbpf import ffi, lib

__all__ = ["ProgStats", "RunTimeStats", "prog_stats"]

BPF_STATS_RUN_TIME = 0


@dataclass(frozen=True)
class ProgStats:
    id: int
    name: str
    run_cnt: int
    run_time_ns: int
    recursion_misses: int


def prog_stats(prog_fd: int) -> ProgStats:
    """The counters of the program behind ``prog_fd`` (``bpf_obj_get_info_by_fd``)."""
    info = ffi.new("struct bpf_prog_info *")
    size = ffi.new("__u32 *", ffi.sizeof("struct bpf_prog_info"))
    ret = lib.bpf_obj_get_info_by_fd(prog_fd, info, size)
    if ret < 0:
        raise BpfError(f"bpf_obj_get_info_by_fd({prog_fd})", -ret)
    return ProgStats(info.id, ffi.string(info.name).decode(errors="replace"), info.run_cnt,
                     info.run_time_ns, info.recursion_misses)


class RunTimeStats:
    """Statistics on while this is open (``with RunTimeStats(): ...``)."""

    _fd = -1  # close() and __del__ of one whose __init__ raised

    def __init__(self) -> None:
        fd = lib.bpf_enable_stats(BPF_STATS_RUN_TIME)
        if fd < 0:
            raise BpfError("bpf_enable_stats(BPF_STATS_RUN_TIME)", -fd,
                           hint="needs CAP_SYS_ADMIN and Linux >= 5.8")
        self._fd = fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RunTimeStats:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
