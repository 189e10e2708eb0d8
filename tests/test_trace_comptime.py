"""bpftrace 0.25's compile-time parts: ``if comptime (x)``, ``comptime x``, ``fail()`` and
``static_assert()`` (pycore/lang/check/core.py: fold, comptime_value).

bpftrace 0.23.2 has none of them, so the expected behaviour is upstream's: docs/stdlib.md (fail's
example), docs/type_resolution.md (a comptime branch not taken is not type-checked), src/stdlib's
macros (static_assert is `if comptime (!cond) { fail(msg); }`) and tests/runtime/macro.
"""

from __future__ import annotations

import pytest

from tests.test_trace_macros import lines, trace

FAIL_DOC = ('BEGIN { if ($1 < 2) { fail("Expected the first positional param to be greater than 1. Got %d", $1); } '
            'print("ran"); exit(); }')


def test_fail_as_the_docs_show() -> None:
    """stdlib.md's example: with $1 = 5 the branch is never taken and the script runs; with $1 = 1
    the script is refused at its fail(), with the message formatted."""
    assert lines(FAIL_DOC, "5") == ["ran"]
    p = trace(FAIL_DOC, "1")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert p.stderr.splitlines()[0] == ("stdin:1:23: error: Expected the first positional param to be greater "
                                        "than 1. Got 1"), p.stderr


def test_the_branch_not_taken_is_not_checked() -> None:
    """What a comptime branch not taken says is never checked (unknown names there are no error),
    the one taken runs; comptime of sizeof, a kfunc's existence, is_str and string literals."""
    out = lines('BEGIN { if comptime (sizeof(int32) * 2 == 8) { print("eight"); } else { $x = nosuchthing; } '
                'if comptime kfunc_exist("no_such_kfunc") { $y = nosuch.field; } else { print("no kfunc"); } '
                'if comptime (is_str("s") && "a" != "b") { print("str"); } '
                '$z = comptime (sizeof(uint16) + 1); print($z); exit(); }')
    assert out == ["eight", "no kfunc", "str", "3"]


def test_a_macro_chooses_by_type_as_upstream_stdlib() -> None:
    """The stdlib's way: a macro that takes one path for a string and another for an integer, and
    refuses anything else with fail()."""
    macro = ('macro describe(x) { if comptime is_str(x) { printf("string %s\\n", x); } '
             'else if comptime is_integer(x) { printf("int %d\\n", x); } else { fail("describe() of neither"); } } ')
    assert lines(macro + 'BEGIN { describe("a"); describe(5); exit(); }') == ["string a", "int 5"]
    p = trace(macro + "BEGIN { describe(curtask); }", "--dry-run")
    assert p.returncode != 0 and "describe() of neither" in p.stderr.splitlines()[0], p.stderr


def test_static_assert() -> None:
    assert lines('BEGIN { static_assert(sizeof(struct task_struct) > 64, "small"); print("ok"); exit(); }') == ["ok"]
    p = trace('BEGIN { static_assert(sizeof(int8) == 2, "an int8 is one byte"); }', "--dry-run")
    assert p.returncode != 0 and p.stderr.splitlines()[0] == "stdin:1:9: error: an int8 is one byte", p.stderr


def test_upstream_macro_cases() -> None:
    """tests/runtime/macro: a user's macro that would fail is not expanded unless called; a user's
    macro named fail is the user's."""
    assert lines('macro assert_str(exp) { fail("boom") } begin { print(strlen("hi")); exit(); }') == ["2"]
    assert lines("macro fail(x) { x } begin { print(strlen(\"hi\")); print(fail(3)); exit(); }") == ["2", "3"]


ERRORS = [
    ("BEGIN { if comptime (pid > 1) { } }", "stdin:1:22:", "Unable to resolve comptime expression"),
    ('BEGIN { $m = "x"; fail("%s", $m); }', "stdin:1:30:", "fail() arguments need to be literals"),
    ("BEGIN { fail(1); }", "stdin:1:9:", "first argument to fail() must be a string literal"),
    ('BEGIN { static_assert(pid == 1, "x"); }', "stdin:1:23:", "static_assert()'s condition is not known"),
    ('BEGIN { $x = fail("no"); }', "stdin:1:14:", "fail() gives no value"),
]


@pytest.mark.parametrize("script,where,message", ERRORS)
def test_errors(script: str, where: str, message: str) -> None:
    p = trace(script, "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith(where) and message in first, p.stderr
