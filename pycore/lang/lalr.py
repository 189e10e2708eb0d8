"""A table-driven LALR(1) parser with a contextual lexer: the run time of ``grammar.lark``.

lark stays the grammar's tool at build time: ``./dev.sh grammar`` runs
:func:`export` (``python -m pycore.lang.lalr``), which builds lark's LALR
parser from the grammar and writes what that parser runs on into
``grammar_tables.py``, as plain Python literals: the action/goto table, each
state's lexer (its terminals in lark's order, and lark's keyword retyping),
and each rule's tree shaping. This module is the textbook driver over those
tables; it imports neither lark nor typing, so a first ``pycore trace`` pays
for neither (bench/bench_trace.py --only startup, rows "pycore, new" and
"pycore, cold"; parser.py has the figures).

It behaves as lark's LALR parser with its contextual lexer does, for
parser.py's callbacks and error messages: the same tokens (lark's terminal
order, keywords retyped as lark's "unless" callbacks do, the PROBE callback
called where lark calls it), the same reductions with children filtered and
inlined as lark's tree builder does them (``_rule`` inlined, ``?rule`` with
one child replaced by it, ``_TERMINAL`` and anonymous tokens dropped, ``[x]``
as None), and the same errors (UnexpectedCharacters, UnexpectedToken with
``expected`` and ``accepts``). tests/test_trace_parser.py compares it with
a parser lark builds from the grammar.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

__all__ = ["Token", "Parser", "ParseError", "UnexpectedCharacters", "UnexpectedToken", "export"]


class Token(str):
    """A token: its text, with its terminal's name and where it starts (line and column from 1)."""

    __slots__ = ("type", "start_pos", "line", "column")
    type: str
    start_pos: int
    line: int
    column: int

    def __new__(cls, type_: str, value: str, start_pos: int = 0, line: int = 1, column: int = 1) -> Token:
        self = str.__new__(cls, value)
        self.type, self.start_pos, self.line, self.column = type_, start_pos, line, column
        return self

    def __reduce__(self) -> tuple[Callable[..., Token], tuple[str, str, int, int, int]]:
        return Token, (self.type, str(self), self.start_pos, self.line, self.column)

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str(self)!r})"


class ParseError(Exception):
    """Any syntax error of this parser."""


class UnexpectedCharacters(ParseError):
    """No terminal matches at ``pos_in_stream``, in this state's lexer nor in the lexer of all terminals."""

    def __init__(self, pos: int, line: int, column: int, allowed: set[str]) -> None:
        super().__init__(f"no terminal matches at line {line} col {column}")
        self.pos_in_stream, self.line, self.column, self.allowed = pos, line, column, allowed


class UnexpectedToken(ParseError):
    """A token the parser cannot take in its state.

    ``expected`` is the state's terminals (LALR merges states, so it
    over-reports); ``accepts``, computed on first use, is those a trial run
    of the parser from this state would really shift.
    """

    def __init__(self, token: Token, expected: set[str], parser: Parser, stack: list[int]) -> None:
        super().__init__(f"unexpected token {token!r} at line {token.line} col {token.column}")
        self.token, self.expected = token, expected
        self.line, self.column, self.pos_in_stream = token.line, token.column, token.start_pos
        self._parser, self._stack = parser, list(stack)
        self._accepts: set[str] | None = None

    @property
    def accepts(self) -> set[str]:
        if self._accepts is None:
            states = self._parser.states
            self._accepts = {t for t in states[self._stack[-1]] if t.isupper() and self._parser.shifts(self._stack, t)}
        return self._accepts


class _Tree:
    """A rule's node where the builder has no method for it: only ever a ``_rule``, inlined into its parent."""

    __slots__ = ("data", "children")

    def __init__(self, data: str, children: list[object]) -> None:
        self.data, self.children = data, children


class _Lexer:
    """One state's lexer: its terminals, tried in lark's order (priority, then longest possible match).

    Speed trick, for a first run's start to attached (bench/bench_trace.py
    --only startup, "pycore, cold"; --only dwarf, "pycore, first"): lark joins
    a state's terminals into one alternation and compiles it, ~0.4 ms per
    state a script meets (3.4 ms of a one-liner's 3.8 ms first parse, nine
    states). Here a character's candidates are only the terminals that can start
    with it (``FIRST``, worked out at build time), tried one by one in the same
    order, which picks the same terminal as the alternation would; a literal
    terminal is a ``startswith``, and a pattern is compiled once, on first use,
    for every state: that one-liner's first parse takes 0.9 ms.
    """

    __slots__ = ("names", "unless", "allowed", "by_char")

    def __init__(self, names: tuple[str, ...], unless: dict[str, dict[str, str]], ignore: tuple[str, ...]) -> None:
        self.names, self.unless = names, unless
        self.allowed = set(names) - set(ignore) or {"<END-OF-FILE>"}
        self.by_char: dict[str, tuple[str, ...]] = {}


class Parser:
    """The grammar's parser: ``Parser(tables, builder, {"TERMINAL": callback}).parse(text)``.

    ``tables`` is the generated module. At each reduction the builder's method
    named after the rule (or its alias) gets the rule's children, as lark's
    transformer would; a lexer callback gets each token of its terminal and
    returns it (or raises).
    """

    def __init__(self, tables: ModuleType, builder: object, lexer_callbacks: dict[str, Callable[[Token], Token]]) -> None:
        t = tables
        self.states: list[dict[str, int]] = t.STATES
        self.start: int = t.START
        self.end: int = t.END
        self.patterns: dict[str, str] = t.TERMINALS
        self.first: dict[str, str] = t.FIRST
        self.ignore: tuple[str, ...] = t.IGNORE
        # literal terminals match as strings; the others' patterns are compiled on first use
        self.matchers: dict[str, object] = dict(t.LITERALS)
        lexers = [_Lexer(names, unless, self.ignore) for names, unless in t.LEXERS]
        self.root = lexers[0]
        self.state_lexers = [lexers[i] for i in t.STATE_LEXER]
        self.callbacks = lexer_callbacks
        self.rules = []
        for origin, size, name, expand1, include, nones in t.RULES:
            f = getattr(builder, name, None)
            if f is None:
                f = _tree_maker(name)
            self.rules.append((origin, size, f, expand1, include, nones))

    def shifts(self, stack: list[int], terminal: str) -> bool:
        """Whether the parser in ``stack``'s state would shift ``terminal`` (after its reductions)."""
        states, stack = self.states, list(stack)
        while True:
            action = states[stack[-1]].get(terminal)
            if action is None:
                return False
            if action >= 0:
                return True
            origin, size = self.rules[~action][:2]
            if size:
                del stack[-size:]
            stack.append(states[stack[-1]][origin])
            if stack[-1] == self.end and terminal == "$END":
                return True   # the whole script reduced to the start rule

    def _candidates(self, lexer: _Lexer, c: str) -> tuple[str, ...]:
        """The terminals of ``lexer`` that may match at a ``c``, in its order (FIRST's "\\x80": any non-ASCII)."""
        key = c if c < "\x80" else "\x80"
        found = lexer.by_char[c] = tuple(n for n in lexer.names if key in self.first[n])
        return found

    def _token(self, lexer: _Lexer, text: str, pos: int, line: int, line_start: int) -> tuple[Token | None, int, int, int]:
        """The next token from ``pos`` with ``lexer`` (ignored terminals skipped), and the position after it.

        None at the end of the text; UnexpectedCharacters where nothing matches.
        """
        ignore, matchers, by_char = self.ignore, self.matchers, lexer.by_char
        n = len(text)
        while pos < n:
            c = text[pos]
            candidates = by_char.get(c)
            if candidates is None:
                candidates = self._candidates(lexer, c)
            value = None
            for kind in candidates:
                pattern = matchers.get(kind)
                if pattern is None:
                    pattern = matchers[kind] = re.compile(self.patterns[kind])
                if pattern.__class__ is str:
                    if text.startswith(pattern, pos):   # type: ignore[arg-type]
                        value = pattern
                        break
                else:
                    m = pattern.match(text, pos)   # type: ignore[attr-defined]
                    if m is not None:
                        value = m.group()
                        break
            if value is None:
                raise UnexpectedCharacters(pos, line, pos - line_start + 1, lexer.allowed)
            start, start_line, column = pos, line, pos - line_start + 1
            pos += len(value)
            if "\n" in value:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
            if kind in ignore:
                continue
            tok = Token(kind, value, start, start_line, column)
            retype = lexer.unless.get(kind)
            if retype is not None and value in retype:
                tok.type = retype[value]    # a keyword its name-like terminal also matches: lark's "unless"
            callback = self.callbacks.get(tok.type)
            if callback is not None and tok.type == kind:
                tok = callback(tok)
            return tok, pos, line, line_start
        return None, pos, line, line_start

    def parse(self, text: str) -> object:
        """The builder's value for the start rule, or UnexpectedCharacters/UnexpectedToken (or a callback's error)."""
        states, rules, state_lexers = self.states, self.rules, self.state_lexers
        stack = [self.start]
        values: list[object] = []
        pos, line, line_start = 0, 1, 0
        last: Token | None = None
        while True:
            try:
                tok, pos, line, line_start = self._token(state_lexers[stack[-1]], text, pos, line, line_start)
            except UnexpectedCharacters as e:
                # a terminal of another state here: reported as an unexpected token, as lark does
                try:
                    tok = self._token(self.root, text, e.pos_in_stream, e.line, e.pos_in_stream - e.column + 1)[0]
                except UnexpectedCharacters:
                    raise e from None
                assert tok is not None
                raise UnexpectedToken(tok, set(e.allowed), self, stack) from None
            if tok is None:
                tok = Token("$END", "", last.start_pos, last.line, last.column) if last else Token("$END", "")
            kind = tok.type
            while True:
                action = states[stack[-1]].get(kind)
                if action is None:
                    raise UnexpectedToken(tok, {s for s in states[stack[-1]] if s.isupper()}, self, stack)
                if action >= 0:
                    stack.append(action)
                    values.append(tok)
                    break
                origin, size, f, expand1, include, nones = rules[~action]
                if size:
                    children = values[-size:]
                    del values[-size:]
                    del stack[-size:]
                else:
                    children = []
                if include is not None:   # lark's child filter: drop, inline _rules, placeholders for [x]
                    kept: list[object] = []
                    for i, expand, none in include:
                        if none:
                            kept += [None] * none
                        if expand:
                            kept += children[i].children   # type: ignore[attr-defined]
                        else:
                            kept.append(children[i])
                    if nones:
                        kept += [None] * nones
                    children = kept
                value = children[0] if expand1 and len(children) == 1 else f(children)
                stack.append(states[stack[-1]][origin])
                values.append(value)
                if kind == "$END" and stack[-1] == self.end:
                    return value
            last = tok


def _tree_maker(name: str):   # noqa: ANN202 - a closure for Parser's rule table
    return lambda children: _Tree(name, children)


# -- build time: the tables, from lark -------------------------------------------------------------


def export(grammar_path: str) -> str:
    """The text of ``grammar_tables.py``: lark's LALR parser for the grammar, as the literals :class:`Parser` reads.

    Build time only (``./dev.sh grammar``): it needs lark, which a run does not.
    """
    import hashlib
    import pprint

    from lark import Lark

    with open(grammar_path, "rb") as f:
        source = f.read()
    lark = Lark(source.decode(), parser="lalr", lexer="contextual", start="program", maybe_placeholders=True)
    table = lark.parser.parser._parse_table
    contextual = lark.parser.lexer
    rule_index = {rule: i for i, rule in enumerate(lark.rules)}

    lexers: list[tuple[tuple[str, ...], dict[str, dict[str, str]]]] = []
    lexer_index: dict[object, int] = {}

    def lexer_of(basic: Any) -> int:
        scanner = basic.scanner   # lark's compiled lexer: its terminal order, minus keywords it retypes
        unless = {}
        for name, callback in basic.callback.items():
            assert type(callback).__name__ == "UnlessCallback", callback
            unless[name] = {t.pattern.value: t.name for t in callback.scanner.terminals}
            assert all(not t.pattern.flags for t in callback.scanner.terminals)
        entry = (tuple(t.name for t in scanner.terminals), unless)
        key = repr(entry)
        if key not in lexer_index:
            lexer_index[key] = len(lexers)
            lexers.append(entry)
        return lexer_index[key]

    lexer_of(contextual.root_lexer)
    assert sorted(table.states) == list(range(len(table.states)))
    # lark numbers its states in an order that changes from run to run (it walks sets): renumber
    # them breadth first from the start, symbols in name order, so the same grammar always gives
    # the same file (a grammar change then shows as a small diff, and a merge is redone by
    # regenerating, not by reading 4,000 lines of moved states)
    start = table.start_states["program"]
    order, seen = [start], {start}
    for s in order:
        for sym, (action, arg) in sorted(table.states[s].items(), key=lambda kv: str(kv[0])):
            if action.name == "Shift" and arg not in seen:
                seen.add(arg)
                order.append(arg)
    order += [s for s in range(len(table.states)) if s not in seen]   # none in a sound table; kept to be sure
    number = {old: new for new, old in enumerate(order)}
    state_lexer = [lexer_of(contextual.lexers[s]) for s in order]
    states = []
    for s in order:
        actions = {}
        for sym, (action, arg) in sorted(table.states[s].items(), key=lambda kv: str(kv[0])):
            actions[str(sym)] = number[arg] if action.name == "Shift" else ~rule_index[arg]
        states.append(actions)
    rules = []
    for rule in lark.rules:
        include: Any = None
        nones = 0
        empty = rule.options.empty_indices
        keep = [(i, not sym.is_term and sym.name.startswith("_")) for i, sym in enumerate(rule.expansion)
                if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out)]   # type: ignore[attr-defined]
        # as lark's maybe_create_child_filter: how many Nones before each kept child, and after the last
        runs = [len(ones) for ones in "".join(str(int(b)) for b in empty).split("0")] if empty else \
            [0] * (len(rule.expansion) + 1)
        if empty or len(keep) < len(rule.expansion) or any(x for _, x in keep):
            include, pending, kept = [], 0, dict(keep)
            for i in range(len(rule.expansion)):
                pending += runs[i]
                if i in kept:
                    include.append((i, kept[i], pending))
                    pending = 0
            include, nones = tuple(include), pending + runs[len(rule.expansion)]
        name = str(rule.alias or rule.options.template_source or rule.origin.name)
        rules.append((str(rule.origin.name), len(rule.expansion), name, bool(rule.options.expand1 and not rule.alias),
                      include, nones))
    terminals = {t.name: t.pattern.to_regexp() for t in lark.terminals if t.pattern.type == "re"}
    literals = {t.name: t.pattern.value for t in lark.terminals if t.pattern.type == "str"}
    assert all(not t.pattern.flags for t in lark.terminals)
    first = {t.name: _first_chars(t.pattern.to_regexp()) for t in lark.terminals}
    digest = hashlib.sha256(source).hexdigest()
    out = [
        f"# Generated from grammar.lark (sha256 {digest})",
        "# by 'python -m pycore.lang.lalr' through './dev.sh grammar', after every grammar change; do not edit.",
        f"# lark {__import__('lark').__version__}'s LALR parser with its contextual lexer, as literals for",
        "# pycore.lang.lalr.Parser; tests/test_trace_parser.py checks the hash and compares the two parsers.",
        "",
        "# terminal -> its regular expression, or its text",
        f"TERMINALS = {pprint.pformat(terminals, width=120)}",
        f"LITERALS = {pprint.pformat(literals, width=120, compact=True)}",
        "# terminal -> the ASCII characters a match may start with, and \\x80 if it may start with another",
        f"FIRST = {pprint.pformat(first, width=120)}",
        f"IGNORE = {tuple(lark.ignore_tokens)!r}",
        "# lexers: (terminals in the order tried, {terminal: {keyword text: keyword terminal}}); 0 has them all",
        f"LEXERS = {pprint.pformat(lexers, width=120, compact=True)}",
        "# parser state -> its lexer",
        f"STATE_LEXER = {pprint.pformat(state_lexer, width=120, compact=True)}",
        "# rules: (name, length, callback, replaced by its only child?, kept children (index, inlined?, Nones",
        "# before) or None for all, Nones after)",
        f"RULES = {pprint.pformat(rules, width=120, compact=True)}",
        "# parser state -> {symbol: next state if >= 0 (shift, goto), else ~rule (reduce)}",
        f"STATES = {pprint.pformat(states, width=120, compact=True)}",
        f"START = {number[start]}",
        f"END = {number[table.end_states['program']]}",
    ]
    return "\n".join(out) + "\n"


def _first_chars(pattern: str) -> str:
    """The characters a match of ``pattern`` may start with: ASCII ones, and "\\x80" for any other.

    From the parsed pattern (re's own parser); it may say more than the
    pattern can start with (lookarounds are skipped), never less, so the lexer
    that tries only these terminals finds what trying all of them would.
    """
    from re import _constants as C   # type: ignore[attr-defined]
    from re import _parser as sre    # type: ignore[attr-defined]

    ascii_ = {chr(i) for i in range(128)}
    categories = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
                  C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}

    def in_class(items: Any) -> tuple[set[str], bool]:
        chars: set[str] = set()
        other = negate = False
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                chars |= {chr(av)} & ascii_
                other |= av >= 128
            elif op is C.RANGE:
                chars |= {chr(i) for i in range(av[0], min(av[1], 127) + 1)}
                other |= av[1] >= 128
            elif op is C.CATEGORY:
                chars |= {c for c in ascii_ if re.match(categories[av], c)}
                other = True
            else:
                return set(ascii_), True
        return (ascii_ - chars, True) if negate else (chars, other)

    def item(op: Any, av: Any) -> tuple[set[str], bool, bool]:   # (chars, other, may be empty)
        if op is C.LITERAL:
            return {chr(av)} & ascii_, av >= 128, False
        if op is C.NOT_LITERAL:
            return ascii_ - {chr(av)}, True, False
        if op is C.ANY:
            return ascii_ - {"\n"}, True, False
        if op is C.IN:
            return (*in_class(av), False)
        if op is C.SUBPATTERN:
            return seq(av[3])
        if op is C.ATOMIC_GROUP:
            return seq(av)
        if op is C.BRANCH:
            parts = [seq(p) for p in av[1]]
            return (set().union(*(p[0] for p in parts)), any(p[1] for p in parts), any(p[2] for p in parts))
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            chars, other, empty = seq(av[2])
            return chars, other, empty or av[0] == 0
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return set(), False, True
        return set(ascii_), True, True

    def seq(items: Any) -> tuple[set[str], bool, bool]:
        chars: set[str] = set()
        other = False
        for op, av in items:
            c, o, empty = item(op, av)
            chars |= c
            other |= o
            if not empty:
                return chars, other, False
        return chars, other, True

    chars, other, empty = seq(sre.parse(pattern))
    if empty:
        chars, other = set(ascii_), True
    return "".join(sorted(chars)) + ("\x80" if other else "")


if __name__ == "__main__":
    import sys

    sys.stdout.write(export(sys.argv[1]))
