"""A fast reader of DIEs, for the one pass that indexes a whole file's DWARF.

pyelftools decodes each DIE through construct, ~40 µs a DIE: the 307k
DIEs the index pass of libc's debug file reads cost 12 s that way.  This
reader decodes the same bytes with ``struct`` and one dispatch on the form
code, ~8x faster, and hands out DIEs with the part of pyelftools' interface
that :mod:`pycore.elf.dwarfbtf`'s helpers use (``tag``, ``attributes`` with
``.value``/``.form``, ``offset``, ``has_children``, ``iter_children()``,
``get_DIE_from_attribute()``), so ``die_name`` and ``bpftrace_type_name``
read either.  It reads the sections pyelftools has already loaded
(decompressed); the BTF conversion still reads DIEs with pyelftools.

DWARF 2 to 5, 32- and 64-bit units, every form of DWARF 5 and the GNU
extensions gcc writes.  A reference to a type unit (``DW_FORM_ref_sig8``)
or the supplementary file is not followed (None).  Anything impossible
raises ValueError (turned into ElfError by the caller).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = ["Scanner", "Unit", "Die", "type_units"]

_REFS = frozenset((0x11, 0x12, 0x13, 0x14, 0x15))   # ref1/2/4/8/udata: unit-relative
_FORM_NAMES: dict[int, str] = {}
_TAG_NAMES: dict[int, str] = {}
_AT_NAMES: dict[int, str] = {}


def _names() -> None:
    if not _TAG_NAMES:
        from pycore.elf.dwarfnames import ATTRIBUTES, FORMS, TAGS   # pyelftools' names, without its import

        _TAG_NAMES.update(TAGS)
        _AT_NAMES.update(ATTRIBUTES)
        _FORM_NAMES.update(FORMS)


class Attr:
    __slots__ = ("value", "form")

    def __init__(self, value: object, form: str) -> None:
        self.value = value
        self.form = form


class Die:
    """One DIE: what :mod:`pycore.elf.dwarfbtf` reads of pyelftools' DIE."""

    __slots__ = ("unit", "offset", "end", "tag", "has_children", "attributes", "refs")

    def __init__(self, unit: Unit, offset: int) -> None:
        self.unit = unit
        self.offset = offset

    def get_DIE_from_attribute(self, name: str) -> Die | None:  # noqa: N802 - pyelftools' name
        target = self.refs.get(name)
        if target is None:
            a = self.attributes.get(name)
            if a is not None and a.form == "DW_FORM_ref_sig8" and self.unit.scanner.follow_signatures:
                return self.unit.scanner.by_signature(a.value)
            return None
        unit = self.unit
        if unit.die_start <= target < unit.end:
            return unit.die_at(target)
        return unit.scanner.die_at(target)

    def iter_children(self) -> Iterator[Die]:
        if not self.has_children:
            return
        unit = self.unit
        pos = self.end
        while True:
            child = unit.die_at(pos)
            if child is None:
                return
            yield child
            pos = unit.after(child)


class Unit:
    """One unit of .debug_info: header, abbreviations, and its DIEs decoded once each."""

    def __init__(self, scanner: Scanner, offset: int) -> None:
        info = scanner.info
        _U16, _U32, _U64 = scanner.u16, scanner.u32, scanner.u64
        self.scanner = scanner
        self.offset = offset
        length = _U32.unpack_from(info, offset)[0]
        pos = offset + 4
        self.offset_size = 4
        if length == 0xFFFFFFFF:
            length = _U64.unpack_from(info, pos)[0]
            pos += 8
            self.offset_size = 8
        elif length >= 0xFFFFFFF0:
            raise ValueError(f"unit at {offset:#x}: reserved length {length:#x}")
        self.end = pos + length
        if self.end > len(info) or length < 7:
            raise ValueError(f"unit at {offset:#x}: length {length:#x} runs past .debug_info")
        self.version = _U16.unpack_from(info, pos)[0]
        pos += 2
        if not 2 <= self.version <= 5:
            raise ValueError(f"unit at {offset:#x}: DWARF version {self.version}")
        unpack_off = _U32.unpack_from if self.offset_size == 4 else _U64.unpack_from
        self.unit_type = 1
        if self.version >= 5:
            self.unit_type = info[pos]
            self.address_size = info[pos + 1]
            abbrev = unpack_off(info, pos + 2)[0]
            pos += 2 + self.offset_size
            if self.unit_type in (4, 5):          # skeleton, split_compile: dwo_id
                pos += 8
            elif self.unit_type in (2, 6):        # type units: signature, type offset
                pos += 8 + self.offset_size
        else:
            abbrev = unpack_off(info, pos)[0]
            self.address_size = info[pos + self.offset_size]
            pos += self.offset_size + 1
        if self.address_size not in (2, 4, 8):
            raise ValueError(f"unit at {offset:#x}: address size {self.address_size}")
        self.die_start = pos
        self.abbrevs = scanner.abbrev_table(abbrev)
        self.str_offsets_base = -1               # strx read as b"" until the unit DIE gives it
        self._dies: dict[int, Die | None] = {}
        top = self.die_at(pos)
        base = top.attributes.get("DW_AT_str_offsets_base") if top is not None else None
        self.str_offsets_base = base.value if base is not None else 8 if self.offset_size == 4 else 16
        self._dies.clear()
        self.top = self.die_at(pos)

    def release(self) -> None:
        """Drop the DIEs read (each refers back to its unit: a cycle the collector
        would otherwise free only in its own time, 20 MB later for libc)."""
        self._dies.clear()
        self.top = None

    def die_at(self, pos: int) -> Die | None:
        """The DIE at section offset ``pos``, None for a null entry (end of siblings)."""
        try:
            return self._dies[pos]
        except KeyError:
            pass
        if not self.die_start <= pos < self.end:
            raise ValueError(f"DIE offset {pos:#x} outside its unit {self.offset:#x}..{self.end:#x}")
        die = self._decode(pos)
        self._dies[pos] = die
        return die

    def after(self, die: Die) -> int:
        """Where the DIE after ``die`` and its children starts."""
        if not die.has_children:
            return die.end
        sib = die.refs.get("DW_AT_sibling")
        if sib is not None:
            if sib <= die.offset:
                raise ValueError(f"DIE at {die.offset:#x}: sibling {sib:#x} points back")
            return sib
        pos = die.end
        while True:
            child = self.die_at(pos)
            if child is None:
                return self._null_end(pos)
            pos = self.after(child)

    def _null_end(self, pos: int) -> int:
        return pos + 1          # a null entry is the single byte 0 (uleb 0)

    def _decode(self, pos: int) -> Die | None:  # noqa: C901 - one dispatch on the form, for speed
        info = self.scanner.info
        _U16, _U32, _U64 = self.scanner.u16, self.scanner.u32, self.scanner.u64
        order = self.scanner.byteorder
        code, p = _uleb(info, pos)
        if code == 0:
            return None
        try:
            tag, has_children, specs = self.abbrevs[code]
        except KeyError:
            raise ValueError(f"DIE at {pos:#x}: no abbreviation {code}") from None
        die = Die(self, pos)
        die.tag = tag
        die.has_children = has_children
        attrs: dict[str, Attr] = {}
        refs: dict[str, int] = {}
        osize = self.offset_size
        scanner = self.scanner
        for at, form, const in specs:
            while form == 0x16:                   # indirect: the form is in the DIE
                form, p = _uleb(info, p)
            if form in _REFS:
                if form == 0x13:
                    v = _U32.unpack_from(info, p)[0]
                    p += 4
                elif form == 0x11:
                    v = info[p]
                    p += 1
                elif form == 0x12:
                    v = _U16.unpack_from(info, p)[0]
                    p += 2
                elif form == 0x14:
                    v = _U64.unpack_from(info, p)[0]
                    p += 8
                else:
                    v, p = _uleb(info, p)
                refs[at] = self.offset + v
            elif form == 0x0e or form == 0x1f:    # strp, line_strp
                off = _U32.unpack_from(info, p)[0] if osize == 4 else _U64.unpack_from(info, p)[0]
                p += osize
                v = scanner.string(scanner.str if form == 0x0e else scanner.line_str, off)
            elif form == 0x0b:                    # data1
                v = info[p]
                p += 1
            elif form == 0x21:                    # implicit_const
                v = const
            elif form == 0x19:                    # flag_present
                v = True
            elif form == 0x05:
                v = _U16.unpack_from(info, p)[0]
                p += 2
            elif form == 0x06:
                v = _U32.unpack_from(info, p)[0]
                p += 4
            elif form == 0x07:
                v = _U64.unpack_from(info, p)[0]
                p += 8
            elif form == 0x17 or form == 0x10 and self.version > 2 or form in (0x1d, 0x1f20, 0x1f21):
                v = _U32.unpack_from(info, p)[0] if osize == 4 else _U64.unpack_from(info, p)[0]
                p += osize
                if form == 0x10:
                    refs[at] = v
            elif form == 0x01 or form == 0x10:    # addr; ref_addr of DWARF 2 (address sized)
                size = self.address_size
                v = int.from_bytes(info[p:p + size], order)
                p += size
                if form == 0x10:
                    refs[at] = v
            elif form == 0x0f or form in (0x1b, 0x22, 0x23, 0x1f01):   # udata, addrx, loclistx, rnglistx
                v, p = _uleb(info, p)
            elif form == 0x0d:
                v, p = _sleb(info, p)
            elif form == 0x0c:
                v = bool(info[p])
                p += 1
            elif form == 0x08:                    # string, in place
                end = info.index(b"\0", p, self.end)
                v = info[p:end]
                p = end + 1
            elif form in (0x18, 0x09, 0x0a, 0x03, 0x04):    # exprloc, blocks
                if form == 0x0a:
                    n, p = info[p], p + 1
                elif form == 0x03:
                    n, p = _U16.unpack_from(info, p)[0], p + 2
                elif form == 0x04:
                    n, p = _U32.unpack_from(info, p)[0], p + 4
                else:
                    n, p = _uleb(info, p)
                v = info[p:p + n]
                p += n
            elif form in (0x1a, 0x25, 0x26, 0x27, 0x28, 0x1f02):    # strx
                if form == 0x1a or form == 0x1f02:
                    idx, p = _uleb(info, p)
                else:
                    n = form - 0x24
                    idx = int.from_bytes(info[p:p + n], order)
                    p += n
                v = scanner.strx(self, idx)
            elif form in (0x29, 0x2a, 0x2b, 0x2c):                  # addrx1..4
                n = form - 0x28
                v = int.from_bytes(info[p:p + n], order)
                p += n
            elif form == 0x1e:
                v = info[p:p + 16]
                p += 16
            elif form in (0x20, 0x24):            # ref_sig8, ref_sup8: not followed
                v = _U64.unpack_from(info, p)[0]
                p += 8
            elif form == 0x1c:                    # ref_sup4
                v = _U32.unpack_from(info, p)[0]
                p += 4
            else:
                raise ValueError(f"DIE at {pos:#x}: unknown form {form:#x}")
            if p > self.end:
                raise ValueError(f"DIE at {pos:#x} runs past its unit")
            attrs[at] = Attr(v, _FORM_NAMES.get(form, str(form)))
        die.attributes = attrs
        die.refs = refs
        die.end = p
        return die


class Scanner:
    """The sections of one file's DWARF, as pyelftools loaded them (``dw``: a DWARFInfo)."""

    follow_signatures = False       # a DW_FORM_ref_sig8 read as None (the index pass), else followed

    def __init__(self, dw) -> None:  # noqa: ANN001
        def data(sec) -> bytes:  # noqa: ANN001
            return b"" if sec is None else sec.stream.getvalue()[:sec.size]

        self._setup(data(dw.debug_info_sec), data(dw.debug_abbrev_sec), data(dw.debug_str_sec),
                    data(dw.debug_line_str_sec), data(dw.debug_str_offsets_sec), dw.config.little_endian)

    @classmethod
    def from_sections(cls, data: dict[str, bytes], little_endian: bool) -> Scanner:
        """A scanner of sections read elsewhere (name -> bytes, ``.debug_info``...), which
        follows DW_FORM_ref_sig8 to the type units of .debug_info (the file has no .debug_types)."""
        self = cls.__new__(cls)
        self._setup(data.get(".debug_info", b""), data.get(".debug_abbrev", b""), data.get(".debug_str", b""),
                    data.get(".debug_line_str", b""), data.get(".debug_str_offsets", b""), little_endian)
        self.follow_signatures = True
        return self

    def _setup(self, info: bytes, abbrev: bytes, strs: bytes, line_str: bytes, str_offsets: bytes,
               little_endian: bool) -> None:
        _names()
        self.info = info
        self.abbrev = abbrev
        self.str = strs
        self.line_str = line_str
        self.str_offsets = str_offsets
        self._abbrevs: dict[int, dict[int, tuple]] = {}
        self._signatures: dict[int, tuple[int, int]] | None = None
        self.byteorder = "little" if little_endian else "big"
        e = "<" if little_endian else ">"
        self.u16, self.u32, self.u64 = struct.Struct(e + "H"), struct.Struct(e + "I"), struct.Struct(e + "Q")
        self.foreign: dict[int, Unit] = {}       # units reached by DW_FORM_ref_addr (LTO, dwz)
        self._starts: list[int] | None = None

    def units(self) -> Iterator[Unit]:
        off = 0
        while off < len(self.info):
            unit = Unit(self, off)
            yield unit
            off = unit.end

    def unit(self, offset: int) -> Unit:
        """The unit at .debug_info offset ``offset``, read once."""
        unit = self.foreign.get(offset)
        if unit is None:
            unit = self.foreign[offset] = Unit(self, offset)
        return unit

    def die_at(self, offset: int) -> Die | None:
        """The DIE at a .debug_info offset in any unit (a DW_FORM_ref_addr's target)."""
        import bisect

        if self._starts is None:
            starts, off = [], 0
            while off + 4 <= len(self.info):
                starts.append(off)
                length = self.u32.unpack_from(self.info, off)[0]
                off += 4 + length if length != 0xFFFFFFFF else 12 + self.u64.unpack_from(self.info, off + 4)[0]
            self._starts = starts
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            raise ValueError(f"DIE offset {offset:#x} in no unit")
        start = self._starts[i]
        unit = self.foreign.get(start)
        if unit is None:
            unit = self.foreign[start] = Unit(self, start)
        return unit.die_at(offset)

    def by_signature(self, sig: int) -> Die | None:
        """The type DIE of the .debug_info type unit of signature ``sig`` (KeyError: none)."""
        if self._signatures is None:
            self._signatures = _type_units(self.info, self.byteorder == "little")
        where = self._signatures.get(sig)
        if where is None:
            raise KeyError(f"no type unit of signature {sig:#x}")
        return self.die_at(where[1])

    def abbrev_table(self, offset: int) -> dict[int, tuple[str, bool, list[tuple[str, int, int]]]]:
        """code -> (tag name, has children, [(attribute name, form, implicit const)])."""
        table = self._abbrevs.get(offset)
        if table is not None:
            return table
        data = self.abbrev
        if not 0 <= offset < len(data):
            raise ValueError(f"abbreviation table at {offset:#x} outside .debug_abbrev")
        table = {}
        p = offset
        while True:
            code, p = _uleb(data, p)
            if code == 0:
                break
            tag, p = _uleb(data, p)
            children = data[p]
            p += 1
            specs = []
            while True:
                at, p = _uleb(data, p)
                form, p = _uleb(data, p)
                if at == 0 and form == 0:
                    break
                const = 0
                if form == 0x21:
                    const, p = _sleb(data, p)
                specs.append((_AT_NAMES.get(at, f"DW_AT_{at:#x}"), form, const))
            table[code] = (_TAG_NAMES.get(tag, f"DW_TAG_{tag:#x}"), bool(children), specs)
        self._abbrevs[offset] = table
        return table

    def forget_abbrevs(self) -> None:
        self._abbrevs.clear()

    @staticmethod
    def string(section: bytes, offset: int) -> bytes:
        end = section.find(b"\0", offset)
        if end < 0:
            raise ValueError(f"string at {offset:#x}: no NUL before the end of its section")
        return section[offset:end]

    def strx(self, unit: Unit, index: int) -> bytes:
        size = unit.offset_size
        if unit.str_offsets_base < 0:
            return b""
        at = unit.str_offsets_base + index * size
        if at + size > len(self.str_offsets):
            raise ValueError(f"string index {index} outside .debug_str_offsets")
        return self.string(self.str, int.from_bytes(self.str_offsets[at:at + size], self.byteorder))


def _uleb(data: bytes, p: int) -> tuple[int, int]:
    b = data[p]
    if b < 0x80:
        return b, p + 1
    out, shift = b & 0x7F, 7
    while True:
        p += 1
        b = data[p]
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, p + 1
        shift += 7
        if shift > 70:
            raise ValueError("LEB128 number too long")


def _sleb(data: bytes, p: int) -> tuple[int, int]:
    out, shift = 0, 0
    while True:
        b = data[p]
        p += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (out - (1 << shift) if b & 0x40 else out), p
        if shift > 70:
            raise ValueError("LEB128 number too long")


def type_units(dw) -> dict[int, tuple[int, int]]:  # noqa: ANN001
    """DWARF 5 type units of .debug_info: signature -> (unit offset, offset of its type
    DIE), from the unit headers alone."""
    sec = dw.debug_info_sec
    if sec is None:
        return {}
    return _type_units(sec.stream.getvalue()[:sec.size], dw.config.little_endian)


def _type_units(info: bytes, little_endian: bool) -> dict[int, tuple[int, int]]:
    e = "<" if little_endian else ">"
    u16, u32, u64 = struct.Struct(e + "H"), struct.Struct(e + "I"), struct.Struct(e + "Q")
    out: dict[int, tuple[int, int]] = {}
    off = 0
    while off + 11 <= len(info):
        length, pos, osize = u32.unpack_from(info, off)[0], off + 4, 4
        if length == 0xFFFFFFFF:
            length, pos, osize = u64.unpack_from(info, pos)[0], pos + 8, 8
        end = pos + length
        if end > len(info) or length < 7:
            break
        if u16.unpack_from(info, pos)[0] >= 5 and info[pos + 2] in (2, 6):   # DW_UT_type, split_type
            at = pos + 4 + osize                    # version, unit type, address size, abbrev offset
            sig = u64.unpack_from(info, at)[0]
            type_off = (u32 if osize == 4 else u64).unpack_from(info, at + 8)[0]
            out[sig] = (off, off + type_off)
        off = end
    return out
