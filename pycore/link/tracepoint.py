"""Tracepoints (``tracepoint:CATEGORY:NAME``): a perf event of type PERF_TYPE_TRACEPOINT.

The event's id is tracefs's ``events/CATEGORY/NAME/id``; the program must be
of type BPF_PROG_TYPE_TRACEPOINT, and reads the event's record (offsets in
``events/CATEGORY/NAME/format``) from its context.
"""

from __future__ import annotations

import errno
import os

from pycore.errors import BpfError
from pycore.link.base import Link, prog_fd_name, tracefs_events
from pycore.link.perf_event import PERF_TYPE_TRACEPOINT, PerfEventAttr, attach_bpf, perf_event_open

__all__ = ["attach_tracepoint", "tracepoint_id"]


def tracepoint_id(category: str, name: str, *, tracefs: str | None = None) -> int:
    """The perf id of ``category:name``, from tracefs (mounted at ``tracefs`` or a standard place)."""
    events = tracefs_events(tracefs)
    path = os.path.join(events, category, name, "id")
    try:
        with open(path) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        hint = (f"no tracepoint category {category!r}" if not os.path.isdir(os.path.join(events, category))
                else f"category {category} has no tracepoint {name!r}")
        raise BpfError(f"tracepoint {category}:{name}: read {path}", errno.ENOENT, hint=hint) from None
    except (OSError, ValueError) as exc:
        raise BpfError(f"tracepoint {category}:{name}: read {path}", getattr(exc, "errno", None) or errno.EINVAL) \
            from None


def attach_tracepoint(prog: object, category: str, name: str, *, cookie: int = 0,
                      tracefs: str | None = None) -> Link:
    """Run a tracepoint program on every hit of ``category:name``, on every CPU."""
    fd, prog_name = prog_fd_name(prog)
    what = f"tracepoint {category}:{name} <- program {prog_name}"
    tp_id = tracepoint_id(category, name, tracefs=tracefs)
    pfd = perf_event_open(PerfEventAttr(PERF_TYPE_TRACEPOINT, config=tp_id, sample_period=1, wakeup_events=1),
                          -1, 0, what=what)
    try:
        link_fd = attach_bpf(fd, pfd, cookie=cookie, what=what)
    except BaseException:
        os.close(pfd)
        raise
    return Link("tracepoint", f"{category}:{name}", prog_name,
                link_fds=() if link_fd is None else (link_fd,), perf_fds=(pfd,))
