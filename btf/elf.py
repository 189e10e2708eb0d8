"""Sections and symbols of an ELF object, read with ``struct``.

Opening one of our ``.bpf.o`` files must be quick (the whole import, open,
load and attach budget is 60 ms) and importing pyelftools alone costs more
than that.  BTF needs two things from ELF, the ``.BTF`` section and (for
globals) the symbol table, so this module reads just the section headers
and symbols; every offset is bounds-checked and bad input raises BtfError.
pycore's uprobe and USDT code, which reads arbitrary user binaries, uses
pyelftools.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import BtfError

ELF_MAGIC = b"\x7fELF"
SHT_SYMTAB = 2
SHT_NOBITS = 8
STT_OBJECT = 1


class Section(NamedTuple):
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


class Symbol(NamedTuple):
    name: str
    value: int
    size: int
    type: int
    binding: int
    shndx: int


class ElfObject:
    """The section table of an ELF file held in memory."""

    def __init__(self, data: bytes, name: str = "<bytes>") -> None:
        self.data = data
        self.name = name
        if len(data) < 16 or data[:4] != ELF_MAGIC:
            raise BtfError(f"{name}: not an ELF file")
        ei_class, ei_data = data[4], data[5]
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            raise BtfError(f"{name}: malformed ELF: bad class {ei_class} or data encoding {ei_data}")
        self.is64 = ei_class == 2
        self.order = "<" if ei_data == 1 else ">"
        o = self.order
        if self.is64:
            hdr = self._unpack(o + "HHIQQQIHHHHHH", 16, "ELF header")
            shoff, shentsize, shnum, shstrndx = hdr[5], hdr[10], hdr[11], hdr[12]
            sh_fmt = o + "IIQQQQIIQQ"
        else:
            hdr = self._unpack(o + "HHIIIIIHHHHHH", 16, "ELF header")
            shoff, shentsize, shnum, shstrndx = hdr[5], hdr[10], hdr[11], hdr[12]
            sh_fmt = o + "IIIIIIIIII"
        if shnum and shentsize < struct.calcsize(sh_fmt):
            raise BtfError(f"{name}: malformed ELF: section header size {shentsize}")
        raw = []
        for i in range(shnum):
            sh = self._unpack(sh_fmt, shoff + i * shentsize, f"section header {i}")
            # name, type, flags, addr, offset, size, link, info, addralign, entsize
            raw.append((sh[0], sh[1], sh[4], sh[5], sh[6], sh[9]))
        if raw and not 0 <= shstrndx < len(raw):
            raise BtfError(f"{name}: malformed ELF: section name table index {shstrndx}")
        names = self._contents(raw[shstrndx][2], raw[shstrndx][3], "section names") if raw else b""
        self.sections = [Section(_cstr(names, r[0]), r[1], r[2], r[3], r[4], r[5]) for r in raw]

    def _unpack(self, fmt: str, offset: int, what: str) -> tuple:
        try:
            return struct.unpack_from(fmt, self.data, offset)
        except (struct.error, OverflowError):
            raise BtfError(f"{self.name}: malformed ELF: {what} at {offset:#x} is out of bounds") from None

    def _contents(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or offset + size > len(self.data):
            raise BtfError(f"{self.name}: malformed ELF: {what} ({offset:#x}+{size:#x}) is past the end")
        return self.data[offset:offset + size]

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def contents(self, section: Section) -> bytes:
        if section.type == SHT_NOBITS:
            return b""
        return self._contents(section.offset, section.size, f"section {section.name}")

    def symbols(self) -> list[Symbol]:
        """Every entry of ``.symtab`` (empty if there is none)."""
        symtab = next((s for s in self.sections if s.type == SHT_SYMTAB), None)
        if symtab is None:
            return []
        if not 0 <= symtab.link < len(self.sections):
            raise BtfError(f"{self.name}: malformed ELF: symbol string table index {symtab.link}")
        strtab = self.contents(self.sections[symtab.link])
        body = self.contents(symtab)
        fmt = self.order + ("IBBHQQ" if self.is64 else "IIIBBH")
        size = struct.calcsize(fmt)
        out = []
        for (entry,) in zip(range(len(body) // size)):
            f = struct.unpack_from(fmt, body, entry * size)
            if self.is64:
                name, info, _other, shndx, value, sym_size = f
            else:
                name, value, sym_size, info, _other, shndx = f
            out.append(Symbol(_cstr(strtab, name), value, sym_size, info & 0xF, info >> 4, shndx))
        return out


def _cstr(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        return ""
    end = table.find(b"\x00", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def btf_section(data: bytes, name: str = "<bytes>") -> bytes:
    """The raw bytes of the ``.BTF`` section; BtfError if there is none or the ELF is bad."""
    elf = ElfObject(data, name)
    section = elf.section(".BTF")
    if section is None:
        raise BtfError(f"{name}: ELF file has no .BTF section (build with clang -g)")
    if section.type == SHT_NOBITS:
        raise BtfError(f"{name}: .BTF section has no contents")
    return elf.contents(section)
