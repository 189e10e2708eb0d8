"""An object's global variables by name, typed from its BTF.

Globals live in libbpf's internal maps, one per data section: ``.rodata``
(``const volatile``: configuration fixed at load, the verifier prunes on it),
``.bss`` and ``.data`` (shared with the programs while they run).  The BTF
DATASEC of each section says where each variable sits and what type it is.

Before load, reads and writes go to the map's initial value (what load will
copy in).  After load, libbpf has mmaped .bss/.data, and the same pointer
reads and writes the live memory the programs use; .rodata is frozen by then
and writing it is refused here rather than crashing on a read-only page.
"""

from __future__ import annotations

from collections.abc import Iterator

from btf.kinds import Kind

from pycore.native import libbpf as L
from pycore.native.codec import Codec, decoder_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from pycore.native.maps import Map
    from pycore.native.object import BpfObject

ffi, lib = L.ffi, L.lib


def _symbol_offsets(elf_data: bytes) -> dict[tuple[str, str], int]:
    """(section name, symbol name) -> offset in the section, for data symbols."""
    from btf.elf import STT_OBJECT, ElfObject

    elf = ElfObject(elf_data)
    sections = elf.sections
    out: dict[tuple[str, str], int] = {}
    for sym in elf.symbols():
        if sym.type != STT_OBJECT or not 0 < sym.shndx < len(sections):
            continue
        out[(sections[sym.shndx].name, sym.name)] = sym.value
    return out


def _mmap_map(m: Map, writable: bool) -> Any:
    """The map's memory (BPF_F_MMAPABLE), or False when the kernel refuses."""
    import mmap

    length = -(-m.value_size // mmap.PAGESIZE) * mmap.PAGESIZE
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    try:
        mm = mmap.mmap(m.fd, length, flags=mmap.MAP_SHARED, prot=prot)
    except OSError:
        return False
    return memoryview(mm)[:m.value_size]


class _Var:
    __slots__ = ("name", "section", "map", "offset", "codec")

    def __init__(self, name: str, section: str, map: Map, offset: int, codec: Codec) -> None:
        self.name = name
        self.section = section
        self.map = map
        self.offset = offset
        self.codec = codec


class Globals:
    """``obj.globals["target_tgid"] = 1234``: the object's global variables.

    Keys are the variables' C names; values are decoded with
    :mod:`pycore.native.codec` (ints, str for char arrays, dataclasses for structs).
    """

    def __init__(self, obj: BpfObject) -> None:
        self._obj = obj
        self._vars: dict[str, _Var] = {}
        self._mmaps: dict[str, Any] = {}
        spec = obj.btf
        offsets = _symbol_offsets(obj._data)
        datasecs = {spec.name(i): i for i in spec.ids_of_kind(Kind.DATASEC)}
        for m in obj.maps.values():
            if not m.internal:
                continue
            sec_id = m.btf_value_type_id
            if not sec_id or spec.kind(sec_id) != Kind.DATASEC:
                # libbpf names the map "<obj prefix>.<section>": match the suffix
                sec_id = next((i for name, i in datasecs.items() if m.name.endswith(name)), 0)
            if not sec_id:
                continue
            sec = spec.type(sec_id)
            for vs in sec.vars:
                var = vs.type
                if var.kind != Kind.VAR:
                    continue
                # clang leaves DATASEC offsets 0 in the .o; libbpf (and we)
                # take them from the symbol table.
                offset = vs.offset or offsets.get((sec.name, var.name), 0)
                self._vars[var.name] = _Var(var.name, sec.name, m, offset, decoder_for(spec, var.type_id))

    # -- memory -------------------------------------------------------------

    def _memory(self, v: _Var) -> Any:
        """The section's bytes: the initial value before load, the map's mmap after.

        libbpf 1.1 remaps the initial value onto the map only in skeleton
        loads, so after a plain load we mmap the map ourselves."""
        if self._obj.loaded:
            mm = self._mmaps.get(v.map.name)
            if mm is None:
                mm = self._mmaps[v.map.name] = _mmap_map(v.map, writable=not v.section.startswith(".rodata"))
            return mm or None
        size = ffi.new("size_t *")
        ptr = lib.bpf_map__initial_value(v.map._require(), size)
        if ptr == ffi.NULL:
            return None
        return ffi.buffer(ptr, size[0])

    def _var(self, name: str) -> _Var:
        try:
            return self._vars[name]
        except KeyError:
            known = ", ".join(f"{n} ({v.section})" for n, v in sorted(self._vars.items())) or "none"
            raise KeyError(f"{self._obj.name} has no global variable {name!r}; known: {known}") from None

    # -- mapping ------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        v = self._var(name)
        mem = self._memory(v)
        if mem is None:  # not mmapable on this kernel: read the map's one element
            raw = v.map.lookup_raw(bytes(v.map.key_size))
            return v.codec.decode(raw, v.offset)
        return v.codec.decode(mem, v.offset)

    def __setitem__(self, name: str, value: Any) -> None:
        v = self._var(name)
        if self._obj.loaded and v.section.startswith(".rodata"):
            raise ValueError(f"{self._obj.name}: cannot set {name}: it is in {v.section} (const volatile), "
                             "which is frozen at load; set it before load()")
        if self._obj.loaded and v.section == ".kconfig":
            raise ValueError(f"{self._obj.name}: cannot set {name}: .kconfig values come from the kernel")
        data = v.codec.encode(value)
        mem = self._memory(v)
        if mem is None:
            raw = bytearray(v.map.lookup_raw(bytes(v.map.key_size)) or bytes(v.map.value_size))
            raw[v.offset:v.offset + len(data)] = data
            v.map.update_raw(bytes(v.map.key_size), bytes(raw))
            return
        mem[v.offset:v.offset + len(data)] = data

    def __contains__(self, name: object) -> bool:
        return name in self._vars

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars)

    def __len__(self) -> int:
        return len(self._vars)

    def keys(self) -> list[str]:
        return list(self._vars)

    def items(self) -> list[tuple[str, Any]]:
        return [(n, self[n]) for n in self._vars]

    def section(self, name: str) -> str:
        """The data section holding ``name`` (``.rodata``, ``.bss``, ``.data``)."""
        return self._var(name).section

    def codec(self, name: str) -> Codec:
        return self._var(name).codec

    def __repr__(self) -> str:
        return f"<Globals of {self._obj.name}: {', '.join(self._vars)}>"
