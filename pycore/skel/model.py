"""What a skeleton says about one object, read from its ELF and BTF: programs, maps, globals, rings, classes.

The object is opened (not loaded) with :class:`BpfObject`, so the names are
libbpf's own, the ones the skeleton finds at run time; types come from the
object's BTF through :mod:`pycore.native.codec`, so a generated dataclass has
exactly the fields, in the order, that the codec decodes. Everything the
skeleton cannot type is a :class:`SkelError` saying what to do.
"""

from __future__ import annotations

import dataclasses
import keyword
import os
import re
from typing import Any

from btf import layout
from btf.kinds import Kind

from pycore.skel.errors import SkelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec
    from btf import types as T

    from pycore.native.codec import CodecRegistry
    from pycore.native.object import BpfObject

RING_VAR_PREFIX = "__pycore_ring_event__"  # PYCORE_RING_EVENT(map, type) in pycore.bpf.h
EM_BPF = 247

# Section prefixes pycore attaches (Program.attach and its attach_* methods), and how many
# "/"-separated parts after the prefix name the target (the program then attaches by itself).
_ATTACHABLE: dict[str, int] = {
    "tracepoint": 2, "tp": 2, "raw_tracepoint": 1, "raw_tp": 1, "raw_tracepoint.w": 1, "raw_tp.w": 1,
    "tp_btf": 1, "fentry": 1, "fexit": 1, "fmod_ret": 1, "fentry.s": 1, "fexit.s": 1, "fmod_ret.s": 1,
    "lsm": 1, "lsm.s": 1, "kprobe": 1, "kretprobe": 1, "kprobe.multi": 1, "kretprobe.multi": 1,
    "uprobe": 1, "uretprobe": 1, "uprobe.s": 1, "uretprobe.s": 1, "usdt": 1,
    # never by itself: the caller opens the perf events (one a CPU, at its rate) and attaches the
    # program to each (pycore.link.perf_event.attach_bpf), as pycore profile does
    "perf_event": 0,
}
_DICT_MAP_TYPES = {"hash", "array", "percpu_hash", "percpu_array", "lru_hash", "lru_percpu_hash",
                   "lpm_trie", "hash_of_maps", "array_of_maps", "sk_storage", "inode_storage",
                   "task_storage", "cgrp_storage", "bloom_filter", "queue", "stack"}
_PERCPU = {"percpu_hash", "percpu_array", "lru_percpu_hash"}
_TYPED_MAP_TYPES = {"hash", "array", "percpu_hash", "percpu_array", "lru_hash", "lru_percpu_hash", "lpm_trie"}


@dataclasses.dataclass
class PyType:
    """A BTF type as Python sees it: the annotation and the classes an assignment is checked against."""

    ann: str
    checks: tuple[str, ...]


@dataclasses.dataclass
class Field:
    name: str
    ann: str
    default: str  # an expression: the value, or "_dc.field(...)"


@dataclasses.dataclass
class ClassModel:
    key: str              # "struct exec_event", "enum kind", "#12" (anonymous)
    name: str             # the Python class name
    kind: str             # "dataclass" | "enum"
    doc: str
    fields: list[Field] = dataclasses.field(default_factory=list)
    members: list[tuple[str, int]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ProgModel:
    name: str
    attr: str
    section: str
    auto_attach: bool


@dataclasses.dataclass
class MapModel:
    name: str
    attr: str
    type_name: str
    kind: str             # "typed" | "percpu" | "plain" (no key/value: rings, perf arrays, ...)
    key: PyType | None = None
    value: PyType | None = None


@dataclasses.dataclass
class VarModel:
    name: str
    attr: str
    section: str
    type: PyType


@dataclasses.dataclass
class RingModel:
    name: str
    attr: str
    event_key: str        # how RingBuffer finds the struct: "struct x" or "#id"
    event: str            # the Python class name
    source: str           # "annotation" | "--ring"


@dataclasses.dataclass
class SkelModel:
    object_file: str      # the object's file name ("counter.bpf.o")
    class_name: str
    progs: list[ProgModel]
    maps: list[MapModel]
    parts: dict[str, list[VarModel]]   # "rodata" | "bss" | "data" -> variables
    rings: list[RingModel]
    classes: list[ClassModel]
    argv: list[str]       # the pycore skel options that change the text (--ring, --class, --bytes-map)


def object_stem(path: str) -> str:
    """``counter`` for ``dir/counter.bpf.o``."""
    base = os.path.basename(path)
    for suffix in (".bpf.o", ".o"):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def camel(name: str) -> str:
    parts = [p for p in name.replace("-", "_").replace(".", "_").split("_") if p]
    s = "".join(p[:1].upper() + p[1:] for p in parts) or "Object"
    return s if s[0].isalpha() else "Bpf" + s


def attr_name(name: str) -> str:
    """A C name as a Python attribute (keywords get a trailing ``_``)."""
    return name + "_" if keyword.iskeyword(name) else name


def check_elf(data: bytes, path: str) -> None:
    if len(data) < 20 or data[:4] != b"\x7fELF":
        raise SkelError(f"{path} is not an ELF file: give a BPF object (pycore build prog.bpf.c -o prog.bpf.o)")
    machine = int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")
    if machine != EM_BPF:
        raise SkelError(f"{path} is an ELF file for machine {machine}, not a BPF object (e_machine {EM_BPF})")
    from btf.elf import ElfObject

    try:
        section = ElfObject(data, path).section(".BTF")
    except ValueError as exc:
        raise SkelError(f"{path}: {exc}") from None
    if section is None or section.size == 0:
        raise SkelError(f"{path} has no BTF (.BTF section): compile with -g (pycore build does), "
                        "and strip with llvm-strip -g, never --strip-all or --remove-section=.BTF")


class _Types:
    """BTF types -> Python annotations, collecting the classes to generate (dependencies first)."""

    def __init__(self, spec: Spec, registry: CodecRegistry, reserved: set[str]) -> None:
        self.spec = spec
        self.reg = registry
        self.taken = set(reserved)
        self.by_id: dict[int, ClassModel] = {}
        self.ordered: list[ClassModel] = []
        self.busy: set[int] = set()

    def pytype(self, t: T.Type, where: str) -> PyType:
        from pycore.native.codec import UnsupportedType

        r: Any = layout.skip(t)
        k = r.kind
        try:
            if k == Kind.INT:
                if r.is_bool and r.size == 1 and r.bits == 8:
                    return PyType("bool", ("int",))
                return PyType("int", ("int",))
            if k in (Kind.ENUM, Kind.ENUM64):
                return PyType(f"{self.cls(r).name} | int", ("int",))
            if k == Kind.PTR:
                return PyType("int", ("int",))
            if k == Kind.FLOAT:
                return PyType("float", ("int", "float"))
            if k == Kind.ARRAY:
                elem: Any = layout.skip(r.type)
                if r.nelems == 0:
                    return PyType("list[_t.Any]", ("list", "tuple"))
                if elem.kind == Kind.INT and elem.size == 1 and elem.bits == 8:
                    if elem.is_char or elem.name == "char":
                        return PyType("str", ("str",))
                    if not elem.signed and not elem.is_bool:
                        return PyType("bytes", ("bytes", "bytearray"))
                return PyType(f"list[{self.pytype(elem, where).ann}]", ("list", "tuple"))
            if k in (Kind.STRUCT, Kind.UNION):
                name = self.cls(r).name
                return PyType(name, (name,))
        except UnsupportedType as exc:
            raise SkelError(f"{where}: {exc}") from None
        raise SkelError(f"{where}: {self.reg.unsupported(r)}")

    def cls(self, r: Any) -> ClassModel:
        """The generated class of a struct, union or enum (made once, its dependencies first)."""
        c = self.by_id.get(r.id)
        if c is not None:
            return c
        if r.id in self.busy:  # a struct containing itself cannot be; pointers are ints
            raise SkelError(f"BTF type {r.id} {r.name!r} contains itself")
        self.busy.add(r.id)
        kind_word = {Kind.STRUCT: "struct", Kind.UNION: "union"}.get(r.kind, "enum")
        key = f"{kind_word} {r.name}" if r.name else f"#{r.id}"
        if r.kind in (Kind.ENUM, Kind.ENUM64):
            base = self.reg.enum_class(r).__name__
            members = [(v.name, v.value) for v in r.values
                       if v.name.isidentifier() and not keyword.iskeyword(v.name)
                       and not (v.name.startswith("_") and v.name.endswith("_"))]  # _sunder_: Enum's own
            c = ClassModel(key, self._unique(base), "enum",
                           f"BTF enum {r.name or '(anonymous)'}", members=members or [("_EMPTY", 0)])
        else:
            comp = self.reg.composite(r)
            fields = []
            for f in comp.fields:
                where = f"{key}.{f.c_name}"
                if f.bits:
                    fb: Any = layout.skip(f.type)
                    if fb.kind in (Kind.ENUM, Kind.ENUM64):
                        ann, default = f"{self.cls(fb).name} | int", "0"
                    elif fb.kind == Kind.INT and fb.is_bool:
                        ann, default = "bool", "False"
                    else:
                        ann, default = "int", "0"
                else:
                    ann = self.pytype(f.type, where).ann
                    default = self.default(f.type)
                if f.in_union:
                    ann, default = f"{ann} | None", "None"
                fields.append(Field(f.name, ann, default))
            c = ClassModel(key, self._unique(comp.cls.__name__), "dataclass",
                           f"BTF {kind_word} {r.name or '(anonymous)'} ({r.size} bytes)", fields=fields)
        self.busy.discard(r.id)
        self.by_id[r.id] = c
        self.ordered.append(c)
        return c

    def _unique(self, name: str) -> str:
        base, n = name, 2
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        self.taken.add(name)
        return name

    def zero(self, t: T.Type) -> str:
        """An expression making a fresh zero value of ``t`` (what the codec decodes from zero bytes)."""
        r: Any = layout.skip(t)
        k = r.kind
        if k == Kind.INT:
            return "False" if r.is_bool and r.size == 1 and r.bits == 8 else "0"
        if k in (Kind.ENUM, Kind.ENUM64):
            return f"{self.cls(r).name}(0)" if any(v.value == 0 for v in r.values) else "0"
        if k == Kind.FLOAT:
            return "0.0"
        if k == Kind.PTR:
            return "0"
        if k == Kind.ARRAY:
            ann = self.pytype(r, "").ann
            if ann == "str":
                return '""'
            if ann == "bytes":
                return f"bytes({r.nelems})"
            if r.nelems == 0:
                return "[]"
            elem = self.zero(r.type)
            if elem in ("0", "0.0", "False"):
                return f"[{elem}] * {r.nelems}"
            return f"[{elem} for _ in range({r.nelems})]"
        return f"{self.cls(r).name}()"

    def default(self, t: T.Type) -> str:
        z = self.zero(t)
        if z in ("0", "0.0", "False", '""') or z.startswith("bytes(") or z.endswith("(0)"):
            return z
        if z.endswith("()") and "(" not in z[:-2]:
            return f"_dc.field(default_factory={z[:-2]})"
        return f"_dc.field(default_factory=lambda: {z})"


def _attach_kind(section: str) -> tuple[bool, bool]:
    """(pycore can attach it, it attaches by itself) for a SEC() name."""
    prefix, _, rest = section.partition("/")
    parts = _ATTACHABLE.get(prefix)
    if parts is None:
        return False, False
    if prefix in ("uprobe", "uretprobe", "uprobe.s", "uretprobe.s", "usdt"):
        return True, ":" in rest
    return True, bool(rest) and len(rest.split("/")) >= parts


def _parse_rings(rings: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in rings:
        name, eq, struct = spec.partition("=")
        name, struct = name.strip(), struct.strip()
        if not eq or not name or not struct:
            raise SkelError(f"--ring {spec!r}: give MAP=STRUCT, e.g. --ring events='struct exec_event'")
        out[name] = struct
    return out


def _find_struct(spec: Spec, text: str) -> Any:
    word, _, rest = text.partition(" ")
    if rest and word in ("struct", "union"):
        ids = spec.ids_named(rest.strip(), (Kind.STRUCT,) if word == "struct" else (Kind.UNION,))
    else:
        ids = spec.ids_named(text, (Kind.STRUCT, Kind.UNION)) or spec.ids_named(text, (Kind.TYPEDEF,))
    for i in ids:
        r: Any = layout.skip(spec.type(i))
        if r.kind in (Kind.STRUCT, Kind.UNION):
            return r
    return None


_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAMED_BY_C = (Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.TYPEDEF, Kind.VAR, Kind.FUNC, Kind.FWD)


def _check_names(spec: Spec, object_file: str) -> None:
    """Every name the skeleton could turn into Python must be a C identifier, as a compiler writes it.

    Only a damaged or hand-made object has others; refusing them here keeps a
    bad byte in the string table from becoming a module that cannot import.
    """
    for t in spec:
        names = [t.name] if t.kind in _NAMED_BY_C else []
        if t.kind in (Kind.STRUCT, Kind.UNION):
            names += [m.name for m in t]  # type: ignore[attr-defined]
        elif t.kind in (Kind.ENUM, Kind.ENUM64):
            names += [v.name for v in t.values]  # type: ignore[attr-defined]
        for name in names:
            if name and not _C_NAME.match(name):
                raise SkelError(f"{object_file}: BTF name {name!r} ({t.kind.name.lower()} id {t.id}) is not a C "
                                "identifier: the object is damaged; rebuild it (pycore build)")


def build_model(obj: BpfObject, object_file: str, class_name: str | None = None, rings: list[str] | None = None,
                bytes_maps: list[str] | None = None) -> SkelModel:
    """The model of an opened object (``object_file`` names it in messages and in the generated text)."""
    from pycore.native.codec import codec_registry

    spec = obj.btf
    _check_names(spec, object_file)
    reg = codec_registry(spec)
    stem = object_stem(object_file)
    cname = class_name or camel(stem)
    if not cname.isidentifier() or keyword.iskeyword(cname):
        raise SkelError(f"--class {cname!r} is not a Python class name")
    parts_names = {p: f"{cname}{p.capitalize()}" for p in ("progs", "maps", "rodata", "bss", "data", "rings")}
    types = _Types(spec, reg, {cname, *parts_names.values()})
    argv: list[str] = []

    # programs
    progs, cannot = [], []
    for p in obj.programs.values():
        can, auto = _attach_kind(p.section)
        if not can:
            cannot.append(f"{p.name} (SEC {p.section!r})")
        progs.append(ProgModel(p.name, attr_name(p.name), p.section, auto))
    if cannot:
        raise SkelError(f"{object_file}: pycore cannot attach {', '.join(cannot)}: it attaches tracepoint, raw_tp, "
                        "tp_btf, fentry/fexit/fmod_ret, lsm, kprobe, uprobe and usdt programs, and perf_event ones by hand")

    # maps
    ring_args = _parse_rings(rings or [])
    bytes_set = set(bytes_maps or [])
    known = {m.name for m in obj.maps.values() if not m.internal}
    for name in sorted(set(ring_args) | bytes_set):
        if name not in known:
            opt = "--ring" if name in ring_args else "--bytes-map"
            raise SkelError(f"{opt} {name}: {object_file} has no map {name!r} (maps: {', '.join(sorted(known)) or 'none'})")
    maps, ring_models = [], []
    for m in obj.maps.values():
        if m.internal:
            continue
        tname = m.type_name
        where = f"{object_file}: map {m.name}"
        if tname == "ringbuf":
            maps.append(MapModel(m.name, attr_name(m.name), tname, "plain"))
            ring_models.append(_ring(spec, types, m.name, ring_args.get(m.name), where))
            continue
        if m.name in ring_args:
            raise SkelError(f"--ring {m.name}: map {m.name} is a {tname} map, not a ring buffer")
        if tname not in _TYPED_MAP_TYPES:
            maps.append(MapModel(m.name, attr_name(m.name), tname, "plain"))
            continue
        kid, vid = m.btf_key_type_id, m.btf_value_type_id
        if m.name in bytes_set:
            key = PyType("bytes", ("bytes", "bytearray")) if not kid else types.pytype(spec.type(kid), where + " key")
            value = PyType("bytes", ("bytes", "bytearray")) if not vid else types.pytype(spec.type(vid), where + " value")
        elif not kid or not vid:
            missing = " and ".join(s for s, i in (("key", kid), ("value", vid)) if not i)
            verb = "types are" if " and " in missing else "type is"
            raise SkelError(f"{where}: its {missing} {verb} not in BTF (declared with key_size/value_size): "
                            "declare it with __type(key, ...) and __type(value, ...), or pass "
                            f"--bytes-map {m.name} to read it as bytes")
        else:
            key = types.pytype(spec.type(kid), where + " key")
            value = types.pytype(spec.type(vid), where + " value")
        maps.append(MapModel(m.name, attr_name(m.name), tname, "percpu" if tname in _PERCPU else "typed", key, value))
    for name, struct in sorted(ring_args.items()):
        argv += ["--ring", f"{name}={struct}"]
    for name in sorted(bytes_set):
        argv += ["--bytes-map", name]
    if class_name:
        argv += ["--class", class_name]

    # globals
    parts: dict[str, list[VarModel]] = {"rodata": [], "bss": [], "data": []}
    g = obj.globals
    for name in g.keys():
        section = g.section(name)
        part = next((p for p in parts if section == "." + p or section.startswith(f".{p}.")), None)
        if part is None or not name.isidentifier():
            continue  # .kconfig: the kernel's values
        t = g.codec(name).type
        parts[part].append(VarModel(name, attr_name(name), section,
                                    types.pytype(t, f"{object_file}: global {name} ({section})")))
    parts = {p: v for p, v in parts.items() if v}
    return SkelModel(os.path.basename(object_file), cname, progs, maps, parts, ring_models, types.ordered, argv)


def _ring(spec: Spec, types: _Types, name: str, given: str | None, where: str) -> RingModel:
    r: Any = None
    if given is not None:
        r = _find_struct(spec, given)
        if r is None:
            raise SkelError(f"--ring {name}={given}: no struct or union {given!r} in the object's BTF")
        source = "--ring"
    else:
        ids = spec.ids_named(RING_VAR_PREFIX + name, (Kind.VAR,))
        if ids:
            var: Any = spec.type(ids[0])
            t: Any = layout.skip(var.type)
            if t.kind == Kind.PTR:
                r = layout.skip(t.type)
        if r is None or r.kind not in (Kind.STRUCT, Kind.UNION):
            raise SkelError(f"{where}: which struct the ring buffer carries is unknown: pass --ring "
                            f"{name}=STRUCT, or annotate the C source with PYCORE_RING_EVENT({name}, struct NAME) "
                            "(pycore.bpf.h)")
        source = "annotation"
    c = types.cls(r)
    return RingModel(name, attr_name(name), c.key, c.name, source)
