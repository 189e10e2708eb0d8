"""A traced binary's DWARF: its functions' parameters and its named types, as BTF.

bpftrace reads a uprobe's ``args`` and a cast's ``struct Foo`` from the
binary's DWARF (libdw).  pycore reads it with pyelftools and writes the
types it needs as BTF, so that everything that reads a :class:`btf.Spec`
handles them unchanged: a BTF of their own (ids from 1), or split BTF on top
of a spec the caller gives (the kernel's, or one already split on it).
``pycore trace`` keeps them apart from the kernel's: its types carry their
spec, and a uprobe script that names no kernel type then never parses the
kernel's BTF (bench/bench_trace.py's first run with a libc function's args:
35-50 ms of its ~0.2 s went to the kernel's BTF, needed only for its length).

API::

    dbg = DebugInfo.open("/lib/x86_64-linux-gnu/libc.so.6")   # base=spec: split on it
    if dbg is None: ...                     # no DWARF in the file nor in a debug file
    fn = dbg.function("getaddrinfo")        # FunctionTypes | None (no such function in DWARF)
    fn.params                               # [("name", btf id), ...]; fn.ret (0: void); fn.variadic
    fn.spec                                 # a Spec holding those ids (on top of base, if any)
    tid = dbg.named("struct", "addrinfo")   # "struct", "union", "enum", "typedef" (C++ classes
                                            # are structs) -> btf id | None
    dbg.named("struct", "addrinfo", near="getaddrinfo")   # the probed function's unit first:
                                            # no whole-file index (1.6 s for libc, then cached)
    dbg.spec                                # the Spec of every type converted so far
    dbg.params_text("getaddrinfo")          # ["const char* name", ...]: bpftrace -lv's lines

``dbg.spec`` is one Spec object for the DebugInfo's life (``fn.spec`` is
it too), brought up to date in place when a call converts more types: ids
only grow, so a type decoded earlier stays right.  Functions are looked up
by symbol name (a C++ function by its mangled name, DW_AT_linkage_name).

Where the DWARF is: the file's own ``.debug_info``, else its separate debug
file (:mod:`pycore.elf.debugfile`: by build id, then ``.gnu_debuglink``).

Speed (libc's debug file is 5.8 MB of ``.debug_info`` in 2,063 units;
pyelftools decodes ~25k DIEs a second): a function is found through its
symbol's address and ``.debug_aranges``, and only the unit it is in is
read, only as far as the DIEs it needs (``pycore list -v`` of getaddrinfo:
0.2 s).  A type by name, or many functions at once (``pycore list -v
'uprobe:libc:*'``), need every unit: one pass over the top-level DIEs of
each, read with :mod:`pycore.elf.dwarfscan` (1.6 s for libc, 12 s through
pyelftools), builds an index (type name -> DIE, function name -> DIE and
bpftrace's parameter lines), kept on disk by build id beside pycore's BTF
index cache (:func:`cache_path`; a read-only or absent cache only means the
pass runs again).  The pass keeps one unit in memory at a time: 30 MB peak.

A function's parameters, once found, are kept there too, a file per function
under the same key: the BTF records of the types they reach, and the DIE
offsets those came from (:func:`pycore.elf.dwarfbtf.record_types`).  A later
run replays them into its converter (types a run already wrote are shared,
by DIE offset, as a conversion shares them) and reads no DWARF at all: the
files are opened with pyelftools only when a call needs the DWARF, and
:meth:`DebugInfo.open` reads section headers with struct
(:mod:`pycore.elf.sections`).

Damaged DWARF is an :class:`~pycore.errors.ElfError`, never another
exception (tests/test_dwarf_fuzz.py).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pycore.elf.debugfile import build_id, debug_file
from pycore.elf.dwarfbtf import (BtfConverter, attr_int, bpftrace_type_name, children, die_name, integrated,
                                  record_types, type_of)
from pycore.elf.file import ElfFile
from pycore.elf.sections import Sections
from pycore.errors import ElfError
from pycore.record import record  # not dataclasses: imported by pycore trace's uprobes (bench_trace --only dwarf)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from btf.spec import Spec

    T = TypeVar("T")

__all__ = ["DebugInfo", "FunctionTypes", "cache_path", "dwarf_errors"]

CACHE_FORMAT = 1
FUNCTION_FORMAT = 1
_MISSING = object()
# Up to this many functions are looked up one by one (their units only);
# more, and the whole-file index is built (or read from the cache) instead.
FEW_FUNCTIONS = 24
_KINDS = {"DW_TAG_structure_type": "struct", "DW_TAG_class_type": "struct",
          "DW_TAG_union_type": "union", "DW_TAG_enumeration_type": "enum", "DW_TAG_typedef": "typedef"}
_SCOPES = ("DW_TAG_namespace", "DW_TAG_module")


@contextmanager
def dwarf_errors(path: str) -> Iterator[None]:
    """What pyelftools raises on damaged DWARF, as one :class:`ElfError`.
    pyelftools trusts the tables it reads: a bad offset or form fails
    anywhere, with whatever Python raised there.  (pyelftools' own exceptions are
    imported only when something was raised: a cached run never imports it.)"""
    try:
        yield
    except ElfError:
        raise
    except OSError as e:
        raise ElfError(f"{path}: {e.strerror or e}") from None
    except (struct.error, ValueError, KeyError, IndexError, TypeError,
            AttributeError, AssertionError, OverflowError, RecursionError, ZeroDivisionError, EOFError,
            NotImplementedError, zlib.error) as e:
        raise ElfError(f"{path}: malformed DWARF: {type(e).__name__}: {e}"[:300]) from None
    except Exception as e:
        from elftools.common.exceptions import DWARFError, ELFError
        from elftools.construct.core import ConstructError

        if isinstance(e, (ELFError, DWARFError, ConstructError)):
            raise ElfError(f"{path}: malformed DWARF: {type(e).__name__}: {e}"[:300]) from None
        raise


def cache_path(key: str) -> str | None:
    """Where the index of the DWARF keyed ``key`` is kept: ``$PYCORE_CACHE_DIR/dwarf``
    or ``~/.cache/pycore/dwarf`` (``PYCORE_CACHE_DIR=off``: nowhere)."""
    configured = os.environ.get("PYCORE_CACHE_DIR")
    if configured == "off":
        return None
    if configured:
        root = os.path.join(configured, "dwarf")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "pycore", "dwarf")
    return os.path.join(root, f"{key}.json")


@record(frozen=True)
class FunctionTypes:
    """A function's parameters as BTF ids in ``spec``: ``params`` [(name, id)]
    in order (a parameter DWARF leaves unnamed has name ""), ``ret`` (0: void),
    and whether it takes ``...``."""

    name: str
    params: list[tuple[str, int]]
    ret: int
    variadic: bool
    spec: Spec


class DebugInfo:
    """The DWARF of one binary (see the module's docstring); ``close()`` it, or use ``with``."""

    def __init__(self, path: str, dwarf_path: str, base: Spec | None, little_endian: bool = True) -> None:
        self.path = path
        self.dwarf_path = dwarf_path
        self._files: list[ElfFile] | None = None     # opened with pyelftools on first need
        self._dwarf = None
        self._little = little_endian
        self._base = base
        self._fn_dir: str | None = None
        self._rawdwarf: Any = False                   # pycore.elf.dwarfraw.RawDwarf, None: pyelftools reads it
        self._symbols: dict[str, int | None] = {}      # name -> its symbol's address, looked up once
        self._index: dict | None = None
        self._key: str | None = None
        self._ar = False                  # .debug_aranges, read on first use (None: none)
        self._converter: BtfConverter | None = None
        self._spec: Spec | None = None
        self._spec_len = -1

    # -- opening -----------------------------------------------------------

    @classmethod
    def open(cls, path: str, base: Spec | None = None) -> DebugInfo | None:
        """The DWARF of ``path`` (its own or its debug file's), None when there
        is none; ``base``: the spec the BTF is split on (None: a BTF of its own,
        ids from 1).  Only section headers are read here (with struct); the DWARF
        when a call needs it."""
        files = [Sections(path)]
        try:
            with dwarf_errors(path):
                holder, where = files[0], path
                if not _has_dwarf(holder):
                    found = debug_file(holder, path)
                    if found is None:
                        return None
                    holder = Sections(found)
                    files.append(holder)
                    where = found
                    if not _has_dwarf(holder):
                        return None
            with dwarf_errors(where):
                dbg = cls(path, where, base, holder.little_endian)
                dbg._key = _cache_key(holder, where)
                return dbg
        finally:
            for x in files:
                x.close()

    @property
    def _dw(self):  # noqa: ANN202 - pyelftools' DWARFInfo, opened on first use
        if self._dwarf is None:
            files = self._elf_files()
            with dwarf_errors(self.dwarf_path):
                elf = files[-1].elf
                _skip_unused_sections(elf)
                dw = elf.get_dwarf_info(relocate_dwarf_sections=False, follow_links=False)
                if not dw.has_debug_info:
                    raise ElfError(f"{self.dwarf_path}: no .debug_info")
                self._dwarf = dw
        return self._dwarf

    def _elf_files(self) -> list[ElfFile]:
        """The binary and, when the DWARF is apart, its debug file, opened with pyelftools."""
        if self._files is None:
            files = [ElfFile(self.path)]
            try:
                if self.dwarf_path != self.path:
                    files.append(ElfFile(self.dwarf_path))
            except BaseException:
                files[0].close()
                raise
            self._files = files
        return self._files

    def close(self) -> None:
        for f in self._files or ():
            f.close()

    def __enter__(self) -> DebugInfo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- functions -----------------------------------------------------------

    def function(self, name: str) -> FunctionTypes | None:
        """``name``'s parameters and return type (None: no such function in the DWARF).
        What the DWARF gave is kept on disk by build id (:func:`_function_entry`): a
        later run reads that instead of the DWARF."""
        cached = self._load_function(name)
        if cached is not _MISSING:
            try:
                return self._typed(name, cached)  # type: ignore[arg-type]  # a dict or None
            except Exception:  # noqa: BLE001 - a damaged cache entry is only recomputed
                pass
        with dwarf_errors(self.dwarf_path):
            entry = self._again_if_partial(lambda: self._fresh_entry(name))
        self._store_function(name, entry)
        with dwarf_errors(self.dwarf_path):
            return self._typed(name, entry)

    def prefetch(self, name: str) -> None:
        """Start reading what :meth:`function` of ``name`` will read, when no entry of it is
        kept: a compressed .debug_info is inflated by a thread from here on (:mod:`pycore.elf.dwarfraw`)
        while the caller goes on (``pycore trace``: the binary's symbols, 6-8 ms of libc's
        first run in bench/bench_trace.py --only dwarf).  Errors are left for that call."""
        if self._rawdwarf is not False or self._load_function(name) is not _MISSING:
            return
        from pycore.elf.dwarfraw import RawDwarf

        try:
            with dwarf_errors(self.dwarf_path):
                self._rawdwarf = RawDwarf.open(self.dwarf_path)
        except ElfError:
            pass

    def _typed(self, name: str, entry: dict | None) -> FunctionTypes | None:
        if entry is None:
            return None
        names, types, variadic = entry["names"], entry["types"], bool(entry["variadic"])
        if not isinstance(names, list) or not isinstance(types, dict) or not isinstance(types["ids"], list) \
                or len(names) != len(types["ids"]) - 1:      # checked before anything is written
            raise ValueError("a function entry whose parameters and types differ")
        ids = self._conv().replay(types)
        params = [(str(n), i) for n, i in zip(names, ids[:-1])]
        out = FunctionTypes(name, params, ids[-1], variadic, self.spec)
        self._trim()
        return out

    def _function_file(self, name: str) -> str | None:
        """Where the entry of function ``name`` is kept: a file per function in a directory
        per DWARF (``{key}.fn``), named by a hash of the name (kept in the entry too)."""
        if not self._key:
            return None
        if self._fn_dir is None:
            where = cache_path(f"{self._key}.fn")
            if where is None:
                return None
            self._fn_dir = where.removesuffix(".json")
        raw = name.encode()
        return os.path.join(self._fn_dir, f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json")

    def _load_function(self, name: str) -> dict | None | object:
        """The cached entry of ``name`` (None: not in the DWARF), _MISSING when none is kept."""
        path = self._function_file(name)
        if path is None:
            return _MISSING
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return _MISSING
        if isinstance(data, dict) and data.get("format") == FUNCTION_FORMAT and data.get("name") == name \
                and (data.get("entry") is None or isinstance(data.get("entry"), dict)):
            return data["entry"]
        return _MISSING

    def _store_function(self, name: str, entry: dict | None) -> None:
        path = self._function_file(name)
        if path is not None:
            _store(path, {"format": FUNCTION_FORMAT, "name": name, "entry": entry})

    def params_text(self, name: str) -> list[str] | None:
        """``name``'s parameters as ``bpftrace -lv`` prints them (no indent), None
        when the DWARF has no such function."""
        return self.describe([name]).get(name)

    def describe(self, names: list[str]) -> dict[str, list[str]]:
        """:meth:`params_text` of many functions: those found, one unit at a time
        for a few, through the whole-file index (cached) for more."""
        with dwarf_errors(self.dwarf_path):
            if self._index is None and len(names) <= FEW_FUNCTIONS:
                self._load_index()
            if self._index is None and len(names) <= FEW_FUNCTIONS:
                out = {}
                for name in names:
                    text = self._again_if_partial(lambda: self._params_text_of(name))  # noqa: B023 - called here
                    if text is not None:
                        out[name] = text
                return out
            funcs = self._get_index()["functions"]
            return {n: funcs[n][2] for n in names if n in funcs}

    def _params_text_of(self, name: str) -> list[str] | None:
        die = self._function_die_raw(name)
        return None if die is None else _params_text(die)

    def _function_die(self, name: str):  # noqa: ANN202
        """The defining DIE of function ``name``: in the unit ``.debug_aranges`` gives
        for its symbol's address when the file has aranges (gcc writes them, and for
        every unit: an address in none is code without DWARF, assembly), else
        through the whole-file index."""
        aranges = self._aranges()
        if aranges is not None and aranges.entries:
            addr = self._symbol_address(name)
            if addr is not None:
                return self._die_at_address(name, addr)
        found = self._get_index()["functions"].get(name)
        return None if found is None else self._die(found[0], found[1])

    def _die_at_address(self, name: str, addr: int):  # noqa: ANN202
        cu_off = self._aranges().cu_offset_at_addr(addr)
        if cu_off is None:
            return None
        return _defining_die(_top_dies(self._dw.get_CU_at(cu_off).get_top_DIE()), name, addr)

    def _again_if_partial(self, read: Callable[[], T]) -> T:
        """``read()``, made again with all of .debug_info inflated when it failed on a part."""
        try:
            return read()
        except Exception:
            raw = self._rawdwarf
            if not raw or not raw.partial:
                raise
            raw.complete()
            return read()

    def _fresh_entry(self, name: str) -> dict | None:
        die = self._function_die_raw(name)
        return None if die is None else _function_entry(die, self._little)

    def _function_die_raw(self, name: str):  # noqa: ANN202
        """:meth:`_function_die`, read with :mod:`pycore.elf.dwarfraw` and
        :mod:`pycore.elf.dwarfscan` (no pyelftools: 5x faster on libc) when they can
        read the file, the DIE a :mod:`pycore.elf.dwarfscan` one."""
        if self._rawdwarf is False:
            from pycore.elf.dwarfraw import RawDwarf

            self._rawdwarf = RawDwarf.open(self.dwarf_path)
        raw = self._rawdwarf
        if raw is None:
            return self._function_die(name)
        if raw.has_aranges:
            addr = self._symbol_address(name)
            if addr is not None:
                cu_off = raw.cu_offset_at_addr(addr)
                if cu_off is None:
                    return None
                raw.want_unit(cu_off)
                top = raw.scanner.unit(cu_off).top
                return None if top is None else _defining_die(_top_dies(top), name, addr)
        found = self._get_index()["functions"].get(name)
        if found is None:
            return None
        raw.complete()
        return raw.scanner.die_at(found[1])

    def _aranges(self):  # noqa: ANN202
        if self._ar is False:
            self._ar = self._dw.get_aranges()
        return self._ar

    def _symbol_address(self, name: str) -> int | None:
        """The address of function or object symbol ``name`` (else of a ``name@VERSION``):
        the binary's ``.dynsym`` and ``.symtab``, then the debug file's, a later one
        winning.  Only the entries of that name are read (:meth:`ElfFile.named_symbols`)."""
        if name not in self._symbols:
            found: dict[str, int] = {}
            for f in self._elf_files():
                for secname in (".dynsym", ".symtab"):
                    for sym, value, _size, kind, shndx in f.named_symbols(secname, name):
                        if value and shndx and kind in (1, 2, 10):   # OBJECT, FUNC, GNU_IFUNC
                            found[sym] = value
            addr = found.get(name)
            if addr is None and "@" not in name:
                for value in found.values():         # the last of name@VERSION's
                    addr = value
            self._symbols[name] = addr
        return self._symbols[name]

    # -- types -----------------------------------------------------------------

    def named(self, kind: str, name: str, near: str | None = None) -> int | None:
        """The BTF id of ``struct NAME`` (``kind`` "struct"; C++ classes too), "union",
        "enum" or "typedef" NAME in the DWARF; None when it is not there.  With
        ``near`` (a function, the probed one), that function's unit is looked in
        first, without the whole-file index; then the first definition in the
        file, else a declaration (FWD)."""
        if kind == "class":
            kind = "struct"
        with dwarf_errors(self.dwarf_path):
            die = None
            if near is not None:
                fdie = self._function_die(near)
                if fdie is not None:
                    die = _unit_type(fdie.cu, kind, name)
            if die is None:
                found = self._get_index()["types"].get(f"{kind} {name}")
                if found is None:
                    return None
                die = self._die(found[0], found[1])
            tid = self._conv().convert(die)
            self.spec               # noqa: B018 - brought up to date
            self._trim()
            return tid

    @property
    def spec(self) -> Spec:
        """Every type converted so far, as a Spec (split on ``base``, if any): one object for the
        life of this DebugInfo, brought up to date in place by each conversion."""
        conv = self._conv()
        if self._spec is None:
            self._spec = conv.writer.spec(self._base, shadows=False)
            self._spec_len = conv.writer.next_id
        elif self._spec_len != conv.writer.next_id:
            # ids only grow: decoded types stay right, so the new blob takes the
            # old object's place and keeps its cache
            kept = self._spec._cache
            self._spec.__dict__.update(conv.writer.spec(self._base, shadows=False).__dict__)
            self._spec._cache.update(kept)
            self._spec_len = conv.writer.next_id
        return self._spec

    def _trim(self) -> None:
        """Let pyelftools forget the units and abbreviation tables it has read once a
        few are kept: what was converted is memoised by offset, and a trace of every
        libc function would otherwise keep 400 units (120 MB)."""
        dw = self._dwarf
        if dw is not None and len(dw._cu_cache) > 8:
            dw._cu_cache.clear()
            dw._cu_offsets_map.clear()
            dw._abbrevtable_cache.clear()

    def _conv(self) -> BtfConverter:
        if self._converter is None:
            from btf.writer import Writer

            writer = Writer() if self._base is None else Writer.split(self._base)
            self._converter = BtfConverter(writer, self._little)
        return self._converter

    def _die(self, cu_off: int, die_off: int):  # noqa: ANN202
        cu = self._dw.get_CU_at(cu_off)
        return cu.get_DIE_from_refaddr(die_off)

    # -- the whole-file index -------------------------------------------------

    def _load_index(self) -> None:
        path = cache_path(self._key) if self._key else None
        if path is None:
            return
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("format") == CACHE_FORMAT and \
                isinstance(data.get("functions"), dict) and isinstance(data.get("types"), dict):
            self._index = data

    def _get_index(self) -> dict:
        if self._index is None:
            self._load_index()
        if self._index is None:
            self._index = self._build_index()
            _store(cache_path(self._key) if self._key else None, self._index)
        return self._index

    def _build_index(self) -> dict:
        """One pass over every unit's top-level DIEs (and namespaces'): the first
        definition of each type and function name, as bpftrace finds them (units in
        order), with the functions' parameter lines.  Read with
        :mod:`pycore.elf.dwarfscan` (8x pyelftools' speed), one unit in memory at a time."""
        from pycore.elf.dwarfscan import Scanner

        scanner = Scanner(self._dw)
        functions: dict[str, list] = {}
        types: dict[str, list[int]] = {}
        declared: dict[str, list[int]] = {}
        for unit in scanner.units():
            off = unit.offset
            # compile and partial units; DWARF 5 type units (gcc -fdebug-types-section) for types
            if unit.top is None or unit.unit_type not in (1, 2, 3):
                continue
            for die in _top_dies(unit.top):
                tag = die.tag
                if tag == "DW_TAG_subprogram" and unit.unit_type != 2:
                    if "DW_AT_declaration" in die.attributes:
                        continue
                    names = [n for n in _function_names(die) if n not in functions]
                    if names:
                        entry = [off, die.offset, _params_text(die)]
                        for n in names:
                            functions[n] = entry
                elif tag in _KINDS:
                    name = die_name(die, False)
                    if not name:
                        continue
                    key = f"{_KINDS[tag]} {name}"
                    into = declared if "DW_AT_declaration" in die.attributes else types
                    into.setdefault(key, [off, die.offset])
            unit.release()
            for other in scanner.foreign.values():
                other.release()
            scanner.foreign.clear()
            scanner.forget_abbrevs()              # a table per unit: 2,063 for libc
        for key, where in declared.items():
            types.setdefault(key, where)
        return {"format": CACHE_FORMAT, "functions": functions, "types": types}


# Sections pyelftools would read (and decompress) that types and parameters never need.
_UNUSED_SECTIONS = frozenset((".debug_line", ".debug_frame", ".debug_loc", ".debug_loclists", ".debug_ranges",
                              ".debug_rnglists", ".eh_frame", ".debug_pubnames", ".debug_pubtypes"))


def _skip_unused_sections(elf) -> None:  # noqa: ANN001
    """Have ``get_dwarf_info`` leave out the line, location, range and frame tables:
    decompressing them is a third of opening libc's debug file (25 of 80 ms).  It
    replaces pyelftools' private reader on this one object; should pyelftools
    rename it, everything is read as before."""
    read = getattr(elf, "_read_dwarf_section", None)
    if read is None:
        return
    from io import BytesIO

    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor

    def lean(section, relocate):  # noqa: ANN001, ANN202
        if section.name in _UNUSED_SECTIONS:
            return DebugSectionDescriptor(stream=BytesIO(), name=section.name, global_offset=section["sh_offset"],
                                          size=0, address=section["sh_addr"])
        return read(section, relocate)

    elf._read_dwarf_section = lean


def _has_dwarf(f: Sections) -> bool:
    sec = f.get_section_by_name(".debug_info") or f.get_section_by_name(".zdebug_info")
    return sec is not None and sec["sh_type"] != "SHT_NOBITS" and sec["sh_size"] > 0


def _cache_key(f: Sections, path: str) -> str | None:
    """The build id of the file holding the DWARF and the size of its .debug_info
    (both in the file name); without a build id, its path, size and time."""
    sec = f.get_section_by_name(".debug_info")
    size = sec["sh_size"] if sec is not None else 0
    bid = build_id(f)
    if bid:
        return f"{bid}-{size:x}"
    try:
        st = os.stat(path)
    except OSError:
        return None
    ident = f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()
    return f"path-{zlib.crc32(ident):08x}-{size:x}"


def _store(path: str | None, index: dict) -> None:
    if path is None:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(index, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:          # a read-only cache: the pass runs again next time
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _top_dies(top) -> Iterator:  # noqa: ANN001
    """The DIEs under a unit's DIE, and those of its namespaces (C++)."""
    stack = [top]
    while stack:
        for die in children(stack.pop()):
            yield die
            if die.tag in _SCOPES and die.has_children:
                stack.append(die)


def _unit_type(cu, kind: str, name: str):  # noqa: ANN001, ANN202
    """The definition of KIND NAME among a pyelftools unit's top-level DIEs, or None."""
    for die in _top_dies(cu.get_top_DIE()):
        if _KINDS.get(die.tag) == kind and "DW_AT_declaration" not in die.attributes \
                and die_name(die, False) == name:
            return die
    return None


def _defining_die(dies: Iterator, name: str, addr: int):  # noqa: ANN001, ANN202
    """Among a unit's top-level DIEs, the definition of function ``name`` at ``addr``,
    else its first definition."""
    best = None
    for die in dies:
        if die.tag != "DW_TAG_subprogram" or "DW_AT_declaration" in die.attributes:
            continue
        if name not in _function_names(die):
            continue
        if attr_int(die, "DW_AT_low_pc") == addr:
            return die
        if best is None:
            best = die
    return best


def _function_names(die) -> list[str]:  # noqa: ANN001
    """The names a defining subprogram answers to: DW_AT_name and the mangled
    DW_AT_linkage_name (through its specification or abstract origin)."""
    names = []
    name = die_name(die)
    if name:
        names.append(name)
    for attr in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
        _, a = integrated(die, attr)
        if a is not None and isinstance(a.value, bytes):
            names.append(a.value.decode("utf-8", "replace"))
            break
    return names


def _function_entry(die, little_endian: bool) -> dict:  # noqa: ANN001
    """What :meth:`DebugInfo.function` keeps of a function's DIE: its parameters' names,
    whether it is variadic, and the BTF records of the parameter and return types
    (:func:`~pycore.elf.dwarfbtf.record_types`; the last id is the return type's)."""
    params, variadic = _params(die)
    types = record_types([type_of(p) for p in params] + [type_of(die)], little_endian)
    return {"names": [die_name(p) for p in params], "variadic": variadic, "types": types}


def _params(die) -> tuple[list, bool]:  # noqa: ANN001
    params, variadic = [], False
    if die.has_children:
        for child in children(die):
            if child.tag == "DW_TAG_formal_parameter":
                params.append(child)
            elif child.tag == "DW_TAG_unspecified_parameters":
                variadic = True
    return params, variadic


def _params_text(die) -> list[str]:  # noqa: ANN001
    """bpftrace 0.17's lines for a function's parameters: ``TYPE NAME`` (TYPE alone
    for an unnamed parameter, where 0.17 itself aborts)."""
    out = []
    for p in _params(die)[0]:
        text = bpftrace_type_name(type_of(p))
        name = die_name(p)
        out.append(f"{text} {name}" if name else text)
    return out
