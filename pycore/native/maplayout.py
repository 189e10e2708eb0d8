"""Whether two BTF types lay memory out the same way, and if not, how they differ.

A pinned map outlives the program that made it; the next build may still
agree on its sizes while it reads a field at another offset.  Pinning
(:mod:`pycore.native.pinning`) compares the key and value types of the
pinned map (its BTF, as the kernel keeps it) with the new object's, and
names the first differences in words a C programmer recognises::

    struct stats gained field 'bytes'
    field 'calls' moved from offset 0 to 8
    field 'pid' changed type from unsigned int to long long

Typedefs and qualifiers are looked through (``__u32`` and ``unsigned int``
are one layout); struct, union and member names, member offsets, bitfield
widths, integer sizes and signedness, and array lengths count.  Pointers
compare equal to any pointer: their target is not stored in the map.
"""

from __future__ import annotations

from btf.kinds import Kind
from btf.layout import MAX_CHAIN, skip

TYPE_CHECKING = False
if TYPE_CHECKING:
    import btf
    from btf.types import Type

__all__ = ["differences", "type_name"]

_COMPOSITE = (Kind.STRUCT, Kind.UNION)


def type_name(t: Type) -> str:
    """A short C spelling of ``t`` (typedef names kept) for messages."""
    k = t.kind
    if k in _COMPOSITE or k == Kind.FWD:
        tag = "union" if k == Kind.UNION or (k == Kind.FWD and t.is_union) else "struct"  # type: ignore[attr-defined]
        return f"{tag} {t.name}" if t.name else f"anonymous {tag}"
    if k in (Kind.ENUM, Kind.ENUM64):
        return f"enum {t.name}" if t.name else "anonymous enum"
    if k == Kind.ARRAY:
        return f"{type_name(t.type)}[{t.nelems}]"  # type: ignore[attr-defined]
    if k == Kind.PTR:
        return f"{type_name(t.type)} *"  # type: ignore[attr-defined]
    if k in (Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG):
        return type_name(t.type)  # type: ignore[attr-defined]
    if k == Kind.UNKN:
        return "void"
    return t.name or k.name.lower()


def differences(old: btf.Spec, old_id: int, new: btf.Spec, new_id: int, limit: int = 3) -> list[str]:
    """How type ``new_id`` of ``new`` lays memory out unlike ``old_id`` of ``old`` (empty: the same).

    At most ``limit`` phrases, outermost first.
    """
    out: list[str] = []
    _compare(old.type(old_id), new.type(new_id), "", out, limit, 0)
    return out


def _compare(a: Type, b: Type, where: str, out: list[str], limit: int, depth: int) -> None:
    if len(out) >= limit:
        return
    if depth > MAX_CHAIN:
        out.append(f"{where}types nest deeper than {MAX_CHAIN}")
        return
    a, b = skip(a), skip(b)
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        out.append(f"{where}{type_name(a)} became {type_name(b)}")
        return
    if ka == "int":
        if (a.size, a.signed, a.bits) != (b.size, b.signed, b.bits):  # type: ignore[attr-defined]
            out.append(f"{where}{type_name(a)} became {type_name(b)}")
    elif ka in ("enum", "float"):
        if a.size != b.size or getattr(a, "signed", False) != getattr(b, "signed", False):  # type: ignore[attr-defined]
            out.append(f"{where}{type_name(a)} became {type_name(b)}")
    elif ka == "array":
        if a.nelems != b.nelems:  # type: ignore[attr-defined]
            out.append(f"{where}{type_name(a)} became {type_name(b)}")
        else:
            _compare(a.type, b.type, where, out, limit, depth + 1)  # type: ignore[attr-defined]
    elif ka in ("struct", "union"):
        _compare_composite(a, b, where, out, limit, depth)


def _kind(t: Type) -> str:
    k = t.kind
    if k == Kind.INT:
        return "int"
    if k in (Kind.ENUM, Kind.ENUM64):
        return "enum"
    if k == Kind.STRUCT or k == Kind.FWD and not t.is_union:  # type: ignore[attr-defined]
        return "struct"
    if k == Kind.UNION or k == Kind.FWD:
        return "union"
    return {Kind.ARRAY: "array", Kind.PTR: "pointer", Kind.FLOAT: "float"}.get(k, k.name.lower())


def _compare_composite(a: Type, b: Type, where: str, out: list[str], limit: int, depth: int) -> None:
    if a.kind == Kind.FWD or b.kind == Kind.FWD:
        if a.kind != b.kind:
            out.append(f"{where}{type_name(a)} became {type_name(b)}")
        return
    name = type_name(b)
    if a.name != b.name:
        out.append(f"{where}{type_name(a)} became {name}")
    old = {m.name: m for m in a.members}  # type: ignore[attr-defined]
    new = {m.name: m for m in b.members}  # type: ignore[attr-defined]
    gained = [n for n in new if n not in old]
    lost = [n for n in old if n not in new]
    for verb, names in (("gained", gained), ("lost", lost)):
        if names and len(out) < limit:
            fields = ", ".join(f"'{n}'" if n else "an anonymous member" for n in names)
            out.append(f"{where}{name} {verb} field{'s' if len(names) > 1 else ''} {fields}")
    for n, mb in new.items():
        ma = old.get(n)
        if ma is None or len(out) >= limit:
            continue
        label = f"field '{n}'" if n else "an anonymous member"
        if ma.bit_offset != mb.bit_offset:
            out.append(f"{where}{label} moved from offset {_offset(ma.bit_offset)} to {_offset(mb.bit_offset)}")
        elif ma.bitfield_size != mb.bitfield_size:
            out.append(f"{where}{label} changed width from {ma.bitfield_size or 'whole'} to "
                       f"{mb.bitfield_size or 'whole'} bits")
        elif _same_shape(ma.type, mb.type):   # nested struct or array: say what changed inside
            _compare(ma.type, mb.type, f"{where}{label}: ", out, limit, depth + 1)
        else:
            inner: list[str] = []
            _compare(ma.type, mb.type, "", inner, 1, depth + 1)
            if inner:
                out.append(f"{where}{label} changed type from {type_name(ma.type)} to {type_name(mb.type)}")
    if a.size != b.size and not (gained or lost) and len(out) < limit:  # type: ignore[attr-defined]
        out.append(f"{where}{name} grew from {a.size} to {b.size} bytes"  # type: ignore[attr-defined]
                   if b.size > a.size else f"{where}{name} shrank from {a.size} to {b.size} bytes")  # type: ignore[attr-defined]


def _same_shape(a: Type, b: Type) -> bool:
    """Both structs, both unions, or arrays of one length: differences are worth naming inside."""
    a, b = skip(a), skip(b)
    if a.kind == Kind.ARRAY and b.kind == Kind.ARRAY:
        return a.nelems == b.nelems  # type: ignore[attr-defined]
    return a.kind in _COMPOSITE and a.kind == b.kind


def _offset(bits: int) -> str:
    return str(bits // 8) if bits % 8 == 0 else f"{bits // 8}+{bits % 8} bits"
