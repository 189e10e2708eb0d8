"""bpftrace macros (``macro name(args) { ... }``, bpftrace 0.24), block expressions (``{ stmts;
value }``, 0.24) and ``getopt()``, expanded away.

Not to be confused with :mod:`pycore.lang.macros`, which is the C preprocessor's ``#define`` in a
script's head. These are bpftrace's own *hygienic* macros: a tree pasted where it is called. The
pass runs between the parser and the checker, so neither the checker nor the lowering ever meets a
macro, a macro call, a block expression or a ``getopt()``:

- a call ``f(a, b)`` or a bare ``f`` (for a macro without parameters) to a user's macro (or one of
  the standard library's, :data:`STDLIB`) becomes the macro's body, with its parameters replaced:
  ``$x`` by the caller's variable (which the body may change), ``@m`` by the caller's map, an
  identifier ``x`` by the caller's expression (evaluated at each use, as in bpftrace);
- the body's own variables are renamed (``$y`` in macro ``f`` becomes ``$$f_y``) so they never meet
  the caller's; a map the body names without taking it as a parameter is an error;
- a macro called as a statement is its statements, in a block; called as a value, its last
  expression is the value and the statements before it run just before the statement that holds the
  call, for a predicate first in the body, the predicate becoming an ``if`` around the rest;
- a block expression is the same, its statements in a block of their own (what they declare or
  first assign stays theirs: a value that reads it is given a variable ``$$blockN`` first);
- statements that a value needs run only when bpftrace evaluates that value: on the right of
  ``&&``/``||`` under an ``if`` on the left's truth, in the branch of ``?:`` that is taken, and
  before each test of a ``while`` condition (:meth:`_Expander.logical`, ``ternary``, ``stmt``);
- ``getopt("name", default[, "help"])`` becomes the option's value, from the command line's
  ``-- --name=value`` (a constant, as bpftrace's read-only global is).

Errors are bpftrace's own texts (its ``src/ast/passes/macro_expansion.cpp``, ``named_param.cpp``).
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.errors import ScriptError
from pycore.record import record_fields

__all__ = ["expand", "NamedOptions", "STDLIB"]

#: bpftrace's standard library macros that pycore does not have as builtins (upstream's
#: src/stdlib/base.bt); a user's macro with the same name and parameters wins, as in bpftrace.
STDLIB = """
macro assert(cond, msg)
{
  if (!cond) {
    errorf("assert failed: %s", msg);
    exit(1);
  }
}

macro is_err(ptr)
{
  ((int64)ptr) < 0 && ((int64)ptr) >= (-4095)
}
"""

_STDLIB_NAMES = ("assert", "is_err")

#: Most macro calls expanded in one script: each is a copy of a body, so macros that call others
#: twice over grow as 2**depth; real scripts expand tens.
MAX_EXPANSIONS = 10_000


class NamedOptions:
    """The command line's ``-- --name=value`` options, and what the script's getopt() calls declared.

    ``raw`` is the words as given (``--depth=5``, ``--errname``). After :func:`expand`, ``declared``
    holds each getopt() name with its default and help, which :meth:`check` compares with ``raw``.
    """

    def __init__(self, raw: tuple[str, ...] = ()) -> None:
        self.values: dict[str, str | None] = {}
        self.order: list[str] = []
        for word in raw:
            body = word[2:] if word.startswith("--") else word
            name, eq, value = body.partition("=")
            self.values[name] = value if eq else None
            self.order.append(name)
        self.declared: dict[str, tuple[object, str]] = {}

    def unexpected(self) -> list[str]:
        """The options given that no getopt() names (``--help`` aside: it asks for the list)."""
        return [n for n in self.order if n not in self.declared and n != "help"]

    def help(self, listing: bool = True) -> str:
        """The script's options, in bpftrace's words: one a line with its description for ``-- --help``
        (``listing``), else on one line, the hint after an unexpected option."""
        if not self.declared:
            return "no custom program options defined."
        if listing:
            return "expected program options:\n" + "\n".join(
                f"--{name}" + (f": {text}" if text else "") for name, (_, text) in sorted(self.declared.items()))
        return "expected program options: " + ": ".join(f"--{name}" for name in sorted(self.declared))


def expand(program: A.Program, *, options: NamedOptions | None = None, filename: str = "<stdin>",
           text: str = "") -> A.Program:
    """``program`` with its macros expanded and getopt() replaced by constants; the tree of a script
    without either is returned as it is (the parse cache shares it)."""
    if options is None:
        options = NamedOptions()
    names = ("getopt", *_STDLIB_NAMES)
    if not program.macros and not options.values and not program.block_exprs and (
            text and not any(n in text for n in names) or not _mentions(program, names)):
        return program     # the common case, on pycore trace's start: a look at the text, no walk
    ex = _Expander(program.macros, options, filename, text)
    probes = [ex.probe(b) for b in program.probes]
    from pycore.lang.parser import MAX_DEPTH

    for block in probes:
        if A.depth(block) > MAX_DEPTH:
            raise ScriptError(f"script nested too deeply once its macros are expanded (more than {MAX_DEPTH} "
                              "levels)", block.pos.line, block.pos.col, filename, text)
    unexpected = options.unexpected()
    if unexpected:
        raise ScriptError("unexpected program command line options: " + ", ".join("--" + n for n in unexpected)
                          + " (" + options.help(listing=False) + ")", filename=filename)
    return _copy(program, probes=probes, macros=[], block_exprs=False)


def _mentions(program: A.Program, names: tuple[str, ...]) -> bool:
    for block in program.probes:
        for n in A.walk(block):
            if isinstance(n, (A.Call, A.Builtin)) and n.name in names:
                return True
    return False


def _copy(node: A.Node, **changes: object) -> A.Node:
    """A new node like ``node`` with some fields changed (a new identity: later stages key by id())."""
    cls = type(node)
    values = {f: getattr(node, f) for f in record_fields(cls) if f != "pos"}
    values.update(changes)
    return cls(**values, pos=node.pos)


def _kind(param: A.Expr) -> str:
    return "var" if isinstance(param, A.Var) else "map" if isinstance(param, A.MapRef) else "ident"


def _shown(param: A.Expr) -> str:
    return {"var": "$", "map": "@", "ident": ""}[_kind(param)] + param.name


class _Scope:
    """One expansion of one macro: what its parameters stand for and which variables are its own."""

    def __init__(self, macro: A.MacroDef, depth: int) -> None:
        self.macro = macro
        self.vars: dict[str, str] = {}         # parameter $x -> the caller's variable
        self.maps: dict[str, str] = {}         # parameter @m -> the caller's map
        self.exprs: dict[str, A.Expr] = {}     # parameter x -> the caller's expression (expanded)
        self.prefix = f"${macro.name}" + (f"_{depth}" if depth > 1 else "") + "_"
        self.locals, self.shadow = _locals(macro.body, {p.name for p in macro.params if isinstance(p, A.Var)})


def _locals(body: list[A.Stmt], params: set[str]) -> tuple[set[str], A.Var | None]:
    """The variables the body sets (assigns, increments, declares, loops over) that are not parameters:
    renamed, as bpftrace does; a variable only read keeps its name. Second, a declaration (``let $x``)
    of a parameter's name, which bpftrace refuses, or None."""
    found: set[str] = set()
    shadow: A.Var | None = None
    stack: list[A.Node] = list(body)
    while stack:
        n = stack.pop()
        targets: list[A.Node] = []
        if isinstance(n, A.Assign) or isinstance(n, A.IncDec):
            targets.append(n.target)
        elif isinstance(n, A.Stmt) and not isinstance(n, (A.ExprStmt, A.If, A.While, A.Unroll, A.Block)):
            # later statements (let, for): a variable that is a direct child is what they declare
            declared = [c for c in A.children(n) if isinstance(c, A.Var)]
            shadow = shadow or next((v for v in declared if v.name in params), None)
            targets.extend(declared)
        for t in targets:
            if isinstance(t, A.Var) and t.name not in params:
                found.add(t.name)
        stack.extend(A.children(n))
    return found, shadow


class _Expander:
    def __init__(self, macros: list[A.MacroDef], options: NamedOptions, filename: str, text: str) -> None:
        self.filename, self.text, self.options = filename, text, options
        self.user: dict[str, list[A.MacroDef]] = {}
        for m in macros:
            self._check_def(m)
            self.user.setdefault(m.name, []).append(m)
        self.stdlib: dict[str, list[A.MacroDef]] | None = None
        self.stack: list[_Scope] = []
        self.expansions = 0
        self.pending: list[A.Stmt] | None = None      # statements to run before the current one
        self.getopts: dict[str, tuple[object, str]] = options.declared
        self.blocks = 0             # block expressions given a variable for their value: $$block1, ...

    # -- errors and definitions --------------------------------------------------------------------

    def error(self, message: str, node: A.Node, width: int = 1) -> ScriptError:
        return ScriptError(message, node.pos.line, node.pos.col, self.filename, self.text, width)

    def _check_def(self, m: A.MacroDef) -> None:
        seen: set[tuple[str, str]] = set()
        what = {"var": "Variable", "map": "Map", "ident": "Ident"}
        for p in m.params:
            key = (_kind(p), p.name)
            if key in seen:
                raise self.error(f"{what[key[0]]} for macro argument has already been used: {_shown(p)}", p)
            seen.add(key)
        for other in self.user.get(m.name, []):
            if [_kind(p) for p in other.params] == [_kind(p) for p in m.params]:
                raise self.error(f"Redefinition of macro: {m.name} (the first is at line {other.pos.line})", m)

    def _stdlib(self) -> dict[str, list[A.MacroDef]]:
        if self.stdlib is None:
            from pycore.lang.parser import parse

            lib = parse(STDLIB + "BEGIN {}", "stdlib")
            self.stdlib = {}
            for m in lib.macros:
                self.stdlib.setdefault(m.name, []).append(m)
        return self.stdlib

    def _is_stdlib(self, macro: A.MacroDef) -> bool:
        return self.stdlib is not None and any(m is macro for ms in self.stdlib.values() for m in ms)

    def lookup(self, name: str, args: tuple[A.Expr, ...], node: A.Node) -> A.MacroDef | None:
        """The macro a call names (user's first, then the standard library's), or None for no macro
        of that name; an error for a name whose macros all take other arguments."""
        if self.stack and self._is_stdlib(self.stack[-1].macro):   # the library calls only its own
            groups = [self._stdlib().get(name, [])]
        else:
            groups = [self.user.get(name, []), self._stdlib().get(name, []) if name in _STDLIB_NAMES else []]
        candidates = [m for g in groups for m in g]
        if not candidates:
            return None
        for group in groups:
            best, best_score = None, -1
            for m in group:
                score = self._fits(m, args)
                if score > best_score:
                    best, best_score = m, score
            if best is not None and best_score >= 0:
                return best
        closest = min(candidates, key=lambda m: abs(len(m.params) - len(args)))
        msg = f"Call to {name}() has arguments that do not match any definition."
        if len(closest.params) != len(args):
            msg += (f" The closest definition of {name}() has a different number of arguments. "
                    f"Expected: {len(closest.params)} but got {len(args)}")
            raise self.error(msg, node, len(name))
        for p, a in zip(closest.params, args):
            kind = _kind(p)
            if kind == "ident" or (kind == "var" and isinstance(a, A.Var)) or \
                    (kind == "map" and isinstance(a, A.MapRef) and not a.keys):
                continue
            got = "a variable" if isinstance(a, A.Var) else "a map" if isinstance(a, A.MapRef) and not a.keys \
                else "an expression"
            want = "a variable" if kind == "var" else "a map"
            raise self.error(f"{msg} Mismatched arg. {name}() expects {want} for arg {_shown(p)} but got {got}.", a)
        raise self.error(msg, node, len(name))   # not reached: some argument mismatched

    @staticmethod
    def _fits(m: A.MacroDef, args: tuple[A.Expr, ...]) -> int:
        """How well ``args`` fit ``m``'s parameters: -1 not at all, else the number of exact kinds."""
        if len(m.params) != len(args):
            return -1
        score = 0
        for p, a in zip(m.params, args):
            kind = _kind(p)
            if kind == "var":
                if not isinstance(a, A.Var):
                    return -1
                score += 1
            elif kind == "map":
                if not (isinstance(a, A.MapRef) and not a.keys):
                    return -1
                score += 1
        return score

    # -- statements --------------------------------------------------------------------------------

    def stmts(self, body: list[A.Stmt]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in body:
            saved, self.pending = self.pending, []
            try:
                new = self.stmt(s)
            finally:
                pending, self.pending = self.pending, saved
            out.extend(pending)
            out.extend(new)
        return out

    def stmt(self, s: A.Stmt) -> list[A.Stmt]:
        scope = self.stack[-1] if self.stack else None
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, (A.Call, A.Builtin)) and not (
                isinstance(s.expr, A.Builtin) and scope is not None and s.expr.name in scope.exprs):
            called = self._macro_call(s.expr)
            if called is not None:
                macro, args = called
                return [A.Block(self._body(macro, args, s.expr), pos=s.pos)]
        if isinstance(s, A.While):
            first, cond = self.apart(s.cond)
            body = self.stmts(s.body)
            if not first:
                return [A.While(cond, body, pos=s.pos)]
            # the statements run before each test: while (true) { first; if (!cond) { break; } body }
            # (continue goes back to the top, so they run again before the next test)
            test = A.If(A.Unary("!", cond, pos=cond.pos), [A.Break(pos=s.pos)], None, pos=s.pos)
            return [A.While(A.Bool(1, pos=s.pos), [*first, test, *body], pos=s.pos)]
        return [self.node(s)]

    def node(self, n: A.Node) -> A.Node:
        """Any node: its statement lists expanded as statements, its expressions as expressions."""
        changes: dict[str, object] = {}
        for f in record_fields(type(n)):
            if f == "pos":
                continue
            v = getattr(n, f)
            if isinstance(v, list) and v and all(isinstance(x, A.Stmt) for x in v):
                changes[f] = self.stmts(v)
            elif isinstance(v, A.Expr):
                changes[f] = self.expr(v)
            elif isinstance(v, tuple) and any(isinstance(x, A.Expr) for x in v):
                changes[f] = tuple(self.expr(x) if isinstance(x, A.Expr) else x for x in v)
            elif isinstance(v, A.Node):
                changes[f] = self.node(v)
        return _copy(n, **changes)

    def probe(self, block: A.ProbeBlock) -> A.ProbeBlock:
        """A probe block expanded. A predicate that calls a macro with statements before its value
        becomes the body's first test (``/p/ { body }`` is ``{ stmts; if (p) { body } }``: bpftrace
        returns early when the predicate is false), so the statements run first, as in bpftrace."""
        body = self.stmts(block.body)
        if block.predicate is None:
            return A.ProbeBlock(block.probes, None, body, pos=block.pos)
        saved, self.pending = self.pending, []
        try:
            predicate = self.expr(block.predicate)
        finally:
            pending, self.pending = self.pending, saved
        if not pending:
            return A.ProbeBlock(block.probes, predicate, body, pos=block.pos)
        return A.ProbeBlock(block.probes, None, [*pending, A.If(predicate, body, None, pos=predicate.pos)],
                            pos=block.pos)

    # -- expressions -------------------------------------------------------------------------------

    def apart(self, e: A.Expr) -> tuple[list[A.Stmt], A.Expr]:
        """``e`` expanded, with the statements its value needs first (block expressions, macros with
        statements) given back rather than put before the current statement: for a place that runs
        only sometimes, or more than once."""
        saved, self.pending = self.pending, []
        try:
            value = self.expr(e)
        finally:
            first, self.pending = self.pending, saved
        return first, value

    def temp(self, pos: A.Pos) -> A.Var:
        """A new variable of the expander's own, ``$$blockN``, for a value computed by statements."""
        self.blocks += 1
        return A.Var(f"$block{self.blocks}", pos=pos)

    def before(self, stmts: list[A.Stmt], node: A.Node) -> None:
        """Put ``stmts`` before the statement being expanded."""
        if self.pending is None:      # not reached: every expression is expanded inside a statement
            raise self.error("statements before a value outside a statement", node)
        self.pending.extend(stmts)

    def expr(self, e: A.Expr) -> A.Expr:
        scope = self.stack[-1] if self.stack else None
        if isinstance(e, A.Var):
            if scope is not None:
                if e.name in scope.vars:
                    return A.Var(scope.vars[e.name], pos=e.pos)
                if e.name in scope.locals:
                    return A.Var(scope.prefix + e.name, pos=e.pos)
            return A.Var(e.name, pos=e.pos)
        if isinstance(e, A.MapRef):
            keys = tuple(self.expr(k) for k in e.keys)
            name = e.name
            if scope is not None:
                if name not in scope.maps:
                    raise self.error(f"Unhygienic access to map: @{name}. Maps must be passed into the macro "
                                     "as arguments.", e, len(name) + 1)
                name = scope.maps[name]
            return A.MapRef(name, keys, pos=e.pos)
        if isinstance(e, A.Builtin) and scope is not None and e.name in scope.exprs:
            return _clone(scope.exprs[e.name])
        if isinstance(e, A.Call) and e.name == "getopt":
            return self.getopt(e)
        if isinstance(e, A.BlockExpr):
            return self.block_value(e)
        if isinstance(e, (A.Call, A.Builtin)):
            called = self._macro_call(e)
            if called is not None:
                macro, args = called
                body = self._body(macro, args, e, as_value=True)
                if not body or not isinstance(body[-1], A.ExprStmt):
                    raise self.error(f"macro {macro.name}() has no value (its body does not end in an "
                                     "expression) and is used as one", e, len(e.name))
                if len(body) > 1:
                    self.before(body[:-1], e)
                return body[-1].expr
            if isinstance(e, A.Builtin):
                return A.Builtin(e.name, pos=e.pos)
        if isinstance(e, A.Binary) and e.op in ("&&", "||"):
            return self.logical(e)
        if isinstance(e, A.Ternary):
            return self.ternary(e)
        changes: dict[str, object] = {}
        for f in record_fields(type(e)):
            if f == "pos":
                continue
            v = getattr(e, f)
            if isinstance(v, A.Expr):
                changes[f] = self.expr(v)
            elif isinstance(v, tuple) and any(isinstance(x, A.Expr) for x in v):
                changes[f] = tuple(self.expr(x) if isinstance(x, A.Expr) else x for x in v)
            elif isinstance(v, list) and v and all(isinstance(x, A.Stmt) for x in v):
                changes[f] = self.stmts(v)
        return _copy(e, **changes)

    def logical(self, e: A.Binary) -> A.Expr:
        """``a && b``, ``a || b``. When ``b`` needs statements first, they run only when ``b`` is
        evaluated: ``$t = a && true; if ($t) { stmts; $t = b && true; }`` (``||``: ``if (!$t)``, ``false``)."""
        left = self.expr(e.left)
        first, right = self.apart(e.right)
        if not first:
            return A.Binary(e.op, left, right, pos=e.pos)
        t, pos = self.temp(e.pos), e.pos
        unit = A.Bool(1 if e.op == "&&" else 0, pos=pos)
        cond: A.Expr = A.Var(t.name, pos=pos) if e.op == "&&" else A.Unary("!", A.Var(t.name, pos=pos), pos=pos)
        self.before([A.Let(t, None, A.Binary(e.op, left, unit, pos=pos), pos=pos),
                     A.If(cond, [*first, A.Assign(A.Var(t.name, pos=pos), "=", A.Binary(e.op, right, unit, pos=pos),
                                                  pos=pos)], None, pos=pos)], e)
        return A.Var(t.name, pos=pos)

    def ternary(self, e: A.Ternary) -> A.Expr:
        """``c ? a : b``, and ``c ?: b`` (the parser's Ternary with ``c`` as its value too). When a
        branch needs statements first, they run in that branch only: ``let $t; if (c) { stmts; $t = a; }
        else { $t = b; }``."""
        cond = self.expr(e.cond)
        if e.then is e.cond:
            first_then, then = [], cond     # the same node, as the parser built it
        else:
            first_then, then = self.apart(e.then)
        first_else, else_ = self.apart(e.else_)
        if not first_then and not first_else:
            return A.Ternary(cond, then, else_, pos=e.pos)
        t, pos = self.temp(e.pos), e.pos
        self.before([A.Let(t, pos=pos),
                     A.If(cond, [*first_then, A.Assign(A.Var(t.name, pos=pos), "=", then, pos=pos)],
                          [*first_else, A.Assign(A.Var(t.name, pos=pos), "=", else_, pos=pos)], pos=pos)], e)
        return A.Var(t.name, pos=pos)

    def block_value(self, e: A.BlockExpr) -> A.Expr:
        """A block expression ``{ stmts; value }``: its statements go before the statement that holds
        it, in a block of their own (so its ``let``s stay its own), and the value is what is left. A
        value that reads a variable the block declares is first given a variable of the enclosing
        scope, ``$$blockN``, declared before the block and set at its end."""
        body = self.stmts(_valued(e.body))
        last = body[-1] if body else None
        if isinstance(last, A.ExprStmt):
            value = last.expr
        elif isinstance(last, A.IncDec):
            value = last
        else:
            raise self.error("a block used as a value ends in an expression, its value, with no ';' after "
                             "it ({ let $b = 1; $b })", e)
        stmts = body[:-1]
        if not stmts:
            return value
        own, _ = _locals(stmts, set())     # what the block sets lives in the block: read it before its end
        if not any(isinstance(n, A.Var) and n.name in own for n in A.walk(value)):
            self.before([A.Block(stmts, pos=e.pos)], e)
            return value
        t = self.temp(e.pos)
        self.before([A.Let(t, pos=e.pos),
                     A.Block([*stmts, A.Assign(A.Var(t.name, pos=e.pos), "=", value, pos=value.pos)], pos=e.pos)], e)
        return A.Var(t.name, pos=e.pos)

    def _macro_call(self, e: A.Expr) -> tuple[A.MacroDef, tuple[A.Expr, ...]] | None:
        """The macro ``e`` calls and its arguments (expanded in the caller's scope), or None."""
        raw = e.args if isinstance(e, A.Call) else ()
        macro = self.lookup(e.name, raw, e)
        if macro is None:
            return None
        for scope in self.stack:
            if scope.macro is macro:
                chain = [s.macro.name for s in self.stack[self.stack.index(scope):]] + [macro.name]
                raise self.error("Recursive macro call detected. Call chain: " + " > ".join(chain), e, len(e.name))
        args = tuple(a if isinstance(a, A.TypeName) else self.expr(a) for a in raw)
        return macro, args

    def _body(self, macro: A.MacroDef, args: tuple[A.Expr, ...], call: A.Expr,
              as_value: bool = False) -> list[A.Stmt]:
        """The macro's body for this call: parameters replaced, its own variables renamed."""
        self.expansions += 1
        if self.expansions > MAX_EXPANSIONS:
            raise self.error(f"more than {MAX_EXPANSIONS} macro expansions: a macro calls others too many times "
                             "over (each call is a copy of its body)", call, len(call.name))
        scope = _Scope(macro, len(self.stack) + 1)
        if scope.shadow is not None:
            raise self.error(f"Variable declaration shadows macro arg ${scope.shadow.name}", scope.shadow,
                             len(scope.shadow.name) + 1)
        for p, a in zip(macro.params, args):
            if isinstance(p, A.Var):
                scope.vars[p.name] = a.name
            elif isinstance(p, A.MapRef):
                scope.maps[p.name] = a.name
            else:
                scope.exprs[p.name] = a
        self.stack.append(scope)
        try:
            body = self.stmts(_valued(macro.body) if as_value else macro.body)
        finally:
            self.stack.pop()
        if self._is_stdlib(macro):
            body = [_placed(s, call.pos) for s in body]   # the library's text is not the script's
        return body

    # -- getopt ------------------------------------------------------------------------------------

    def getopt(self, call: A.Call) -> A.Expr:
        """``getopt("name"[, default[, "help"]])``: the option's value from the command line, a constant."""
        args = call.args
        if not args or not isinstance(args[0], A.Str):
            raise self.error("First argument to 'getopt' must be a string literal.", args[0] if args else call)
        if len(args) > 3:
            raise self.error("The 'getopt' function can take a maximum of three arguments and a minimum of one "
                             "argument.", call, 6)
        name = args[0].value
        help_text = ""
        if len(args) == 3:
            if not isinstance(args[2], A.Str):
                raise self.error("Function 'getopt' requires the third parameter to be a string literal.", args[2])
            help_text = args[2].value
        default: object
        if len(args) == 1:
            default = False
        else:
            d = args[1]
            if isinstance(d, A.Bool):
                default = bool(d.value)
            elif isinstance(d, A.Str):
                default = d.value
            elif isinstance(d, A.Int):
                default = d.value
            elif isinstance(d, A.Unary) and d.op == "-" and isinstance(d.operand, A.Int):
                default = -d.operand.value
            else:
                raise self.error("Second argument to 'getopt' must be a string literal, integer literal, or a "
                                 "boolean literal.", d)
        if name in self.getopts:
            before, before_help = self.getopts[name]
            if before != default or type(before) is not type(default):
                shown = ("true" if before else "false") if isinstance(before, bool) else before
                raise self.error(f"Command line option '{name}' needs to have the same default value in all "
                                 f"places it is used. Previous default value: {shown}", call, 6)
            if help_text and before_help and help_text != before_help:
                raise self.error(f"Command line option '{name}' must have the same description in all places "
                                 "it's used. Hint: You can wrap it in a macro", call, 6)
            help_text = help_text or before_help
        self.getopts[name] = (default, help_text)
        value = self._option_value(name, default, call)
        if isinstance(value, bool):
            return _bool(value, call.pos)
        if isinstance(value, str):
            return A.Str(value, pos=call.pos)
        if value < 0:
            return A.Unary("-", A.Int(-value, pos=call.pos), pos=call.pos)
        return A.Int(value, pos=call.pos)

    def _option_value(self, name: str, default: object, call: A.Call) -> object:
        given = self.options.values
        if name not in given:
            return default
        raw = given[name]

        def bad(value: str, why: str) -> ScriptError:
            return ScriptError(f"program command line option --{name} {why} (value: {value})", filename=self.filename)

        if raw is None:
            if isinstance(default, bool):
                return True
            raise bad("true", "expects an integer" if isinstance(default, int) else "expects a string")
        if isinstance(default, bool):
            if raw in ("true", "1"):
                return True
            if raw in ("false", "0"):
                return False
            raise bad(raw, "expects a boolean (e.g. 'true')")
        if isinstance(default, int):
            try:
                value = int(raw, 0)
            except ValueError:
                raise bad(raw, "is not a number") from None
            if default >= 0 and value < 0:
                raise bad(raw, "is not a valid unsigned integer")
            if not -(1 << 63) <= value < (1 << 64):
                raise bad(raw, "value is out of range")
            return value
        return raw


def _valued(body: list[A.Stmt]) -> list[A.Stmt]:
    """A body whose value is used (a block expression's, a macro's called as a value): a bare block
    as its last statement is a block expression, its value, as bpftrace reads ``{ ... }`` there."""
    if body and isinstance(body[-1], A.Block):
        last = body[-1]
        return [*body[:-1], A.ExprStmt(A.BlockExpr(last.body, pos=last.pos), pos=last.pos)]
    return body


def _bool(value: bool, pos: A.Pos) -> A.Expr:
    """A boolean constant, as ``true``/``false`` are in the tree."""
    return A.Bool(int(value), pos=pos)


def _placed(n: A.Node, pos: A.Pos) -> A.Node:
    """``n``'s tree with every node at ``pos``: a standard library macro's errors point at its call."""
    changes: dict[str, object] = {}
    for f in record_fields(type(n)):
        if f == "pos":
            continue
        v = getattr(n, f)
        if isinstance(v, A.Node):
            changes[f] = _placed(v, pos)
        elif isinstance(v, (list, tuple)):
            changes[f] = type(v)(_placed(x, pos) if isinstance(x, A.Node) else x for x in v)
    values = {f: getattr(n, f) for f in record_fields(type(n)) if f != "pos"}
    values.update(changes)
    return type(n)(**values, pos=pos)


def _clone(e: A.Node) -> A.Node:
    """A deep copy of an expression's tree: a parameter used twice is two nodes (stages key by id())."""
    changes: dict[str, object] = {}
    for f in record_fields(type(e)):
        if f == "pos":
            continue
        v = getattr(e, f)
        if isinstance(v, A.Node):
            changes[f] = _clone(v)
        elif isinstance(v, (list, tuple)):
            changes[f] = type(v)(_clone(x) if isinstance(x, A.Node) else x for x in v)
    return _copy(e, **changes)
