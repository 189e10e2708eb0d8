"""Functions of an ELF file for ``uprobe:`` listing and ``symbol+offset`` checks.

Functions come from ``.symtab`` and ``.dynsym`` (STT_FUNC/STT_GNU_IFUNC,
defined, non-zero address), one per address+name.  Names are demangled with
libstdc++'s own ``__cxa_demangle`` through ctypes: that is exactly what the
``cxxfilt`` package wraps, without adding a dependency, and it also demangles
legacy Rust symbols (Itanium-style ``_ZN...17h<hash>E``; the hash is
dropped as rustfilt does).  Rust v0 (``_R``) names are shown mangled: no
maintained pure-Python v0 demangler is packaged in Debian.  The mangled name
always stays usable to attach.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from dataclasses import dataclass
from functools import lru_cache

from .stapsdt import UsdtError

__all__ = ["Function", "functions", "demangle", "resolve"]


@dataclass(frozen=True)
class Function:
    name: str          # as in the symbol table (mangled)
    demangled: str
    address: int       # link-time
    size: int


@lru_cache(maxsize=1)
def _cxa():
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


_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")


def demangle(name: str) -> str:
    """C++ and legacy Rust names demangled; anything else unchanged."""
    if not name.startswith("_Z"):
        return name
    cxa = _cxa()
    if cxa is None:
        return name
    fn, free = cxa
    status = ctypes.c_int(0)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return name
    try:
        out = ctypes.string_at(ptr).decode(errors="replace")
    finally:
        free(ptr)
    return _RUST_HASH.sub("", out)


def functions(path: str) -> list[Function]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        fh = open(path, "rb")
    except OSError as e:
        raise UsdtError(f"{path}: {e.strerror}") from None
    with fh:
        if fh.read(4) != b"\x7fELF":
            raise UsdtError(f"{path}: not an ELF file")
        fh.seek(0)
        try:
            elf = ELFFile(fh)
            seen: dict[tuple[str, int], Function] = {}
            for secname in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(secname)
                if sec is None or not hasattr(sec, "iter_symbols"):
                    continue
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] not in ("STT_FUNC", "STT_LOOS") or not sym.name:
                        continue
                    if sym["st_shndx"] == "SHN_UNDEF" or not sym["st_value"]:
                        continue
                    name = sym.name.split("@", 1)[0]
                    key = (name, sym["st_value"])
                    if key not in seen:
                        seen[key] = Function(name, demangle(name), sym["st_value"], sym["st_size"])
        except (ELFError, ValueError, KeyError) as e:
            raise UsdtError(f"{path}: malformed ELF: {e}") from None
    return sorted(seen.values(), key=lambda f: (f.demangled, f.address))


def resolve(path: str, spec: str) -> tuple[str, int]:
    """``symbol``, ``symbol+offset`` or an address (``0x1234``) -> (symbol or "", offset),
    checking that an offset stays inside the function's size."""
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)", spec)
    if m:
        return "", int(spec, 0)
    name, _, off_text = spec.partition("+")
    try:
        off = int(off_text, 0) if off_text else 0
    except ValueError:
        raise UsdtError(f"{spec!r}: bad offset {off_text!r}") from None
    funcs = [f for f in functions(path) if name in (f.name, f.demangled)]
    if not funcs:
        raise UsdtError(f"{path}: no function {name!r}")
    f = funcs[0]
    if off and (off < 0 or (f.size and off >= f.size)):
        raise UsdtError(f"{spec!r}: offset {off:#x} is outside {f.name} ({f.size} bytes)")
    return f.name, off


def attach_uprobe(program, path: str, spec: str, pid: int = -1, retprobe: bool = False):  # noqa: ANN001, ANN201
    """Attach ``program`` (a loaded :class:`pycore.object.Program`) at ``symbol``,
    ``symbol+offset`` (checked to be inside the function) or an address (file offset)."""
    if retprobe and "+" in spec:
        raise UsdtError(f"{spec!r}: a uretprobe takes a function, not function+offset")
    name, off = resolve(path, spec)
    return program.attach_uprobe(path, symbol=name or None, offset=off, pid=pid, retprobe=retprobe)
