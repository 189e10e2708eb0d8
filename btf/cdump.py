"""A whole, compilable ``vmlinux.h`` from a Spec, as bpftool writes it.

``bpftool btf dump file ... format c`` (v7.1, libbpf 1.1) is the reference:
our output is meant to equal it byte for byte, so the order in which types
are defined, the forward declarations and the ``___N`` suffixes follow
libbpf's btf_dump algorithm:

* Every type that another type refers to is marked *referenced*; an
  anonymous enum nobody refers to is a top-level one (a set of constants)
  and is printed on its own.
* Types are visited in id order.  A depth-first walk orders the named
  definitions a type needs: a *strong* link (embedding by value, or through
  an anonymous type that is printed inline) needs the full definition
  first; a *weak* link (through a pointer to a named type) only needs a
  forward declaration.
* While printing, a struct that is being defined and is used through a
  pointer before its definition gets ``struct X;`` first, once.
* Names are made unique per C namespace: struct/union/enum tags in one,
  typedefs and enumerators in another.  The second ``foo`` is ``foo___2``.

The generator works on the raw type words rather than on :mod:`btf.types`
objects: a vmlinux has 126k types and most of them (functions, variables)
never appear in the header, so decoding them would only cost time.  The C
declaration rules are the same as :mod:`btf.cformat`'s; the difference is
that here they are keyed by type id and memoised.
"""

from __future__ import annotations

import gc
import io
import sys
from array import array
from itertools import accumulate, compress, repeat
from operator import itemgetter

TYPE_CHECKING = False  # typing costs milliseconds to import; annotations are strings

from . import types as T
from .errors import BtfError
from .kinds import Kind
from .layout import padding_fields

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import TextIO

    from .spec import Spec
    from .strings import StringTable

# Kind numbers as plain ints: IntEnum comparisons cost a lot in the hot loops.
_INT, _PTR, _ARRAY, _STRUCT, _UNION, _ENUM, _FWD, _TYPEDEF = 1, 2, 3, 4, 5, 6, 7, 8
_VOLATILE, _CONST, _RESTRICT, _FUNC, _FUNC_PROTO, _VAR, _DATASEC = 9, 10, 11, 12, 13, 14, 15
_FLOAT, _DECL_TAG, _TYPE_TAG, _ENUM64 = 16, 17, 18, 19

_MODS = frozenset((_VOLATILE, _CONST, _RESTRICT, _TYPE_TAG))
_QUAL_WORD = {_VOLATILE: "volatile", _CONST: "const", _RESTRICT: "restrict"}
# Kinds that end a declaration chain: the base type of ``int *x[4]``.
_TERMINAL = frozenset((_INT, _ENUM, _ENUM64, _FWD, _STRUCT, _UNION, _TYPEDEF, _FLOAT))
# Kinds the header never prints at top level: skipping them is libbpf's
# result too (they are "ordered" without queueing anything).
_NOT_DUMPED = frozenset((_FUNC, _VAR, _DATASEC, _DECL_TAG))

# Ordering and emitting states (libbpf keeps the same three of each).
_NOT, _DOING, _DONE = 0, 1, 2

_MAX_INDENT = 13  # libbpf's indent string is 13 tabs long
_INDENT = ["\n" + "\t" * i for i in range(_MAX_INDENT + 1)]  # a new line at each level

HEADER_PROLOGUE = (
    "#ifndef __VMLINUX_H__\n"
    "#define __VMLINUX_H__\n"
    "\n"
    "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n"
    "#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)\n"
    "#endif\n"
    "\n"
)
HEADER_EPILOGUE = (
    "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n"
    "#pragma clang attribute pop\n"
    "#endif\n"
    "\n"
    "#endif /* __VMLINUX_H__ */\n"
)

# bpftool pads with these, widest first.


def _columns(spec: Spec) -> tuple[Sequence[int], array, array, array]:
    """Type words, and per id (0 = void): record offset, name offset, info word.

    Split BTF continues its base's ids, so a base's words come first.  For
    plain vmlinux these are the spec's own arrays, not copies.
    """
    chain = []
    s: Spec | None = spec
    while s is not None:
        chain.append(s)
        s = s.base
    chain.reverse()
    offsets, names, infos = array("I", [0]), array("I", [0]), array("I", [0])
    for s in chain:
        names.extend(array("I", s._names_column()))  # noqa: SLF001 - same package
        infos.extend(array("I", s._kinds_column()))  # noqa: SLF001 - info words
    if len(chain) == 1:
        words: Sequence[int] = spec._words  # noqa: SLF001
        offsets.extend(spec._offsets)  # noqa: SLF001
        return words, offsets, names, infos
    flat = array("I")
    for s in chain:
        shift = len(flat)
        flat.extend(s._words)  # noqa: SLF001
        offsets.extend(o + shift for o in s._offsets)  # noqa: SLF001
    return flat, offsets, names, infos


class Namer:
    """Unique C names, libbpf's way: one counter per namespace.

    Struct, union and enum tags share one namespace; typedefs and enum
    constants share the other.  A name is fixed the first time it is asked
    for, so the suffix follows the order in which the header mentions types.
    Forward declarations and empty enums keep their names as they are (they
    may stand for a definition printed elsewhere).
    """

    def __init__(self, name_of: Callable[[int], str], kinds: Sequence[int],
                 vlen: Callable[[int], int]) -> None:
        self._name_of = name_of
        self._kinds = kinds
        self._vlen = vlen
        self.type_counts: dict[str, int] = {}
        self.ident_counts: dict[str, int] = {}
        self._resolved: list[str | None] = [None] * len(kinds)  # by id: no int hashing

    def _resolve(self, type_id: int, counts: dict[str, int]) -> str:
        name = self._name_of(type_id)
        if not name:
            return ""
        k = self._kinds[type_id]
        if k == _FWD or (k == _ENUM and self._vlen(type_id) == 0):
            self._resolved[type_id] = name
            return name
        n = counts.get(name, 0) + 1
        counts[name] = n
        unique = name if n == 1 else f"{name}___{n}"
        self._resolved[type_id] = unique
        return unique

    def type_name(self, type_id: int) -> str:
        """A struct, union, enum or forward declaration's tag."""
        got = self._resolved[type_id]
        return got if got is not None else self._resolve(type_id, self.type_counts)

    def ident_name(self, type_id: int) -> str:
        """A typedef's name."""
        got = self._resolved[type_id]
        return got if got is not None else self._resolve(type_id, self.ident_counts)

    def enumerator(self, name: str) -> str:
        """An enum constant: counted each time an enum body is printed."""
        counts = self.ident_counts
        n = counts.get(name, 0) + 1
        counts[name] = n
        return name if n == 1 else f"{name}___{n}"

    def __call__(self, t: T.Type) -> str:
        """As a :data:`btf.cformat.Namer`: typedefs by identifier, others by tag."""
        return self.ident_name(t.id) if t.kind == Kind.TYPEDEF else self.type_name(t.id)


class _Strings(dict):
    """Offset -> string, filled from the string table on first use (a plain
    dict hit is several times cheaper than a method call per member name)."""

    def __init__(self, table: StringTable) -> None:
        super().__init__()
        self._lookup = table.lookup
        data = table._data  # noqa: SLF001 - same package
        if data.isascii():
            # Splitting the whole table in C beats ~100k one-by-one lookups.
            parts = data.decode("ascii").split("\0")
            # string i starts after strings 0..i-1 and their i NULs
            starts = accumulate(map((1).__add__, map(len, parts)), initial=table._start)  # noqa: SLF001
            self.update(zip(starts, parts))
        self[0] = ""

    def __missing__(self, off: int) -> str:
        s = self[off] = self._lookup(off)
        return s


def _kind_bytes(infos: array) -> bytes:
    """Each id's kind as one byte, sliced out of the info words in C."""
    raw = infos.tobytes()
    high = raw[3::4] if sys.byteorder == "little" else raw[0::4]
    return high.translate(bytes(b & 0x1F for b in range(256)))


def _ids_of(kinds: bytes, wanted: frozenset[int] | set[int]) -> list[int]:
    """Ids whose kind is in ``wanted``, in id order."""
    return list(compress(range(len(kinds)), kinds.translate(bytes(k in wanted for k in range(256)))))


class HeaderWriter:
    """One pass of libbpf's btf_dump over a whole spec."""

    def __init__(self, spec: Spec, type_tags: bool = False) -> None:
        self.spec = spec
        self.type_tags = type_tags
        words, offsets, names_off, infos = _columns(spec)
        self.words = words
        self.offsets = offsets
        self.names_off = names_off
        self.infos = infos
        self.n = n = len(offsets)
        st = array("I", [0])
        if n > 1:
            got = itemgetter(*offsets[1:])(words[2:])
            st.extend((got,) if n == 2 else got)
        self.st = st                      # size or referenced type, by id
        self.kind_bytes = _kind_bytes(infos)
        self.kinds = self.kind_bytes      # indexing bytes gives ints
        strings = _Strings(spec.strings)
        self.strings = strings
        self.namer = Namer(self.name_of, self.kinds, self.vlen)
        self.ptr_size = self._pointer_size()
        self.order_state = bytearray(n)
        self.emit_state = bytearray(n)
        self.fwd_emitted = bytearray(n)
        self.order_state[0] = _DONE
        self.emit_state[0] = _DONE
        self._referenced_ids: set[int] | None = None
        # Memos indexed by type id.  Lists, not dicts: the ids come out of
        # arrays as new int objects, and a dict lookup would hash and compare
        # them (a cache miss per member on a big table).
        self._size_cache: list[int | None] = [None] * n
        self._align_cache: list[int | None] = [None] * n
        self._align_cache[0] = 0
        self._packed_cache: list[bool | None] = [None] * n
        self._members_cache: list[tuple | None] = [None] * n
        self._decl_cache: list[tuple[str, str] | None] = [None] * n
        self._bare_cache: list[str | None] = [None] * n
        self._inline_bodies = 0   # counts anonymous bodies printed inside declarations
        self._emit_budget = 16 * n + 100_000
        self.out: list[str] = []
        self.queue: list[int] = []
        self.order = self._ordering_walk()

    # -- facts about types ------------------------------------------------

    def name_of(self, type_id: int) -> str:
        return self.strings[self.names_off[type_id]]

    def vlen(self, type_id: int) -> int:
        return self.infos[type_id] & 0xFFFF

    def _pointer_size(self) -> int:
        """libbpf guesses it from the size of ``long``; 8 when there is none."""
        longs = {"long", "long int", "unsigned long", "long unsigned int"}
        for type_id in _ids_of(self.kind_bytes, {_INT}):
            if self.name_of(type_id) in longs:
                return self.st[type_id]
        return 8

    @property
    def referenced(self) -> set[int]:
        """Every id some other type refers to: an anonymous enum nobody refers
        to is a top-level one (a set of constants), else it is printed inline."""
        if self._referenced_ids is not None:
            return self._referenced_ids
        words, offsets, infos, st, kb = self.words, self.offsets, self.infos, self.st, self.kind_bytes
        refs = set(map(st.__getitem__, _ids_of(kb, {_VOLATILE, _CONST, _RESTRICT, _PTR, _TYPEDEF,
                                                    _FUNC, _VAR, _DECL_TAG, _TYPE_TAG})))
        update = refs.update
        for type_id in _ids_of(kb, {_STRUCT, _UNION}):
            p = offsets[type_id] + 4
            update(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        for type_id in _ids_of(kb, {_DATASEC}):
            p = offsets[type_id] + 3
            update(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        for type_id in _ids_of(kb, {_FUNC_PROTO}):
            p = offsets[type_id] + 4
            update(words[p:p + 2 * (infos[type_id] & 0xFFFF):2])
        for type_id in _ids_of(kb, {_ARRAY}):
            p = offsets[type_id] + 3
            update(words[p:p + 2])
        self._referenced_ids = refs
        return refs

    def _check_references(self) -> None:
        """Every type id a record names must exist: the walk below indexes
        per-type state by id (the Spec decodes lazily and checks on access)."""
        n = self.n
        refs = self.referenced
        returns = map(self.st.__getitem__, _ids_of(self.kind_bytes, {_FUNC_PROTO}))
        worst = max(max(refs, default=0), max(returns, default=0))
        if worst >= n:
            raise BtfError(f"a type refers to type id {worst}, past the last type ({n - 1})")

    def member_columns(self, type_id: int) -> tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int] | None]:
        """A struct or union's members as columns: name offsets, types, bit
        offsets, and bitfield sizes (None when the record has no kflag, so
        no member is a bitfield).  Slices of the word array, made in C."""
        got = self._members_cache[type_id]
        if got is not None:
            return got
        p = self.offsets[type_id] + 3
        info = self.infos[type_id]
        w = self.words[p:p + 3 * (info & 0xFFFF)]
        offs = w[2::3]
        if info >> 31:
            got = (w[0::3], w[1::3], [o & 0xFFFFFF for o in offs], [o >> 24 for o in offs])
        else:
            got = (w[0::3], w[1::3], offs, None)
        self._members_cache[type_id] = got
        return got

    def members(self, type_id: int) -> list[tuple[int, int, int, int]]:
        """(name offset, type, bit offset, bitfield size) of each member."""
        names, types, offs, bits = self.member_columns(type_id)
        return list(zip(names, types, offs, repeat(0) if bits is None else bits))

    def member_types(self, type_id: int) -> Sequence[int]:
        p = self.offsets[type_id] + 4
        return self.words[p:p + 3 * (self.infos[type_id] & 0xFFFF):3]

    def params(self, type_id: int) -> list[tuple[int, int]]:
        """(name offset, type) of each parameter of a FUNC_PROTO."""
        p = self.offsets[type_id] + 3
        w = self.words[p:p + 2 * (self.infos[type_id] & 0xFFFF)]
        return list(zip(w[0::2], w[1::2]))

    def param_types(self, type_id: int) -> Sequence[int]:
        p = self.offsets[type_id] + 4
        return self.words[p:p + 2 * (self.infos[type_id] & 0xFFFF):2]

    def array_elem(self, type_id: int) -> int:
        return self.words[self.offsets[type_id] + 3]

    def sizeof(self, type_id: int) -> int:
        """libbpf's btf__resolve_size, with 0 for what has no size."""
        got = self._size_cache[type_id]
        if got is not None:
            return got
        kinds, st = self.kinds, self.st
        nelems = 1
        t = type_id
        for _ in range(64):
            k = kinds[t]
            if k in (_INT, _ENUM, _ENUM64, _STRUCT, _UNION, _DATASEC, _FLOAT):
                size = st[t] * nelems
                break
            if k == _PTR:
                size = self.ptr_size * nelems
                break
            if k in (_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG, _VAR):
                t = st[t]
            elif k == _ARRAY:
                nelems *= self.words[self.offsets[t] + 5]
                t = self.words[self.offsets[t] + 3]
            else:
                size = 0
                break
        else:
            raise BtfError(f"type {type_id}: reference chain too long (cycle?)")
        self._size_cache[type_id] = size
        return size

    def alignof(self, type_id: int, depth: int = 0) -> int:
        """libbpf's btf__align_of: natural alignment, 1 for packed records."""
        got = self._align_cache[type_id]
        if got is not None:
            return got
        if depth > 64:
            raise BtfError(f"type {type_id}: types nest too deep (cycle?)")
        k = self.kinds[type_id]
        if k in (_INT, _ENUM, _ENUM64, _FLOAT):
            align = min(self.ptr_size, self.st[type_id])
        elif k == _PTR:
            align = self.ptr_size
        elif k in (_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG):
            align = self.alignof(self.st[type_id], depth + 1)
        elif k == _ARRAY:
            align = self.alignof(self.array_elem(type_id), depth + 1)
        elif k in (_STRUCT, _UNION):
            align = self._record_layout(type_id, depth)[0]
        else:
            align = 0
        self._align_cache[type_id] = align
        return align

    def _record_layout(self, type_id: int, depth: int = 0) -> tuple[int, bool]:
        """A struct or union's alignment, and whether it needs the packed attribute.

        Both come from the same test: a member off its natural alignment, or
        a size that is not a multiple of the alignment, means packed.
        """
        alignof, cache = self.alignof, self._align_cache
        best = 1
        irregular = False
        _, mtypes, moffs, bits = self.member_columns(type_id)
        for mtype, moff, mbits in zip(mtypes, moffs, repeat(0) if bits is None else bits):
            a = cache[mtype]
            if a is None:
                a = alignof(mtype, depth + 1)
            if a <= 0:
                return self._record_layout_slow(type_id)
            if a > best:
                best = a
            if not mbits and moff % (8 * a):
                irregular = True
        if self.st[type_id] % best:
            irregular = True
        packed = irregular and self.kinds[type_id] == _STRUCT
        self._packed_cache[type_id] = packed
        return (1 if irregular else best), packed

    def _record_layout_slow(self, type_id: int) -> tuple[int, bool]:
        """libbpf's exact answers when a member has no alignment (bad BTF)."""
        align = 1
        for _, mtype, moff, mbits in self.members(type_id):
            a = self.alignof(mtype)
            if a <= 0:
                align = a
                break
            align = max(align, a)
            if not mbits and moff % (8 * a):
                align = 1
                break
        else:
            if self.st[type_id] % align:
                align = 1
        packed = False
        if self.kinds[type_id] == _STRUCT:
            best = 1
            for _, mtype, moff, mbits in self.members(type_id):
                a = self.alignof(mtype)
                if a and not mbits and moff % (8 * a):
                    packed = True
                    break
                best = max(best, a)
            else:
                packed = self.st[type_id] % best != 0
        self._packed_cache[type_id] = packed
        return align, packed

    def is_packed(self, type_id: int) -> bool:
        """Whether a struct's BTF layout needs ``__attribute__((packed))``."""
        got = self._packed_cache[type_id]
        if got is None:
            self.alignof(type_id)
            got = self._packed_cache[type_id]
            if got is None:
                got = self._record_layout(type_id)[1]
        return got

    # -- ordering ---------------------------------------------------------

    def _ordering_walk(self) -> Callable[[int, bool], int]:
        """libbpf's ordering walk, as a closure over the columns it reads:
        it runs ~100k times, and cell loads cost less than attribute loads
        on ``self``.  Bound to ``self.order`` by the constructor."""
        state, kinds, st, names_off = self.order_state, self.kinds, self.st, self.names_off
        words, offsets, infos = self.words, self.offsets, self.infos
        push = self.queue.append
        get = state.__getitem__
        writer = self

        def order(type_id: int, through_ptr: bool) -> int:
            """Queue the named definitions ``type_id`` needs, dependencies first.

            Returns 1 when the link to it is strong (it must be fully
            defined before its user), 0 when a forward declaration would do.
            Qualifiers, arrays and prototypes carry no state of their own in
            libbpf; once everything under one is done it answers 1 forever,
            so we mark it done to skip the walk next time.  Callers test
            ``_DONE`` themselves before calling (a done type answers 1): a
            third of the calls were for ``int`` and ``void``.
            """
            s = state[type_id]
            if s == _DONE:
                return 1
            k = kinds[type_id]
            if s == _DOING:
                if (k == _STRUCT or k == _UNION) and through_ptr and names_off[type_id]:
                    return 0
                raise BtfError(f"unsatisfiable type cycle through type {type_id}")
            if k == _FUNC_PROTO:
                # Most prototypes only use types that are done by the time they
                # are reached: one test in C then, and no walk.
                ret = st[type_id]
                p = offsets[type_id] + 4
                ptypes = words[p:p + 2 * (infos[type_id] & 0xFFFF):2]
                if state[ret] == _DONE and min(map(get, ptypes), default=_DONE) == _DONE:
                    state[type_id] = _DONE
                    return 1
                strong = state[ret] == _DONE or order(ret, through_ptr) > 0
                for ptype in ptypes:
                    if state[ptype] == _DONE or order(ptype, through_ptr):
                        strong = True
                if state[ret] == _DONE and min(map(get, ptypes), default=_DONE) == _DONE:
                    state[type_id] = _DONE
                return int(strong)
            if k == _PTR:
                target = st[type_id]
                if state[target] == _DONE:
                    strong = 1
                elif (kinds[target] == _STRUCT or kinds[target] == _UNION) and names_off[target]:
                    strong = 0  # a named record through a pointer: a declaration will do
                else:
                    strong = order(target, True)
                state[type_id] = _DONE
                return strong
            if k == _STRUCT or k == _UNION:
                named = names_off[type_id] != 0
                if through_ptr and named:
                    return 0
                state[type_id] = _DOING
                p = offsets[type_id] + 4
                for mtype in words[p:p + 3 * (infos[type_id] & 0xFFFF):3]:
                    if state[mtype] != _DONE:
                        order(mtype, False)
                if named:
                    push(type_id)
                state[type_id] = _DONE
                return 1
            if k == _TYPEDEF:
                target = st[type_id]
                strong = 1 if state[target] == _DONE else order(target, through_ptr)
                if through_ptr and not strong:
                    return 0
                push(type_id)
                state[type_id] = _DONE
                return 1
            if k in _MODS:
                target = st[type_id]
                if state[target] == _DONE:
                    state[type_id] = _DONE
                    return 1
                strong = order(target, through_ptr)
                if state[target] == _DONE:
                    state[type_id] = _DONE
                return strong
            if k == _ARRAY:
                target = words[offsets[type_id] + 3]
                if state[target] == _DONE:
                    state[type_id] = _DONE
                    return 1
                strong = order(target, False)
                if state[target] == _DONE:
                    state[type_id] = _DONE
                return strong
            if k == _ENUM or k == _ENUM64 or k == _FWD:
                if names_off[type_id] or type_id not in writer.referenced:
                    push(type_id)
                state[type_id] = _DONE
                return 1
            if k == _INT or k == _FLOAT:
                state[type_id] = _DONE
                return 0
            if k in _NOT_DUMPED:
                state[type_id] = _DONE
                return 0
            raise BtfError(f"type {type_id}: unknown kind {k}")

        return order

    # -- emitting ---------------------------------------------------------

    def emit(self, type_id: int, cont_id: int) -> None:
        """Print ``type_id``'s definition, or what its user needs of it.

        ``cont_id`` is the struct being defined (0 at top level): a struct
        that refers to itself needs no forward declaration.  As in
        :meth:`order`, a qualifier, pointer or array over a done type is
        itself done.
        """
        es = self.emit_state
        s = es[type_id]
        if s == _DONE:
            return
        # Anonymous types are walked again at every use, as in libbpf; a DAG of
        # them in bad BTF would make that exponential.  vmlinux needs ~0.3
        # calls per type.
        self._emit_budget -= 1
        if self._emit_budget < 0:
            raise BtfError("anonymous types nest too widely to print (malformed BTF?)")
        k = self.kinds[type_id]
        out = self.out
        if s == _DOING:
            if self.fwd_emitted[type_id]:
                return
            if k == _STRUCT or k == _UNION:
                if type_id == cont_id or not self.names_off[type_id]:
                    return
                out.append(self.struct_fwd(type_id) + ";\n\n")
                self.fwd_emitted[type_id] = 1
            elif k == _TYPEDEF:
                if not self._blacklisted(type_id):
                    out.append(self.typedef_def(type_id, 0) + ";\n\n")
                self.fwd_emitted[type_id] = 1
            return
        if k == _PTR or k in _MODS:
            target = self.st[type_id]
            if es[target] != _DONE:
                self.emit(target, cont_id)
                if es[target] != _DONE:
                    return
            es[type_id] = _DONE
        elif k == _STRUCT or k == _UNION:
            es[type_id] = _DOING
            named = self.names_off[type_id] != 0
            if cont_id == 0 or not named:
                inner = type_id if named else cont_id
                emit = self.emit
                for mtype in self.member_types(type_id):
                    if es[mtype] != _DONE:
                        emit(mtype, inner)
            elif not self.fwd_emitted[type_id] and type_id != cont_id:
                out.append(self.struct_fwd(type_id) + ";\n\n")
                self.fwd_emitted[type_id] = 1
            if cont_id == 0:
                out.append(self.struct_def(type_id, 0) + ";\n\n")
                es[type_id] = _DONE
            else:
                es[type_id] = _NOT
        elif k == _TYPEDEF:
            es[type_id] = _DOING
            target = self.st[type_id]
            if es[target] != _DONE:
                self.emit(target, type_id)
            if not self.fwd_emitted[type_id] and not self._blacklisted(type_id):
                out.append(self.typedef_def(type_id, 0) + ";\n\n")
            es[type_id] = _DONE
        elif k == _ARRAY:
            target = self.array_elem(type_id)
            if es[target] != _DONE:
                self.emit(target, cont_id)
                if es[target] != _DONE:
                    return
            es[type_id] = _DONE
        elif k == _ENUM or k == _ENUM64:
            if cont_id == 0:
                out.append(self.enum_def(type_id, 0) + ";\n\n")
            es[type_id] = _DONE
        elif k == _FWD:
            out.append(self.fwd_def(type_id) + ";\n\n")
            es[type_id] = _DONE
        elif k == _FUNC_PROTO:
            emit = self.emit
            p = self.offsets[type_id] + 4
            parts = self.words[p:p + 2 * (self.infos[type_id] & 0xFFFF):2]
            parts.insert(0, self.st[type_id])  # the return type first, as libbpf
            get = es.__getitem__
            if min(map(get, parts)) != _DONE:
                for part in parts:
                    if es[part] != _DONE:
                        emit(part, cont_id)
                if min(map(get, parts)) != _DONE:
                    return
            es[type_id] = _DONE
        elif k == _INT:
            es[type_id] = _DONE

    def _blacklisted(self, type_id: int) -> bool:
        """``__builtin_va_list`` is the compiler's own: never redefine it."""
        return self.name_of(type_id) == "__builtin_va_list"

    # -- C text -----------------------------------------------------------

    def struct_fwd(self, type_id: int) -> str:
        keyword = "struct" if self.kinds[type_id] == _STRUCT else "union"
        name = self.namer.type_name(type_id)
        return f"{keyword} {name}" if name else keyword

    def fwd_def(self, type_id: int) -> str:
        keyword = "union" if self.infos[type_id] >> 31 else "struct"
        return f"{keyword} {self.namer.type_name(type_id)}"

    def typedef_def(self, type_id: int, lvl: int) -> str:
        name = self.namer.ident_name(type_id)
        target = self.st[type_id]
        if target == 0 and name == "__gnuc_va_list":
            return "typedef __builtin_va_list __gnuc_va_list"
        return "typedef " + self.decl(target, name, lvl)

    def enum_def(self, type_id: int, lvl: int) -> str:
        name = self.namer.type_name(type_id)
        head = f"enum {name}" if name else "enum"
        vlen = self.infos[type_id] & 0xFFFF
        if not vlen:
            return head
        parts = [head, " {"]
        prefix = "\n" + "\t" * min(lvl + 1, _MAX_INDENT)
        counts = self.namer.ident_counts
        strings = self.strings
        p = self.offsets[type_id] + 3
        w = self.words
        signed = self.infos[type_id] >> 31
        if self.kinds[type_id] == _ENUM:
            for q in range(p, p + 2 * vlen, 2):
                v = w[q + 1]
                if signed and v & 0x80000000:
                    v -= 1 << 32
                name = strings[w[q]]
                n = counts[name] = counts.get(name, 0) + 1
                if n > 1:
                    name = f"{name}___{n}"
                parts.append(f"{prefix}{name} = {v},")
        else:
            suffix = "LL," if signed else "ULL,"
            for q in range(p, p + 3 * vlen, 3):
                v = w[q + 1] | (w[q + 2] << 32)
                if signed and v & (1 << 63):
                    v -= 1 << 64
                name = strings[w[q]]
                n = counts[name] = counts.get(name, 0) + 1
                if n > 1:
                    name = f"{name}___{n}"
                parts.append(f"{prefix}{name} = {v}{suffix}")
        parts.append("\n" + "\t" * min(lvl, _MAX_INDENT) + "}")
        return "".join(parts)

    def struct_def(self, type_id: int, lvl: int) -> str:
        """A struct or union with its body, members indented to ``lvl + 1``."""
        is_struct = self.kinds[type_id] == _STRUCT
        packed = is_struct and self.is_packed(type_id)
        name = self.namer.type_name(type_id)
        keyword = "struct" if is_struct else "union"
        parts = [f"{keyword} {name} {{" if name else f"{keyword} {{"]
        inner_lvl = lvl + 1
        prefix = _INDENT[min(inner_lvl, _MAX_INDENT)]
        off = 0
        prev_bitfield = False
        strings = self.strings
        alignof, sizeof, decl = self.alignof, self.sizeof, self.decl
        decl_cache, size_cache = self._decl_cache, self._size_cache
        append = parts.append
        names, mtypes, moffs, bits = self.member_columns(type_id)
        if bits is None:
            for name_off, mtype, m_off in zip(names, mtypes, moffs):
                if off < m_off:
                    self._padding(parts, off, m_off, 1 if packed else alignof(mtype), False, inner_lvl)
                fname = strings[name_off]
                got = decl_cache[mtype] if fname else None
                append(prefix + (got[0] + fname + got[1] if got is not None else decl(mtype, fname, inner_lvl))
                       + ";")
                size = size_cache[mtype]
                off = m_off + (sizeof(mtype) if size is None else size) * 8
        else:
            for name_off, mtype, m_off, m_sz in zip(names, mtypes, moffs, bits):
                if off < m_off:
                    self._padding(parts, off, m_off, 1 if packed else alignof(mtype),
                                  prev_bitfield and m_sz != 0, inner_lvl)
                fname = strings[name_off]
                got = decl_cache[mtype] if fname else None
                text = got[0] + fname + got[1] if got is not None else decl(mtype, fname, inner_lvl)
                if m_sz:
                    append(f"{prefix}{text}: {m_sz};")
                    off = m_off + m_sz
                    prev_bitfield = True
                else:
                    append(prefix + text + ";")
                    size = size_cache[mtype]
                    off = m_off + (sizeof(mtype) if size is None else size) * 8
                    prev_bitfield = False
        size_bits = self.st[type_id] * 8
        if is_struct and off < size_bits:
            self._padding(parts, off, size_bits, self.alignof(type_id), False, inner_lvl)
        if mtypes or size_bits:
            append(_INDENT[min(lvl, _MAX_INDENT)] + "}")
        else:
            append("}")
        if packed:
            append(" __attribute__((packed))")
        return "".join(parts)

    def _padding(self, out: list[str], cur_off: int, next_off: int, next_align: int,
                 in_bitfield: bool, lvl: int) -> None:
        """Explicit ``long: 64;``-style padding where the compiler's own
        alignment would not put the next member at its BTF offset."""
        if cur_off >= next_off:
            return
        prefix = "\n" + "\t" * min(lvl, _MAX_INDENT)
        for pad_type, bits in padding_fields(cur_off, next_off, next_align, in_bitfield, self.ptr_size):
            out.append(f"{prefix}{pad_type}: {bits};")

    # -- declarations -----------------------------------------------------

    def decl(self, type_id: int, fname: str, lvl: int) -> str:
        """``type_id`` declared as ``fname`` (``struct file *f``, ``int (*cb)(void)``).

        A declaration without an anonymous body in it does not depend on
        the indent, so it is built once as the text around the name.
        """
        if fname:
            got = self._decl_cache[type_id]
            if got is not None:
                return got[0] + fname + got[1]
            left = self._simple_prefix(type_id)
            if left is not None:
                self._decl_cache[type_id] = (left, "")
                return left + fname
            before = self._inline_bodies
            # C names have no NUL: it marks where the name goes.
            text = self._decl_text(type_id, "\x00", lvl)
            if self._inline_bodies == before:
                left, _, right = text.partition("\x00")
                self._decl_cache[type_id] = (left, right)
                return left + fname + right
            return text.replace("\x00", fname, 1)
        got = self._bare_cache[type_id]
        if got is not None:
            return got
        before = self._inline_bodies
        text = self._decl_text(type_id, "", lvl)
        if self._inline_bodies == before:
            self._bare_cache[type_id] = text
        return text

    def _base_name(self, t: int) -> str | None:
        """How a named terminal type is written (``struct file``, ``u32``)."""
        if not self.names_off[t]:
            return None
        k = self.kinds[t]
        if k == _STRUCT or k == _UNION:
            return self.struct_fwd(t)
        if k == _TYPEDEF:
            return self.namer.ident_name(t)
        if k == _INT or k == _FLOAT:
            return self.name_of(t)
        if k == _ENUM or k == _ENUM64:
            return "enum " + self.namer.type_name(t)
        if k == _FWD:
            return self.fwd_def(t)
        return None

    def _simple_prefix(self, type_id: int) -> str | None:
        """The text before a name for the two commonest declarations,
        ``T name`` and ``T *name`` with T named; None for anything else."""
        if self.kinds[type_id] == _PTR:
            base = self._base_name(self.st[type_id])
            return None if base is None else base + " *"
        base = self._base_name(type_id)
        return None if base is None else base + " "

    def _decl_text(self, type_id: int, fname: str, lvl: int) -> str:
        kinds, st = self.kinds, self.st
        stack: list[int] = []
        t = type_id
        for _ in range(1000):
            stack.append(t)
            if t == 0:
                break
            k = kinds[t]
            if k == _PTR or k in _MODS or k == _FUNC_PROTO:
                t = st[t]
            elif k == _ARRAY:
                t = self.array_elem(t)
            else:
                # a terminal kind, or one that cannot be declared (libbpf
                # warns and prints what it has)
                break
        else:
            raise BtfError(f"type {type_id}: declaration chain too long (cycle?)")
        out: list[str] = []
        self._chain(out, stack, fname, lvl)
        return "".join(out)

    def _mods(self, out: list[str], stack: list[int]) -> None:
        """Qualifiers right above a base type print before it: ``const char``."""
        kinds = self.kinds
        while stack:
            word = _QUAL_WORD.get(kinds[stack[-1]])
            if word is None:
                return
            out.append(word + " ")
            stack.pop()

    def _drop_mods(self, stack: list[int]) -> None:
        kinds = self.kinds
        while stack and kinds[stack[-1]] in _MODS:
            stack.pop()

    def _chain(self, out: list[str], stack: list[int], fname: str, lvl: int) -> None:
        kinds = self.kinds
        last_was_ptr = True
        while stack:
            t = stack.pop()
            if t == 0:
                self._mods(out, stack)
                out.append("void")
                last_was_ptr = False
                continue
            k = kinds[t]
            if k == _PTR:
                out.append("*" if last_was_ptr else " *")
            elif k == _TYPEDEF:
                self._mods(out, stack)
                out.append(self.namer.ident_name(t))
            elif k == _STRUCT or k == _UNION:
                self._mods(out, stack)
                if self.names_off[t]:
                    out.append(self.struct_fwd(t))
                else:
                    self._inline_bodies += 1
                    out.append(self.struct_def(t, lvl))
            elif k == _INT or k == _FLOAT:
                self._mods(out, stack)
                out.append(self.name_of(t))
            elif k in _QUAL_WORD:
                out.append(" " + _QUAL_WORD[k])
            elif k == _ENUM or k == _ENUM64:
                self._mods(out, stack)
                if self.names_off[t]:
                    out.append("enum " + self.namer.type_name(t))
                else:
                    self._inline_bodies += 1
                    out.append(self.enum_def(t, lvl))
            elif k == _FWD:
                self._mods(out, stack)
                out.append(self.fwd_def(t))
            elif k == _TYPE_TAG:
                self._mods(out, stack)
                if self.type_tags:
                    out.append(f' __attribute__((btf_type_tag("{self.name_of(t)}")))')
            elif k == _ARRAY:
                self._drop_mods(stack)
                nelems = self.words[self.offsets[t] + 5]
                if not stack:
                    if fname and not last_was_ptr:
                        out.append(" ")
                    out.append(f"{fname}[{nelems}]")
                    return
                multidim = kinds[stack[-1]] == _ARRAY
                if fname and not last_was_ptr:
                    out.append(" ")
                if not multidim:
                    out.append("(")
                self._chain(out, stack, fname, lvl)
                if not multidim:
                    out.append(")")
                out.append(f"[{nelems}]")
                return
            elif k == _FUNC_PROTO:
                self._drop_mods(stack)
                if stack:
                    out.append(" (")
                    self._chain(out, stack, fname, lvl)
                    out.append(")")
                elif fname and not last_was_ptr:
                    out.append(" " + fname)
                else:
                    out.append(fname)
                out.append(self._params(t, lvl))
                return
            else:
                return  # not declarable (FUNC, VAR, ...): libbpf stops here too
            last_was_ptr = k == _PTR
        if fname and not last_was_ptr:
            out.append(" ")
        out.append(fname)

    def _params(self, proto_id: int, lvl: int) -> str:
        params = self.params(proto_id)
        if not params or (len(params) == 1 and params[0][1] == 0):
            return "(void)"
        parts = []
        last = len(params) - 1
        for i, (name_off, ptype) in enumerate(params):
            if i == last and ptype == 0:
                parts.append("...")
                break
            parts.append(self.decl(ptype, self.strings[name_off], lvl))
        return "(" + ", ".join(parts) + ")"

    # -- the whole header -------------------------------------------------

    def run(self) -> list[str]:
        """Every type in id order, each after what it needs."""
        out = self.out
        out.append(HEADER_PROLOGUE)
        queue = self.queue
        order, emit = self.order, self.emit
        state = self.order_state
        self._check_references()
        dumped = set(range(32)) - _NOT_DUMPED
        for type_id in _ids_of(self.kind_bytes, dumped):
            if state[type_id] == _DONE or not type_id:
                continue
            del queue[:]
            order(type_id, False)
            for queued in queue:
                emit(queued, 0)
        out.append(HEADER_EPILOGUE)
        return out


def write_header(spec: Spec, out: TextIO, type_tags: bool = False) -> None:
    """Write ``vmlinux.h`` for ``spec``: what ``bpftool btf dump ... format c`` prints.

    ``type_tags`` adds ``btf_type_tag`` attributes, which bpftool 7.1 leaves out.
    """
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    # The dump allocates ~a million small objects and frees none of them
    # until the end: the cyclic collector would only walk them again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        parts = HeaderWriter(spec, type_tags).run()
    except RecursionError:
        # Ordering is a depth-first walk like libbpf's; real BTF stays under a
        # hundred levels, so this depth means a cycle through typedefs/modifiers.
        raise BtfError("type graph nests too deep to order (cyclic BTF?)") from None
    finally:
        sys.setrecursionlimit(limit)
        if gc_was_on:
            gc.enable()
    out.write("".join(parts))


def header(spec: Spec, type_tags: bool = False) -> str:
    """The whole ``vmlinux.h`` as one string."""
    buf = io.StringIO()
    write_header(spec, buf, type_tags)
    return buf.getvalue()
