"""pprof's profile.proto (``.pb.gz``), written by hand.

The message is small (a dozen fields of six message types), so it is encoded
here with two helpers (varint and length-delimited fields) rather than with
the protobuf package: that would add a compiled dependency and generated
code for what is 60 lines of plain Python, and nothing here is ever read back.
Field numbers: github.com/google/pprof/blob/main/proto/profile.proto.

One Location per distinct frame (with its file and line), one Function per
(name, file); samples hold location ids leaf first, as pprof wants, with two
values: samples and CPU nanoseconds.  One Mapping per native file (its
address range, file offset and build id, from the first process sampled
with it; the most sampled process's executable first, which pprof takes for
the main binary); native locations point at their file's mapping.  Frames
are named already, so every mapping says ``has_functions`` (pprof does not
symbolize again); kernel and Python locations have no mapping.

An off-CPU profile has one value, ``wait/nanoseconds`` (the time its threads
waited at the stack, microseconds from the program times 1000), and no
period: it is not sampled.
"""

from __future__ import annotations

import gzip
import time
from typing import BinaryIO

from pycore.profile.stacks import Frame, Profile

__all__ = ["encode_pprof", "write_pprof"]


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value) if value else b""


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _packed(field: int, values: list[int]) -> bytes:
    return _bytes(field, b"".join(_varint(v) for v in values)) if values else b""


def encode_pprof(profile: Profile) -> bytes:
    """The uncompressed Profile message."""
    strings: dict[str, int] = {"": 0}

    def s(text: str) -> int:
        i = strings.get(text)
        if i is None:
            i = strings[text] = len(strings)
        return i

    functions: dict[tuple[str, str], int] = {}
    locations: dict[Frame, int] = {}
    body = bytearray()
    if profile.off_cpu:
        period, kind = 0, "wait"
        value_types = [(s("wait"), s("nanoseconds"))]
    else:
        period, kind = (int(1e9 / profile.hz) if profile.hz else 0), "cpu"
        value_types = [(s("samples"), s("count")), (s("cpu"), s("nanoseconds"))]
    for t, u in value_types:
        body += _bytes(1, _int(1, t) + _int(2, u))
    func_msgs, loc_msgs, map_msgs = bytearray(), bytearray(), bytearray()
    mapping_ids: dict[str, int] = {}
    for path, (start, end, offset, build_id) in profile.mappings.items():
        mid = mapping_ids[path] = len(mapping_ids) + 1
        map_msgs += _bytes(3, _int(1, mid) + _int(2, start) + _int(3, end) + _int(4, offset)
                           + _int(5, s(path)) + _int(6, s(build_id)) + _int(7, 1))
    # one Location (and Function) per distinct frame, and its id's varint made once: each sample's
    # location_ids are then joined from those bytes (bench/bench_profile.py, "writing")
    encoded: dict[Frame, bytes] = {}
    for f in sorted(profile.frames()):
        name = f.label() if f.kind == "kernel" else f.name
        fkey = (name, f.file)
        fid = functions.get(fkey)
        if fid is None:
            fid = functions[fkey] = len(functions) + 1
            func_msgs += _bytes(5, _int(1, fid) + _int(2, s(name)) + _int(3, s(name)) + _int(4, s(f.file)))
        loc = locations[f] = len(locations) + 1
        mid = mapping_ids.get(f.file, 0) if f.kind == "native" else 0
        loc_msgs += _bytes(4, _int(1, loc) + _int(2, mid) + _bytes(4, _int(1, fid) + _int(2, f.line)))
        encoded[f] = _varint(loc)
    ids_of = encoded.__getitem__
    for stack, n in profile.stacks.items():
        ids = b"".join(map(ids_of, reversed(stack)))        # leaf first
        body += _bytes(2, _bytes(1, ids) + _packed(2, [n * 1000] if profile.off_cpu else [n, n * period]))
    body += map_msgs + loc_msgs + func_msgs
    body += b"".join(_bytes(6, text.encode()) for text in strings)   # in index order (dicts keep it)
    body += _int(9, int(time.time() * 1e9)) + _int(10, int(profile.duration * 1e9))
    body += _bytes(11, _int(1, s(kind)) + _int(2, s("nanoseconds"))) + _int(12, period)
    return bytes(body)


def write_pprof(profile: Profile, out: BinaryIO) -> None:
    out.write(gzip.compress(encode_pprof(profile)))
