"""The BPF filesystem: where pins live, what is pinned under a directory, and unpinning it.

A pin is a file on a bpffs mount (``/sys/fs/bpf`` by default) holding a
reference to a map, program or link, so that it outlives the process that
made it.  Unlinking the file drops that reference: an object nothing else
holds is freed (a link is detached).  ``pycore pins`` is built on
:func:`walk` and :func:`remove`; :mod:`pycore.native.pinning` uses
:func:`make_pin_dir`.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat

from pycore.errors import BpfError, PinError
from pycore.native import libbpf as L
from pycore.native import objinfo

__all__ = ["BPFFS_ROOT", "Pinned", "mount_of", "require_bpffs", "make_pin_dir", "walk", "remove"]

BPFFS_ROOT = "/sys/fs/bpf"
_PRIVILEGES = "needs root (CAP_BPF or CAP_SYS_ADMIN)"


def mount_of(path: str) -> tuple[str, str]:
    """(mount point, file system type) of the mount holding ``path`` or its nearest existing ancestor."""
    real = os.path.realpath(path)
    while not os.path.exists(real) and real != "/":
        real = os.path.dirname(real)
    best, fstype = "/", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            point = _unescape(fields[4])
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):  # later mounts at one point stack on top
                best, fstype = point, fields[sep + 1]
    return best, fstype


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    if "\\" not in field:
        return field
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def require_bpffs(path: str, what: str) -> str:
    """``path`` made absolute, or PinError when it does not lie on a bpffs mount."""
    point, fstype = mount_of(path)
    if fstype != "bpf":
        raise PinError(f"{what} {path} is not on a BPF filesystem (it is on {fstype or 'an unknown'} "
                       f"mounted at {point}): use a directory under {BPFFS_ROOT}, or mount one with "
                       f"'mount -t bpf bpf DIR'")
    return os.path.abspath(path)


def make_pin_dir(path: str) -> str:
    """Create the pin directory ``path`` (and its parents) on bpffs if needed; returns it absolute."""
    path = require_bpffs(path, "pin directory")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise PinError(f"pin directory {path}: cannot create it: {os.strerror(exc.errno or 0)}"
                       + (f"; {_PRIVILEGES}" if exc.errno in (errno.EPERM, errno.EACCES) else "")) from None
    if not os.path.isdir(path):
        raise PinError(f"pin directory {path} exists and is not a directory")
    return path


@dataclasses.dataclass
class Pinned:
    """One pinned object, as ``pycore pins`` shows it."""

    path: str
    kind: str                        # map, prog, link ("" if the kernel did not say)
    id: int = 0
    name: str = ""
    type: str = ""                   # map, program or link type
    key_size: int | None = None
    value_size: int | None = None
    max_entries: int | None = None
    key_type: str | None = None      # BTF type names, when the map has BTF
    value_type: str | None = None
    prog_id: int | None = None       # a link's program
    prog_name: str | None = None
    target: str | None = None        # a link's tracepoint, function, ...
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def describe(self) -> str:
        """The details column of ``pycore pins``."""
        if self.error:
            return f"error: {self.error}"
        if self.kind == "map":
            types = ""
            if self.key_type or self.value_type:
                types = f"  key {self.key_type or '-'} value {self.value_type or '-'}"
            return (f"{self.type} '{self.name}' key {self.key_size} B value {self.value_size} B "
                    f"entries {self.max_entries}{types}")
        if self.kind == "prog":
            return f"{self.type} '{self.name}'"
        if self.kind == "link":
            target = f" {self.target}" if self.target else ""
            return f"{self.type}{target} -> prog {self.prog_id} '{self.prog_name or '?'}'"
        return ""


def inspect(path: str, btf_cache: dict[int, object] | None = None) -> Pinned:
    """What is pinned at ``path``."""
    try:
        fd = objinfo.open_pinned(path)
    except BpfError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            raise PinError(f"cannot open the pinned object {path}: permission denied; {_PRIVILEGES}") from None
        return Pinned(path, "", error=str(exc))
    try:
        fields = objinfo.fdinfo(fd)
        kind = objinfo.kind_of(fields)
        if kind == "map":
            return _map_entry(path, fd, btf_cache if btf_cache is not None else {})
        if kind == "prog":
            pid = int(fields.get("prog_id", 0))
            ptype = int(fields.get("prog_type", -1))
            return Pinned(path, kind, id=pid, name=objinfo.prog_name(pid),
                          type=L.PROG_TYPE_NAMES.get(ptype, str(ptype)))
        if kind == "link":
            prog = int(fields.get("prog_id", 0))
            target = fields.get("tp_name") or fields.get("func_name") or fields.get("attach_func_name") \
                or fields.get("target_name")
            return Pinned(path, kind, id=int(fields.get("link_id", 0)), type=fields.get("link_type", ""),
                          prog_id=prog, prog_name=objinfo.prog_name(prog) if prog else None, target=target)
        return Pinned(path, "", error="not a map, program or link")
    finally:
        os.close(fd)


def _map_entry(path: str, fd: int, btf_cache: dict[int, object]) -> Pinned:
    from pycore.native.maplayout import type_name

    info = objinfo.map_info(fd)
    entry = Pinned(path, "map", id=info.id, name=info.name, type=info.type_name, key_size=info.key_size,
                   value_size=info.value_size, max_entries=info.max_entries)
    if info.btf_id and (info.btf_key_type_id or info.btf_value_type_id):
        spec = btf_cache.get(info.btf_id)
        if spec is None:
            try:
                spec = btf_cache[info.btf_id] = objinfo.kernel_btf(info.btf_id)
            except (BpfError, ValueError):
                return entry
        if info.btf_key_type_id:
            entry.key_type = type_name(spec.type(info.btf_key_type_id))  # type: ignore[attr-defined]
        if info.btf_value_type_id:
            entry.value_type = type_name(spec.type(info.btf_value_type_id))  # type: ignore[attr-defined]
    return entry


def _existing(directory: str) -> str:
    if not os.path.lexists(directory):
        raise PinError(f"{directory}: no such file or directory")
    require_bpffs(directory, "directory")
    return os.path.abspath(directory)


def walk(directory: str = BPFFS_ROOT) -> list[Pinned]:
    """Everything pinned under ``directory`` (recursively; a pin file itself is fine), sorted by path."""
    directory = _existing(directory)
    paths: list[str] = []
    if not os.path.isdir(directory):
        paths.append(directory)
    else:
        def error(exc: OSError) -> None:
            raise exc

        try:
            for root, dirs, files in os.walk(directory, onerror=error):
                dirs.sort()
                paths.extend(os.path.join(root, f) for f in sorted(files))
        except PermissionError as exc:
            raise PinError(f"cannot list {exc.filename or directory}: permission denied; {_PRIVILEGES}") from None
    cache: dict[int, object] = {}
    return [inspect(p, cache) for p in sorted(paths)]


def remove(directory: str) -> list[Pinned]:
    """Unpin everything under ``directory`` and remove the directories left empty; returns what was unpinned.

    Refuses a bpffs mount point itself: other software pins there too.
    """
    directory = _existing(directory)
    point, _ = mount_of(directory)
    if os.path.realpath(directory) == point:
        raise PinError(f"{directory} is the root of a BPF filesystem, where other software pins too: "
                       "give the directory your agent pins to (its pin_dir)")
    entries = walk(directory)
    for e in entries:
        try:
            os.unlink(e.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise PinError(f"cannot unpin {e.path}: {os.strerror(exc.errno or 0)}"
                           + (f"; {_PRIVILEGES}" if exc.errno in (errno.EPERM, errno.EACCES) else "")) from None
    if os.path.isdir(directory) and not os.path.islink(directory):
        for root, dirs, _files in os.walk(directory, topdown=False):
            for d in dirs:
                _rmdir_if_empty(os.path.join(root, d))
        _rmdir_if_empty(directory)
    return entries


def _rmdir_if_empty(path: str) -> None:
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.rmdir(path)
    except OSError:
        pass  # not empty (something appeared), or gone already
