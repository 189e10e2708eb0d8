"""Checking of types: type names looked up where bpftrace looks (the script's C declarations, the
probed binary's DWARF, the kernel's BTF), casts, fields and members (through anonymous ones),
pointees and sizeof.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check.records import USER_PROBES, Checked
from pycore.lang.check.state import State
from pycore.lang.errors import CheckError, MapNotTypedYet, close_matches
from pycore.lang.types import BOOL, Array, Int, Ptr, Record, Str, Tuple, Type, Void, from_btf, type_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec
    from pycore.lang.macros import Macros


_BPFTRACE_INTS = {f"{u}int{b}": f"{'u' if u else 's'}{b}" for u in ("", "u") for b in (8, 16, 32, 64)}


class Types(State):
    """Type names (the script's declarations, the probed binary's DWARF, the kernel's BTF), casts,
    fields and members, pointees and sizeof."""

    # -- where type names are looked up: the script's declarations, then the kernel's BTF ----

    def types_spec(self) -> Spec:
        """The spec that type names are looked up in: the script's declarations over the kernel's BTF."""
        declared = self.declared()
        return declared if declared is not None else self.spec

    def declared(self) -> Spec | None:
        """The types the script's C definitions and #include'd headers declare (pycore.lang.cdecl), as
        split BTF on the kernel's; None if it declares none. Read once."""
        if self._declared is False:
            self._declared = None
            kernel = self.spec
            program = self.program
            if program is None or not (program.c_definitions or program.includes):
                return None
            from pycore.lang.cdecl import may_declare     # (1 ms: not for scripts without '#include' or C)

            if may_declare(program):
                self._declared = self._read_declarations(kernel)
                if self._declared is not None:
                    self._spec = self._declared
        return self._declared  # type: ignore[return-value]

    def _read_declarations(self, kernel: Spec) -> Spec | None:
        from pycore.lang.cdecl import DeclError, declare
        from pycore.lang.macros import MacroError

        try:
            text = self.head_macros().text()
            for inc in self.program.includes:    # a user's header must be there, as for clang (bpftrace);
                if not inc.system and inc.path in self.head_macros().missing_quoted:   # a system one: BTF
                    import os

                    raise CheckError(f'#include "{inc.path}": no such file (looked in {os.getcwd()} and the '
                                     "system's include directories)", inc.pos.line, inc.pos.col, self.filename,
                                     self.source)
            spec, self._unread_headers = declare(text, kernel)
            return spec
        except (DeclError, MacroError) as e:
            line, col = getattr(e, "line", 0), getattr(e, "col", 0)
            raise CheckError(str(e), line, col, self.filename, self.source) from None

    def head_macros(self) -> Macros:
        """The script's '#' lines and C definitions, preprocessed once (pycore.lang.macros)."""
        from pycore.lang.cdecl import SCRIPT, script_text
        from pycore.lang.macros import Macros

        if self._macros is None:
            self._macros = Macros(script_text(self.program), SCRIPT)
        return self._macros

    def _where_types_are(self, dwarf: str = "") -> str:
        """Where an unknown type name was looked for, for its error (``dwarf``: the probed binary's path)."""
        places = [f"in {dwarf}'s DWARF"] if dwarf else []
        unread = getattr(self, "_unread_headers", [])
        if self._declared not in (False, None) or unread:
            note = f"; pycore's C parser could not read {'; '.join(unread)}" if unread else ""
            places.insert(0, f"in the script's C declarations{note}")
        if not places:
            return "in this kernel's BTF"
        return ", ".join(places) + ", nor in this kernel's BTF"

    def pointee(self, node: A.Node, p: Ptr) -> Type:
        if p.pointee is not None:
            return p.pointee
        if p.target == 0 or p.spec is None:
            raise self.error(node, "cannot dereference a pointer of unknown type: cast it first, e.g. (struct path *)arg0")
        t = from_btf(p.spec, p.target, user=p.user)
        if isinstance(t, Void):
            raise self.error(node, "cannot dereference a void pointer: cast it first")
        return t

    def typeof(self, c: Checked, tn: A.TypeName) -> A.TypeName | Type:
        """``typeof(x)`` (bpftrace 0.25): a bare name that names a C type (``typeof(size_t)``) is that
        type's name, resolved where a type name is; else the type of the expression ``x`` (checked,
        never run)."""
        x = tn.of
        if isinstance(x, A.Builtin) and (x.name in _C_INTS or self._names_a_type(x.name)):
            return A.TypeName(x.name, tn.pointer_depth, pos=tn.pos)
        assert x is not None
        return self.expr(c, x)

    def int_typedef(self, c: Checked, node: A.Node, name: str) -> Int | None:
        """The integer type a C name (a typedef such as size_t or u32, or an INT of BTF) stands for,
        or None when it names none."""
        if not self._names_a_type(name):
            return None
        target, spec = self.named_type(c, node, name)
        t = from_btf(spec, target)
        return Int(t.size, t.signed) if isinstance(t, Int) and not isinstance(t, Ptr) else None

    def _names_a_type(self, name: str) -> bool:
        from btf.kinds import Kind

        return bool(self.types_spec().ids_named(name, (Kind.TYPEDEF, Kind.INT)))

    def cast(self, c: Checked, e: A.Cast) -> Type:
        inner = self.expr(c, e.expr)
        tn = e.type
        if tn.of is not None:
            found = self.typeof(c, tn)
            if isinstance(found, A.TypeName):
                tn = found
            elif isinstance(found, Int) and not found.display and isinstance(inner, (Int, Ptr)):
                return Int(found.size, found.signed)
            elif isinstance(found, Ptr) and isinstance(inner, (Int, Ptr)):
                return found
            else:
                raise self.error(e, f"cannot cast {inner} to typeof(...), a {found}: pycore casts to an "
                                    "integer or a pointer type")
        name = tn.name.strip()
        ints = _C_INTS
        if tn.pointer_depth == 0 and name == "bool":
            # bpftrace 0.24's booleans: true for a non-zero integer or pointer, a non-empty string
            if isinstance(inner, (Int, Ptr, Str)):
                return BOOL
            raise self.error(e, f"cannot cast {inner} to bool")
        if tn.pointer_depth == 0 and ("[" in name or isinstance(inner, Array)):
            return self._array_cast(c, e, inner, name)
        if not isinstance(inner, (Int, Ptr)):
            raise self.error(e, f"cannot cast {inner} to {name}{' *' * tn.pointer_depth}")
        if tn.pointer_depth == 0:
            if name in ints:
                return Int(*ints[name])
            if name.startswith("enum ") and isinstance(inner, Int):
                return self._enum_cast(c, e, name)
            if (as_int := self.int_typedef(c, e, name)) is not None:      # (size_t)x, (u32)x
                return as_int
            raise self.error(e, f"cannot cast to {name} (cast to an integer type, or to a pointer: ({name} *))")
        # an address from a register or an integer field points where the probe's code runs, as in
        # bpftrace: user memory in uprobes and USDT, kernel memory elsewhere (uptr()/kptr() say otherwise)
        user = inner.user if isinstance(inner, Ptr) else c.target.kind in USER_PROBES
        target, spec = self.named_type(c, e, name)
        for _ in range(tn.pointer_depth - 1):
            target = self._pointer_to(target, spec)
        return Ptr(target, user, spec)

    def address_of(self, c: Checked, e: A.Unary) -> Type:
        """``&x`` (bpftrace 0.25): a pointer to a variable, a map, a field, an array element or what a pointer
        points to, in the memory ``x`` is in (a user pointer's fields are user memory; a variable is the
        program's own). An array's address is its first element's (``char *`` for ``&$t->comm``)."""
        x = e.operand
        if isinstance(x, A.MapRef):
            if x.keys:
                raise self.error(e, "'&' of a map's value: bpftrace takes the address of a map (&@m), "
                                    "not of its values")
            return self._map_address(c, x)
        t = self.expr(c, x)
        if isinstance(x, A.Var):
            user = False
        elif isinstance(x, A.Unary) and x.op == "*" or isinstance(x, (A.Field, A.Index)):
            base = self.expr(c, x.operand if isinstance(x, A.Unary) else x.expr)
            user = bool(getattr(base, "user", False))
        else:
            raise self.error(e, "'&' takes a variable, a map, a field, an array element or a dereference "
                                "(&$v, &@m, &$p->f, &$a[1], &*$p)")
        if isinstance(t, Record) and t.spec is not None:
            return Ptr(t.btf_id, user, t.spec)
        if isinstance(t, Array) and t.spec is not None:
            return Ptr(t.elem_id, user, t.spec)
        if isinstance(t, Ptr):
            return Ptr(self._pointer_to(t.target, t.spec) if t.target else 0, user, t.spec or self.spec)
        if isinstance(t, Int) and not t.display:
            return Ptr(self.btf_type(e, f"{'' if t.signed else 'u'}int{t.size * 8}"), user, self.spec)
        if isinstance(t, Str):      # a char array field, a string variable: where its text starts
            return Ptr(self.btf_type(e, "char"), user, self.spec)
        if isinstance(x, A.Var) and isinstance(t, (Int, Tuple)):
            # a variable of pycore's own kind (a tuple, username's uid): its bytes on the program's
            # stack, read back whole by '*' (upstream's tests/runtime/variable)
            return Ptr(self.btf_type(e, "uint64") if isinstance(t, Int) else 0, False, self.spec, pointee=t)
        raise self.error(e, f"'&' of a {t}: pycore takes the address of integers, pointers, structs, "
                            f"arrays, strings and tuples, not yet of this")

    def _map_address(self, c: Checked, x: A.MapRef) -> Type:
        """``&@m`` (bpftrace 0.25, upstream's standard library passes maps to helpers so): the map
        itself, a ``struct bpf_map *`` in the kernel. Upstream types it as a pointer to the map's value,
        which it is not (its own comment says so); pycore gives the kernel's type, whose fields
        (``max_entries``, ``name``) read true."""
        m = self.maps.get("@" + x.name)
        c.types[id(x)] = Void()
        if m is None or not m.kind:
            raise MapNotTypedYet(f"Undefined map: @{x.name} (no statement assigns it)", x.pos.line, x.pos.col,
                                 self.filename, self.source)
        return Ptr(self.btf_type(x, "struct bpf_map"), False, self.spec)

    def _array_cast(self, c: Checked, e: A.Cast, inner: Type, name: str) -> Type:
        """``(uint8[8])x`` and ``(uint64)$array`` (bpftrace 0.18): an integer's bytes as an integer array
        and back, of one size, as bpftrace casts them."""
        import re

        m = re.fullmatch(r"(u?int(?:8|16|32|64))\[(\d+)\]", name)
        if m is None:    # to an integer, from an integer array
            if name not in _C_INTS or not isinstance(inner, Array) \
                    or not isinstance(from_btf(inner.spec, inner.elem_id), Int) or inner.size != _C_INTS[name][0]:
                raise self.error(e, f'Cannot cast from "{_int_array_name(inner)}" to "{name}"')
            return Int(*_C_INTS[name])
        elem, count = m.group(1), int(m.group(2))
        size, signed = _C_INTS[elem]
        if not isinstance(inner, Int) or count == 0 or size * count != inner.size:
            raise self.error(e, f'Cannot cast from "{inner}" to "{name}"')
        kernel = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}[size] if not signed else {1: "s8", 2: "s16", 4: "s32",
                                                                                      8: "s64"}[size]
        return Array(self.btf_type(e, kernel), count, size, False, self.spec)

    def _enum_cast(self, c: Checked, e: A.Cast, name: str) -> Type:
        """``(enum foo)x`` (bpftrace 0.22): the integer, printed by the enum's names. A constant that is
        none of the enum's values is refused, as bpftrace refuses it."""
        from btf.kinds import Kind
        from btf.layout import skip

        from pycore.lang.types import Enum, enum_names

        type_id, spec = self.named_type(c, e, name)
        t = skip(spec.type(type_id))
        if t.kind not in (Kind.ENUM, Kind.ENUM64):
            raise self.error(e, f"cannot cast to {name}: not an enum")
        value = _literal(e.expr, c)
        if value is not None and value not in enum_names(spec, t.id):
            raise self.error(e, f"Enum: {t.name} doesn't contain a variant value of {value}")
        return Enum(t.size, bool(getattr(t, "signed", False)), enum_id=t.id, spec=spec)

    def named_type(self, c: Checked, node: A.Node, name: str) -> tuple[int, Spec]:
        """(BTF id, the spec holding it) of a C type name, looked up as bpftrace does: the script's own
        declarations, then (in uprobes and USDT) the probed binary's DWARF, then the kernel's BTF."""
        dbg = getattr(c.target, "debug", None)
        if dbg is not None and name != "void":
            from btf.kinds import Kind

            word, _, rest = name.partition(" ")
            kinds = {"struct": (Kind.STRUCT,), "union": (Kind.UNION,), "enum": (Kind.ENUM, Kind.ENUM64)}
            plain = rest.strip() if word in kinds and rest else name
            declared = self.declared()
            mine = declared is not None and any(
                i >= declared.first_id for i in declared.ids_named(plain, kinds.get(word, (Kind.TYPEDEF,))))
            if not mine:
                from pycore.errors import ElfError

                try:
                    # the probed function's own unit first: no whole-file index of a big library
                    symbol = c.target.probe.rsplit(":", 1)[-1].split("+", 1)[0] if c.target.kind != "usdt" else None
                    found = dbg.named(word if word in kinds and rest else "typedef", plain, near=symbol)
                except ElfError as err:
                    raise self.error(node, str(err)) from None
                if found:
                    return found, dbg.spec
        return self.btf_type(node, name, dwarf=c.target.attach[1] if dbg is not None else ""), self.spec

    def _pointer_to(self, type_id: int, spec: Spec | None = None) -> int:
        from btf.kinds import Kind

        spec = spec or self.spec
        while spec is not None:      # the script's declarations, then the kernel's BTF under them
            for i in spec.ids_of_kind(Kind.PTR):
                if spec.type(i).type_id == type_id:
                    return i
            spec = spec.base
        return 0

    def btf_type(self, node: A.Node, name: str, dwarf: str = "") -> int:
        """The BTF id of a C type name (``struct path``, ``u64``, ``void``)."""
        from btf.kinds import Kind

        if name == "void":
            return 0
        name = _BPFTRACE_INTS.get(name, name)   # (uint64 *)p: the kernel's own names for bpftrace's
        kinds = {"struct": (Kind.STRUCT,), "union": (Kind.UNION,), "enum": (Kind.ENUM, Kind.ENUM64)}
        word, _, rest = name.partition(" ")
        self.types_spec()     # the script's declarations first: self.spec is them from here on
        if word in kinds and rest:
            ids = self.spec.ids_named(rest.strip(), kinds[word])
            what = f"{word} {rest.strip()}"
            pool_kinds = kinds[word]
        else:
            ids = self.spec.ids_named(name, (Kind.TYPEDEF, Kind.INT))
            what = name
            pool_kinds = (Kind.TYPEDEF,)
        if ids:
            return ids[0]
        prefix = (rest or name).strip()[:3].encode()
        try:
            near = {self.spec.name(i) for i in self.spec.ids_matching(prefix + b".*", pool_kinds)}
        except Exception:  # noqa: BLE001 - a suggestion is a courtesy
            near = set()
        guess = close_matches((rest or name).strip(), list(near), n=2)
        hint = f" (did you mean {' or '.join(repr((word + ' ' if rest else '') + g) for g in guess)}?)" if guess else ""
        raise self.error(node, f"unknown type {what!r}: not {self._where_types_are(dwarf)}{hint}")

    def field(self, c: Checked, e: A.Field) -> Type:
        base = e.expr
        if isinstance(base, A.Builtin) and base.name == "args":
            return self.args_field(c, e)
        t = self.expr(c, base)
        if isinstance(t, Tuple) and t.names and not e.arrow:      # a record's field by its name (0.25)
            if e.name not in t.names:
                raise self.error(e, f"the record has no field {e.name!r} (its fields: {', '.join(t.names)})")
            c.fields[id(e)] = t.names.index(e.name)
            return t.elems[t.names.index(e.name)]
        if isinstance(t, Tuple):
            if e.arrow or not e.name.isdigit():
                raise self.error(e, f"a tuple's elements are .0 to .{len(t.elems) - 1}, not {'->' if e.arrow else '.'}{e.name}")
            if int(e.name) >= len(t.elems):
                raise self.error(e, f"invalid tuple index: {e.name}; the tuple has {len(t.elems)} elements")
            return t.elems[int(e.name)]
        if isinstance(t, Ptr):
            if not e.arrow:
                # bpftrace lets '.' follow a pointer to a struct as '->' would
                pass
            t = self.pointee(e, t)
        elif e.arrow:
            raise self.error(e, f"'->' needs a pointer, and this is {t} (use '.')")
        if not isinstance(t, Record):
            raise self.error(e, f"{t} has no fields (.{e.name})")
        member, _ = self.member(e, t, e.name)
        return from_btf(t.spec, member.type_id, user=t.user)

    def member(self, node: A.Node, rec: Record, name: str):  # noqa: ANN201 - (btf Member, bit offset)
        """A member by name, looking inside anonymous structs and unions (as C does)."""
        from btf.layout import skip

        found = _find_member(rec.spec, rec.spec.type(rec.btf_id), name, 0)
        if found is None:
            names = _member_names(rec.spec, rec.spec.type(rec.btf_id))
            near = close_matches(name, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise self.error(node, f"{type_name(rec.spec, rec.btf_id)} has no field {name!r}{hint}")
        del skip
        return found

    def sizeof(self, c: Checked, e: A.Call) -> int:
        """sizeof(TYPE) or sizeof(expression): bytes, known when the script is checked."""
        from btf.layout import sizeof

        if len(e.args) != 1:
            raise self.error(e, "sizeof() takes one type or expression")
        a = e.args[0]
        if isinstance(a, A.TypeName) and a.of is not None:
            found = self.typeof(c, a)
            if not isinstance(found, A.TypeName):
                return found.size
            a = found
        if isinstance(a, A.TypeName):
            if a.pointer_depth:
                return 8
            type_id, spec = self.named_type(c, a, a.name)   # (may read the script's declarations: self.spec after)
            return sizeof(spec.type(type_id)) or 0
        if isinstance(a, A.Builtin) and a.name in _C_INTS:
            return _C_INTS[a.name][0]
        if isinstance(a, A.Builtin) and self.program is not None and (self.program.c_definitions
                                                                     or self.program.includes):
            from btf.kinds import Kind

            ids = self.types_spec().ids_named(a.name, (Kind.TYPEDEF,))    # sizeof(req_t), a declared typedef
            if ids and ids[0] >= self.spec.first_id:
                return sizeof(self.spec.type(ids[0])) or 0
        t = self.expr(c, a)
        if isinstance(t, Void):
            raise self.error(a, "sizeof() of a value with no size")
        return t.size


    def offsetof(self, c: Checked, e: A.Call) -> int:
        """offsetof(TYPE or expression, field[.sub...]) (bpftrace 0.18, sub-fields 0.22): bytes from
        the start of the struct to the member, known when the script is checked."""
        if len(e.args) != 2:
            raise self.error(e, "offsetof() takes a struct and a field: offsetof(struct foo, field)")
        a, f = e.args
        path: list[str] = []
        while isinstance(f, A.Field) and not f.arrow:
            path.append(f.name)
            f = f.expr
        if not isinstance(f, A.Builtin):
            raise self.error(e.args[1], "offsetof(): the second argument is a field name (a.b for a sub-field)")
        path.append(f.name)
        path.reverse()
        if isinstance(a, A.TypeName):
            if a.pointer_depth:
                raise self.error(a, f"offsetof() of '{a.name} *': not a struct or union")
            type_id, spec = self.named_type(c, a, a.name)
        else:
            t = self.expr(c, a)
            if not isinstance(t, Record) or t.spec is None:
                raise self.error(a, f"offsetof() takes a struct or union, not {t}")
            type_id, spec = t.btf_id, t.spec
        from btf.kinds import Kind
        from btf.layout import skip

        offset, t = 0, spec.type(type_id)
        for name in path:
            if skip(t).kind not in (Kind.STRUCT, Kind.UNION):
                raise self.error(e.args[1], f"offsetof(): '{type_name(spec, skip(t).id)}' is not a struct or union, "
                                            f"so it has no field '{name}'")
            found = _find_member(spec, t, name, 0)
            if found is None:
                near = close_matches(name, _member_names(spec, t), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise self.error(e.args[1], f"'{type_name(spec, skip(t).id)}' has no field named '{name}'{hint}")
            m, bits = found
            offset += bits // 8
            t = m.type
        return offset


_C_INTS = {"int8": (1, True), "int16": (2, True), "int32": (4, True), "int64": (8, True),
           "uint8": (1, False), "uint16": (2, False), "uint32": (4, False), "uint64": (8, False),
           "char": (1, True), "short": (2, True), "int": (4, True), "long": (8, True),
           "unsigned": (4, False), "unsigned int": (4, False), "unsigned long": (8, False),
           "u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
           "s8": (1, True), "s16": (2, True), "s32": (4, True), "s64": (8, True)}


def _int_array_name(t: Type) -> str:
    """An integer array as bpftrace names it in messages ("uint8[8]"), another type as pycore does."""
    if isinstance(t, Array) and t.spec is not None:
        elem = from_btf(t.spec, t.elem_id)
        if isinstance(elem, Int):
            return f"{'' if elem.signed else 'u'}int{elem.size * 8}[{t.count}]"
    return str(t)


def _literal(e: A.Expr, c: Checked) -> int | None:
    """The value of an integer written in the script (``3``, ``-1``, an enum constant), else None."""
    if isinstance(e, A.Unary) and e.op == "-":
        v = _literal(e.operand, c)
        return None if v is None else -v
    if isinstance(e, A.Int):
        return e.value
    return c.consts.get(id(e)) if isinstance(e, A.Builtin) else None


def _find_member(spec, t, name: str, bit_base: int):  # noqa: ANN001, ANN202
    from btf.kinds import Kind
    from btf.layout import skip

    t = skip(t)
    if t.kind not in (Kind.STRUCT, Kind.UNION):
        return None
    for m in t.members:
        if m.name == name:
            return m, bit_base + m.bit_offset
    for m in t.members:
        if not m.name:
            found = _find_member(spec, m.type, name, bit_base + m.bit_offset)
            if found is not None:
                return found
    return None


def _member_names(spec, t) -> list[str]:  # noqa: ANN001
    from btf.layout import skip

    t = skip(t)
    out = []
    for m in getattr(t, "members", ()):
        if m.name:
            out.append(m.name)
        else:
            out.extend(_member_names(spec, m.type))
    return out


# the offset of a member found through anonymous members is the sum of theirs
def member_offset(spec, rec: Record, name: str) -> tuple[int, int, int]:  # noqa: ANN001
    """(byte offset, bitfield bit offset within the loaded word, bitfield size) of ``name`` in ``rec``."""
    found = _find_member(spec, spec.type(rec.btf_id), name, 0)
    assert found is not None
    m, bits = found
    if m.bitfield_size:
        return bits // 8, bits % 8, m.bitfield_size
    return bits // 8, 0, 0
