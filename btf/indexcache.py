"""A persistent cache of pass one: record offsets and the name and info columns.

Walking vmlinux's 126k records costs about 20 ms of pure Python on every
start, and the result depends only on the blob's bytes.  So it is kept in
``$XDG_CACHE_HOME/pycore/btf`` (``~/.cache`` by default), in a file named by
a checksum of the blob.  ``PYCORE_CACHE_DIR`` moves it; ``PYCORE_CACHE_DIR=off``
turns it off.  A cache is only a cache: any problem reading or writing it
means the pass runs as usual.
"""

from __future__ import annotations

import os
import zlib
import sys
from array import array

MAGIC = b"PYBTFIX1"
# Only worth it for big blobs; a .bpf.o's BTF indexes in microseconds.
MIN_BLOB = 1 << 20


def cache_dir() -> str | None:
    configured = os.environ.get("PYCORE_CACHE_DIR")
    if configured:
        return None if configured == "off" else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pycore", "btf")


def digest(blob: bytes) -> str:
    """A content key: CRC-32 of the blob and of its header, and its length.

    (zlib's CRC is twice as fast as SHA-1 here and a cache needs no more.)"""
    return f"{zlib.crc32(blob):08x}{zlib.crc32(blob[:64]):08x}-{len(blob)}"


def _path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, f"{key}-{sys.byteorder}.idx")


def load(key: str, words: array) -> tuple[array, array, array] | None:
    """(offsets, names, infos) if a sound cached index exists for this blob."""
    path = _path(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if raw[:8] != MAGIC or len(raw) < 12:
        return None
    count = int.from_bytes(raw[8:12], sys.byteorder)
    if len(raw) != 12 + 12 * count or count == 0:
        return None
    cols = []
    for i in range(3):
        col = array("I")
        col.frombytes(raw[12 + 4 * count * i:12 + 4 * count * (i + 1)])
        cols.append(col)
    offsets, names, infos = cols
    # The digest says the blob is the same; these spot checks catch a
    # damaged cache file.
    n = len(words)
    try:
        for idx in range(0, count, max(1, count // 512)):
            o = offsets[idx]
            if words[o] != names[idx] or words[o + 1] != infos[idx]:
                return None
        if offsets[0] != 0 or offsets[-1] >= n:
            return None
    except IndexError:
        return None
    return offsets, names, infos


def store(key: str, offsets: array, names: array, infos: array) -> None:
    path = _path(key)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(MAGIC + len(offsets).to_bytes(4, sys.byteorder))
            f.write(offsets.tobytes() + names.tobytes() + infos.tobytes())
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
