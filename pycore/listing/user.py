"""``pycore list usdt:...`` and ``uprobe:...``: user-space probes of files.

Lines are ``usdt:/path:provider:name`` (bpftrace's spelling).  ``-v`` adds
argument count, semaphore address and number of locations; ``-vv`` every
location with its arguments decoded, like bcc's ``tplist -v``/``-vv``.
Addresses are link-time (as ``readelf -n`` prints them, after the
``.stapsdt.base`` adjustment), with file offsets where uprobes attach.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterator

from pycore.listing.entry import INDENT, Entry
from pycore.listing.patterns import ProbePattern, has_wildcard
from pycore.elf.stapsdt import UsdtError
from pycore.errors import ElfError
from pycore.elf.usdt import check_binary, iter_probes, mapped_objects, resolve_path

__all__ = ["usdt_entries", "uprobe_entries", "target_paths"]


def target_paths(pattern: ProbePattern, pid: int | None) -> tuple[list[str], bool]:
    """Files to read, and whether each must be a valid ELF with probes."""
    if pid is not None:
        objects = mapped_objects(pid)
        if not pattern.module:
            return objects, False
        return [resolve_path(pattern.module, pid)], True
    if not pattern.module:
        raise UsdtError(f"{pattern.kind}: which file? write {pattern.kind}:/path/to/binary or use -p PID")
    path = resolve_path(pattern.module)
    check_binary(path)
    return [path], True


def usdt_entries(pattern: ProbePattern, verbose: int, pid: int | None) -> Iterator[Entry]:
    paths, strict = target_paths(pattern, pid)
    for probe in iter_probes(paths, strict):
        if not fnmatchcase(f"{probe.provider}:{probe.name}", pattern.target):
            continue
        entry = Entry(probe.spec)
        if verbose:
            sema = f"{probe.semaphore:#x} (file offset {probe.semaphore_offset:#x})" \
                if probe.semaphore else "none"
            entry.details.append(f"{INDENT}args: {probe.arg_count}  semaphore: {sema}  "
                                 f"locations: {len(probe.locations)}")
        if verbose >= 2:
            for i, loc in enumerate(probe.locations):
                entry.details.append(f"{INDENT}location {i}: {loc.address:#x} "
                                     f"(file offset {loc.file_offset:#x})  args: {loc.args_text}")
                for j, a in enumerate(loc.args):
                    entry.details.append(f"{INDENT}{INDENT}arg{j}: {a.text:<20} {a.describe()}")
        yield entry


def uprobe_entries(pattern: ProbePattern, verbose: int, pid: int | None) -> Iterator[Entry]:
    from pycore.elf.symbols import functions, parse_spec

    paths, strict = target_paths(pattern, pid)
    if not has_wildcard(pattern.target) and parse_spec(pattern.target)[1] is not None:
        yield from _offset_entries(pattern, paths, strict, verbose)
        return
    for path in paths:
        try:
            funcs = functions(path)
        except ElfError:
            if strict:
                raise
            continue
        for fn in funcs:
            if not (fnmatchcase(fn.name, pattern.target) or fnmatchcase(fn.demangled, pattern.target)):
                continue
            shown = fn.demangled if fn.demangled != fn.name else fn.name
            entry = Entry(f"{pattern.kind}:{path}:{shown}")
            if verbose:
                mangled = f"  mangled: {fn.name}" if fn.demangled != fn.name else ""
                entry.details.append(f"{INDENT}address: {fn.address:#x}  size: {fn.size}{mangled}")
            yield entry


def _offset_entries(pattern: ProbePattern, paths: list[str], strict: bool, verbose: int) -> Iterator[Entry]:
    """``uprobe:PATH:FUNC+OFF``: the one place it names, after checking the
    offset is inside FUNC and on an instruction boundary (an error otherwise)."""
    from pycore.elf.symbols import check_offset, file_offset, find_function, parse_spec

    name, off = parse_spec(pattern.target)
    if not name:
        raise UsdtError(f"{pattern.kind}:{pattern.target}: give FUNCTION+OFFSET, not a bare address")
    for path in paths:
        try:
            fn = find_function(path, name)
        except ElfError:
            if strict:
                raise
            continue
        how = check_offset(path, fn, off)
        shown = fn.demangled if fn.demangled != fn.name else fn.name
        entry = Entry(f"{pattern.kind}:{path}:{shown}+{off:#x}")
        if verbose:
            mangled = f"  mangled: {fn.name}" if fn.demangled != fn.name else ""
            entry.details.append(f"{INDENT}address: {fn.address + off:#x} (file offset "
                                 f"{file_offset(path, fn.address + off):#x})  size: {fn.size}{mangled}")
            entry.details.append(f"{INDENT}checked: {how}")
        yield entry
