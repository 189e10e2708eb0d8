"""vfs-unlink: who unlinks which file, and in which directory (the kernel lab's
``kfunc:vfs_unlink`` exercise, with its parent-directory extension)::

    rm tmpdir/victim.txt

fentry on vfs_unlink sees every unlink, whatever the syscall (unlink,
unlinkat, rename over a file does not call it).  The dentry argument's
position is taken from this kernel's BTF at load time (it moved when
mnt_userns, later idmap, was added in front).  Fallback: the unlink and
unlinkat syscall tracepoints, reporting successful calls with the path as
given, relative to the dirfd's or the cwd's directory.
"""

from __future__ import annotations

import os
import dataclasses
from typing import Any

from pycore.tools.api import Method, Tool


def dentry_arg_index(spec: Any, func: str = "vfs_unlink") -> int:
    """Index of vfs_unlink's ``dentry`` parameter in this kernel's BTF."""
    from btf.kinds import Kind

    ids = spec.ids_named(func, (Kind.FUNC,))
    if not ids:
        raise LookupError(f"{func} is not in this kernel's BTF")
    proto = spec.type(spec.type(ids[0]).type_id)
    for i, p in enumerate(proto.params):
        if p.name == "dentry":
            return i
    raise LookupError(f"{func} has no parameter named dentry in this kernel's BTF")


def where(ev: Any) -> tuple[str, str]:
    """(parent directory name, file name) of an event, for both methods."""
    if not ev.via_syscall:
        return ev.parent, ev.name
    path = ev.path.rstrip("/") or ev.path
    head, name = os.path.split(path)
    if not head:
        return ev.parent, name
    return os.path.basename(head.rstrip("/")) or "/", name


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """A file being unlinked: one event (``struct unlink_event``), as ``open_tool`` yields it."""

    pid: int = 0
    tid: int = 0
    via_syscall: int = 0
    pad: int = 0
    comm: str = ""
    name: str = ""
    parent: str = ""
    path: str = ""


class VfsUnlink(Tool):
    name = "vfs-unlink"
    description = "files being unlinked: process, parent directory and name (fentry on vfs_unlink)"
    object = "vfs_unlink"
    methods = (
        Method("fentry/vfs_unlink", ("vfs_unlink_entry",), "fentry"),
        Method("tracepoint/syscalls/sys_{enter,exit}_unlink{,at}",
               ("unlinkat_enter", "unlinkat_exit", "unlink_enter", "unlink_exit"), "tracepoint",
               "successful unlink/unlinkat calls, names from the path as given"),
    )
    event = "unlink_event"
    event_type = Event

    def configure(self, obj, method: Method) -> None:
        if method.feature == "fentry":
            import btf

            obj.globals["dentry_arg"] = dentry_arg_index(btf.load_kernel_spec())

    def format_event(self, ev: Any) -> str:
        parent, name = where(ev)
        return f"{ev.comm} {'' if parent == '/' else parent}/{name}"

    def event_json(self, ev: Any) -> dict[str, Any]:
        parent, name = where(ev)
        d = {"comm": ev.comm, "pid": ev.pid, "tid": ev.tid, "parent": parent, "name": name,
             "via": "vfs_unlink" if not ev.via_syscall else "syscall"}
        if ev.via_syscall:
            d["path"] = ev.path
        return d


TOOL = VfsUnlink
