"""uprobes and uretprobes, through the uprobe PMU (Linux >= 4.17), as libbpf does.

``config1`` is the binary's path (``uprobe_path``), ``config2`` the probe's
*file offset* in it (not its virtual address: see
``pycore.elf.symbols.file_offset``), and the config bit named by
``format/retprobe`` makes a uretprobe.  A USDT semaphore's file offset
goes in ``config``'s upper 32 bits (PERF_UPROBE_REF_CTR_OFFSET_SHIFT,
Linux >= 4.20): the kernel then counts attached probes in it for every
process that maps the binary.  ``pid`` -1 probes every process.
"""

from __future__ import annotations

import errno
import os

from pycore.errors import BpfError
from pycore.link.base import Link, pmu_format_bit, pmu_type, prog_fd_name
from pycore.link.perf_event import PerfEventAttr, attach_bpf, perf_event_open

__all__ = ["attach_uprobe", "PERF_UPROBE_REF_CTR_OFFSET_SHIFT"]

PERF_UPROBE_REF_CTR_OFFSET_SHIFT = 32
_ADVICE = "the kernel is built without CONFIG_UPROBE_EVENTS"


def attach_uprobe(prog: object, path: str, offset: int, *, pid: int = -1, retprobe: bool = False,
                  ref_ctr_offset: int = 0, cookie: int = 0) -> Link:
    """Run a kprobe-type program when code at file ``offset`` of ``path`` runs (or returns, with ``retprobe``)."""
    fd, prog_name = prog_fd_name(prog)
    kind = "uretprobe" if retprobe else "uprobe"
    path = os.path.abspath(path)
    target = f"{path}:{offset:#x}" + (f" (pid {pid})" if pid >= 0 else "")
    what = f"{kind} {target} <- program {prog_name}"
    if not os.path.exists(path):
        raise BpfError(what, errno.ENOENT, hint=f"{path} does not exist")
    ptype = pmu_type("uprobe", f"attach {kind}s", _ADVICE)
    config = (1 << pmu_format_bit("uprobe", "retprobe")) if retprobe else 0
    if ref_ctr_offset:
        if not 0 < ref_ctr_offset < (1 << 32):
            raise ValueError(f"{what}: semaphore offset {ref_ctr_offset:#x} does not fit in 32 bits")
        config |= ref_ctr_offset << PERF_UPROBE_REF_CTR_OFFSET_SHIFT
    attr = PerfEventAttr(ptype, config=config, config1=path.encode(), config2=offset)
    try:
        # a pid filter makes the event per-task (any CPU); without one, cpu 0 stands for all (as libbpf does)
        pfd = perf_event_open(attr, pid if pid >= 0 else -1, -1 if pid >= 0 else 0, what=what)
    except BpfError as exc:
        hint = {errno.EINVAL: "the offset is not in an executable segment, or the semaphore offset is wrong "
                              "(ref_ctr_offset needs Linux >= 4.20)",
                errno.ESRCH: f"no process {pid}",
                errno.ENOENT: f"{path} cannot be resolved"}.get(exc.errno or 0)
        if hint:
            raise BpfError(what + ": perf_event_open", exc.errno, hint=hint) from None
        raise
    try:
        link_fd = attach_bpf(fd, pfd, cookie=cookie, what=what)
    except BaseException:
        os.close(pfd)
        raise
    return Link(kind, target, prog_name, link_fds=() if link_fd is None else (link_fd,), perf_fds=(pfd,))
