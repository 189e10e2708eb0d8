"""BTF types as Python values and back, generated from the BTF alone.

Nothing is declared twice by hand: a struct's Python class (a slotted
dataclass), its enums (``enum.IntEnum``) and its binary layout all come from
the object's BTF.

Decoding is the hot path (ring buffers carry millions of events a second), so
each type is compiled once into

- one :class:`struct.Struct` that unpacks every leaf (int, float, pointer,
  enum, char/byte array, scalar array, bitfield storage unit) at its offset,
  padding the gaps with ``x``; and
- one generated builder function (source kept in :attr:`Codec.source`) that
  turns the unpacked tuple into the value: dataclass constructors, ``str``
  for char arrays, shifts and masks for bitfields, enum lookups.

Leaves that overlap (union members, bitfields of mixed storage types) are
unpacked once as a ``bytes`` region and taken apart by small per-leaf
structs: correct, slower, and only for the types that need it.

Encoding is not compiled: it serves map updates and globals, not streams.

This module is over 600 lines and stays one: it is one concept (BTF type to
Python value and back), and the compiler and the encoder share every
per-kind rule.
Fields that share bytes (members of unions, anonymous or not) default to
None and are written only when set, in member order, so ``U(word=1)``
encodes ``word`` and a decoded union re-encodes to the same bytes.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import keyword
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import starmap
from typing import Any

from btf import layout
from btf import types as T
from btf.kinds import Kind

from pycore.errors import PycoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec

__all__ = ["Codec", "UnsupportedType", "decoder_for", "codec_registry"]

_INT_FMT = {(1, False): "B", (1, True): "b", (2, False): "H", (2, True): "h",
            (4, False): "I", (4, True): "i", (8, False): "Q", (8, True): "q"}
_FLOAT_FMT = {2: "e", 4: "f", 8: "d"}
_NUMPY_INT = {(1, False): "u1", (1, True): "i1", (2, False): "<u2", (2, True): "<i2",
              (4, False): "<u4", (4, True): "<i4", (8, False): "<u8", (8, True): "<i8"}
_COMPOSITE = (Kind.STRUCT, Kind.UNION)
# A composite whose compiled builder gets longer than this many leaves is
# still correct, just a long generated function; arrays of structs are the
# usual cause.
_ITEM_RE = re.compile(r"@(\d+)\.(\d+|\*)@")


class UnsupportedType(PycoreError, TypeError):
    """A BTF type has no Python value (function, forward declaration, ...)."""


def _cstr(b: bytes) -> str:
    """C string in a char array: up to the first NUL, UTF-8 with replacement."""
    n = b.find(b"\0")
    return (b if n < 0 else b[:n]).decode("utf-8", "replace")


def _camel(name: str) -> str:
    parts = [p for p in name.split("_") if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or name


def _field_name(name: str, taken: set[str]) -> str:
    """A C member name as a Python identifier (keywords get a trailing ``_``)."""
    if keyword.iskeyword(name) or name in ("self",):
        name += "_"
    base, n = name, 1
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


class _Leaf:
    """One item (or run of items) of the compiled struct format."""

    __slots__ = ("offset", "fmt", "size", "count", "index", "region", "region_fn")

    def __init__(self, offset: int, fmt: str) -> None:
        self.offset = offset
        self.fmt = fmt
        self.size = struct.calcsize("=" + fmt)
        self.count = len(struct.unpack("=" + fmt, bytes(self.size)))
        self.index = -1            # first tuple index (direct leaves)
        self.region: _Leaf | None = None  # the bytes region holding it (overlaps)
        self.region_fn = ""        # name of its unpack_from in the namespace


class _Compiler:
    """Compiles one root type: collects leaves and the builder expression."""

    def __init__(self, registry: CodecRegistry) -> None:
        self.reg = registry
        self.leaves: dict[tuple[int, str], int] = {}
        self.leaf_list: list[_Leaf] = []
        self.ns: dict[str, Any] = {"_cstr": _cstr}

    def leaf(self, offset: int, fmt: str) -> int:
        key = (offset, fmt)
        k = self.leaves.get(key)
        if k is None:
            k = self.leaves[key] = len(self.leaf_list)
            self.leaf_list.append(_Leaf(offset, fmt))
        return k

    def name(self, prefix: str, obj: Any, hint: str = "") -> str:
        """A readable name for ``obj`` in the builder's namespace."""
        for k, v in self.ns.items():
            if v is obj:
                return k
        n = f"{prefix}{hint}" if hint else f"{prefix}{len(self.ns)}"
        while n in self.ns:
            n += "_"
        self.ns[n] = obj
        return n

    # -- expressions ----------------------------------------------------

    def expr(self, t: T.Type, off: int) -> str:
        t = layout.skip(t)
        k = t.kind
        if k == Kind.INT:
            return self.int_expr(t, off)
        if k in (Kind.ENUM, Kind.ENUM64):
            fmt = _INT_FMT.get((t.size, t.signed))
            if fmt is None:
                raise UnsupportedType(f"enum {t.name or t.id}: size {t.size}")
            v = f"@{self.leaf(off, fmt)}.0@"
            cls = self.reg.enum_class(t)
            m = self.name("_", cls._value2member_map_, cls.__name__ + "_values")
            return f"{m}.get({v}, {v})"
        if k == Kind.PTR:
            return f"@{self.leaf(off, 'Q')}.0@"
        if k == Kind.FLOAT:
            fmt = _FLOAT_FMT.get(t.size)
            if fmt is None:
                raise UnsupportedType(f"float {t.name}: {t.size}-byte floats have no Python type")
            return f"@{self.leaf(off, fmt)}.0@"
        if k == Kind.ARRAY:
            return self.array_expr(t, off)
        if k in _COMPOSITE:
            cls = self.reg.composite(t).cls
            args = [e for _, e in self.fields(t, off)]
            return f"{self.name('', cls, cls.__name__)}({', '.join(args)})"
        raise UnsupportedType(self.reg.unsupported(t))

    def int_expr(self, t: T.Int, off: int) -> str:
        if t.bits != t.size * 8 or t.bit_offset:
            return self.bitfield_expr(t, off * 8 + t.bit_offset, t.bits, off + t.size)
        fmt = "?" if t.is_bool and t.size == 1 else _INT_FMT.get((t.size, t.signed))
        if fmt is None:  # __int128
            v = f"@{self.leaf(off, f'{t.size}s')}.0@"
            return f"int.from_bytes({v}, 'little', signed={t.signed})"
        return f"@{self.leaf(off, fmt)}.0@"

    def array_expr(self, t: T.Array, off: int) -> str:
        elem = layout.skip(t.type)
        n = t.nelems
        if n == 0:
            return "[]"
        if elem.kind == Kind.INT and elem.size == 1 and elem.bits == 8:
            if _is_char(elem):
                return f"_cstr(@{self.leaf(off, f'{n}s')}.0@)"
            if not elem.signed and not elem.is_bool:
                return f"@{self.leaf(off, f'{n}s')}.0@"
        if elem.kind in (Kind.INT, Kind.PTR, Kind.FLOAT) and not (elem.kind == Kind.INT and elem.is_bool):
            fmt = ("Q" if elem.kind == Kind.PTR else _FLOAT_FMT.get(elem.size) if elem.kind == Kind.FLOAT
                   else _INT_FMT.get((elem.size, elem.signed)))
            if fmt is not None and (elem.kind != Kind.INT or elem.bits == elem.size * 8):
                return f"list(@{self.leaf(off, f'{n}{fmt}')}.*@)"
        size = layout.sizeof(elem)
        return "[" + ", ".join(self.expr(elem, off + i * size) for i in range(n)) + "]"

    def bitfield_expr(self, t: T.Type, bitpos: int, bits: int, bound: int) -> str:
        """Bits [bitpos, bitpos+bits) from the start of the root buffer."""
        base = layout.skip(t)
        tsz = base.size
        signed = bool(getattr(base, "signed", False))
        unit = (bitpos // (8 * tsz)) * tsz
        if unit * 8 + 8 * tsz < bitpos + bits or unit + tsz > bound or tsz not in (1, 2, 4, 8):
            unit = bitpos // 8
            usz = (bitpos + bits + 7) // 8 - unit
        else:
            usz = tsz
        fmt = _INT_FMT.get((usz, False))
        if fmt is None:
            v = f"int.from_bytes(@{self.leaf(unit, f'{usz}s')}.0@, 'little')"
        else:
            v = f"@{self.leaf(unit, fmt)}.0@"
        shift = bitpos - unit * 8
        e = f"({v} >> {shift}) & {(1 << bits) - 1:#x}" if shift else f"{v} & {(1 << bits) - 1:#x}"
        if signed and bits > 1:
            h = 1 << (bits - 1)
            e = f"(({e}) ^ {h:#x}) - {h:#x}"
        elif signed:  # a signed 1-bit field holds 0 or -1
            e = f"-({e})"
        if base.kind in (Kind.ENUM, Kind.ENUM64):
            m = self.name("_", self.reg.enum_lookup(base), self.reg.enum_class(base).__name__)
            return f"{m}({e})"
        if base.kind == Kind.INT and base.is_bool:
            return f"bool({e})"
        return f"({e})"

    def fields(self, t: T.Composite, off: int) -> list[tuple[str, str]]:
        """(Python name, expression) of each field, anonymous members flattened."""
        comp = self.reg.composite(t)
        out = []
        for f in comp.fields:
            if f.bits:
                out.append((f.name, self.bitfield_expr(f.type, off * 8 + f.bitpos, f.bits, off + t.size)))
            else:
                out.append((f.name, self.expr(f.type, off + f.bitpos // 8)))
        return out

    # -- assembly ---------------------------------------------------------

    def finish(self, root: str, size: int) -> tuple[str, str, int]:
        """Lay the leaves out, resolve placeholders; returns (format body, source, items)."""
        order = sorted(self.leaf_list, key=lambda lf: (lf.offset, -lf.size))
        regions: list[_Leaf] = []
        groups: list[list[_Leaf]] = []
        group_end = 0
        for lf in order:
            if groups and lf.offset < group_end:
                groups[-1].append(lf)
                group_end = max(group_end, lf.offset + lf.size)
            else:
                groups.append([lf])
                group_end = lf.offset + lf.size
        fmt, pos, index = [], 0, 0
        for g in groups:
            start = g[0].offset
            end = max(x.offset + x.size for x in g)
            if start > pos:
                fmt.append(f"{start - pos}x")
            if len(g) == 1:
                fmt.append(g[0].fmt)
                g[0].index = index
                index += g[0].count
            else:
                region = _Leaf(start, f"{end - start}s")
                region.index = index
                index += 1
                fmt.append(region.fmt)
                regions.append(region)
                for lf in g:
                    lf.region = region
                    rel = lf.offset - start
                    s = struct.Struct("=" + (f"{rel}x" if rel else "") + lf.fmt)
                    lf.region_fn = self.name("_unpack", s.unpack_from, f"_{lf.offset}_{lf.fmt}")
            pos = end
        if size > pos:
            fmt.append(f"{size - pos}x")
        elif pos > size:
            raise UnsupportedType(f"leaves run past the type's size ({pos} > {size})")

        leaves = self.leaf_list

        def item(m: re.Match[str]) -> str:
            lf = leaves[int(m.group(1))]
            j = m.group(2)
            if lf.region is not None:
                call = f"{lf.region_fn}(t[{lf.region.index}])"
                return call if j == "*" else f"{call}[{j}]"
            if j == "*":
                return f"t[{lf.index}:{lf.index + lf.count}]"
            return f"t[{lf.index + int(j)}]"

        body = _ITEM_RE.sub(item, root)
        return "".join(fmt), body, index


def _is_char(t: T.Type) -> bool:
    """C ``char`` (text) as opposed to ``unsigned char``/``__u8`` (bytes)."""
    return t.kind == Kind.INT and (t.is_char or t.name == "char")


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str          # Python name
    c_name: str        # C member name
    type: T.Type
    bitpos: int        # bit offset from the composite's start
    bits: int          # bitfield width, 0 if not a bitfield
    in_union: bool     # shares its bytes with other fields: default None, skipped when None


class _Composite:
    """A struct or union's flattened fields and generated dataclass."""

    def __init__(self, fields: list[_Field], cls: type) -> None:
        self.fields = fields
        self.cls = cls


class Codec:
    """Decoder/encoder of one BTF type.  Build with :func:`decoder_for`.

    ``struct_format`` is the compiled format (``=`` byte order, standard
    sizes, no implicit alignment) whose :meth:`struct.Struct.unpack` gives
    the tuple :meth:`decode_iter` takes; ``leaf_format`` is the same without
    the byte-order character, for callers that prepend a record header.
    """

    def __init__(self, registry: CodecRegistry, t: T.Type) -> None:
        self.registry = registry
        self.type = t
        self.spec = registry.spec
        resolved = layout.skip(t)
        self.name = t.name or resolved.name or f"type {t.id}"
        self.size = layout.sizeof(t)
        if self.size == 0 and resolved.kind != Kind.ARRAY:
            raise UnsupportedType(registry.unsupported(resolved))
        self.cls: type | None = registry.composite(resolved).cls if resolved.kind in _COMPOSITE else None
        c = _Compiler(registry)
        root = c.expr(t, 0)
        self.leaf_format, body, self.items = c.finish(root, self.size)
        self.struct_format = "=" + self.leaf_format
        self.struct = struct.Struct(self.struct_format)
        assert self.struct.size == self.size, (self.struct_format, self.size)
        self._ns = c.ns
        self._body = body
        self.source = f"def build(t):\n    return {body}\n"
        self._builders: dict[int, Callable[[tuple], Any]] = {}
        self._build = self.builder(0)
        self._unpack_from = self.struct.unpack_from
        # A struct whose fields are its leaves, in order, with no conversion:
        # the class itself is the builder (starmap, no Python frame per record).
        direct = ", ".join(f"t[{i}]" for i in range(self.items))
        self._starmap_cls = (self.cls is not None and body == f"{_name_of(c.ns, self.cls)}({direct})")

    # -- decoding -------------------------------------------------------

    def builder(self, start: int = 0) -> Callable[[tuple], Any]:
        """The function tuple -> value, for tuples whose item ``start`` is the first leaf."""
        fn = self._builders.get(start)
        if fn is None:
            body = self._body
            if start:
                body = re.sub(r"\bt\[(\d+)(:(\d+))?\]",
                              lambda m: f"t[{int(m.group(1)) + start}"
                              + (f":{int(m.group(3)) + start}" if m.group(2) else "") + "]", body)
            src = f"def build(t):\n    return {body}\n"
            ns = dict(self._ns)
            exec(compile(src, f"<pycore.native.codec {self.name}>", "exec"), ns)
            fn = self._builders[start] = ns["build"]
        return fn

    def decode(self, buf: Any, offset: int = 0) -> Any:
        """The value at ``offset`` of ``buf`` (bytes, bytearray, memoryview, cffi buffer)."""
        return self._build(self._unpack_from(buf, offset))

    def decode_iter(self, tuples: Iterable[tuple], start: int = 0) -> Iterator[Any]:
        """Values from already-unpacked tuples (``start``: index of the first leaf,
        e.g. 2 when a caller's format begins with a two-item record header)."""
        if start == 0 and self._starmap_cls:
            return starmap(self.cls, tuples)  # type: ignore[arg-type]
        return map(self.builder(start), tuples)

    def decode_many(self, buf: Any, count: int, stride: int | None = None, offset: int = 0) -> list[Any]:
        """``count`` values at ``offset + i * stride`` (stride defaults to the size)."""
        stride = self.size if stride is None else stride
        if count <= 0:
            return []
        if stride < self.size:
            raise ValueError(f"{self.name}: stride {stride} is smaller than the size {self.size}")
        view = memoryview(buf).cast("B")
        need = offset + (count - 1) * stride + self.size
        if len(view) < need:
            raise ValueError(f"{self.name}: buffer of {len(view)} bytes holds fewer than {count} records")
        s = self.struct if stride == self.size else self.registry.padded_struct(self, stride)
        full = count if len(view) >= offset + count * stride else count - 1
        # A million new objects trigger the cyclic GC dozens of times, and it
        # walks them all each time: pausing it triples throughput.  They hold
        # no cycles, so nothing is lost by collecting later.
        paused = count >= 1000 and gc.isenabled()
        if paused:
            gc.disable()
        try:
            out = list(self.decode_iter(s.iter_unpack(view[offset:offset + full * stride])))
        finally:
            if paused:
                gc.enable()
        if full < count:
            out.append(self.decode(view, offset + full * stride))
        return out

    # -- encoding -------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """Bytes of ``value``: the type's Python value, a dict, a tuple, or bytes of the size."""
        if isinstance(value, (bytes, bytearray, memoryview)) and not self._is_text_or_bytes():
            b = bytes(value)
            if len(b) != self.size:
                raise ValueError(f"{self.name}: {len(b)} bytes given, the type has {self.size}")
            return b
        buf = bytearray(self.size)
        self.registry.pack(self.type, buf, 0, value, self.name)
        return bytes(buf)

    def pack_into(self, buf: bytearray | memoryview, offset: int, value: Any) -> None:
        self.registry.pack(self.type, buf, offset, value, self.name)

    def _is_text_or_bytes(self) -> bool:
        r = layout.skip(self.type)
        return r.kind == Kind.ARRAY and layout.skip(r.type).kind == Kind.INT and layout.skip(r.type).size == 1

    # -- numpy ------------------------------------------------------------

    def numpy_dtype(self) -> Any:
        """A numpy structured dtype with this layout (bitfields left out: numpy has none)."""
        try:
            import numpy as np
        except ImportError:
            raise ImportError("Codec.numpy_dtype() needs numpy: pip install 'pycore-bpf[numpy]'") from None
        return np.dtype(self.registry.dtype_spec(self.type))

    def __repr__(self) -> str:
        return f"<Codec {self.name} size={self.size} format={self.struct_format!r}>"


def _name_of(ns: dict[str, Any], obj: Any) -> str:
    for k, v in ns.items():
        if v is obj:
            return k
    return "?"


class CodecRegistry:
    """Codecs, dataclasses and enums of one BTF spec, each made once.

    Sharing them matters: a value read from two maps of the same struct type
    is of one class, so it compares equal.
    """

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._codecs: dict[int, Codec] = {}
        self._composites: dict[int, _Composite] = {}
        self._enums: dict[int, type[enum.IntEnum]] = {}
        self._padded: dict[tuple[int, int], struct.Struct] = {}
        self._given: dict[int, type] = {}

    def use_classes(self, classes: dict[int, type]) -> None:
        """Decode these BTF types (id -> class) to the given dataclasses and IntEnums
        instead of generated ones: a typed skeleton's classes (:mod:`pycore.skel`).

        Call before any codec of the spec is made; each class is checked
        against the BTF (fields in order, enum members) when first used, and a
        mismatch is a ValueError saying what differs."""
        made = [i for i in classes if i in self._composites or i in self._enums]
        if made:
            raise ValueError(f"use_classes: BTF types {made} already have classes (call it before decoding)")
        self._given.update(classes)

    def codec(self, t: T.Type) -> Codec:
        c = self._codecs.get(t.id)
        if c is None:
            c = self._codecs[t.id] = Codec(self, t)
        return c

    def padded_struct(self, codec: Codec, stride: int) -> struct.Struct:
        key = (codec.type.id, stride)
        s = self._padded.get(key)
        if s is None:
            s = self._padded[key] = struct.Struct(codec.struct_format + f"{stride - codec.size}x")
        return s

    def unsupported(self, t: T.Type) -> str:
        what = {Kind.FWD: "a forward declaration (incomplete type)", Kind.FUNC: "a function",
                Kind.FUNC_PROTO: "a function prototype", Kind.UNKN: "void", Kind.VAR: "a variable",
                Kind.DATASEC: "a data section"}.get(t.kind, t.kind.name.lower())
        return f"BTF type {t.id} {t.name!r} is {what}: it has no Python value"

    # -- enums ------------------------------------------------------------

    def enum_class(self, t: T.Enum) -> type[enum.IntEnum]:
        cls = self._enums.get(t.id)
        if cls is None:
            name = _camel(t.name) if t.name else f"Enum{t.id}"
            members = [(v.name, v.value) for v in t.values if v.name.isidentifier()]
            given = self._given.get(t.id)
            if given is not None:
                btf_members = dict(members)
                wrong = [m.name for m in given if btf_members.get(m.name) != m.value]  # type: ignore[attr-defined]
                if not issubclass(given, enum.IntEnum) or wrong:
                    raise ValueError(f"{given.__name__} does not match BTF enum {t.name or t.id} "
                                     f"(members {', '.join(wrong) or 'not an IntEnum'})")
                self._enums[t.id] = given
                return given
            cls = enum.IntEnum(name, members or [("_EMPTY", 0)])  # type: ignore[misc]
            cls.__doc__ = f"BTF enum {t.name or '(anonymous)'} (type {t.id})"
            self._enums[t.id] = cls
        return cls

    def enum_lookup(self, t: T.Enum) -> Callable[[int], Any]:
        return partial(_enum_get, self.enum_class(t)._value2member_map_)

    # -- composites ---------------------------------------------------------

    def composite(self, t: T.Composite, hint: str = "") -> _Composite:
        """Fields and dataclass of a struct/union; ``hint`` names an anonymous one."""
        comp = self._composites.get(t.id)
        if comp is not None:
            return comp
        fields: list[_Field] = []
        taken: set[str] = set()
        is_union = t.kind == Kind.UNION
        self._flatten(t, 0, fields, taken, is_union)
        given = self._given.get(t.id)
        if given is not None:
            have = [f.name for f in dataclasses.fields(given)] if dataclasses.is_dataclass(given) else None
            if have != [f.name for f in fields]:
                raise ValueError(f"{given.__name__} does not match BTF {'union' if is_union else 'struct'} "
                                 f"{t.name or t.id}: fields {have} != {[f.name for f in fields]}")
            comp = self._composites[t.id] = _Composite(fields, given)
            return comp
        specs = []
        for f in fields:
            if f.in_union:
                specs.append((f.name, Any, dataclasses.field(default=None)))
            else:
                specs.append((f.name, Any, self._default(f)))
        base = _camel(t.name) if t.name else hint or f"Anon{t.id}"
        # unsafe_hash: values stay mutable (edit, write back) and keys can key dicts
        cls = dataclasses.make_dataclass(base, specs, slots=True, unsafe_hash=True)
        cls.__doc__ = (f"BTF {'union' if is_union else 'struct'} {t.name or '(anonymous)'} "
                       f"(type {t.id}, {t.size} bytes)")
        cls.__module__ = __name__
        comp = self._composites[t.id] = _Composite(fields, cls)
        return comp

    def _flatten(self, t: T.Composite, bitbase: int, out: list[_Field], taken: set[str], in_union: bool) -> None:
        for m in t.members:
            mt = layout.skip(m.type)
            pos = bitbase + m.bit_offset
            bits = m.bitfield_size
            if not bits and mt.kind == Kind.INT and (mt.bits != mt.size * 8 or mt.bit_offset):
                pos, bits = pos + mt.bit_offset, mt.bits  # pre-kflag bitfield encoding
            if not m.name:
                if mt.kind in _COMPOSITE and not bits:
                    self._flatten(mt, pos, out, taken, in_union or mt.kind == Kind.UNION)  # C reads its members as the parent's
                continue  # unnamed bitfield: padding
            out.append(_Field(_field_name(m.name, taken), m.name, m.type, pos, bits, in_union))
            if mt.kind in _COMPOSITE and not mt.name:
                self.composite(mt, _camel(t.name or "anon") + _camel(m.name))

    def _default(self, f: _Field) -> Any:
        if f.bits:
            base = layout.skip(f.type)
            if base.kind in (Kind.ENUM, Kind.ENUM64):
                return dataclasses.field(default=_enum_get(self.enum_class(base)._value2member_map_, 0))
            return dataclasses.field(default=False if base.kind == Kind.INT and base.is_bool else 0)
        codec = self.codec(f.type)
        zero = codec.decode(bytes(codec.size))
        if isinstance(zero, (int, float, str, bytes, type(None))):
            return dataclasses.field(default=zero)
        return dataclasses.field(default_factory=partial(codec.decode, bytes(codec.size)))

    # -- encoding -------------------------------------------------------------

    def pack(self, t: T.Type, buf: Any, off: int, value: Any, where: str) -> None:
        r = layout.skip(t)
        k = r.kind
        try:
            if k == Kind.INT:
                if r.bits != r.size * 8 or r.bit_offset:
                    _put_bits(buf, off * 8 + r.bit_offset, r.bits, int(value))
                elif r.is_bool and r.size == 1:
                    struct.pack_into("?", buf, off, bool(value))
                elif (r.size, r.signed) in _INT_FMT:
                    struct.pack_into("=" + _INT_FMT[r.size, r.signed], buf, off, int(value))
                else:
                    buf[off:off + r.size] = int(value).to_bytes(r.size, "little", signed=r.signed)
            elif k in (Kind.ENUM, Kind.ENUM64):
                if isinstance(value, str):
                    value = self.enum_class(r)[value]
                struct.pack_into("=" + _INT_FMT[r.size, r.signed], buf, off, int(value))
            elif k == Kind.PTR:
                struct.pack_into("=Q", buf, off, int(value))
            elif k == Kind.FLOAT:
                struct.pack_into("=" + _FLOAT_FMT[r.size], buf, off, float(value))
            elif k == Kind.ARRAY:
                self._pack_array(r, buf, off, value, where)
            elif k in _COMPOSITE:
                self._pack_composite(r, buf, off, value, where)
            else:
                raise UnsupportedType(self.unsupported(r))
        except (struct.error, OverflowError, KeyError) as exc:
            raise ValueError(f"{where}: cannot encode {value!r} as {_c_name(t)}: {exc}") from None

    def _pack_array(self, r: T.Array, buf: Any, off: int, value: Any, where: str) -> None:
        elem = layout.skip(r.type)
        n = r.nelems
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, (bytes, bytearray, memoryview)) and elem.kind == Kind.INT and elem.size == 1:
            b = bytes(value)
            if len(b) > n:
                raise ValueError(f"{where}: {len(b)} bytes do not fit in {_c_name(r)}")
            buf[off:off + len(b)] = b
            buf[off + len(b):off + n] = bytes(n - len(b))
            return
        value = list(value)
        if len(value) > n:
            raise ValueError(f"{where}: {len(value)} elements do not fit in {_c_name(r)}")
        size = layout.sizeof(elem)
        for i, v in enumerate(value):
            self.pack(elem, buf, off + i * size, v, f"{where}[{i}]")

    def _pack_composite(self, r: T.Composite, buf: Any, off: int, value: Any, where: str) -> None:
        comp = self.composite(r)
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) != r.size:
                raise ValueError(f"{where}: {len(value)} bytes given, {_c_name(r)} has {r.size}")
            buf[off:off + r.size] = value
            return
        if isinstance(value, dict):
            names = {f.name for f in comp.fields} | {f.c_name for f in comp.fields}
            unknown = set(value) - names
            if unknown:
                raise ValueError(f"{where}: {_c_name(r)} has no field {', '.join(sorted(unknown))} "
                                 f"(fields: {', '.join(f.name for f in comp.fields)})")
            get = lambda f: value.get(f.name, value.get(f.c_name))  # noqa: E731
        elif isinstance(value, tuple) and not isinstance(value, comp.cls):
            if len(value) > len(comp.fields):
                raise ValueError(f"{where}: {len(value)} values for {len(comp.fields)} fields of {_c_name(r)}")
            value = dict(zip((f.name for f in comp.fields), value))
            get = lambda f: value.get(f.name)  # noqa: E731
        elif dataclasses.is_dataclass(value):
            get = lambda f: getattr(value, f.name, None)  # noqa: E731
        else:
            raise ValueError(f"{where}: cannot encode {type(value).__name__} {value!r} as {_c_name(r)} "
                             f"(give {comp.cls.__name__}, a dict, a tuple or bytes)")
        for f in comp.fields:
            v = get(f)
            if v is None:
                continue  # absent: zero (or, in a union, another member's bytes)
            if f.bits:
                base = layout.skip(f.type)
                if isinstance(v, str) and base.kind in (Kind.ENUM, Kind.ENUM64):
                    v = self.enum_class(base)[v]
                _put_bits(buf, off * 8 + f.bitpos, f.bits, int(v), where=f"{where}.{f.name}")
            else:
                self.pack(f.type, buf, off + f.bitpos // 8, v, f"{where}.{f.name}")

    # -- numpy ------------------------------------------------------------------

    def dtype_spec(self, t: T.Type) -> Any:
        r = layout.skip(t)
        k = r.kind
        if k == Kind.INT:
            if r.is_bool and r.size == 1:
                return "?"
            if (r.size, r.signed) not in _NUMPY_INT:
                return f"V{r.size}"
            return _NUMPY_INT[r.size, r.signed]
        if k in (Kind.ENUM, Kind.ENUM64):
            return _NUMPY_INT[r.size, r.signed]
        if k == Kind.PTR:
            return "<u8"
        if k == Kind.FLOAT:
            return f"<f{r.size}"
        if k == Kind.ARRAY:
            elem = layout.skip(r.type)
            if elem.kind == Kind.INT and elem.size == 1 and _is_char(elem):
                return f"S{r.nelems}"
            return (self.dtype_spec(elem), (r.nelems,))
        if k in _COMPOSITE:
            comp = self.composite(r)
            names, formats, offsets = [], [], []
            for f in comp.fields:
                if f.bits:
                    continue
                names.append(f.name)
                formats.append(self.dtype_spec(f.type))
                offsets.append(f.bitpos // 8)
            return {"names": names, "formats": formats, "offsets": offsets, "itemsize": r.size}
        raise UnsupportedType(self.unsupported(r))


def _enum_get(members: dict[int, Any], v: int) -> Any:
    return members.get(v, v)


def _put_bits(buf: Any, bitpos: int, bits: int, value: int, where: str = "") -> None:
    lo, hi = bitpos // 8, (bitpos + bits + 7) // 8
    shift = bitpos - lo * 8
    mask = (1 << bits) - 1
    if not -(1 << bits) < value <= mask:
        raise ValueError(f"{where}: {value} does not fit in a {bits}-bit field")
    word = int.from_bytes(buf[lo:hi], "little")
    word = (word & ~(mask << shift)) | ((value & mask) << shift)
    buf[lo:hi] = word.to_bytes(hi - lo, "little")


def _c_name(t: T.Type) -> str:
    r = layout.skip(t)
    kind = {Kind.STRUCT: "struct ", Kind.UNION: "union ", Kind.ENUM: "enum ", Kind.ENUM64: "enum "}.get(r.kind, "")
    if t.name:
        return (kind if t is r else "") + t.name
    if r.kind == Kind.ARRAY:
        return f"{_c_name(r.type)}[{r.nelems}]"
    return f"{kind}(anonymous type {r.id})"


# One registry per spec, kept on the spec itself so that it goes with it.  (A
# module-level WeakKeyDictionary cannot do that: the registry, its codecs and
# their types all refer to the spec, so the weak key never died and every
# BpfObject ever opened stayed in memory, about 50 kB each.)
_REGISTRY_ATTR = "_pycore_codec_registry"


def codec_registry(spec: Spec) -> CodecRegistry:
    """The (shared) registry of codecs for ``spec``."""
    reg = getattr(spec, _REGISTRY_ATTR, None)
    if reg is None:
        reg = CodecRegistry(spec)
        setattr(spec, _REGISTRY_ATTR, reg)
    return reg


_NAMED_KINDS = (Kind.STRUCT, Kind.UNION, Kind.TYPEDEF, Kind.ENUM, Kind.ENUM64, Kind.INT, Kind.FLOAT)
_PREFIX = {"struct": (Kind.STRUCT,), "union": (Kind.UNION,), "enum": (Kind.ENUM, Kind.ENUM64)}


def decoder_for(spec: Spec, type_or_id_or_name: T.Type | int | str) -> Codec:
    """The codec of a BTF type given as a type, an id, or a name
    (``"tm_value"``, ``"struct tm_value"``, ``"__u32"``)."""
    t = type_or_id_or_name
    if isinstance(t, str):
        word, _, rest = t.partition(" ")
        kinds = _PREFIX.get(word) if rest else None
        name = rest.strip() if kinds else t
        ids = spec.ids_named(name, kinds or _NAMED_KINDS)
        if not ids:
            raise KeyError(f"no BTF type named {t!r}")
        # a struct over a typedef of the same name; otherwise the first
        ids.sort(key=lambda i: (spec.kind(i) not in _COMPOSITE, i))
        t = spec.type(ids[0])
    elif isinstance(t, int):
        t = spec.type(t)
    return codec_registry(spec).codec(t)
