"""The syntax tree of a bpftrace script: one record (a dataclass, made cheaply) per node kind.

Every node has ``pos`` (line and column, 1-based, of its first token). ``pos``
is keyword-only and left out of ``==``, so trees built by hand in tests compare
equal to parsed ones. Expression children are tuples, statement bodies lists.
Later stages must treat the tree as read-only (they key side tables by
``id(node)``). The classes are ``@record``, not ``@dataclass``, and not frozen,
only because defining them is on ``pycore trace``'s start, which is measured
(:mod:`pycore.record` says how much).

Node kinds (fields in order; ``pos`` on all of them):

Program(includes, probes, directives, c_definitions, map_decls, config, macros)   the whole script
MapDecl(name, kind, max_entries)      ``let @name = lruhash(N);`` before the probes (bpftrace 0.24)
ConfigAssign(name, value)             one ``name = value`` of the ``config = { ... }`` block (bpftrace 0.20)
Include(path, system, text)           ``#include <path>`` (system) or ``"path"``; recorded, not used
Directive(text)                       any other ``#`` line before the probes (``#ifndef``...); recorded
CDefinition(text)                     a C ``struct``/``union``/``enum`` definition before the probes, as written
ProbeBlock(probes, predicate, body)   ``probe[, probe...] [/predicate/] { body }``
MacroDef(name, params, body)          bpftrace 0.24's ``macro name($v, @m, x) { stmts; expr }``: params are
                                      Var, MapRef (no keys) or Builtin (an expression's name); expanded
                                      away by :mod:`pycore.lang.expand` before the checker
ProbeSpec(kind, target, parts, offset, text)   one probe, kind normalised (``k`` -> ``kprobe``)
TypeName(name, pointer_depth)         a C type in a cast or ``sizeof``: ``struct path`` with 1 for ``struct path *``

Expressions (subclasses of Expr):

Int(value)                            integer literal (0 .. 2**64-1; ``-1`` is Unary('-', Int(1)))
Bool(value)                           ``true`` (1) / ``false`` (0): an Int of type bool (bpftrace 0.23)
Str(value)                            string literal, escapes resolved
Builtin(name)                         a bare identifier: pid, comm, args, arg0, retval, curtask; also
                                      ``perf``/``raw`` in ``kstack(perf)`` and C enum names: the checker decides
Positional(index)                     ``$1``..``$N``; ``$#`` (the number of parameters) is index 0
Var(name)                             scratch variable ``$x`` (name without ``$``)
MapRef(name, keys)                    ``@m``, ``@m[k1, k2]``; name without ``@``, '' for ``@``
Call(name, args)                      ``f(a, b)``; args may hold a TypeName for ``sizeof(struct x)``
Binary(op, left, right)               ``|| && | ^ & == != < <= > >= << >> + - * / %``
Unary(op, operand)                    ``! ~ -`` and ``*`` (dereference)
Ternary(cond, then, else_)            ``cond ? then : else_``
Cast(type, expr)                      ``(uint32)x``, ``(struct path *)arg0``
Field(expr, name, arrow)              ``e.name`` / ``e->name``; a tuple element ``$t.0`` has name '0'
Index(expr, index)                    ``e[i]`` (arrays and pointers; map keys are MapRef.keys)
Tuple(elems)                          ``(a, b, ...)``, two elements or more
IncDec(target, op, prefix)            ``$x++``, ``--@m[k]``: an Expr, and a Stmt when it stands alone

Statements (subclasses of Stmt):

ExprStmt(expr)                        an expression evaluated for its effect (``printf(...)``)
Assign(target, op, value)             ``$x = e``, ``@m[k] += e``; op is ``=`` or a compound ``+=`` .. ``>>=``
If(cond, then, else_)                 else_ is None, or a list (``else if`` is a list of one If)
While(cond, body)                     ``while (cond) { body }``
Unroll(count, body)                   ``unroll (count) { body }``; count an expression (checked constant later)
ForMap(decl, map, body)               ``for ($kv : @m) { body }`` (bpftrace 0.21): $kv is (key, value); map any
                                      expression here, the checker requires a map with keys
ForRange(decl, start, end, body)      ``for ($i : start..end) { body }`` (bpftrace 0.24): start included, end not
Return()                              ``return``
Break()                               ``break`` (inside while or for)
Continue()                            ``continue`` (inside while or for)
Block(body)                           a bare ``{ ... }`` inside a body
Let(var, type, value)                 ``let $x;``, ``let $x = e;``, ``let $x: type = e;`` (type, value: None
                                      when not written)
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator

from pycore.record import field, record, record_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

__all__ = [
    "Pos", "NOPOS", "Node", "Expr", "Stmt", "Program", "ConfigAssign", "Include", "Directive", "CDefinition", "ProbeBlock",
    "MacroDef", "ProbeSpec", "TypeName", "Int", "Bool", "Str", "Builtin", "Positional", "Var", "MapRef", "Call", "Binary", "Unary",
    "Ternary", "Cast", "Field", "Index", "Tuple", "BlockExpr", "IncDec", "ExprStmt", "Assign", "If", "While", "Unroll",
    "ForMap", "ForRange", "Return", "Break", "Continue", "Block", "Let", "MapDecl", "walk", "children", "depth",
    "Visitor",
]


if TYPE_CHECKING:
    class Pos(NamedTuple):
        line: int
        col: int
else:
    # collections' namedtuple, not typing's NamedTuple: importing typing costs ~2 ms of
    # pycore trace's start, and nothing else on that path needs it
    class Pos(namedtuple("Pos", "line col")):
        """Where a node starts in the script: 1-based line and column (a tab counts as one column)."""

        __slots__ = ()


NOPOS = Pos(0, 0)


def _pos() -> Pos:
    return field(default=NOPOS, kw_only=True, compare=False, repr=False)  # type: ignore[return-value]


@record
class Node:
    """Base of every node: carries ``pos`` so any later stage can report an error at its place."""

    pos: Pos = _pos()


@record
class Expr(Node):
    """Base of expressions, so stages can type their arguments."""


@record
class Stmt(Node):
    """Base of statements, so stages can type their arguments."""


# -- top level -------------------------------------------------------------------------------------


@record
class Include(Node):
    """``#include <path>`` or ``#include "path"``: recorded for the user's benefit; types come from BTF."""

    path: str
    system: bool
    text: str


@record
class Directive(Node):
    """A ``#`` line other than ``#include`` (``#ifndef BPFTRACE_HAVE_BTF``...): recorded, then ignored."""

    text: str


@record
class CDefinition(Node):
    """A C struct/union/enum definition before the probes, kept as text (BTF supplies kernel types)."""

    text: str


@record
class ConfigAssign(Node):
    """``name = value`` in the config block; ``value`` as parsed (:mod:`pycore.lang.config` wants a literal
    or a bare name)."""

    name: str
    value: Expr


@record
class TypeName(Node):
    """A C type as written in a cast or sizeof: ``name`` ('uint32', 'struct path') and how many ``*``;
    or bpftrace 0.25's ``typeof(x)``: ``of`` the expression (or a bare name, which the checker reads
    as a type when it names one) whose type it is, ``name`` then "typeof"."""

    name: str
    pointer_depth: int = 0
    of: Expr | None = None


@record
class ProbeSpec(Node):
    """One probe: what to attach to, split so the resolver needs no parsing of its own.

    ``kind`` is the long name ('kprobe', 'kfunc', 'tracepoint', 'uprobe', 'usdt',
    'BEGIN'...); ``target`` the binary path or module ('' when none); ``parts``
    the remaining colon-separated parts, unquoted (``('syscalls',
    'sys_enter_openat')``, ``('s', '1')``); ``offset`` the ``+N`` of
    ``kprobe:f+16``; ``text`` the probe as written.
    """

    kind: str
    target: str
    parts: tuple[str, ...]
    offset: int | None
    text: str


# -- expressions -----------------------------------------------------------------------------------


@record
class Int(Expr):
    """An integer literal, already converted (hex, octal, ``1_000``, ``1e6``, ``1ul``)."""

    value: int


@record
class Bool(Int):
    """``true`` (value 1) or ``false`` (0): an Int to every stage but the checker, which types it bool."""


@record
class Str(Expr):
    """A string literal with its escapes resolved."""

    value: str


@record
class Builtin(Expr):
    """A bare identifier: a builtin variable (pid, comm, args, arg0...) or a name the checker must know."""

    name: str


@record
class Positional(Expr):
    """A positional parameter ``$N`` (index N >= 1), or ``$#`` (index 0): the parameter count."""

    index: int


@record
class Var(Expr):
    """A scratch variable ``$name`` (name without the ``$``)."""

    name: str


@record
class MapRef(Expr):
    """A map read or write target: ``@name[keys...]``; name '' is the anonymous map ``@``."""

    name: str
    keys: tuple[Expr, ...] = ()


@record
class Call(Expr):
    """A function call ``name(args...)``; args may contain a TypeName (``sizeof(struct x)``)."""

    name: str
    args: tuple[Expr | TypeName, ...] = ()


@record
class Binary(Expr):
    """A binary operation, ``op`` as written (``'+'``, ``'&&'``, ``'<<'``...)."""

    op: str
    left: Expr
    right: Expr


@record
class Unary(Expr):
    """A prefix operation: ``'!'``, ``'~'``, ``'-'`` or ``'*'`` (dereference)."""

    op: str
    operand: Expr


@record
class Ternary(Expr):
    """``cond ? then : else_``."""

    cond: Expr
    then: Expr
    else_: Expr


@record
class Cast(Expr):
    """``(type)expr``."""

    type: TypeName
    expr: Expr


@record
class Field(Expr):
    """Member access ``expr.name`` (arrow False) or ``expr->name`` (arrow True); ``$t.0`` has name '0'."""

    expr: Expr
    name: str
    arrow: bool = False


@record
class Index(Expr):
    """Subscript ``expr[index]`` of an array or pointer (map keys live in MapRef instead)."""

    expr: Expr
    index: Expr


@record
class Tuple(Expr):
    """A tuple ``(a, b, ...)`` of two or more elements; with ``names``, bpftrace 0.25's record
    ``(a=1, b="x")``, one or more elements each with its name."""

    elems: tuple[Expr, ...]
    names: tuple[str, ...] = ()


@record
class BlockExpr(Expr):
    """``{ stmts; value }`` as a value (bpftrace 0.24): the statements run, then the last one, an
    expression, is the value. The expander (expand.py) rewrites it into statements before the one
    that holds it; the checker never meets one."""

    body: list[Stmt]


# -- statements ------------------------------------------------------------------------------------


@record
class IncDec(Expr, Stmt):
    """``++``/``--`` on a Var or MapRef, before (prefix) or after; a statement on its own, or an expression."""

    target: Var | MapRef
    op: str
    prefix: bool = False


@record
class ExprStmt(Stmt):
    """An expression statement (calls such as ``printf``, ``delete``, ``exit``)."""

    expr: Expr


@record
class Assign(Stmt):
    """``target op value`` where op is ``=`` or a compound assignment (``+=`` ... ``>>=``)."""

    target: Var | MapRef
    op: str
    value: Expr


@record
class If(Stmt):
    """``if (cond) { then } [else { else_ }]``; ``else if`` is an else_ holding one If."""

    cond: Expr
    then: list[Stmt]
    else_: list[Stmt] | None = None


@record
class While(Stmt):
    """``while (cond) { body }``."""

    cond: Expr
    body: list[Stmt]


@record
class Unroll(Stmt):
    """``unroll (count) { body }``: body repeated count times (the checker requires a constant)."""

    count: Expr
    body: list[Stmt]


@record
class ForMap(Stmt):
    """``for ($kv : @m) { body }``: body once per element of the map, $kv = (key, value)."""

    decl: Var
    map: Expr
    body: list[Stmt]


@record
class ForRange(Stmt):
    """``for ($i : start..end) { body }``: body for each integer from start up to end, end excluded;
    both ends evaluated once, before the first iteration."""

    decl: Var
    start: Expr
    end: Expr
    body: list[Stmt]


@record
class Return(Stmt):
    """``return``: leave this probe's program; ``return e`` (0.25): with ``e`` its value (a test
    probe's: 0 passes)."""

    value: Expr | None = None


@record
class Break(Stmt):
    """``break``: leave the innermost while loop."""


@record
class Continue(Stmt):
    """``continue``: next iteration of the innermost while loop."""


@record
class Block(Stmt):
    """A bare ``{ ... }`` statement list inside a body: a scope of its own, as an if's body."""

    body: list[Stmt]


@record
class Let(Stmt):
    """``let $x [: type] [= value];``: declares ``$x`` in the enclosing block (bpftrace 0.22), so a
    variable can be given a value in an inner block and read after it."""

    var: Var
    type: TypeName | None = None
    value: Expr | None = None


@record
class MapDecl(Node):
    """``let @name = kind(max_entries);`` before the probes: the BPF map type (hash, lruhash,
    percpuhash, percpulruhash) and size of @name (bpftrace 0.24)."""

    name: str
    kind: str
    max_entries: int


@record
class ProbeBlock(Node):
    """One action block: the probes it attaches to, its optional predicate, and its statements."""

    probes: list[ProbeSpec]
    predicate: Expr | None
    body: list[Stmt]


@record
class MacroDef(Node):
    """``macro name(params) { body }`` (bpftrace 0.24): a tree to paste where it is called, not code."""

    name: str
    params: list[Expr]
    body: list[Stmt]


@record
class Program(Node):
    """A whole script: the preamble (recorded, unused: types come from BTF) and the probe blocks."""

    includes: list[Include]
    probes: list[ProbeBlock]
    directives: list[Directive] = field(default_factory=list)
    c_definitions: list[CDefinition] = field(default_factory=list)
    map_decls: list[MapDecl] = field(default_factory=list)
    config: list[ConfigAssign] = field(default_factory=list)
    macros: list[MacroDef] = field(default_factory=list)
    block_exprs: bool = False       # the tree holds a BlockExpr: the expander must walk it


# -- traversal -------------------------------------------------------------------------------------

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = tuple(n for n in record_fields(cls) if n != "pos")
        _CHILD_FIELDS[cls] = names
    return names


def children(node: Node) -> Iterator[Node]:
    """The direct child nodes of ``node`` in source order (lists and tuples flattened)."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, Node):
                    yield item


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself first), depth first in source order; iterative, so deep trees are fine."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def depth(node: Node) -> int:
    """How deeply ``node``'s tree nests (a leaf is 1); iterative, so the parser can refuse trees too deep to check."""
    best = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d > best:
            best = d
        for c in children(n):
            stack.append((c, d + 1))
    return best


class Visitor:
    """Dispatch on node class: ``visit(node)`` calls ``visit_<ClassName>`` or ``generic_visit`` (visits children)."""

    def visit(self, node: Node) -> object:
        """Visit one node with the method named after its class."""
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node: Node) -> object:
        """Visit every child; the default for node kinds without a ``visit_`` method."""
        for c in children(node):
            self.visit(c)
        return None
