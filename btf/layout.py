"""Sizes, alignment and qualifier stripping: what C's layout rules say of a type."""

from __future__ import annotations

from . import types as T
from .errors import BtfError
from .kinds import Kind

# Longest chain of typedefs/qualifiers/arrays we follow before calling the
# BTF cyclic.  Real kernels stay under 10.
MAX_CHAIN = 64
POINTER_SIZE = 8

_MODIFIERS = (Kind.TYPEDEF, Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG)
_QUALIFIERS = (Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG)


def skip(t: T.Type, kinds: tuple[Kind, ...] = _MODIFIERS) -> T.Type:
    """Follow ``t`` through the given kinds (typedefs and qualifiers by default)."""
    for _ in range(MAX_CHAIN):
        if t.kind not in kinds:
            return t
        t = t.type  # type: ignore[attr-defined]
    raise BtfError(f"type {t.id}: reference chain longer than {MAX_CHAIN} (cycle?)")


def skip_qualifiers(t: T.Type) -> T.Type:
    return skip(t, _QUALIFIERS)


def sizeof(t: T.Type, _depth: int = 0) -> int:
    """Size in bytes, as C's sizeof (0 for void and functions)."""
    if _depth > MAX_CHAIN:
        raise BtfError(f"type {t.id}: type nests deeper than {MAX_CHAIN} (cycle?)")
    k = t.kind
    if k in (Kind.INT, Kind.ENUM, Kind.ENUM64, Kind.FLOAT, Kind.STRUCT, Kind.UNION, Kind.DATASEC):
        return t.size  # type: ignore[attr-defined]
    if k == Kind.PTR:
        return POINTER_SIZE
    if k == Kind.ARRAY:
        return t.nelems * sizeof(t.type, _depth + 1)  # type: ignore[attr-defined]
    if k in _MODIFIERS or k == Kind.VAR:
        return sizeof(t.type, _depth + 1)  # type: ignore[attr-defined]
    return 0


def alignof(t: T.Type, memo: dict[int, int] | None = None) -> int:
    """Natural alignment in bytes, computed as libbpf's btf__align_of does.

    ``memo`` (struct/union id -> alignment) may be shared by calls on one
    spec, as the C formatter does while it prints one definition."""
    return _alignof(t, 0, {} if memo is None else memo)


def _alignof(t: T.Type, depth: int, done: dict[int, int]) -> int:
    # ``done`` memoises structs and unions: without it a struct that holds
    # another twice, which holds another twice, ... costs 2**depth.
    if depth > MAX_CHAIN:
        raise BtfError(f"type {t.id}: type nests deeper than {MAX_CHAIN} (cycle?)")
    k = t.kind
    if k in (Kind.INT, Kind.ENUM, Kind.ENUM64, Kind.FLOAT):
        return max(1, min(POINTER_SIZE, t.size))  # type: ignore[attr-defined]
    if k == Kind.PTR:
        return POINTER_SIZE
    if k in _MODIFIERS or k == Kind.ARRAY:
        return _alignof(t.type, depth + 1, done)  # type: ignore[attr-defined]
    if k in (Kind.STRUCT, Kind.UNION):
        if t.id in done:
            return done[t.id]
        best = 1
        for m in t.members:  # type: ignore[attr-defined]
            a = _alignof(m.type, depth + 1, done)
            best = max(best, a)
            if not m.bitfield_size and m.bit_offset % (8 * a):
                best = 0  # a misaligned member: the struct is packed
                break
        if best == 0 or t.size % best:  # type: ignore[attr-defined]
            best = 1
        done[t.id] = best
        return best
    return 1


def is_packed(t: T.Composite, memo: dict[int, int] | None = None) -> bool:
    """Whether a struct needs ``__attribute__((packed))`` to get its BTF layout."""
    if t.kind != Kind.STRUCT:
        return False
    best = 1
    for m in t.members:
        a = alignof(m.type, memo)
        if not m.bitfield_size and m.bit_offset % (8 * a):
            return True
        best = max(best, a)
    return t.size % best != 0


# A hole wider than this between members means a corrupt size or offset.
MAX_PADDING_BYTES = 1 << 16
_SMALLER_PADS = (("int", 32), ("short", 16), ("char", 8))


def aligns_itself(cur_off: int, next_off: int, next_align: int, pointer_size: int = POINTER_SIZE) -> bool:
    """Whether C's own alignment takes the member after one that ended at
    bit ``cur_off`` to ``next_off``, so that :func:`padding_fields` (outside
    a bitfield) has nothing to add: 94% of the holes in vmlinux, tested
    without building a list.  Only for alignments that are themselves pad
    units (8 only with 8-byte longs), where the first pad to reach a
    naturally aligned offset not past the member reaches the member."""
    if next_align not in (1, 2, 4) and not next_align == pointer_size == 8:
        return False
    unit = 8 * next_align
    return -(-cur_off // unit) * unit == next_off


def padding_fields(cur_off: int, next_off: int, next_align: int, in_bitfield: bool,
                   pointer_size: int = POINTER_SIZE) -> list[tuple[str, int]]:
    """Anonymous bitfields (``long: 64``, ``int: 0`` ...) that make C put the
    next member at bit ``next_off`` when the previous one ended at ``cur_off``.

    These are libbpf's btf_dump rules: the largest of long/int/short/char that
    reaches a naturally aligned offset not past the member, a ``: 0`` marker
    where the compiler would not align by itself, then whole pad units.  The
    same list drives listings (btf.cformat) and vmlinux.h (btf.cdump).
    """
    if cur_off >= next_off:
        return []
    if next_off - cur_off > MAX_PADDING_BYTES * 8:
        raise BtfError(f"a {(next_off - cur_off) // 8}-byte hole between members is too wide to pad")
    if next_align <= 0:  # libbpf divides by it (bpftool dies of SIGFPE)
        raise BtfError("a hole to pad before a member with no alignment (void or a function)")
    pads = (("long", pointer_size * 8),) + _SMALLER_PADS
    fields: list[tuple[str, int]] = []
    pad_type, pad_bits = pads[-1]
    new_off = cur_off
    for pad_type, pad_bits in pads:
        new_off = -(-cur_off // pad_bits) * pad_bits
        if new_off <= next_off:
            break
    if cur_off < new_off <= next_off:
        if (in_bitfield
                or (new_off == next_off and -(-cur_off // (next_align * 8)) * next_align * 8 != new_off)
                or (new_off != next_off and next_off - new_off <= new_off - cur_off)):
            fields.append((pad_type, new_off - cur_off if in_bitfield else 0))
        cur_off = new_off
    while cur_off != next_off:
        bits = min(next_off - cur_off, pad_bits)
        if bits == pad_bits:
            fields.append((pad_type, pad_bits))
        else:
            # The remainder: the smallest type that holds it.
            fields.append(next((t, bits) for t, b in reversed(pads) if b >= bits))
        cur_off += bits
    return fields
