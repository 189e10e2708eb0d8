"""An ELF file's section headers and small sections, read with ``struct``.

Opening a file with pyelftools parses its header, program and section
headers through construct (~20 ms for libc and its debug file together);
finding a binary's debug file and the key of a cached DWARF entry
(:mod:`pycore.elf.dwarf`) needs only a few section headers, the build-id
note and ``.gnu_debuglink``.  :class:`Sections` reads those, and answers the
part of pyelftools' ``ELFFile`` that :func:`pycore.elf.debugfile.build_id` and
:func:`~pycore.elf.debugfile.debug_file` use (``get_section_by_name(name)``
-> a section with ``data()`` and ``["sh_type"]``/``["sh_size"]``,
``little_endian``).  Section data is returned as stored (not decompressed):
notes and debuglinks never are compressed.

Anything impossible (truncated headers, a table past the end of the file)
is an :class:`~pycore.errors.ElfError` (tests/test_elf_fuzz.py).
"""

from __future__ import annotations

import os
import struct

from pycore.errors import ElfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Sections"]

_SHT = {0: "SHT_NULL", 1: "SHT_PROGBITS", 2: "SHT_SYMTAB", 3: "SHT_STRTAB", 7: "SHT_NOTE", 8: "SHT_NOBITS",
        11: "SHT_DYNSYM"}
MAX_SECTIONS = 65536


class Section:
    """One section header: ``name``, its fields as ``sec["sh_type"]`` (pyelftools' names
    for the common types, else the number), ``sec["sh_size"]``, ``sec["sh_offset"]``..."""

    __slots__ = ("_owner", "name", "_fields")

    def __init__(self, owner: Sections, name: str, fields: dict[str, int | str]) -> None:
        self._owner = owner
        self.name = name
        self._fields = fields

    def __getitem__(self, field: str) -> Any:  # noqa: ANN401 - an int, or sh_type's name
        return self._fields[field]

    def data(self) -> bytes:
        """The section's bytes as the file holds them (b"" for SHT_NOBITS)."""
        if self._fields["sh_type"] == "SHT_NOBITS":
            return b""
        return self._owner.read(int(self._fields["sh_offset"]), int(self._fields["sh_size"]), self.name)


class Sections:
    """The section headers of the ELF file at ``path`` (read at once; ``close()`` it or use ``with``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._f = open(path, "rb")
        except OSError as e:
            raise ElfError(f"{path}: {e.strerror or e}") from None
        try:
            self._size = os.fstat(self._f.fileno()).st_size
            self._read_headers()
        except BaseException:
            self._f.close()
            raise

    def _bad(self, why: str) -> ElfError:
        return ElfError(f"{self.path}: malformed ELF: {why}")

    def read(self, offset: int, size: int, what: str = "data") -> bytes:
        if offset < 0 or size < 0 or offset + size > self._size:
            raise self._bad(f"{what} at {offset:#x}+{size:#x} runs past the end of the file ({self._size:#x})")
        try:
            data = os.pread(self._f.fileno(), size, offset)
        except OSError as e:
            raise ElfError(f"{self.path}: {e.strerror or e}") from None
        if len(data) != size:
            raise self._bad(f"{what} at {offset:#x} cut short")
        return data

    def _read_headers(self) -> None:
        ident = os.pread(self._f.fileno(), 64, 0)
        if ident[:4] != b"\x7fELF":
            raise ElfError(f"{self.path}: not an ELF file")
        if len(ident) < 52 or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise self._bad("bad ELF header")
        self.wide = ident[4] == 2
        self.little_endian = ident[5] == 1
        e = "<" if self.little_endian else ">"
        if self.wide:
            if len(ident) < 64:
                raise self._bad("ELF header cut short")
            shoff, = struct.unpack_from(e + "Q", ident, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", ident, 0x3A)
            fmt, want = e + "IIQQQQIIQQ", 64
        else:
            shoff, = struct.unpack_from(e + "I", ident, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", ident, 0x2E)
            fmt, want = e + "IIIIIIIIII", 40
        self._sections: list[Section] = []
        self._by_name: dict[str, Section] | None = None
        if shoff == 0:
            return
        if shentsize < want:
            raise self._bad(f"section header size {shentsize}")
        first = self.read(shoff, want, "section header 0")
        if shnum == 0:                       # more than 0xff00 sections: the count is in section 0
            shnum = struct.unpack_from(fmt, first)[5]
        if shstrndx == 0xFFFF:               # SHN_XINDEX
            shstrndx = struct.unpack_from(fmt, first)[6]
        if not 0 < shnum <= MAX_SECTIONS:
            raise self._bad(f"{shnum} sections")
        table = self.read(shoff, shnum * shentsize, "section headers")
        raw = [struct.unpack_from(fmt, table, i * shentsize) for i in range(shnum)]
        if not 0 <= shstrndx < shnum:
            raise self._bad(f"section name table index {shstrndx} of {shnum} sections")
        s = raw[shstrndx]
        names = self.read(s[4], s[5], "section name table") if s[1] != 8 else b""
        for (name, typ, flags, addr, off, size, link, info, align, entsize) in raw:
            end = names.find(b"\0", name)
            text = names[name:end].decode("utf-8", "replace") if 0 <= name < len(names) and end >= 0 else ""
            self._sections.append(Section(self, text, {
                "sh_name": name, "sh_type": _SHT.get(typ, typ), "sh_flags": flags, "sh_addr": addr,
                "sh_offset": off, "sh_size": size, "sh_link": link, "sh_info": info,
                "sh_addralign": align, "sh_entsize": entsize}))

    def section(self, index: int) -> Section | None:
        """Section number ``index``, None when there is no such section."""
        return self._sections[index] if 0 <= index < len(self._sections) else None

    def get_section_by_name(self, name: str) -> Section | None:
        """The section called ``name`` (the last of that name, as pyelftools), None when there is none."""
        if self._by_name is None:
            self._by_name = {sec.name: sec for sec in self._sections}
        return self._by_name.get(name)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Sections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
