"""tracefs: the kernel's tracing filesystem, found or mounted on demand.

Tracepoint names (``available_events``), their fields (``events/CAT/NAME/
format``) and the functions ftrace can hook (``available_filter_functions``)
live here.  Many machines (this project's sandbox included) do not mount
tracefs at boot; as root we mount it at its standard place rather than make
every user learn the ``mount`` incantation.
"""

from __future__ import annotations

import os
import re

__all__ = ["TRACEFS", "DEBUGFS_TRACING", "Tracefs", "Field", "find_tracefs", "parse_format", "field_decls"]

TRACEFS = "/sys/kernel/tracing"
DEBUGFS_TRACING = "/sys/kernel/debug/tracing"

_FIELD = re.compile(r"^\s*field:(.*?);\s*offset:(\d+);\s*size:(\d+);\s*signed:(-?\d+);", re.M)
# The field's name is the last identifier before an optional [N] suffix.
# The lookbehind starts the search only where a word starts (leading digits
# skipped, as a bare identifier search would): the same match, found without
# rescanning every suffix of every word.  On this host's 20,944 fields:
# 38 ms -> 14 ms.
_FIELD_NAME = re.compile(r"(?<![A-Za-z0-9_])[0-9]*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\]\s*)*$")
# What the kernel's format files hold exactly (trace_events.c, f_show:
# "\tfield:%s %s;\toffset:%u;\tsize:%u;\tsigned:%d;\n", after "format:\n"):
# no ';' or newline inside a declaration, so no lazy scan.  field_decls uses
# it when it accounts for every "field:" of a file (else _FIELD decides):
# 2,305 files, 10 ms -> 4.7 ms.
_KERNEL_FIELD_DECL = re.compile(r"\n\tfield:([^;\n]*);\toffset:\d+;\tsize:\d+;\tsigned:-?\d+;")


class Field:
    """One line of a tracepoint's ``format`` file.  ``decl`` is as the kernel
    wrote it: ``const char * filename``, ``char comm[16]``."""

    __slots__ = ("decl", "name", "offset", "size", "signed")

    def __init__(self, decl: str, name: str, offset: int, size: int, signed: bool) -> None:
        self.decl = decl
        self.name = name
        self.offset = offset
        self.size = size
        self.signed = signed

    def __repr__(self) -> str:
        return f"<Field {self.decl!r} offset={self.offset} size={self.size}>"

    @property
    def is_common(self) -> bool:
        """Fields every event shares (bpftrace does not list them)."""
        return self.name.startswith("common_")


def parse_format(text: str) -> list[Field]:
    """The fields of an ``events/CAT/NAME/format`` file, in order."""
    fields = []
    for decl, offset, size, signed in _FIELD.findall(text):
        m = _FIELD_NAME.search(decl)
        fields.append(Field(decl.strip(), m.group(1) if m else decl.strip(), int(offset), int(size),
                            signed.strip() == "1"))
    return fields


# decl -> whether it declares a common_* field, for declarations that
# mention "common_" (the four or five every event shares).
_COMMON_DECLS: dict[str, bool] = {}


def _is_common_decl(decl: str) -> bool:
    common = _COMMON_DECLS.get(decl)
    if common is None:
        m = _FIELD_NAME.search(decl)
        common = _COMMON_DECLS[decl] = (m.group(1) if m else decl.strip()).startswith("common_")
    return common


def field_decls(text: str) -> list[str]:
    """The declarations of an event's own fields (``common_*`` left out),
    as ``[f.decl for f in parse_format(text) if not f.is_common]``, for
    listings.  Building 21k Field objects and naming each field was 55 ms
    of a 108 ms ``list -v 'tracepoint:*'``; this is 7 ms (2,305 files).
    Only declarations that mention ``common_`` are named, once each."""
    decls = _KERNEL_FIELD_DECL.findall(text)
    if len(decls) != text.count("field:"):  # not the kernel's layout: the general parser
        return [f.decl for f in parse_format(text) if not f.is_common]
    return [d.strip() for d in decls if "common_" not in d or not _is_common_decl(d)]


class Tracefs:
    """A mounted tracefs at ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read_bytes(self, *parts: str) -> bytes:
        """A whole tracefs file (OSError, e.g. EPERM, if unreadable)."""
        from btf.spec import read_file

        return read_file(self.path(*parts))

    def available_events(self) -> list[str]:
        """``CATEGORY:NAME`` of every tracepoint, from ``available_events``
        (falling back to the ``events/`` directory tree)."""
        try:
            return _read_small(self.path("available_events"), 1 << 16).decode().split()
        except OSError:
            pass
        events = []
        base = self.path("events")
        for cat in os.listdir(base):
            catdir = os.path.join(base, cat)
            if os.path.isdir(catdir):
                events.extend(f"{cat}:{name}" for name in os.listdir(catdir)
                              if os.path.isdir(os.path.join(catdir, name)))
        return events

    def format(self, category: str, name: str) -> list[Field]:
        """A tracepoint's fields (OSError if its format file is unreadable)."""
        return parse_format(_read_small(f"{self.root}/events/{category}/{name}/format").decode("utf-8", "replace"))

    def field_decls(self, category: str, name: str) -> list[str]:
        """A tracepoint's own fields as :func:`field_decls` gives them
        (OSError if its format file is unreadable)."""
        return field_decls(_read_small(f"{self.root}/events/{category}/{name}/format")
                           .decode("utf-8", "replace"))

    def available_filter_functions(self) -> bytes:
        """The functions ftrace can hook, one per line, ``name`` or ``name [module]``."""
        return self.read_bytes("available_filter_functions")


def _read_small(path: str, chunk: int = 16384) -> bytes:
    """A small tracefs file (format files are under 6 KiB, available_events
    60 KiB): read to EOF in ``chunk``-sized reads, with no fstat (tracefs
    reports size 0) and without importing btf for its read_file (3 ms)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, chunk)
        more = os.read(fd, chunk) if data else b""
        if not more:
            return data
        chunks = [data, more]
        while more:
            more = os.read(fd, chunk)
            chunks.append(more)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_tracefs(root: str) -> bool:
    return os.path.exists(os.path.join(root, "events"))


def _mount_tracefs(target: str) -> str | None:
    """mount -t tracefs nodev TARGET; an error message, or None on success."""
    import ctypes  # only on this rare path
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.mount(b"nodev", target.encode(), b"tracefs", 0, None) != 0:
        err = ctypes.get_errno()
        return f"mount -t tracefs {target}: {os.strerror(err)}"
    return None


def find_tracefs(mount: bool = True) -> tuple[Tracefs | None, str]:
    """The tracefs to use and, if none, why not (one line for the user).

    Order: /sys/kernel/tracing if mounted; mount it there if we are root;
    /sys/kernel/debug/tracing (where debugfs automounts tracefs).
    """
    if _is_tracefs(TRACEFS):
        return Tracefs(TRACEFS), ""
    why = f"{TRACEFS} is not mounted"
    if mount and os.geteuid() == 0 and os.path.isdir(TRACEFS):
        error = _mount_tracefs(TRACEFS)
        if error is None and _is_tracefs(TRACEFS):
            return Tracefs(TRACEFS), ""
        why = error or why
    try:
        if _is_tracefs(DEBUGFS_TRACING):
            return Tracefs(DEBUGFS_TRACING), ""
    except OSError:
        pass
    if os.geteuid() != 0:
        why += " (and we are not root)"
    return None, why
