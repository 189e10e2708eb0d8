"""``pycore list usdt:...`` and ``uprobe:...``: user-space probes of files.

Lines are ``usdt:/path:provider:name`` (bpftrace's spelling).  ``-v`` adds
argument count, semaphore address and number of locations; ``-vv`` every
location with its arguments decoded, like bcc's ``tplist -v``/``-vv``.
Addresses are link-time (as ``readelf -n`` prints them, after the
``.stapsdt.base`` adjustment), with file offsets where uprobes attach.
``uprobe:`` with ``-v`` prints each function's parameters from the binary's
DWARF (or its debug file's) as ``bpftrace -lv`` does, and address and size
when there is no DWARF; ``-vv`` both.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from typing import Callable, Iterator

from pycore.listing.entry import INDENT, Entry
from pycore.listing.patterns import PROCESS_EXE, ProbePattern, has_wildcard
from pycore.elf.stapsdt import UsdtError
from pycore.errors import ElfError
from pycore.elf.usdt import Probe, UsdtFile, check_binary, mapped_objects, resolve_path

__all__ = ["usdt_entries", "uprobe_entries", "target_paths", "process_executable"]


def in_root(pid: int, path: str) -> str:
    """``path`` as process ``pid`` sees it, from here: under /proc/PID/root (its mount namespace,
    a container's files), the spelling bpftrace -l -p prints."""
    prefix = f"/proc/{pid}/root"
    return prefix + path if path.startswith("/") and not path.startswith("/proc/") else path


def process_executable(pid: int) -> str:
    """The executable of process ``pid``, under /proc/PID/root (its own /proc/PID/exe when the
    file was deleted or replaced since it started)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except FileNotFoundError:
        if os.path.exists(f"/proc/{pid}"):
            raise UsdtError(f"process {pid} has no executable (a kernel thread?)") from None
        raise UsdtError(f"process {pid} does not exist (gone?)") from None
    except OSError as e:
        raise UsdtError(f"process {pid}: /proc/{pid}/exe: {e.strerror}") from None
    return f"/proc/{pid}/exe" if exe.endswith(" (deleted)") else in_root(pid, exe)


def target_paths(pattern: ProbePattern, pid: int | None) -> tuple[list[str], bool]:
    """Files to read, and whether each must be a valid ELF. With -p PID, files found through the
    process (its executable, its mappings) and USDT files are read and named under /proc/PID/root,
    as bpftrace -l -p names them; a uprobe file named in the pattern is shown as resolved."""
    if pattern.module == PROCESS_EXE:
        if pid is None:
            raise UsdtError(f"{pattern.kind}:*: which file? write {pattern.kind}:/path/to/binary:FUNCTION, "
                            "or give -p PID for the process's executable")
        return [process_executable(pid)], True
    if pid is not None:
        objects = mapped_objects(pid)  # and an error for a process that is gone
        if not pattern.module:
            return [in_root(pid, p) for p in objects], False
        path = resolve_path(pattern.module, pid)
        return [in_root(pid, path) if pattern.kind == "usdt" else path], True
    if not pattern.module:
        raise UsdtError(f"{pattern.kind}: which file? write {pattern.kind}:/path/to/binary or use -p PID")
    path = resolve_path(pattern.module)
    check_binary(path)
    return [path], True


def _probes(paths: list[str], strict: bool, warn: Callable[[str], None]) -> list[Probe]:
    """The USDT probes of ``paths``; with ``strict`` a file that is not ELF is an error, and a file
    without USDT notes a note on stderr (the listing then matches nothing: exit 1)."""
    found: list[Probe] = []
    for path in paths:
        try:
            f = UsdtFile(path)
        except ElfError:
            if strict:
                raise
            continue
        with f:
            if not f.has_notes:
                if strict:
                    warn(f"{path} has no USDT probes (no .note.stapsdt section)")
                continue
            found.extend(f.probes())
    return found


def usdt_entries(pattern: ProbePattern, verbose: int, pid: int | None,
                 warn: Callable[[str], None] = lambda message: None) -> Iterator[Entry]:
    """USDT probes sorted by their lines, as bpftrace sorts them (across files with -p PID)."""
    paths, strict = target_paths(pattern, pid)
    probes = sorted(_probes(paths, strict, warn), key=lambda probe: probe.spec)
    for probe in probes:
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
            # a name: only its functions made (a stripped library's debug file then read only when
            # the library's own tables lack it: libc's 6.6k functions are ~20 ms)
            funcs = functions(path, None if has_wildcard(pattern.target) else pattern.target)
        except ElfError:
            if strict:
                raise
            continue
        matched = [fn for fn in funcs
                   if fnmatchcase(fn.name, pattern.target) or fnmatchcase(fn.demangled, pattern.target)]
        params = _dwarf_params(path, [fn.name for fn in matched], strict) if verbose and matched else None
        listed: set[str] = set()
        for fn in matched:
            shown = fn.demangled if fn.demangled != fn.name else fn.name
            if shown in listed and verbose < 2:
                # one line a name, as bpftrace lists them: local functions of one name in several
                # units (libc's debug file has 43 such), a versioned symbol's two addresses (glob);
                # the name attaches to the first (bpftrace: the same), -vv lists each address
                continue
            listed.add(shown)
            entry = Entry(f"{pattern.kind}:{path}:{shown}")
            if params is not None:
                entry.details.extend(f"{INDENT}{line}" for line in params.get(fn.name, ()))
            if verbose >= 2 or verbose and params is None:
                mangled = f"  mangled: {fn.name}" if fn.demangled != fn.name else ""
                entry.details.append(f"{INDENT}address: {fn.address:#x}  size: {fn.size}{mangled}")
            yield entry


def _dwarf_params(path: str, names: list[str], strict: bool) -> dict[str, list[str]] | None:
    """Each function's parameters as ``bpftrace -lv`` prints them, from the DWARF of
    ``path`` or of its debug file; None when it has none (the listing then shows
    addresses and sizes).  A function the DWARF does not describe has none, as in
    bpftrace; C++ functions are found by their mangled names (bpftrace 0.17 shows none)."""
    from pycore.elf.dwarf import DebugInfo

    try:
        dbg = DebugInfo.open(path)
        if dbg is None:
            return None
        with dbg:
            return dbg.describe(names)
    except ElfError:
        if strict:
            raise
        return None


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
