"""kprobes and kretprobes, through the kprobe PMU (Linux >= 4.17), as libbpf does.

The PMU's perf ``type`` is in /sys/bus/event_source/devices/kprobe/type and
its ``format/retprobe`` names the config bit that makes a kretprobe; the
function's name goes in ``config1`` (``kprobe_func``) and the offset into
it in ``config2``.  The program is BPF_PROG_TYPE_KPROBE and reads
``struct pt_regs``.  Kernels built without CONFIG_KPROBES (this project's
sandbox) have no such PMU: :class:`~pycore.errors.FeatureMissing`.
"""

from __future__ import annotations

import errno
import os

from pycore.errors import BpfError
from pycore.link.base import Link, pmu_format_bit, pmu_type, prog_fd_name
from pycore.link.perf_event import PerfEventAttr, attach_bpf, perf_event_open

__all__ = ["attach_kprobe"]

_ADVICE = "the kernel is built without CONFIG_KPROBES: use a tracepoint, or fentry/fexit (kfunc:)"


def attach_kprobe(prog: object, func: str, offset: int = 0, *, retprobe: bool = False, cookie: int = 0) -> Link:
    """Run a kprobe program when kernel function ``func`` is entered (at ``offset``) or, with ``retprobe``, returns."""
    fd, prog_name = prog_fd_name(prog)
    kind = "kretprobe" if retprobe else "kprobe"
    target = func + (f"+{offset:#x}" if offset else "")
    what = f"{kind} {target} <- program {prog_name}"
    ptype = pmu_type("kprobe", f"attach {kind}s", _ADVICE)
    config = (1 << pmu_format_bit("kprobe", "retprobe")) if retprobe else 0
    attr = PerfEventAttr(ptype, config=config, config1=func.encode(), config2=offset)
    try:
        pfd = perf_event_open(attr, -1, 0, what=what)
    except BpfError as exc:
        if exc.errno in (errno.ENOENT, errno.EINVAL):
            hint = (f"no kernel function {func!r} that kprobes can hook (absent, inlined or notrace)"
                    if exc.errno == errno.ENOENT else
                    "kretprobes take no offset" if retprobe and offset else
                    f"{target} is not an instruction boundary, or {func} cannot be probed")
            raise BpfError(what + ": perf_event_open", exc.errno, hint=hint) from None
        raise
    try:
        link_fd = attach_bpf(fd, pfd, cookie=cookie, what=what)
    except BaseException:
        os.close(pfd)
        raise
    return Link(kind, target, prog_name, link_fds=() if link_fd is None else (link_fd,), perf_fds=(pfd,))
