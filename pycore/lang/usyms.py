"""User-space addresses to symbol names, as bpftrace 0.17 prints them (``usym``, ``ustack``, ``func``).

bpftrace hands user addresses to bcc's symbol cache, so this follows bcc's
rules, where they decide what is printed:

* a process's modules are its executable, file-backed mappings in
  ``/proc/PID/maps`` (and the vDSO); an address in a shared object is
  turned into a link-time address through the object's ``.text`` section,
  in an ``ET_EXEC`` executable it is one already;
* a module's symbols are every named, non-zero symbol of its ``.symtab``
  and ``.dynsym`` (any type), and of its separate debug file when there is
  one (``/usr/lib/debug/.build-id/xx/yyyy.debug``, else ``.gnu_debuglink``),
  sorted by address with libstdc++'s ``std::sort``, so that of several
  aliases at one address the same one wins (``__getpid``, not ``getpid``);
* the symbol found is the nearest one below that contains the address,
  stepping back over nested symbols as bcc does;
* names that look like C++ (``_Z``) are demangled with ``__cxa_demangle``;
* code a JIT wrote into anonymous executable memory is named from its
  ``/tmp/perf-PID.map`` (perf's JIT interface: ``START SIZE NAME`` per line,
  hex), the module printed as that file, as bcc does (PID as the process
  knows itself, in its own pid namespace and root).

Where bcc reads a process's maps afresh for every address, the modules of
each process are kept here once read (and read again after an exec, or for
an address in none of them): an address is still named after its process
has exited if one of its addresses was named while it ran (bpftrace prints
hex then).
"""

from __future__ import annotations

import bisect
import os
import struct
from functools import lru_cache

from pycore.record import field, record

__all__ = ["UserSymbols", "format_usym", "format_frame"]

_NOT_FILE_BACKED = ("/dev/zero", "/anon_hugepage", "[stack", "/SYSV", "[heap]", "[vsyscall]")
_FUNC_TYPES = (2, 10)          # STT_FUNC, STT_GNU_IFUNC: what bcc takes from the vDSO


@record
class _Table:
    """One module's symbols in bcc's order: starts, sizes and names side by side."""

    starts: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    kind: str = ""               # "exec", "so" or "" (unreadable)
    text_bias: int = 0           # .text sh_addr - sh_offset, for shared objects

    def find(self, offset: int) -> tuple[str, int] | None:
        """bcc's ProcSyms::Module::find_addr: the symbol containing ``offset``, nested ones skipped."""
        i = bisect.bisect_right(self.starts, offset)
        if i == 0:
            return None
        i -= 1
        limit = self.starts[i]
        while offset >= self.starts[i]:
            if offset < self.starts[i] + self.sizes[i]:
                return self.names[i], offset - self.starts[i]
            if limit > self.starts[i] + self.sizes[i] or i == 0:
                break
            i -= 1
        return None


def _read_symbols(elf, types: tuple[int, ...] | None) -> list[tuple[int, int, str]]:  # noqa: ANN001
    """(start, size, name) of each named, non-zero symbol of every symbol table, in file order."""
    out: list[tuple[int, int, str]] = []
    little = elf.little_endian
    wide = elf.elfclass == 64
    fmt = ("<" if little else ">") + ("IBBHQQ" if wide else "IIIBBH")
    for sec in elf.iter_sections():
        if sec["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
            continue
        strtab = elf.get_section(sec["sh_link"]).data()
        data = sec.data()
        entsize = sec["sh_entsize"] or struct.calcsize(fmt)
        if entsize != struct.calcsize(fmt) or len(data) % entsize:
            continue
        for entry in struct.iter_unpack(fmt, data):
            if wide:
                st_name, st_info, _other, _shndx, value, size = entry
            else:
                st_name, value, size, st_info, _other, _shndx = entry
            if not st_name or not value or (types is not None and st_info & 0xF not in types):
                continue
            end = strtab.find(b"\0", st_name)
            name = strtab[st_name:end if end >= 0 else None]
            if name:
                out.append((value, size, name.decode("utf-8", "replace")))
    return out


def _debug_file(elf, path: str) -> str | None:  # noqa: ANN001
    """The separate debug file bcc would read for ``path``: by build id, else by debuglink (CRC checked);
    the ELF layer's one lookup (pycore.elf.debugfile), which DWARF reading uses too."""
    from pycore.elf.debugfile import debug_file

    return debug_file(elf, path)


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


@lru_cache(maxsize=64)
def _table(path: str, _identity: tuple[int, int, int], vdso: bytes | None = None) -> _Table:
    """The symbol table of one file (or the vDSO image), built once per file version."""
    import io

    from elftools.elf.elffile import ELFFile

    from pycore.lang.output.stdsort import std_sort

    table = _Table()
    try:
        if vdso is not None:
            elf = ELFFile(io.BytesIO(vdso))
            syms = _read_symbols(elf, _FUNC_TYPES)
            table.kind = "so"
        else:
            f = open(path, "rb")
            try:
                elf = ELFFile(f)
                syms = []
                debug = _debug_file(elf, path)
                if debug is not None:
                    with open(debug, "rb") as df:
                        syms = _read_symbols(ELFFile(df), None)
                syms += _read_symbols(elf, None)
                table.kind = "exec" if elf["e_type"] == "ET_EXEC" else "so"
                text = elf.get_section_by_name(".text")
                if text is not None:
                    table.text_bias = text["sh_addr"] - text["sh_offset"]
            finally:
                f.close()
    except Exception:  # noqa: BLE001 - an unreadable or corrupt module names nothing, as in bcc
        return _Table()
    ordered = std_sort(syms, key=lambda s: s[0])
    table.starts = [s[0] for s in ordered]
    table.sizes = [s[1] for s in ordered]
    table.names = [s[2] for s in ordered]
    return table


def _file_table(path: str) -> _Table:
    try:
        st = os.stat(path)
    except OSError:
        return _Table()
    return _table(path, (st.st_dev, st.st_ino, st.st_mtime_ns))


@lru_cache(maxsize=1)
def _vdso_table() -> _Table:
    """The vDSO's symbols, read from this process's own copy (the kernel maps the same image everywhere)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if line.rstrip().endswith("[vdso]"):
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    with open("/proc/self/mem", "rb") as mem:
                        mem.seek(lo)
                        image = mem.read(hi - lo)
                    return _table("[vdso]", (0, 0, 0), image)
    except (OSError, ValueError):
        pass
    return _Table()


@record
class _Module:
    name: str
    path: str
    ranges: list[tuple[int, int, int]] = field(default_factory=list)   # (start, end, file offset)
    _tab: _Table | None = None

    @property
    def table(self) -> _Table:
        if self._tab is None:
            if self.name == "[vdso]":
                self._tab = _vdso_table()
            elif self.name.startswith("/tmp/perf-") and self.name.endswith(".map"):
                self._tab = _perf_map_table(self.path)
            else:
                self._tab = _file_table(self.path)
        return self._tab

    def offset(self, addr: int) -> int | None:
        for start, end, off in self.ranges:
            if start <= addr < end:
                t = self.table
                if t.kind == "exec":
                    return addr
                return addr - start + off + t.text_bias
        return None


def _modules(pid: int) -> list[_Module] | None:
    """The executable, file-backed mappings of ``pid`` grouped by file, in maps order; None if it is gone."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    mods: dict[str, _Module] = {}
    anon: list[tuple[int, int, int]] = []      # executable memory of no file: a JIT's, maybe
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[1][2:3] != "x":
            continue
        name = parts[5].strip() if len(parts) == 6 else ""
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if not name or name.startswith(("//anon", "[anon")):
            anon.append((lo, hi, 0))
            continue
        if name.startswith(_NOT_FILE_BACKED) or name.endswith(" (deleted)"):
            continue
        mod = mods.get(name)
        if mod is None:
            root = f"/proc/{pid}/root{name}"
            mod = mods[name] = _Module(name, root if os.path.exists(root) else name)
        mod.ranges.append((lo, hi, int(parts[2], 16)))
    if anon:
        nspid = _namespace_pid(pid)
        perf_map = f"/proc/{pid}/root/tmp/perf-{nspid}.map"
        if os.path.exists(perf_map):
            mods[f"/tmp/perf-{nspid}.map"] = _Module(f"/tmp/perf-{nspid}.map", perf_map, anon)
    return list(mods.values())


def _namespace_pid(pid: int) -> int:
    """``pid`` as the process sees itself (the last NSpid of its status): the name of its perf map."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def _perf_map_table(path: str) -> _Table:
    """A JIT's perf map: ``START SIZE NAME`` lines (hex; the name may hold spaces), absolute addresses."""
    syms = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(" ", 2)
                if len(parts) == 3:
                    try:
                        syms.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
                    except ValueError:
                        continue
    except OSError:
        return _Table()
    syms.sort(key=lambda s: s[0])
    return _Table([s[0] for s in syms], [s[1] for s in syms], [s[2] for s in syms], "exec")


class UserSymbols:
    """Names of user addresses of any process, each process's modules read once (again after an exec)."""

    def __init__(self, demangle: bool = True) -> None:
        self._procs: dict[int, tuple[int, list[_Module]]] = {}
        self.demangle = demangle     # bpftrace's cpp_demangle (config = { cpp_demangle = 0 })

    def _process(self, pid: int, reload: bool = False) -> list[_Module]:
        """``pid``'s modules: read once, again after an exec (or when asked), kept once it has exited."""
        try:
            exe = os.stat(f"/proc/{pid}/exe").st_ino
        except OSError:
            exe = None
        known = self._procs.get(pid)
        if known is not None and (exe is None or (known[0] == exe and not reload)):
            return known[1]
        mods = _modules(pid) if exe is not None else None
        if mods is None:
            return known[1] if known else []
        self._procs[pid] = (exe, mods)
        return mods

    def lookup(self, pid: int, addr: int) -> tuple[str | None, int, str | None]:
        """(demangled symbol or None, offset in it, module path or None) of ``addr`` in ``pid``."""
        found = _find(self._process(pid), addr)
        if found[2] is None and pid in self._procs:
            found = _find(self._process(pid, reload=True), addr)    # mapped since (dlopen)?
        if found[0] is not None and self.demangle:
            return _demangle(found[0]), found[1], found[2]
        return found


def _find(mods: list[_Module], addr: int) -> tuple[str | None, int, str | None]:
    module = None
    for mod in mods:
        off = mod.offset(addr)
        if off is None:
            continue
        found = mod.table.find(off)
        if found is not None:
            return found[0], found[1], mod.name
        module = module or mod.name
    return None, 0, module


def _demangle(name: str) -> str:
    if name.startswith(("_Z", "___Z")):
        from pycore.elf.symbols import demangle_cxx

        return demangle_cxx(name)
    return name


def format_usym(found: tuple[str | None, int, str | None], addr: int) -> str:
    """``usym()`` and ``func``: the symbol, or the address as C++ prints a ``void *`` (``0x..``, ``0``)."""
    name = found[0]
    return name if name is not None else (f"0x{addr:x}" if addr else "0")


def format_frame(found: tuple[str | None, int, str | None], addr: int, perf: bool = False) -> str:
    """One ``ustack`` frame: ``sym+off`` (perf mode: ``\\t<hex> sym+off (module)``)."""
    name, off, module = found
    if name is not None:
        text = f"{name}+{off}" + (f" ({module})" if perf else "")
    else:
        text = (f"0x{addr:x}" if addr else "0") + (" ([unknown])" if perf else "")
    return f"\t{addr:x} {text}" if perf else text
