"""Cgroup ids and paths: ``cgroupid("/sys/fs/cgroup/x")`` and ``cgroup_path(id)`` of pycore trace.

A cgroup v2 id is its kernfs node id, the 8-byte file handle
``name_to_handle_at`` gives for the directory (bpftrace reads it the same way;
a path outside cgroupfs has a longer handle and fails with EOVERFLOW). A path
is found by walking each mounted hierarchy for the directory of that id: the
unified (v2) hierarchy is named ``unified``, a v1 hierarchy by its mount
directory (``cpu``, ``systemd``), unified first and then by name, joined as
bpftrace joins them: ``unified:/user.slice,cpu:/``.
"""

from __future__ import annotations

import os

__all__ = ["cgroup_id", "cgroup_paths", "hierarchies"]

_paths: dict[tuple[int, str], str] = {}   # (id, hierarchy root) -> path, checked by stat on reuse


def cgroup_id(path: str) -> int:
    """The cgroup v2 id of directory ``path``: ValueError if it is not under a cgroup2 mount, OSError
    if it cannot be read."""
    import ctypes
    import ctypes.util

    roots = [root for name, root in hierarchies() if name == "unified"]
    real = os.path.realpath(path)
    if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
        where = f"mounted at {', '.join(roots)}" if roots else "not mounted"
        raise ValueError(f"{path} is not in the cgroup v2 hierarchy ({where})")

    class FileHandle(ctypes.Structure):
        _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_uint64)]

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fh, mount_id = FileHandle(8, 0, 0), ctypes.c_int(0)
    if libc.name_to_handle_at(-100, os.fsencode(path), ctypes.byref(fh), ctypes.byref(mount_id), 0) != 0:  # AT_FDCWD
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fh.f_handle)


def hierarchies(mounts: str = "/proc/self/mounts") -> list[tuple[str, str]]:
    """(name, mount point) of each mounted cgroup hierarchy: ``unified`` for v2, the directory's name for v1."""
    out = []
    with open(mounts) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2"):
                where = fields[1].replace("\\040", " ")
                out.append(("unified" if fields[2] == "cgroup2" else os.path.basename(where), where))
    return out


_MOUNTS_TTL = 10.0    # seconds a reading of the mount table serves cgroup_paths(), which runs per printed value
_mounts: tuple[float, list[tuple[str, str]]] | None = None


def _mounted() -> list[tuple[str, str]]:
    global _mounts
    import time

    now = time.monotonic()
    if _mounts is None or now - _mounts[0] > _MOUNTS_TTL:
        _mounts = (now, hierarchies())
    return _mounts[1]


def _path_in(cgid: int, root: str) -> str:
    cached = _paths.get((cgid, root))
    if cached is not None:
        try:
            if os.stat(root + cached.rstrip("/")).st_ino == cgid:
                return cached
        except OSError:
            pass
    try:
        if os.stat(root).st_ino == cgid:
            _paths[(cgid, root)] = "/"
            return "/"
    except OSError:
        return ""
    for top, dirs, _ in os.walk(root):
        for d in dirs:
            full = os.path.join(top, d)
            try:
                if os.stat(full).st_ino == cgid:
                    _paths[(cgid, root)] = full[len(root):]
                    return _paths[(cgid, root)]
            except OSError:
                continue
    return ""


def cgroup_paths(cgid: int, pattern: str = "*") -> str:
    """``name:path`` of the cgroup ``cgid`` in each hierarchy whose name matches ``pattern`` (``*``
    wildcards), unified first, then by name, joined by commas; "" where it is in none."""
    from fnmatch import fnmatchcase

    found = [(name, _path_in(cgid, root)) for name, root in _mounted() if fnmatchcase(name, pattern)]
    found = [(name, path) for name, path in found if path]
    found.sort(key=lambda np: (np[0] != "unified", np[0]))
    return ",".join(f"{name}:{path}" for name, path in found)
