"""bpftrace 0.24's block expressions (``$a = { let $b = 1; $b }``) and 0.25's discard (``_ = e``).

bpftrace 0.23.2 has neither, so the expected outputs are upstream's own: its tests/runtime/basic cases
(EXPECT lines) and docs/language.md's "Block Expressions". Where the program can also be written
without them, bpftrace 0.23.2 runs that spelling and pycore's must print the same. pycore's expander
(pycore/lang/expand.py) turns each block into statements before the one that holds it; where the
value is needed only sometimes (after ``&&``/``||``, in a branch of ``?:``) or again and again (a
loop's condition), the statements run exactly then, which the counters below show.
"""

from __future__ import annotations

import pytest

from pycore.lang import ast as A
from pycore.lang.expand import expand
from pycore.lang.parser import parse
from tests.test_trace_macros import lines, run, trace
from tests.test_trace_values import same_as_023

# upstream's tests/runtime/basic (PROG, EXPECT), with an exit() so the run ends. "print block
# expression with print" expects `false` from 0.26, whose comparisons are bool; 0.23.2 prints a
# comparison as 0 or 1 (`print(1 > 2)` prints 0 there), and so does pycore.
RUNTIME = [
    ("begin { let $a = { let $b = 1; $b }; print($a); exit(); }", ["1"]),
    ('begin { print({ $x = 1; print ("bob"); $x > 1 }); exit(); }', ["bob", "0"]),
    ('begin { if ({ let $a = true; $a }) { print ("bob"); } exit(); }', ["bob"]),
    ("begin { $x = { $y = { $z = 10; $z + 5 }; $y * 2 }; print($x); exit(); }", ["30"]),
    ("begin { _ = { print(1); 1 }; exit(); }", ["1"]),
]


@pytest.mark.parametrize("script,expected", RUNTIME)
def test_upstream_runtime_cases(script: str, expected: list[str]) -> None:
    assert lines(script) == expected


def test_docs_example_and_scope() -> None:
    """docs/language.md's example; the block's own `let $b` is not the caller's $b, which keeps its value."""
    assert lines("begin { let $a = {\n  let $b = 1;\n  $b\n};\nprint($a); exit(); }") == ["1"]
    assert lines("begin { $b = 5; $a = { let $c = 2; $c * 10 }; $d = { $b = 6; let $e = $b + 1; $e }; "
                 "print(($a, $b, $d)); exit(); }") == ["(20, 6, 7)"]


def test_a_blocks_variable_is_not_seen_after_it() -> None:
    p = trace("begin { $a = { let $b = 1; $b }; print($b); exit(); }", "--dry-run")
    assert p.returncode != 0 and "$b" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_statements_run_only_when_the_value_is_needed() -> None:
    """`&&`, `||`, `?:` and `?:`'s short form evaluate a block only when its value is needed: the
    counters say how often each block ran."""
    out = lines("begin { "
                "$a = 1 && { @and_1++; 2 }; $b = 0 && { @and_0++; 2 }; "
                "$c = 0 || { @or_0++; 0 }; $d = 1 || { @or_1++; 0 }; "
                "$e = 1 ? { @then++; 10 } : { @else++; 20 }; "
                "$f = 0 ?: { @elvis++; 7 }; $g = 3 ?: { @not_run++; 8 }; "
                "print(($a, $b, $c, $d, $e, $f, $g)); exit(); }")
    assert out == ["(1, 0, 0, 1, 10, 7, 3)", "@and_1: 1", "@elvis: 1", "@or_0: 1", "@then: 1"]


def test_a_loop_condition_runs_its_statements_before_each_test() -> None:
    """while ({ $i++; $i < 5 }): the increment runs before every test, `continue` included."""
    out = lines("begin { $i = 0; while ({ $i++; @tests++; $i < 5 }) { if ($i == 2) { continue; } "
                'printf("i=%d\\n", $i); } print($i); exit(); }')
    assert out == ["i=1", "i=3", "i=4", "5", "@tests: 5"]


def test_in_a_predicate_a_map_key_and_a_call() -> None:
    out = lines('begin /{ @p++; @p == 1 }/ { @k[{ let $x = 3; $x * 2 }] = strlen({ "abc" }); '
                'printf("%s\\n", { $s = "s"; $s }); exit(); }')
    assert out == ["s", "@k[6]: 3", "@p: 1"]


def test_in_a_macro() -> None:
    """A macro whose value is a block expression, called where its statements run only sometimes."""
    out = lines("macro twice(x) { { let $t = x; $t * 2 } } "
                "begin { $a = 0 || twice({ @calls++; 4 }); print($a); exit(); }")
    assert out == ["1", "@calls: 1"]


def test_same_as_023_written_out() -> None:
    """The same program as bpftrace 0.23.2 runs it with the blocks written out by hand."""
    blocks = ('begin { $n = 3; $v = { let $sq = $n * $n; $sq + 1 }; @m[{ $k = $v % 4; $k }] = $v; '
              '$w = $v > 5 && { @seen = 1; $v < 20 }; printf("%d %d\\n", $v, $w); exit(); }')
    by_hand = ('BEGIN { $n = 3; $sq = $n * $n; $v = $sq + 1; $k = $v % 4; @m[$k] = $v; '
               '$w = 0; if ($v > 5) { @seen = 1; $w = $v < 20; } printf("%d %d\\n", $v, $w); exit(); }')
    assert run(blocks) == same_as_023(by_hand) == "10 1\n\n\n@m[2]: 10\n@seen: 1\n"


def test_the_tree_after_expansion_holds_no_block() -> None:
    """The expander leaves statements and variables only: the checker never meets a BlockExpr."""
    text = "begin { $a = { let $b = 1; $b } + { 2 }; $c = $a || { $a = 1; 0 }; }"
    program = parse(text)
    assert program.block_exprs
    expanded = expand(program, text=text)
    assert not any(isinstance(n, A.BlockExpr) for n in A.walk(expanded))
    # `{ 2 }` is its value; the first block's value reads its own $b, so it is given $$block1
    body = expanded.probes[0].body
    assert isinstance(body[0], A.Let) and body[0].var.name == "$block1"
    assert isinstance(body[1], A.Block) and isinstance(body[2], A.Assign)
    assert not parse("begin { $a = (1, 2); { 1 } }").block_exprs     # a block statement is no block expression


ERRORS = [
    ("begin { $a = { }; }", "a block used as a value ends in an expression"),
    ("begin { $a = { print(1); }; }", "print() gives no value"),
    ("begin { pid = 1; }", "cannot assign to 'pid': only to a $variable, a @map, or '_' to discard a value"),
]


@pytest.mark.parametrize("script,message", ERRORS)
def test_errors(script: str, message: str) -> None:
    p = trace(script, "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith("stdin:1:") and message in first, p.stderr
