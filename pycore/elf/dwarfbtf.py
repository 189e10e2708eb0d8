"""DWARF types written as split BTF, and as bpftrace prints them in ``-lv``.

:class:`BtfConverter` turns pyelftools DIEs into records of one
:class:`btf.writer.Writer` split on a caller's base spec, on demand: a
function's parameters, or a named type, and every type they reach (through
pointers too: the trace language dereferences them).  Each DIE is written
once (memo by its ``.debug_info`` offset); a self-referencing struct gets
its id before its members are converted, so cycles close.  Records are
kept in id order and handed to the writer when a top-level conversion
completes, so a failure half-way (damaged DWARF) leaves nothing behind.

What maps to what: base types to INT (signed, bool, with pahole's
encoding) or FLOAT; pointers and C++ references to PTR; const, volatile,
restrict; typedefs; structs, C++ classes (data members only, base classes as
anonymous members, artificial ones like the vtable pointer left out) and
unions with byte and bit offsets (``DW_AT_data_member_location``,
``DW_AT_data_bit_offset`` and DWARF 2/3's ``DW_AT_bit_offset``); arrays, one
BTF array per dimension; enums (ENUM64 when a value needs it); subroutine
types to FUNC_PROTO; declarations to FWD.  Anything else (``nullptr_t``,
pointers to members, Fortran's types) is void.
"""

from __future__ import annotations

from collections.abc import Iterator

from btf.kinds import Kind

__all__ = ["BtfConverter", "bpftrace_type_name", "attr_int", "children", "die_name", "integrated", "ref", "type_of"]

# DW_ATE_* encodings
_ATE_BOOLEAN, _ATE_COMPLEX, _ATE_FLOAT, _ATE_SIGNED, _ATE_SIGNED_CHAR = 2, 3, 4, 5, 6
_ATE_UNSIGNED, _ATE_UNSIGNED_CHAR = 7, 8
_REF_FORMS = ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata")
_STRUCTS = ("DW_TAG_structure_type", "DW_TAG_class_type", "DW_TAG_union_type")
_QUALIFIERS = {"DW_TAG_const_type": Kind.CONST, "DW_TAG_volatile_type": Kind.VOLATILE,
               "DW_TAG_restrict_type": Kind.RESTRICT}
_POINTERS = ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type")
MAX_MEMBERS = 0xFFFF  # BTF's vlen


def children(die) -> Iterator:  # noqa: ANN001
    """A DIE's children, checked to move forward: a damaged DW_AT_sibling that points
    back would have pyelftools walk the same DIEs for ever."""
    last = die.offset
    for child in die.iter_children():
        if child.offset <= last:
            raise ValueError(f"DIE at {child.offset:#x} follows its sibling at {last:#x}")
        last = child.offset
        yield child


def ref(die, attr: str = "DW_AT_type"):  # noqa: ANN001, ANN201
    """The DIE an attribute refers to, None when it is absent."""
    a = die.attributes.get(attr)
    if a is None:
        return None
    if a.form == "DW_FORM_ref_sig8" and hasattr(die, "cu"):
        return _by_signature(die.cu.dwarfinfo, a.value)
    return die.get_DIE_from_attribute(attr)


def _by_signature(dw, sig: int):  # noqa: ANN001, ANN202
    """The type a DW_FORM_ref_sig8 names: in DWARF 4's .debug_types (pyelftools), or in
    a DWARF 5 type unit of .debug_info (``gcc -fdebug-types-section``), which pyelftools
    does not look in."""
    units = getattr(dw, "_pycore_type_units", None)
    if units is None:
        from pycore.elf.dwarfscan import type_units

        units = dw._pycore_type_units = type_units(dw)
    where = units.get(sig)
    if where is None:
        return dw.get_DIE_by_sig8(sig)      # .debug_types, else KeyError: malformed
    cu = dw.get_CU_at(where[0])
    return cu.get_DIE_from_refaddr(where[1])


def _origin(die):  # noqa: ANN001, ANN202
    """The DIE whose attributes ``die`` takes on (abstract origin, specification)."""
    for attr in ("DW_AT_abstract_origin", "DW_AT_specification"):
        if attr in die.attributes:
            return die.get_DIE_from_attribute(attr)
    return None


def integrated(die, attr: str):  # noqa: ANN001, ANN201
    """An attribute of ``die`` or of the DIEs it is an instance of (libdw's dwarf_attr_integrate)."""
    for _ in range(8):
        if die is None:
            return None, None
        if attr in die.attributes:
            return die, die.attributes[attr]
        die = _origin(die)
    return None, None


def type_of(die):  # noqa: ANN001, ANN201
    """The DIE of ``die``'s type, through its origins; None for void."""
    owner, _ = integrated(die, "DW_AT_type")
    return ref(owner) if owner is not None else None


def die_name(die, integrate: bool = True) -> str:  # noqa: ANN001
    """The DIE's name ("" when it has none), through its origins with ``integrate``."""
    if integrate:
        _, a = integrated(die, "DW_AT_name")
    else:
        a = die.attributes.get("DW_AT_name")
    if a is None:
        return ""
    v = a.value
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else ""      # a string in a dwz file not read (DW_FORM_GNU_strp_alt)


def attr_int(die, attr: str, default: int | None = None) -> int | None:  # noqa: ANN001
    """A constant attribute as an int (block forms: DW_OP_plus_uconst / DW_OP_constu of DWARF 2)."""
    a = die.attributes.get(attr)
    if a is None or a.form.startswith("DW_FORM_ref"):     # a bound held by a variable (VLA)
        return default
    v = a.value
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, (list, bytes)) and len(v) >= 2 and v[0] in (0x23, 0x10):  # plus_uconst, constu
        out, shift = 0, 0
        for b in v[1:]:
            out |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return out
    return default


def bpftrace_type_name(die) -> str:  # noqa: ANN001
    """A type as bpftrace 0.17's Dwarf::get_type_name writes it (``const char*``,
    ``struct addrinfo**``, ``<unknown type>`` for what it does not name)."""
    out = ""
    for _ in range(64):
        if die is None:
            return "<unknown type>" + out
        tag = die.tag
        if tag in ("DW_TAG_base_type", "DW_TAG_typedef"):
            return die_name(die) + out
        if tag == "DW_TAG_pointer_type":
            inner = ref(die)
            if inner is None:
                return "void*" + out
            out = "*" + out
            die = inner
            continue
        if tag in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_enumeration_type"):
            prefix = {"DW_TAG_structure_type": "struct ", "DW_TAG_union_type": "union "}.get(tag, "enum ")
            return prefix + (die_name(die) or "<anonymous>") + out
        if tag == "DW_TAG_const_type":
            inner = ref(die)
            if inner is not None and inner.tag == "DW_TAG_pointer_type":
                out = " const" + out
                die = inner
                continue
            return "const " + bpftrace_type_name(inner) + out
        return "<unknown type>" + out
    return "<unknown type>" + out


def _signed_enum(die, values: list[int]) -> bool:  # noqa: ANN001
    under = ref(die)
    for _ in range(8):
        if under is None or under.tag != "DW_TAG_typedef":
            break
        under = ref(under)
    if under is not None and under.tag == "DW_TAG_base_type":
        return attr_int(under, "DW_AT_encoding") in (_ATE_SIGNED, _ATE_SIGNED_CHAR)
    return any(v < 0 for v in values)


class BtfConverter:
    """DIEs to BTF records of ``writer`` (a split writer on the caller's base spec)."""

    def __init__(self, writer, little_endian: bool = True) -> None:  # noqa: ANN001
        self.writer = writer
        self.little_endian = little_endian
        self._memo: dict[int, int] = {}
        self._pending: dict[int, tuple] = {}
        self._next = writer.next_id
        self._index_type = 0

    # -- top level ---------------------------------------------------------

    def convert(self, die) -> int:  # noqa: ANN001
        """The BTF id of the type ``die`` (None: void), written with what it reaches."""
        return self.convert_many([die])[0]

    def convert_many(self, dies: list) -> list[int]:
        """Ids of several types converted as one step: all written, or none."""
        memo, nxt, index_type = dict(self._memo), self._next, self._index_type
        try:
            ids = [self._id(d) for d in dies]
        except BaseException:
            self._memo, self._next, self._index_type, self._pending = memo, nxt, index_type, {}
            raise
        self._flush()
        return ids

    def _flush(self) -> None:
        w = self.writer
        for tid in sorted(self._pending):
            method, args = self._pending[tid]
            got = getattr(w, method)(*args)
            assert got == tid, (got, tid)
        self._pending = {}

    def _new(self, method: str, *args) -> int:
        tid = self._next
        self._next += 1
        self._pending[tid] = (method, args)
        return tid

    def _reserve(self, off: int) -> int:
        tid = self._next
        self._next += 1
        self._memo[off] = tid
        return tid

    # -- one DIE -----------------------------------------------------------

    def _id(self, die) -> int:  # noqa: ANN001
        if die is None:
            return 0
        got = self._memo.get(die.offset)
        if got is not None:
            return got
        if "DW_AT_signature" in die.attributes:       # a declaration standing for a type unit's type
            self._memo[die.offset] = got = self._id(ref(die, "DW_AT_signature"))
            return got
        tag = die.tag
        if tag in _STRUCTS:
            return self._struct(die)
        if tag == "DW_TAG_subroutine_type":
            return self._proto(die)
        tid = self._reserve(die.offset)      # before the target: pointers close cycles
        if tag == "DW_TAG_base_type":
            self._pending[tid] = self._base(die)
        elif tag in _POINTERS:
            self._pending[tid] = ("ptr", (self._id(ref(die)),))
        elif tag in _QUALIFIERS:
            method = {Kind.CONST: "const", Kind.VOLATILE: "volatile", Kind.RESTRICT: "restrict"}[_QUALIFIERS[tag]]
            self._pending[tid] = (method, (self._id(ref(die)),))
        elif tag == "DW_TAG_typedef":
            self._pending[tid] = ("typedef", (die_name(die, False), self._id(ref(die))))
        elif tag == "DW_TAG_enumeration_type":
            self._pending[tid] = self._enum(die)
        elif tag == "DW_TAG_array_type":
            self._pending[tid] = self._array(die)
        elif tag in ("DW_TAG_atomic_type", "DW_TAG_immutable_type", "DW_TAG_packed_type", "DW_TAG_shared_type"):
            # a qualifier BTF has no kind for: an alias of what it qualifies (a typedef-less view)
            del self._memo[die.offset]
            self._next -= 1
            target = self._id(ref(die))
            self._memo[die.offset] = target
            return target
        else:                                # unspecified_type, ptr_to_member, ...: void
            del self._memo[die.offset]
            self._next -= 1
            self._memo[die.offset] = 0
            return 0
        return tid

    def _base(self, die) -> tuple:  # noqa: ANN001
        name = die_name(die, False) or "?"
        size = attr_int(die, "DW_AT_byte_size", 0) or 0
        enc = attr_int(die, "DW_AT_encoding", 0)
        if enc in (_ATE_FLOAT, _ATE_COMPLEX):
            return ("float", (name, size))
        if size not in (1, 2, 4, 8, 16):
            return ("int", (name, size if 0 < size <= 16 else 1, 8 * min(max(size, 1), 16)))
        return ("int", (name, size, None, 0, enc in (_ATE_SIGNED, _ATE_SIGNED_CHAR), False, enc == _ATE_BOOLEAN))

    def _enum(self, die) -> tuple:  # noqa: ANN001
        values: list[tuple[str, int]] = []
        for child in children(die):
            if child.tag == "DW_TAG_enumerator" and len(values) < MAX_MEMBERS:
                v = attr_int(child, "DW_AT_const_value", 0) or 0
                values.append((die_name(child, False), v))
        size = attr_int(die, "DW_AT_byte_size", 4) or 4
        signed = _signed_enum(die, [v for _, v in values])
        if signed:  # a signed constant reads as unsigned in DW_FORM_data*: sign-extend by size
            values = [(n, v - (1 << 8 * size) if size <= 8 and v >= 1 << (8 * size - 1) else v) for n, v in values]
        wide = size > 4 or any(not -(1 << 31) <= v < (1 << 32) for _, v in values)
        if wide:
            return ("enum64", (die_name(die, False), values, size if size in (1, 2, 4, 8) else 8, signed))
        return ("enum", (die_name(die, False), values, size if size in (1, 2, 4) else 4, signed))

    def _array(self, die) -> tuple:  # noqa: ANN001
        dims: list[int] = []
        for child in children(die):
            if child.tag not in ("DW_TAG_subrange_type", "DW_TAG_enumeration_type"):
                continue
            count = attr_int(child, "DW_AT_count")
            if count is None:
                upper = attr_int(child, "DW_AT_upper_bound")
                lower = attr_int(child, "DW_AT_lower_bound", 0) or 0
                count = upper - lower + 1 if upper is not None else 0
            dims.append(max(0, min(count, 0xFFFFFFFF)))
        if not dims:
            dims = [0]
        elem = self._id(ref(die))
        if not self._index_type:
            self._index_type = self._new("int", "__ARRAY_SIZE_TYPE__", 4)
        for n in reversed(dims[1:]):          # int a[2][3]: array of 2 arrays of 3
            elem = self._new("array", elem, self._index_type, n)
        return ("array", (elem, self._index_type, dims[0]))

    def _member_offset(self, m, container_bits: int) -> tuple[int, int]:  # noqa: ANN001
        """(bit offset, bitfield size) of a member."""
        bits = attr_int(m, "DW_AT_bit_size", 0) or 0
        dbo = attr_int(m, "DW_AT_data_bit_offset")
        if dbo is not None:
            return dbo, bits
        base = 8 * (attr_int(m, "DW_AT_data_member_location", 0) or 0)
        old = attr_int(m, "DW_AT_bit_offset")
        if bits and old is not None:
            # DWARF 2/3: from the high-order bit of a storage unit of DW_AT_byte_size
            # (else the member type's size) at the member location
            unit = attr_int(m, "DW_AT_byte_size")
            if unit is None:
                unit = self._size_of(ref(m))
            if self.little_endian:
                return base + 8 * unit - old - bits, bits
            return base + old, bits
        return base, bits

    def _size_of(self, die) -> int:  # noqa: ANN001
        for _ in range(16):
            if die is None:
                return 0
            size = attr_int(die, "DW_AT_byte_size")
            if size is not None:
                return size
            die = ref(die)
        return 0

    def _struct(self, die) -> int:  # noqa: ANN001
        name = die_name(die, False)
        union = die.tag == "DW_TAG_union_type"
        tid = self._reserve(die.offset)
        if "DW_AT_declaration" in die.attributes:
            self._pending[tid] = ("fwd", (name, union))
            return tid
        self._pending[tid] = ("fwd", (name, union))   # placeholder until the members are known
        members: list[tuple] = []
        for m in children(die):
            if m.tag not in ("DW_TAG_member", "DW_TAG_inheritance"):
                continue
            if "DW_AT_artificial" in m.attributes or "DW_AT_external" in m.attributes \
                    or "DW_AT_declaration" in m.attributes:   # vtable pointer; C++ static members
                continue
            if len(members) >= MAX_MEMBERS:
                break
            off, bits = self._member_offset(m, 0)
            mname = "" if m.tag == "DW_TAG_inheritance" else die_name(m, False)
            members.append((mname, self._id(ref(m)), off & 0xFFFFFF if bits else off & 0xFFFFFFFF, bits & 0xFF))
        size = attr_int(die, "DW_AT_byte_size", 0) or 0
        self._pending[tid] = ("struct", (name, size & 0xFFFFFFFF, members, None, union))
        return tid

    def _proto(self, die) -> int:  # noqa: ANN001
        tid = self._reserve(die.offset)
        params, varargs = [], False
        for child in children(die):
            if child.tag == "DW_TAG_formal_parameter":
                params.append((die_name(child), self._id(type_of(child))))
            elif child.tag == "DW_TAG_unspecified_parameters":
                varargs = True
        self._pending[tid] = ("func_proto", (self._id(type_of(die)), params[:MAX_MEMBERS - 1], varargs))
        return tid

    # -- recorded conversions (pycore.elf.dwarf's per-function cache) ---------

    def replay(self, entry: dict) -> list[int]:
        """The ids of the types :func:`record_types` recorded in ``entry``, written as
        :meth:`convert_many` would have written them: a type whose DIE this converter
        has already written is that type, the others are new records.  All or none."""
        memo, nxt, index_type = dict(self._memo), self._next, self._index_type
        try:
            ids = self._replay(entry)
        except BaseException:
            self._memo, self._next, self._index_type, self._pending = memo, nxt, index_type, {}
            raise
        self._flush()
        return ids

    def _replay(self, entry: dict) -> list[int]:
        records, index = entry["records"], entry["index"]
        known: dict[int, int] = {0: 0}
        for off, lid in entry["memo"]:
            got = self._memo.get(off)
            if got is not None:
                known.setdefault(lid, got)
        if index and self._index_type:
            known.setdefault(index, self._index_type)
        need: list[int] = []                 # reached from the ids, not through a type already written
        seen: set[int] = set()
        stack = list(entry["ids"])
        while stack:
            lid = stack.pop()
            if lid in known or lid in seen:
                continue
            if not 0 < lid <= len(records):
                raise ValueError(f"recorded type {lid} of {len(records)}")
            seen.add(lid)
            need.append(lid)
            method, args = records[lid - 1]
            stack.extend(_refs(method, args))
        mapping = dict(known)
        for lid in sorted(need):
            mapping[lid] = self._next
            self._next += 1
        if index in mapping and not self._index_type:
            self._index_type = mapping[index]
        for lid in sorted(need):
            method, args = records[lid - 1]
            self._pending[mapping[lid]] = (method, _remap(method, args, mapping))
        for off, lid in entry["memo"]:
            if lid in mapping and off not in self._memo:
                self._memo[off] = mapping[lid]
        return [mapping[lid] for lid in entry["ids"]]


_TO_ONE = ("ptr", "const", "volatile", "restrict")


def _refs(method: str, args: list) -> list[int]:
    """The type ids a recorded record refers to."""
    if method in _TO_ONE:
        return [args[0]]
    if method == "typedef":
        return [args[1]]
    if method == "array":
        return [args[0], args[1]]
    if method == "struct":
        return [m[1] for m in args[2]]
    if method == "func_proto":
        return [args[0]] + [p[1] for p in args[1]]
    if method in ("int", "float", "enum", "enum64", "fwd"):
        return []
    raise ValueError(f"recorded record {method!r}")


def _remap(method: str, args: list, m: dict[int, int]) -> tuple:
    """A recorded record's arguments with its type ids mapped (lists back to tuples)."""
    if method in _TO_ONE:
        return (m[args[0]],)
    if method == "typedef":
        return (str(args[0]), m[args[1]])
    if method == "array":
        return (m[args[0]], m[args[1]], int(args[2]))
    if method == "struct":
        name, size, members, kflag, union = args
        return (str(name), int(size), [(str(n), m[t], int(o), int(b)) for n, t, o, b in members], kflag, bool(union))
    if method == "func_proto":
        return (m[args[0]], [(str(n), m[t]) for n, t in args[1]], bool(args[2]))
    if method in ("enum", "enum64"):
        name, values, size, signed = args
        return (str(name), [(str(n), int(v)) for n, v in values], int(size), bool(signed))
    if method == "int":
        name, size, *rest = args
        return (str(name), int(size), *rest)
    if method in ("float", "fwd"):
        return (str(args[0]), args[1])
    raise ValueError(f"recorded record {method!r}")


class _Recorder:
    """A stand-in writer that keeps each record as (method, args): record ``i`` has id ``i``."""

    def __init__(self) -> None:
        self.records: list[list] = []

    @property
    def next_id(self) -> int:
        return len(self.records) + 1

    def __getattr__(self, method: str):  # noqa: ANN204
        if method.startswith("_"):
            raise AttributeError(method)

        def record(*args) -> int:  # noqa: ANN002
            self.records.append([method, list(args)])
            return len(self.records)
        return record


def record_types(dies: list, little_endian: bool = True) -> dict:
    """The types of ``dies`` (None: void) converted on their own, as plain data (JSON)
    that :meth:`BtfConverter.replay` writes into any converter: ``ids``, ``records``
    (id i is ``records[i - 1]``, [method, args]), ``memo`` ([DIE offset, id]) and the
    array ``index`` type's id (0: none)."""
    rec = _Recorder()
    conv = BtfConverter(rec, little_endian)
    ids = conv.convert_many(dies)
    return {"ids": ids, "records": rec.records, "memo": [[off, i] for off, i in conv._memo.items()],
            "index": conv._index_type}
