"""The checker's core: one instance per script, statements, maps (keys and values agreed by every
use) and expressions; the concerns it calls on are the mixins of this package.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check.builtins import Builtins, _BUILTIN_TYPES
from pycore.lang.check.calls import Calls
from pycore.lang.check.records import AGGREGATES, PRINT_ONLY, READ_AGGREGATES, USER_PROBES, Checked, MapInfo
from pycore.lang.check.state import State
from pycore.lang.check.types import Types, _C_INTS
from pycore.lang.errors import MapNotTypedYet, close_matches
from pycore.lang.probes import Target
from pycore.lang.types import (BOOL, INT64, STRING_SIZE, Array, Bool, Buffer, Enum, is_aggregate, Inet, Int, Ptr, Record,
                               Stack, Str, TextInt, Tuple, Type, Void, from_btf, merge_tuples, tuple_type)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec
    from pycore.lang.macros import Macros


class Checker(Types, Builtins, Calls, State):
    """Types a whole program; one instance per script run."""

    def __init__(self, spec_loader, params: tuple[str, ...] = (), *, unsafe: bool = False,  # noqa: ANN001
                 filename: str = "", source: str = "", program: A.Program | None = None) -> None:
        self._spec_loader = spec_loader
        # the script's '#' lines, read for macros only when a name needs them (pycore.lang.macros)
        self.has_head = program is not None and bool(program.includes or program.directives)
        self.program = program
        self._macros: Macros | None = None
        self._named: dict[str, int | None] = {}   # name -> its enum or macro value: each looked up once
        self._enum_of: dict[str, int] = {}        # an enum constant's name -> its enum's BTF id
        self._spec: Spec | None = None
        self._declared: Spec | None | bool = False     # False: not read yet (pycore.lang.cdecl)
        self.params = params
        self.unsafe = unsafe
        self.unsafe_hint = "run with --unsafe to allow it"   # pycore.trace() says its own argument
        self.filename = filename
        self.source = source
        self.maps: dict[str, MapInfo] = {}
        self.cpid = 0   # the -c command's pid, set by the runtime before checking
        self._loops = 0  # while loops around the statement being checked (break, continue)
        self._dead = 0   # if branches around it that a literal condition never takes (fail() is not reached)
        self._widened: dict[str, Tuple] = {}   # tuple variables' final types, once a check found them wider
        self._flat = False                           # this block checked without scoping (0.17's way)
        self._scopes: list[dict[str, _Variable]] = [{}]   # the blocks around the statement, innermost last
        self._made: set[str] = set()                 # the keys of the variables made in this block
        self._let_seen: bool | None = None           # the script has a let (None: not looked yet)
        from pycore.lang.config import Config

        self.config = Config()   # the script's config block and BPFTRACE_* (pycore.lang.config): set by Script

    @property
    def spec(self) -> Spec:
        """The kernel's BTF; once the script's C declarations are read (at once when it has definitions,
        on the first type name otherwise), them as split BTF on it, their names hiding the kernel's."""
        if self._spec is None:
            self._spec = self._spec_loader()
            if self.program is not None and self.program.c_definitions:
                self.types_spec()
        return self._spec

    def stack_mode(self) -> str:
        """How kstack and ustack print unless the call says: the config's stack_mode ("" for bpftrace's)."""
        mode = self.config.stack_mode
        return "" if mode == "bpftrace" else mode

    # -- entry -----------------------------------------------------------------------------

    def check(self, block: A.ProbeBlock, target: Target) -> Checked:
        if self._declared is False and self.program is not None and self.program.c_definitions:
            self.declared()      # a declaration that does not parse is an error, used or not
        try:
            return self._check(block, target, flat=False)
        except _Unscoped:
            # bpftrace 0.17 had no block scoping: a variable assigned in an if's body could be read
            # after it. bpftrace 0.23 refuses that; a script with no 'let' (written for 0.17) runs as
            # 0.17 ran it, one variable per name in the whole probe
            return self._check(block, target, flat=True)

    def _check(self, block: A.ProbeBlock, target: Target, flat: bool) -> Checked:
        """One probe block checked; again when a tuple variable was widened by a later assignment
        (the statements before it saw it narrower: its layout differs), with its final type known
        from the start."""
        self._widened: dict[str, Tuple] = {}
        for _ in range(3):
            seen = dict(self._widened)
            c = self._check_once(block, target, flat)
            if self._widened == seen:
                return c
        return c

    def _check_once(self, block: A.ProbeBlock, target: Target, flat: bool) -> Checked:
        c = Checked(block, target)
        self._flat = flat
        self._scopes = [{}]
        self._made = set()
        if block.predicate is not None:
            self.condition(c, block.predicate, "predicate")
        self._loops = 0
        self.stmts(c, block.body)
        return c

    # -- variables and their scopes (bpftrace 0.22+) -----------------------------------------------
    #
    # A variable lives in the block where it is declared (let) or first assigned, and in the blocks
    # inside it; two variables of one name in sibling blocks are two variables (each its own key in
    # Checked.variables and its own stack slot), and may have different types.

    def scoped(self, c: Checked, body: list[A.Stmt]) -> None:
        """Check ``body`` as a block of its own: the variables it makes end with it."""
        if self._flat:
            self.stmts(c, body)
            return
        self._scopes.append({})
        try:
            self.stmts(c, body)
        finally:
            self._scopes.pop()

    def _lookup(self, name: str) -> _Variable | None:
        for scope in reversed(self._scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def declare_var(self, c: Checked, node: A.Var, declared: bool = False, at: A.Node | None = None) -> _Variable:
        """A new variable named by ``node`` in the innermost block (a for-loop's variable: its body's)."""
        name = node.name
        key, n = name, 1
        while key in self._made or key in c.variables:
            n += 1
            key = f"{name}#{n}"
        self._made.add(key)
        v = self._scopes[-1][name] = _Variable(key, declared, at or node)
        c.var_keys[id(node)] = key
        return v

    def var_write(self, c: Checked, node: A.Var) -> _Variable:
        """The variable an assignment to ``node`` writes: the one in scope, or a new one here."""
        v = self._lookup(node.name)
        if v is None:
            if node.name in c.variables and node.name not in self._made:   # made by another stage
                v = _Variable(node.name, False, node)
            else:
                return self.declare_var(c, node)
        c.var_keys[id(node)] = v.key
        return v

    def var_read(self, c: Checked, node: A.Var) -> Type:
        """The type of the variable ``node`` reads, or bpftrace's error for one not in scope."""
        name = node.name
        v = self._lookup(name)
        if v is None and name in c.variables and name not in self._made:   # made by another stage
            v = _Variable(name, False, node)
        if v is None:
            ended = any(k == name or k.startswith(name + "#") for k in self._made)
            if ended and not self._flat and not self._has_let():
                raise _Unscoped()
            if ended:
                raise self.error(node, f"Undefined or undeclared variable: ${name} (it was made in a block "
                                       f"that has ended: a variable lives in the block where it is first "
                                       f"assigned; declare it before that block, let ${name};)")
            near = close_matches(name, [k for scope in self._scopes for k in scope], n=1)
            hint = f" (did you mean ${near[0]}?)" if near else ""
            raise self.error(node, f"${name} is used before it is assigned{hint}")
        c.var_keys[id(node)] = v.key
        t = c.variables.get(v.key)
        if t is None:     # 'let $a; if ($a) {...}': 0 until assigned, an integer (bpftrace warns)
            t = c.variables[v.key] = INT64
        return t

    def _has_let(self) -> bool:
        """Whether the script declares variables (is written for bpftrace 0.22+'s scoping)."""
        has = self._let_seen
        if has is None:
            nodes = A.walk(self.program) if self.program is not None else ()
            has = self._let_seen = any(isinstance(n, (A.Let, A.ForMap, A.ForRange)) for n in nodes)
        return has

    def let(self, c: Checked, s: A.Let) -> None:
        """``let $x [: type] [= value]``: a new variable in this block, as bpftrace 0.22+."""
        name = s.var.name
        old = self._lookup(name)
        if old is not None:
            if old.declared:
                raise self.error(s, f"Variable ${name} was already declared (at line {old.at.pos.line}). "
                                    f"Variable shadowing is not allowed.")
            raise self.error(s, f"Variable declarations need to occur before variable usage or assignment. "
                                f"Variable: ${name}")
        v = self.declare_var(c, s.var, declared=True, at=s)
        if s.type is not None:
            v.fixed = self.let_type(c, s)
            c.variables[v.key] = v.fixed
            c.types[id(s.var)] = v.fixed
        if s.value is not None:
            self.assign(c, A.Assign(s.var, "=", s.value, pos=s.pos))

    def let_type(self, c: Checked, s: A.Let) -> Type:
        """The type a declaration names: an integer type, string or string[N], or a pointer."""
        tn = s.type
        assert tn is not None
        if tn.of is not None:
            found = self.typeof(c, tn)
            if not isinstance(found, A.TypeName):
                if isinstance(found, Void):
                    raise self.error(tn, f"let ${s.var.name}: typeof() of a value with no type")
                return found
            tn = found
        name = tn.name
        if tn.pointer_depth == 0:
            if name in _C_INTS:
                return Int(*_C_INTS[name])
            if name == "bool":
                return BOOL
            if name == "string":
                return Str(STRING_SIZE)
            if name.startswith("string["):
                n = int(name[7:-1])
                if not 1 <= n <= 1024:
                    raise self.error(tn, f"let ${s.var.name}: a string holds 1..1024 bytes, not {n}")
                return Str(n)
            if (as_int := self.int_typedef(c, tn, name)) is not None:      # size_t, u32: the C types' names
                return as_int
            raise self.error(tn, f"let ${s.var.name}: unknown type '{name}' (an integer type such as uint32, "
                                 f"string, string[N], or a pointer such as struct task_struct *)")
        target, spec = self.named_type(c, tn, name)
        for _ in range(tn.pointer_depth - 1):
            target = self._pointer_to(target, spec)
        return Ptr(target, c.target.kind in USER_PROBES, spec)

    def _fit(self, s: A.Assign, fixed: Type, vt: Type) -> Type:
        """A value for a variable whose type a declaration fixed: checked as bpftrace 0.23 checks it."""
        name = s.target.name
        if isinstance(fixed, Int) and isinstance(vt, Int) and not isinstance(vt, TextInt):
            literal = _literal(s.value)
            if literal is not None:
                lo, hi = (-(1 << (8 * fixed.size - 1)), (1 << (8 * fixed.size - 1)) - 1) if fixed.signed \
                    else (0, (1 << (8 * fixed.size)) - 1)
                if not lo <= literal <= hi:
                    raise self.error(s, f"Type mismatch for ${name}: trying to assign value '{literal}' which does "
                                        f"not fit into the variable of type '{fixed}'")
            elif vt.size > fixed.size:
                raise self.error(s, f"Integer size mismatch. Assignment type '{vt}' is larger than the variable "
                                    f"type '{fixed}'.")
            return fixed
        if isinstance(fixed, Str) and isinstance(vt, Str):
            if vt.size > fixed.size:
                raise self.error(s, f"Type mismatch for ${name}: a {vt} does not fit in the variable of type "
                                    f"'{fixed}'")
            return fixed
        if isinstance(fixed, Ptr) and (isinstance(vt, Ptr) or isinstance(vt, Int) and not isinstance(vt, TextInt)):
            return fixed
        raise self.error(s, f"Type mismatch for ${name}: trying to assign value of type '{vt}' when variable "
                            f"already has a type '{fixed}'")

    # -- statements ------------------------------------------------------------------------

    def stmts(self, c: Checked, body: list[A.Stmt]) -> None:
        for s in body:
            self.stmt(c, s)

    def stmt(self, c: Checked, s: A.Stmt) -> None:
        if isinstance(s, A.ExprStmt):
            e = s.expr
            if isinstance(e, A.Call):
                c.types[id(e)] = self.call(c, e, statement=True)     # (a value call's value is dropped)
            else:
                self.expr(c, e)
        elif isinstance(s, A.Assign):
            self.assign(c, s)
        elif isinstance(s, A.IncDec):
            self.incdec(c, s)
        elif isinstance(s, A.If) and isinstance(s.cond, A.Call) and s.cond.name == "comptime":
            # bpftrace 0.25's `if comptime (x)`: one branch, chosen now; the other is neither checked
            # nor made into code (the lowering reads c.comptime)
            taken = bool(self.comptime_value(c, s.cond))
            c.comptime[id(s)] = taken
            if taken:
                self.scoped(c, s.then)
            elif s.else_:
                self.scoped(c, s.else_)
        elif isinstance(s, A.If):
            self.condition(c, s.cond, "if()")
            # a condition of literals (and positional parameters) that is false: its branch is checked
            # as any other (its maps are declared), but a fail() there is not reached (stdlib.md's
            # `if ($1 < 2) { fail(...) }`)
            known = self.fold(c, s.cond, consts=False)
            self._dead += known is not None and not known
            self.scoped(c, s.then)
            self._dead -= known is not None and not known
            if s.else_:
                self._dead += known is not None and bool(known)
                self.scoped(c, s.else_)
                self._dead -= known is not None and bool(known)
        elif isinstance(s, A.While):
            self.condition(c, s.cond, "while()")
            self._loops += 1
            self.scoped(c, s.body)
            self._loops -= 1
        elif isinstance(s, A.Unroll):
            n = self.constant(c, s.count)
            if not 1 <= n <= 100:
                raise self.error(s, f"unroll count must be 1..100, not {n}")
            self.scoped(c, s.body)
        elif isinstance(s, (A.ForMap, A.ForRange)):
            self.for_loop(c, s)
        elif isinstance(s, A.Block):
            self.scoped(c, s.body)
        elif isinstance(s, A.Let):
            self.let(c, s)
        elif isinstance(s, A.Return):
            if s.value is not None:
                t = self.expr(c, s.value)
                if not isinstance(t, Int):
                    raise self.error(s.value, f"return takes an integer, not {t}")

        elif isinstance(s, (A.Break, A.Continue)):
            if not self._loops:
                raise self.error(s, f"{type(s).__name__.lower()} used outside of a loop")
        else:
            raise self.error(s, f"unsupported statement {type(s).__name__}")

    def for_loop(self, c: Checked, s: A.ForMap | A.ForRange) -> None:
        """``for ($kv : @m)`` and ``for ($i : a..b)``: the variable is (key, value), or the range's
        integer, a variable of the body's block (as the variables the body assigns first). The body
        may read and write the variables assigned before the loop (0.22+), and break, continue and
        return as bpftrace 0.24+ allow (0.23 refused them in a for loop)."""
        name = s.decl.name
        if self._lookup(name) is not None:
            raise self.error(s.decl, f"Loop declaration shadows existing variable: ${name}")
        if isinstance(s, A.ForRange):
            types = []
            for end, which in ((s.start, "start"), (s.end, "end")):
                t = self.expr(c, end)
                kind = self.aggregate_map(end)
                if not isinstance(t, Int) or isinstance(t, TextInt) or isinstance(t, Ptr) or kind:
                    raise self.error(end, f"Loop range requires an integer for the {which} value, "
                                          f"not {kind + '_t' if kind else t}")
                types.append(t)
            vt: Type = Int(8, types[0].signed)    # the start's type, as upstream's (int64 for 0..n)
        else:
            vt = self.for_map_type(c, s.map)
        self._scopes.append({})
        try:
            v = self.declare_var(c, s.decl)
            c.variables[v.key] = vt
            c.types[id(s.decl)] = vt
            c.loops[id(s)] = vt
            self._loops += 1
            self.stmts(c, s.body)
            self._loops -= 1
        finally:
            self._scopes.pop()

    def for_map_type(self, c: Checked, e: A.Expr) -> Type:
        """The (key, value) tuple a for loop over the map ``e`` gives: ((k1, k2...), value) for
        several keys; a count, sum, min, max or avg map's value is its CPUs' combined value."""
        if not isinstance(e, A.MapRef) or e.keys:
            raise self.error(e, "Loop expression must be a map")
        m = self.maps.get("@" + e.name)
        c.types[id(e)] = Void()
        if m is None or not m.kind:
            pos = e.pos
            raise MapNotTypedYet(f"Undefined map: @{e.name} (no statement assigns it)", pos.line, pos.col,
                                 self.filename, self.source)
        if not m.keys:
            raise self.error(e, "Maps used as for-loop expressions must have keys to iterate over")
        if m.kind in PRINT_ONLY:
            raise self.error(e, f"Loop expression does not support type: {m.kind}_t")
        key = m.keys[0] if len(m.keys) == 1 else tuple_type(m.keys)
        if m.kind in READ_AGGREGATES:
            value: Type = Int(8, m.kind != "count")
        else:
            value = m.value if m.value is not None else INT64
        return tuple_type((key, value))

    def condition(self, c: Checked, e: A.Expr, where: str) -> None:
        """A predicate's, if's, while's or ternary's condition: an integer or a pointer, as in bpftrace."""
        t = self.expr(c, e)
        kind = self.aggregate_map(e)
        if kind:   # bpftrace 0.21+: a count_t is no condition (compare it: @c > 0)
            raise self.error(e, f"Invalid condition in {where}: {kind}_t (compare it, @{e.name} > 0, or cast it, "
                                f"(int64)@{e.name})")
        if not isinstance(t, (Int, Ptr)) or isinstance(t, TextInt):
            raise self.error(e, f"Invalid condition in {where}: {t}")

    def incdec(self, c: Checked, s: A.IncDec) -> Type:
        """``x++``, ``--@m[k]``: a statement, or an expression whose value is the old (postfix) or
        new (prefix) value, as in bpftrace; a pointer variable steps by its pointee's size, as in C."""
        target = s.target
        if isinstance(target, A.Var):
            key = self.var_write(c, target).key
            t = c.variables.get(key)
            if t is None:
                c.variables[key] = INT64
            elif not isinstance(t, (Int, Ptr)) or isinstance(t, TextInt):
                raise self.error(s, f"${target.name} is {t}: {s.op} needs an integer or a pointer")
            c.types[id(target)] = c.variables[key]
            return c.variables[key]
        if isinstance(target, A.MapRef):
            keys = self.map_keys(c, target)
            m = self.map_use(target, keys)
            if m.kind == "int" and isinstance(m.value, Ptr):    # steps by the pointee's size
                c.types[id(target)] = m.value
                return m.value
            self.map_value(target, m, "int", INT64)
            c.types[id(target)] = m.value or INT64
            return INT64
        raise self.error(s, f"{s.op} needs a $variable or a @map")

    def assign(self, c: Checked, s: A.Assign) -> None:
        target, value = s.target, s.value
        if isinstance(target, A.MapRef):
            keys = self.map_keys(c, target)
            m = self.map_use(target, keys)
            if isinstance(value, A.Call) and value.name in AGGREGATES:
                if s.op != "=":
                    raise self.error(s, f"{value.name}() takes '=', not '{s.op}'")
                self.aggregate(c, value, m)
                return
            kind = self.aggregate_map(value)
            if kind:    # bpftrace 0.21+'s refusal (0.17 copied the first word: an avg's count)
                raise self.error(s, f"Map value '{kind}_t' cannot be assigned from one map to another. The "
                                    f"function that returns this type must be called directly e.g. "
                                    f"`@{target.name} = {kind}(...);`; or cast it to an integer, "
                                    f"`@{target.name} = (int64)@{value.name};`, for the value of the aggregate")
            vt = self.expr(c, value)
            held = m.value if m.kind == "int" else None
            if s.op != "=" and isinstance(held, Ptr):    # C's pointer arithmetic, as on a variable
                if s.op not in ("+=", "-=") or not isinstance(vt, Int) or isinstance(vt, Ptr):
                    raise self.error(s, f"The {s.op[:-1]} operator can not be used on expressions of types "
                                        f"{held}, {vt}")
                vt = held
            elif s.op != "=" and not isinstance(vt, Int):
                raise self.error(value, f"'{s.op}' needs an integer, not {vt}")
            if isinstance(vt, Ptr):
                vt = Ptr(vt.target, vt.user, vt.spec)   # kept, as bpftrace 0.21+ keeps it: steps, prints in hex
            if isinstance(vt, (Int, Ptr)) and isinstance(held, (Int, Ptr)) and \
                    isinstance(vt, Ptr) != isinstance(held, Ptr):
                raise self.error(s, f"Type mismatch for @{target.name}: trying to assign value of type '{vt}' "
                                    f"when map already contains a value of type '{held}'")
            if isinstance(vt, Inet):
                self.map_value(target, m, "str", vt)
            elif isinstance(vt, Str):
                self.map_value(target, m, "str", Str(max(vt.size, STRING_SIZE)))
            elif isinstance(vt, (Int, Ptr)):
                self.map_value(target, m, "int", held if isinstance(held, Ptr) else vt)
            elif isinstance(vt, Stack):
                self.map_value(target, m, "int", vt)
            elif is_aggregate(vt):      # a struct or array read whole, as bpftrace keeps one
                if m.value is not None and m.value != vt:
                    raise self.error(value, f"@{target.name} holds {m.value}, cannot assign {vt}")
                self.map_value(target, m, "str", vt)
            else:
                raise self.error(value, f"a map cannot hold {vt}")
            c.types[id(target)] = m.value or INT64
        elif isinstance(target, A.Var):
            vt = self.expr(c, value)
            if isinstance(vt, Void):
                raise self.error(value, f"${target.name} cannot hold {vt}")
            var = self.var_write(c, target)
            key = var.key
            old = c.variables.get(key)
            if var.fixed is not None:
                if s.op == "=":
                    vt = self._fit(s, var.fixed, vt)
                elif isinstance(var.fixed, Int) and var.fixed.size < 8:
                    raise self.error(s, f"Integer size mismatch. Assignment type 'int64' is larger than the "
                                        f"variable type '{var.fixed}'.")
            if s.op != "=":
                if old is None and var.declared:     # 'let $x; $x += 1': $x is 0 until assigned, as bpftrace
                    old = INT64
                stepped = isinstance(old, Ptr) and s.op in ("+=", "-=")   # C's pointer arithmetic
                if old is None or not isinstance(old, Int) and not stepped or not isinstance(vt, Int):
                    raise self.error(s, f"'{s.op}' needs an integer ${target.name}")
                if stepped:
                    vt = old
            if isinstance(old, Int) and isinstance(vt, Int) and isinstance(old, Bool) != isinstance(vt, Bool):
                old = vt = INT64     # true, then 5: an integer, as bpftrace 0.23 takes it
            if _enum_and_int(old, vt):      # an enum's value and a plain integer: a plain integer
                old = vt = Int(8, old.signed and vt.signed)   # type: ignore[union-attr]
            seeded = self._widened.get(key)     # this variable's type once every assignment was seen
            if isinstance(vt, Tuple) and isinstance(old or seeded, Tuple):
                merged = merge_tuples(old or seeded, vt)
                if merged is not None and seeded is not None and old is None:
                    merged = merge_tuples(seeded, merged)
                if merged is not None:     # bpftrace 0.23.2: (1, "ab") then (2, "abcd"): one wider tuple
                    if old is not None and merged != old:
                        self._widened[key] = merged     # the reads before this saw it narrower: again
                    old = vt = merged
            if old is not None and type(old) is not type(vt) and not (isinstance(old, Int) and isinstance(vt, Ptr)) \
                    or isinstance(old, Tuple) and old != vt or is_aggregate(old) and old != vt:
                raise self.error(s, f"${target.name} holds {old}, cannot assign {vt}")
            if isinstance(vt, Str) and isinstance(old, Str) and old.size < vt.size:
                vt = Str(vt.size)
            c.variables[key] = var.fixed or (old if (old is not None and isinstance(old, Str) and old.size >= vt.size)
                                             else vt)
            c.types[id(target)] = c.variables[key]
        else:
            raise self.error(s, "can only assign to a $variable or a @map")

    # -- maps ------------------------------------------------------------------------------

    def map_declarations(self) -> None:
        """After every block is checked: each declared map's kind agrees with its uses, as bpftrace 0.24
        checks it (the per-CPU kinds hold count/sum/min/max/avg/stats/hist/lhist, the others values)."""
        if self.program is None:
            return
        for d in self.program.map_decls:
            m = self.maps.get("@" + d.name)
            if m is None:
                continue    # declared, never used: bpftrace warns (Unused map); nothing to create
            m.decl = d
            used = "percpuhash" if m.kind in AGGREGATES else "hash"
            if d.kind.startswith("percpu") != (used == "percpuhash"):
                where = A.Node(pos=m.pos) if m.pos is not None else d
                raise self.error(where, f"Incompatible map types. Type from declaration: {d.kind}. Type from "
                                        f"value/key type: {used}")

    def aggregate_map(self, e: A.Expr) -> str:
        """The aggregation of the count/sum/min/max/avg map ``e`` reads, or "" (not such a map, or not
        yet known to be one at this point of the script)."""
        if isinstance(e, A.MapRef):
            m = self.maps.get("@" + e.name)
            if m is not None and m.kind in READ_AGGREGATES:
                return m.kind
        return ""

    def map_keys(self, c: Checked, ref: A.MapRef) -> tuple[Type, ...]:
        """The key types of ``@m[k, ...]``. A tuple alone (``@m[$t]``) is the map's keys, as ``@m[a, b]``:
        in bpftrace 0.23.2 a map has one key, and ``@m[a, b]`` is the tuple ``(a, b)``; a tuple among
        other keys (``@m[(a, b), c]``) is one key, printed as a tuple."""
        out = []
        for k in ref.keys:
            t = self.expr(c, k)
            if isinstance(t, Tuple):
                if len(ref.keys) == 1 and not t.names:      # (a record alone is one key: it keeps its names)
                    return tuple(self._key_type(k, x) for x in t.elems)
                out.append(t)
                continue
            out.append(self._key_type(k, t))
        return tuple(out)

    def _key_type(self, k: A.Expr, t: Type) -> Type:
        """The type a value of type ``t`` has as (a part of) a map key."""
        if isinstance(t, Ptr):
            return Ptr(t.target, t.user, t.spec)   # printed in hex, as bpftrace prints pointer keys
        if isinstance(t, Enum):
            return Enum(8, t.signed, enum_id=t.enum_id, spec=t.spec)
        if isinstance(t, Int):
            return t if isinstance(t, (TextInt, Bool)) else Int(8, t.signed, t.display)
        if isinstance(t, Tuple):
            return t
        if not isinstance(t, (Str, Stack, Inet, Record, Array)):
            raise self.error(k, f"a map key cannot be {t}")
        return t

    def map_use(self, ref: A.MapRef, keys: tuple[Type, ...]) -> MapInfo:
        name = "@" + ref.name
        m = self.maps.get(name)
        if m is None:
            m = self.maps[name] = MapInfo(name, pos=ref.pos)
        if m.keys is None:
            m.keys = keys
        elif len(m.keys) != len(keys):
            raise self.error(ref, f"{name} is used with {len(m.keys)} key(s) elsewhere, here with {len(keys)}")
        else:
            merged = []
            for i, (old, new) in enumerate(zip(m.keys, keys)):
                node = ref.keys[i] if len(ref.keys) == len(keys) else ref
                if _enum_and_int(old, new) or isinstance(old, Enum) and old != new:
                    old = new = Int(8, old.signed and new.signed)   # type: ignore[union-attr]
                if isinstance(old, Tuple) and isinstance(new, Tuple) and old != new:
                    # a tuple or record key widened (a longer string, a wider integer) or a record's
                    # fields in another order: one key type for both, as 0.23.2 (and upstream's records)
                    old = new = merge_tuples(old, new) or old
                if type(old) is not type(new) or isinstance(old, Tuple) and old != new:
                    raise self.error(node, f"{name}: key is {old} elsewhere, {new} here")
                merged.append(Str(max(old.size, new.size)) if isinstance(old, Str) else old)
            m.keys = tuple(merged)
        return m

    def map_value(self, node: A.Node, m: MapInfo, kind: str, value: Type | None) -> None:
        if isinstance(m.value, Tuple) and isinstance(value, Tuple) and m.kind == kind:
            merged = merge_tuples(m.value, value)   # (1, "ab") then (2, "abcd"): one wider tuple, as 0.23.2
            if merged is not None:
                m.value = value = merged
        if m.kind and m.kind != kind or (m.value is not None and value is not None
                                          and _held(kind, m.value) != _held(kind, value)):
            raise self.error(node, f"{m.name} holds {_held(m.kind, m.value)} values elsewhere; "
                                   f"here {_held(kind, value)}")
        syms = {getattr(t, "display", "") for t in (m.value, value)} & {"ksym", "usym"}
        if len(syms) == 2:      # both addresses, named from different tables: bpftrace's ksym_t and usym_t
            raise self.error(node, f"{m.name} holds {m.value.display} values elsewhere; here {value.display}")  # type: ignore[union-attr]
        m.kind = kind
        if value is not None:
            if _enum_and_int(m.value, value) or isinstance(value, Enum) and isinstance(m.value, Enum) \
                    and m.value.enum_id != value.enum_id:
                value = Int(8, value.signed)     # enums of two types, or an enum and an integer: integers
            if isinstance(m.value, Str) and isinstance(value, Str):
                value = Str(max(m.value.size, value.size))
            m.value = value

    def aggregate(self, c: Checked, call: A.Call, m: MapInfo) -> None:
        n = call.name
        want = {"count": 0, "sum": 1, "min": 1, "max": 1, "avg": 1, "stats": 1, "hist": 1, "lhist": 4, "tseries": 3}[n]
        if n == "tseries" and len(call.args) == 4:      # bpftrace 0.24: tseries(v, interval, n[, agg])
            want = 4
        if n == "hist" and len(call.args) == 2:    # bpftrace 0.20: hist(v, k), 2**k buckets per power of 2
            k = self.constant(c, call.args[1])
            if not 0 <= k <= 5:
                raise self.error(call.args[1], f"hist: the buckets per power of 2 are 2**k for k in 0..5, not {k}")
            if m.kind == "hist" and m.log2_k != k:
                raise self.error(call, f"{m.name}: hist() with k = {k} here and k = {m.log2_k} elsewhere")
            m.log2_k = k
            want = 2
        elif n == "hist" and m.kind == "hist" and m.log2_k:
            raise self.error(call, f"{m.name}: hist() with k = 0 here and k = {m.log2_k} elsewhere")
        if len(call.args) != want:
            raise self.error(call, f"{n}() takes {want} argument{'s' if want != 1 else ''}, not {len(call.args)}")
        for a in call.args[:1]:
            t = self.expr(c, a)
            if not isinstance(t, (Int, Ptr)):
                raise self.error(a, f"{n}() needs an integer, not {t}")
        if n == "lhist":
            lo, hi, step = (self.constant(c, a) for a in call.args[1:])
            if step <= 0 or hi <= lo:
                raise self.error(call, "lhist(value, min, max, step) needs min < max and step > 0")
            if (hi - lo) // step > 1000:
                raise self.error(call, "lhist: more than 1000 buckets")
            if m.lhist and m.lhist != (lo, hi, step):
                raise self.error(call, f"{m.name}: lhist bounds differ from elsewhere")
            m.lhist = (lo, hi, step)
        if n == "tseries":
            self.tseries(c, call, m)
            return
        self.map_value(call, m, n, None)
        c.types[id(call)] = Void()

    def tseries(self, c: Checked, call: A.Call, m: MapInfo) -> None:
        """tseries(v, interval_ns, num_intervals[, agg]) (bpftrace 0.24): the value kept in the bucket of
        its interval, the last num_intervals intervals; bpftrace 0.26's checks and words."""
        interval, num = (self.constant(c, a) for a in call.args[1:3])
        if interval <= 0:
            raise self.error(call, f"tseries() interval_ns must be >= 1 ({interval} provided)")
        if num <= 0:
            raise self.error(call, f"tseries() num_intervals must be >= 1 ({num} provided)")
        if num > 1000000:
            raise self.error(call, f"tseries() num_intervals must be < 1000000 ({num} provided)")
        agg = ""
        if len(call.args) == 4:
            if not isinstance(call.args[3], A.Str):
                raise self.error(call.args[3], "tseries() takes its aggregation function as a string literal")
            agg = call.args[3].value
            if agg not in ("avg", "max", "min", "sum"):
                raise self.error(call, "tseries() expects one of the following aggregation functions: avg, max, "
                                       f"min, sum (\"{agg}\" provided)")
        if m.tseries and m.tseries != (interval, num, agg):
            raise self.error(call, "Different tseries bounds in a single map unsupported")
        value = c.types[id(call.args[0])]
        signed = isinstance(value, Int) and value.signed or isinstance(m.value, Int) and m.value.signed
        m.tseries = (interval, num, agg)
        self.map_value(call, m, "tseries", None)
        m.value = Int(8, signed)    # as the values are reduced and printed: int64 or uint64
        c.types[id(call)] = Void()

    # -- expressions -----------------------------------------------------------------------

    def comptime_value(self, c: Checked, e: A.Call) -> int:
        """``comptime x`` (bpftrace 0.25): x's value, which must be known when the script is checked."""
        if len(e.args) != 1:
            raise self.error(e, "comptime takes one expression: comptime (x)")
        self.expr(c, e.args[0])
        v = self.fold(c, e.args[0], consts=True)
        if v is None:
            raise self.error(e.args[0], "Unable to resolve comptime expression (bpftrace's words): pycore "
                                        "knows literals, positional parameters, sizeof(), offsetof(), is_str() "
                                        "and the like, kfunc_exist() and operators on them when it checks")
        c.consts[id(e)] = v
        return v

    def fold(self, c: Checked, e: A.Expr, consts: bool) -> int | None:
        """``e``'s value when it is known as the script is checked, else None: literals and positional
        parameters, and with ``consts`` what the checker found out already (sizeof, is_str,
        kfunc_exist...: c.consts), under unary and binary operators (a string literal compares with
        another by its text). ``e`` must have been checked first."""
        if isinstance(e, A.Int):
            return e.value
        if isinstance(e, A.Positional):
            v = self.positional(e)
            return v if isinstance(v, int) else None
        if isinstance(e, A.Call) and e.name == "comptime" and len(e.args) == 1:
            return self.fold(c, e.args[0], consts)
        if consts and isinstance(e, (A.Call, A.Builtin)):
            return c.consts.get(id(e))
        if isinstance(e, A.Unary) and e.op in ("!", "-", "~"):
            v = self.fold(c, e.operand, consts)
            return None if v is None else {"!": lambda x: int(not x), "-": lambda x: -x, "~": lambda x: ~x}[e.op](v)
        if isinstance(e, A.Binary):
            texts = self._fold_text(c, e.left), self._fold_text(c, e.right)
            if e.op in ("==", "!=") and None not in texts:
                return int((texts[0] == texts[1]) == (e.op == "=="))
            a, b = self.fold(c, e.left, consts), self.fold(c, e.right, consts)
            if a is None or b is None:
                return None
            quot = (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)) if b else 0    # C's: toward zero
            ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: quot,
                   "%": lambda: a - b * quot if b else 0, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
                   "<<": lambda: a << b if 0 <= b < 64 else 0, ">>": lambda: a >> b if 0 <= b < 64 else 0,
                   "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
                   ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
                   "&&": lambda: int(bool(a) and bool(b)), "||": lambda: int(bool(a) or bool(b))}
            return ops[e.op]() if e.op in ops else None
        return None

    @staticmethod
    def _fold_text(c: Checked, e: A.Expr) -> str | None:
        """A string known when the script is checked: a literal, or a field of typeinfo(x)'s record
        (upstream's stdlib: ``if comptime (typeinfo(e).base_type == "int")``)."""
        if isinstance(e, A.Str):
            return e.value
        if isinstance(e, A.Field) and isinstance(e.expr, A.Call) and id(e.expr) in c.typeinfo:
            record = c.typeinfo[id(e.expr)]
            if e.name in record.names:
                value = record.elems[record.names.index(e.name)]
                return value.value if isinstance(value, A.Str) else None
        return None

    def constant(self, c: Checked, e: A.Expr) -> int:
        """An expression that must be known when the script is compiled (lhist bounds, unroll, a size):
        :meth:`fold`'s value, or the error. Named constants (a kernel enum's, a header's macro) are looked
        up on the way, so that the code generator, which asks again without BTF, finds them known."""
        self._name_constants(c, e)
        v = self.fold(c, e, consts=True)
        if v is None:
            raise self.error(e, "expected a constant integer here")
        return v

    def _name_constants(self, c: Checked, e: A.Expr) -> None:
        """c.consts of each named constant where :meth:`fold` looks: under unary and binary operators."""
        if isinstance(e, A.Builtin) and e.name not in _BUILTIN_TYPES and id(e) not in c.consts:
            v = self.named_constant(e, e.name)
            if v is not None:
                c.consts[id(e)] = v
        elif isinstance(e, A.Unary):
            self._name_constants(c, e.operand)
        elif isinstance(e, A.Binary):
            self._name_constants(c, e.left)
            self._name_constants(c, e.right)

    def expr(self, c: Checked, e: A.Expr) -> Type:
        t = self._expr(c, e)
        c.types[id(e)] = t
        return t

    def _expr(self, c: Checked, e: A.Expr) -> Type:
        if isinstance(e, A.Int):
            return BOOL if isinstance(e, A.Bool) else INT64
        if isinstance(e, A.Str):
            return Str(len(e.value.encode()) + 1)
        if isinstance(e, A.Positional):
            v = self.positional(e)
            if not isinstance(v, int):   # bpftrace: $N is a number unless str($N) says otherwise
                raise self.error(e, f'${e.index} used numerically but given "{v}". Try using str(${e.index}).')
            return INT64
        if isinstance(e, A.Builtin):
            return self.builtin(c, e)
        if isinstance(e, A.Var):
            return self.var_read(c, e)
        if isinstance(e, A.MapRef):
            keys = self.map_keys(c, e)
            name = "@" + e.name
            m = self.maps.get(name)
            if m is None:
                m = self.map_use(e, keys)
                return INT64  # read before any write: bpftrace reads 0
            self.map_use(e, keys)
            if m.kind == "str":
                return m.value or Str()
            if m.kind in PRINT_ONLY:
                raise self.error(e, f"{name} is a {m.kind}: it can be printed, not read as a value")
            return m.value if isinstance(m.value, (Int, Stack, Ptr)) else INT64
        if isinstance(e, A.Binary):
            return self.binary(c, e)
        if isinstance(e, A.Unary) and e.op == "&":
            return self.address_of(c, e)
        if isinstance(e, A.Unary):
            t = self.expr(c, e.operand)
            kind = self.aggregate_map(e.operand)
            if kind and e.op in ("!", "~", "-"):    # bpftrace 0.21+'s refusal
                raise self.error(e, f"The {e.op} operator can not be used on expressions of type '{kind}_t' "
                                    f"(cast it first: {e.op}(int64)@{e.operand.name})")
            if e.op == "*":
                if isinstance(t, Int) and not t.display:
                    return INT64    # as bpftrace: the int64 at that address (loads.bt's *kaddr("avenrun"))
                if not isinstance(t, Ptr):
                    raise self.error(e, f"cannot dereference {t}")
                return self.pointee(e, t)
            if e.op == "!":
                return INT64
            if e.op in ("-", "~"):
                if not isinstance(t, Int):
                    raise self.error(e, f"'{e.op}' needs an integer, not {t}")
                return INT64 if e.op == "-" else t
            raise self.error(e, f"unknown operator {e.op}")
        if isinstance(e, A.Ternary):
            self.condition(c, e.cond, "ternary")
            a, b = self.expr(c, e.then), self.expr(c, e.else_)
            if type(a) is not type(b) and not (isinstance(a, (Int, Ptr)) and isinstance(b, (Int, Ptr))):
                raise self.error(e, f"the two sides of ?: differ: {a} and {b}")
            if isinstance(a, Str):
                return Str(max(a.size, b.size))
            return a
        if isinstance(e, A.Cast):
            return self.cast(c, e)
        if isinstance(e, A.Field):
            return self.field(c, e)
        if isinstance(e, A.Index):
            return self.index(c, e)
        if isinstance(e, A.Call):
            return self.call(c, e, statement=False)
        if isinstance(e, A.IncDec):
            return self.incdec(c, e)
        if isinstance(e, A.Tuple):
            elems = tuple(self.expr(c, x) for x in e.elems)
            for x, t in zip(e.elems, elems):
                if isinstance(t, Void):
                    raise self.error(x, f"a {'record' if e.names else 'tuple'} cannot hold {t}")
            return tuple_type(elems, e.names)
        raise self.error(e, f"unsupported expression {type(e).__name__}")

    def binary(self, c: Checked, e: A.Binary) -> Type:
        a, b = self.expr(c, e.left), self.expr(c, e.right)
        op = e.op
        if op in ("==", "!=") and isinstance(a, Str) and isinstance(b, Str):
            return INT64
        if op in ("==", "!=") and isinstance(a, Tuple) and isinstance(b, Tuple):
            # tuples and records (bpftrace 0.25): as the type that holds both (a string as long as the
            # longer, a record's fields by name), element by element
            merged = a if a == b else merge_tuples(a, b)
            if merged is None:
                raise self.error(e, f"'{op}' compares tuples of one shape (as many elements, of one kind each; "
                                    f"a record's names), not {a} and {b}")
            c.merged[id(e)] = merged
            return INT64
        if op in ("==", "!=") and (is_aggregate(a) or isinstance(a, Buffer)) and (is_aggregate(b) or isinstance(b, Buffer)):
            if type(a) is not type(b) or a.size != b.size:   # bpftrace: the same type and size, byte for byte
                raise self.error(e, f"'{op}' compares two values of one type and size, not {a} and {b}")
            return INT64
        if op in ("&&", "||"):
            return INT64
        if isinstance(a, TextInt) or isinstance(b, TextInt):
            raise self.error(e, f"Type mismatch for '{op}': comparing '{a}' with '{b}'")
        for side, t in ((e.left, a), (e.right, b)):
            if not isinstance(t, (Int, Ptr)):
                raise self.error(side, f"'{op}' needs integers, not {t}" +
                                 (" (compare strings with == or strncmp)" if isinstance(t, Str) else ""))
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return INT64
        if isinstance(a, Ptr) and op in ("+", "-") and isinstance(b, Int):
            return a   # pointer arithmetic in steps of the pointee's size, as C does
        if isinstance(b, Ptr) and op == "+" and isinstance(a, Int):
            return b
        if isinstance(a, Ptr) and isinstance(b, Ptr) and op not in ("&", "|", "^"):
            raise self.error(e, f"'{op}' cannot be used on two pointers ({a} and {b})")
        signed = getattr(a, "signed", False) and getattr(b, "signed", False)
        return Int(8, signed)

    def index(self, c: Checked, e: A.Index) -> Type:
        t = self.expr(c, e.expr)
        it = self.expr(c, e.index)
        if not isinstance(it, Int):
            raise self.error(e.index, f"an index must be an integer, not {it}")
        if isinstance(t, Ptr):
            return self.pointee(e, t)
        if isinstance(t, Array):
            return from_btf(t.spec, t.elem_id, user=t.user)
        if isinstance(t, Str):
            return Int(1, True)
        raise self.error(e, f"cannot index {t}")


class _Unscoped(Exception):
    """A variable read after the block that made it ended, in a script with no 'let': checked again
    without block scoping, as bpftrace 0.17 would run it."""


class _Variable:
    """One scratch variable: its key in Checked.variables, whether a let made it, where, and the type
    its declaration fixed (None: the first assignment's)."""

    __slots__ = ("key", "declared", "at", "fixed")

    def __init__(self, key: str, declared: bool, at: A.Node) -> None:
        self.key, self.declared, self.at = key, declared, at
        self.fixed: Type | None = None


def _literal(e: A.Expr) -> int | None:
    """The value of an integer literal, negated or not (``300``, ``-1``); None for anything else."""
    if isinstance(e, A.Int):
        return e.value
    if isinstance(e, A.Unary) and e.op == "-" and isinstance(e.operand, A.Int):
        return -e.operand.value
    return None


def _enum_and_int(a: Type | None, b: Type | None) -> bool:
    """One is an enum's value and the other a plain integer (their mix is a plain integer)."""
    return isinstance(a, Int) and isinstance(b, Int) and (type(a) is Enum) != (type(b) is Enum) \
        and not isinstance(a, TextInt) and not isinstance(b, TextInt)


def _held(kind: str, value: Type | None) -> str:
    """What a map holds, for messages: its kind, or inet or mac (which share the str kind's buffers)."""
    return str(value) if isinstance(value, Inet) else kind
