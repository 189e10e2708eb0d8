"""Render BTF types as C: declarations, and struct/union/enum bodies.

The rules follow libbpf's btf_dump (what bpftool and bpftrace print), so our
output can be compared with theirs line for line.  Naming is pluggable: the
``vmlinux.h`` generator gives duplicate names ``___N`` suffixes, listings use
names as they are.
"""

from __future__ import annotations

from . import types as T
from .errors import BtfError
from .kinds import Kind
from .layout import MAX_CHAIN, alignof, is_packed, padding_fields, sizeof

INDENT = "\t"
# Members and parameters one top-level call may print.  vmlinux needs at
# most ~1200 (security_list_options); a crafted DAG of anonymous types
# printed inline would need 2**depth.
MAX_WORK = 10_000
# The widest hole we fill with ``long: 64;`` lines (bad BTF can claim 4 GiB).

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Callable

    # name_for(type) -> the identifier to print for a named type.
    Namer = Callable[[T.Type], str]


def _plain_name(t: T.Type) -> str:
    return t.name


class CFormatter:
    """Formats types as C.  One instance can be reused for many types."""

    def __init__(self, name_for: Namer = _plain_name, enum_value_name: Callable[[str], str] | None = None,
                 type_tags: bool = True, pointer_size: int = 8) -> None:
        self.name_for = name_for
        self.enum_value_name = enum_value_name or (lambda n: n)
        self.type_tags = type_tags
        self.pointer_size = pointer_size
        # Ids of the prototypes and anonymous bodies being printed: C cannot
        # write one inside itself, so meeting one again means bad BTF.
        self._active: set[int] = set()
        self._work = 0
        self._aligns: dict[int, int] = {}   # alignof memo for one top-level call

    # -- declarations ----------------------------------------------------

    def declaration(self, t: T.Type, name: str = "", lvl: int = 0) -> str:
        """``t`` declared as ``name``: ``struct file *file``, ``char comm[16]``,
        ``int (*fn)(void *)``.  With no name, the bare type: ``struct file *``."""
        out: list[str] = []
        if not self._active:
            self._work = 0
            self._aligns = {}
        self._emit_decl(out, t, name, lvl)
        return "".join(out)

    def type_name(self, t: T.Type) -> str:
        return self.declaration(t, "")

    def _emit_decl(self, out: list[str], t: T.Type, fname: str, lvl: int) -> None:
        stack: list[T.Type] = []
        for _ in range(MAX_CHAIN):
            stack.append(t)
            k = t.kind
            if k in (Kind.PTR, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG, Kind.ARRAY):
                t = t.type  # type: ignore[attr-defined]
            elif k == Kind.FUNC_PROTO:
                t = t.return_type  # type: ignore[attr-defined]
            elif k in (Kind.UNKN, Kind.INT, Kind.ENUM, Kind.ENUM64, Kind.FWD, Kind.STRUCT,
                       Kind.UNION, Kind.TYPEDEF, Kind.FLOAT):
                break
            else:
                raise BtfError(f"type {t.id}: {k.name} cannot appear in a declaration")
        else:
            raise BtfError(f"type {t.id}: declaration chain longer than {MAX_CHAIN} (cycle?)")
        self._emit_chain(out, stack, fname, lvl)

    @staticmethod
    def _emit_mods(out: list[str], stack: list[T.Type]) -> None:
        """Qualifiers right above a base type print before it: ``const char``."""
        while stack:
            k = stack[-1].kind
            if k == Kind.VOLATILE:
                out.append("volatile ")
            elif k == Kind.CONST:
                out.append("const ")
            elif k == Kind.RESTRICT:
                out.append("restrict ")
            else:
                return
            stack.pop()

    @staticmethod
    def _drop_mods(stack: list[T.Type]) -> None:
        while stack and stack[-1].kind in (Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG):
            stack.pop()

    @staticmethod
    def _emit_name(out: list[str], fname: str, last_was_ptr: bool) -> None:
        if fname and not last_was_ptr:
            out.append(" ")
        out.append(fname)

    def _emit_chain(self, out: list[str], stack: list[T.Type], fname: str, lvl: int) -> None:
        last_was_ptr = True
        while stack:
            t = stack.pop()
            k = t.kind
            if k == Kind.UNKN:
                self._emit_mods(out, stack)
                out.append("void")
            elif k in (Kind.INT, Kind.FLOAT):
                self._emit_mods(out, stack)
                out.append(t.name)
            elif k in (Kind.STRUCT, Kind.UNION):
                self._emit_mods(out, stack)
                if not t.name:
                    self._emit_composite_body(out, t, lvl)  # type: ignore[arg-type]
                else:
                    out.append(("struct " if k == Kind.STRUCT else "union ") + self.name_for(t))
            elif k in (Kind.ENUM, Kind.ENUM64):
                self._emit_mods(out, stack)
                if not t.name:
                    self._emit_enum_body(out, t, lvl)  # type: ignore[arg-type]
                else:
                    out.append("enum " + self.name_for(t))
            elif k == Kind.FWD:
                self._emit_mods(out, stack)
                out.append(("union " if t.is_union else "struct ") + self.name_for(t))  # type: ignore[attr-defined]
            elif k == Kind.TYPEDEF:
                self._emit_mods(out, stack)
                out.append(self.name_for(t))
            elif k == Kind.PTR:
                out.append("*" if last_was_ptr else " *")
            elif k == Kind.VOLATILE:
                out.append(" volatile")
            elif k == Kind.CONST:
                out.append(" const")
            elif k == Kind.RESTRICT:
                out.append(" restrict")
            elif k == Kind.TYPE_TAG:
                self._emit_mods(out, stack)
                if self.type_tags:
                    out.append(f' __attribute__((btf_type_tag("{t.name}")))')
            elif k == Kind.ARRAY:
                self._drop_mods(stack)
                nelems = t.nelems  # type: ignore[attr-defined]
                if not stack:
                    self._emit_name(out, fname, last_was_ptr)
                    out.append(f"[{nelems}]")
                    return
                multidim = stack[-1].kind == Kind.ARRAY
                if fname and not last_was_ptr:
                    out.append(" ")
                if not multidim:
                    out.append("(")
                self._emit_chain(out, stack, fname, lvl)
                if not multidim:
                    out.append(")")
                out.append(f"[{nelems}]")
                return
            elif k == Kind.FUNC_PROTO:
                self._drop_mods(stack)
                if stack:
                    out.append(" (")
                    self._emit_chain(out, stack, fname, lvl)
                    out.append(")")
                else:
                    self._emit_name(out, fname, last_was_ptr)
                out.append(self.params(t))  # type: ignore[arg-type]
                return
            last_was_ptr = k == Kind.PTR
        self._emit_name(out, fname, last_was_ptr)

    def params(self, proto: T.FuncProto, lvl: int = 0) -> str:
        """``(int a, char *b)``; ``(void)`` for none; ``...`` for varargs."""
        ps = proto.params
        if not ps or (len(ps) == 1 and ps[0].type_id == 0):
            return "(void)"
        self._enter(proto)
        try:
            parts = []
            for i, p in enumerate(ps):
                if i == len(ps) - 1 and p.type_id == 0:
                    parts.append("...")
                    break
                parts.append(self.declaration(p.type, p.name, lvl))
        finally:
            self._active.discard(proto.id)
        return "(" + ", ".join(parts) + ")"

    def _enter(self, t: T.Type) -> None:
        if t.id in self._active:
            raise BtfError(f"type {t.id}: {t.kind.name} contains itself")
        self._work += 1 + len(getattr(t, "params", None) or getattr(t, "members", ()))
        if self._work > MAX_WORK:
            raise BtfError(f"type {t.id}: more than {MAX_WORK} members and parameters to print")
        self._active.add(t.id)

    # -- bodies ----------------------------------------------------------

    def definition(self, t: T.Type) -> str:
        """A whole top-level definition, without the trailing ``;``:
        ``struct dentry {...}``, ``enum pid_type {...}``, ``typedef int pid_t``."""
        out: list[str] = []
        if not self._active:
            self._work = 0
            self._aligns = {}
        k = t.kind
        if k in (Kind.STRUCT, Kind.UNION):
            self._emit_composite_body(out, t, 0)  # type: ignore[arg-type]
        elif k in (Kind.ENUM, Kind.ENUM64):
            self._emit_enum_body(out, t, 0)  # type: ignore[arg-type]
        elif k == Kind.TYPEDEF:
            out.append("typedef ")
            self._emit_decl(out, t.type, self.name_for(t), 0)  # type: ignore[attr-defined]
        elif k == Kind.FWD:
            out.append(("union " if t.is_union else "struct ") + self.name_for(t))  # type: ignore[attr-defined]
        elif k == Kind.FUNC:
            self._emit_decl(out, t.type, self.name_for(t), 0)  # type: ignore[attr-defined]
        elif k == Kind.VAR:
            self._emit_decl(out, t.type, self.name_for(t), 0)  # type: ignore[attr-defined]
        else:
            self._emit_decl(out, t, "", 0)
        return "".join(out)

    def _emit_composite_body(self, out: list[str], t: T.Composite, lvl: int) -> None:
        if lvl > MAX_CHAIN:
            raise BtfError(f"type {t.id}: anonymous types nest deeper than {MAX_CHAIN} (cycle?)")
        self._enter(t)
        try:
            self._emit_composite_members(out, t, lvl)
        finally:
            self._active.discard(t.id)

    def _emit_composite_members(self, out: list[str], t: T.Composite, lvl: int) -> None:
        is_struct = t.kind == Kind.STRUCT
        packed = is_struct and is_packed(t, self._aligns)
        align = alignof(t, self._aligns)
        keyword = "struct" if is_struct else "union"
        out.append(f"{keyword} {self.name_for(t)} {{" if t.name else f"{keyword} {{")
        off = 0
        prev_bitfield = False
        inner = INDENT * (lvl + 1)
        for m in t.members:
            m_sz = m.bitfield_size
            m_off = m.bit_offset
            m_align = 1 if packed else alignof(m.type, self._aligns)
            in_bitfield = prev_bitfield and m_sz != 0
            self._emit_padding(out, off, m_off, m_align, in_bitfield, lvl + 1)
            out.append("\n" + inner)
            self._emit_decl(out, m.type, m.name, lvl + 1)
            if m_sz:
                out.append(f": {m_sz}")
                off = m_off + m_sz
                prev_bitfield = True
            else:
                off = m_off + max(0, sizeof(m.type)) * 8
                prev_bitfield = False
            out.append(";")
        if is_struct:
            self._emit_padding(out, off, t.size * 8, align, False, lvl + 1)
        if t.members or t.size:
            out.append("\n" + INDENT * lvl + "}")
        else:
            out.append("}")
        if packed:
            out.append(" __attribute__((packed))")

    def _emit_padding(self, out: list[str], cur_off: int, next_off: int, next_align: int,
                      in_bitfield: bool, lvl: int) -> None:
        """Explicit ``long: 64;``-style padding where C's own alignment would
        not put the next member at its BTF offset (libbpf's rules)."""
        prefix = "\n" + INDENT * lvl
        for pad_type, bits in padding_fields(cur_off, next_off, next_align, in_bitfield, self.pointer_size):
            out.append(f"{prefix}{pad_type}: {bits};")

    def _emit_enum_body(self, out: list[str], t: T.Enum, lvl: int) -> None:
        out.append(f"enum {self.name_for(t)}" if t.name else "enum")
        if not t.values:
            return
        out.append(" {")
        inner = INDENT * (lvl + 1)
        is64 = t.kind == Kind.ENUM64
        for v in t.values:
            name = self.enum_value_name(v.name)
            if is64:
                suffix = "LL" if t.signed else "ULL"
                out.append(f"\n{inner}{name} = {v.value}{suffix},")
            else:
                out.append(f"\n{inner}{name} = {v.value},")
        out.append("\n" + INDENT * lvl + "}")


def declaration(t: T.Type, name: str = "") -> str:
    """``t`` declared as ``name`` with names as they are in the BTF."""
    return CFormatter().declaration(t, name)


def definition(t: T.Type) -> str:
    """The C body of a struct, union, enum or typedef, ending with ``;``."""
    return CFormatter().definition(t) + ";"
