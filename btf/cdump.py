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

Deciding what to print and in which order (:meth:`HeaderWriter.plan`) is
kept apart from making the text (:meth:`HeaderWriter.render`): a plan is a
list of (type id, what to print) items, and an item's text does not depend
on the order, except for the ``___N`` suffixes, which :mod:`btf.cnames` can
fix afterwards.  So :func:`write_header` with ``jobs=2`` has a forked child
make struct bodies while this process plans (see :func:`_parallel_parts`).

The generator works on the raw type words rather than on :mod:`btf.types`
objects: a vmlinux has 126k types and most of them (functions, variables)
never appear in the header, so decoding them would only cost time.  The C
declaration rules are the same as :mod:`btf.cformat`'s; the difference is
that here they are keyed by type id and memoised.
"""

from __future__ import annotations

import gc
import io
import os
import sys
from array import array
from itertools import accumulate, compress, islice, repeat

TYPE_CHECKING = False  # typing costs milliseconds to import; annotations are strings

from .errors import BtfError
from .cnames import (GNUC_VA_LIST, PLACEHOLDER_START, DeferredNames, Namer, placeholders_safe, repeated, resolve,
                     va_list_placeholder)
from .layout import aligns_itself, padding_fields

SIGKILL = 9  # signal.SIGKILL on Linux: the signal module takes 1.4 ms to import (it builds enums)

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

# What a plan item does with its type id (the low 3 bits of the item).
STRUCT_DEF, STRUCT_FWD, TYPEDEF_DEF, ENUM_DEF, FWD_DEF = range(5)

# Ordering and emitting states (libbpf keeps the same three of each).
_NOT, _DOING, _PENDING, _DONE = 0, 1, 2, 3  # _DONE the largest: min() of states tests all done

_IS_NOT = bytes(s == _NOT for s in range(256))  # translates states to 1 where _NOT
_WRITE_PARTS = 256  # parts joined per write (see write_header)
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


def _columns(spec: Spec) -> tuple[Sequence[int], array, array, array, array]:
    """Type words, and per id (0 = void): record offset, name offset, info
    word, size-or-type word.

    Split BTF continues its base's ids, so a base's words come first.  For
    plain vmlinux these are the spec's own arrays, not copies.
    """
    chain = []
    s: Spec | None = spec
    while s is not None:
        chain.append(s)
        s = s.base
    chain.reverse()
    offsets, names, infos, sizes = array("I", [0]), array("I", [0]), array("I", [0]), array("I", [0])
    for s in chain:
        names.extend(array("I", s._names_column()))  # noqa: SLF001 - same package
        infos.extend(array("I", s._kinds_column()))  # noqa: SLF001 - info words
        sizes.extend(array("I", s._sizes_column()))  # noqa: SLF001 - size or type
    if len(chain) == 1:
        words: Sequence[int] = spec._words  # noqa: SLF001
        offsets.extend(spec._offsets)  # noqa: SLF001
        return words, offsets, names, infos, sizes
    flat = array("I")
    for s in chain:
        shift = len(flat)
        flat.extend(s._words)  # noqa: SLF001
        offsets.extend(o + shift for o in s._offsets)  # noqa: SLF001
    return flat, offsets, names, infos, sizes


class _Strings(dict):
    """Offset -> string (a plain dict hit is several times cheaper than a
    method call per member name).

    A miss reads the table in bulk, from where the last bulk read stopped to
    a little past the offset asked for: splitting in C beats one lookup per
    name, and a kernel's table has the names a header prints in its first
    half, before the 56k function names.
    """

    _AHEAD = 1 << 18  # bytes read past a miss

    def __init__(self, table: StringTable) -> None:
        super().__init__()
        self._lookup = table.lookup
        self._data = data = table._data  # noqa: SLF001 - same package
        self._start = table._start  # noqa: SLF001
        # local offset up to which every string is in the dict (only ASCII
        # tables are split in bulk: offsets count bytes, str indexes count
        # characters)
        self._read = 0 if data.isascii() else len(data)
        self[0] = ""

    def __missing__(self, off: int) -> str:
        local = off - self._start
        if self._read <= local < len(self._data):
            self._read_past(local)
            s = self.get(off)
            if s is not None:
                return s
        s = self[off] = self._lookup(off)  # mid-string offsets, base tables, errors
        return s

    def _read_past(self, local: int) -> None:
        data, begin = self._data, self._read
        end = data.find(0, min(local + self._AHEAD, len(data) - 1)) + 1  # the table ends with NUL
        with memoryview(data) as view:  # decoded from the table, not from a copy of it
            parts = str(view[begin:end], "ascii").split("\0")
        parts.pop()  # after the chunk's last NUL
        # string i starts after strings 0..i-1 and their i NULs
        self.update(zip(accumulate(map((1).__add__, map(len, parts)), initial=self._start + begin), parts))
        self._read = end


def _kind_bytes(infos: array) -> bytes:
    """Each id's kind as one byte, sliced out of the info words in C."""
    raw = infos.tobytes()
    high = raw[3::4] if sys.byteorder == "little" else raw[0::4]
    return high.translate(bytes(b & 0x1F for b in range(256)))


def _ids_of(kinds: bytes, wanted: frozenset[int] | set[int]) -> list[int]:
    """Ids whose kind is in ``wanted``, in id order: each one is where the
    gap before it ends, if the kinds are split at the wanted ones (in C, with
    no int made for the ids that are not wanted)."""
    gaps = kinds.translate(bytes(k in wanted for k in range(256))).split(b"\x01")
    gaps.pop()  # after the last one
    ids = accumulate(map((1).__add__, map(len, gaps)), initial=-1)
    next(ids)
    return list(ids)


class HeaderWriter:
    """One pass of libbpf's btf_dump over a whole spec."""

    def __init__(self, spec: Spec, type_tags: bool = False, caches: bool = True) -> None:
        """``caches=False`` leaves the rendering memos to :meth:`make_caches`
        and the namer to :meth:`defer_names`, both wanted before anything is
        rendered (a process that forks makes them after: 1 MB lists written
        by both processes would be copied page by page)."""
        self.spec = spec
        self.type_tags = type_tags
        words, offsets, names_off, infos, st = _columns(spec)
        self.words = words
        self.offsets = offsets
        self.names_off = names_off
        self.infos = infos
        self.n = n = len(offsets)
        self.st = st                      # size or referenced type, by id
        self.kind_bytes = _kind_bytes(infos)
        self.kinds = self.kind_bytes      # indexing bytes gives ints
        self.strings = _Strings(spec.strings)
        self.ptr_size = self._pointer_size()
        self.order_state = bytearray(n)
        self.emit_state = bytearray(n)
        self.fwd_emitted = bytearray(n)
        self.order_state[0] = _DONE
        self.emit_state[0] = _DONE
        self._referenced_ids: set[int] | None = None
        if caches:
            self.namer: Namer | DeferredNames = Namer(self.name_of, self.kinds, self.vlen)
            self.make_caches()
        self._inline_bodies = 0   # counts anonymous bodies printed inside declarations
        self.items: list[int] = []
        self.queue: list[int] = []
        self.pending: list[int] = []  # see _plan
        # anonymous enums a prototype returns: printed inline there, and
        # alone too if nothing else refers to them
        self.returned: set[int] = set()
        self.order = self._ordering_walk()
        self.emit = self._emitting_walk()

    def make_caches(self) -> None:
        """Memos for rendering.  Those read once per member are lists indexed
        by type id: the ids come out of arrays as new int objects, and a dict
        lookup would hash and compare them (a cache miss per member on a big
        table).  Those read once per record are dicts: a list of 126k slots
        is 1 MB of fresh memory, 2.5 ms to fault in on a VM."""
        n = self.n
        self._size_cache: list[int | None] = [None] * n
        self._align_cache: list[int | None] = [None] * n
        self._align_cache[0] = 0
        self._decl_cache: list[tuple[str, str] | None] = [None] * n
        self._packed_cache: dict[int, bool] = {}
        self._members_cache: dict[int, tuple] = {}
        self._bare_cache: dict[int, str] = {}
        self.struct_def = self._struct_renderer()

    # -- facts about types ------------------------------------------------

    def name_of(self, type_id: int) -> str:
        return self.strings[self.names_off[type_id]]

    def vlen(self, type_id: int) -> int:
        return self.infos[type_id] & 0xFFFF

    def defer_names(self, shared: tuple[set[str], set[str]] | None = None) -> None:
        """Name types so that text can be made out of order (see
        :mod:`btf.cnames`); ``shared`` is :meth:`shared_names` if another
        process has made it."""
        tags, idents = shared if shared is not None else self.shared_names()
        self.namer = DeferredNames(self.name_of, self.kinds, self.vlen, tags, idents)

    def shared_names(self) -> tuple[set[str], set[str]]:
        """The tags, and the typedef names and enum constants, that more than
        one type or constant carries."""
        kb, words, offsets, infos, names_off = self.kind_bytes, self.words, self.offsets, self.infos, self.names_off
        name_offs = array("I")  # every typedef name and enum constant: one namespace
        name_offs.extend(map(names_off.__getitem__, _ids_of(kb, {_TYPEDEF})))
        enums = _ids_of(kb, {_ENUM})
        for t in enums:
            p = offsets[t] + 3
            name_offs.extend(words[p:p + 2 * (infos[t] & 0xFFFF):2])
        for t in _ids_of(kb, {_ENUM64}):
            p = offsets[t] + 3
            name_offs.extend(words[p:p + 3 * (infos[t] & 0xFFFF):3])
        # tags that take a suffix: not forward declarations or empty enums
        tags = _ids_of(kb, {_STRUCT, _UNION, _ENUM64})
        tags += compress(enums, map(infos.__getitem__, enums))  # vlen in the low bits
        strings = self.strings.__getitem__
        return repeated(map(strings, map(names_off.__getitem__, tags))), repeated(map(strings, name_offs))

    def _pointer_size(self) -> int:
        """libbpf guesses it from the size of ``long``; 8 when there is none.
        (A few names, looked up one by one: the bulk reads of
        :class:`_Strings` are for after the fork, where each process makes
        its own.)"""
        longs = {"long", "long int", "unsigned long", "long unsigned int"}
        lookup = self.strings._lookup  # noqa: SLF001 - same module
        for type_id in _ids_of(self.kind_bytes, {_INT}):
            if lookup(self.names_off[type_id]) in longs:
                return self.st[type_id]
        return 8

    @property
    def referenced(self) -> set[int]:
        """Every id some other type refers to, as libbpf marks them before
        ordering (a function's return type does not count).  The plan needs
        it only for an anonymous forward declaration (malformed BTF), or to
        say which reference is out of range."""
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

    def _out_of_range(self) -> BtfError | None:
        """The error for a type id past the last type, if some type names one."""
        returns = map(self.st.__getitem__, _ids_of(self.kind_bytes, {_FUNC_PROTO}))
        worst = max(max(self.referenced, default=0), max(returns, default=0))
        if worst >= self.n:
            return BtfError(f"a type refers to type id {worst}, past the last type ({self.n - 1})")
        return None

    def _unwalked_references(self) -> list[Sequence[int]]:
        """What the ordering walk never follows, as columns: the types of
        functions, variables, section entries and declaration tags (kinds
        the header does not print), and array index types.  (Arrays, not a
        set: only a few ids are looked for in them, and a set of 26k ids is
        2 MB to fault in.)"""
        words, offsets, infos, st, kb = self.words, self.offsets, self.infos, self.st, self.kind_bytes
        columns: list[Sequence[int]] = [
            array("I", compress(st, kb.translate(bytes(k in (_FUNC, _VAR, _DECL_TAG) for k in range(256)))))]
        for type_id in _ids_of(kb, {_DATASEC}):
            p = offsets[type_id] + 3
            columns.append(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        columns.append(array("I", [words[offsets[t] + 4] for t in _ids_of(kb, {_ARRAY})]))
        return columns

    def member_columns(self, type_id: int, keep: bool = True) -> tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int] | None]:
        """A struct or union's members as columns: name offsets, types, bit
        offsets, and bitfield sizes (None when the record has no kflag, so
        no member is a bitfield).  Slices of the word array, made in C.

        Kept (unless not ``keep``) from the layout to the body, which takes
        them out: 11k records' columns kept to the end were 1.4k more pages
        to fault in."""
        got = self._members_cache.get(type_id)
        if got is not None:
            return got
        p = self.offsets[type_id] + 3
        info = self.infos[type_id]
        end = p + 3 * (info & 0xFFFF)
        words = self.words
        offs = words[p + 2:end:3]
        if info >> 31:
            got = (words[p:end:3], words[p + 1:end:3], [o & 0xFFFFFF for o in offs], [o >> 24 for o in offs])
        else:
            got = (words[p:end:3], words[p + 1:end:3], offs, None)
        if keep:
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
        got = self._packed_cache.get(type_id)
        if got is None:
            self.alignof(type_id)
            got = self._packed_cache.get(type_id)
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
        pending = self.pending.append
        returned = self.returned.add
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
            if s == _PENDING:  # an anonymous enum met at the top level: referenced after all
                state[type_id] = _DONE
                return 1
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
                if state[ret] == _DONE and (not ptypes or min(map(get, ptypes)) == _DONE):
                    state[type_id] = _DONE
                    return 1
                s = state[ret]
                if s >= _PENDING:
                    if s == _PENDING:
                        returned(ret)
                    strong = True
                elif s == _NOT and (kinds[ret] == _ENUM or kinds[ret] == _ENUM64) and not names_off[ret]:
                    # libbpf does not count a return type as a reference: an
                    # anonymous enum met here is as if met at the top level
                    state[ret] = _PENDING
                    pending(ret)
                    returned(ret)
                    push(ret)
                    strong = True
                else:
                    strong = order(ret, through_ptr) > 0
                for ptype in ptypes:
                    if state[ptype] == _DONE or order(ptype, through_ptr):
                        strong = True
                if state[ret] >= _PENDING and (not ptypes or min(map(get, ptypes)) == _DONE):
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
                # Met through a reference, an anonymous enum is printed inline
                # (the plan's loop handles one met first at the top level).
                if names_off[type_id] or (k == _FWD and type_id not in writer.referenced):
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

    def _emitting_walk(self) -> Callable[[int, int], None]:
        """libbpf's emitting walk, a closure like :meth:`_ordering_walk`;
        bound to ``self.emit`` by the constructor."""
        es, kinds, st, names_off = self.emit_state, self.kinds, self.st, self.names_off
        words, offsets, infos = self.words, self.offsets, self.infos
        fwd_emitted = self.fwd_emitted
        push = self.items.append
        get = es.__getitem__
        blacklisted = self._blacklisted
        # Anonymous types are walked again at every use, as in libbpf; a DAG of
        # them in bad BTF would make that exponential.  vmlinux needs ~0.3
        # calls per type.
        budget = 16 * self.n + 100_000

        def emit(type_id: int, cont_id: int) -> None:
            """Print ``type_id``'s definition, or what its user needs of it.

            ``cont_id`` is the struct being defined (0 at top level): a struct
            that refers to itself needs no forward declaration.  As in
            ``order``, a qualifier, pointer or array over a done type is
            itself done.
            """
            nonlocal budget
            s = es[type_id]
            if s == _DONE:
                return
            budget -= 1
            if budget < 0:
                raise BtfError("anonymous types nest too widely to print (malformed BTF?)")
            k = kinds[type_id]
            if s == _DOING:
                if fwd_emitted[type_id]:
                    return
                if k == _STRUCT or k == _UNION:
                    if type_id == cont_id or not names_off[type_id]:
                        return
                    push(type_id << 3 | STRUCT_FWD)
                    fwd_emitted[type_id] = 1
                elif k == _TYPEDEF:
                    if not blacklisted(type_id):
                        push(type_id << 3 | TYPEDEF_DEF)
                    fwd_emitted[type_id] = 1
                return
            if k == _PTR or k in _MODS or k == _ARRAY:
                # done once what it points to, qualifies or holds is done
                target = st[type_id] if k != _ARRAY else words[offsets[type_id] + 3]
                if es[target] != _DONE:
                    emit(target, cont_id)
                    if es[target] != _DONE:
                        return
                es[type_id] = _DONE
            elif k == _STRUCT or k == _UNION:
                es[type_id] = _DOING
                named = names_off[type_id] != 0
                if cont_id == 0 or not named:
                    inner = type_id if named else cont_id
                    p = offsets[type_id] + 4
                    for mtype in words[p:p + 3 * (infos[type_id] & 0xFFFF):3]:
                        if es[mtype] != _DONE:
                            emit(mtype, inner)
                elif not fwd_emitted[type_id] and type_id != cont_id:
                    push(type_id << 3 | STRUCT_FWD)
                    fwd_emitted[type_id] = 1
                if cont_id == 0:
                    push(type_id << 3 | STRUCT_DEF)
                    es[type_id] = _DONE
                else:
                    es[type_id] = _NOT
            elif k == _TYPEDEF:
                es[type_id] = _DOING
                target = st[type_id]
                if es[target] != _DONE:
                    emit(target, type_id)
                if not fwd_emitted[type_id] and not blacklisted(type_id):
                    push(type_id << 3 | TYPEDEF_DEF)
                es[type_id] = _DONE
            elif k == _ENUM or k == _ENUM64:
                if cont_id == 0:
                    push(type_id << 3 | ENUM_DEF)
                es[type_id] = _DONE
            elif k == _FWD:
                push(type_id << 3 | FWD_DEF)
                es[type_id] = _DONE
            elif k == _FUNC_PROTO:
                p = offsets[type_id] + 4
                parts = words[p:p + 2 * (infos[type_id] & 0xFFFF):2]
                parts.insert(0, st[type_id])  # the return type first, as libbpf
                if min(map(get, parts)) != _DONE:
                    for part in parts:
                        if es[part] != _DONE:
                            emit(part, cont_id)
                    if min(map(get, parts)) != _DONE:
                        return
                es[type_id] = _DONE
            elif k == _INT:
                es[type_id] = _DONE

        return emit

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
        claim = self.namer.claim(type_id)
        name = self.namer.ident_name(type_id)
        target = self.st[type_id]
        if target == 0 and self.name_of(type_id) == "__gnuc_va_list":
            # old gcc's typedef to void: libbpf writes a valid one instead
            if claim:
                return va_list_placeholder(type_id)
            if name == "__gnuc_va_list":
                return GNUC_VA_LIST
        return claim + "typedef " + self.decl(target, name, lvl)

    def enum_def(self, type_id: int, lvl: int, inline: bool = False) -> str:
        """An enum with its constants; ``inline`` when printed inside a
        declaration (an anonymous enum is printed again at each use)."""
        name = self.namer.type_name(type_id)
        head = f"enum {name}" if name else "enum"
        vlen = self.infos[type_id] & 0xFFFF
        if not vlen:
            return head
        parts = [head, " {"]
        prefix = "\n" + "\t" * min(lvl + 1, _MAX_INDENT)
        # a constant printed more than once is never final before the text
        twice = inline or type_id in self.returned
        strings = self.strings
        p = self.offsets[type_id] + 3
        w = self.words
        signed = self.infos[type_id] >> 31
        # columns sliced in C, and one comprehension over them: 22k
        # constants in vmlinux
        if self.kinds[type_id] == _ENUM:
            end = p + 2 * vlen
            names = list(map(strings.__getitem__, w[p:end:2]))
            values: Sequence[int] = w[p + 1:end:2]
            if signed:
                values = [v - (1 << 32) if v & 0x80000000 else v for v in values]
            suffix = ","
        else:
            end = p + 3 * vlen
            names = list(map(strings.__getitem__, w[p:end:3]))
            values = [lo | hi << 32 for lo, hi in zip(w[p + 1:end:3], w[p + 2:end:3])]
            if signed:
                values = [v - (1 << 64) if v & (1 << 63) else v for v in values]
            suffix = "LL," if signed else "ULL,"
        names = self.namer.enumerators(names, twice)
        parts.extend([f"{prefix}{name} = {v}{suffix}" for name, v in zip(names, values)])
        parts.append("\n" + "\t" * min(lvl, _MAX_INDENT) + "}")
        return "".join(parts)

    def _struct_renderer(self) -> Callable[[int, int], str]:
        """:meth:`struct_def`'s body, as a closure over the memos it reads
        (made by :meth:`make_caches`, which binds it): it runs for 11k
        records, and their set-up was a fifth of the time of small ones."""
        kinds, st, strings, ptr_size = self.kinds, self.st, self.strings, self.ptr_size
        alignof, sizeof, decl = self.alignof, self.sizeof, self.decl
        is_packed, member_columns, padding = self.is_packed, self.member_columns, self._padding
        decl_cache, size_cache, align_cache = self._decl_cache, self._size_cache, self._align_cache
        packed_cache, members_cache = self._packed_cache, self._members_cache
        writer = self

        def struct_def(type_id: int, lvl: int) -> str:
            """A struct or union with its body, members indented to ``lvl + 1``.

            A struct not laid out yet (most: bodies come in id order, inner
            ones first) is laid out by its own body's loop, which reads every
            member's alignment anyway, instead of a loop of its own first
            (libbpf decides packing first).  The body is made as unpacked,
            and made again in the rare case that the layout says packed."""
            if kinds[type_id] != _STRUCT:
                return render(type_id, lvl, False, False, False)
            packed = packed_cache.get(type_id)
            if packed is not None:
                return render(type_id, lvl, True, packed, False)
            text = render(type_id, lvl, True, False, True)
            packed = packed_cache.get(type_id)
            if packed is None:  # a member with no alignment (bad BTF): libbpf's own answers
                packed = is_packed(type_id)
            return render(type_id, lvl, True, True, False) if packed else text

        def render(type_id: int, lvl: int, is_struct: bool, packed: bool, learn: bool) -> str:
            """The text; with ``learn``, the struct's layout too, as
            :meth:`_record_layout` finds it (left to that when a member has
            no alignment)."""
            name = writer.namer.type_name(type_id)
            keyword = "struct" if is_struct else "union"
            parts = [f"{keyword} {name} {{" if name else f"{keyword} {{"]
            inner_lvl = lvl + 1
            prefix = _INDENT[inner_lvl if inner_lvl < _MAX_INDENT else _MAX_INDENT]
            off = 0
            prev_bitfield = False
            best, irregular = 1, False
            append = parts.append
            columns = members_cache.pop(type_id, None)  # laid out by now: not needed again
            names, mtypes, moffs, bits = columns if columns is not None else member_columns(type_id, False)
            # (bitfield sizes are there only with kflag: zeros otherwise)
            for name_off, mtype, m_off, m_sz in zip(names, mtypes, moffs, repeat(0) if bits is None else bits):
                if learn:
                    a = align_cache[mtype]
                    if a is None:
                        a = alignof(mtype)
                    if a <= 0:  # no alignment: is_packed's slow path will decide
                        best, learn = a, False
                    else:
                        if a > best:
                            best = a
                        if not m_sz and m_off % (8 * a):
                            irregular = True
                if off < m_off:
                    align = 1 if packed else alignof(mtype)
                    in_bitfield = prev_bitfield and m_sz != 0
                    if in_bitfield or not aligns_itself(off, m_off, align, ptr_size):
                        padding(parts, off, m_off, align, in_bitfield, inner_lvl)
                fname = strings[name_off]
                got = decl_cache[mtype] if fname else None
                if m_sz:
                    text = f"{got[0]}{fname}{got[1]}" if got is not None else decl(mtype, fname, inner_lvl)
                    append(f"{prefix}{text}: {m_sz};")
                    off = m_off + m_sz
                    prev_bitfield = True
                else:
                    if got is not None:  # one f-string: one allocation, not four
                        append(f"{prefix}{got[0]}{fname}{got[1]};")
                    else:
                        append(f"{prefix}{decl(mtype, fname, inner_lvl)};")
                    size = size_cache[mtype]
                    off = m_off + (sizeof(mtype) if size is None else size) * 8
                    prev_bitfield = False
            size_bits = st[type_id] * 8
            if learn:  # every member had an alignment
                irregular = irregular or st[type_id] % best != 0
                packed_cache[type_id] = irregular
                if align_cache[type_id] is None:
                    align_cache[type_id] = 1 if irregular else best
            if is_struct and off < size_bits:
                padding(parts, off, size_bits, alignof(type_id), False, inner_lvl)
            if mtypes or size_bits:
                append(_INDENT[lvl if lvl < _MAX_INDENT else _MAX_INDENT] + "}")
            else:
                append("}")
            if packed:
                append(" __attribute__((packed))")
            return "".join(parts)

        return struct_def

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
        got = self._bare_cache.get(type_id)
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
                    out.append(self.enum_def(t, lvl, True))
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

    def plan(self) -> list[int]:
        """What the header defines, in order: ``id << 3 | op`` per item
        (:data:`STRUCT_DEF`, :data:`STRUCT_FWD`, ...).  Every type in id
        order, each after what it needs; no text is made here."""
        try:
            return self._plan()
        except IndexError:
            # the walk indexes per-type state by the ids records name
            error = self._out_of_range()
            if error is None:
                raise
            raise error from None

    def _plan(self) -> list[int]:
        items = self.items
        queue = self.queue
        order, emit = self.order, self.emit
        state, kinds, names_off = self.order_state, self.kinds, self.names_off
        # Kinds the header never prints count as done, so that the next id
        # to order is found by a search in C.
        state[:] = self.kind_bytes.translate(bytes(_DONE if k in _NOT_DUMPED else _NOT for k in range(256)))
        state[0] = _DONE
        # libbpf prints an anonymous enum on its own only if no type refers
        # to it, which it learns from a scan of every reference first (a
        # function's return type is not one).  Here one met at the top level,
        # or as a return type, is printed there, in case, and stays _PENDING:
        # a type walked later that refers to it finds it so, and the print is
        # dropped at the end (types walked before would have met it already).
        # That leaves only the references the walk never follows.
        pending = self.pending
        st, words, offsets, infos = self.st, self.words, self.offsets, self.infos
        get = state.__getitem__
        # Every id the header may print, in order; one that an earlier walk
        # has reached is skipped by a test here (a search from id to id
        # costs more in its call than in its scan).  Picked lazily from all
        # the ids, in C: a list of the 70k would be 3 MB to fault in.
        for type_id in compress(range(len(state)), state.translate(_IS_NOT)):
            if state[type_id] != _NOT:
                continue
            k = kinds[type_id]
            if k == _FUNC_PROTO:
                # Most ids the loop stops at are prototypes of functions
                # (25k of 57k in vmlinux) whose parameters are all done: the
                # order walk's first test, without a call into it.  (min()
                # with a default= takes a quarter longer: keywords are parsed.)
                p = offsets[type_id] + 4
                vlen = infos[type_id] & 0xFFFF
                if state[st[type_id]] == _DONE and (not vlen or min(map(get, words[p:p + 2 * vlen:2])) == _DONE):
                    state[type_id] = _DONE
                    continue
                order(type_id, False)
            elif k == _PTR:
                target = st[type_id]
                if state[target] == _DONE or ((kinds[target] == _STRUCT or kinds[target] == _UNION)
                                              and names_off[target]):
                    state[type_id] = _DONE  # as order() would, pushing nothing
                    continue
                order(type_id, False)
            elif (k == _ENUM or k == _ENUM64) and not names_off[type_id]:
                state[type_id] = _PENDING
                pending.append(type_id)
                queue.append(type_id)
            else:
                order(type_id, False)
            if queue:
                for queued in queue:
                    emit(queued, 0)
                del queue[:]
        candidates = set(pending)
        unwalked: set[int] = set()  # the pending ones something refers to after all
        for column in self._unwalked_references():
            if column and max(column) >= self.n:
                raise self._out_of_range()
            unwalked.update(candidates.intersection(column))
        dropped = {t << 3 | ENUM_DEF for t in pending if state[t] == _DONE or t in unwalked}
        if dropped:
            items[:] = [item for item in items if item not in dropped]
        return items

    def render(self, item: int) -> str:
        """One planned item's C text, its ``;`` and blank line included."""
        op, type_id = item & 7, item >> 3
        if op == STRUCT_DEF:
            return self.struct_definition(type_id)
        if op == TYPEDEF_DEF:
            return self.typedef_def(type_id, 0) + ";\n\n"
        if op == ENUM_DEF:
            return self.enum_def(type_id, 0) + ";\n\n"
        if op == STRUCT_FWD:
            return self.struct_fwd(type_id) + ";\n\n"
        return self.fwd_def(type_id) + ";\n\n"

    def struct_definition(self, type_id: int) -> str:
        """A struct or union's top-level definition, as :meth:`render` makes it."""
        return self.struct_def(type_id, 0) + ";\n\n"

    def run(self) -> list[str]:
        """The header's text in parts: the plan, rendered in its order."""
        return [HEADER_PROLOGUE, *map(self.render, self.plan()), HEADER_EPILOGUE]


def _table_bytes(table: StringTable | None) -> Iterator[bytes]:
    """The bytes of a string table and of the tables it is split from."""
    while table is not None:
        yield table._data  # noqa: SLF001 - same package
        table = table._base  # noqa: SLF001


class _Shared:
    """What a rendering child has done so far, in memory both processes see
    (an anonymous shared mapping made before the fork): its finished texts
    as UTF-8, NUL-terminated, how many bytes of them there are, and a stop
    flag the parent raises.

    The child writes text first and the count after it, and the parent reads
    the count first, so what the count covers is always there (x86 and arm64
    both keep a process's own stores in order as another one sees them, and
    the interpreter's memory barriers on its lock keep the rest)."""

    _HEAD = 16  # bytes used, stop flag: two little-endian u64

    def __init__(self, capacity: int, names_capacity: int) -> None:
        import mmap

        self.map = mmap.mmap(-1, self._HEAD + capacity)
        self.capacity = capacity
        self._read = 0  # bytes taken by more()
        # the shared names (see publish): their length, then NUL-separated
        # tags, a \x01, the idents; untouched pages of a mapping cost nothing
        self.names_map = mmap.mmap(-1, 8 + names_capacity)

    def close(self) -> None:
        self.map.close()
        self.names_map.close()

    def publish(self, names: tuple[set[str], set[str]]) -> None:
        """The child's :meth:`HeaderWriter.shared_names`, for the parent to
        take instead of making them again (C names have no NUL or \x01)."""
        data = ("\0".join(names[0]) + "\x01" + "\0".join(names[1])).encode()
        if len(data) <= len(self.names_map) - 8:
            self.names_map[8:8 + len(data)] = data
            self.names_map[:8] = len(data).to_bytes(8, "little")  # after the bytes it covers

    def names(self) -> tuple[set[str], set[str]] | None:
        """What the child published, or None if it has not (yet)."""
        size = int.from_bytes(self.names_map[:8], "little")
        if not size:
            return None
        tags, _, idents = self.names_map[8:8 + size].decode().partition("\x01")
        return set(tags.split("\0")) - {""}, set(idents.split("\0")) - {""}

    def _get(self, at: int) -> int:
        return int.from_bytes(self.map[at:at + 8], "little")

    def _set(self, at: int, value: int) -> None:
        self.map[at:at + 8] = value.to_bytes(8, "little")

    def stop(self) -> None:
        self._set(8, 1)

    def produce(self, texts: Iterable[str]) -> None:
        """The child's loop: append the texts NUL-terminated, a few at a
        time (one copy and one count update for 16 of them), until the space
        runs out or the parent says stop."""
        used = 0
        head, cap, mem = self._HEAD, self.capacity, self.map
        texts = iter(texts)
        while batch := list(islice(texts, 16)):
            data = ("\0".join(batch) + "\0").encode()
            if used + len(data) > cap or mem[8]:
                return
            mem[head + used:head + used + len(data)] = data
            used += len(data)
            self._set(0, used)

    def more(self) -> list[str]:
        """The texts the child has finished since the last call (it counts
        the bytes after writing them, so the bytes counted end a text)."""
        used = self._get(0)
        if used == self._read:
            return []
        texts = self.map[self._HEAD + self._read:self._HEAD + used].decode().split("\0")
        texts.pop()  # after the last NUL
        self._read = used
        return texts


def _parallel_parts(spec: Spec, type_tags: bool) -> list[str]:
    """The header made by two processes.  This one plans it (the ordering
    walk cannot be split) while a forked child renders struct and union
    bodies from the first one on; then this one renders the other items and
    struct bodies from the last one back until it meets the child.  Names
    that depend on the order of the text are placeholders (:mod:`btf.cnames`)
    until this one makes the parts final, in order, as their texts come in
    (:class:`_Finisher`).

    Each process reads the strings itself after the fork (the plan needs
    almost none, and a table shared by fork would be copied page by page as
    both touch the strings' reference counts).  The child finds which names
    are shared first and hands them over, so this one need not."""
    writer = HeaderWriter(spec, type_tags, caches=False)
    bodies = _ids_of(writer.kind_bytes, {_STRUCT, _UNION})
    bodies = list(compress(bodies, map(writer.names_off.__getitem__, bodies)))
    shared = _Shared(64 * len(writer.words) + (1 << 20), 2 * sum(map(len, _table_bytes(spec.strings))) + 64)
    try:
        pid = os.fork()
    except OSError:  # no process to spare: all of it here, in order
        shared.close()
        return HeaderWriter(spec, type_tags).run()
    if pid == 0:  # the child: never returns into the caller's code
        try:
            writer.make_caches()  # each process its own, after the fork
            names = writer.shared_names()
            shared.publish(names)
            writer.defer_names(names)
            shared.produce(map(writer.struct_definition, bodies))
        finally:
            os._exit(0)
    try:
        writer.make_caches()
        items = writer.plan()
        writer.defer_names(shared.names())
        render = writer.render
        parts: list[str | int] = [HEADER_PROLOGUE]
        # a struct body's place holds its index in ``bodies`` until the
        # text is there (-1 - id: one not in the list, made here)
        index = {t: i for i, t in enumerate(bodies)}
        for item in items:
            if item & 7 == STRUCT_DEF:
                parts.append(index.get(item >> 3, -1 - (item >> 3)))
            else:
                parts.append(render(item))
        parts.append(HEADER_EPILOGUE)
        # Struct bodies from the end, until the child has the rest; between
        # two, the parts are made final in order as far as their texts are
        # there, so little of that is left for after the child is done.
        texts: list[str | None] = [None] * len(bodies)
        final = _Finisher(writer, parts, texts)
        fetched = 0
        last = len(bodies)
        while True:
            new = shared.more()
            texts[fetched:fetched + len(new)] = new
            fetched += len(new)
            if last <= fetched:
                break
            last -= 1
            texts[last] = writer.struct_definition(bodies[last])
            final.advance()
    finally:
        shared.stop()
        os.kill(pid, SIGKILL)  # what it does now is not needed
        os.waitpid(pid, 0)
        shared.close()
    final.advance()
    return parts  # type: ignore[return-value]  # all text now


class _Finisher:
    """Makes the parts of a header final in order: a struct body's text put
    in its place, and placeholders resolved (:func:`btf.cnames.resolve`,
    which must see them in the order of the text)."""

    def __init__(self, writer: HeaderWriter, parts: list[str | int], texts: list[str | None]) -> None:
        self.writer = writer
        self.parts = parts
        self.texts = texts
        self.namer = Namer(writer.name_of, writer.kinds, writer.vlen)
        self.done = 0  # parts before this one are final

    def advance(self) -> None:
        """As far as the texts allow."""
        parts, texts, namer = self.parts, self.texts, self.namer
        r = self.done
        n = len(parts)
        while r < n:
            part = parts[r]
            if part.__class__ is int:
                if part < 0:
                    part = self.writer.struct_definition(-1 - part)
                else:
                    part = texts[part]
                    if part is None:
                        break
            # most parts have no placeholder: a search in C
            parts[r] = resolve(part, namer) if PLACEHOLDER_START in part else part
            r += 1
        self.done = r


def write_header(spec: Spec, out: TextIO, type_tags: bool = False, jobs: int = 1) -> None:
    """Write ``vmlinux.h`` for ``spec``: what ``bpftool btf dump ... format c`` prints.

    ``type_tags`` adds ``btf_type_tag`` attributes, which bpftool 7.1 leaves out.
    With ``jobs`` > 1 (and fork), struct bodies are rendered in a second process.
    """
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    # The dump allocates ~a million small objects and frees none of them
    # until the end: the cyclic collector would only walk them again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if jobs > 1 and hasattr(os, "fork") and all(map(placeholders_safe, _table_bytes(spec.strings))):
            parts = _parallel_parts(spec, type_tags)
        else:
            parts = HeaderWriter(spec, type_tags).run()
    except RecursionError:
        # Ordering is a depth-first walk like libbpf's; real BTF stays under a
        # hundred levels, so this depth means a cycle through typedefs/modifiers.
        raise BtfError("type graph nests too deep to order (cyclic BTF?)") from None
    finally:
        sys.setrecursionlimit(limit)
        if gc_was_on:
            gc.enable()
    # In pieces of a few hundred kB: one 4 MB string (and its UTF-8 copy)
    # is fresh memory the kernel must fault in page by page, where pieces
    # reuse the same few pages (3 ms of a dump on a VM).
    for at in range(0, len(parts), _WRITE_PARTS):
        out.write("".join(parts[at:at + _WRITE_PARTS]))


def header(spec: Spec, type_tags: bool = False, jobs: int = 1) -> str:
    """The whole ``vmlinux.h`` as one string."""
    buf = io.StringIO()
    write_header(spec, buf, type_tags, jobs)
    return buf.getvalue()
