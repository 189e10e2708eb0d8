"""BTF kind numbers and the shape of each kind's record.

Described once here; the index pass and the decoders both read these tables.
See the kernel's Documentation/bpf/btf.rst.
"""

from __future__ import annotations

import enum


class Kind(enum.IntEnum):
    UNKN = 0
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


MAX_KIND = max(Kind)

# Words (u32) that follow the 3-word common header: a fixed part, and a part
# repeated vlen times.  FUNC uses vlen for its linkage, so it repeats nothing.
_FIXED = {Kind.INT: 1, Kind.ARRAY: 3, Kind.VAR: 1, Kind.DECL_TAG: 1}
_PER_VLEN = {
    Kind.STRUCT: 3,   # name_off, type, offset
    Kind.UNION: 3,
    Kind.ENUM: 2,     # name_off, val
    Kind.FUNC_PROTO: 2,  # name_off, type
    Kind.DATASEC: 3,  # type, offset, size
    Kind.ENUM64: 3,   # name_off, val_lo32, val_hi32
}

# Tables indexed by the 5-bit kind field.  An invalid kind gets a size so
# large that the index pass steps past the end and reports it.
INVALID_STEP = 1 << 40
FIXED_WORDS = [_FIXED.get(k, 0) if 0 < k <= MAX_KIND else INVALID_STEP for k in range(32)]
VLEN_WORDS = [_PER_VLEN.get(k, 0) if 0 < k <= MAX_KIND else 0 for k in range(32)]


def record_words(info: int) -> int:
    """The length in words of a type record with this info word."""
    kind = (info >> 24) & 0x1F
    return 3 + FIXED_WORDS[kind] + (info & 0xFFFF) * VLEN_WORDS[kind]

# Linkage values of FUNC and VAR.
FUNC_LINKAGE = {0: "static", 1: "global", 2: "extern"}
VAR_LINKAGE = {0: "static", 1: "global-alloc", 2: "extern"}

# INT encoding bits.
INT_SIGNED = 1 << 0
INT_CHAR = 1 << 1
INT_BOOL = 1 << 2
