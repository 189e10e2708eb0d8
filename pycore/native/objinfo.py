"""What the kernel says about a BPF object it holds: kind, info record, and the BTF a map carries.

Used on objects this process did not load (pinned by an earlier run, or by
anyone): :mod:`pycore.native.pinning` compares a pinned map with the map an
object is about to create, and ``pycore pins`` lists what is pinned.
``/proc/self/fdinfo`` tells a map from a program from a link (the kernel
prints ``map_type``, ``prog_type`` or ``link_type``) and carries what a
listing needs; the info records (``BPF_OBJ_GET_INFO_BY_FD``) add names and
BTF ids.
"""

from __future__ import annotations

import dataclasses
import os

from pycore.errors import BpfError
from pycore.native import libbpf as L

TYPE_CHECKING = False
if TYPE_CHECKING:
    import btf

__all__ = ["MapInfo", "fdinfo", "kind_of", "map_info", "prog_name", "kernel_btf", "open_pinned"]

ffi, lib = L.ffi, L.lib


@dataclasses.dataclass(frozen=True)
class MapInfo:
    """``struct bpf_map_info``, the fields pinning and listings use."""

    type: int
    id: int
    name: str
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    map_extra: int
    btf_id: int
    btf_key_type_id: int
    btf_value_type_id: int

    @property
    def type_name(self) -> str:
        return L.MAP_TYPE_NAMES.get(self.type, str(self.type))


def open_pinned(path: str) -> int:
    """An fd on the object pinned at ``path`` (``BPF_OBJ_GET``); the caller closes it."""
    fd = lib.bpf_obj_get(os.fsencode(path))
    if fd < 0:
        raise BpfError(f"open pinned object {path}", ffi.errno,
                       hint="needs root (CAP_BPF or CAP_SYS_ADMIN)" if ffi.errno in (1, 13) else "")
    return fd


def fdinfo(fd: int) -> dict[str, str]:
    """``/proc/self/fdinfo/FD`` as a dict (``map_type``, ``prog_id``, ``link_type``, ...)."""
    out = {}
    with open(f"/proc/self/fdinfo/{fd}") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out


def kind_of(info: dict[str, str]) -> str:
    """``map``, ``prog`` or ``link`` from :func:`fdinfo`'s fields ("" if none of them)."""
    for key, kind in (("link_type", "link"), ("map_type", "map"), ("prog_type", "prog")):
        if key in info:
            return kind
    return ""


def map_info(fd: int) -> MapInfo:
    info = ffi.new("struct bpf_map_info *")
    size = ffi.new("__u32 *", ffi.sizeof("struct bpf_map_info"))
    ret = lib.bpf_obj_get_info_by_fd(fd, info, size)
    if ret < 0:
        raise BpfError(f"map fd {fd}: get info", -ret)
    return MapInfo(type=info.type, id=info.id, name=ffi.string(info.name).decode(errors="replace"),
                   key_size=info.key_size, value_size=info.value_size, max_entries=info.max_entries,
                   map_flags=info.map_flags, map_extra=info.map_extra, btf_id=info.btf_id,
                   btf_key_type_id=info.btf_key_type_id, btf_value_type_id=info.btf_value_type_id)


def prog_name(prog_id: int) -> str:
    """The name of the loaded program ``prog_id`` ("" if it is gone)."""
    fd = lib.bpf_prog_get_fd_by_id(prog_id)
    if fd < 0:
        return ""
    try:
        info = ffi.new("struct bpf_prog_info *")
        size = ffi.new("__u32 *", ffi.sizeof("struct bpf_prog_info"))
        if lib.bpf_obj_get_info_by_fd(fd, info, size) < 0:
            return ""
        return ffi.string(info.name).decode(errors="replace")
    finally:
        os.close(fd)


def kernel_btf(btf_id: int) -> btf.Spec:
    """The BTF object ``btf_id`` as the kernel holds it (a loaded object's own BTF, kept by its maps)."""
    from btf import Spec

    ptr = lib.btf__load_from_kernel_by_id(btf_id)
    if ptr == ffi.NULL:
        raise BpfError(f"load BTF id {btf_id} from the kernel", ffi.errno)
    try:
        size = ffi.new("__u32 *")
        raw = lib.btf__raw_data(ptr, size)
        if raw == ffi.NULL:
            raise BpfError(f"BTF id {btf_id}: raw data", ffi.errno)
        data = bytes(ffi.buffer(raw, size[0]))
    finally:
        lib.btf__free(ptr)
    return Spec(data)
