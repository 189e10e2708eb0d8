"""The checker: every expression of a script typed against this kernel, before anything loads.

For each probe block and each :class:`~pycore.lang.probes.Target` it
expands to, the checker resolves names (builtins, ``args.NAME``, ``$x``,
``@m``), follows fields and casts through BTF, types every expression, and
collects what the runtime needs: each map's key and value shape, each printf
and action with its argument types.  Errors point at the script's
line:column and say what exists nearby (``d_nmae``: did you mean ``d_name``).
Nothing here emits code; :mod:`pycore.lang.codegen` walks the same tree
with these types.

Over 600 lines as one module: it is one concept, the typing rules of the
language, and each rule refers to the others (a field's type feeds a map
key, a cast, a printf check).
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.errors import CheckError, close_matches
from pycore.lang.probes import CtxField, Target
from pycore.lang.types import (COMM, INT64, STRING_SIZE, UINT64, USYM, Array, Buffer, is_aggregate, Inet, Int, Mac, Ptr, Record,
                                Stack, Str, TextInt, Timestamp, CgroupPath, Username, Tuple, Type, Void, from_btf, tuple_type, type_name, width)
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec

    from pycore.lang.macros import Macros

__all__ = ["MapInfo", "Checked", "Checker", "AGGREGATES", "kernel_address"]

# value kinds of maps filled by aggregation functions
AGGREGATES = ("count", "sum", "min", "max", "avg", "stats", "hist", "lhist")

_BUILTIN_TYPES: dict[str, Type] = {
    "pid": UINT64, "tid": UINT64, "uid": UINT64, "gid": UINT64, "nsecs": UINT64, "elapsed": UINT64,
    "cpu": UINT64, "comm": COMM, "cgroup": UINT64, "rand": UINT64, "jiffies": UINT64, "numaid": UINT64,
    "username": Username(),
}
_BPFTRACE_INTS = {f"{u}int{b}": f"{'u' if u else 's'}{b}" for u in ("", "u") for b in (8, 16, 32, 64)}
_OTHER_BUILTINS = ("func", "probe", "curtask", "retval", "args", "kstack", "ustack", "cpid", "ctx")
_NO_VALUE_CALLS = {"printf", "print", "exit", "delete", "clear", "zero", "time", "join", "system", "signal", "cat",
                   "override"}


@record
class MapInfo:
    """What a map holds, agreed by every use in the script."""

    name: str
    keys: tuple[Type, ...] | None = None      # None: not keyed yet; () scalar map
    kind: str = ""                             # "int", "str", or one of AGGREGATES
    value: Type | None = None                  # for "int"/"str"
    lhist: tuple[int, int, int] | None = None  # (min, max, step)
    pos: A.Pos | None = None

    @property
    def key_size(self) -> int:
        return sum(_slot(t) for t in self.keys or ()) or 8


_slot = width


@record
class Checked:
    """The checker's result for one (probe block, target) pair."""

    block: A.ProbeBlock
    target: Target
    types: dict[int, Type] = field(default_factory=dict)       # id(expr node) -> its type
    consts: dict[int, int] = field(default_factory=dict)       # id(node) -> value known when checked (sizeof)
    ip_relative: dict[int, int] = field(default_factory=dict)  # id(node) -> its distance from the probe's ip (uaddr)
    blobs: dict[int, bytes] = field(default_factory=dict)      # id(node) -> bytes known when checked (pton)
    variables: dict[str, Type] = field(default_factory=dict)   # $x -> type

    def type_of(self, node: A.Expr) -> Type:
        return self.types[id(node)]


class Checker:
    """Types a whole program; one instance per script run."""

    def __init__(self, spec_loader, params: tuple[str, ...] = (), *, unsafe: bool = False,  # noqa: ANN001
                 filename: str = "", source: str = "", program: A.Program | None = None) -> None:
        self._spec_loader = spec_loader
        # the script's '#' lines, read for macros only when a name needs them (pycore.lang.macros)
        self.has_head = program is not None and bool(program.includes or program.directives)
        self.program = program
        self._macros: Macros | None = None
        self._named: dict[str, int | None] = {}   # name -> its enum or macro value: each looked up once
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

    @property
    def spec(self) -> Spec:
        """The kernel's BTF; once the script's C declarations are read (at once when it has definitions,
        on the first type name otherwise), them as split BTF on it, their names hiding the kernel's."""
        if self._spec is None:
            self._spec = self._spec_loader()
            if self.program is not None and self.program.c_definitions:
                self.types_spec()
        return self._spec

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

    def error(self, node: A.Node, message: str) -> CheckError:
        pos = node.pos
        return CheckError(message, pos.line, pos.col, self.filename, self.source)

    # -- entry -----------------------------------------------------------------------------

    def check(self, block: A.ProbeBlock, target: Target) -> Checked:
        if self._declared is False and self.program is not None and self.program.c_definitions:
            self.declared()      # a declaration that does not parse is an error, used or not
        c = Checked(block, target)
        if block.predicate is not None:
            self.condition(c, block.predicate, "predicate")
        self._loops = 0
        self.stmts(c, block.body)
        return c

    # -- statements ------------------------------------------------------------------------

    def stmts(self, c: Checked, body: list[A.Stmt]) -> None:
        for s in body:
            self.stmt(c, s)

    def stmt(self, c: Checked, s: A.Stmt) -> None:
        if isinstance(s, A.ExprStmt):
            e = s.expr
            if isinstance(e, A.Call):
                self.call(c, e, statement=True)
            else:
                self.expr(c, e)
        elif isinstance(s, A.Assign):
            self.assign(c, s)
        elif isinstance(s, A.IncDec):
            self.incdec(c, s)
        elif isinstance(s, A.If):
            self.condition(c, s.cond, "if()")
            self.stmts(c, s.then)
            if s.else_:
                self.stmts(c, s.else_)
        elif isinstance(s, A.While):
            self.condition(c, s.cond, "while()")
            self._loops += 1
            self.stmts(c, s.body)
            self._loops -= 1
        elif isinstance(s, A.Unroll):
            n = self.constant(c, s.count)
            if not 1 <= n <= 100:
                raise self.error(s, f"unroll count must be 1..100, not {n}")
            self.stmts(c, s.body)
        elif isinstance(s, A.Block):
            self.stmts(c, s.body)
        elif isinstance(s, A.Return):
            pass
        elif isinstance(s, (A.Break, A.Continue)):
            if not self._loops:
                raise self.error(s, f"{type(s).__name__.lower()} used outside of a loop")
        else:
            raise self.error(s, f"unsupported statement {type(s).__name__}")

    def condition(self, c: Checked, e: A.Expr, where: str) -> None:
        """A predicate's, if's, while's or ternary's condition: an integer or a pointer, as in bpftrace."""
        t = self.expr(c, e)
        if not isinstance(t, (Int, Ptr)) or isinstance(t, TextInt):
            raise self.error(e, f"Invalid condition in {where}: {t}")

    def incdec(self, c: Checked, s: A.IncDec) -> Type:
        """``x++``, ``--@m[k]``: a statement, or an expression whose value is the old (postfix) or
        new (prefix) value, as in bpftrace; a pointer variable steps by its pointee's size, as in C."""
        target = s.target
        if isinstance(target, A.Var):
            t = c.variables.get(target.name)
            if t is None:
                c.variables[target.name] = INT64
            elif not isinstance(t, (Int, Ptr)) or isinstance(t, TextInt):
                raise self.error(s, f"${target.name} is {t}: {s.op} needs an integer or a pointer")
            c.types[id(target)] = c.variables[target.name]
            return c.variables[target.name]
        if isinstance(target, A.MapRef):
            keys = self.map_keys(c, target)
            m = self.map_use(target, keys)
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
            vt = self.expr(c, value)
            if s.op != "=" and not isinstance(vt, Int):
                raise self.error(value, f"'{s.op}' needs an integer, not {vt}")
            if isinstance(vt, Inet):
                self.map_value(target, m, "str", vt)
            elif isinstance(vt, Str):
                self.map_value(target, m, "str", Str(max(vt.size, STRING_SIZE)))
            elif isinstance(vt, (Int, Ptr)):
                self.map_value(target, m, "int", INT64 if isinstance(vt, Ptr) else vt)
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
            old = c.variables.get(target.name)
            if s.op != "=":
                stepped = isinstance(old, Ptr) and s.op in ("+=", "-=")   # C's pointer arithmetic
                if old is None or not isinstance(old, Int) and not stepped or not isinstance(vt, Int):
                    raise self.error(s, f"'{s.op}' needs an integer ${target.name}")
                if stepped:
                    vt = old
            if old is not None and type(old) is not type(vt) and not (isinstance(old, Int) and isinstance(vt, Ptr)) \
                    or isinstance(old, Tuple) and old != vt or is_aggregate(old) and old != vt:
                raise self.error(s, f"${target.name} holds {old}, cannot assign {vt}")
            if isinstance(vt, Str) and isinstance(old, Str) and old.size < vt.size:
                vt = Str(vt.size)
            c.variables[target.name] = old if (old is not None and isinstance(old, Str) and old.size >= vt.size) else vt
            c.types[id(target)] = c.variables[target.name]
        else:
            raise self.error(s, "can only assign to a $variable or a @map")

    # -- maps ------------------------------------------------------------------------------

    def map_keys(self, c: Checked, ref: A.MapRef) -> tuple[Type, ...]:
        out = []
        for k in ref.keys:
            t = self.expr(c, k)
            if isinstance(t, Ptr):
                t = Ptr(t.target, t.user, t.spec)   # printed in hex, as bpftrace prints pointer keys
            elif isinstance(t, Int):
                t = t if isinstance(t, TextInt) else Int(8, t.signed, t.display)
            elif isinstance(t, Tuple):
                raise self.error(k, f"a map key cannot be a tuple {t}: give its elements as the key, @m[a, b]")
            elif not isinstance(t, (Str, Stack, Inet, Record, Array)):
                raise self.error(k, f"a map key cannot be {t}")
            out.append(t)
        return tuple(out)

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
            for old, new, node in zip(m.keys, keys, ref.keys):
                if type(old) is not type(new):
                    raise self.error(node, f"{name}: key is {old} elsewhere, {new} here")
                merged.append(Str(max(old.size, new.size)) if isinstance(old, Str) else old)
            m.keys = tuple(merged)
        return m

    def map_value(self, node: A.Node, m: MapInfo, kind: str, value: Type | None) -> None:
        if m.kind and m.kind != kind or (m.value is not None and value is not None
                                          and _held(kind, m.value) != _held(kind, value)):
            raise self.error(node, f"{m.name} holds {_held(m.kind, m.value)} values elsewhere; "
                                   f"here {_held(kind, value)}")
        m.kind = kind
        if value is not None:
            if isinstance(m.value, Str) and isinstance(value, Str):
                value = Str(max(m.value.size, value.size))
            m.value = value

    def aggregate(self, c: Checked, call: A.Call, m: MapInfo) -> None:
        n = call.name
        want = {"count": 0, "sum": 1, "min": 1, "max": 1, "avg": 1, "stats": 1, "hist": 1, "lhist": 4}[n]
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
        self.map_value(call, m, n, None)
        c.types[id(call)] = Void()

    # -- expressions -----------------------------------------------------------------------

    def constant(self, c: Checked, e: A.Expr) -> int:
        """An expression that must be known when the script is compiled (lhist bounds, unroll)."""
        if isinstance(e, A.Int):
            return e.value
        if isinstance(e, A.Positional):
            v = self.positional(e)
            if isinstance(v, int):
                return v
        if isinstance(e, A.Builtin) and e.name not in _BUILTIN_TYPES:
            v = c.consts.get(id(e))   # known already: the code generator asks again, without BTF
            if v is None:
                v = self.named_constant(e, e.name)
            if v is not None:
                c.consts[id(e)] = v
                return v
        if isinstance(e, A.Unary) and e.op == "-":
            return -self.constant(c, e.operand)
        if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/"):
            a, b = self.constant(c, e.left), self.constant(c, e.right)
            return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[e.op]
        raise self.error(e, "expected a constant integer here")

    def positional(self, e: A.Positional) -> int | str:
        """``$N`` as a number when its text is one (C's spelling: 16, 0x10, 020, -5), else its text;
        ``$#`` the count. A missing parameter reads as 0 (and "" in str()), as in bpftrace."""
        if e.index == 0:
            return len(self.params)
        if e.index > len(self.params):
            return 0
        text = self.params[e.index - 1]
        n = c_integer(text)
        return text if n is None else n

    def positional_text(self, e: A.Positional) -> str:
        """``str($N)``: the parameter as given ("0x10" stays "0x10"), "" when missing."""
        if e.index == 0:
            return str(len(self.params))
        return self.params[e.index - 1] if e.index <= len(self.params) else ""

    def expr(self, c: Checked, e: A.Expr) -> Type:
        t = self._expr(c, e)
        c.types[id(e)] = t
        return t

    def _expr(self, c: Checked, e: A.Expr) -> Type:
        if isinstance(e, A.Int):
            return INT64
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
            t = c.variables.get(e.name)
            if t is None:
                near = close_matches(e.name, list(c.variables), n=1)
                hint = f" (did you mean ${near[0]}?)" if near else ""
                raise self.error(e, f"${e.name} is used before it is assigned{hint}")
            return t
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
            if m.kind in ("hist", "lhist", "stats"):
                raise self.error(e, f"{name} is a {m.kind}: it can be printed, not read as a value")
            return m.value if isinstance(m.value, (Int, Stack)) else INT64
        if isinstance(e, A.Binary):
            return self.binary(c, e)
        if isinstance(e, A.Unary):
            t = self.expr(c, e.operand)
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
            if e.op == "&":
                raise self.error(e, "'&' (address of) is not supported")
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
                    raise self.error(x, f"a tuple cannot hold {t}")
            return tuple_type(elems)
        raise self.error(e, f"unsupported expression {type(e).__name__}")

    def binary(self, c: Checked, e: A.Binary) -> Type:
        a, b = self.expr(c, e.left), self.expr(c, e.right)
        op = e.op
        if op in ("==", "!=") and isinstance(a, Str) and isinstance(b, Str):
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

    def pointee(self, node: A.Node, p: Ptr) -> Type:
        if p.target == 0 or p.spec is None:
            raise self.error(node, "cannot dereference a pointer of unknown type: cast it first, e.g. (struct path *)arg0")
        t = from_btf(p.spec, p.target, user=p.user)
        if isinstance(t, Void):
            raise self.error(node, "cannot dereference a void pointer: cast it first")
        return t

    def cast(self, c: Checked, e: A.Cast) -> Type:
        inner = self.expr(c, e.expr)
        tn = e.type
        name = tn.name.strip()
        ints = _C_INTS
        if not isinstance(inner, (Int, Ptr)):
            raise self.error(e, f"cannot cast {inner} to {name}{' *' * tn.pointer_depth}")
        if tn.pointer_depth == 0:
            if name in ints:
                return Int(*ints[name])
            raise self.error(e, f"cannot cast to {name} (cast to an integer type, or to a pointer: ({name} *))")
        # an address from a register or an integer field points where the probe's code runs, as in
        # bpftrace: user memory in uprobes and USDT, kernel memory elsewhere (uptr()/kptr() say otherwise)
        user = inner.user if isinstance(inner, Ptr) else c.target.kind in USER_PROBES
        target, spec = self.named_type(c, e, name)
        for _ in range(tn.pointer_depth - 1):
            target = self._pointer_to(target, spec)
        return Ptr(target, user, spec)

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
                    found = dbg.named(word if word in kinds and rest else "typedef", plain)
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

    def args_field(self, c: Checked, e: A.Field) -> Type:
        c.types[id(e.expr)] = Void()
        f = c.target.args.get(e.name)
        if f is None:
            known = list(c.target.args)
            near = close_matches(e.name, known, n=1)
            if not known and c.target.kind in ("uprobe", "uretprobe"):
                raise self.error(e, f"{c.target.probe} has no args{self._why_no_args(c.target)} (use arg0, arg1, ...)")
            hint = f" (did you mean {near[0]!r}?)" if near else f" (it has: {', '.join(known) or 'none'})"
            raise self.error(e, f"{c.target.probe} has no argument {e.name!r}{hint}")
        if f.pointee and isinstance(f.type, Ptr) and not f.type.target:
            word, _, rest = f.pointee.partition(" ")
            from btf.kinds import Kind

            ids = self.types_spec().ids_named(rest, (Kind.STRUCT,) if word == "struct" else (Kind.UNION,))
            if ids:
                return Ptr(ids[0], f.type.user, self.spec)
        return f.type

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

    def builtin(self, c: Checked, e: A.Builtin) -> Type:
        name = e.name
        tgt = c.target
        if name in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[name]
        if name == "cpid":
            if not self.cpid:
                raise self.error(e, "cpid is the pid of the -c command: run with -c CMD")
            return UINT64
        if name in ("func", "probe"):
            return Str(max(len((tgt.func if name == "func" else tgt.probe).encode()) + 1, 8))
        if name == "curtask":
            from btf.kinds import Kind

            ids = self.types_spec().ids_named("task_struct", (Kind.STRUCT,))   # a declared one hides the kernel's
            return Ptr(ids[0] if ids else 0, False, self.spec)
        if name == "ctx":
            return self.ctx(e, tgt)
        if name == "retval":
            if tgt.retval is None:
                raise self.error(e, f"retval is only known in return probes (kretfunc, kretprobe, uretprobe), not in {tgt.probe}")
            return tgt.retval.type
        if name == "args":
            if not tgt.args:
                raise self.error(e, f"{tgt.probe} has no args{self._why_no_args(tgt)} (use arg0, arg1, ...)")
            return Void()
        if name in ("kstack", "ustack"):
            return Stack(name == "ustack")
        if name.startswith("sarg") and name[4:].isdigit():
            if tgt.kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe"):
                raise self.error(e, f"The {name} builtin can only be used with 'kprobes' and 'uprobes' probes")
            return INT64
        if name.startswith("arg") and name[3:].isdigit():
            i = int(name[3:])
            if tgt.kind in ("kfunc", "kretfunc", "tracepoint"):
                raise self.error(e, f"{tgt.kind} probes name their arguments: use args.NAME "
                                    f"({', '.join(tgt.args) or 'none'})")
            if i >= len(tgt.argn):
                raise self.error(e, f"{tgt.probe} has {len(tgt.argn)} argument(s): no {name}")
            return tgt.argn[i].type
        value = self.named_constant(e, name)
        if value is not None:
            c.consts[id(e)] = value
            return INT64
        near = close_matches(name, [*_BUILTIN_TYPES, *_OTHER_BUILTINS], n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        where = "nor an enum value in this kernel's BTF"
        if self.has_head:
            missing = self._macros.missing if self._macros is not None else []
            where = ("an enum value in this kernel's BTF, nor a macro of the script's #define and #include lines"
                     + (f" (not found here: {', '.join(missing)})" if missing else ""))
        raise self.error(e, f"unknown identifier {name!r}: not a builtin, {where}{hint}")

    @staticmethod
    def _why_no_args(tgt: Target) -> str:
        """Why a uprobe has no typed args: its binary has no DWARF (and which package would give it)."""
        if tgt.kind not in ("uprobe", "uretprobe"):
            return ""
        path = tgt.attach[1]
        if tgt.debug is not None:
            return f": {path}'s DWARF does not describe {tgt.func}"
        from pycore.elf.debugfile import debug_package_hint

        return f": {path} has no DWARF debug info; {debug_package_hint(path)}"

    def ctx(self, e: A.Builtin, tgt: Target) -> Type:
        """``ctx``: the probe's context, a ``struct pt_regs *`` in the probes that have registers, as in
        bpftrace 0.17 (which refuses it in tracepoints: their fields are ``args``)."""
        from btf.kinds import Kind

        if tgt.kind == "tracepoint":
            raise self.error(e, "Use args instead of ctx in tracepoint")
        if tgt.kind == "iter":     # struct bpf_iter__task: ctx->task, ctx->meta (task_file: ->fd, ->file)
            ids = self.spec.ids_named(f"bpf_iter__{tgt.func}", (Kind.STRUCT,))
            return Ptr(ids[0] if ids else 0, False, self.spec)
        if tgt.kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "usdt"):
            raise self.error(e, f"ctx is the registers of kprobe, uprobe and usdt probes; {tgt.kind} probes have none "
                                "(use args)")
        ids = self.spec.ids_named("pt_regs", (Kind.STRUCT,))
        return Ptr(ids[0] if ids else 0, False, self.spec)

    def named_constant(self, node: A.Node, name: str) -> int | None:
        """A C enum constant of the kernel's BTF (``TCP_CLOSE``), else an integer macro of the script's
        head (``AF_INET``), as bpftrace reads them; None if neither."""
        if name in self._named:      # a wildcard's every target checks the block again
            return self._named[name]
        value = self._named[name] = self._named_constant(node, name)
        return value

    def _named_constant(self, node: A.Node, name: str) -> int | None:
        if not name.isidentifier():
            return None
        found = self.spec.enumerator(name)      # a scan of BTF's enums: 3-25 ms
        if found is not None:
            return found[1]
        if not self.has_head:
            return None
        from pycore.lang.macros import MacroError

        try:
            value = self.head_macros().value(name)
        except MacroError as err:   # glibc's '#define MSG_PEEK MSG_PEEK' names its header's enum constant
            found = self._header_enumerator(name)
            if found is None:
                raise self.error(node, str(err)) from None
            return found
        return value if value is not None else self._header_enumerator(name)

    def _header_enumerator(self, name: str) -> int | None:
        """An enum constant of the script's #include'd headers (read as declarations), or None."""
        if not self.program.includes or self.declared() is None:
            return None
        found = self.spec.enumerator(name)
        return None if found is None else found[1]

    # -- calls -----------------------------------------------------------------------------

    def call(self, c: Checked, e: A.Call, statement: bool) -> Type:
        n = e.name
        args = e.args
        if n in AGGREGATES:
            raise self.error(e, f"{n}() is assigned to a map: @name = {n}(...)")
        if n in _NO_VALUE_CALLS and not statement:
            raise self.error(e, f"{n}() gives no value")
        if n in ("system", "signal", "override") and not self.unsafe:
            raise self.error(e, f"{n}() is unsafe: {self.unsafe_hint}")
        if n == "printf":
            if not args or not isinstance(args[0], A.Str):
                raise self.error(e, "printf() needs a format string first")
            types = [self.expr(c, a) for a in args[1:]]
            for a, t in zip(args[1:], types):
                if isinstance(t, (Record, Array, Void, Tuple)):
                    raise self.error(a, f"printf cannot print {t}" + (": print() it, or give its elements, $t.0"
                                                                      if isinstance(t, Tuple) else ""))
            from pycore.lang.output import validate_format

            why = validate_format(args[0].value, types)
            if why:
                raise self.error(args[0], why)
            return Void()
        if n == "print":
            if not args or len(args) > 3:
                raise self.error(e, "print() takes a map or a value")
            a0 = args[0]
            if isinstance(a0, A.MapRef) and not a0.keys:
                if "@" + a0.name not in self.maps:
                    self.maps["@" + a0.name] = MapInfo("@" + a0.name, pos=a0.pos)
                c.types[id(a0)] = Void()
            else:
                t = self.expr(c, a0)
                if isinstance(t, Void) and not (isinstance(a0, A.Builtin) and a0.name == "args"):
                    raise self.error(a0, "nothing to print")
            return Void()
        if n in ("exit",):
            if args:
                raise self.error(e, "exit() takes no argument")
            return Void()
        if n in ("delete",):
            if len(args) != 1 or not isinstance(args[0], A.MapRef):
                raise self.error(e, "delete() takes a map element: delete(@m[key])")
            keys = self.map_keys(c, args[0])
            self.map_use(args[0], keys)
            c.types[id(args[0])] = Void()
            return Void()
        if n in ("clear", "zero"):
            if len(args) != 1 or not isinstance(args[0], A.MapRef) or args[0].keys:
                raise self.error(e, f"{n}() takes a whole map: {n}(@m)")
            if "@" + args[0].name not in self.maps:
                self.maps["@" + args[0].name] = MapInfo("@" + args[0].name, pos=args[0].pos)
            c.types[id(args[0])] = Void()
            return Void()
        if n == "time":
            if len(args) > 1 or (args and not isinstance(args[0], A.Str)):
                raise self.error(e, "time() takes an optional format string")
            return Void()
        if n == "str":
            if not 1 <= len(args) <= 2:
                raise self.error(e, "str(pointer[, length])")
            if isinstance(args[0], A.Positional):     # str($1): the parameter's text, whatever it holds
                t = c.types[id(args[0])] = Str(len(self.positional_text(args[0]).encode()) + 1)
                return t if len(args) == 1 else Str(min(t.size, self.constant(c, args[1]) + 1))
            t = self.expr(c, args[0])
            if isinstance(t, Str):
                return t
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"str() needs a pointer, not {t}")
            size = STRING_SIZE
            if len(args) == 2:
                size = self.constant(c, args[1]) + 1 if not _is_runtime(args[1]) else STRING_SIZE
                if _is_runtime(args[1]):
                    self.expr(c, args[1])
                size = max(1, min(size, 1024))
            return Str(size)
        if n in ("strncmp",):
            if len(args) != 3:
                raise self.error(e, "strncmp(a, b, n)")
            for a in args[:2]:
                if not isinstance(self.expr(c, a), Str):
                    raise self.error(a, "strncmp() compares strings")
            self.constant(c, args[2])
            return INT64
        if n in ("strcontains",):
            if len(args) != 2:
                raise self.error(e, "strcontains(haystack, needle)")
            hay, needle = (self.expr(c, a) for a in args)
            for a, t in zip(args, (hay, needle)):
                if not isinstance(t, Str):
                    raise self.error(a, "strcontains() takes strings")
            # the search is unrolled: bound its size well below the verifier's limits
            work = hay.size * (len(args[1].value) if isinstance(args[1], A.Str) else needle.size)
            if work > 16384:
                raise self.error(e, f"strcontains(): a {hay.size}-byte haystack and a {needle.size}-byte needle "
                                    "are too long to search; shorten them with str(x, n)")
            return INT64
        if n == "strftime":
            if len(args) != 2:
                raise self.error(e, f"strftime() requires 2 arguments ({len(args)} provided)")
            if not isinstance(args[0], A.Str):
                raise self.error(args[0], f"strftime() expects a string literal ({self.expr(c, args[0])} provided)")
            t = self.expr(c, args[1])
            if not _integer(t):
                raise self.error(args[1], f"strftime() only supports integer arguments ({t} provided)")
            return Timestamp(fmt=args[0].value)
        if n == "cgroupid":
            if len(args) != 1 or not isinstance(args[0], A.Str):
                raise self.error(e, 'cgroupid("/sys/fs/cgroup/PATH")')
            from pycore.kernel.cgroup import cgroup_id

            try:
                c.consts[id(e)] = cgroup_id(args[0].value)
            except ValueError as err:
                raise self.error(args[0], f"cgroupid: {err}") from None
            except OSError as err:
                raise self.error(args[0], f"cgroupid: {args[0].value}: {err.strerror}") from None
            return UINT64
        if n == "cgroup_path":
            if not 1 <= len(args) <= 2:
                raise self.error(e, f"cgroup_path() requires 1 or 2 arguments ({len(args)} provided)")
            t = self.expr(c, args[0])
            if not _integer(t):
                raise self.error(args[0], f"cgroup_path() only supports integer arguments ({t} provided)")
            if len(args) == 2 and not isinstance(args[1], A.Str):
                raise self.error(args[1], "cgroup_path(): the filter must be a string literal")
            return CgroupPath(filter=args[1].value if len(args) == 2 else "*")
        if n in ("ksym", "usym"):
            if len(args) != 1:
                raise self.error(e, f"{n}(address)")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"{n}() needs an address")
            return USYM if n == "usym" else Int(8, False, n)
        if n == "kaddr":
            if len(args) != 1 or not isinstance(args[0], A.Str):
                raise self.error(e, 'kaddr("symbol")')
            if kernel_address(args[0].value) is None:
                raise self.error(args[0], f"kaddr: no kernel symbol {args[0].value!r} in /proc/kallsyms"
                                          " (or its addresses are hidden: kptr_restrict)")
            return UINT64
        if n == "reg":
            return self.reg(c, e)
        if n == "uaddr":
            return self.uaddr(c, e)
        if n == "pton":
            return self.pton(c, e)
        if n in ("uptr", "kptr"):
            if len(args) != 1:
                raise self.error(e, f"{n}() takes one argument: an address or a pointer")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"{n}() expects an address or a pointer, not {t}")
            user = n == "uptr"
            return Ptr(t.target, user, t.spec) if isinstance(t, Ptr) else Ptr(0, user)
        if n == "bswap":
            if len(args) != 1:
                raise self.error(e, "bswap() takes one integer")
            t = self.expr(c, args[0])
            if not isinstance(t, Int):
                raise self.error(args[0], f"bswap() only supports integer arguments, not {t}")
            return Int(t.size, False)
        if n == "ntop":
            return self.ntop(c, e)
        if n == "buf":
            return self.buf(c, e)
        if n == "macaddr":
            if len(args) != 1:
                raise self.error(e, "macaddr() takes one argument: 6 bytes, or a pointer to them")
            t = self.expr(c, args[0])
            if isinstance(t, (Str, Array)) and t.size != 6:
                raise self.error(args[0], f"macaddr() argument must be 6 bytes in size, not {t.size}")
            if not isinstance(t, (Array, Ptr)):
                raise self.error(args[0], f"macaddr() only supports array or pointer arguments, not {t}")
            return Mac()
        if n in ("kstack", "ustack"):
            limit, mode = 127, ""
            for i, a in enumerate(args):
                if i == 0 and isinstance(a, A.Builtin) and a.name in ("perf", "bpftrace"):
                    mode = "" if a.name == "bpftrace" else a.name
                    continue
                limit = self.constant(c, a)
                if not 1 <= limit <= 1024:
                    raise self.error(a, f"{n}() takes a limit of 1..1024 frames, not {limit}")
            return Stack(n == "ustack", limit, mode=mode)
        if n == "join":
            if not args:
                raise self.error(e, "join(array[, separator])")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)) or (isinstance(t, Int) and t.display):
                raise self.error(args[0], f"join() only supports int or pointer arguments ({t} provided)")
            return Void()
        if n in ("system", "signal"):
            for a in args:
                self.expr(c, a)
            return Void()
        if n == "override":
            if c.target.kind != "kprobe":
                raise self.error(e, f"override() can only be used in kprobes, not in {c.target.probe}")
            if len(args) != 1 or not isinstance(self.expr(c, args[0]), Int):
                raise self.error(e, "override(integer): the value the probed function returns instead")
            return Void()
        if n == "path":
            if c.target.kind not in ("kfunc", "kretfunc"):
                raise self.error(e, "path() can only be used in kfunc and kretfunc probes (the kernel's bpf_d_path "
                                    f"helper), not in {c.target.probe}")
            t = self.expr(c, args[0]) if len(args) == 1 else None
            spec = getattr(t, "spec", None)
            named = type_name(spec, t.target if isinstance(t, Ptr) else getattr(t, "btf_id", 0)) if spec else ""
            if not isinstance(t, (Ptr, Record)) or named != "struct path":
                raise self.error(e, f"path() expects a struct path or a pointer to one, not {t}")
            return Str(STRING_SIZE)
        if n == "sizeof":
            c.consts[id(e)] = self.sizeof(c, e)
            return UINT64
        if n == "cat":
            if not args or not isinstance(args[0], A.Str):
                raise self.error(e, "cat() needs a file name (a format string) first")
            types = [self.expr(c, a) for a in args[1:]]
            from pycore.lang.output import validate_format

            why = validate_format(args[0].value, types, "cat")
            if why:
                raise self.error(args[0], why)
            return Void()
        near = close_matches(n, ["printf", "print", "str", "strncmp", "strcontains", "strftime", "cgroupid", "cgroup_path", "path", "override", "ksym", "usym",
                                 "kaddr", "uptr", "kptr", "ntop", "macaddr", "buf", "reg", "bswap", "time", "join", "exit", "delete", "clear",
                                 "zero", *AGGREGATES], n=1)
        hint = f" (did you mean {near[0]}()?)" if near else ""
        raise self.error(e, f"unknown function {n}(){hint}")

    def sizeof(self, c: Checked, e: A.Call) -> int:
        """sizeof(TYPE) or sizeof(expression): bytes, known when the script is checked."""
        from btf.layout import sizeof

        if len(e.args) != 1:
            raise self.error(e, "sizeof() takes one type or expression")
        a = e.args[0]
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

    def pton(self, c: Checked, e: A.Call) -> Type:
        """``pton("10.0.0.1")``: the address's bytes, known when checked (4 for IPv4, 16 for IPv6), an
        array of uint8 as bpftrace's (which refuses IPv4-mapped IPv6 text; it is 16 bytes here)."""
        import socket

        from btf.kinds import Kind

        if len(e.args) != 1 or not isinstance(e.args[0], A.Str):
            raise self.error(e, 'pton() takes one string literal: pton("10.0.0.1")')
        text = e.args[0].value
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                raw = socket.inet_pton(family, text)
                break
            except OSError:
                continue
        else:
            raise self.error(e.args[0], f"pton() expects an IPv4/IPv6 address, got {text!r}")
        c.blobs[id(e)] = raw
        u8 = next((i for i in self.spec.ids_named("u8", (Kind.TYPEDEF,))), 0) or \
            next((i for i in self.spec.ids_named("unsigned char", (Kind.INT,))), 0)
        return Array(u8, len(raw), 1, False, self.spec)

    def uaddr(self, c: Checked, e: A.Call) -> Type:
        """``uaddr("sym")``: a pointer to a symbol of the probed binary, typed by the symbol's size.

        In a position-independent binary (a PIE, a library) the symbol moves with the load base,
        which bpftrace 0.17 ignores (it reads the link-time address: zeros). Here the probe knows
        where it runs: the address is the probe's instruction pointer plus the symbol's distance
        from the probed instruction, so it is right in every process. A uretprobe's instruction
        pointer is in the caller, so there it needs a binary that is not relocated."""
        from pycore.elf.symbols import data_symbol
        from pycore.errors import ElfError

        tgt = c.target
        if len(e.args) != 1 or not isinstance(e.args[0], A.Str):
            raise self.error(e, 'uaddr("symbol") takes one string literal')
        if tgt.kind not in USER_PROBES:
            raise self.error(e, f"uaddr can only be used with uprobes and usdt probes, not {tgt.kind}")
        name, path = e.args[0].value, tgt.attach[1]
        try:
            sym = data_symbol(path, name)
        except ElfError as err:
            raise self.error(e.args[0], f"uaddr: {err}") from None
        if sym is None:
            raise self.error(e.args[0], f"uaddr: no symbol {name!r} in {path}")
        if not sym.relocated:
            c.consts[id(e)] = sym.address
        elif tgt.kind == "uretprobe" or not tgt.vaddr:
            raise self.error(e, f"uaddr({name!r}): {path} is position independent and a {tgt.kind}'s instruction "
                                "pointer does not say where it is loaded; read it in a uprobe")
        else:
            c.ip_relative[id(e)] = sym.address - tgt.vaddr
        ctype = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}.get(sym.size, "uint8")
        return Ptr(self.btf_type(e, ctype), True, self.spec)

    def reg(self, c: Checked, e: A.Call) -> Type:
        """reg("ip"): a register of the probed context, where the context is a ``pt_regs``."""
        from pycore.lang.probes import REGS

        args = e.args
        if len(args) != 1 or not isinstance(args[0], A.Str):
            raise self.error(e, 'reg() takes a register name: reg("ip")')
        kind = c.target.kind
        if kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "profile"):
            raise self.error(e, f'reg can not be used with "{kind}" probes')
        if args[0].value not in REGS:
            near = close_matches(args[0].value, list(REGS), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (registers: {', '.join(REGS)})"
            raise self.error(args[0], f"'{args[0].value}' is not a valid register on this architecture{hint}")
        return UINT64

    def buf(self, c: Checked, e: A.Call) -> Type:
        """buf(data[, length]): raw bytes (at most STRING_SIZE) from an array, a pointer or a string, for %r."""
        args = e.args
        if not 1 <= len(args) <= 2:
            raise self.error(e, "buf(data[, length]) takes 1 or 2 arguments")
        t = self.expr(c, args[0])
        if len(args) == 1 and not isinstance(t, Array):
            raise self.error(e, f"buf() expects a length argument for non-array type {t}")
        if not isinstance(t, (Array, Ptr, Str)):
            raise self.error(args[0], f"buf() expects an array, a pointer or a string, not {t}")
        if len(args) == 2:
            if not is_literal(args[1]):
                if not isinstance(self.expr(c, args[1]), Int):
                    raise self.error(args[1], "buf(): the length must be an integer")
            elif self.constant(c, args[1]) < 0:
                raise self.error(args[1], "buf(): the length cannot be negative")
        return Buffer()

    def ntop(self, c: Checked, e: A.Call) -> Type:
        """ntop([af, ]addr): an IPv4 address from an integer, IPv4/IPv6 from 4 or 16 bytes in memory."""
        args = e.args
        if not 1 <= len(args) <= 2:
            raise self.error(e, "ntop([af, ]address) takes 1 or 2 arguments")
        if len(args) == 2 and not isinstance(self.expr(c, args[0]), Int):
            raise self.error(args[0], "ntop(): the address family must be an integer (AF_INET 2, AF_INET6 10)")
        a = args[-1]
        t = self.expr(c, a)
        if isinstance(t, (Str, Array)):
            if t.size not in (4, 16):
                raise self.error(a, f"ntop() argument must be 4 or 16 bytes in size, not {t.size}")
        elif not isinstance(t, (Int, Ptr)):
            raise self.error(a, f"ntop() expects an integer or array argument, got {t}")
        return Inet()


_C_INTS = {"int8": (1, True), "int16": (2, True), "int32": (4, True), "int64": (8, True),
           "uint8": (1, False), "uint16": (2, False), "uint32": (4, False), "uint64": (8, False),
           "char": (1, True), "short": (2, True), "int": (4, True), "long": (8, True),
           "unsigned": (4, False), "unsigned int": (4, False), "unsigned long": (8, False),
           "u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
           "s8": (1, True), "s16": (2, True), "s32": (4, True), "s64": (8, True)}


def c_integer(text: str) -> int | None:
    """A positional parameter's number as bpftrace 0.17 reads one (C's strtoll, base 0, the whole
    text, within int64): "16", "0x10", "020" (octal), " -5"; None for "1e3", "1_000", "12abc"."""
    import re

    m = re.fullmatch(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        return None
    digits = m.group(2)
    value = int(digits, 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") else 10)
    value = -value if m.group(1) == "-" else value
    return value if -2**63 <= value < 2**63 else None


def kernel_address(name: str) -> int | None:
    """kaddr(name): the kernel symbol's address, read once per name."""
    if name not in _KADDR:
        from pycore.kernel.kallsyms import Kallsyms

        try:
            _KADDR[name] = Kallsyms().address(name)
        except OSError:
            _KADDR[name] = None
    return _KADDR[name]


_KADDR: dict[str, int | None] = {}


def _held(kind: str, value: Type | None) -> str:
    """What a map holds, for messages: its kind, or inet or mac (which share the str kind's buffers)."""
    return str(value) if isinstance(value, Inet) else kind


USER_PROBES = frozenset({"uprobe", "uretprobe", "usdt"})


def _integer(t: Type) -> bool:
    """An integer that arithmetic takes: not one printed as text (a strftime() timestamp, a cgroup path)."""
    return isinstance(t, Int) and not isinstance(t, TextInt)


def _is_runtime(e: A.Expr) -> bool:
    return not isinstance(e, (A.Int, A.Positional))


def is_literal(e: A.Expr) -> bool:
    """An integer written in the script: ``4``, ``$1``, ``-1`` (a length known when the script is checked)."""
    if isinstance(e, A.Unary) and e.op == "-":
        e = e.operand
    return isinstance(e, (A.Int, A.Positional))


def _fmt_kind(t: Type) -> str:
    """What a printf argument is, for format checking: 'int', 'str' or 'ptr'."""
    if isinstance(t, Str):
        return "str"
    if isinstance(t, Ptr):
        return "ptr"
    return "int"


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


_ = (CtxField, Array, Ptr)
