"""Paths kept reachable, at their own names, in a mount namespace that hides what lies above them.

The venv's scripts and the editable install name this clone by its absolute path, so a process that
runs them must see the clone there. Two things can hide it, wherever the clone lies (/tmp, /root,
/home...): tests/systemd_unit.py's sandbox (PrivateTmp= and ProtectHome= cover /tmp, /root and /home
with fresh file systems) and an unprivileged user (a clone under /root, mode 0700, is not theirs to
enter). Both are met the same way: an ``O_PATH`` descriptor of each path is opened while it can
still be reached (:func:`keep`); once a file system is mounted over a directory above it, the path's
mount point is made there (:func:`mount_points`) and the kept descriptor bound on it through
``/proc/self/fd`` (:func:`expose`). The process then sees the file system asked for, plus exactly
these paths (and the directories leading to them).

``python tests/reach.py PATH... -- ARGV``, run as root inside ``unshare --mount``: covers the topmost
directory above each PATH that others cannot enter with a tmpfs they can only traverse (mode 0111),
exposes the PATHs in it, and execs ARGV (:func:`for_everyone` builds that command line, or none
where nothing is hidden).
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 0x1, 0x20, 0x1000, 0x4000
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2) itself: mount(8) would canonicalize /proc/self/fd/N to the hidden path's name."""
    enc = (lambda s: None if s is None else s.encode())
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def keep(paths: list[str]) -> list[tuple[str, int]]:
    """(path, O_PATH descriptor) for each of ``paths`` (absolute, resolved), those inside another one
    left out (the outer one's bind brings them)."""
    kept: list[tuple[str, int]] = []
    for path in sorted({os.path.realpath(p) for p in paths}, key=len):
        if not any(under(path, k) for k, _ in kept):
            kept.append((path, os.open(path, os.O_PATH)))
    return kept


def mount_points(top: str, kept: list[tuple[str, int]], dir_mode: int) -> None:
    """In the file system just mounted on ``top``, the mount points of the kept paths below it, and
    the directories leading to them (``dir_mode``, as systemd makes those of BindPaths=)."""
    for path, fd in kept:
        if not under(path, top) or path == top:
            continue
        missing = []
        d = os.path.dirname(path)
        while d != top and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        for d in reversed(missing):
            os.mkdir(d)
            os.chmod(d, dir_mode)           # not masked by the umask
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.mkdir(path)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0))


def expose(kept: list[tuple[str, int]], tops: list[str], readonly: bool) -> list[str]:
    """Bind each kept path that lies below one of ``tops`` (file systems mounted over them, holding
    their :func:`mount_points`) back at its own name; the paths bound."""
    bound = []
    for path, fd in kept:
        if any(under(path, t) and path != t for t in tops):
            bind(fd, path, readonly)
            bound.append(path)
    return bound


def bind(fd: int, target: str, readonly: bool = False) -> None:
    """What descriptor ``fd`` names, bound on ``target`` (found through /proc/self/fd: the name it
    was opened by may be hidden now)."""
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    if readonly:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def release(kept: list[tuple[str, int]]) -> None:
    for _, fd in kept:
        os.close(fd)


def blocked(path: str) -> str | None:
    """The topmost directory above ``path`` that others (neither its owner nor in its group) cannot
    enter, if any."""
    parts = os.path.realpath(path).split("/")[1:]
    d = ""
    for part in parts[:-1]:
        d += "/" + part
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return d
    return None


def for_everyone(paths: list[str], argv: list[str]) -> list[str]:
    """``argv``, run where every user can reach ``paths`` (root runs it, ``argv`` drops to the user):
    unchanged where nothing above them is closed to others, else inside a mount namespace of its own
    through this module."""
    if not any(blocked(p) for p in paths):
        return argv
    return ["unshare", "--mount", "--propagation", "private", "--",
            sys.executable, os.path.abspath(__file__), *paths, "--", *argv]


def main(args: list[str]) -> None:
    split = args.index("--")
    paths, argv = args[:split], args[split + 1:]
    tops = sorted({t for t in map(blocked, paths) if t}, key=len)
    tops = [t for i, t in enumerate(tops) if not any(under(t, o) for o in tops[:i])]
    kept = keep(paths)
    for top in tops:
        _mount("tmpfs", top, "tmpfs", 0, "mode=111")
        mount_points(top, kept, 0o111)
    expose(kept, tops, readonly=False)
    release(kept)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
