"""Addresses to names: the kernel's from /proc/kallsyms, a process's from its
maps and ELF files.

A process's executable file mappings are read from ``/proc/PID/maps`` the
first time one of its samples arrives (a short-lived ``-c`` process has gone
by the end of the run) and again for an address none of them holds (a
``dlopen`` since).  Files are opened through ``/proc/PID/root`` so that a
process in another mount namespace (a container, a chroot) is named with its
own binaries.  A run-time address becomes a link-time one through the PT_LOAD
segment its file offset falls in; the function is the nearest ``.symtab`` /
``.dynsym`` function symbol below it (sizes checked where known).  An address
no symbol covers is shown as ``[FILE+0xVADDR]`` with the file's build id, so
it can be named later against the debug file.
"""

from __future__ import annotations

import bisect
import os
import time
from functools import lru_cache

from pycore.record import field, record

__all__ = ["KernelSymbols", "Module", "ProcessMaps", "module_for"]


class KernelSymbols:
    """Kernel text addresses to function names (kallsyms; hex when its addresses are hidden)."""

    def __init__(self) -> None:
        from pycore.kernel.kallsyms import TextSymbols

        self._text = TextSymbols()
        self._cache: dict[int, str] = {}

    def __call__(self, addr: int) -> str:
        name = self._cache.get(addr)
        if name is None:
            found = self._text.lookup(addr)
            name = self._cache[addr] = found[0] if found is not None else f"{addr:#x}"
        return name


@record
class Module:
    """One ELF file's functions (sorted), PT_LOAD segments and build id."""

    path: str
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)      # start + size, or 0 when the size is unknown
    names: list[str] = field(default_factory=list)
    segments: list[tuple[int, int, int]] = field(default_factory=list)   # (vaddr, filesz, offset)
    build_id: str | None = None

    def vaddr(self, file_offset: int) -> int | None:
        for vaddr, size, off in self.segments:
            if off <= file_offset < off + max(size, 1):
                return vaddr + file_offset - off
        return None

    def function(self, vaddr: int) -> str | None:
        i = bisect.bisect_right(self.starts, vaddr) - 1
        if i < 0:
            return None
        end = self.ends[i]
        if end and vaddr >= end:
            return None
        return self.names[i]


@lru_cache(maxsize=256)
def _module(path: str, _identity: tuple[int, int, int]) -> Module:
    from pycore.elf.file import ElfFile
    from pycore.elf.symbols import demangle
    from pycore.errors import ElfError

    mod = Module(os.path.basename(path))
    try:
        with ElfFile(path) as f:
            mod.segments = list(f.segments)
            syms: dict[int, tuple[int, str]] = {}
            for table in (".dynsym", ".symtab"):     # .symtab's names win (local functions, no versions)
                for name, value, size, _type, _shndx in f.function_symbols(table):
                    syms[value] = (size, name)
            if len(syms) < 50000:                    # a stripped file: its separate debug file's .symtab
                _debug_symbols(f, path, syms)
            if path not in _BUILD_IDS:               # pprof's mappings name every file's build id
                from pycore.elf.debugfile import build_id

                _BUILD_IDS[path] = build_id(f.elf)
    except (ElfError, OSError):
        return mod
    mod.build_id = _BUILD_IDS.get(path)
    for start in sorted(syms):
        size, name = syms[start]
        mod.starts.append(start)
        mod.ends.append(start + size if size else 0)
        mod.names.append(demangle(name) if name.startswith("_Z") else name)
    return mod


def _debug_symbols(f, path: str, syms: dict[int, tuple[int, str]]) -> None:  # noqa: ANN001
    """Add the functions of ``path``'s separate debug file (by build id or debuglink), if any."""
    from pycore.elf.debugfile import build_id, debug_file
    from pycore.elf.file import ElfFile

    try:
        _BUILD_IDS[path] = build_id(f.elf)
        debug = debug_file(f.elf, path)
        if debug is None:
            return
        with ElfFile(debug) as d:
            for name, value, size, _type, _shndx in d.function_symbols(".symtab"):
                syms.setdefault(value, (size, name))
    except Exception:  # noqa: BLE001 - the debug file is a bonus: without it the file's own symbols name frames
        return


_BUILD_IDS: dict[str, str | None] = {}


_IDENTITIES: dict[str, tuple[float, tuple[int, int, int] | None]] = {}
IDENTITY_SECONDS = 1.0


def file_identity(path: str) -> tuple[int, int, int] | None:
    """(device, inode, mtime) of ``path``, None when it cannot be read; stat'ed again after a second:
    unwinding asks for every frame of every record, and a stat each time was half of its cost."""
    now = time.monotonic()
    seen = _IDENTITIES.get(path)
    if seen is not None and now - seen[0] < IDENTITY_SECONDS:
        return seen[1]
    try:
        st = os.stat(path)
        ident: tuple[int, int, int] | None = (st.st_dev, st.st_ino, st.st_mtime_ns)
    except OSError:
        ident = None
    _IDENTITIES[path] = (now, ident)
    return ident


def module_for(path: str) -> Module:
    """The module of ``path``, read once per file version (device, inode, mtime)."""
    ident = file_identity(path)
    if ident is None:
        return Module(os.path.basename(path))
    return _module(path, ident)


@record
class _Mapping:
    start: int
    end: int
    offset: int
    name: str          # as the process sees it
    path: str          # as pycore opens it: the name, or through /proc/PID/root for another root
    _module: Module | None = None

    def module(self) -> Module:
        """The file's module, kept once read: a process in another root may have exited by the time
        its stacks are named (a -c command has), and its /proc/PID/root with it."""
        if self._module is None:
            self._module = module_for(self.path)
        return self._module


def _same_root(pid: int) -> bool:
    """Whether ``pid`` sees the files pycore sees at the same paths (its root is pycore's)."""
    try:
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


class ProcessMaps:
    """One process's executable file mappings, and its user addresses named."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mappings: list[_Mapping] = []
        self._names: dict[int, tuple[str, str]] = {}
        self.rules: dict[int, object] = {}     # pc -> its unwinding rule (cfi.unwind's cache)
        try:
            self.exe = os.readlink(f"/proc/{pid}/exe")    # pprof's main binary
        except OSError:
            self.exe = ""
        self.read()

    def read(self) -> bool:
        """(Re)read ``/proc/PID/maps``; False when the process is gone (the old mappings are kept)."""
        try:
            with open(f"/proc/{self.pid}/maps") as f:
                lines = f.read().splitlines()
        except OSError:
            return False
        out = []
        same = _same_root(self.pid)     # then plain paths: they still name the files once it exits
        for line in lines:
            parts = line.split(None, 5)
            if len(parts) < 6 or parts[1][2:3] != "x":
                continue
            name = parts[5].strip()
            if not name.startswith("/") or name.endswith(" (deleted)"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            root = f"/proc/{self.pid}/root{name}"
            path = name if same or not os.path.exists(root) else root
            m = _Mapping(lo, hi, int(parts[2], 16), name, path)
            if not same:
                m.module()              # read now, while /proc/PID/root still leads to it
            out.append(m)
        self.mappings = out
        self.rules.clear()
        return True

    def mapping(self, addr: int) -> tuple[int, int, int, str, str] | None:
        """(start, end, file offset, file as the process sees it, build id or "") of ``addr``'s mapping."""
        m = self._mapping(addr)
        if m is None:
            return None
        return m.start, m.end, m.offset, m.name, m.module().build_id or ""

    def _mapping(self, addr: int) -> _Mapping | None:
        for m in self.mappings:
            if m.start <= addr < m.end:
                return m
        return None

    def executable(self, addr: int) -> bool:
        """Whether ``addr`` is in an executable file mapping (a frame-pointer walk's sanity check)."""
        return self._mapping(addr) is not None

    def locate(self, addr: int) -> tuple[str, int] | None:
        """(the file as pycore opens it, the link-time address) of ``addr``, None outside every file."""
        m = self._mapping(addr)
        if m is None:
            return None
        vaddr = m.module().vaddr(addr - m.start + m.offset)
        return None if vaddr is None else (m.path, vaddr)

    def lookup(self, addr: int) -> tuple[str, str]:
        """(function name or ``[file+0xvaddr]``, the file's path as the process sees it)."""
        found = self._names.get(addr)
        if found is not None:
            return found
        m = self._mapping(addr)
        if m is None and self.read():
            m = self._mapping(addr)
        if m is None:
            found = (f"[unknown {addr:#x}]", "")
        else:
            mod = m.module()
            file_offset = addr - m.start + m.offset
            vaddr = mod.vaddr(file_offset)
            name = mod.function(vaddr) if vaddr is not None else None
            if name is None:
                where = vaddr if vaddr is not None else file_offset
                bid = f" {mod.build_id}" if mod.build_id else ""
                name = f"[{os.path.basename(m.name)}+{where:#x}{bid}]"
            found = (name, m.name)
        self._names[addr] = found
        return found
