"""Shared libraries by name, from the dynamic linker's cache (``/etc/ld.so.cache``).

``uprobe:libc:getaddrinfo`` names a library as bpftrace does (through bcc):
``libc`` is the first library of this machine's ABI whose name starts with
``libc.so``; ``libc.so.6`` is matched whole.  This reads the cache's format as
glibc 2.32 and later write it ("glibc-ld.so.cache1.1", which older ldconfig
also appended after the old "ld.so-1.7.0" table), without running ldconfig.
"""

from __future__ import annotations

import os
import struct

__all__ = ["LD_SO_CACHE", "CacheError", "entries", "find_library"]

LD_SO_CACHE = "/etc/ld.so.cache"

MAGIC = b"glibc-ld.so.cache1.1"
HEADER = struct.Struct("<20sII B3x I 12x")   # magic+version, nlibs, len_strings, flags, extension_offset
ENTRY = struct.Struct("<iIIIQ")               # flags, key, value (offsets from the header), osversion, hwcap

# flags: the library type (low byte) and the ABI (next byte), from glibc's ldconfig.h
FLAG_ELF_LIBC6 = 0x0003
_ABI = {"x86_64": 0x0300, "aarch64": 0x0A00, "riscv64": 0x1000, "ppc64le": 0x0500, "s390x": 0x0400}


class CacheError(ValueError):
    """The cache is not in a format this reader knows, or is cut short."""


def entries(data: bytes) -> list[tuple[int, str, str]]:
    """(flags, name, path) of every library in the cache ``data``, in the cache's order."""
    base = data.find(MAGIC)
    if base < 0:
        raise CacheError("not a glibc ld.so.cache (no 'glibc-ld.so.cache1.1' table)")
    if len(data) < base + HEADER.size:
        raise CacheError("cut short in its header")
    _, nlibs, _, _, _ = HEADER.unpack_from(data, base)
    first = base + HEADER.size
    if nlibs > (len(data) - first) // ENTRY.size:
        raise CacheError(f"cut short: {nlibs} libraries do not fit")
    out = []
    for i in range(nlibs):
        flags, key, value, _, _ = ENTRY.unpack_from(data, first + i * ENTRY.size)
        out.append((flags, _string(data, base + key), _string(data, base + value)))
    return out


def _string(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    if at >= len(data) or end < 0:
        raise CacheError(f"a name at {at} is outside the cache")
    return data[at:end].decode("utf-8", "surrogateescape")


def find_library(name: str, cache: str = LD_SO_CACHE) -> str | None:
    """The path of library ``name`` (``libc``, ``libssl``, ``libc.so.6``) for this machine's ABI, or None."""
    try:
        with open(cache, "rb") as f:
            data = f.read()
        libs = entries(data)
    except (OSError, CacheError):
        return None
    abi = _ABI.get(os.uname().machine)
    prefix = name + ".so"
    for flags, lib, path in libs:
        if flags & 0xFF != FLAG_ELF_LIBC6 or (abi is not None and flags & 0xFF00 != abi):
            continue
        if (lib == name or lib.startswith(prefix)) and os.path.exists(path):
            return path
    return None
