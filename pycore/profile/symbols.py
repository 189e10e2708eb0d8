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
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

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


def _read_module(path: str, name: str = "") -> Module:
    """``path``'s functions; ``name``: the file as pycore names it (default ``path``), where
    ``path`` is an open descriptor's /proc/self/fd/N (a process in another root, maybe gone)."""
    from pycore.elf.debugfile import build_id
    from pycore.elf.file import ElfFile
    from pycore.elf.symbols import demangle
    from pycore.errors import ElfError

    name = name or path
    mod = Module(os.path.basename(name))
    try:
        with ElfFile(path) as f:
            mod.segments = list(f.segments)
            syms: dict[int, tuple[int, str]] = {}
            for table in (".dynsym", ".symtab"):     # .symtab's names win (local functions, no versions)
                for sym, value, size, _type, _shndx in f.function_symbols(table):
                    syms[value] = (size, sym)
            if len(syms) < 50000:                    # a stripped file: its separate debug file's .symtab
                _debug_symbols(f, name, syms)
            mod.build_id = build_id(f.elf)           # pprof's mappings name every file's build id
    except (ElfError, OSError):
        return mod
    for start in sorted(syms):
        size, sym = syms[start]
        mod.starts.append(start)
        mod.ends.append(start + size if size else 0)
        mod.names.append(demangle(sym) if sym.startswith("_Z") else sym)
    return mod


def _debug_symbols(f, path: str, syms: dict[int, tuple[int, str]]) -> None:  # noqa: ANN001
    """Add the functions of ``path``'s separate debug file (by build id or debuglink), if any."""
    from pycore.elf.debugfile import debug_file
    from pycore.elf.file import ElfFile

    try:
        debug = debug_file(f.elf, path)
        if debug is None:
            return
        with ElfFile(debug) as d:
            for name, value, size, _type, _shndx in d.function_symbols(".symtab"):
                syms.setdefault(value, (size, name))
    except Exception:  # noqa: BLE001 - the debug file is a bonus: without it the file's own symbols name frames
        return


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


T = TypeVar("T")


class ByIdentity(Generic[T]):
    """What is read from a file, kept by the file's identity (device, inode, mtime) alone, the
    ``size`` most recently used. Kept by path, a file was read again for every process of a
    container or a chroot, which pycore reaches through its own /proc/PID/root: libLLVM's 100,000
    symbols for each process of the bpftrace 0.23.2 root, while pycore profile -a read the ring."""

    def __init__(self, read: Callable[[str], T], size: int) -> None:
        self._read, self._size = read, size
        self._kept: OrderedDict[tuple[int, int, int], T] = OrderedDict()
        self._lock = threading.Lock()       # the walker and the namer ask from two threads

    def __call__(self, path: str) -> T | None:
        """What ``path`` holds, None when it cannot be stat'ed."""
        ident = file_identity(path)
        return None if ident is None else self.get(ident, lambda: self._read(path))

    def kept(self, ident: tuple[int, int, int]) -> T | None:
        """What was read of the file ``ident``, if it is still kept."""
        with self._lock:
            return self._kept.get(ident)

    def get(self, ident: tuple[int, int, int], read: Callable[[], T]) -> T:
        """What was read of the file ``ident``, or ``read()`` of it now."""
        with self._lock:
            if ident in self._kept:
                self._kept.move_to_end(ident)
                return self._kept[ident]
        value = read()                  # (unlocked: two threads may read one file once each)
        with self._lock:
            self._kept[ident] = value
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return value


MODULES = ByIdentity(_read_module, 256)


def module_for(path: str) -> Module:
    """The module of ``path``, read once per file version (device, inode, mtime)."""
    return MODULES(path) or Module(os.path.basename(path))


@record
class _Mapping:
    start: int
    end: int
    offset: int
    name: str          # as the process sees it
    path: str          # as pycore opens it: the name, or through /proc/PID/root for another root
    _module: Module | None = None
    ident: tuple[int, int, int] | None = None    # another root's file: its identity, found at once

    def module(self, fd: int | None = None) -> Module:
        """The file's module, kept once read: a process in another root may have exited by the time
        its stacks are named (a -c command has), and its /proc/PID/root with it. ``fd``: the file,
        opened while the process lived."""
        if self._module is None:
            if self.ident is None:
                self._module = module_for(self.path)
            elif fd is not None or os.path.exists(self.path):
                opened = f"/proc/self/fd/{fd}" if fd is not None else self.path
                self._module = MODULES.get(self.ident, lambda: _read_module(opened, self.path))
            else:       # gone, and no other process of the file's read it: nameless, not kept as its
                self._module = MODULES.kept(self.ident) or Module(os.path.basename(self.path))
        return self._module

    def known(self) -> bool:
        """Whether the module is read: by this mapping, or for another process's of the same file."""
        if self._module is None and self.ident is not None:
            self._module = MODULES.kept(self.ident)
        return self._module is not None


def _same_root(pid: int) -> bool:
    """Whether ``pid`` sees the files pycore sees at the same paths (its root is pycore's)."""
    try:
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


class ProcessMaps:
    """One process's executable file mappings, and its user addresses named."""

    def __init__(self, pid: int, pin: Callable[[list[_Mapping]], object] | None = None) -> None:
        """``pin``: given the mappings of a process in another root, reads their modules soon, in a
        thread of its own (:class:`~pycore.profile.unwind.Unwinder`'s); None: read them now."""
        self.pid = pid
        self._pin = pin
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
            out.append(_Mapping(lo, hi, int(parts[2], 16), name, path,
                                ident=None if same else file_identity(path)))
        if not same:        # read while /proc/PID/root still leads to the files
            if self._pin is not None:
                self._pin(out)
            else:
                for m in out:
                    m.module()
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
