"""USDT probes of an ELF file: where they are, and how BPF reads their arguments.

libbpf 1.1 attaches USDT probes itself but only understands ``N@%reg``,
``N@off(%reg)`` and ``N@$imm``; real binaries also use SIB operands and
``%rip``-relative globals (PostgreSQL's ``-4@NBuffers(%rip)``).  So pycore
does the USDT work in Python and attaches plain uprobes:

* notes are read from ``.note.stapsdt`` (:mod:`pycore.elf.stapsdt`), adjusted by
  ``.stapsdt.base`` (prelink moves code, the note keeps its link-time base),
  and each location's and semaphore's address is turned into a file offset
  through the PT_LOAD segments, which is what uprobes take;
* every location gets a spec id (the uprobe's BPF cookie) and a spec in the
  ``pycore_usdt_specs`` map of the object (see bpf_src/pycore_usdt.bpf.h)
  saying, per argument, which pt_regs slot(s) and offset to read;
* ``%rip``-relative globals become "memory at the probe's ip + delta", with
  delta = symbol + offset - location, both link-time addresses: the load
  bias of a PIE or shared library cancels out, so one spec serves every
  process and no /proc/PID/maps lookup is needed at attach time;
* semaphores (is-enabled probes) are counted by the kernel's uprobe
  reference counter (``ref_ctr_offset``), never by writing process memory.
"""

from __future__ import annotations

import os
import struct

from pycore.elf.file import ElfFile, elf_errors
from pycore.errors import ElfError
from pycore.elf.stapsdt import MAX_ARGS, Arg, Note, UsdtError, parse_args, parse_notes
from pycore.record import record  # not dataclasses: imported by pycore trace's uprobes (bench_trace --only dwarf)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pycore.native.object import BpfObject, Link

__all__ = ["UsdtError", "Location", "Probe", "UsdtFile", "UsdtAttacher", "PT_REGS_OFFSETS",
           "mapped_objects", "encode_spec"]

# struct pt_regs on x86-64 (arch/x86/include/asm/ptrace.h): the user-visible
# ptrace layout, an ABI the kernel keeps stable, so it is safe for every kernel.
PT_REGS_OFFSETS = {
    "r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40, "r11": 48, "r10": 56,
    "r9": 64, "r8": 72, "rax": 80, "rcx": 88, "rdx": 96, "rsi": 104, "rdi": 112,
    "rip": 128, "rsp": 152,
}
NO_REG = 0xFFFF
# enum pycore_usdt_arg_kind in bpf_src/pycore_usdt.bpf.h
KIND_CONST, KIND_REG, KIND_MEM, KIND_SIB, KIND_IP_REL = range(5)
_ARG = struct.Struct("<qHHBBBBB7x")       # 24 bytes: struct pycore_usdt_arg
_SPEC_HEAD = struct.Struct("<II")          # cnt, pad
SPEC_SIZE = _SPEC_HEAD.size + MAX_ARGS * _ARG.size


@record(frozen=True)
class Location:
    """One place a probe fires: link-time ``address`` (after the .stapsdt.base
    adjustment), its ``file_offset`` for uprobes, and its arguments there."""

    address: int
    file_offset: int
    args: tuple[Arg, ...]
    args_text: str


@record
class Probe:
    path: str
    provider: str
    name: str
    semaphore: int                 # link-time address, 0 if none
    semaphore_offset: int          # file offset for ref_ctr_offset, 0 if none
    locations: list[Location]

    @property
    def arg_count(self) -> int:
        return len(self.locations[0].args) if self.locations else 0

    @property
    def spec(self) -> str:
        return f"usdt:{self.path}:{self.provider}:{self.name}"


class UsdtFile(ElfFile):
    """The USDT probes of one ELF file (executable or shared library)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        try:
            with elf_errors(path):
                self._notes = self._read_notes()
        except ElfError:
            self.close()
            raise
        self._probes: list[Probe] | None = None

    def __enter__(self) -> UsdtFile:
        return self

    def _read_notes(self) -> list[Note]:
        data = self.section_data(".note.stapsdt")
        if data is None:
            return []
        try:
            notes = parse_notes(data, self.elf.elfclass, self.elf.little_endian, decode_args=False)
        except UsdtError as e:
            raise UsdtError(f"{self.path}: {e}") from None
        base = self.elf.get_section_by_name(".stapsdt.base")
        if base is not None:
            real = base["sh_addr"]
            notes = [n if not n.base or n.base == real else
                     Note(n.provider, n.name, n.location + real - n.base, real,
                          n.semaphore + real - n.base if n.semaphore else 0, n.args_text)
                     for n in notes]
        return notes

    @property
    def has_notes(self) -> bool:
        return bool(self._notes)

    def probes(self) -> list[Probe]:
        """Probes in note order, each with all its locations (one per note)."""
        if self._probes is None:
            with elf_errors(self.path):
                self._probes = self._read_probes()
        return self._probes

    def _read_probes(self) -> list[Probe]:
        """Probes in note order, each with all its locations (one per note)."""
        by_key: dict[tuple[str, str], Probe] = {}
        for n in self._notes:
            try:
                args = parse_args(n.args_text)
            except UsdtError as e:
                raise UsdtError(f"{self.path}: {n.provider}:{n.name}: {e}") from None
            p = by_key.get((n.provider, n.name))
            if p is None:
                sema_off = self.file_offset(n.semaphore, f"{n.provider}:{n.name} semaphore") \
                    if n.semaphore else 0
                p = by_key[(n.provider, n.name)] = Probe(self.path, n.provider, n.name,
                                                         n.semaphore, sema_off, [])
            loc_off = self.file_offset(n.location, f"{n.provider}:{n.name} location")
            p.locations.append(Location(n.location, loc_off, args, n.args_text))
        return list(by_key.values())

    def probe(self, provider: str, name: str) -> Probe:
        for p in self.probes():
            if p.name == name and provider in ("", "*", p.provider):
                return p
        if not self._notes:
            raise UsdtError(f"{self.path}: no USDT probes (no .note.stapsdt)")
        providers = sorted({p.provider for p in self.probes()})
        if provider not in ("", "*") and provider not in providers:
            raise UsdtError(f"{self.path}: unknown USDT provider {provider!r} (known: {', '.join(providers)})")
        raise UsdtError(f"{self.path}: no USDT probe {provider}:{name}")

    def symbol_address(self, name: str) -> int:
        """A data or function symbol's link-time address, from .symtab then .dynsym."""
        try:
            return self.symbols()[name.split("@", 1)[0]]
        except KeyError:
            raise UsdtError(f"{self.path}: symbol {name!r} of a %rip-relative argument "
                            "is in neither .symtab nor .dynsym") from None


def encode_spec(f: UsdtFile, loc: Location) -> bytes:
    """The ``struct pycore_usdt_spec`` for one location (see pycore_usdt.bpf.h)."""
    out = [_SPEC_HEAD.pack(len(loc.args), 0)]
    for a in loc.args:
        reg = PT_REGS_OFFSETS.get(a.reg, NO_REG) if a.reg else NO_REG
        idx = NO_REG
        offset = a.offset
        if a.kind == "const":
            kind, offset = KIND_CONST, a.value
        elif a.kind == "reg":
            kind = KIND_REG
        elif a.kind == "mem":
            kind = KIND_MEM
        elif a.kind == "sib":
            kind, idx = KIND_SIB, PT_REGS_OFFSETS[a.index]
        else:
            if not a.symbol:
                raise UsdtError(f"{f.path}: argument {a.text!r}: %rip-relative without a symbol "
                                "cannot be located")
            kind, offset = KIND_IP_REL, f.symbol_address(a.symbol) + a.offset - loc.address
        out.append(_ARG.pack(offset, reg, idx, kind, a.size, a.signed, a.shift, a.scale))
    out.append(b"\0" * (_ARG.size * (MAX_ARGS - len(loc.args))))
    return b"".join(out)


def check_pid(pid: int) -> None:
    if pid is not None and pid >= 0 and not os.path.exists(f"/proc/{pid}"):
        raise UsdtError(f"process {pid} does not exist (gone?)")


def check_binary(path: str) -> None:
    if not os.path.exists(path):
        raise UsdtError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise UsdtError(f"{path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise UsdtError(f"{path}: not readable")


class UsdtAttacher:
    """Attaches one BPF program to USDT probes of an object that includes
    ``pycore_usdt.bpf.h``: fills ``pycore_usdt_specs`` and hands out spec
    ids as uprobe cookies (unique per object).

    ``on_spec(spec_id, probe, index)`` runs before each location's uprobe is
    created: per-location state a program looks up by its cookie must be in
    place before the first hit, which can come as soon as the link exists."""

    def __init__(self, obj: BpfObject, map_name: str = "pycore_usdt_specs",
                 on_spec: Callable[[int, Probe, int], None] | None = None) -> None:
        self.obj = obj
        self.map = obj.maps[map_name]
        self.on_spec = on_spec
        self.next_id = 1
        self._files: dict[str, UsdtFile] = {}
        # spec id -> (probe, location index): lets tools tell locations apart
        self.where: dict[int, tuple[Probe, int]] = {}

    def file(self, path: str) -> UsdtFile:
        f = self._files.get(path)
        if f is None:
            check_binary(path)
            f = self._files[path] = UsdtFile(path)
        return f

    def attach(self, program: str, path: str, provider: str, name: str, pid: int = -1) -> list[Link]:
        """Attach ``program`` at every location of ``provider:name`` in ``path``
        (all processes, or only ``pid``); returns one link per location."""
        check_pid(pid)
        path = resolve_path(path, pid)
        f = self.file(path)
        probe = f.probe(provider, name)
        return self.attach_probe(program, f, probe, pid)

    def attach_probe(self, program: str, f: UsdtFile, probe: Probe, pid: int = -1) -> list[Link]:
        prog = self.obj.programs[program]
        links = []
        for i, loc in enumerate(probe.locations):
            spec_id = self.next_id
            self.next_id += 1
            self.map[spec_id] = encode_spec(f, loc)
            self.where[spec_id] = (probe, i)
            if self.on_spec is not None:
                self.on_spec(spec_id, probe, i)
            links.append(prog.attach_uprobe(f.path, offset=loc.file_offset, pid=pid,
                                            ref_ctr_offset=probe.semaphore_offset, cookie=spec_id))
        return links

    def close(self) -> None:
        for f in self._files.values():
            f.close()


def resolve_path(path: str, pid: int = -1) -> str:
    """A bare name is looked up in the process's mappings (``libc.so.6``, ``libc``), or PATH
    (``bash``), or the dynamic linker's cache (``libc``, ``libssl``), as bpftrace does."""
    if "/" in path:
        return in_root_of(pid, path) if pid is not None and pid >= 0 else path
    if pid is not None and pid >= 0:
        for p in mapped_objects(pid):
            if os.path.basename(p) == path or os.path.basename(p).startswith(path + "."):
                return in_root_of(pid, p)
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        cand = os.path.join(d, path)
        if os.path.isfile(cand):
            return cand
    from pycore.elf.ldcache import find_library

    lib = find_library(path)
    if lib is not None:
        return lib
    raise UsdtError(f"{path}: not found" + (f" in process {pid}" if pid is not None and pid >= 0 else
                                            " on PATH nor in the dynamic linker's cache"))


def in_root_of(pid: int, path: str) -> str:
    """``path`` as process ``pid`` sees it: under ``/proc/PID/root`` when the process has another root
    (a container's mount namespace, a chroot) and the file is there, else ``path`` itself. The kernel
    attaches a uprobe to the inode the path names, so the prefixed path reaches the process's file."""
    if not os.path.isabs(path):
        return path
    root = f"/proc/{pid}/root"
    try:
        theirs, ours = os.stat(root), os.stat("/")
    except OSError:          # gone, or not ours to look into: the path as given
        return path
    if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino) and _same_mounts(pid):
        return path
    inside = root + path
    return inside if os.path.exists(inside) else path


def _same_mounts(pid: int) -> bool:
    """Whether the process shares our mount namespace (then its paths are ours)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    except OSError:
        return True


def mapped_objects(pid: int) -> list[str]:
    """Files mapped by a process, in address order, each once (from /proc/PID/maps)."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise UsdtError(f"process {pid} does not exist (gone?)") from None
    except OSError as e:
        raise UsdtError(f"process {pid}: /proc/{pid}/maps: {e.strerror}") from None
    seen: dict[str, None] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and not parts[5].endswith(" (deleted)"):
            seen.setdefault(parts[5], None)
    return list(seen)


def iter_probes(paths: list[str], strict: bool) -> Iterator[Probe]:
    """Probes of several files; with ``strict`` False, files that are not ELF
    or have no notes are skipped (for ``list -p PID``)."""
    for path in paths:
        try:
            f = UsdtFile(path)
        except ElfError:
            if strict:
                raise
            continue
        with f:
            if strict and not f.has_notes:
                raise UsdtError(f"{path}: no USDT probes (no .note.stapsdt)")
            yield from f.probes()
