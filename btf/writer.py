"""Write BTF blobs: the encoder beside :mod:`btf.spec`'s decoder.

pycore uses it for types that come from elsewhere than the kernel (a trace
script's C declarations as split BTF on top of vmlinux, a binary's DWARF as a
BTF of its own) so that every reader of a :class:`btf.Spec` works on them
unchanged; the tests
use it for kinds and corner cases no compiler on this machine emits (ENUM64,
odd header lengths, big endian).

Each method appends one type record and returns its id.  Ids are handed out
in order, so a record may refer to one not yet added (``b.next_id + 1``):
that is how the tests build cycles.
"""

from __future__ import annotations

import struct

from .kinds import Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from .spec import Spec

MAGIC = 0xEB9F


class Writer:
    """One BTF blob.  ``base`` makes it split BTF: ids and string offsets
    continue from the base builder's."""

    def __init__(self, base: Writer | None = None, byteorder: str = "little") -> None:
        self.base = base
        self.byteorder = byteorder
        self._fmt = "<" if byteorder == "little" else ">"
        self._records: list[bytes] = []
        self.first_id = base.next_id if base is not None else 1
        self._str_start = base.strings_len() if base is not None else 0
        # Base BTF starts its string table with the empty string; split BTF
        # starts right where the base's ends.
        self._strings = bytearray(b"\0" if base is None else b"")
        self._str_offsets: dict[str, int] = {"": 0} if base is None else dict(base._str_offsets)

    # -- strings --------------------------------------------------------

    def string(self, s: str) -> int:
        """The offset of ``s`` in the string table, adding it if new."""
        off = self._str_offsets.get(s)
        if off is None:
            off = self._str_start + len(self._strings)
            self._strings += s.encode() + b"\0"
            self._str_offsets[s] = off
        return off

    def strings_len(self) -> int:
        return self._str_start + len(self._strings)

    # -- records --------------------------------------------------------

    @classmethod
    def split(cls, base: Spec) -> Writer:
        """A writer of split BTF on top of a parsed spec (vmlinux): its ids and
        string offsets continue from the spec's, so its records may refer to
        the spec's types by id."""
        w = cls()
        w.first_id = len(base)
        w._str_start = len(base.strings)
        w._strings = bytearray()
        w._str_offsets = {"": 0}
        return w

    def spec(self, base: Spec | None, shadows: bool = True) -> Spec:
        """The blob parsed on top of ``base`` (the spec given to :meth:`split`; None for
        a writer made without one).

        ``shadows``: a name this blob defines hides the base's types of that
        name in look-ups by name, as a C declaration hides the kernel's."""
        from .spec import Spec

        out = Spec(self.build(), base=base)
        out.shadows = shadows
        return out

    @property
    def next_id(self) -> int:
        return self.first_id + len(self._records)

    def record(self, kind: int, name: str | int = 0, vlen: int = 0, kflag: int = 0,
               size_or_type: int = 0, extra: Sequence[int] = ()) -> int:
        """Any record, valid or not: ``name`` is a string or a raw offset."""
        name_off = self.string(name) if isinstance(name, str) else name
        info = ((kflag & 1) << 31) | ((kind & 0x1F) << 24) | (vlen & 0xFFFF)
        words = [name_off, info, size_or_type, *extra]
        self._records.append(struct.pack(f"{self._fmt}{len(words)}I", *(w & 0xFFFFFFFF for w in words)))
        return self.next_id - 1

    def int(self, name: str, size: int, bits: int | None = None, offset: int = 0,
            signed: bool = False, char: bool = False, bool_: bool = False) -> int:
        enc = (1 if signed else 0) | (2 if char else 0) | (4 if bool_ else 0)
        bits = size * 8 if bits is None else bits
        return self.record(Kind.INT, name, size_or_type=size, extra=[(enc << 24) | (offset << 16) | bits])

    def ptr(self, to: int) -> int:
        return self.record(Kind.PTR, size_or_type=to)

    def const(self, to: int) -> int:
        return self.record(Kind.CONST, size_or_type=to)

    def volatile(self, to: int) -> int:
        return self.record(Kind.VOLATILE, size_or_type=to)

    def restrict(self, to: int) -> int:
        return self.record(Kind.RESTRICT, size_or_type=to)

    def typedef(self, name: str, to: int) -> int:
        return self.record(Kind.TYPEDEF, name, size_or_type=to)

    def type_tag(self, tag: str, to: int) -> int:
        return self.record(Kind.TYPE_TAG, tag, size_or_type=to)

    def array(self, elem: int, index: int, nelems: int) -> int:
        return self.record(Kind.ARRAY, extra=[elem, index, nelems])

    def struct(self, name: str, size: int, members: Iterable[tuple], kflag: bool | None = None,
               union: bool = False) -> int:
        """``members``: (name, type, bit_offset) or (name, type, bit_offset, bitfield_size).
        kflag defaults to on when any member is a bitfield."""
        members = [m if len(m) == 4 else (*m, 0) for m in members]
        if kflag is None:
            kflag = any(m[3] for m in members)
        extra: list[int] = []
        for mname, mtype, off, bits in members:
            extra += [self.string(mname), mtype, (bits << 24) | off if kflag else off]
        return self.record(Kind.UNION if union else Kind.STRUCT, name, len(members), int(kflag), size, extra)

    def union(self, name: str, size: int, members: Iterable[tuple], kflag: bool | None = None) -> int:
        return self.struct(name, size, members, kflag, union=True)

    def enum(self, name: str, values: Iterable[tuple[str, int]], size: int = 4, signed: bool = False) -> int:
        values = list(values)
        extra: list[int] = []
        for vname, v in values:
            extra += [self.string(vname), v & 0xFFFFFFFF]
        return self.record(Kind.ENUM, name, len(values), int(signed), size, extra)

    def enum64(self, name: str, values: Iterable[tuple[str, int]], size: int = 8, signed: bool = False) -> int:
        values = list(values)
        extra: list[int] = []
        for vname, v in values:
            v &= (1 << 64) - 1
            extra += [self.string(vname), v & 0xFFFFFFFF, v >> 32]
        return self.record(Kind.ENUM64, name, len(values), int(signed), size, extra)

    def fwd(self, name: str, union: bool = False) -> int:
        return self.record(Kind.FWD, name, kflag=int(union))

    def func_proto(self, ret: int, params: Iterable[tuple[str, int]] = (), varargs: bool = False) -> int:
        params = list(params) + ([("", 0)] if varargs else [])
        extra: list[int] = []
        for pname, ptype in params:
            extra += [self.string(pname), ptype]
        return self.record(Kind.FUNC_PROTO, vlen=len(params), size_or_type=ret, extra=extra)

    def func(self, name: str, proto: int, linkage: int = 1) -> int:
        return self.record(Kind.FUNC, name, vlen=linkage, size_or_type=proto)

    def var(self, name: str, type_id: int, linkage: int = 1) -> int:
        return self.record(Kind.VAR, name, size_or_type=type_id, extra=[linkage])

    def datasec(self, name: str, size: int, vars: Iterable[tuple[int, int, int]]) -> int:
        """``vars``: (var type id, offset, size)."""
        vars = list(vars)
        extra = [w for v in vars for w in v]
        return self.record(Kind.DATASEC, name, len(vars), size_or_type=size, extra=extra)

    def float(self, name: str, size: int) -> int:
        return self.record(Kind.FLOAT, name, size_or_type=size)

    def decl_tag(self, tag: str, type_id: int, component_idx: int = -1) -> int:
        return self.record(Kind.DECL_TAG, tag, size_or_type=type_id, extra=[component_idx])

    # -- the blob -------------------------------------------------------

    def type_section(self) -> bytes:
        return b"".join(self._records)

    def string_section(self) -> bytes:
        return bytes(self._strings)

    def build(self, hdr_len: int = 24, strings_first: bool = False, gap: int = 0,
              flags: int = 0, version: int = 1) -> bytes:
        """The blob: header (zero-filled up to ``hdr_len``), then the sections,
        types first unless ``strings_first``, ``gap`` zero bytes between them."""
        types, strs = self.type_section(), self.string_section()
        if strings_first:
            str_off, type_off = 0, len(strs) + gap
            type_off += -type_off % 4
            body = strs + b"\0" * (type_off - len(strs)) + types
        else:
            type_off, str_off = 0, len(types) + gap
            body = types + b"\0" * gap + strs
        header = struct.pack(f"{self._fmt}HBBIIIII", MAGIC, version, flags, hdr_len,
                             type_off, len(types), str_off, len(strs))
        return header + b"\0" * (hdr_len - len(header)) + body
