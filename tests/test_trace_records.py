"""bpftrace 0.25's records, ``(name=value, ...)``, and tuples that a later assignment widens.

Records: bpftrace 0.23.2 has none, so the expected outputs are upstream's, its tests/runtime/record
(EXPECT lines, the cases that run without its test programs) and docs/language.md's "Records".
Widening: bpftrace 0.23.2 lets a variable or a map that held ``(1, "ab")`` take ``(2, "abcd")``,
and pycore must print what it prints (side by side).
"""

from __future__ import annotations

import pytest

from tests.test_trace_macros import lines, trace
from tests.test_trace_values import same_as_023

RUNTIME = [
    ('begin { $v = 99; $t = (a=0, b=1, c="str", d=(5, 6), e=$v); printf("%d %d %s %d %d %d\\n", $t.a, $t.b, '
     '$t.c, $t.d.0, $t.d.1, $t.e); exit(); }', ["0 1 str 5 6 99"]),
    ('begin { $v = (x=1, y=2); $t = (a=0, b=1, c="str", d=(5, 6), e=$v); print($t); exit(); }',
     ["{ .a = 0, .b = 1, .c = str, .d = (5, 6), .e = { .x = 1, .y = 2 } }"]),
    # evaluated in the order written, laid out in the order the variable first had
    ('begin { $a = (foo={ printf("hello"); 1 }, bar={ printf("world"); 2 }); '
     '$a = (bar={ printf("hello"); 1 }, foo={ printf("world\\n"); 2 }); print($a); exit(); }',
     ["helloworldhelloworld", "{ .foo = 2, .bar = 1 }"]),
]


@pytest.mark.parametrize("script,expected", RUNTIME)
def test_upstream_runtime_cases(script: str, expected: list[str]) -> None:
    assert lines(script) == expected


def test_docs_example() -> None:
    """docs/language.md's example, in an interval probe as written there."""
    out = lines('interval:ms:1 { $a = (color="green", size=2); print($a); print($a.size); '
                '$a = (size=10, color="blue"); print($a.color); exit(); }')
    assert out == ["{ .color = green, .size = 2 }", "2", "blue"]


def test_records_in_maps_and_json() -> None:
    """A map's record value, reordered by a later assignment; upstream's json-output record shape."""
    out = lines('BEGIN { @r = (a=1, b="x"); @r = (b="yy", a=2); $v = @r; print($v.b); exit(); }')
    assert out == ["yy", "@r: { .a = 2, .b = yy }"]
    p = trace('BEGIN { @a = (a=0, b=1, c="str", d=(5, 6), e=(x=1, y=2)); exit(); }', "-q", "-f", "json")
    assert p.returncode == 0, p.stderr
    assert '{"type": "map", "data": {"@a": {"a": 0, "b": 1, "c": "str", "d": [5,6], "e": {"x": 1, "y": 2}}}}' \
        in p.stdout.splitlines(), p.stdout


def test_tuples_widened_as_023() -> None:
    """A variable and a map that held (1, "abcd") take (2, "ab") and (3, "abcdef"); a string first in
    the tuple widened past its word moves the integer after it (the earlier print() reads the final
    layout: the block is checked again)."""
    same_as_023('BEGIN { $t = (1, "abcd"); $t = (2, "ab"); print($t); $t = (3, "abcdef"); print($t); '
                '@m = (1, "ab"); @m = (2, "abcd"); exit(); }')
    same_as_023('BEGIN { $t = ("ab", 1); print($t); $t = ("abcdefghijklmnopq", 2); print(($t, $t.1)); exit(); }')



def test_tuple_keys_of_several_string_lengths_as_023() -> None:
    """Map keys that are tuples of strings of several lengths (literals of 2 to 17 bytes, a variable widened by a
    later assignment), in one map, and a tuple of a narrower integer: one key type, as 0.23.2's."""
    same_as_023('BEGIN { @m[(1, "a")] = 1; @m[(2, "abcd")] = 2; $t = (3, "xy"); @m[$t] = 3; @c[(1, "a")] = 1; '
                '@c[(2, "sixteen chars..")] = 2; $x = (int8)3; @w[($x, "q")] = 1; @w[(300, "qq")] = 2; exit(); }')
    same_as_023('BEGIN { $t = (1, "a"); $t = (2, "abcd"); @m[$t] = 1; @n[(1, "a")] = 1; @n[$t] = 2; '
                '@k["a longer one", 1] = 1; @k["x", 2] = 2; exit(); }')

    # a nested tuple key whose integer is narrower in one key than in another: widened, sign kept
    same_as_023('BEGIN { @c[1, ("hello", (int8)-5)] = (1, "bye"); @c[2, ("hello", 300)] = (2, "x"); '
                '$t = (3, ("hi", (int8)-1)); @c[$t] = (3, "y"); exit(); }')


def test_record_keys() -> None:
    """A record is one key, with its names (upstream's tests/self/record.bt): a for loop reads its
    fields; the same record with its fields in another order is the same key."""
    out = lines('BEGIN { @m[(a=1, b="hello")] = 1; for ($kv : @m) { printf("%d %s %d\\n", $kv.0.a, $kv.0.b, '
                '$kv.1); } @m[(b="hello", a=1)] = 2; $n = 0; for ($kv : @m) { $n += 1; } printf("%d\\n", $n); '
                'exit(); }')
    assert out == ["1 hello 1", "1", "@m[{ .a = 1, .b = hello }]: 2"]


ERRORS = [
    ("BEGIN { $r = (a=1, a=2); }", "stdin:1:20:", "the record names field 'a' twice"),
    ("BEGIN { $r = (a=1, b=2); print($r.c); }", "stdin:1:32:", "the record has no field 'c' (its fields: a, b)"),
    ("BEGIN { $r = (a=1, b=2); $r = (a=1, c=2); }", "stdin:1:26:", "cannot assign (a=int64, c=int64)"),
    ("BEGIN { $r = (a=1, b=2); $r = (1, 2); }", "stdin:1:26:", "cannot assign (int64, int64)"),
]


@pytest.mark.parametrize("script,where,message", ERRORS)
def test_errors(script: str, where: str, message: str) -> None:
    p = trace(script, "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith(where) and message in first, p.stderr
