"""bpftrace script text -> :class:`pycore.lang.ast.Program`, or a :class:`ScriptError` saying where and why.

The grammar is ``grammar.lark`` (LALR, contextual lexer). The tree is built
while parsing (the parser calls :class:`_Builder` at each reduction), so there
is no intermediate parse tree and no recursion: however deep a script nests,
parsing uses a stack, not Python frames; a tree nested deeper than
:data:`MAX_DEPTH` is refused here, so later stages (which recurse) never meet one.

Start-up: the parser is :mod:`pycore.lang.lalr` over tables lark computed from
the grammar ahead of time (``grammar_tables.py``, see :func:`_parser`), built
once per process on first use; ``pycore trace`` parses through
:func:`parse_cached`, which keeps the trees of scripts it has parsed before,
so running a script again needs no parser at all.
"""

from __future__ import annotations

import os
import re
import threading

import pycore.record
from pycore.lang import ast as A
from pycore.lang.errors import ScriptError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from pycore.lang.lalr import Token

__all__ = ["parse", "parse_cached", "parse_probe", "MAX_DEPTH", "PROBE_ALIASES", "PROBE_KINDS"]

#: Deepest tree accepted (a leaf is 1). Real scripts stay under 30; the
#: checker and the code generator recurse a few frames per level.
MAX_DEPTH = 200

#: Short probe names bpftrace accepts, and the long name the tree uses.
PROBE_ALIASES: dict[str, str] = {
    "k": "kprobe", "kr": "kretprobe", "u": "uprobe", "ur": "uretprobe", "t": "tracepoint",
    "rt": "rawtracepoint", "f": "kfunc", "fr": "kretfunc", "fentry": "kfunc", "fexit": "kretfunc",
    "i": "interval", "p": "profile", "s": "software", "h": "hardware", "U": "usdt",
    "w": "watchpoint", "aw": "asyncwatchpoint", "it": "iter",
}

#: Every probe kind, with how many ':'-separated parts may follow it.
PROBE_KINDS: dict[str, tuple[int, int]] = {
    "BEGIN": (0, 0), "END": (0, 0),
    "kprobe": (1, 2), "kretprobe": (1, 2),          # [module:]function
    "kfunc": (1, 2), "kretfunc": (1, 2),            # [module:]function
    "rawtracepoint": (1, 2),                        # [module:]name
    "uprobe": (1, 2), "uretprobe": (1, 2),          # [binary:]function (no binary: -p PID)
    "usdt": (1, 3),                                 # [binary:][provider:]name
    "tracepoint": (2, 2),                           # category:name
    "interval": (1, 2), "profile": (1, 2),          # unit:count (or 1s, 99hz)
    "software": (1, 2), "hardware": (1, 2),         # event[:count]
    "watchpoint": (3, 3), "asyncwatchpoint": (3, 3),  # address:length:mode
    "iter": (1, 2),
    "self": (2, 2),                                 # signal:SIGUSR1 (bpftrace 0.22)
    "test": (1, 1),                                 # name (bpftrace 0.25: run by pycore trace --test)
}

# Kinds whose first part, when there is more than one, is a binary or module.
_ANY_CASE = {**{k.lower(): k for k in PROBE_KINDS}, **{k.lower(): v for k, v in PROBE_ALIASES.items() if k != "U"}}

_TARGETED = {"kprobe", "kretprobe", "kfunc", "kretfunc", "rawtracepoint", "uprobe", "uretprobe", "usdt"}
_OFFSETS = {"kprobe", "uprobe"}
# the builtins bpftrace's parser keeps from being a macro's parameter (its Parser::is_builtin)
_MACRO_BUILTINS = {"args", "ctx", "kstack", "nsecs", "pid", "tid", "ustack"}
_KEYWORDS = {"if", "else", "while", "unroll", "for", "return", "break", "continue", "struct", "union", "enum", "let",
             "comptime", "typeof"}

#: bpftrace 0.24's duration literals (``100ms``): nanoseconds per unit.
DURATIONS: dict[str, int] = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
                             "d": 86400 * 10**9}
_DURATION_RE = re.compile(r"([0-9]+(?:_[0-9]+)*)(ns|us|ms|s|m|h|d)")

#: The map kinds of a declaration (``let @m = lruhash(N)``), bpftrace 0.24's names.
MAP_DECL_KINDS = ("hash", "lruhash", "percpuhash", "percpulruhash")


class _Fail(Exception):
    """A semantic error found while building the tree; turned into a ScriptError by :func:`parse`."""

    def __init__(self, message: str, line: int, col: int, width: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.col, self.width = message, line, col, width


# -- the parser, built once ------------------------------------------------------------------------
#
# Start-up trick: lark is the grammar's tool at build time only. Built from
# the grammar at run time, lark took ~15 ms to import and ~65 ms to compute
# the tables; its own cache file of them saved the 65 ms but not the import,
# and not on a first run or where ~/.cache is read-only (the kernel VMs, a
# service with ProtectHome). Its standalone module (lark's runtime and our
# tables as literals, generated ahead of time) still cost ~35 ms on a first
# run: ~20 ms to import (typing, logging, dataclasses, pickle... and lark's
# runtime), ~7 ms to build, ~4.5 ms to compile the contextual lexer's
# regexes. Now './dev.sh grammar' exports lark's tables as plain literals
# (grammar_tables.py) and lalr.py runs them, its lexer compiling only the
# terminals a script meets. Building the parser (its modules' import
# included) and the first parse of bench_trace's DWARF one-liner, in a fresh
# process: 23 + 4.3 ms -> 0.9 + 0.9 ms (41 + 7.5 -> 1.3 + 1.1 ms, medians of
# 12, with a QEMU VM busy on the same 2 CPUs). bench_trace, old and new
# interleaved in the same minutes (medians of 5, two rounds each, bpftrace
# 0.058-0.067 s): --only startup "pycore, new" 90/116 -> 60/57 ms (1.55/1.73x
# -> 1.00/0.98x bpftrace's), "pycore, cold" 91/83 -> 72/63 ms (1.56/1.23x ->
# 1.19/1.08x), peak RSS 22.2 -> 18.0 MiB; --only dwarf "pycore, first"
# 1.36/2.31x -> 0.84/0.57x. A script run before needs no parser at all
# (parse_cached, below).

_PARSER: Any = None    # lalr.Parser
# whether this thread's parse met a block expression: program() records it in the tree, so the
# expander walks only the trees that need it (the builder is shared, the parse is the thread's)
_SEEN = threading.local()
_GRAMMAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grammar.lark")   # grammar_tables.py's source


def _cache_dir() -> str | None:
    """The cache directory, if it is ours to write: made 0700, owned by us, not group/world-writable.

    The trees kept there are pickles loaded back; one another user could write
    would run their code as whoever runs pycore trace (often root).
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    d = os.path.join(base, "pycore")
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.stat(d)
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not os.access(d, os.W_OK):
        return None
    return d


def _parser() -> Any:
    """The process's one parser (lalr.Parser over grammar_tables), built on first use."""
    global _PARSER
    if _PARSER is None:
        from pycore.lang import grammar_tables
        from pycore.lang.lalr import Parser

        _PARSER = Parser(grammar_tables, _Builder(), {"PROBE": _check_probe})
    return _PARSER


# -- the public entry points -----------------------------------------------------------------------


def parse(text: str, filename: str = "<stdin>") -> A.Program:
    """Parse a whole bpftrace script; every problem is a ScriptError with FILE:LINE:COL and a caret."""
    from pycore.lang.lalr import UnexpectedCharacters, UnexpectedToken

    def error(message: str, line: int, col: int, width: int = 1) -> ScriptError:
        return ScriptError(message, line, col, filename, text, width)

    def newer(pos: int) -> ScriptError | None:
        """A feature of a later bpftrace the parse stopped on, at offset ``pos``, as the error."""
        from pycore.lang.newer import syntax_feature

        found = syntax_feature(text, pos)
        if found is None:
            return None
        why, at = found
        line = text.count("\n", 0, at) + 1
        return error(why, line, at - text.rfind("\n", 0, at))

    _SEEN.block_exprs = False
    try:
        program = _parser().parse(text)
    except _Fail as e:
        if e.message.startswith("invalid integer"):
            later = newer(_offset(text, e.line, e.col))
            if later is not None:
                raise later from None
        raise error(e.message, e.line, e.col, e.width) from None
    except UnexpectedCharacters as e:
        later = newer(e.pos_in_stream)
        if later is not None:
            raise later from None
        raise error(_bad_character(text, e.pos_in_stream), e.line, e.column) from None
    except UnexpectedToken as e:
        tok = e.token
        bare = _bare_condition(text, tok.start_pos) if tok.type not in ("$END", "LBRACE") and tok.start_pos else None
        if bare is not None:
            kw, at = bare
            line = text.count("\n", 0, at) + 1
            raise error(f"a condition without parentheses is one operand ('{kw} $x {{', '{kw} !$x {{'), as in "
                        f"bpftrace 0.24: put the whole condition in parentheses, {kw} (...) {{", line,
                        at - text.rfind("\n", 0, at), len(kw)) from None
        later = newer(len(text) if tok.type == "$END" or tok.start_pos is None else tok.start_pos)
        if later is not None:
            raise later from None
        accepts = e.accepts or e.expected   # what really fits here (LALR's expected set merges states)
        late = re.search(r"\bconfig\s*$", text[:tok.start_pos or 0]) if tok == "=" else None
        if late is not None:     # 'config = {' read as a probe named config: the block came too late
            line = text.count("\n", 0, late.start()) + 1
            raise error("the config block comes before the first probe (after the #include lines), as in "
                        "bpftrace", line, late.start() - text.rfind("\n", 0, late.start()), 6) from None
        if tok.type == "$END":
            line, col = _end_of(text)
            raise error(f"unexpected end of input — expected {_expected(accepts)}", line, col) from None
        if tok.type == "MAP" and re.search(r"(?<![\w$@.])let\s*$", text[:tok.start_pos or 0]):
            raise error("a map is declared before the probes (let @m = lruhash(100);), not in a probe's body",
                        tok.line or 1, tok.column or 1, len(tok)) from None
        if tok.start_pos is not None and text.startswith("/*", tok.start_pos):
            raise error("unterminated comment", tok.line, tok.column) from None
        width = len(tok) if "\n" not in tok else 1
        typedef = re.search(r"(?:^|[;}]|\n)\s*(typedef)\s+$", text[:tok.start_pos or 0])
        if typedef and not _program_started(text, typedef.start(1)):
            line = text.count("\n", 0, typedef.start(1)) + 1
            col = typedef.start(1) - text.rfind("\n", 0, typedef.start(1))
            raise error("a typedef line is not taken before the probes (nor by bpftrace 0.17): define a struct, "
                        "union or enum there, or typedef in a header and #include it", line, col, 7) from None
        raise error(f"unexpected {_token(tok)} — expected {_expected(accepts)}", tok.line or 1,
                    tok.column or 1, width) from None
    except RecursionError:
        raise error(f"script nested too deeply to parse (more than {MAX_DEPTH} levels)", 1, 1) from None
    for block in [*program.probes, *program.macros]:
        if A.depth(block) > MAX_DEPTH:
            deep = _deepest(block)
            raise error(f"script nested too deeply (more than {MAX_DEPTH} levels)", deep.pos.line,
                        deep.pos.col)
    return program


_BARE = re.compile(r"(?<![\w$@.])(if|while|unroll)\s+[^\s{;}][^{;}]*$")


def _bare_condition(text: str, pos: int) -> tuple[str, int] | None:
    """(keyword, its offset) when the parse stopped inside an if/while/unroll condition written
    without parentheses (``if pid > 0 {``: bpftrace 0.24 takes one operand there, as pycore does)."""
    from pycore.lang.newer import _blanked

    m = _BARE.search(_blanked(text[:pos]))
    if m is None or "\n" in m.group().rstrip():
        return None
    return m.group(1), m.start(1)


def _offset(text: str, line: int, col: int) -> int:
    """The offset of ``line``:``col`` (both from 1) in ``text``."""
    start = 0
    for _ in range(line - 1):
        start = text.index("\n", start) + 1
    return start + col - 1


def _program_started(text: str, pos: int) -> bool:
    """Whether a probe's body has opened before ``pos`` (a '{' outside the C definitions' braces)."""
    depth = 0
    for m in re.finditer(r"(?:struct|union|enum)\s+\w+\s*\{|[{}]", text[:pos]):
        if m.group() == "}":
            depth = max(0, depth - 1)
        elif m.group() == "{" and depth == 0:
            return True
        else:
            depth += 1
    return False


# -- trees of scripts parsed before ----------------------------------------------------------------
#
# Start-up trick, for start-to-attached (bench/bench_trace.py): in a fresh
# process, loading lark's standalone parser, building it and compiling the
# contextual lexer's per-state regexes cost ~35 ms, about as long as all the
# rest of ``pycore trace``'s way to attached (lalr.py has since cut that to
# ~2 ms, but the tree is still not free to build). A script run again (a one-liner
# re-run, a tool script started by cron or an agent) has the same tree, so
# the tree itself is kept.
#
# The tree is a pickle in a 0700 cache directory of ours (_cache_dir). The
# file is named by the CRC-32 and length of the script text, and holds the
# text itself and the size and mtime of the code that shapes trees (this
# module, ast.py, record.py, lalr.py, grammar_tables.py), as a .pyc does; both are
# compared on load, so a collision or new code is a miss, never a wrong tree. (Not a SHA-256:
# importing hashlib loads OpenSSL, ~3 ms of a warm start.) Nothing else is
# cached: probes, BTF and the checker run every time, against the kernel of
# the moment. A file that does not load is parsed again and replaced.

_TREE_CODE = (__file__, A.__file__, pycore.record.__file__,
              *(os.path.join(os.path.dirname(os.path.abspath(__file__)), f) for f in ("lalr.py", "grammar_tables.py")))
_TREE_CACHE_FILES = 64   # newest kept; each holds one script's tree (a few KiB)


def parse_cached(text: str, filename: str = "<stdin>") -> A.Program:
    """:func:`parse`, with the tree kept in the cache directory for the next process that parses ``text``."""
    d = _cache_dir()
    if d is None:
        return parse(text, filename)
    import pickle
    import zlib

    try:
        code = tuple((st.st_size, st.st_mtime_ns) for st in map(os.stat, _TREE_CODE))
    except OSError:
        return parse(text, filename)
    data = text.encode("utf-8", "surrogatepass")
    path = os.path.join(d, f"trace-tree-{zlib.crc32(data):08x}-{len(data)}.pickle")
    try:
        with open(path, "rb") as f:
            saved_code, saved_text, program = pickle.load(f)
        if saved_code == code and saved_text == text and isinstance(program, A.Program):
            os.utime(path)   # recently used: kept by the pruning below
            return program
    except Exception:  # noqa: BLE001 - none yet, or a truncated or foreign file: parse, and write it anew
        pass
    program = parse(text, filename)
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump((code, text, program), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        _prune(d)
    except (OSError, pickle.PicklingError, RecursionError):
        pass   # the cache is an optimisation: a full disk or a tree too deep to pickle costs only time
    return program


def _prune(d: str) -> None:
    """Keep the :data:`_TREE_CACHE_FILES` most recently used trees."""
    try:
        trees = [e for e in os.scandir(d) if e.name.startswith("trace-tree-")]
        if len(trees) <= _TREE_CACHE_FILES:
            return
        trees.sort(key=lambda e: e.stat().st_mtime_ns)
        for e in trees[:-_TREE_CACHE_FILES]:
            os.unlink(e.path)
    except OSError:
        pass


def parse_probe(text: str, line: int = 1, col: int = 1) -> A.ProbeSpec:
    """One probe as written (``k:vfs_read+16``) -> ProbeSpec; for ``-l``-style listings and tests."""
    try:
        return _probe_spec(text, line, col)
    except _Fail as e:
        raise ScriptError(e.message, e.line, e.col, "<probe>", text, e.width) from None


def _deepest(node: A.Node) -> A.Node:
    """The first node at MAX_DEPTH, for the error's position."""
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d >= MAX_DEPTH:
            return n
        stack.extend((c, d + 1) for c in A.children(n))
    return node


# -- error text ------------------------------------------------------------------------------------

_EXPR_START = {"INT", "STRING", "IDENT", "VAR", "MAP", "POSITIONAL", "PARAMCOUNT", "LPAR", "CAST", "MINUS",
               "BANG", "TILDE", "STAR", "BAND", "INC", "DEC", "LBRACE", "COMPTIME"}  # {: a block expression (0.24)
_STMT_START = {"IF", "WHILE", "UNROLL", "FOR", "RETURN", "BREAK", "CONTINUE", "LET"}
_OPERATORS = {"OROR", "ANDAND", "BOR", "BXOR", "BAND", "EQ", "NE", "LT", "GT", "LE", "GE", "SHL", "SHR", "PLUS",
              "MINUS", "STAR", "SLASH", "PERCENT", "_QMARK", "DOT", "ARROW", "_LBRACK", "INC", "DEC"}
_NAMES = {
    "_SEMI": "';'", "_RBRACE": "'}'", "LBRACE": "'{'", "_RPAR": "')'", "LPAR": "'('", "_COMMA": "','",
    "_RBRACK": "']'", "_LBRACK": "'['", "_COLON": "':'", "ASSIGN": "'='", "COMPOUND_ASSIGN": "'op='",
    "SLASH": "'/'", "PRED_END": "'/' (end of the predicate)", "IDENT": "a name", "INT": "an integer",
    "_ELSE": "'else'", "STRUCT": "'struct'", "PROBE": "a probe", "DOT": "'.'", "ARROW": "'->'",
    "$END": "the end of the script", "IF": "'if'", "LET": "'let'", "WHILE": "'while'", "UNROLL": "'unroll'",
    "RETURN": "'return'", "BREAK": "'break'", "CONTINUE": "'continue'", "CAST": "a cast", "VAR": "a $variable",
    "MAP": "a @map",
    "FOR": "'for'", "_DOTDOT": "'..'",
    "CPREPROC": "a '#' line", "C_DEFINITION": "a C definition",
}
_ORDER = ["PROBE", "$END", "_SEMI", "_RBRACE", "LBRACE", "SLASH", "PRED_END", "_RPAR", "_COMMA", "_RBRACK", "_COLON",
          "ASSIGN", "COMPOUND_ASSIGN"]


def _expected(expected: Any) -> str:
    """What the parser would have accepted, in words: 'an expression', "';', '}' or an operator"."""
    exp = set(expected or ())
    phrases: list[str] = []
    if "PROBE" in exp:
        phrases.append("a probe")
        exp -= {"PROBE", "CPREPROC", "C_DEFINITION"}
    if exp & _STMT_START and "INT" in exp:
        phrases.append("a statement")
        exp -= _STMT_START | _EXPR_START
    elif "INT" in exp and "VAR" in exp:
        phrases.append("an expression")
        exp -= _EXPR_START
    operators = len(exp & _OPERATORS) >= 8
    if operators:
        exp -= _OPERATORS
    rest = sorted(exp, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    phrases += [_NAMES.get(n, n.strip("_").lower()) for n in rest]
    if operators:
        phrases.append("an operator")
    if not phrases:
        return "something else"
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _token(tok: Token) -> str:
    """A token as the user wrote it, with what kind of thing it is."""
    v, t = str(tok), tok.type
    if t in ("IDENT",) or (t == "PROBE" and ":" not in v):
        return f"keyword '{v}'" if v in _KEYWORDS else f"name '{v}'"
    kinds = {"INT": "integer", "VAR": "variable", "MAP": "map", "POSITIONAL": "parameter", "CAST": "cast",
             "PROBE": "probe", "CPREPROC": "preprocessor line", "C_DEFINITION": "C definition"}
    if t == "STRING":
        return f"string {v}" if len(v) <= 40 else f"string {v[:37]}...\""
    if t in kinds:
        return f"{kinds[t]} '{v if len(v) <= 40 else v[:37] + '...'}'"
    if t in ("IF", "_ELSE", "WHILE", "UNROLL", "FOR", "RETURN", "BREAK", "CONTINUE", "STRUCT", "LET", "COMPTIME", "TYPEOF"):
        return f"keyword '{v}'"
    if t == "PRED_END":
        return "'/'"
    return f"'{v}'"


def _bad_character(text: str, pos: int) -> str:
    """Why the lexer stopped at text[pos]."""
    c = text[pos] if 0 <= pos < len(text) else ""
    if c == '"':
        return "unterminated string (a string ends on the line it starts)"
    if text.startswith("/*", pos):
        return "unterminated comment"
    if c == "'":
        return "invalid character \"'\": there are no character literals, use a string"
    shown = c if c.isprintable() and c != "" else repr(c)
    return f"invalid character '{shown}'"


def _end_of(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character (where an unfinished script stops)."""
    stripped = text.rstrip()
    if not stripped:
        return 1, 1
    line = stripped.count("\n") + 1
    col = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, col


# -- literals ------------------------------------------------------------------------------------

_INT_RE = re.compile(r"(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<dec>[0-9]+(?:_[0-9]+)*)(?:[eE](?P<exp>[0-9]+))?)"
                     r"(?:[uU]?[lL]{0,2})")
_U64 = (1 << 64) - 1


def _int(text: str, line: int, col: int) -> int:
    """An integer literal's value: decimal (``1_000``), hex, octal (leading 0), ``NeM``, C suffixes u/l."""
    m = _INT_RE.fullmatch(text)
    if m is None:
        raise _Fail(f"invalid integer '{text}'", line, col, len(text))
    if m["hex"] is not None:
        value = int(m["hex"], 16)
    else:
        digits = m["dec"].replace("_", "")
        if m["exp"] is not None:
            exp = int(m["exp"])
            if exp > 19:
                raise _Fail(f"integer '{text}' does not fit in 64 bits", line, col, len(text))
            value = int(digits) * 10 ** exp
        elif len(digits) > 1 and digits[0] == "0":
            if not set(digits) <= set("01234567"):
                raise _Fail(f"invalid octal integer '{text}' (a leading 0 means octal)", line, col, len(text))
            value = int(digits, 8)
        else:
            value = int(digits)
    if value > _U64:
        raise _Fail(f"integer '{text}' does not fit in 64 bits", line, col, len(text))
    return value


_ESCAPE_RE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def _string(tok: Token) -> str:
    """A string literal's value: the C escapes bpftrace knows (\\n \\t \\r \\\\ \\" \\xHH \\ooo), others refused."""
    body = str(tok)[1:-1]
    if "\\" not in body:
        return body

    def unescape(m: re.Match[str]) -> str:
        e = m.group(1)
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        if e[0] == "x" and len(e) > 1:
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            v = int(e, 8)
            if v > 0o377:
                raise _Fail(f"octal escape out of range '\\{e}'", tok.line, tok.column + 1 + m.start(), len(e) + 1)
            return chr(v)
        raise _Fail(f"invalid escape '\\{e}' (known: \\n \\t \\r \\\\ \\\" \\xHH \\ooo)", tok.line,
                    tok.column + 1 + m.start(), len(e) + 1)

    return _ESCAPE_RE.sub(unescape, body)


# -- probes --------------------------------------------------------------------------------------


def _split_probe(rest: str) -> list[tuple[str, bool]]:
    """Split what follows 'kind:' on the colons outside quotes: (raw part, whether any of it was quoted)."""
    parts: list[tuple[str, bool]] = []
    cur: list[str] = []
    quoted = in_quote = False
    i = 0
    while i < len(rest):
        c = rest[i]
        if in_quote:
            if c == "\\" and i + 1 < len(rest):
                cur.append(rest[i + 1])
                i += 2
                continue
            if c == '"':
                in_quote = False
            else:
                cur.append(c)
        elif c == '"':
            in_quote = quoted = True
        elif c == ":":
            parts.append(("".join(cur), quoted))
            cur, quoted = [], False
        else:
            cur.append(c)
        i += 1
    parts.append(("".join(cur), quoted))
    return parts


def _plain_tuple(key: A.Expr) -> bool:
    """Whether a map's one key is a tuple that stands for its keys (``@m[(a, b)]`` is ``@m[a, b]``);
    a record (``@m[(a=1, b=2)]``) is one key, a record, with its names."""
    return isinstance(key, A.Tuple) and not key.names


def _probe_spec(text: str, line: int, col: int) -> A.ProbeSpec:
    """One probe token -> ProbeSpec: alias normalised, parts split and unquoted, offset and arity checked."""
    pos = A.Pos(line, col)
    kind, colon, rest = text.partition(":")
    kind = PROBE_ALIASES.get(kind, kind)
    if kind not in PROBE_KINDS:    # bpftrace 0.24: probe types in any case (its tools' begin, end)
        kind = _ANY_CASE.get(kind.lower(), kind)
    if kind not in PROBE_KINDS:
        from pycore.lang.newer import probe_feature

        later = probe_feature(text.partition(":")[0], PROBE_KINDS, PROBE_ALIASES)
        if later is not None:
            raise _Fail(later, line, col, len(text.partition(":")[0]))
        known = ", ".join(k for k in PROBE_KINDS)
        raise _Fail(f"unknown probe type '{text.partition(':')[0]}' (known: {known})", line, col,
                    len(text.partition(":")[0]))
    raw = _split_probe(rest) if colon else []
    lo, hi = PROBE_KINDS[kind]
    if not lo <= len(raw) <= hi:
        need = str(lo) if lo == hi else f"{lo} to {hi}"
        raise _Fail(f"a {kind} probe takes {need} ':'-separated part{'s' if hi != 1 else ''} after '{kind}', "
                    f"not {len(raw)}", line, col, len(text))
    offset: int | None = None
    if raw and kind in _OFFSETS | {"kretprobe", "uretprobe"}:
        last, quoted = raw[-1]
        # the offset is after the last '+' outside quotes: rest's tail after its last quote
        tail = rest[rest.rfind('"') + 1:] if quoted else last
        if "+" in tail:
            number = tail.rpartition("+")[2]
            if kind not in _OFFSETS:
                raise _Fail(f"a {kind} cannot have an offset ('+{number}')", line, col, len(text))
            try:
                offset = _int(number, line, col)
            except _Fail:
                raise _Fail(f"invalid offset '+{number}' in probe", line, col, len(text)) from None
            cut = len(number) + 1
            raw[-1] = (last[:-cut], quoted)
    parts = [p for p, _ in raw]
    for p, q in raw:
        if not p and not q:
            raise _Fail(f"empty part in probe '{text}'", line, col, len(text))
    target = ""
    if kind in _TARGETED and len(parts) >= 2:
        target = parts.pop(0)
    for (p, q) in raw[len(raw) - len(parts):]:
        if "/" in p and not q:
            # only a binary path may hold '/': this is 'kprobe:f/pid == 1/', a predicate glued to the probe
            raise _Fail(f"'/' in probe '{text}': put a space between a probe and its /predicate/", line, col,
                        len(text))
    return A.ProbeSpec(kind, target, tuple(parts), offset, text, pos=pos)


def _check_probe(tok: Token) -> Token:
    """Lexer callback: 'kprobe:f/pid == 1/' is reported as itself, not as the syntax error its remains cause.

    Only that check runs here: the fallback lexer of all terminals (used to
    name the token of a syntax error, as lark's) also calls this, for names
    in any context.
    """
    if "/" in tok and ":" in tok:
        try:
            _probe_spec(str(tok), tok.line, tok.column)
        except _Fail as e:
            if "/predicate/" in e.message:
                raise
    return tok


# -- the tree builder (the parser calls these at each reduction) ----------------------------------

def _tpos(tok: Token) -> A.Pos:
    return A.Pos(tok.line or 1, tok.column or 1)


class _ConfigBlock(list):
    """The config block's assignments, with where the block starts (one block a script)."""

    def __init__(self, items: Any, line: int, col: int) -> None:
        super().__init__(items)
        self.line, self.col = line, col


class _Builder:
    """Builds ast nodes from the grammar's rules; one method per rule or alias in grammar.lark.

    A plain object: the parser calls ``getattr(builder, rule_name)(children)``
    at each reduction, as lark calls a transformer's (tests/test_trace_parser.py
    runs it under both). No method may be named after a terminal (lark would
    run it on every token of that kind).
    """

    # top level

    def program(self, c: list[Any]) -> A.Program:
        includes: list[A.Include] = []
        directives: list[A.Directive] = []
        cdefs: list[A.CDefinition] = []
        probes: list[A.ProbeBlock] = []
        decls: list[A.MapDecl] = []
        config: _ConfigBlock | None = None
        macros: list[A.MacroDef] = []
        for item in c:
            if isinstance(item, A.ProbeBlock):
                probes.append(item)
            elif isinstance(item, A.MapDecl):
                if any(d.name == item.name for d in decls):
                    raise _Fail(f"@{item.name} is declared twice", item.pos.line, item.pos.col, len(item.name) + 1)
                decls.append(item)
            elif isinstance(item, _ConfigBlock):
                if config is not None:
                    raise _Fail("a script has one config block", item.line, item.col, 6)
                config = item
            elif isinstance(item, A.MacroDef):
                macros.append(item)
            elif item.type == "CPREPROC":
                text = str(item).rstrip()
                m = re.match(r'#\s*include\s*(?:<([^>]*)>|"([^"]*)")', text)
                if m:
                    system = m.group(1) is not None
                    includes.append(A.Include(m.group(1) if system else m.group(2), system, text, pos=_tpos(item)))
                elif re.match(r"#\s*include\b", text):
                    raise _Fail("#include needs <file> or \"file\"", item.line, item.column, len(text))
                else:
                    directives.append(A.Directive(text, pos=_tpos(item)))
            else:
                cdefs.append(A.CDefinition(str(item), pos=_tpos(item)))
        return A.Program(includes, probes, directives, cdefs, decls, list(config or ()), macros,
                         getattr(_SEEN, "block_exprs", False), pos=A.Pos(1, 1))

    def map_decl(self, c: list[Any]) -> A.MapDecl:
        kw, name, _eq, kind, _lpar, size = c
        if kind not in MAP_DECL_KINDS:
            raise _Fail(f"Invalid bpf map type: {kind} (known: {', '.join(MAP_DECL_KINDS)})", kind.line,
                        kind.column, len(kind))
        n = _int(str(size), size.line, size.column)
        if not 1 <= n <= 0xFFFFFFFF:
            raise _Fail(f"a map's size must be 1 or more, not {n}", size.line, size.column, len(size))
        if name == "@":
            raise _Fail("the anonymous map @ cannot be declared: name it", name.line, name.column, 1)
        return A.MapDecl(str(name)[1:], str(kind), n, pos=_tpos(kw))

    def config(self, c: list[Any]) -> _ConfigBlock:
        return _ConfigBlock((a for a in c if isinstance(a, A.ConfigAssign)), c[0].line, c[0].column)

    def config_assign(self, c: list[Any]) -> A.ConfigAssign:
        name, _eq, value = c
        return A.ConfigAssign(str(name), value, pos=_tpos(name))

    def macro_def(self, c: list[Any]) -> A.MacroDef:
        kw, name, _lpar, params, _lbrace, body = c
        if name in _KEYWORDS:
            raise _Fail(f"unexpected keyword '{name}' — expected the macro's name", name.line, name.column, len(name))
        return A.MacroDef(str(name), list(params or ()), body, pos=_tpos(kw))

    def macro_params(self, c: list[Any]) -> list[A.Expr]:
        params: list[A.Expr] = []
        for tok in c:
            if tok.type == "VAR":
                params.append(A.Var(str(tok)[1:], pos=_tpos(tok)))
            elif tok.type == "MAP":
                params.append(A.MapRef(str(tok)[1:], (), pos=_tpos(tok)))
            else:
                if tok in _KEYWORDS:
                    raise _Fail(f"unexpected keyword '{tok}' — expected a macro parameter", tok.line, tok.column,
                                len(tok))
                if tok in _MACRO_BUILTINS or re.fullmatch(r"s?arg[0-9]+", tok):
                    raise _Fail(f"builtin '{tok}' can't be used as a macro argument", tok.line, tok.column, len(tok))
                params.append(A.Builtin(str(tok), pos=_tpos(tok)))
        return params

    def probe_block(self, c: list[Any]) -> A.ProbeBlock:
        specs = [_probe_spec(str(t), t.line, t.column) for t in c if getattr(t, "type", None) == "PROBE"]
        body: list[A.Stmt] = c[-1]
        predicate = c[-3] if isinstance(c[-3], A.Expr) else None
        return A.ProbeBlock(specs, predicate, body, pos=specs[0].pos)

    def predicate(self, c: list[Any]) -> A.Expr:
        return c[1]

    def block(self, c: list[Any]) -> A.Block:
        return A.Block(c[1], pos=_tpos(c[0]))

    # statements

    def stmts(self, c: list[Any]) -> list[A.Stmt]:
        return [s for s in c if s is not None]

    def expr_stmt(self, c: list[Any]) -> A.Stmt:
        e = c[0]
        return e if isinstance(e, A.IncDec) else A.ExprStmt(e, pos=e.pos)

    def assign_stmt(self, c: list[Any]) -> A.Assign:
        target, op, value = c
        return A.Assign(target, str(op), value, pos=target.pos)

    def discard_stmt(self, c: list[Any]) -> A.ExprStmt:
        name, _eq, value = c
        if name != "_":
            raise _Fail(f"cannot assign to '{name}': only to a $variable, a @map, or '_' to discard a value",
                        name.line, name.column, len(name))
        return A.ExprStmt(value, pos=_tpos(name))

    def jump_stmt(self, c: list[Any]) -> A.Stmt:
        tok = c[0]
        if tok.type == "RETURN":        # 'return 1': the program's value (a test probe's verdict, 0.25)
            return A.Return(c[1] if len(c) > 1 else None, pos=_tpos(tok))
        cls = {"BREAK": A.Break, "CONTINUE": A.Continue}[tok.type]
        return cls(pos=_tpos(tok))

    def if_stmt(self, c: list[Any]) -> A.If:
        kw, cond, then = c[:3]
        else_: list[A.Stmt] | None = None
        if len(c) > 3 and c[3] is not None:
            other = c[3]
            else_ = [other] if isinstance(other, A.If) else other.body
        return A.If(cond, then.body, else_, pos=_tpos(kw))

    def while_stmt(self, c: list[Any]) -> A.While:
        kw, cond, body = c
        return A.While(cond, body.body, pos=_tpos(kw))

    def unroll_stmt(self, c: list[Any]) -> A.Unroll:
        kw, count, body = c
        return A.Unroll(count, body.body, pos=_tpos(kw))

    def let_stmt(self, c: list[Any]) -> A.Let:
        kw, var = c[0], c[1]
        type_: A.TypeName | None = None
        value: A.Expr | None = None
        rest = c[2:]
        if rest and isinstance(rest[0], A.TypeName):
            type_, rest = rest[0], rest[1:]
        if rest and rest[0] is None:    # lark's placeholder for the type not written
            rest = rest[1:]
        if len(rest) >= 2:
            value = rest[1]
        return A.Let(var, type_, value, pos=_tpos(kw))

    def typeof(self, c: list[Any]) -> A.TypeName:
        kw, rest = c[0], c[2:]
        if getattr(rest[0], "type", None) == "STRUCT":      # typeof(struct x *): the type itself
            return A.TypeName(f"{rest[0]} {rest[1]}", len(rest) - 2, pos=_tpos(kw))
        if getattr(rest[0], "type", None) == "IDENT":       # typeof(size_t *)
            return A.TypeName(str(rest[0]), len(rest) - 1, pos=_tpos(kw))
        return A.TypeName("typeof", 0, rest[0], pos=_tpos(kw))

    def typeof_cast(self, c: list[Any]) -> A.Cast:
        lpar, tn, expr = c
        return A.Cast(tn, expr, pos=_tpos(lpar))

    def let_type(self, c: list[Any]) -> A.TypeName:
        first = c[0]
        if isinstance(first, A.TypeName):      # typeof(x)
            return first
        if first.type == "STRUCT":
            return A.TypeName(f"{first} {c[1]}", len(c) - 2, pos=_tpos(first))
        if len(c) == 2 and c[1].type == "INT":     # string[N]: a string of N bytes
            return A.TypeName(f"{first}[{_int(str(c[1]), c[1].line, c[1].column)}]", 0, pos=_tpos(first))
        return A.TypeName(str(first), len(c) - 1, pos=_tpos(first))

    def for_stmt(self, c: list[Any]) -> A.Stmt:
        kw, body = c[0], c[-1]
        decl, what = [x for x in c[1:-1] if isinstance(x, (A.Node, tuple))]
        if isinstance(what, tuple):
            return A.ForRange(decl, what[0], what[1], body.body, pos=_tpos(kw))
        return A.ForMap(decl, what, body.body, pos=_tpos(kw))

    def for_range(self, c: list[Any]) -> tuple[A.Expr, A.Expr]:
        return c[0], c[1]

    def block_stmt(self, c: list[Any]) -> A.Block:
        return c[0]

    # expressions

    def ternary(self, c: list[Any]) -> A.Ternary:
        cond, then, else_ = c
        return A.Ternary(cond, then, else_, pos=cond.pos)

    def elvis(self, c: list[Any]) -> A.Ternary:
        """bpftrace 0.26's ``a ?: b``: ``a`` when it is true, else ``b`` (``a ? a : b``, as bpftrace's
        parser builds it: the same node as condition and value)."""
        cond, else_ = c
        return A.Ternary(cond, cond, else_, pos=cond.pos)

    def binary(self, c: list[Any]) -> A.Binary:
        left, op, right = c
        return A.Binary(str(op), left, right, pos=left.pos)

    def unary(self, c: list[Any]) -> A.Unary:
        op, operand = c
        return A.Unary(str(op), operand, pos=_tpos(op))

    def cast(self, c: list[Any]) -> A.Cast:
        tok, expr = c
        inner = str(tok)[1:-1]
        depth = inner.count("*")
        name = " ".join(inner.replace("*", " ").split())
        if "[" in name:     # (uint8[8]): an int array, written without spaces
            name = "".join(name.split())
        return A.Cast(A.TypeName(name, depth, pos=_tpos(tok)), expr, pos=_tpos(tok))

    def pre_incdec(self, c: list[Any]) -> A.IncDec:
        op, target = c
        return A.IncDec(target, str(op), True, pos=_tpos(op))

    def post_incdec(self, c: list[Any]) -> A.IncDec:
        target, op = c
        return A.IncDec(target, str(op), False, pos=target.pos)

    def field(self, c: list[Any]) -> A.Field:
        expr, op, name = c
        if name.type == "INT" and not name.isdigit():
            raise _Fail(f"invalid tuple index '{name}'", name.line, name.column, len(name))
        return A.Field(expr, str(name), op.type == "ARROW", pos=expr.pos)

    def index(self, c: list[Any]) -> A.Index:
        expr, index = c
        return A.Index(expr, index, pos=expr.pos)

    def int_lit(self, c: list[Any]) -> A.Int:
        tok = c[0]
        m = _DURATION_RE.fullmatch(tok)
        if m is not None:    # bpftrace 0.24's 100ms: nanoseconds
            value = int(m.group(1).replace("_", "")) * DURATIONS[m.group(2)]
            if value > _U64:
                raise _Fail(f"duration '{tok}' does not fit in 64 bits of nanoseconds", tok.line, tok.column, len(tok))
            return A.Int(value, pos=_tpos(tok))
        return A.Int(_int(str(tok), tok.line, tok.column), pos=_tpos(tok))

    def str_lit(self, c: list[Any]) -> A.Str:
        tok = c[0]
        return A.Str(_string(tok), pos=_tpos(tok))

    def ident(self, c: list[Any]) -> A.Expr:
        tok = c[0]
        if tok in ("true", "false"):    # bpftrace 0.23's booleans
            return A.Bool(1 if tok == "true" else 0, pos=_tpos(tok))
        if tok in _KEYWORDS:
            raise _Fail(f"unexpected keyword '{tok}' — expected an expression", tok.line, tok.column, len(tok))
        return A.Builtin(str(tok), pos=_tpos(tok))

    def positional(self, c: list[Any]) -> A.Positional:
        tok = c[0]
        if tok == "$#":
            return A.Positional(0, pos=_tpos(tok))
        index = int(tok[1:])
        if index == 0:
            raise _Fail("there is no $0: positional parameters start at $1 ($# is their count)", tok.line,
                        tok.column, len(tok))
        return A.Positional(index, pos=_tpos(tok))

    def call(self, c: list[Any]) -> A.Call:
        name, _lpar, args = c
        if name in _KEYWORDS:
            raise _Fail(f"unexpected keyword '{name}' — expected an expression", name.line, name.column,
                        len(name))
        args = tuple(args or ())
        if name in ("delete", "has_key") and len(args) == 2 and isinstance(args[0], A.MapRef) \
                and not args[0].keys:
            # bpftrace 0.22's delete(@m, key) and has_key(@m, key): the element @m[key] (a tuple of a
            # multi-key map's keys, as written, is its keys), so both read as delete(@m[key]) does
            key = args[1]
            keys = key.elems if _plain_tuple(key) else (key,)
            args = (A.MapRef(args[0].name, tuple(keys), pos=args[0].pos),)
        if name == "find" and len(args) == 3 and isinstance(args[0], A.MapRef) and not args[0].keys:
            # bpftrace 0.25's find(@m, key, $v): the element, as has_key's, and the variable it sets
            keys = args[1].elems if _plain_tuple(args[1]) else (args[1],)
            args = (A.MapRef(args[0].name, tuple(keys), pos=args[0].pos), args[2])
        return A.Call(str(name), args, pos=_tpos(name))

    def paren(self, c: list[Any]) -> A.Expr:
        return c[1]

    def tuple(self, c: list[Any]) -> A.Tuple:
        return A.Tuple(tuple(c[1:]), pos=_tpos(c[0]))

    def field_init(self, c: list[Any]) -> tuple[Any, A.Expr]:
        return c[0], c[2]

    def record(self, c: list[Any]) -> A.Tuple:
        inits = [x for x in c[1:] if isinstance(x, tuple)]
        names: list[str] = []
        for tok, _ in inits:
            if str(tok) in names:
                raise _Fail(f"the record names field {str(tok)!r} twice", tok.line, tok.column, len(tok))
            names.append(str(tok))
        return A.Tuple(tuple(v for _, v in inits), tuple(names), pos=_tpos(c[0]))

    def comptime(self, c: list[Any]) -> A.Call:
        """``comptime x``: a call the checker folds (``comptime(x)`` parses the same)."""
        return A.Call("comptime", (c[1],), pos=_tpos(c[0]))

    def block_expr(self, c: list[Any]) -> A.BlockExpr:
        _SEEN.block_exprs = True
        return A.BlockExpr(c[1], pos=_tpos(c[0]))

    def var(self, c: list[Any]) -> A.Var:
        tok = c[0]
        return A.Var(str(tok)[1:], pos=_tpos(tok))

    def map(self, c: list[Any]) -> A.MapRef:
        tok = c[0]
        keys = c[1] if len(c) > 1 and c[1] is not None else ()
        if len(keys) == 1 and _plain_tuple(keys[0]):   # @m[(a, b)] is @m[a, b] (bpftrace 0.23.2)
            keys = keys[0].elems
        return A.MapRef(str(tok)[1:], tuple(keys), pos=_tpos(tok))

    def exprs(self, c: list[Any]) -> tuple[A.Expr, ...]:
        return tuple(c)

    def call_args(self, c: list[Any]) -> tuple[Any, ...]:
        return tuple(c)

    def type_arg(self, c: list[Any]) -> A.TypeName:
        kw, name = c[0], c[1]
        return A.TypeName(f"{kw} {name}", len(c) - 2, pos=_tpos(kw))
