"""pycore trace's parser under random input: a Program or a ScriptError, nothing else, and quickly.

Random text, random edits of real scripts (characters and whole tokens
deleted, inserted, swapped, duplicated), and deeply nested expressions and
statements. Each example has a deadline, so a hang or a regex gone
quadratic fails the test rather than the machine.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.lang import ast as A
from pycore.lang.errors import ScriptError
from pycore.lang.expand import expand
from pycore.lang.parser import parse
from tests.test_trace_parser import ALL_SCRIPTS

FUZZ = settings(max_examples=800, deadline=timedelta(seconds=2), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# bpftrace 0.24's macros (pycore/lang/expand.py runs after the parser in check())
MACRO_SCRIPTS = [
    "macro one() { 1 } macro add($x, @m, y) { $x += y; @m[$x] = one; $x } "
    "BEGIN { $a = 1; $b = add($a, @h, 2 * one()); if ($b > 2) { print(add($a, @h, $b)); } }",
    'macro show(d, @m) { printf(d); print(@m, 10); clear(@m); } '
    'BEGIN { @s[1] = count(); } macro name() { getopt("name", 0, "x") } END { if (name) { show("a", @s); } }',
]
SCRIPTS = [ALL_SCRIPTS[k] for k in sorted(ALL_SCRIPTS)] + MACRO_SCRIPTS

# Pieces of the language, so random text reaches past the first token now and then.
TOKENS = ["BEGIN", "END", "kprobe:vfs_read", "uprobe:/bin/bash:readline", "tracepoint:a:b", "k:f+0x10",
          "usdt:/p:q:r", "self:signal:SIGUSR1", "iter:task_vma", '"quoted"', "{", "}", "(", ")", "[", "]", "/", "//", "/*", "*/", ";", ",", ":", "?",
          "=", "==", "+=", "<<=", "++", "--", "->", ".", "!", "~", "-", "*", "&", "&&", "||", "<", ">>", "%",
          "$x", "$1", "$#", "$0", "@", "@m", "@m[", "pid", "args", "comm", "if", "else", "while", "unroll",
          "return", "break", "struct", "(struct path *)", "(uint32)", "0x", "0x1f", "08", "1e6", "1_000",
          "18446744073709551616", '"\\q"', '"\\x41"', '"\\400"', "'", '"', "#include <x.h>", "#define X",
          "struct s { int a; };", "\n", " ", "\t", "printf(", "count()", "sizeof(", "str(", "kstack(perf, 3)",
          # bpftrace 0.22-0.26's syntax
          "let", "let $x", "let $x;", "let $y = 1;", "let $s: string[8]", ": uint8", ": struct task_struct *",
          "let @m = lruhash(5);", "let @p = percpuhash(", "hash(0)", "?:", "? :", "true", "false", "100ms", "1s",
          "5us", "2h", "1_000ns", "99x", "begin", "end", "BeGiN", "interval:1s", "i:100ms", "profile:10ms",
          "if $x", "if !$x {", "while $i", "unroll 3 {", "$t.pid", "curtask.pid",
          # bpftrace 0.20's config block, 0.23's tuple keys, exit(code), delete() values, raw stacks
          "config", "config = {", "config = { max_map_keys = 2 }", "max_strlen = 16;", "missing_probes = ignore",
          'stack_mode = "raw"', "@m[(1, 2)]", "@m[($a, $b), 1]", "exit(3)", "$x = delete(@m, 1)", "kstack(raw)",
          # bpftrace 0.24's macros and getopt()
          "macro", "macro f(", "macro g($a, @b, c)", "f()", "f", "g($x, @m, 1)", "getopt(\"d\", 3)", "is_err(",
          # bpftrace 0.18-0.26's builtins, casts and functions
          "(uint8[8])", "(int16 [4])", "(uint8[])", "(enum e)", "offsetof(", "hist(", "nsecs(boot)", "comm()",
          "ppid", "pid(init)",
          # for loops (bpftrace 0.21, 0.24): the keyword, the range's '..', whole heads
          "for", "..", "0..5", "$kv.0", "$kv.1.0", "for ($kv : @m) {", "for $i : 0..3 {", "for ($i : (-3)..$x) {",
          "continue",
          # block expressions (0.24) and the discard (0.25)
          "= {", "({", "{ 1 }", "{ $b = 1; $b }", "{ let $b = 1; $b }", "} + 1", "&& {", "? { 1 } :", "_ =", "_",
          # comptime, fail and static_assert (0.25)
          "comptime", "if comptime (", "comptime (1)", 'fail("x %d", 1)', 'static_assert(1, "m")',
          "typeof(", "typeof($x)", "(typeof($x))", "typeof(size_t *)", ": typeof(struct task_struct *)",
          # records (0.25)
          "(a=1, b=2)", "(a=", "$r.a", "(x=1,)", ", b="]

# Scripts in the newer syntax (valid: each parses), for the mutation test and as a check of their own.
NEW_SCRIPTS = [
    "let @a = lruhash(100);\nlet @b = percpuhash(2);\nbegin { let $x; let $y = 1; let $z: uint8 = 3; "
    "if $y { $x = $y ?: 5; } @a[$x] = true; @b = count(); }\nend { clear(@a); }",
    "interval:1s { let $p: struct task_struct * = curtask; if ($p.pid > 0) { @n = 100ms + 1s; } "
    "while !@done { @done = 1; } unroll 2 { @u++; } }",
    "BEGIN { $x = false ?: 2; let $s: string[16] = \"s\"; { let $inner = 1; } "
    "if (1) { $a = 1; } else { $a = \"x\"; } }",
    "begin { let $a = { let $b = 1; $b }; $c = $a && { @n++; @n > 1 }; while ({ $a++; $a < 3 }) { } "
    "_ = { print(1); 1 }; @m[{ 2 }] = $a ? { let $q = 1; $q } : 0; { 5 } }",
]


def check(text: str) -> None:
    try:
        program = expand(parse(text), text=text)
    except ScriptError as e:
        assert e.line >= 1 and e.col >= 1 and e.width >= 1
        assert e.format().startswith(f"<stdin>:{e.line}:{e.col}: error: ")
        assert "Traceback" not in e.message and "lark" not in e.message.lower()
    else:
        assert isinstance(program, A.Program) and not program.macros and not program.block_exprs
        for node in A.walk(program):
            assert node.pos.line >= 1 and node.pos.col >= 1
            assert not isinstance(node, A.BlockExpr)      # the expander leaves none for the checker


@FUZZ
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    check(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.randoms(use_true_random=False))
def test_random_tokens(tokens: list[str], rnd) -> None:  # noqa: ANN001 - hypothesis' Random
    check(" ".join(tokens))
    check("".join(tokens))
    check("BEGIN { " + "".join(tokens) + " }")
    check("kprobe:f /" + " ".join(rnd.sample(tokens, len(tokens))) + "/ { }")


edit = st.tuples(st.sampled_from(["delete", "insert", "swap", "dup", "token", "drop_token"]),
                 st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 12), st.sampled_from(TOKENS))


def mutate(text: str, edits: list[tuple[str, int, int, int, str]]) -> str:
    for kind, a, b, n, token in edits:
        if not text:
            text = token
            continue
        i, j = a % len(text), b % len(text)
        if kind == "delete":
            text = text[:i] + text[i + n:]
        elif kind == "insert":
            text = text[:i] + text[j:j + n] + text[i:]
        elif kind == "swap":
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
        elif kind == "dup":
            text = text[:i] + text[i:i + n] * 2 + text[i + n:]
        elif kind == "token":
            text = text[:i] + token + text[i:]
        else:  # drop the word at i
            words = text.split(" ")
            del words[a % len(words)]
            text = " ".join(words)
    return text


@FUZZ
@given(st.sampled_from(SCRIPTS + NEW_SCRIPTS), st.lists(edit, min_size=1, max_size=6))
def test_mutated_real_scripts(script: str, edits: list[tuple[str, int, int, int, str]]) -> None:
    check(mutate(script, edits))


@settings(max_examples=60, deadline=timedelta(seconds=3), database=None)
@given(st.lists(st.sampled_from(["(", "-", "!", "~", "*", "$a[", "@m[", "f(", "1 ? ", "(uint8)", "1 + ", "1 *",
                                 "(uint32[2])", "{ ", "{ $v = 1; ", "1 && { "]),
                min_size=1, max_size=3000),
       st.booleans())
def test_deep_expressions(openers: list[str], close: bool) -> None:
    closers = {"(": ")", "$a[": "]", "@m[": "]", "f(": ")", "1 ? ": " : 2", "{ ": " }", "{ $v = 1; ": " }",
               "1 && { ": " }"}
    text = " ".join(openers) + " 1"
    if close:
        text += "".join(closers.get(o, "") for o in reversed(openers))
    check(f"BEGIN {{ $x = {text}; }}")
    check(f"BEGIN /{text}/ {{ }}")


@settings(max_examples=30, deadline=timedelta(seconds=3), database=None)
@given(st.integers(1, 2000), st.sampled_from(["if (1) { ", "while (1) { ", "unroll (2) { ", "{ ", "if $x { ",
                                              "while !$x { ", "unroll 2 { ", "if (1) { let $v = 1; ",
                                              "for ($i : 0..1) { ", "for $kv : @m { "]))
def test_deep_statements(n: int, opener: str) -> None:
    check("BEGIN { " + opener * n + "}" * n + " }")
    check("BEGIN { " + opener * n + " }")


# -- the newer syntax, generated valid: every program parses, into the tree the generator meant -------

_EXPRS = st.recursive(
    st.sampled_from(["1", "$x", "@m", "pid", "true", "false", "100ms", "1s", "0x10", "$t.pid", "@m[1]"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "&&", "||", "==", "<"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} ?: {t[1]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        inner.map(lambda e: f"!{e}"),
        st.tuples(inner, inner).map(lambda t: f"{{ $q = {t[0]}; {t[1]} }}"),     # block expressions (0.24)
    ),
    max_leaves=8,
)
_TYPES = st.sampled_from(["", ": uint8", ": int64", ": string", ": string[4]", ": struct task_struct *", ": bool"])
_CONDS = st.one_of(_EXPRS.map(lambda e: f"({e})"), st.sampled_from(["$x", "!$x", "@m", "true", "-1", "*$p", "$t.pid"]))
_STMTS = st.recursive(
    st.one_of(
        st.tuples(st.sampled_from(["$x", "$y", "$z"]), _TYPES, st.one_of(st.just(""), _EXPRS)).map(
            lambda t: f"let {t[0]}{t[1]}{' = ' + t[2] if t[2] else ''};"),
        _EXPRS.map(lambda e: f"$x = {e};"),
        _EXPRS.map(lambda e: f"@m[{e}] = {e};"),
    ),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["if", "while", "unroll"]), _CONDS, st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]} {t[1]} {{ {' '.join(t[2])} }}"),
        st.tuples(_CONDS, st.lists(inner, max_size=2), st.lists(inner, max_size=2)).map(
            lambda t: f"if {t[0]} {{ {' '.join(t[1])} }} else {{ {' '.join(t[2])} }}"),
    ),
    max_leaves=6,
)
_DECLS = st.lists(st.tuples(st.sampled_from(["hash", "lruhash", "percpuhash", "percpulruhash"]),
                            st.integers(1, 10**6)), max_size=3, unique_by=lambda t: t[0])
_PROBES = st.sampled_from(["BEGIN", "begin", "end", "END", "interval:1s", "i:100ms", "profile:99hz", "kprobe:f"])


@FUZZ
@given(_DECLS, _PROBES, st.lists(_STMTS, max_size=5))
def test_generated_new_syntax_parses(decls: list[tuple[str, int]], probe: str, stmts: list[str]) -> None:
    head = "".join(f"let @d{i} = {kind}({n});\n" for i, (kind, n) in enumerate(decls))
    program = parse(f"{head}{probe} {{ {' '.join(stmts)} }}")
    assert [(d.kind, d.max_entries) for d in program.map_decls] == decls
    assert program.probes[0].probes[0].kind in ("BEGIN", "END", "interval", "profile", "kprobe")
    assert len(program.probes[0].body) == len(stmts)


def test_new_scripts_parse() -> None:
    for text in NEW_SCRIPTS:
        assert isinstance(parse(text), A.Program)


CONFIG_VALUES = ["1", "0", "4096", '"ignore"', "ignore", "warn", "perf", "raw", '"x"', "1 + 1", "$1", "-1", "@m", ""]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["max_map_keys", "missing_probes", "stack_mode", "print_maps_on_exit",
                                           "BPFTRACE_MAX_STRLEN", "foo", "config", "if", ""]),
                          st.sampled_from(CONFIG_VALUES), st.sampled_from([";", "", ";;", ","])), max_size=5),
       st.sampled_from(["", "#include <linux/sched.h>\n", "struct s { int a; };\n", "let @m = lruhash(5);\n"]),
       st.booleans())
def test_config_blocks(assigns: list[tuple[str, str, str]], head: str, last_semi: bool) -> None:
    """The config block (bpftrace 0.20): any run of assignments and separators parses or is one error."""
    body = " ".join(f"{name} = {value}{sep}" for name, value, sep in assigns)
    if not last_semi:
        body = body.rstrip(";")
    check(f"{head}config = {{ {body} }}\nBEGIN {{ exit(); }}")
    check(f"BEGIN {{ exit(); }}\nconfig = {{ {body} }}")


# Random macro programs: definitions whose bodies call each other (and themselves), with random
# parameters and arguments; expansion ends in a tree without macros or in one ScriptError.
_PARAM = st.sampled_from(["$a", "$b", "@m", "@n", "x", "y"])
_ARG = st.sampled_from(["$v", "@k", "1", "pid + 1", "x", "$a", "@m", "f()", "g"])
_BODY = st.sampled_from(["x + 1", "$a += 1; $a", "@m[1] = 2; 3", "$t = y; $t", "print(x);", "{ $z = 1; } $z",
                         "@q = 1;", "1 ? x : y", "$a && x", "{ let $w = x; $w + 1 }", "$a || { $a = 1; x }"])


@st.composite
def macro_program(draw) -> str:  # noqa: ANN001 - hypothesis' draw
    names = ["f", "g", "h"]
    defs = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(names))
        params = draw(st.lists(_PARAM, max_size=3, unique=True))
        calls = draw(st.lists(st.tuples(st.sampled_from(names), st.lists(_ARG, max_size=3)), max_size=2))
        body = "; ".join(f"{n}({', '.join(a)})" for n, a in calls)
        defs.append(f"macro {name}({', '.join(params)}) {{ {body + '; ' if body else ''}{draw(_BODY)} }}")
    uses = draw(st.lists(st.tuples(st.sampled_from(names), st.lists(_ARG, max_size=3)), min_size=1, max_size=3))
    stmts = " ".join(f"$r = {n}({', '.join(a)});" if i % 2 else f"{n}({', '.join(a)});"
                     for i, (n, a) in enumerate(uses))
    return " ".join(defs) + f" BEGIN {{ $v = 1; @k = 1; {stmts} }}"


@FUZZ
@given(macro_program())
def test_random_macro_programs(text: str) -> None:
    check(text)
    try:
        program = expand(parse(text), text=text)
    except ScriptError:
        return
    kinds = {type(n).__name__ for n in A.walk(program)}
    assert "MacroDef" not in kinds
    assert not any(isinstance(n, A.Call) and n.name == "getopt" for n in A.walk(program))


# well-formed for loops, nested and mixed with the statements they may hold: each parses, and into
# the loops it was built from
_HEADS = ["for ($kv : @m) {", "for $kv : @m {", "for ($i : 0..5) {", "for $i : 1..$x {",
          "for ($i : (-3)..(2 * 4)) {", "for ($i : @n[1]..-1) {", "for ($k : @) {"]
_BODIES = ["", "printf(\"%d\\n\", $kv.0);", "$x += 1;", "break;", "continue;", "return;", "if ($i) { break; }",
           "@s[$kv.0] = $kv.1;", "while (1) { break; }", "exit();"]


@settings(max_examples=200, deadline=timedelta(seconds=2), database=None)
@given(st.lists(st.tuples(st.sampled_from(_HEADS), st.sampled_from(_BODIES), st.booleans()), min_size=1, max_size=6))
def test_for_loops(loops: list[tuple[str, str, bool]]) -> None:
    text, closing = "", ""
    for head, body, nest in loops:
        if nest:
            text += f"{head} {body} "
            closing += "}"
        else:
            text += f"{closing}{head} {body} }} "
            closing = ""
    program = parse(f"BEGIN {{ {text}{closing} }}")
    found = [n for n in A.walk(program) if isinstance(n, (A.ForMap, A.ForRange))]
    assert len(found) == len(loops)
    assert [isinstance(n, A.ForRange) for n in found] == [".." in h for h, _, _ in loops]
