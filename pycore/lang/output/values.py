"""Single values as bpftrace 0.17 prints them: print(x), map values and keys, structs from BTF.

Four renderings, as in bpftrace 0.23.2: *text* (``print``, map values), *json*
(``-f json``: strings quoted, records as objects), *key* (map keys: ints as
signed 64-bit, pointers in hex, otherwise as text) and *json key* (a key in
``-f json``: strings, stacks and symbols escaped but not quoted, as the whole
key is escaped again; pointers in decimal; records as objects).  Where 0.17
printed keys otherwise, 0.23.2 wins: 0.17 indented a key's stack frames by 4
(0.23.2: 8, as everywhere), printed a struct key compact (``{.a=1,.b=2}``;
0.23.2: ``{ .a = 1, .b = 2 }``) and escaped json keys once.

Structs are printed from their bytes and their BTF type with bpftrace's
rules, which are not C's: anonymous struct/union members are flattened into
the parent, a named union prints every member, ``char``/``u8`` arrays as
strings up to the first NUL, other arrays as ``[1,2,3]``, enums by their
constants' names as bpftrace 0.21+ prints them (0.17: unsigned ints; json
keeps the number). Two rules follow the lab (../shared/seeds, the kernel-tracing seed)
and newer bpftrace rather than 0.17: a pointer member prints in hex
(``.file = 0xffff88a79ffa6900``; 0.17 printed a signed decimal, and json
keeps that number), and a bitfield prints its own bits, shifted and masked
(0.17 read the whole declared type at the field's first byte: ``.flags =
89`` for a 4-bit field holding 9).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from pycore.lang.output.cformat import hex_buffer
from pycore.lang.output.messages import json_escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from btf import Spec

__all__ = ["btf_layout", "format_btf", "format_value", "format_key", "format_fields", "stack_text",
           "is_stack_type", "quoted", "format_inet", "format_mac"]

_M64 = (1 << 64) - 1
TEXT, JSON, KEY, JKEY = "text", "json", "key", "jkey"


# -- BTF layouts ------------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def btf_layout(spec: Spec, type_id: int) -> tuple:
    """How bpftrace sees BTF type ``type_id``: a small tuple tree, computed once per type.

    ``("int", size, signed)``, ``("enum", size, signed, {value: name})``, ``("ptr",)``, ``("str", n)``,
    ``("array", n, elem_layout, elem_size)``,
    ``("record", ((name, offset, layout, size), ...), size)`` or ``("none", size)``.
    """
    from btf.kinds import Kind
    from btf.layout import sizeof, skip

    t = skip(spec.type(type_id)) if type_id else None
    if t is None:
        return ("none", 0)
    k = t.kind
    if k == Kind.INT:
        size = t.bits // 8 if t.bits and t.bits % 8 == 0 else t.size
        return ("int", size, bool(t.signed) and not t.is_bool)
    if k in (Kind.ENUM, Kind.ENUM64):     # printed by name, as bpftrace 0.21+ (json: the number)
        names: dict[int, str] = {}
        for v in t.values:
            names.setdefault(v.value, v.name)
        return ("enum", t.size, bool(getattr(t, "signed", False)), names)
    if k == Kind.PTR:
        return ("ptr",)
    if k == Kind.ARRAY:
        elem = btf_layout(spec, t.type_id)
        if elem[0] == "int" and elem[1] == 1:
            return ("str", t.nelems)
        return ("array", t.nelems, elem, sizeof(t.type))
    if k in (Kind.STRUCT, Kind.UNION):
        fields: list[tuple] = []
        _fields(spec, t, 0, fields)
        return ("record", tuple(fields), t.size)
    return ("none", sizeof(t))


def _fields(spec: Spec, t: Any, base: int, out: list[tuple]) -> None:
    from btf.kinds import Kind
    from btf.layout import sizeof, skip

    for m in t.members:
        off = base + m.bit_offset // 8
        mt = skip(m.type)
        if not m.name and mt.kind in (Kind.STRUCT, Kind.UNION):
            _fields(spec, mt, off, out)          # anonymous: its members are the parent's
            continue
        if m.bitfield_size:                     # its bits: the bytes they span, a shift and a width
            shift, bits = m.bit_offset % 8, m.bitfield_size
            signed = mt.kind == Kind.INT and bool(mt.signed) and not mt.is_bool
            out.append((m.name, off, ("bits", shift, bits, signed), (shift + bits + 7) // 8))
            continue
        lay = btf_layout(spec, m.type_id)
        out.append((m.name, off, lay, _size(lay) if lay[0] != "none" else sizeof(mt)))


def _size(lay: tuple) -> int:
    kind = lay[0]
    if kind == "int":
        return lay[1]
    if kind == "ptr":
        return 8
    if kind == "str":
        return lay[1]
    if kind == "array":
        return lay[1] * lay[3]
    return lay[2] if kind == "record" else lay[1]


class EnumValue(int):
    """An enum's value as printf's ``%s`` prints it, its constant's name (``%d`` prints the number)."""

    def __new__(cls, value: int, name: str) -> EnumValue:
        self = int.__new__(cls, value)
        self.name = name
        return self

    def __str__(self) -> str:
        return self.name


def _cstr(raw: bytes) -> str:
    n = raw.find(b"\0")
    return (raw if n < 0 else raw[:n]).decode("utf-8", "replace")


def quoted(text: str) -> str:
    """A JSON string as bpftrace writes one."""
    return f'"{json_escape(text)}"'


def _render_bytes(lay: tuple, data: bytes, mode: str) -> str:
    kind = lay[0]
    if kind == "enum":
        v = int.from_bytes(data[:lay[1]].ljust(lay[1], b"\0"), "little", signed=lay[2])
        return str(v) if mode == JSON else lay[3].get(v, str(v))
    if kind == "int":
        size = lay[1]
        chunk = data[:size].ljust(size, b"\0")
        return str(int.from_bytes(chunk, "little", signed=lay[2] or mode in (KEY, JKEY)))
    if kind == "ptr":
        v = int.from_bytes(data[:8].ljust(8, b"\0"), "little")
        return str(v) if mode in (JSON, JKEY) else f"0x{v:x}"
    if kind == "bits":
        _, shift, bits, signed = lay
        v = (int.from_bytes(data[:(shift + bits + 7) // 8], "little") >> shift) & ((1 << bits) - 1)
        return str(_signed(v, bits) if signed else v)
    if kind == "str":
        return _str(_cstr(data[: lay[1]]), mode)
    if kind == "array":
        n, elem, esize = lay[1], lay[2], lay[3]
        return "[" + ",".join(_render_bytes(elem, data[i * esize:(i + 1) * esize], mode) for i in range(n)) + "]"
    if kind == "record":
        return _record([(name, _render_bytes(fl, data[off:off + size], mode)) for name, off, fl, size in lay[1]],
                       mode)
    return str(int.from_bytes(data[:8].ljust(8, b"\0"), "little", signed=True))


def _str(s: str, mode: str) -> str:
    """A string-like value (a string, stack, symbol, buffer) in ``mode``."""
    return quoted(s) if mode == JSON else json_escape(s) if mode == JKEY else s


def _record(items: Sequence[tuple[str, str]], mode: str) -> str:
    if mode in (JSON, JKEY):
        return "{ " + ", ".join(f'"{n}": {v}' for n, v in items) + " }"
    return "{ " + ", ".join(f".{n} = {v}" for n, v in items) + " }"


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _render_obj(lay: tuple, value: Any, mode: str) -> str:
    """A decoded value (dicts, dataclasses, lists, ints, strings) printed with a BTF layout."""
    if isinstance(value, (bytes, bytearray, memoryview)) and lay[0] != "none":
        return _render_bytes(lay, bytes(value), mode)
    kind = lay[0]
    if kind == "record":
        return _record([(name, _render_obj(fl, _field(value, name), mode)) for name, _, fl, _ in lay[1]], mode)
    if kind == "array":
        items = list(value) if value is not None else []
        items += [None] * (lay[1] - len(items))
        return "[" + ",".join(_render_obj(lay[2], v, mode) for v in items[: lay[1]]) + "]"
    if kind == "str":
        return _str("" if value is None else str(value), mode)
    v = int(value or 0)
    if kind == "ptr":
        v &= _M64
        return str(v) if mode in (JSON, JKEY) else f"0x{v:x}"
    if kind == "bits":
        return str(v)
    if kind == "enum":
        v = _signed(v, lay[1] * 8) if lay[2] else v & ((1 << lay[1] * 8) - 1)
        return str(v) if mode == JSON else lay[3].get(v, str(v))
    if kind == "int":
        bits = lay[1] * 8
        v &= (1 << bits) - 1
        return str(_signed(v, bits) if lay[2] or mode in (KEY, JKEY) else v)
    return str(v)


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def format_btf(data: Any, spec: Spec, type_id: int, *, json: bool = False, key: bool = False) -> str:
    """A value of BTF type ``type_id`` (its bytes, or a decoded dict/dataclass/list) as bpftrace prints it."""
    return _format_btf(data, spec, type_id, (JKEY if json else KEY) if key else JSON if json else TEXT)


def _format_btf(data: Any, spec: Spec, type_id: int, mode: str) -> str:
    lay = btf_layout(spec, type_id)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _render_bytes(lay, bytes(data), mode)
    return _render_obj(lay, data, mode)


# -- values of the trace language ----------------------------------------------------------------

def format_mac(raw: bytes) -> str:
    """macaddr()'s value as bpftrace prints it: six bytes in upper-case hex, colon-separated."""
    return ":".join(f"{b:02X}" for b in raw[:6])


def format_inet(raw: bytes) -> str:
    """ntop()'s value (the address family as 8 bytes, then 16 address bytes) as bpftrace prints it:
    inet_ntop's text for AF_INET and AF_INET6, nothing for another family."""
    import socket

    af = int.from_bytes(raw[:8], "little", signed=True)
    if af == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[8:12])
    if af == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24])
    return ""


def stack_text(frames: Sequence[str] | str, indent: int = 8) -> str:
    """A kstack/ustack as bpftrace prints one: a newline, then each frame indented, each on its line."""
    if isinstance(frames, str):
        return frames
    pad = " " * indent
    return "\n" + "".join(f"{pad}{f}\n" for f in frames)


def is_stack_type(t: Any) -> bool:
    """Whether values of trace type ``t`` print as stacks or symbols (bpftrace joins those without newlines)."""
    name = type(t).__name__
    return name == "Stack" or (name == "Int" and getattr(t, "display", "") in ("ksym", "usym"))


def _tname(t: Any) -> str:
    return type(t).__name__ if t is not None else ""


def _render(value: Any, t: Any, mode: str) -> str:
    name = _tname(t)
    spec = getattr(t, "spec", None)
    if name == "Record" and spec is not None and getattr(t, "btf_id", 0):
        return _format_btf(value, spec, t.btf_id, mode)
    if name == "Array" and spec is not None and getattr(t, "elem_id", 0):
        elem = btf_layout(spec, t.elem_id)
        lay = ("array", t.count, elem, t.elem_size)
        return _render_bytes(lay, bytes(value), mode) if isinstance(value, (bytes, bytearray)) \
            else _render_obj(lay, value, mode)
    if name == "Stack" or (isinstance(value, list) and value and all(isinstance(f, str) for f in value)
                           and name in ("", "Stack")):
        return _str(stack_text(value, 8), mode)
    if name == "Str" and isinstance(value, (bytes, bytearray)):
        value = _cstr(bytes(value))
    if name == "Ptr":   # in hex as bpftrace 0.21+ prints one (a value, a tuple's element, a key); json: a number,
        v = int(value) & _M64   # unsigned as 0.23.2 writes it (0.17: signed)
        return str(v) if mode in (JSON, JKEY) else f"0x{v:x}"
    if name == "Bool" and isinstance(value, int) and mode not in (JSON, JKEY):
        return "true" if value else "false"
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if name == "Enum" and mode != JSON:     # an enum's value by its name, as bpftrace 0.21+ (json: the number)
            v = int(value)
            return t.names().get(v, str(_signed(v, 64) if mode in (KEY, JKEY) else v))
        if name == "Int" and getattr(t, "display", "") in ("ksym", "usym"):
            s = f"0x{value & _M64:x}" if value else "0"     # an unresolved symbol: C++'s (void *)addr
            return _str(s, mode)
        return str(_signed(value, 64)) if mode in (KEY, JKEY) else str(int(value))   # int(): an EnumValue's number
    if isinstance(value, str):
        return _str(value, mode)
    if isinstance(value, (bytes, bytearray)):
        return _str(hex_buffer(bytes(value)), mode)
    if isinstance(value, tuple):       # a tuple inside a key prints as a value (bpftrace's is_map_key=false)
        mode = {KEY: TEXT, JKEY: JSON}.get(mode, mode)
        types = getattr(t, "elems", None) or (None,) * len(value)
        elems = [_render(v, et, mode) for v, et in zip(value, types)]
        names = getattr(t, "names", ())
        if names:       # a record (bpftrace 0.25): upstream's tests/runtime/record and json-output
            if mode == JSON:
                return "{" + ", ".join(f'"{n}": {v}' for n, v in zip(names, elems)) + "}"
            return "{ " + ", ".join(f".{n} = {v}" for n, v in zip(names, elems)) + " }"
        return "[" + ",".join(elems) + "]" if mode == JSON else "(" + ", ".join(elems) + ")"
    if isinstance(value, list):
        return "[" + ",".join(_render(v, None, mode) for v in value) + "]"
    if isinstance(value, Mapping):
        return _record([(str(k), _render(v, None, mode)) for k, v in value.items()], mode)
    if hasattr(type(value), "__dataclass_fields__"):   # dataclasses.is_dataclass, without importing it
        import dataclasses

        return _record([(f.name, _render(getattr(value, f.name), None, mode))
                        for f in dataclasses.fields(value)], mode)
    if value is None:
        return ""
    return str(value)


def format_value(value: Any, t: Any = None, *, json: bool = False) -> str:
    """print(value) without its newline: ints, strings, stacks, tuples, structs (bytes + Record type).

    ``t`` is the value's trace type (:mod:`pycore.lang.types`); without one
    the Python value decides (a list of strings is a stack, a tuple a tuple).
    With ``json`` the text is what goes after ``"data": `` in ``-f json``.
    """
    return _render(value, t, JSON if json else TEXT)


def format_key(key: Sequence[Any], key_types: Sequence[Any] | None = None, *, json: bool = False) -> list[str]:
    """Each element of a map key as bpftrace 0.23.2 prints keys (ints signed 64-bit, pointers in hex;
    ``json``: the json key rendering, see the module's docstring)."""
    types = list(key_types or ())
    mode = JKEY if json else KEY
    return [_render(v, types[i] if i < len(types) else None, mode) for i, v in enumerate(key)]


def format_fields(fields: Mapping[str, Any], types: Sequence[Any] | Mapping[str, Any] | None = None, *,
                  json: bool = False) -> str:
    """Named values printed as a bpftrace record, ``{ .a = 1, .b = x }``: print(args).

    bpftrace 0.17 refuses print(args) for tracepoints; this is the record
    shape it uses for every struct, which later versions print for args.
    """
    if isinstance(types, Mapping):
        tlist = [types.get(n) for n in fields]
    else:
        tlist = list(types or ()) + [None] * len(fields)
    mode = JSON if json else TEXT
    return _record([(n, _member(v, tlist[i], mode)) for i, (n, v) in enumerate(fields.items())], mode)


def _member(value: Any, t: Any, mode: str) -> str:
    """A record's member: a pointer in hex in text, as struct members print (the lab's print(args))."""
    if _tname(t) == "Ptr" and mode == TEXT:
        return f"0x{int(value) & _M64:x}"
    return _render(value, t, mode)
