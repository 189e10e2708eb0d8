"""A persistent cache of pass one: record offsets and the name, info and
size-or-type columns (the first three words of every record).

Walking vmlinux's 126k records costs about 20 ms of pure Python on every
start, and the result depends only on the bytes of the type section.  So it
is kept in ``$XDG_CACHE_HOME/pycore/btf`` (``~/.cache`` by default), in a
file named by a checksum of that section.  ``PYCORE_CACHE_DIR`` moves it; ``PYCORE_CACHE_DIR=off``
turns it off.  A cache is only a cache: any problem reading or writing it
means the pass runs as usual.
"""

from __future__ import annotations

import os
import zlib
import sys
from array import array

MAGIC = b"PYBTFIX2"  # the file's format (its name holds the digest)
COLUMNS = 4  # offsets, names, infos, size-or-type
# Only worth it for big blobs; a .bpf.o's BTF indexes in microseconds.
MIN_BLOB = 1 << 20


def cache_dir() -> str | None:
    configured = os.environ.get("PYCORE_CACHE_DIR")
    if configured:
        return None if configured == "off" else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pycore", "btf")


def digest(header: bytes, words: array) -> str:
    """A content key: CRC-32 of the type section's words and of the header,
    and the number of words.  The index is made of the type section alone,
    so the 2 MB of strings after it in a kernel's BTF are left out.

    (zlib's CRC is twice as fast as SHA-1 here and a cache needs no more.)"""
    return f"{zlib.crc32(words):08x}{zlib.crc32(header):08x}-{len(words)}"


def _path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, f"{key}-{sys.byteorder}.idx")


def load(key: str, words: array) -> tuple[array, array, array, array] | None:
    """(offsets, names, infos, sizes) if a sound cached index exists for this blob."""
    path = _path(key)
    if path is None:
        return None
    # Straight into the four arrays: a read of the whole file, its CRC'd
    # tail and the slices would be three more 2 MB copies, fresh memory
    # that costs more to fault in than to read.
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            if head[:8] != MAGIC or len(head) < 16:
                return None
            count = int.from_bytes(head[8:12], sys.byteorder)
            if os.fstat(f.fileno()).st_size != 16 + 4 * COLUMNS * count or count == 0:
                return None
            cols = []
            for _ in range(COLUMNS):
                col = array("I")
                col.fromfile(f, count)
                cols.append(col)
    except (OSError, EOFError):  # EOFError: cut short since the size was taken
        return None
    crc = 0
    for col in cols:
        crc = zlib.crc32(col, crc)
    if crc != int.from_bytes(head[12:16], sys.byteorder):
        return None  # a damaged file
    offsets, names, infos, sizes = cols
    # The digest says the blob is the same and the CRC that the file is
    # whole; these spot checks catch a file written for another blob.
    n = len(words)
    try:
        for idx in range(0, count, max(1, count // 512)):
            o = offsets[idx]
            if words[o] != names[idx] or words[o + 1] != infos[idx] or words[o + 2] != sizes[idx]:
                return None
        if offsets[0] != 0 or offsets[-1] >= n:
            return None
    except IndexError:
        return None
    return offsets, names, infos, sizes


def store(key: str, offsets: array, names: array, infos: array, sizes: array) -> None:
    path = _path(key)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        columns = (offsets, names, infos, sizes)
        crc = 0
        for column in columns:  # the arrays as they are: no 2 MB joined copy
            crc = zlib.crc32(column, crc)
        with open(tmp, "wb") as f:
            f.write(MAGIC + len(offsets).to_bytes(4, sys.byteorder) + crc.to_bytes(4, sys.byteorder))
            for column in columns:
                f.write(column)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
