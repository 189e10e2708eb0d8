"""BTF-typed programs (BPF_PROG_TYPE_TRACING): fentry, fexit and tp_btf.

Such a program names its target when it is *loaded*: ``load_program(...,
ProgType.TRACING, expected_attach_type=AttachType.TRACE_FENTRY,
attach_btf_id=btf_id("vfs_read", AttachType.TRACE_FENTRY))``.  The id is
the function's (``FUNC``) or, for tp_btf, the ``btf_trace_NAME`` typedef's
id in /sys/kernel/btf/vmlinux, whose type ids are the kernel's own.
Attaching then takes no target: ``bpf_raw_tracepoint_open(NULL, prog)``
(Linux >= 5.5), or ``bpf_link_create(prog, 0, attach_type)`` when a BPF
cookie is wanted (Linux >= 5.15).
"""

from __future__ import annotations

import errno

from pycore.errors import BpfError, FeatureMissing
from pycore.link.base import Link, prog_fd_name
from pycore.native import libbpf as L
from pycore.native.libbpf import AttachType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec

__all__ = ["attach_tracing", "btf_id"]

_KINDS = {AttachType.TRACE_FENTRY: "fentry", AttachType.TRACE_FEXIT: "fexit", AttachType.MODIFY_RETURN: "fmod_ret",
          AttachType.TRACE_RAW_TP: "tp_btf", AttachType.LSM_MAC: "lsm"}


def btf_id(name: str, attach_type: int, spec: Spec | None = None) -> int:
    """The BTF id to load a tracing program with: function ``name``'s, or tp_btf's ``btf_trace_NAME`` typedef's."""
    from btf import BtfError, Kind, load_kernel_spec

    if spec is None:
        try:
            spec = load_kernel_spec()
        except BtfError as exc:
            raise FeatureMissing("attach fentry/fexit/tp_btf programs", str(exc)) from None
    if int(attach_type) == AttachType.TRACE_RAW_TP:
        wanted, kind = f"btf_trace_{name}", Kind.TYPEDEF
    elif int(attach_type) == AttachType.LSM_MAC:
        wanted, kind = f"bpf_lsm_{name}", Kind.FUNC
    else:
        wanted, kind = name, Kind.FUNC
    ids = spec.ids_named(wanted, (kind,))
    if not ids:
        what = "tracepoint" if kind == Kind.TYPEDEF else "function"
        raise BpfError(f"{_KINDS.get(int(attach_type), 'tracing')} {name}: find its BTF id", errno.ESRCH,
                       hint=f"no {what} {name} in the kernel's BTF")
    return ids[0]


def attach_tracing(prog: object, *, attach_type: int | None = None, cookie: int = 0, target: str = "") -> Link:
    """Attach a loaded fentry/fexit/tp_btf program to the target it was loaded for.

    ``attach_type`` (the one it was loaded with) is needed only with a
    ``cookie``, which goes through ``bpf_link_create``; ``target`` (the
    function or tracepoint) only names it in messages.
    """
    fd, prog_name = prog_fd_name(prog)
    kind = _KINDS.get(int(attach_type), "tracing") if attach_type is not None else "tracing"
    if cookie:
        if attach_type is None:
            raise ValueError("attach_tracing: a cookie needs the program's attach_type")
        opts = L.ffi.new("struct bpf_link_create_opts *", {"sz": L.ffi.sizeof("struct bpf_link_create_opts")})
        opts.tracing.cookie = cookie
        ret = L.lib.bpf_link_create(fd, 0, int(attach_type), opts)
        call = "bpf_link_create"
    else:
        ret = L.lib.bpf_raw_tracepoint_open(L.ffi.NULL, fd)
        call = "bpf_raw_tracepoint_open"
    if ret < 0:
        err = -ret
        hint = {errno.EPERM: "this kernel refuses BPF trampolines (fentry/fexit need ftrace)",
                errno.EINVAL: "not a tracing program loaded with an attach target",
                errno.EBUSY: "another program of this kind is already attached to the function here",
                }.get(err, "")
        raise BpfError(f"{kind} {target or '(its load target)'} <- program {prog_name}: {call}", err, hint=hint)
    return Link(kind, target or "(its load target)", prog_name, link_fds=(ret,))
