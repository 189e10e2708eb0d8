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

import io
import sys
from operator import itemgetter
from typing import TYPE_CHECKING, TextIO

from . import types as T
from .errors import BtfError
from .kinds import Kind

if TYPE_CHECKING:
    from .spec import Spec

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
_PAD_TYPES_TAIL = (("int", 32), ("short", 16), ("char", 8))


def _flat_words(spec: Spec) -> tuple[list, list]:
    """All type words of a spec and its bases, and each id's record offset.

    Index 0 of the offsets stands for void.  Split BTF continues the base's
    ids, so the base's words come first.
    """
    chain = []
    s: Spec | None = spec
    while s is not None:
        chain.append(s)
        s = s.base
    words: list[int] = []
    offsets: list[int] = [0]
    for s in reversed(chain):
        shift = len(words)
        w = s._words  # noqa: SLF001 - same package, the raw index is the point
        offs = s._offsets  # noqa: SLF001
        words.extend(w)
        offsets.extend(offs if shift == 0 else [o + shift for o in offs])
    return words, offsets


class Namer:
    """Unique C names, libbpf's way: one counter per namespace.

    Struct, union and enum tags share one namespace; typedefs and enum
    constants share the other.  A name is fixed the first time it is asked
    for, so the suffix follows the order in which the header mentions types.
    Forward declarations and empty enums keep their names as they are (they
    may stand for a definition printed elsewhere).
    """

    def __init__(self, name_of: dict[int, str], kinds: list[int], vlens: list[int]) -> None:
        self._name_of = name_of
        self._kinds = kinds
        self._vlens = vlens
        self.type_counts: dict[str, int] = {}
        self.ident_counts: dict[str, int] = {}
        self._resolved: dict[int, str] = {}

    def _resolve(self, type_id: int, counts: dict[str, int]) -> str:
        name = self._name_of(type_id)
        if not name:
            return ""
        k = self._kinds[type_id]
        if k == _FWD or (k == _ENUM and self._vlens[type_id] == 0):
            self._resolved[type_id] = name
            return name
        n = counts.get(name, 0) + 1
        counts[name] = n
        unique = name if n == 1 else f"{name}___{n}"
        self._resolved[type_id] = unique
        return unique

    def type_name(self, type_id: int) -> str:
        """A struct, union, enum or forward declaration's tag."""
        got = self._resolved.get(type_id)
        return got if got is not None else self._resolve(type_id, self.type_counts)

    def ident_name(self, type_id: int) -> str:
        """A typedef's name."""
        got = self._resolved.get(type_id)
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


class HeaderWriter:
    """One pass of libbpf's btf_dump over a whole spec."""

    def __init__(self, spec: Spec, type_tags: bool = False) -> None:
        self.spec = spec
        self.type_tags = type_tags
        words, offsets = _flat_words(spec)
        self.words = words
        self.offsets = offsets
        n = len(offsets)
        self.n = n
        get = itemgetter(*offsets[1:]) if n > 2 else (lambda w: tuple(w[o] for o in offsets[1:]))
        names_off = (0,) + get(words)
        infos = (0,) + get(words[1:])
        self.st = (0,) + get(words[2:])          # size or referenced type
        self.kinds = kinds = [(i >> 24) & 0x1F for i in infos]
        self.vlens = [i & 0xFFFF for i in infos]
        self.kflags = [i >> 31 for i in infos]
        self.names_off = names_off
        lookup = spec.strings.lookup
        name_cache: dict[int, str] = {0: ""}

        def name_of(type_id: int) -> str:
            off = names_off[type_id]
            got = name_cache.get(off)
            if got is None:
                got = name_cache[off] = lookup(off)
            return got

        self.name_of = name_of
        self.str_at = lookup
        self.namer = Namer(name_of, kinds, self.vlens)
        self.ptr_size = self._pointer_size()
        self.order_state = bytearray(n)
        self.emit_state = bytearray(n)
        self.fwd_emitted = bytearray(n)
        self.order_state[0] = _DONE
        self.emit_state[0] = _DONE
        self.referenced = self._referenced()
        self._size_cache: dict[int, int] = {}
        self._align_cache: dict[int, int] = {}
        self._packed_cache: dict[int, bool] = {}
        self._decl_cache: dict[int, tuple[str, str]] = {}
        self._bare_cache: dict[int, str] = {}
        self._inline_bodies = 0   # counts anonymous bodies printed inside declarations
        self.out: list[str] = []
        self.queue: list[int] = []

    # -- facts about types ------------------------------------------------

    def _pointer_size(self) -> int:
        """libbpf guesses it from the size of ``long``; 8 when there is none."""
        longs = {"long", "long int", "unsigned long", "long unsigned int"}
        for type_id in range(1, self.n):
            if self.kinds[type_id] == _INT and self.name_of(type_id) in longs:
                return self.st[type_id]
        return 8

    def _referenced(self) -> set[int]:
        """Every id some other type refers to (decides which anonymous enums
        are top-level constants and which are printed inline)."""
        words, offsets, kinds, vlens, st = self.words, self.offsets, self.kinds, self.vlens, self.st
        refs: set[int] = set()
        add, update = refs.add, refs.update
        single = {_VOLATILE, _CONST, _RESTRICT, _PTR, _TYPEDEF, _FUNC, _VAR, _DECL_TAG, _TYPE_TAG}
        for type_id in range(1, self.n):
            k = kinds[type_id]
            if k in single:
                add(st[type_id])
            elif k == _STRUCT or k == _UNION or k == _DATASEC:
                p = offsets[type_id] + 3 + (k == _DATASEC) * 0
                if k == _DATASEC:
                    update(words[p:p + 3 * vlens[type_id]:3])
                else:
                    update(words[p + 1:p + 3 * vlens[type_id]:3])
            elif k == _FUNC_PROTO:
                p = offsets[type_id] + 3
                update(words[p + 1:p + 2 * vlens[type_id]:2])
            elif k == _ARRAY:
                p = offsets[type_id] + 3
                add(words[p])
                add(words[p + 1])
        return refs

    def members(self, type_id: int) -> list[tuple[int, int, int, int]]:
        """(name offset, type, bit offset, bitfield size) of each member."""
        p = self.offsets[type_id] + 3
        w = self.words[p:p + 3 * self.vlens[type_id]]
        if self.kflags[type_id]:
            return [(w[i], w[i + 1], w[i + 2] & 0xFFFFFF, w[i + 2] >> 24) for i in range(0, len(w), 3)]
        return [(w[i], w[i + 1], w[i + 2], 0) for i in range(0, len(w), 3)]

    def member_types(self, type_id: int) -> list[int]:
        p = self.offsets[type_id] + 3
        return self.words[p + 1:p + 3 * self.vlens[type_id]:3]

    def params(self, type_id: int) -> list[tuple[int, int]]:
        """(name offset, type) of each parameter of a FUNC_PROTO."""
        p = self.offsets[type_id] + 3
        w = self.words[p:p + 2 * self.vlens[type_id]]
        return list(zip(w[0::2], w[1::2]))

    def param_types(self, type_id: int) -> list[int]:
        p = self.offsets[type_id] + 3
        return self.words[p + 1:p + 2 * self.vlens[type_id]:2]

    def array_elem(self, type_id: int) -> int:
        return self.words[self.offsets[type_id] + 3]

    def sizeof(self, type_id: int) -> int:
        """libbpf's btf__resolve_size, with 0 for what has no size."""
        got = self._size_cache.get(type_id)
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
        got = self._align_cache.get(type_id)
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
            align = 1
            for _, mtype, moff, mbits in self.members(type_id):
                a = self.alignof(mtype, depth + 1)
                if a <= 0:
                    align = a
                    break
                if a > align:
                    align = a
                if not mbits and moff % (8 * a):
                    align = 1
                    break
            else:
                if self.st[type_id] % align:
                    align = 1
        else:
            align = 0
        self._align_cache[type_id] = align
        return align

    def is_packed(self, type_id: int) -> bool:
        """Whether a struct's BTF layout needs ``__attribute__((packed))``."""
        if self.kinds[type_id] != _STRUCT:
            return False
        best = 1
        for _, mtype, moff, mbits in self.members(type_id):
            a = self.alignof(mtype)
            if a and not mbits and moff % (8 * a):
                return True
            if a > best:
                best = a
        return self.st[type_id] % best != 0

    # -- ordering ---------------------------------------------------------

    def order(self, type_id: int, through_ptr: bool) -> int:
        """Queue the named definitions ``type_id`` needs, dependencies first.

        Returns 1 when the link to it is strong (it must be fully defined
        before its user), 0 when a forward declaration would do.
        """
        state = self.order_state
        s = state[type_id]
        if s == _DONE:
            return 1
        k = self.kinds[type_id]
        named = self.names_off[type_id] != 0
        if s == _DOING:
            if (k == _STRUCT or k == _UNION) and through_ptr and named:
                return 0
            raise BtfError(f"unsatisfiable type cycle through type {type_id}")
        if k == _PTR:
            strong = self.order(self.st[type_id], True)
            state[type_id] = _DONE
            return strong
        if k == _STRUCT or k == _UNION:
            if through_ptr and named:
                return 0
            state[type_id] = _DOING
            order = self.order
            for mtype in self.member_types(type_id):
                order(mtype, False)
            if named:
                self.queue.append(type_id)
            state[type_id] = _DONE
            return 1
        if k == _TYPEDEF:
            strong = self.order(self.st[type_id], through_ptr)
            if through_ptr and not strong:
                return 0
            self.queue.append(type_id)
            state[type_id] = _DONE
            return 1
        if k in _MODS:
            return self.order(self.st[type_id], through_ptr)
        if k == _ARRAY:
            return self.order(self.array_elem(type_id), False)
        if k == _ENUM or k == _ENUM64 or k == _FWD:
            if named or type_id not in self.referenced:
                self.queue.append(type_id)
            state[type_id] = _DONE
            return 1
        if k == _FUNC_PROTO:
            strong = self.order(self.st[type_id], through_ptr) > 0
            for ptype in self.param_types(type_id):
                if self.order(ptype, through_ptr):
                    strong = True
            return int(strong)
        if k == _INT or k == _FLOAT:
            state[type_id] = _DONE
            return 0
        if k in _NOT_DUMPED:
            state[type_id] = _DONE
            return 0
        raise BtfError(f"type {type_id}: unknown kind {k}")

    # -- emitting ---------------------------------------------------------

    def emit(self, type_id: int, cont_id: int) -> None:
        """Print ``type_id``'s definition, or what its user needs of it.

        ``cont_id`` is the struct being defined (0 at top level): a struct
        that refers to itself needs no forward declaration.
        """
        es = self.emit_state
        s = es[type_id]
        if s == _DONE:
            return
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
            self.emit(self.st[type_id], cont_id)
        elif k == _STRUCT or k == _UNION:
            es[type_id] = _DOING
            named = self.names_off[type_id] != 0
            if cont_id == 0 or not named:
                inner = type_id if named else cont_id
                emit = self.emit
                for mtype in self.member_types(type_id):
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
            self.emit(self.st[type_id], type_id)
            if not self.fwd_emitted[type_id] and not self._blacklisted(type_id):
                out.append(self.typedef_def(type_id, 0) + ";\n\n")
            es[type_id] = _DONE
        elif k == _ARRAY:
            self.emit(self.array_elem(type_id), cont_id)
        elif k == _ENUM or k == _ENUM64:
            if cont_id == 0:
                out.append(self.enum_def(type_id, 0) + ";\n\n")
            es[type_id] = _DONE
        elif k == _FWD:
            out.append(self.fwd_def(type_id) + ";\n\n")
            es[type_id] = _DONE
        elif k == _FUNC_PROTO:
            emit = self.emit
            emit(self.st[type_id], cont_id)
            for ptype in self.param_types(type_id):
                emit(ptype, cont_id)
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
        keyword = "union" if self.kflags[type_id] else "struct"
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
        vlen = self.vlens[type_id]
        if not vlen:
            return head
        parts = [head, " {"]
        prefix = "\n" + "\t" * min(lvl + 1, _MAX_INDENT)
        enumerator = self.namer.enumerator
        str_at = self.str_at
        p = self.offsets[type_id] + 3
        w = self.words
        signed = self.kflags[type_id]
        if self.kinds[type_id] == _ENUM:
            for q in range(p, p + 2 * vlen, 2):
                v = w[q + 1]
                if signed and v & 0x80000000:
                    v -= 1 << 32
                parts.append(f"{prefix}{enumerator(str_at(w[q]))} = {v},")
        else:
            suffix = "LL," if signed else "ULL,"
            for q in range(p, p + 3 * vlen, 3):
                v = w[q + 1] | (w[q + 2] << 32)
                if signed and v & (1 << 63):
                    v -= 1 << 64
                parts.append(f"{prefix}{enumerator(str_at(w[q]))} = {v}{suffix}")
        parts.append("\n" + "\t" * min(lvl, _MAX_INDENT) + "}")
        return "".join(parts)

    def struct_def(self, type_id: int, lvl: int) -> str:
        is_struct = self.kinds[type_id] == _STRUCT
        packed = is_struct and self.is_packed(type_id)
        name = self.namer.type_name(type_id)
        keyword = "struct" if is_struct else "union"
        parts = [f"{keyword} {name} {{" if name else f"{keyword} {{"]
        inner_lvl = lvl + 1
        prefix = "\n" + "\t" * min(inner_lvl, _MAX_INDENT)
        off = 0
        prev_bitfield = False
        str_at = self.str_at
        alignof, sizeof, decl = self.alignof, self.sizeof, self.decl
        members = self.members(type_id)
        for name_off, mtype, m_off, m_sz in members:
            in_bitfield = prev_bitfield and m_sz != 0
            if off < m_off:
                self._padding(parts, off, m_off, 1 if packed else alignof(mtype), in_bitfield, inner_lvl)
            if m_sz:
                parts.append(f"{prefix}{decl(mtype, str_at(name_off), inner_lvl)}: {m_sz};")
                off = m_off + m_sz
                prev_bitfield = True
            else:
                parts.append(f"{prefix}{decl(mtype, str_at(name_off), inner_lvl)};")
                off = m_off + sizeof(mtype) * 8
                prev_bitfield = False
        if is_struct and off < self.st[type_id] * 8:
            self._padding(parts, off, self.st[type_id] * 8, self.alignof(type_id), False, inner_lvl)
        if members or self.st[type_id]:
            parts.append("\n" + "\t" * min(lvl, _MAX_INDENT) + "}")
        else:
            parts.append("}")
        if packed:
            parts.append(" __attribute__((packed))")
        return "".join(parts)

    def _padding(self, out: list[str], cur_off: int, next_off: int, next_align: int,
                 in_bitfield: bool, lvl: int) -> None:
        """Explicit ``long: 64;``-style padding where the compiler's own
        alignment would not put the next member at its BTF offset."""
        if cur_off >= next_off:
            return
        prefix = "\n" + "\t" * min(lvl, _MAX_INDENT)
        pads = (("long", self.ptr_size * 8),) + _PAD_TYPES_TAIL
        pad_type, pad_bits = pads[-1]
        new_off = cur_off
        for pad_type, pad_bits in pads:
            new_off = -(-cur_off // pad_bits) * pad_bits
            if new_off <= next_off:
                break
        if cur_off < new_off <= next_off:
            if (in_bitfield
                    or (new_off == next_off and -(-cur_off // (next_align * 8)) * next_align * 8 != new_off)
                    or (new_off != next_off and next_off - new_off <= new_off - cur_off)):
                out.append(f"{prefix}{pad_type}: {new_off - cur_off if in_bitfield else 0};")
            cur_off = new_off
        while cur_off != next_off:
            bits = min(next_off - cur_off, pad_bits)
            if bits == pad_bits:
                out.append(f"{prefix}{pad_type}: {pad_bits};")
                cur_off += bits
                continue
            for small_type, small_bits in reversed(pads):
                if small_bits >= bits:
                    out.append(f"{prefix}{small_type}: {bits};")
                    cur_off += bits
                    break

    # -- declarations -----------------------------------------------------

    def decl(self, type_id: int, fname: str, lvl: int) -> str:
        """``type_id`` declared as ``fname`` (``struct file *f``, ``int (*cb)(void)``).

        A declaration without an anonymous body in it does not depend on
        the indent, so it is built once as the text around the name.
        """
        if fname:
            got = self._decl_cache.get(type_id)
            if got is not None:
                return got[0] + fname + got[1]
            before = self._inline_bodies
            text = self._decl_text(type_id, "\x00", lvl)
            if self._inline_bodies == before:
                left, _, right = text.partition("\x00")
                self._decl_cache[type_id] = (left, right)
                return left + fname + right
            return self._decl_text(type_id, fname, lvl) if "\x00" in fname else text.replace("\x00", fname, 1)
        got = self._bare_cache.get(type_id)
        if got is not None:
            return got
        before = self._inline_bodies
        text = self._decl_text(type_id, "", lvl)
        if self._inline_bodies == before:
            self._bare_cache[type_id] = text
        return text

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
            parts.append(self.decl(ptype, self.str_at(name_off), lvl))
        return "(" + ", ".join(parts) + ")"

    # -- the whole header -------------------------------------------------

    def run(self) -> list[str]:
        """Every type in id order, each after what it needs."""
        out = self.out
        out.append(HEADER_PROLOGUE)
        kinds = self.kinds
        queue = self.queue
        order, emit = self.order, self.emit
        for type_id in range(1, self.n):
            if kinds[type_id] in _NOT_DUMPED:
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
    try:
        parts = HeaderWriter(spec, type_tags).run()
    finally:
        sys.setrecursionlimit(limit)
    out.write("".join(parts))


def header(spec: Spec, type_tags: bool = False) -> str:
    """The whole ``vmlinux.h`` as one string."""
    buf = io.StringIO()
    write_header(spec, buf, type_tags)
    return buf.getvalue()
