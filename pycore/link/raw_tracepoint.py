"""Raw tracepoints (``rawtracepoint:NAME``): the tracepoint's own arguments, no perf event.

``bpf_raw_tracepoint_open(NAME, prog)`` returns a bpf_link fd; the program
(BPF_PROG_TYPE_RAW_TRACEPOINT) gets ``struct bpf_raw_tracepoint_args``: the
tracepoint's arguments as an array of u64 (Linux >= 4.17).
"""

from __future__ import annotations

import errno

from pycore.errors import BpfError
from pycore.link.base import Link, prog_fd_name
from pycore.native import libbpf as L

__all__ = ["attach_raw_tracepoint"]


def attach_raw_tracepoint(prog: object, name: str) -> Link:
    """Run a raw_tracepoint program on every hit of tracepoint ``name`` (``sys_enter``, ``sched_switch``)."""
    fd, prog_name = prog_fd_name(prog)
    ret = L.lib.bpf_raw_tracepoint_open(name.encode(), fd)
    if ret < 0:
        err = -ret
        hint = {errno.ENOENT: f"no tracepoint {name!r} in this kernel (the name has no category: sched_switch)",
                errno.EINVAL: "the program is not a raw_tracepoint program, or reads past the tracepoint's arguments"
                }.get(err, "")
        raise BpfError(f"raw tracepoint {name} <- program {prog_name}: bpf_raw_tracepoint_open", err, hint=hint)
    return Link("raw_tracepoint", name, prog_name, link_fds=(ret,))
