"""A file's DWARF sections read with struct and zlib alone, for looking up one function.

pyelftools' ``get_dwarf_info`` reads and inflates the debug sections through
construct, and its ``get_aranges`` decodes ``.debug_aranges`` a field at a
time (for libc's debug file: 40 and 85 ms); finding a function's DIE then
parses its unit's DIEs one by one up to it.  :class:`RawDwarf` reads the
sections :mod:`pycore.elf.dwarfscan` needs straight from the file
(inflating ``SHF_COMPRESSED`` ones), decodes ``.debug_aranges`` with
struct, and hands out a :class:`~pycore.elf.dwarfscan.Scanner`, whose DIEs
are decoded only where they are read (a unit's top-level DIEs are walked
by their sibling links).

:meth:`RawDwarf.open` returns None for what it does not read the way
pyelftools does (DWARF 4 ``.debug_types``, GNU ``.zdebug_*`` sections,
compression other than zlib): the caller then uses pyelftools.  Anything
impossible raises ValueError, struct.error or zlib.error (turned into
ElfError by the caller; tests/test_dwarf_fuzz.py).
"""

from __future__ import annotations

import bisect
import struct
import threading
import zlib

from pycore.elf.dwarfscan import Scanner
from pycore.elf.sections import Sections

__all__ = ["RawDwarf"]

_WANTED = (".debug_info", ".debug_abbrev", ".debug_str", ".debug_line_str", ".debug_str_offsets", ".debug_aranges")
SHF_COMPRESSED = 0x800


# The inflating thread's steps: compressed bytes fed at a time (zlib hands back what it did
# not use, a copy: small slices keep that cheap) and bytes inflated at most (a bounded output
# stops at the wanted unit's end, once it is known).  zlib lets go of the GIL only inside a
# step; between steps the thread waits for it while the main thread runs Python.
_STEP = 1 << 19
_OUT = 1 << 20


class _Inflating:
    """A compressed .debug_info inflated only as far as it is read: a function's unit
    is on average half way through libc's 5.8 MB.

    A thread inflates it from the moment the section is read (zlib lets go of the GIL
    while it works), while the caller reads the other sections, the aranges and the
    symbol; :meth:`stop_at` tells it where the wanted unit ends.  Inflating up to
    open_by_handle_at's unit is 4.1 MB, 24 ms on this project's host, which ran after
    the rest (8-10 ms) in a first ``pycore trace`` with a libc function's args
    (bench/bench_trace.py --only dwarf).  What the thread did not inflate (it stopped,
    or failed) is inflated by the caller, and a failure is raised to it."""

    def __init__(self, raw: bytes | memoryview, size: int) -> None:
        self._d = zlib.decompressobj()
        self._raw = memoryview(raw)
        self._pos = 0                   # compressed bytes fed to the decompressor
        self._tail = b""                # fed, not yet inflated (zlib's unconsumed_tail)
        self.size = size
        self.data = b""
        self._parts: list[bytes] = []   # inflated by the thread, not yet in data
        self._have = 0                  # len(data) + the parts' lengths
        self._stop = size
        self._running = True
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        threading.Thread(target=self._inflate, name="pycore-dwarf-inflate", daemon=True).start()

    def _step(self, want: int) -> bytes:
        """Up to ``want`` (at most _OUT) more bytes: a bounded output, so that the stop is not
        passed (the input is fed in _STEP slices, so the tail zlib hands back stays small)."""
        chunk = self._tail
        if not chunk:
            chunk = self._raw[self._pos:self._pos + _STEP]
            self._pos += len(chunk)
        out = self._d.decompress(chunk, max(1, min(want, _OUT)))
        self._tail = self._d.unconsumed_tail
        return out

    def _more(self) -> bool:
        """Whether compressed bytes are left."""
        return bool(self._tail) or self._pos < len(self._raw)

    def _inflate(self) -> None:
        """The thread: steps until the stop or the end of the stream."""
        try:
            while True:
                with self._cond:
                    if self._have >= self._stop or not self._more():
                        return
                    want = self._stop - self._have
                out = self._step(want)
                with self._cond:
                    self._parts.append(out)
                    self._have += len(out)
                    self._cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - zlib.error on a damaged stream: raised to the caller
            self._error = e
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()

    def stop_at(self, n: int) -> None:
        """Have the thread stop once ``n`` bytes are inflated (the end of the wanted unit)."""
        with self._cond:
            self._stop = min(self._stop, n)

    def upto(self, n: int) -> None:
        n = min(n, self.size)
        if len(self.data) >= n:
            return
        with self._cond:
            self._stop = max(self._stop, n)
            self._cond.wait_for(lambda: self._have >= n or not self._running)
            parts, self._parts = self._parts, []
            running = self._running
        have = len(self.data) + sum(len(p) for p in parts)
        if self._error is not None and have < n:   # (past what is wanted, a damaged part is not read)
            raise self._error
        if not running and self._error is None:    # the thread stopped short of n, or ended: on from here
            while have < n and self._more():
                out = self._step(n - have)
                if not out and self._d.eof:
                    break
                parts.append(out)
                have += len(out)
            self._have = have
        if parts:
            self.data = b"".join([self.data, *parts])[:self.size]

    def complete(self) -> None:
        self.upto(self.size)
        if len(self.data) != self.size:
            raise ValueError(f"compressed .debug_info inflates to {len(self.data):#x} bytes, not {self.size:#x}")


class RawDwarf:
    """The sections of ``path``'s DWARF as bytes, its aranges and a Scanner over them.
    A compressed .debug_info is inflated up to the units asked for (:meth:`want_unit`);
    the scanner then sees that much of it, and whatever it reads past that fails:
    :meth:`complete` inflates the rest for the caller to read again."""

    def __init__(self, data: dict[str, bytes], little_endian: bool, info: _Inflating | None = None) -> None:
        self.little_endian = little_endian
        self._data = data
        self._info = info
        self._scanner: Scanner | None = None
        self._scanned = -1
        self._aranges = _aranges(data.get(".debug_aranges"), little_endian)
        self._starts = [a[0] for a in self._aranges] if self._aranges else []

    @property
    def scanner(self) -> Scanner:
        """A Scanner over what is inflated so far (a new one when more was)."""
        if self._info is not None and self._scanned != len(self._info.data):
            self._data[".debug_info"] = self._info.data
            self._scanner = None
            self._scanned = len(self._info.data)
        if self._scanner is None:
            self._scanner = Scanner.from_sections(self._data, self.little_endian)
        return self._scanner

    @property
    def partial(self) -> bool:
        """Whether part of .debug_info is still compressed."""
        return self._info is not None and len(self._info.data) < self._info.size

    def want_unit(self, offset: int) -> None:
        """Have the unit at ``offset`` inflated (its header says how long it is)."""
        if self._info is None:
            return
        self._info.upto(offset + 12)
        head = self._info.data
        e = "<" if self.little_endian else ">"
        length = struct.unpack_from(e + "I", head, offset)[0]
        if length == 0xFFFFFFFF:
            length = 8 + struct.unpack_from(e + "Q", head, offset + 4)[0]
        self._info.stop_at(offset + 4 + length)
        self._info.upto(offset + 4 + length)

    def complete(self) -> None:
        """Have all of .debug_info inflated."""
        if self._info is not None:
            self._info.complete()

    @classmethod
    def open(cls, path: str) -> RawDwarf | None:
        """The DWARF of ``path`` (a file holding it), None when pyelftools must read it."""
        with Sections(path) as secs:
            names = {s.name for s in secs._sections}
            if ".debug_types" in names or any(n.startswith(".zdebug") for n in names):
                return None
            data: dict[str, bytes] = {}
            info = None
            for name in _WANTED:
                sec = secs.get_section_by_name(name)
                if sec is None or sec["sh_type"] == "SHT_NOBITS":
                    continue
                raw: bytes | None = sec.data()
                if raw and sec["sh_flags"] & SHF_COMPRESSED and name == ".debug_info":
                    found = _compressed(raw, secs.wide, secs.little_endian)
                    if found is None:
                        return None
                    info = _Inflating(*found)
                    if not info.size:
                        return None
                    continue
                if raw and sec["sh_flags"] & SHF_COMPRESSED:
                    raw = _inflate(raw, secs.wide, secs.little_endian)
                if raw is None:
                    return None
                data[name] = raw
            if not data.get(".debug_info") and info is None:
                return None
            return cls(data, secs.little_endian, info)

    @property
    def has_aranges(self) -> bool:
        """Whether the file has a .debug_aranges with entries (as pyelftools' ``entries``)."""
        return bool(self._aranges)

    def cu_offset_at_addr(self, addr: int) -> int | None:
        """The .debug_info offset of the unit whose ranges hold ``addr`` (pyelftools'
        ``ARanges.cu_offset_at_addr``: the entry starting last at or before it)."""
        i = bisect.bisect_right(self._starts, addr) - 1
        begin, length, cu = self._aranges[i]       # i == -1: the last entry, as pyelftools
        return cu if begin <= addr < begin + length else None


def _compressed(raw: bytes, wide: bool, little: bool) -> tuple[memoryview, int] | None:
    """An SHF_COMPRESSED section's zlib stream and inflated size (None: not zlib,
    for pyelftools to try)."""
    e = "<" if little else ">"
    if wide:
        ch_type, _reserved, size = struct.unpack_from(e + "IIQ", raw, 0)
        head = 24
    else:
        ch_type, size = struct.unpack_from(e + "II", raw, 0)
        head = 12
    if ch_type != 1:                                  # ELFCOMPRESS_ZLIB
        return None
    return memoryview(raw)[head:], size                  # no copy of the stream


def _inflate(raw: bytes, wide: bool, little: bool) -> bytes | None:
    """An SHF_COMPRESSED section's contents (None: not zlib, for pyelftools to try)."""
    found = _compressed(raw, wide, little)
    if found is None:
        return None
    stream, size = found
    d = zlib.decompressobj()
    out = d.decompress(stream, size)
    if len(out) != size:
        raise ValueError(f"compressed section inflates to {len(out):#x} bytes, not {size:#x}")
    return out


def _aranges(data: bytes | None, little: bool) -> list[tuple[int, int, int]]:
    """(begin, length, unit offset) of every range of .debug_aranges, sorted by begin, read as
    pyelftools reads them (tuples aligned in the section, up to a (0, 0) pair)."""
    if not data:
        return []
    e = "<" if little else ">"
    u16, u32, u64 = struct.Struct(e + "H"), struct.Struct(e + "I"), struct.Struct(e + "Q")
    out: list[tuple[int, int, int]] = []
    off = 0
    while off < len(data):
        length = u32.unpack_from(data, off)[0]
        pos, osize = off + 4, 4
        if length == 0xFFFFFFFF:
            length, pos, osize = u64.unpack_from(data, pos)[0], pos + 8, 8
        pos += 2                                         # version
        cu = (u32 if osize == 4 else u64).unpack_from(data, pos)[0]
        pos += osize
        addr_size, seg_size = data[pos], data[pos + 1]
        pos += 2
        if seg_size:
            raise ValueError(".debug_aranges with segments")
        pair = struct.Struct(e + ("II" if addr_size == 4 else "QQ"))
        pos = -(-pos // pair.size) * pair.size           # tuples aligned to their size
        while True:
            begin, size = pair.unpack_from(data, pos)
            pos += pair.size
            if begin == 0 and size == 0:
                break
            out.append((begin, size, cu))
        off += length + (4 if osize == 4 else 12)
    out.sort(key=lambda a: a[0])
    return out
