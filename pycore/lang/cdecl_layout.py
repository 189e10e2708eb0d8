"""pycparser's tree of C declarations laid out as gcc lays it out on x86-64, written as split BTF.

The System V ABI's rules, as gcc applies them: a member is placed at the
next multiple of its alignment (1 in a ``packed`` struct or for a ``packed``
member, raised by ``aligned(N)``); a bitfield goes at the next free bit
unless it would straddle a unit of its declared type (a ``packed`` struct
lets it), a zero-width bitfield moves to the next unit of its type, and an
unnamed bitfield does not count for the struct's alignment; a struct's size
is its end rounded up to its alignment. An enum is ``unsigned int`` when its
values allow, else ``int``, else 8 bytes (``packed``: the smallest that fits).

Types are converted when first reached, so that a name used before its
definition (``struct node *next`` inside ``struct node``) refers to the
definition; a name defined nowhere in the text is the kernel's, by id.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from btf import Spec

__all__ = ["Layout", "DeclError", "SCRIPT"]

SCRIPT = "<script>"          # the script's own lines in the preprocessed text (#line directives)
_BUILTIN = "<builtin>"       # the prelude: GNU builtin types, and the kernel's names the text uses


class DeclError(Exception):
    """A declaration that cannot be read or laid out; ``line``/``col`` are the script's (0: in a header)."""

    def __init__(self, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col

# C's integer and floating types by gcc's names (as DWARF and BTF spell them): (size, signed, kind)
_INTS = {
    "char": (1, True), "signed char": (1, True), "unsigned char": (1, False),
    "short int": (2, True), "short unsigned int": (2, False), "int": (4, True), "unsigned int": (4, False),
    "long int": (8, True), "long unsigned int": (8, False), "long long int": (8, True),
    "long long unsigned int": (8, False), "_Bool": (1, False), "__int128": (16, True),
    "__int128 unsigned": (16, False),
}
_FLOATS = {"float": 4, "double": 8, "long double": 16, "_Float128": 16, "__float128": 16, "_Float64x": 16,
           "__float80": 16, "_Float64": 8, "_Float32x": 8, "_Float32": 4, "_Float16": 2}
_PRELUDE_INTS = {"__i128__": "__int128", "__u128__": "__int128 unsigned"}
_MAX_ALIGN = 16     # aligned with no argument: the largest alignment of x86-64's types


def _builtin_name(names: list[str]) -> str:
    """gcc's name for a list of specifier words (``unsigned long`` -> ``long unsigned int``)."""
    words = [("_Bool" if w == "bool" else w) for w in names]
    longs = words.count("long")
    unsigned = "unsigned" in words
    if "void" in words:
        return "void"
    if "_Bool" in words:
        return "_Bool"
    if "float" in words:
        return "float"
    if "double" in words:
        return "long double" if longs else "double"
    if "char" in words:
        return "unsigned char" if unsigned else "signed char" if "signed" in words else "char"
    if "short" in words:
        return "short unsigned int" if unsigned else "short int"
    base = {0: "int", 1: "long int", 2: "long long int"}.get(longs)
    if base is None:
        raise ValueError("long long long")
    if unsigned:
        return "unsigned int" if base == "int" else base.replace(" int", " unsigned int")
    return base


def _round(value: int, to: int) -> int:
    return -(-value // to) * to


class Layout:
    """Converts one translation unit; ids are reserved before a type's record is written, so records may
    refer to types defined later (cycles through pointers)."""

    def __init__(self, kernel: Spec, externs: dict[str, int]) -> None:
        from btf.writer import Writer

        self.kernel = kernel
        self.externs = externs           # kernel typedef names the text uses -> their ids
        self.w = Writer.split(kernel)
        self.first = self.w.first_id
        self.slots: list[tuple[str, tuple, dict] | None] = []
        self.size: dict[int, int] = {}
        self.align: dict[int, int] = {}
        self.tags: dict[tuple[str, str], Any] = {}       # ("struct", name) -> its first definition's node
        self.tag_ids: dict[tuple[str, str], int] = {}
        self.typedefs: dict[str, Any] = {}
        self.typedef_ids: dict[str, int] = {}
        self.done: dict[int, int] = {}                   # id(definition node) -> its type id
        self.enumerators: dict[str, int] = {}
        self.memo: dict[tuple, int] = {}                 # (kind, target) -> id: pointers, qualifiers, arrays...
        self.declared: list[int] = []                    # the script's own named types
        self.after: dict[int, list[Any]] = {}            # id(struct node) -> attributes written after its '}'

    # -- records ------------------------------------------------------------------------------

    def reserve(self) -> int:
        self.slots.append(None)
        return self.first + len(self.slots) - 1

    def put(self, tid: int, method: str, *args: Any, **kw: Any) -> int:
        self.slots[tid - self.first] = (method, args, kw)
        return tid

    def add(self, method: str, *args: Any, size: int | None = None, align: int | None = None, **kw: Any) -> int:
        tid = self.put(self.reserve(), method, *args, **kw)
        if size is not None:
            self.size[tid], self.align[tid] = size, align or 1
        return tid

    def sizes(self, node: Any, tid: int) -> tuple[int, int]:
        """(size, alignment) of a complete type; an error at ``node`` for an incomplete one."""
        if tid == 0:
            raise self.fail(node, "a member or array of type void")
        if tid in self.size:        # ours, and C's builtin types found in the kernel's BTF (__int128: 16)
            return self.size[tid], self.align[tid]
        if tid < self.first:
            from btf.kinds import Kind
            from btf.layout import alignof, sizeof, skip

            t = self.kernel.type(tid)
            if skip(t).kind in (Kind.FWD, Kind.FUNC_PROTO, Kind.UNKN) or (skip(t).kind in (Kind.STRUCT, Kind.UNION)
                                                                            and not skip(t).size and not skip(t).members):
                raise self.fail(node, f"incomplete type {_spelled(self.kernel, tid)} (the kernel's BTF has no body)")
            return sizeof(t), alignof(t)
        if tid not in self.size:
            slot = self.slots[tid - self.first]
            what = f"{'union' if slot[2].get('union') else 'struct'} {slot[1][0]}" if slot and slot[0] == "fwd" else ""
            name = getattr(node, "name", None)
            raise self.fail(node, f"{f'member {name!r}' if name else 'a member'} has incomplete type"
                            + (f" {what!r}: declared neither in the script nor in this kernel's BTF" if what else ""))
        return self.size[tid], self.align[tid]

    def fail(self, node: Any, message: str) -> DeclError:
        coord = getattr(node, "coord", None)
        if coord is not None and coord.file == SCRIPT:
            return DeclError(message, coord.line, coord.column or 1)
        return DeclError(message)

    # -- the translation unit -------------------------------------------------------------------

    def run(self, ast: Any) -> Spec | None:
        from pycparser import c_ast

        for node in ast.ext:
            if isinstance(node, c_ast.Typedef) and (node.name not in self.typedefs
                                                     or getattr(self.typedefs[node.name].coord, "file", "") == _BUILTIN):
                self.typedefs[node.name] = node      # the text's own typedef over the prelude's stand-in
            self._collect(node)
        for node in ast.ext:
            script = getattr(node.coord, "file", None) == SCRIPT
            try:
                self._top(node, script)
            except DeclError as e:
                if script:
                    if not e.line and node.coord is not None:
                        e.line, e.col = node.coord.line, node.coord.column or 1
                    raise
            except Exception as e:  # noqa: BLE001 - a header's odd C is passed over; the script's is one line
                if script:
                    raise self.fail(node, f"cannot lay out this declaration ({e})") from None
        if not self.slots:
            return None
        for tid in list(self.declared):       # (struct Req **)arg0 names pointers to them
            self.pointer(self.pointer(tid))
        for i, slot in enumerate(self.slots):
            if slot is None:     # a header's type whose conversion failed half-way
                self.w.int("", 1)
            else:
                method, args, kw = slot
                getattr(self.w, method)(*args, **kw)
        return self.w.spec(self.kernel, shadows=True)

    def _collect(self, node: Any) -> None:
        """Every struct, union and enum definition, nested ones too (their tags are the file's)."""
        from pycparser import c_ast

        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, (c_ast.Struct, c_ast.Union)) and n.decls is not None and n.name:
                self.tags.setdefault(("union" if isinstance(n, c_ast.Union) else "struct", n.name), n)
            elif isinstance(n, c_ast.Enum) and n.values is not None and n.name:
                self.tags.setdefault(("enum", n.name), n)
            elif isinstance(n, c_ast.AttributedType):      # struct S { ... } __attribute__((packed))
                self.after[id(n.type)] = _attr_items(n.attributes)
            stack.extend(c for _, c in n.children())

    def _top(self, node: Any, script: bool) -> None:
        from pycparser import c_ast

        if getattr(node.coord, "file", None) == _BUILTIN:
            return
        if isinstance(node, c_ast.Typedef):
            tid = self.typedef(node.name)
            if script:
                self.declared.append(tid)
            return
        if isinstance(node, c_ast.Decl):
            for n in _definitions(node):
                kind = "union" if isinstance(n, c_ast.Union) else "enum" if isinstance(n, c_ast.Enum) else "struct"
                if not n.name and kind == "enum":      # enum { SHUT_RD, ... }: its constants are names
                    self.enum(n, _attr_items(n.attributes))
                tid = self.tag(kind, n.name, n) if n.name else None
                if script and tid is not None:
                    self.declared.append(tid)
            if node.name and script and node.storage != ["extern"] and not isinstance(node.type, c_ast.FuncDecl):
                raise self.fail(node, f"{node.name!r}: a script declares types (struct, union, enum), "
                                      "not variables")

    # -- types --------------------------------------------------------------------------------

    def ctype(self, node: Any, attrs: list[Any] | None = None) -> int:
        """The BTF id of a pycparser type node."""
        from pycparser import c_ast

        if isinstance(node, c_ast.TypeDecl):
            return self.qualified(self.ctype(node.type), node.quals)
        if isinstance(node, c_ast.Typename):
            return self.qualified(self.ctype(node.type), node.quals)
        if isinstance(node, c_ast.PtrDecl):
            return self.qualified(self.pointer(self.ctype(node.type)), node.quals)
        if isinstance(node, c_ast.ArrayDecl):
            elem = self.ctype(node.type)
            esize, ealign = self.sizes(node, elem)
            n = 0 if node.dim is None else self.const(node.dim)
            if n < 0 or esize * n >= 1 << 32:
                raise self.fail(node, f"array of {n} elements: BTF holds sizes from 0 to 4 GiB")
            key = ("array", elem, n)
            if key not in self.memo:
                self.memo[key] = self.add("array", elem, self.index_type(), n, size=esize * n, align=ealign)
            return self.memo[key]
        if isinstance(node, c_ast.FuncDecl):
            return self.proto(node)
        if isinstance(node, c_ast.IdentifierType):
            return self.named(node, node.names)
        if isinstance(node, c_ast.AttributedType):
            return self.ctype(node.type, list(attrs or []) + list(_attr_items(node.attributes)))
        if isinstance(node, (c_ast.Struct, c_ast.Union)):
            kind = "union" if isinstance(node, c_ast.Union) else "struct"
            if node.decls is None:
                return self.tag(kind, node.name, None)
            return self.record(node, kind, list(attrs or []) + list(_attr_items(node.attributes)))
        if isinstance(node, c_ast.Enum):
            if node.values is None:
                return self.tag("enum", node.name, None)
            return self.enum(node, list(attrs or []) + list(_attr_items(node.attributes)))
        raise self.fail(node, f"unsupported C type ({type(node).__name__})")

    def qualified(self, tid: int, quals: list[str]) -> int:
        for q in ("volatile", "const"):
            if q in (quals or ()):
                key = (q, tid)
                if key not in self.memo:
                    self.memo[key] = self.add(q, tid)
                    if tid in self.size or tid < self.first:
                        self._copy_sizes(self.memo[key], tid)
                tid = self.memo[key]
        return tid

    def _copy_sizes(self, new: int, old: int) -> None:
        try:
            self.size[new], self.align[new] = self.sizes(None, old)
        except DeclError:
            pass

    def pointer(self, tid: int) -> int:
        key = ("ptr", tid)
        if key not in self.memo:
            self.memo[key] = self.add("ptr", tid, size=8, align=8)
        return self.memo[key]

    def index_type(self) -> int:
        return self.builtin("int")

    def proto(self, node: Any) -> int:
        from pycparser import c_ast

        ret = self.ctype(node.type)
        params: list[tuple[str, int]] = []
        varargs = False
        for p in (node.args.params if node.args is not None else []):
            if isinstance(p, c_ast.EllipsisParam):
                varargs = True
                continue
            if isinstance(p, c_ast.ID):      # K&R: int
                params.append((p.name, self.builtin("int")))
                continue
            t = self.ctype(p.type)
            if t == 0 and not isinstance(p.type, c_ast.PtrDecl):
                continue     # (void)
            params.append((getattr(p, "name", None) or "", t))
        return self.add("func_proto", ret, params, varargs)

    # -- names --------------------------------------------------------------------------------

    def named(self, node: Any, names: list[str]) -> int:
        if len(names) == 1 and names[0] not in ("int", "char", "short", "long", "signed", "unsigned", "float",
                                                "double", "void", "_Bool", "bool"):
            return self.typedef(names[0], node)
        try:
            name = _builtin_name(names)
        except ValueError:
            raise self.fail(node, f"'{' '.join(names)}' is not a C type") from None
        return 0 if name == "void" else self.builtin(name)

    def builtin(self, name: str) -> int:
        """C's own type of that name: the kernel's record if it has one of that name and size, else ours."""
        key = ("builtin", name)
        if key in self.memo:
            return self.memo[key]
        from btf.kinds import Kind

        if name in _INTS:
            size, signed = _INTS[name]
            kinds = (Kind.INT,)
        else:
            size, signed, kinds = _FLOATS[name], True, (Kind.FLOAT,)
        tid = next((i for i in self.kernel.ids_named(name, kinds) if self.kernel.type(i).size == size), 0)
        if tid:
            self.size[tid], self.align[tid] = size, min(size, 16)
        elif name in _INTS:
            tid = self.add("int", name, size, signed=signed and name != "_Bool", char="char" in name,
                           bool_=name == "_Bool", size=size, align=size)
        else:
            tid = self.add("float", name, size, size=size, align=size)
        self.memo[key] = tid
        return tid

    def typedef(self, name: str, node: Any = None) -> int:
        if name in self.typedef_ids:
            return self.typedef_ids[name]
        if name in _PRELUDE_INTS:
            return self.builtin(_PRELUDE_INTS[name])
        if name in _FLOATS:
            return self.builtin(name)
        if name == "__builtin_va_list":
            return self.va_list()
        t = self.typedefs.get(name)
        if name in self.externs and (t is None or getattr(t.coord, "file", None) == _BUILTIN):
            tid = self.typedef_ids[name] = self.externs[name]
            return tid
        if t is None or getattr(t.coord, "file", None) == _BUILTIN:
            raise self.fail(node, f"unknown type name {name!r}")
        tid = self.typedef_ids[name] = self.reserve()
        target = self.ctype(t.type)
        self.put(tid, "typedef", name, target)
        align = _aligned(_attr_items(getattr(t.type, "attributes", None)) + _attr_items(t.attributes))
        try:
            size, talign = self.sizes(t, target)
            self.size[tid], self.align[tid] = size, max(talign, align)
        except DeclError:
            pass      # a typedef of an incomplete type: fine until it is used by value
        return tid

    def va_list(self) -> int:
        """x86-64's ``__builtin_va_list``: ``struct __va_list_tag[1]``."""
        key = ("va_list",)
        if key not in self.memo:
            u, v = self.builtin("unsigned int"), self.pointer(0)
            tag = self.add("struct", "__va_list_tag", 24, [("gp_offset", u, 0), ("fp_offset", u, 32),
                                                           ("overflow_arg_area", v, 64), ("reg_save_area", v, 128)],
                           size=24, align=8)
            self.memo[key] = self.add("array", tag, self.index_type(), 1, size=24, align=8)
        return self.memo[key]

    def tag(self, kind: str, name: str, node: Any) -> int:
        """``struct NAME``: the text's definition (the first one), else the kernel's, else a forward declaration."""
        key = (kind, name)
        if key in self.tag_ids:
            return self.tag_ids[key]
        definition = self.tags.get(key)
        if definition is not None:
            if kind == "enum":
                return self.enum(definition, list(_attr_items(definition.attributes)))
            return self.record(definition, kind, list(_attr_items(definition.attributes)))
        from btf.kinds import Kind

        kinds = {"struct": (Kind.STRUCT,), "union": (Kind.UNION,), "enum": (Kind.ENUM, Kind.ENUM64)}[kind]
        ids = self.kernel.ids_named(name, kinds)
        if ids:
            tid = ids[0]
        elif kind == "enum":
            tid = self.add("enum", name, [], 4)
        else:
            tid = self.add("fwd", name, union=kind == "union")
        self.tag_ids[key] = tid
        return tid

    # -- structs, unions, enums ---------------------------------------------------------------

    def record(self, node: Any, kind: str, attrs: list[Any]) -> int:
        from pycparser import c_ast

        if id(node) in self.done:
            return self.done[id(node)]
        name = node.name or ""
        if name and (kind, name) in self.tag_ids:      # a second definition of the same tag: the first wins
            return self.tag_ids[(kind, name)]
        tid = self.reserve()
        self.done[id(node)] = tid
        if name:
            self.tag_ids[(kind, name)] = tid
        attrs = attrs + self.after.get(id(node), [])
        packed = any(_attr_name(a) == "packed" for a in attrs)
        union = kind == "union"
        members: list[tuple[str, int, int, int]] = []
        offset = end = 0          # bits
        align = 1
        for d in node.decls:
            if not isinstance(d, c_ast.Decl):
                continue          # _Static_assert, #pragma
            mattrs = _attr_items(d.attributes) + _declarator_attrs(d.type)
            mtype = self.ctype(d.type)
            size, talign = self.sizes(d, mtype)
            mpacked = packed or any(_attr_name(a) == "packed" for a in mattrs)
            if union:
                offset = 0
            if d.bitsize is not None:
                width = self.const(d.bitsize)
                if not _is_integer(self, mtype):
                    raise self.fail(d, f"bitfield {d.name or ''!r} has a type that is not an integer")
                if width < 0 or width > size * 8 or (width == 0 and d.name):
                    raise self.fail(d, f"bitfield {d.name or ''!r} has an invalid width {width}")
                if width == 0:
                    offset = _round(offset, talign * 8)
                else:
                    if not mpacked and offset % (talign * 8) + width > size * 8:
                        offset = _round(offset, talign * 8)
                    if d.name:
                        members.append((d.name, mtype, offset, width))
                        align = max(align, 1 if mpacked else talign)
                    offset += width
            else:
                malign = max(1 if mpacked else talign, _aligned(mattrs))
                offset = _round(offset, malign * 8)
                members.append((d.name or "", mtype, offset, 0))
                align = max(align, malign)
                offset += size * 8
            end = max(end, offset)
        align = max(align, _aligned(attrs))
        size = _round(_round(end, 8) // 8, align)
        if size >= 1 << 32:
            raise self.fail(node, f"{kind} of {size} bytes: BTF holds sizes up to 4 GiB")
        limit = 1 << (24 if any(m[3] for m in members) else 32)      # bits of a member's offset in BTF
        if any(m[2] >= limit for m in members):
            raise self.fail(node, f"a member of this {kind} lies beyond the {limit // 8 >> 20} MiB BTF can place "
                                  f"it at{' in a struct with bitfields' if limit == 1 << 24 else ''}")
        self.put(tid, "struct", name, size, members, union=union)
        self.size[tid], self.align[tid] = size, align
        return tid

    def enum(self, node: Any, attrs: list[Any]) -> int:
        if id(node) in self.done:
            return self.done[id(node)]
        name = node.name or ""
        if name and ("enum", name) in self.tag_ids:
            return self.tag_ids[("enum", name)]
        attrs = attrs + self.after.get(id(node), [])
        values: list[tuple[str, int]] = []
        nxt = 0
        for e in node.values.enumerators:
            v = self.const(e.value) if e.value is not None else nxt
            values.append((e.name, v))
            self.enumerators[e.name] = v
            nxt = v + 1
        lo = min((v for _, v in values), default=0)
        hi = max((v for _, v in values), default=0)
        signed = lo < 0
        if any(_attr_name(a) == "packed" for a in attrs):
            size = next(s for s in (1, 2, 4, 8) if _fits(lo, hi, s))
        else:
            size = 4 if _fits(lo, hi, 4) else 8
        if not _fits(lo, hi, 8):
            raise self.fail(node, "an enum value does not fit 64 bits")
        tid = self.add("enum" if size <= 4 else "enum64", name, values, size, signed=signed, size=size, align=size)
        self.done[id(node)] = tid
        if name:
            self.tag_ids[("enum", name)] = tid
        return tid

    # -- constant expressions -----------------------------------------------------------------

    def const(self, node: Any) -> int:
        """An integer constant expression (array sizes, bitfield widths, enum values), as C evaluates it."""
        from pycparser import c_ast

        if isinstance(node, c_ast.Constant):
            return _literal(self, node)
        if isinstance(node, c_ast.ID):
            if node.name in self.enumerators:
                return self.enumerators[node.name]
            found = self.kernel.enumerator(node.name)
            if found is None:
                raise self.fail(node, f"{node.name!r} is not a constant here")
            return found[1]
        if isinstance(node, c_ast.UnaryOp):
            if node.op in ("sizeof", "_Alignof", "alignof"):
                if not isinstance(node.expr, c_ast.Typename):
                    raise self.fail(node, f"{node.op} of an expression: pycore reads {node.op}(TYPE) only")
                size, align = self.sizes(node, self.ctype(node.expr.type))
                return size if node.op == "sizeof" else align
            v = self.const(node.expr)
            ops = {"-": lambda: -v, "+": lambda: v, "~": lambda: ~v, "!": lambda: int(not v)}
            if node.op not in ops:
                raise self.fail(node, f"operator {node.op} in a constant")
            return ops[node.op]()
        if isinstance(node, c_ast.BinaryOp):
            a, b = self.const(node.left), self.const(node.right)
            return _binary(self, node, a, b)
        if isinstance(node, c_ast.TernaryOp):
            return self.const(node.iftrue) if self.const(node.cond) else self.const(node.iffalse)
        if isinstance(node, c_ast.Cast):
            return self.const(node.expr)
        raise self.fail(node, "not an integer constant expression")


def _binary(lay: Layout, node: Any, a: int, b: int) -> int:
    op = node.op
    if op in ("/", "%"):
        if b == 0:
            raise lay.fail(node, "division by zero in a constant")
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)     # C truncates toward zero
        return q if op == "/" else a - q * b
    if op in ("<<", ">>") and not 0 <= b < 64:
        raise lay.fail(node, f"shift by {b} in a constant")
    ops = {"+": a + b if op == "+" else 0, "-": a - b, "*": a * b, "<<": a << b if op == "<<" else 0,
           ">>": a >> b if op == ">>" else 0, "&": a & b, "|": a | b, "^": a ^ b, "&&": int(bool(a and b)),
           "||": int(bool(a or b)), "==": int(a == b), "!=": int(a != b), "<": int(a < b), ">": int(a > b),
           "<=": int(a <= b), ">=": int(a >= b)}
    if op not in ops:
        raise lay.fail(node, f"operator {op} in a constant")
    v = ops[op]
    if abs(v) >= 1 << 64:
        raise lay.fail(node, "a constant beyond 64 bits")
    return v


def _literal(lay: Layout, node: Any) -> int:
    text = node.value
    if node.type == "char" or text.startswith("'"):
        body = text[text.index("'") + 1:-1]
        try:
            value = body.encode("latin-1").decode("unicode_escape")
        except (UnicodeDecodeError, UnicodeEncodeError):
            raise lay.fail(node, f"character constant {text}") from None
        if len(value) != 1:
            raise lay.fail(node, f"character constant {text}")
        return ord(value)
    digits = text.rstrip("uUlL")
    try:
        if digits.lower().startswith(("0x", "0b")):
            return int(digits, 0)
        if len(digits) > 1 and digits.startswith("0"):
            return int(digits, 8)
        return int(digits, 10)
    except ValueError:
        raise lay.fail(node, f"{text} is not an integer constant") from None


def _fits(lo: int, hi: int, size: int) -> bool:
    bits = size * 8
    return (lo >= 0 and hi < 1 << bits) or (lo >= -(1 << (bits - 1)) and hi < 1 << (bits - 1))


def _is_integer(lay: Layout, tid: int) -> bool:
    from btf.kinds import Kind
    from btf.layout import skip

    if tid >= lay.first:
        slot = lay.slots[tid - lay.first]
        while slot is not None and slot[0] in ("typedef", "const", "volatile"):
            target = slot[1][-1] if slot[0] == "typedef" else slot[1][0]
            if target < lay.first:
                tid = target
                break
            slot = lay.slots[target - lay.first]
        else:
            return slot is not None and slot[0] in ("int", "enum", "enum64")
    return skip(lay.kernel.type(tid)).kind in (Kind.INT, Kind.ENUM, Kind.ENUM64)


def _attr_items(attrs: Any) -> list[Any]:
    """The attributes of pycparser's AttributeSpecifier list."""
    out: list[Any] = []
    for spec in attrs or ():
        out.extend(getattr(spec, "attributes", None) or [spec])
    return out


def _declarator_attrs(node: Any) -> list[Any]:
    """The attributes along a member's declarator (``void *p [[packed]]`` puts them on the innermost)."""
    from pycparser import c_ast

    out: list[Any] = []
    while isinstance(node, (c_ast.TypeDecl, c_ast.PtrDecl, c_ast.ArrayDecl)):
        out += _attr_items(node.attributes)
        node = node.type
    return out


def _attr_name(a: Any) -> str:
    return (getattr(a, "name", "") or "").strip("_")


def _aligned(attrs: list[Any]) -> int:
    """The largest ``aligned(N)`` among ``attrs`` (``aligned`` alone: 16); 1 if none."""
    best = 1
    for a in attrs:
        if _attr_name(a) != "aligned":
            continue
        args = getattr(a, "arguments", None)
        if not args:
            best = max(best, _MAX_ALIGN)
            continue
        try:
            n = int(str(args[0] if isinstance(args, list) else args).strip().strip("()"), 0)
        except ValueError:
            raise DeclError(f"aligned({args}): pycore reads a number there") from None
        if n <= 0 or n & (n - 1):
            raise DeclError(f"aligned({n}) is not a power of two")
        best = max(best, n)
    return best


def _definitions(node: Any) -> list[Any]:
    """The struct, union and enum definitions a top-level declaration makes, outermost first."""
    from pycparser import c_ast

    out = []
    stack = [node]
    while stack:
        n = stack.pop(0)
        if isinstance(n, (c_ast.Struct, c_ast.Union)) and n.decls is not None:
            out.append(n)
        elif isinstance(n, c_ast.Enum) and n.values is not None:
            out.append(n)
        elif not isinstance(n, (c_ast.FuncDecl,)):
            stack.extend(c for _, c in n.children())
    return out


def _spelled(spec: Spec, tid: int) -> str:
    from btf.cformat import CFormatter

    return CFormatter().type_name(spec.type(tid))
