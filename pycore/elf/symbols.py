"""Functions of an ELF file for ``uprobe:`` listing and ``symbol+offset`` checks.

Functions come from ``.symtab`` and ``.dynsym`` (STT_FUNC/STT_GNU_IFUNC,
defined, non-zero address), one per address+name.  Names are demangled so
that people can read them; the mangled name always stays usable to attach:

* Rust, legacy (``_ZN...17h<hash>E``) and v0 (``_R...``), with ``pyderust``,
  the bindings to the ``rustc-demangle`` crate that rustc, rustfilt and perf
  use (hashes dropped, as rustfilt does);
* C++ with libstdc++'s own ``__cxa_demangle`` through ctypes (what
  ``cxxfilt`` wraps, without adding a dependency).

``symbol+offset`` must land inside the function and, where the ELF allows
knowing it, on an instruction boundary: a uprobe in the middle of an
instruction corrupts the traced process (the kernel refuses some of these,
not all).  x86 code is decoded from the file with capstone (the ``disasm``
extra); without it only the function's size is checked.  arm64 instructions
are 4 bytes, so there the check needs no decoder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from pycore.elf.file import ElfFile, elf_errors
from pycore.errors import ElfError
from pycore.record import record

# ctypes (for libstdc++'s demangler) is imported when a C++ name is demangled: ctypes.util
# imports subprocess, shutil and tempfile, and dataclasses inspect, ~10 ms of every
# uprobe run of pycore trace (bench/bench_trace.py --only dwarf) that needed neither.

__all__ = ["Function", "functions", "debug_functions", "demangle", "demangle_cxx", "resolve", "parse_spec", "find_function", "check_offset",
           "instruction_offsets", "file_offset", "attach_uprobe", "capstone_available"]


@record(frozen=True)
class Function:
    name: str          # as in the symbol table (mangled)
    demangled: str
    address: int       # link-time
    size: int


@lru_cache(maxsize=1)
def _cxa():
    import ctypes
    import ctypes.util

    path = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    return fn, libc.free


# A legacy Rust symbol ends in a 16-hex-digit hash element (maybe with an LLVM suffix).
_RUST_LEGACY = re.compile(r"_ZN.*17h[0-9a-f]{16}E(\..*)?")


@lru_cache(maxsize=1)
def _rust_demangler():
    try:
        import pyderust
    except ImportError:  # a broken install: names stay mangled, attaching still works
        return None
    return pyderust


def _demangle_rust(name: str) -> str | None:
    mod = _rust_demangler()
    if mod is None:
        return None
    try:
        return mod.demangle(name)
    except ValueError:  # pyderust.DemangleError: not (valid) Rust
        return None


def demangle(name: str) -> str:
    """Rust (legacy and v0) and C++ names demangled; anything else unchanged."""
    if name.startswith("_R") or _RUST_LEGACY.fullmatch(name):
        rust = _demangle_rust(name)
        if rust is not None:
            return rust
    if not name.startswith("_Z"):
        return name
    return demangle_cxx(name)


def demangle_cxx(name: str) -> str:
    """``name`` through libstdc++'s ``__cxa_demangle`` only (what bcc, and so bpftrace, prints:
    a legacy Rust name keeps its hash element); unchanged when it is not a C++ name."""
    cxa = _cxa()
    if cxa is None:
        return name
    import ctypes

    fn, free = cxa
    status = ctypes.c_int(0)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        free(ptr)


def functions(path: str, named: str | None = None) -> list[Function]:
    """The file's functions, sorted by demangled name and address; with ``named``, only
    those whose name or demangled name it is (the others are neither made nor
    demangled: a C name demangles to itself, so only ``_Z``/``_R`` names are).

    A file without a ``.symtab`` (stripped, as distributions ship them) names its
    local functions only in its separate debug file's (:func:`debug_functions`):
    they are added, as bcc adds them for bpftrace (libc's static functions, from
    libc6-dbg).  With ``named``, the debug file is read only when the file's own
    tables have no such function, and then only that name's entries."""
    with ElfFile(path) as f, elf_errors(path):
        seen: dict[tuple[str, int], Function] = {}

        def add(symbols: Iterator[tuple[str, int, int, int, int]]) -> None:
            for name, value, size, kind, shndx in symbols:
                if kind not in (2, 10) or not name or not shndx or not value:   # STT_FUNC, STT_GNU_IFUNC
                    continue
                name = name.split("@", 1)[0]
                key = (name, value)
                if key in seen:
                    continue
                if named is None or name == named:
                    seen[key] = Function(name, demangle(name), value, size)
                elif name.startswith(("_Z", "_R")):
                    demangled = demangle(name)
                    if demangled == named:
                        seen[key] = Function(name, demangled, value, size)

        for secname in (".symtab", ".dynsym"):
            add(f.function_symbols(secname))
        if named is None or not seen:
            add(debug_functions(f, named))
    return sorted(seen.values(), key=lambda f: (f.demangled, f.address))


def debug_functions(f: ElfFile, named: str | None = None) -> Iterator[tuple[str, int, int, int, int]]:
    """The function symbols of ``f``'s separate debug file's ``.symtab`` (:func:`raw_symbols`'s
    tuples; with ``named``, that name's only), at ``f``'s addresses: each moved by where its
    section is in ``f`` (the same address, for a debug file objcopy made).  None when ``f``
    has a ``.symtab`` of its own (it names them all), has no debug file, or the debug file
    cannot be read (its symbols are then left out: the file's own are still right)."""
    from pycore.elf.debugfile import debug_file

    secs = f.sections
    if secs.get_section_by_name(".symtab") is not None:
        return
    try:
        found = debug_file(secs, f.path)
        if found is None:
            return
        with ElfFile(found) as d, elf_errors(found):
            dsecs = d.sections
            symbols = d.function_symbols(".symtab") if named is None else d.named_symbols(".symtab", named)
            moved: dict[int, int | None] = {}   # debug file's section -> f's address less its (None: not in f)
            out = []
            for sym in symbols:
                name, value, size, kind, shndx = sym
                if kind not in (2, 10) or not name or not shndx or not value or shndx >= 0xFF00:
                    continue
                if shndx not in moved:
                    dsec = dsecs.section(shndx)
                    own = secs.get_section_by_name(dsec.name) if dsec is not None else None
                    moved[shndx] = None if dsec is None or own is None or own["sh_type"] == "SHT_NOBITS" \
                        else own["sh_addr"] - dsec["sh_addr"]
                delta = moved[shndx]
                if delta is not None:
                    out.append((name, value + delta, size, kind, shndx))
    except ElfError:
        return
    yield from out


@lru_cache(maxsize=1)
def _capstone():
    try:
        import capstone
    except ImportError:
        return None
    return capstone


def capstone_available() -> bool:
    return _capstone() is not None


def file_offset(path: str, address: int) -> int:
    """The file offset of a link-time address (what a uprobe without a symbol takes)."""
    with ElfFile(path) as f:
        return f.file_offset(address)


def _function_code(path: str, f: Function) -> tuple[str, bytes]:
    """(e_machine, e.g. ``"EM_X86_64"``, and the function's bytes from the file)."""
    with ElfFile(path) as elf:
        return elf.machine, elf.read(f.address, f.size)


def instruction_offsets(path: str, f: Function) -> tuple[list[int], int] | None:
    """Offsets of ``f``'s instructions from its start and where decoding ended
    (the decoder stops at bytes that are not code), or None when this cannot
    be known: no decoder for the architecture, capstone not installed, or no
    bytes in the file (size 0)."""
    machine, code = _function_code(path, f)
    if not code:
        return None
    if machine == "EM_AARCH64":
        return list(range(0, len(code), 4)), len(code) - len(code) % 4
    cs = _capstone()
    if cs is None or machine not in ("EM_X86_64", "EM_386"):
        return None
    md = cs.Cs(cs.CS_ARCH_X86, cs.CS_MODE_64 if machine == "EM_X86_64" else cs.CS_MODE_32)
    starts, end = [], 0
    for addr, size, _mnemonic, _operands in md.disasm_lite(code, 0):
        starts.append(addr)
        end = addr + size
    return starts, end


def check_offset(path: str, f: Function, off: int) -> str:
    """Raise :class:`ElfError` unless ``off`` is inside ``f`` and, where it
    can be known, on an instruction boundary; return how it was checked."""
    label = f.demangled if f.demangled != f.name else f.name
    if off < 0 or (f.size and off >= f.size):
        hint = "" if capstone_available() else " (capstone not installed: offsets are checked against the size only)"
        raise ElfError(f"offset {off:#x} is outside {label} ({f.size} bytes){hint}")
    if not off:
        return "function entry"
    decoded = instruction_offsets(path, f)
    if decoded is None:
        if _capstone() is None:
            return "inside the function's size only (install capstone, pip install 'pycore-bpf[disasm]', " \
                "to check instruction boundaries)"
        return "inside the function's size only (no instruction decoder for this architecture)"
    starts, end = decoded
    if off in starts:
        return "instruction boundary"
    if off >= end:
        return "inside the function's size only (past the bytes the decoder understood)"
    before = max(s for s in starts if s < off)
    after = min([s for s in starts if s > off] + [end])
    raise ElfError(f"{off:#x} is not on an instruction boundary of {label} "
                    f"(nearest: +{before:#x}, +{after:#x})")


_NUMBER = re.compile(r"0[xX]([0-9a-fA-F]+)|([0-9]+)")


def _number(text: str) -> int | None:
    """``0x1f`` or decimal (``010`` is ten, as in bpftrace), None otherwise."""
    m = _NUMBER.fullmatch(text)
    if not m:
        return None
    return int(m.group(1), 16) if m.group(1) else int(m.group(2))


def parse_spec(spec: str) -> tuple[str, int | None]:
    """``symbol``, ``symbol+offset`` or an address -> (symbol or "", offset or None).
    A ``+`` not followed by a digit belongs to the name (C++ ``operator+``)."""
    if (address := _number(spec)) is not None:
        return "", address
    name, plus, off_text = spec.rpartition("+")
    if not plus or not name or not off_text[:1].isdigit():
        return spec, None
    if (off := _number(off_text)) is None:
        raise ElfError(f"{spec!r}: bad offset {off_text!r}")
    return name, off


def find_function(path: str, name: str) -> Function:
    funcs = functions(path, name)      # only that name's made (the debug file read only if need be)
    if not funcs:
        raise ElfError(f"{path}: no function {name!r}")
    return funcs[0]


def resolve(path: str, spec: str) -> tuple[str, int]:
    """``symbol``, ``symbol+offset`` or an address (``0x1234``, a file offset)
    -> (mangled symbol or "", offset), checking that an offset is inside the
    function and on an instruction boundary (see :func:`check_offset`)."""
    name, off = parse_spec(spec)
    if not name:
        return "", off or 0
    f = find_function(path, name)
    if off:
        check_offset(path, f, off)
    return f.name, off or 0


def attach_uprobe(program, path: str, spec: str, pid: int = -1, retprobe: bool = False):  # noqa: ANN001, ANN201
    """Attach ``program`` (a loaded :class:`pycore.native.object.Program`) at ``symbol``,
    ``symbol+offset`` (checked to be inside the function, on an instruction
    boundary) or an address (file offset)."""
    name, off = parse_spec(spec)
    if retprobe and name and off:
        raise ElfError(f"{spec!r}: a uretprobe takes a function, not function+offset")
    name, off = resolve(path, spec)
    return program.attach_uprobe(path, symbol=name or None, offset=off, pid=pid, retprobe=retprobe)


@record(frozen=True)
class DataSymbol:
    """A symbol of any type by name: its link-time ``address`` and ``size``; ``relocated`` when the file
    is position independent (ET_DYN: a PIE or a library), so that the address moves by the load base."""

    name: str
    address: int
    size: int
    relocated: bool


def data_symbol(path: str, name: str) -> DataSymbol | None:
    """The defined symbol ``name`` of ``path`` (``.symtab`` first, then ``.dynsym``), None if it has none."""
    with ElfFile(path) as f, elf_errors(path):
        relocated = f.elf["e_type"] == "ET_DYN"
        for secname in (".symtab", ".dynsym"):
            sec = f.elf.get_section_by_name(secname)
            if sec is None or not hasattr(sec, "get_symbol_by_name"):
                continue
            for sym in sec.get_symbol_by_name(name) or ():
                if sym["st_shndx"] != "SHN_UNDEF" and sym["st_value"]:
                    return DataSymbol(name, sym["st_value"], sym["st_size"], relocated)
    return None
