"""fd-leak: file descriptors opened during the run and never closed, per
process, with the file's name and age (the kernel lab's "is kprobeme leaking
file descriptors?" question).  With ``-c`` the report covers what the
command left open when it exited; with ``-p``, or for every process, what is
still open when the run ends.  Opens are the syscalls returning a new fd
(open*, creat, dup*, fcntl F_DUPFD), closes are close(); close_range() and
exec's close-on-exec are not seen (such fds show up as open).
"""

from __future__ import annotations

import struct
import time
from typing import Any

from pycore.tools.api import Method, Tool

_KEY = struct.Struct("<Ii")
_INFO = struct.Struct("<QII16s64s")


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode(errors="replace")


class FdLeak(Tool):
    name = "fd-leak"
    description = "descriptors opened and never closed, per process, with file name and age"
    object = "fd_leak"
    methods = (Method("tp_btf/sys_exit+sys_enter", ("fd_opened", "fd_closed"), "tp_btf"),)

    def leaks(self, obj) -> list[dict[str, Any]]:
        now = time.monotonic_ns()  # bpf_ktime_get_ns() is CLOCK_MONOTONIC
        rows = []
        for k, v in obj.maps["open_fds"].items_raw():
            tgid, fd = _KEY.unpack(k)
            ts, tid, nr, comm, name = _INFO.unpack(v[:_INFO.size])
            rows.append({"pid": tgid, "comm": _cstr(comm), "fd": fd, "name": _cstr(name),
                         "age_s": round(max(now - ts, 0) / 1e9, 3), "syscall": nr})
        rows.sort(key=lambda r: (r["pid"], r["fd"]))
        return rows

    def summary(self, obj) -> str:
        rows = self.leaks(obj)
        if not rows:
            return "no descriptors left open\n"
        lines = [f"{len(rows)} descriptors opened and never closed:",
                 f"{'PID':>7} {'COMM':<16} {'FD':>4} {'AGE(s)':>8}  NAME"]
        for r in rows:
            lines.append(f"{r['pid']:>7} {r['comm']:<16} {r['fd']:>4} {r['age_s']:>8.3f}  {r['name']}")
        return "\n".join(lines) + "\n"

    def summary_json(self, obj) -> dict[str, Any]:
        return {"leaked": self.leaks(obj)}


TOOL = FdLeak
