"""BPF iterators: ``iter:NAME`` probes (``task``, ``task_file``, ``task_vma``, ...).

An iterator program is BPF_PROG_TYPE_TRACING loaded with expected attach
type BPF_TRACE_ITER and the BTF id of the kernel's ``bpf_iter_NAME``
function. ``bpf_link_create(prog, 0, BPF_TRACE_ITER)`` makes the link;
``BPF_ITER_CREATE`` on the link gives a file whose reads run the program
once per object (each task; each task's each open file), then once more
with a NULL object to say the walk is over. Nothing runs until that file
is read: :func:`run_iter` reads it to its end.
"""

from __future__ import annotations

import errno
import os
import struct

from pycore.errors import BpfError
from pycore.link.base import Link, prog_fd_name
from pycore.native import libbpf as L
from pycore.native.libbpf import AttachType

__all__ = ["attach_iter", "run_iter"]

_BPF_ITER_CREATE = 33
_NR_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280, "riscv64": 280, "s390x": 351, "ppc64le": 361}


def attach_iter(prog: object, name: str) -> Link:
    """Link a loaded iterator program (``iter:NAME``); it runs when :func:`run_iter` reads the link."""
    fd, prog_name = prog_fd_name(prog)
    ret = L.lib.bpf_link_create(fd, 0, int(AttachType.TRACE_ITER), L.ffi.NULL)
    if ret < 0:
        raise BpfError(f"iter:{name} <- program {prog_name}: bpf_link_create", -ret,
                       hint="this kernel has no such BPF iterator" if -ret in (errno.EINVAL, errno.ENOENT) else "")
    return Link("iter", name, prog_name, link_fds=(ret,))


def run_iter(link: Link) -> None:
    """Walk the iterator once: its program runs for every object, in this thread, until the walk ends."""
    nr = _NR_BPF.get(os.uname().machine)
    if nr is None:
        raise BpfError(f"iter:{link.target}: BPF_ITER_CREATE", errno.ENOSYS, hint="no bpf syscall number known here")
    attr = L.ffi.new("char[]", struct.pack("<II", link.link_fds[0], 0) + bytes(8))
    fd = L.libc.syscall(L.ffi.cast("long", nr), L.ffi.cast("int", _BPF_ITER_CREATE), L.ffi.cast("void *", attr),
                        L.ffi.cast("unsigned int", 16))
    if fd < 0:
        raise BpfError(f"iter:{link.target}: BPF_ITER_CREATE", L.ffi.errno)
    try:
        while os.read(fd, 1 << 16):
            pass
    finally:
        os.close(fd)
