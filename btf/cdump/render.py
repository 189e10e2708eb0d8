"""The C text of each plan item, as libbpf's btf_dump prints it.

The declaration rules are :mod:`btf.cformat`'s (``btf_dump_emit_type_decl``
in libbpf); the difference is that here they are keyed by type id and
memoised, and names come from a :class:`btf.cdump.names.Namer` in the order
the text is made.
"""

from __future__ import annotations

from itertools import repeat

from ..errors import BtfError
from ..layout import aligns_itself, padding_fields
from .columns import (ARRAY, CONST, ENUM, ENUM64, FLOAT, FUNC_PROTO, FWD, INT, MODS, PTR, RESTRICT, STRUCT,
                      TYPE_TAG, TYPEDEF, UNION, VOLATILE)
from .names import GNUC_VA_LIST
from .plan import ENUM_DEF, STRUCT_DEF, STRUCT_FWD, TYPEDEF_DEF

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .columns import Columns
    from .names import Namer
    from .sizes import Sizes

_QUAL_WORD = {VOLATILE: "volatile", CONST: "const", RESTRICT: "restrict"}
_MAX_INDENT = 13  # libbpf's indent string is 13 tabs long
_INDENT = ["\n" + "\t" * i for i in range(_MAX_INDENT + 1)]  # a new line at each level


class Renderer:
    """Text for plan items (:meth:`render`), made in the header's order."""

    def __init__(self, cols: Columns, sizes: Sizes, namer: Namer, type_tags: bool = False) -> None:
        """``type_tags`` adds ``btf_type_tag`` attributes, which bpftool 7.1 leaves out."""
        self.cols = cols
        self.sizes = sizes
        self.namer = namer
        self.type_tags = type_tags
        self.strings = cols.strings
        self._inline_bodies = 0   # counts anonymous bodies printed inside declarations
        # declarations by type id, as the text around the name (see decl);
        # a list, read once per member, and a dict for bare ones
        self._decl_cache: list[tuple[str, str] | None] = [None] * cols.n
        self._bare_cache: dict[int, str] = {}
        self.struct_def = self._struct_renderer()

    def render(self, item: int) -> str:
        """One planned item's C text, its ``;`` and blank line included."""
        op, type_id = item & 7, item >> 3
        if op == STRUCT_DEF:
            return self.struct_def(type_id, 0) + ";\n\n"
        if op == TYPEDEF_DEF:
            return self.typedef_def(type_id, 0) + ";\n\n"
        if op == ENUM_DEF:
            return self.enum_def(type_id, 0) + ";\n\n"
        if op == STRUCT_FWD:
            return self.struct_fwd(type_id) + ";\n\n"
        return self.fwd_def(type_id) + ";\n\n"

    # -- definitions --------------------------------------------------------

    def struct_fwd(self, type_id: int) -> str:
        keyword = "struct" if self.cols.kinds[type_id] == STRUCT else "union"
        name = self.namer.type_name(type_id)
        return f"{keyword} {name}" if name else keyword

    def fwd_def(self, type_id: int) -> str:
        keyword = "union" if self.cols.infos[type_id] >> 31 else "struct"
        return f"{keyword} {self.namer.type_name(type_id)}"

    def typedef_def(self, type_id: int, lvl: int) -> str:
        # libbpf names a typedef before printing the type it aliases
        name = self.namer.ident_name(type_id)
        target = self.cols.st[type_id]
        if target == 0 and name == "__gnuc_va_list":
            return GNUC_VA_LIST  # old gcc's typedef to void: libbpf writes a valid one instead
        return "typedef " + self.decl(target, name, lvl)

    def enum_def(self, type_id: int, lvl: int) -> str:
        """An enum with its constants (an anonymous enum is printed again at
        each use, inside a declaration)."""
        cols = self.cols
        name = self.namer.type_name(type_id)
        head = f"enum {name}" if name else "enum"
        vlen = cols.infos[type_id] & 0xFFFF
        if not vlen:
            return head
        parts = [head, " {"]
        prefix = "\n" + "\t" * min(lvl + 1, _MAX_INDENT)
        strings = self.strings
        p = cols.offsets[type_id] + 3
        w = cols.words
        signed = cols.infos[type_id] >> 31
        # columns sliced in C, and one comprehension over them: 22k
        # constants in vmlinux
        if cols.kinds[type_id] == ENUM:
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
        names = self.namer.enumerators(names)
        parts.extend([f"{prefix}{name} = {v}{suffix}" for name, v in zip(names, values)])
        parts.append("\n" + "\t" * min(lvl, _MAX_INDENT) + "}")
        return "".join(parts)

    def _struct_renderer(self) -> Callable[[int, int], str]:
        """:attr:`struct_def`, as a closure over the memos it reads: it runs
        for 11k records, and their set-up was a fifth of the time of small
        ones."""
        cols, sizes = self.cols, self.sizes
        kinds, st, strings, ptr_size = cols.kinds, cols.st, self.strings, cols.ptr_size
        alignof, sizeof, decl = sizes.alignof, sizes.sizeof, self.decl
        is_packed, member_columns, padding = sizes.is_packed, sizes.member_columns, self._padding
        decl_cache, size_cache, align_cache = self._decl_cache, sizes.size_cache, sizes.align_cache
        packed_cache, members_cache = sizes.packed_cache, sizes.members_cache
        namer = self.namer

        def struct_def(type_id: int, lvl: int) -> str:
            """A struct or union with its body, members indented to ``lvl + 1``.

            A struct not laid out yet (most: bodies come in id order, inner
            ones first) is laid out by its own body's loop, which reads every
            member's alignment anyway, instead of a loop of its own first
            (libbpf decides packing first).  The body is made as unpacked,
            and made again in the rare case that the layout says packed."""
            if kinds[type_id] != STRUCT:
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
            :meth:`Sizes._record_layout` finds it (left to that when a
            member has no alignment)."""
            name = namer.type_name(type_id)
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
        for pad_type, bits in padding_fields(cur_off, next_off, next_align, in_bitfield, self.cols.ptr_size):
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
        cols = self.cols
        if not cols.names_off[t]:
            return None
        k = cols.kinds[t]
        if k == STRUCT or k == UNION:
            return self.struct_fwd(t)
        if k == TYPEDEF:
            return self.namer.ident_name(t)
        if k == INT or k == FLOAT:
            return cols.name_of(t)
        if k == ENUM or k == ENUM64:
            return "enum " + self.namer.type_name(t)
        if k == FWD:
            return self.fwd_def(t)
        return None

    def _simple_prefix(self, type_id: int) -> str | None:
        """The text before a name for the two commonest declarations,
        ``T name`` and ``T *name`` with T named; None for anything else."""
        if self.cols.kinds[type_id] == PTR:
            base = self._base_name(self.cols.st[type_id])
            return None if base is None else base + " *"
        base = self._base_name(type_id)
        return None if base is None else base + " "

    def _decl_text(self, type_id: int, fname: str, lvl: int) -> str:
        cols = self.cols
        kinds, st = cols.kinds, cols.st
        stack: list[int] = []
        t = type_id
        for _ in range(1000):
            stack.append(t)
            if t == 0:
                break
            k = kinds[t]
            if k == PTR or k in MODS or k == FUNC_PROTO:
                t = st[t]
            elif k == ARRAY:
                t = cols.array_elem(t)
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
        kinds = self.cols.kinds
        while stack:
            word = _QUAL_WORD.get(kinds[stack[-1]])
            if word is None:
                return
            out.append(word + " ")
            stack.pop()

    def _drop_mods(self, stack: list[int]) -> None:
        kinds = self.cols.kinds
        while stack and kinds[stack[-1]] in MODS:
            stack.pop()

    def _chain(self, out: list[str], stack: list[int], fname: str, lvl: int) -> None:
        cols = self.cols
        kinds = cols.kinds
        last_was_ptr = True
        while stack:
            t = stack.pop()
            if t == 0:
                self._mods(out, stack)
                out.append("void")
                last_was_ptr = False
                continue
            k = kinds[t]
            if k == PTR:
                out.append("*" if last_was_ptr else " *")
            elif k == TYPEDEF:
                self._mods(out, stack)
                out.append(self.namer.ident_name(t))
            elif k == STRUCT or k == UNION:
                self._mods(out, stack)
                if cols.names_off[t]:
                    out.append(self.struct_fwd(t))
                else:
                    self._inline_bodies += 1
                    out.append(self.struct_def(t, lvl))
            elif k == INT or k == FLOAT:
                self._mods(out, stack)
                out.append(cols.name_of(t))
            elif k in _QUAL_WORD:
                out.append(" " + _QUAL_WORD[k])
            elif k == ENUM or k == ENUM64:
                self._mods(out, stack)
                if cols.names_off[t]:
                    out.append("enum " + self.namer.type_name(t))
                else:
                    self._inline_bodies += 1
                    out.append(self.enum_def(t, lvl))
            elif k == FWD:
                self._mods(out, stack)
                out.append(self.fwd_def(t))
            elif k == TYPE_TAG:
                self._mods(out, stack)
                if self.type_tags:
                    out.append(f' __attribute__((btf_type_tag("{cols.name_of(t)}")))')
            elif k == ARRAY:
                self._drop_mods(stack)
                nelems = cols.array_len(t)
                if not stack:
                    if fname and not last_was_ptr:
                        out.append(" ")
                    out.append(f"{fname}[{nelems}]")
                    return
                multidim = kinds[stack[-1]] == ARRAY
                if fname and not last_was_ptr:
                    out.append(" ")
                if not multidim:
                    out.append("(")
                self._chain(out, stack, fname, lvl)
                if not multidim:
                    out.append(")")
                out.append(f"[{nelems}]")
                return
            elif k == FUNC_PROTO:
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
            last_was_ptr = k == PTR
        if fname and not last_was_ptr:
            out.append(" ")
        out.append(fname)

    def _params(self, proto_id: int, lvl: int) -> str:
        params = self.cols.params(proto_id)
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
