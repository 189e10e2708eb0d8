"""fget-crack: processes getting files whose name contains a pattern (the
kernel lab's ``kretfunc:fget`` exercise), printed as the lab prints them::

    sudo (fd8):  libcrack.so.2.9.0

fexit on fget sees every fd -> file lookup.  Where the kernel refuses fexit,
the fallback watches the syscalls that return a new descriptor (open*,
creat, dup*, fcntl F_DUPFD) through tp_btf/sys_exit and finds the file in the task's file
table: it sees files being opened, not every later use of the fd.  The
pattern is matched in the kernel either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, Tool

PATTERN_MAX = 31  # PYCORE_PATTERN_LEN - 1 (bpf_src/tools/tools.bpf.h)


def _pattern_problem(pattern: str) -> str | None:
    return f"is longer than {PATTERN_MAX} bytes" if len(pattern.encode()) > PATTERN_MAX else None


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """A file got by fd whose name holds the pattern: one event (``struct fget_event``), as ``open_tool`` yields it."""

    pid: int = 0
    tid: int = 0
    fd: int = 0
    via_syscall: int = 0        # 0: fget itself (fexit); else the system call that returned fd (fallback)
    comm: str = ""
    name: str = ""


class FgetCrack(Tool):
    name = "fget-crack"
    description = "files whose name contains a pattern, as processes get them by fd (fexit on fget)"
    object = "fget_crack"
    methods = (
        Method("fexit/fget", ("fget_exit",), "fexit"),
        Method("tp_btf/sys_exit", ("sys_exit_fd",), "tp_btf",
               "descriptors returned by open/openat/openat2/creat/dup*/fcntl F_DUPFD, not every fget"),
    )
    event = "fget_event"
    event_type = Event
    options = (Option("pattern", str, "crack", "substring of the file name, matched in the kernel (default: "
                      f"crack; at most {PATTERN_MAX} bytes; empty: every file)", check=_pattern_problem),)

    def configure(self, obj, method: Method) -> None:
        pattern = self.args.pattern.encode()
        obj.globals["pattern"] = self.args.pattern
        obj.globals["pattern_len"] = len(pattern)

    def format_event(self, ev: Any) -> str:
        return f"{ev.comm} (fd{ev.fd}):  {ev.name}"

    def event_json(self, ev: Any) -> dict[str, Any]:
        return {"comm": ev.comm, "pid": ev.pid, "tid": ev.tid, "fd": ev.fd, "name": ev.name,
                "via": "fget" if ev.via_syscall == 0 else f"syscall {ev.via_syscall}"}


TOOL = FgetCrack
