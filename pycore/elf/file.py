"""An executable or shared library that users point pycore at: what every
reader here needs of it, in one place (the header, segments and symbol tables
read with struct, the rest with pyelftools when first needed).

USDT notes (:mod:`pycore.elf.usdt`), function symbols and ``symbol+offset``
(:mod:`pycore.elf.symbols`) and CPython's version and ``_PyRuntime``
(:mod:`pycore.elf.cpython`) all need the same few things: the PT_LOAD segments,
a link-time address turned into a file offset (what a uprobe takes), a few
bytes at an address, and the symbol table.  :class:`ElfFile` reads each
once.

pyelftools trusts a file's tables: on a corrupt one it fails with whatever
its parsing ran into (ELFError, a negative seek's OSError, struct.error,
IndexError, KeyError, UnicodeDecodeError, ...), and much of its reading is
lazy, so the failure can come long after the file was opened.  For pycore a
corrupt file is bad input, reported in one line with exit status 2, so every
read runs under :func:`elf_errors` (tests/test_elf_fuzz.py mutates real
binaries to keep this true).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from pycore.errors import ElfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.elf.sections import Sections

__all__ = ["ElfFile", "elf_errors"]


@contextmanager
def elf_errors(path: str) -> Iterator[None]:
    """Turn what reading ``path`` with pyelftools raises into :class:`ElfError`
    (pyelftools imported only when something was raised: reading with struct alone
    does without its 40 ms import)."""
    try:
        yield
    except ElfError:
        raise
    except OSError as e:
        if e.filename is not None:      # open() itself: missing, not allowed, a directory
            raise ElfError(f"{path}: {e.strerror}") from None
        # a seek or read at an offset the file's tables made up (seek(-1): EINVAL)
        raise ElfError(f"{path}: malformed ELF: {e.strerror or e} while reading it") from None
    except (struct.error, ValueError, KeyError, IndexError, OverflowError, RecursionError) as e:
        raise ElfError(f"{path}: malformed ELF: {e}"[:300]) from None
    except Exception as e:
        from elftools.common.exceptions import ELFError

        if isinstance(e, ELFError):
            raise ElfError(f"{path}: malformed ELF: {e}"[:300]) from None
        raise


class ElfFile:
    """One open ELF file: ``elf`` (pyelftools' ELFFile, parsed on first use), ``machine``
    (``"EM_X86_64"``...), its PT_LOAD ``segments`` as (vaddr, filesz,
    file offset), and the lookups below.  Close it (or use ``with``).  The
    header, program headers and symbol tables are read with struct: most
    users (a uprobe's symbol and file offset) never need pyelftools."""

    def __init__(self, path: str) -> None:
        self.path = path
        with elf_errors(path):
            self._f = open(path, "rb")
        self._elf = None
        self._sections: Sections | None = None
        try:
            with elf_errors(path):
                head = self._f.read(64)
                if head[:4] != b"\x7fELF":
                    raise ElfError(f"{path}: not an ELF file")
                self._f.seek(0)
                self._size = os.fstat(self._f.fileno()).st_size
                self.segments = self._load_segments(head)
        except ElfError:
            self.close()
            raise
        self._symbols: dict[str, int] | None = None

    def _load_segments(self, head: bytes) -> list[tuple[int, int, int]]:
        """The PT_LOAD segments from the program headers (pyelftools' for more than
        0xfffe of them, whose count is kept in section 0)."""
        if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
            raise ElfError(f"{self.path}: malformed ELF: bad ELF header")
        wide, e = head[4] == 2, "<" if head[5] == 1 else ">"
        if wide and len(head) < 64:
            raise ElfError(f"{self.path}: malformed ELF: ELF header cut short")
        phoff = struct.unpack_from(e + ("Q" if wide else "I"), head, 0x20 if wide else 0x1C)[0]
        entsize, count = struct.unpack_from(e + "HH", head, 0x36 if wide else 0x2A)
        if count == 0xFFFF:
            return [(s["p_vaddr"], s["p_filesz"], s["p_offset"])
                    for s in self.elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        fmt = e + ("IIQQQQQQ" if wide else "IIIIIIII")
        if count == 0:
            return []
        if entsize < struct.calcsize(fmt) or phoff + count * entsize > self._size:
            raise ElfError(f"{self.path}: malformed ELF: {count} program headers of {entsize} bytes at {phoff:#x}")
        self._f.seek(phoff)
        table = self._f.read(count * entsize)
        out = []
        for i in range(count):
            h = struct.unpack_from(fmt, table, i * entsize)
            if h[0] == 1:                                     # PT_LOAD
                out.append((h[3], h[5], h[2]) if wide else (h[2], h[4], h[1]))
        return out

    @property
    def elf(self):  # noqa: ANN201 - elftools.elf.elffile.ELFFile
        if self._elf is None:
            from elftools.elf.elffile import ELFFile

            with elf_errors(self.path):
                self._elf = ELFFile(self._f)
        return self._elf

    @property
    def machine(self) -> str:
        with elf_errors(self.path):
            return self.elf["e_machine"]

    def close(self) -> None:
        self._f.close()
        if self._sections is not None:
            self._sections.close()

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _segment(self, vaddr: int) -> tuple[int, int, int] | None:
        for seg in self.segments:
            if seg[0] <= vaddr < seg[0] + seg[1]:
                return seg
        return None

    def file_offset(self, vaddr: int, what: str = "address") -> int:
        """The file offset of a link-time address, through the PT_LOAD segments."""
        seg = self._segment(vaddr)
        if seg is None:
            raise ElfError(f"{self.path}: {what} at {vaddr:#x} is in no loaded segment")
        return vaddr - seg[0] + seg[2]

    def read(self, vaddr: int, size: int) -> bytes:
        """Up to ``size`` bytes the file holds at link-time address ``vaddr``
        (fewer at the end of its segment or of the file; b"" outside)."""
        seg = self._segment(vaddr)
        if seg is None:
            return b""
        at = vaddr - seg[0] + seg[2]
        if at >= self._size:                # the tables may claim more than the file has
            return b""
        with elf_errors(self.path):
            self._f.seek(at)
            return self._f.read(min(size, seg[0] + seg[1] - vaddr, self._size - at))

    def section_data(self, name: str) -> bytes | None:
        """The contents of section ``name``, None when there is none.  Checked
        against the file's size first: a corrupt ``sh_size`` would otherwise
        make pyelftools allocate that much before reading."""
        with elf_errors(self.path):
            sec = self.elf.get_section_by_name(name)
            if sec is None:
                return None
            end = sec["sh_offset"] + sec["sh_size"]
            if sec["sh_type"] != "SHT_NOBITS" and end > self._size:
                raise ElfError(f"{self.path}: malformed ELF: section {name} ends at {end:#x}, "
                                f"past the end of the file ({self._size:#x})")
            return sec.data()

    def symbols(self) -> dict[str, int]:
        """Defined symbols with an address, name -> link-time address; read
        once, ``.symtab`` winning over ``.dynsym``."""
        if self._symbols is None:
            symbols: dict[str, int] = {}
            for secname in (".dynsym", ".symtab"):   # .symtab wins: read last
                for name, value, _size, _type, shndx in self.raw_symbols(secname):
                    if name and shndx and value:
                        symbols[name] = value
            self._symbols = symbols
        return self._symbols

    def _entries(self, secname: str) -> tuple[Iterator[tuple[int, ...]], bytes, bool] | None:
        """The raw fields of each whole entry of symbol table ``secname``, its string table, and
        whether entries are 64-bit ones; None when the table is absent."""
        table = self._symbol_table(secname)
        if table is None:
            return None
        data, strtab, entry = table
        return entry.iter_unpack(data[:len(data) - len(data) % entry.size]), strtab, entry.size == 24

    def raw_symbols(self, secname: str) -> Iterator[tuple[str, int, int, int, int]]:
        """(name, value, size, STT_* type, section index) of each entry of symbol table
        ``secname`` (none when it is absent), in file order.  Read with struct: pyelftools'
        construct takes 80 µs a symbol (0.25 s for libc's .dynsym, 1.2 s for its debug file's
        .symtab)."""
        table = self._entries(secname)
        if table is None:
            return
        entries, strtab, wide = table
        for fields in entries:
            yield _symbol(fields, strtab, wide)

    def function_symbols(self, secname: str) -> Iterator[tuple[str, int, int, int, int]]:
        """:meth:`raw_symbols` of the defined functions only (STT_FUNC, STT_GNU_IFUNC, a section and a
        non-zero address), the others' names not decoded: half of a debug file's entries are not
        functions (libc's: 13k of 23k), and decoding every name was most of the walk."""
        table = self._entries(secname)
        if table is None:
            return
        entries, strtab, wide = table
        for fields in entries:
            info, shndx, value = (fields[1], fields[3], fields[4]) if wide else (fields[3], fields[5], fields[1])
            if info & 0xF in (2, 10) and shndx and value and fields[0]:
                yield _symbol(fields, strtab, wide)

    def named_symbols(self, secname: str, name: str) -> list[tuple[str, int, int, int, int]]:
        """The entries of :meth:`raw_symbols` named ``name`` or ``name@VERSION``, in file
        order, found through the string table: the offsets where such a name starts
        (``bytes.find``), then the entries whose name field holds one.  Looking up one
        function's address (pycore.elf.dwarf) this way takes 0.2 ms where decoding libc's
        debug file's 16k symbols took 12 ms of a first ``pycore trace`` with a libc
        function's args (bench/bench_trace.py --only dwarf)."""
        table = self._symbol_table(secname)
        key = name.encode("utf-8", "surrogateescape")
        if table is None or not key or b"\0" in key:
            return []
        data, strtab, entry = table
        starts = []
        for pattern in (key + b"\0", key + b"@"):
            at = strtab.find(pattern)
            while at != -1:
                starts.append(at)
                at = strtab.find(pattern, at + 1)
        if len(starts) > 256 or "\ufffd" in name:   # a name that ends many others', or not UTF-8: the walk
            return [s for s in self.raw_symbols(secname) if s[0] == name or s[0].startswith(name + "@")]
        word = struct.Struct(entry.format[0] + "I")
        step, end = entry.size, len(data) - len(data) % entry.size
        found: list[int] = []
        for start in starts:
            needle = word.pack(start)
            at = data.find(needle, 0, end)
            while at != -1:
                if at % step == 0:     # st_name is each entry's first word
                    found.append(at)
                at = data.find(needle, at + 1, end)
        out = []
        for at in sorted(found):
            sym = _symbol(entry.unpack_from(data, at), strtab, step == 24)
            if sym[0] == name or sym[0].startswith(name + "@"):
                out.append(sym)
        return out

    @property
    def sections(self) -> Sections:
        """The section headers, read with struct (:class:`pycore.elf.sections.Sections`) on first use."""
        if self._sections is None:
            from pycore.elf.sections import Sections

            self._sections = Sections(self.path)
        return self._sections

    def _symbol_table(self, secname: str) -> tuple[bytes, bytes, struct.Struct] | None:
        """Symbol table ``secname``'s bytes, its string table's, and the Struct of one entry."""
        secs = self.sections
        sec = secs.get_section_by_name(secname)
        if sec is None or sec["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
            return None
        link = secs.section(sec["sh_link"])
        if link is None or link["sh_type"] != "SHT_STRTAB":
            raise ElfError(f"{self.path}: malformed ELF: {secname} links to section {sec['sh_link']}, "
                           "not a string table")
        if (sec["sh_flags"] | link["sh_flags"]) & 0x800:       # SHF_COMPRESSED: pyelftools inflates it
            data = self.section_data(secname) or b""
            strtab = self.section_data(link.name) or b""
        else:
            data, strtab = sec.data(), link.data()
        fmt = ("<" if secs.little_endian else ">") + ("IBBHQQ" if secs.wide else "IIIBBH")
        return data, strtab, struct.Struct(fmt)


def _symbol(fields: tuple, strtab: bytes, wide: bool) -> tuple[str, int, int, int, int]:
    """One symbol table entry's (name, value, size, STT_* type, section index)."""
    if wide:
        st_name, info, _other, shndx, value, st_size = fields
    else:
        st_name, value, st_size, info, _other, shndx = fields
    end = strtab.find(b"\0", st_name)
    name = strtab[st_name:end].decode("utf-8", "replace") if st_name and end > st_name else ""
    return name, value, st_size, info & 0xF, shndx
