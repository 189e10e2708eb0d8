"""bpftrace 0.25's test probes, ``test:NAME``, run by ``pycore trace --test``.

bpftrace 0.23.2 has none, so the expected output is upstream's: docs/language.md's "test" section
(the example below), and its src/output/text.cpp's report (``[ RUN      ]``, ``[       OK ]``...,
green and red). A test passes when it returns 0, calls no exit() with a code and reports no error;
a failed test's output is printed, a passing one's is not; BEGIN runs first and END last, nothing is
attached and no map is printed. Without --test the test probes are left out.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import require_root
from tests.test_trace_macros import trace

GREEN, RED, OFF = "\033[32m", "\033[31m", "\033[0m"

DOCS = ('test:okay {\n  print("I\'m okay! This output will be suppressed.");\n}\n\n'
        'test:failure {\n  print("This is a failure! This output will be shown");\n  return 1;\n}\n')


def _times(out: str) -> str:
    """The report with each test's time made ``(T)``: it is measured, and varies."""
    return re.sub(r" \(\d+ (?:s|ms|us|ns)\)$", " (T)", out, flags=re.M)


def test_docs_example_as_upstream_reports_it() -> None:
    require_root()
    p = trace(DOCS, "--test")
    assert p.returncode == 1, p.stderr
    assert _times(p.stdout) == (
        f"{GREEN}[==========]{OFF} Running 2 tests.\n"
        f"{GREEN}[ RUN      ]{OFF} okay\n"
        f"{GREEN}[       OK ]{OFF} okay (T)\n"
        f"{GREEN}[ RUN      ]{OFF} failure\n"
        "This is a failure! This output will be shown\n"
        f"{RED}[  FAILED  ]{OFF} failure (T)\n"
        f"{GREEN}[==========]{OFF} 2 tests ran.\n"
        f"{GREEN}[  PASSED  ]{OFF} 1 test.\n"
        f"{RED}[  FAILED  ]{OFF} 1 test, listed below:\n"
        f"{RED}[  FAILED  ]{OFF} failure\n")


def test_json_report_as_upstream() -> None:
    """-f json: upstream's JsonOutput::test_result, a line a test (its time in ns, whether it passed,
    its output as text), no summary."""
    require_root()
    p = trace(DOCS, "--test", "-f", "json")
    assert p.returncode == 1, p.stderr
    lines = [re.sub(r'"duration": \d+', '"duration": T', line) for line in p.stdout.splitlines()]
    assert lines == [
        '{"type": "test_result", "data": {"okay": {"duration": T, "passed": true, "output": '
        '"I\'m okay! This output will be suppressed.\\n"}}}',
        '{"type": "test_result", "data": {"failure": {"duration": T, "passed": false, "output": '
        '"This is a failure! This output will be shown\\n"}}}'], p.stdout


def test_verdicts_begin_and_end() -> None:
    """exit() with a code fails, exit() alone passes, errorf() fails; BEGIN's map is there for the tests,
    its output first, END's last; a while loop may return; no map printed."""
    require_root()
    p = trace('BEGIN { @a = 5; printf("begin\\n"); } test:reads { if (@a != 5) { return 1; } } '
              'test:code { exit(3); } test:plain_exit { exit(); } test:err { errorf("bad %d", 1); } '
              'test:loop { $i = 0; while ($i < 3) { $i++; if ($i == 2) { return 0; } } return 1; } '
              'test:late { @a = 6; } END { printf("end %d\\n", @a); }', "--test")
    assert p.returncode == 1, p.stderr
    out = re.sub(r"\033\[\d+m", "", _times(p.stdout)).splitlines()
    assert out[0] == "begin" and out[-1] == "end 6", out
    assert [line for line in out if line.startswith("[  FAILED  ]")] == [
        "[  FAILED  ] code (T)", "[  FAILED  ] err (T)", "[  FAILED  ] 2 tests, listed below:",
        "[  FAILED  ] code", "[  FAILED  ] err"]
    assert "stdin:1:" in "\n".join(out) and "ERROR: bad 1" in "\n".join(out)       # the failed test's error
    assert "[  PASSED  ] 4 tests." in out and "@a" not in p.stdout


# Our own self-tests of the language (as upstream's tests/self do for its standard library): each
# returns 1 where pycore's answer differs from bpftrace 0.23.2's
SELF = r"""
test:increments { $x = 10; if ($x++ != 10 || ++$x != 12 || $x-- != 12 || --$x != 10) { return 1; }
                  @x = 10; if (@x++ != 10 || ++@x != 12) { return 1; } _ = delete(@x); }
test:integers { $a = 7; if ((int8)300 != 44 || (uint8)-1 != 255 || $a / 2 != 3 || $a % 2 != 1 || 1 << 3 != 8 ||
                 (int16)-1 != -1) { return 1; } }
test:strings { $s = "hello"; if (strlen($s) != 5 || !strcontains($s, "ell") || $s != "hello" || $s == "hell") { return 1; } }
test:maps { @m[1] = 2; if (!has_key(@m, 1) || len(@m) != 1) { return 1; } delete(@m, 1);
            if (has_key(@m, 1) || len(@m) != 0) { return 1; } }
test:tuples { $t = (1, "ab", (2, 3)); if ($t.0 != 1 || $t.1 != "ab" || $t.2.1 != 3) { return 1; } }
test:records { $r = (a=1, b="x"); if ($r.a != 1 || $r.b != "x") { return 1; } }
test:find { @f[7] = 70; let $v; if (!find(@f, 7, $v) || $v != 70 || find(@f, 8, $v)) { return 1; } clear(@f); }
test:loops { @l[1] = 10; @l[2] = 20; $sum = 0; for ($kv : @l) { $sum += $kv.1; } $n = 0;
             for ($i : 0..5) { $n += $i; } if ($sum != 30 || $n != 10) { return 1; } clear(@l); }
test:ternary { $a = 0; $b = $a ?: 7; if ($b != 7 || (1 ? 2 : 3) != 2) { return 1; } }
test:aggregates { @c = count(); @c = count(); @s = sum(5); @s = sum(7); if (@c != 2 || @s != 12) { return 1; }
                  clear(@c); clear(@s); }
"""


def test_self_tests_of_the_language_pass() -> None:
    require_root()
    p = trace(SELF, "--test")
    report = re.sub(r"\033\[\d+m", "", p.stdout)
    assert p.returncode == 0, report + p.stderr
    assert "[  PASSED  ] 10 tests." in report.splitlines(), report


@pytest.mark.parametrize("script,where,message", [
    ("test:a { } test:a { }", "stdin:1:12:", '"a" was used as the name for more than one TEST probe'),
    ("test:a { return (1, 2) == (1, \"x\"); }", "stdin:1:17:", "'==' compares tuples of one shape"),
    ('test:a { return "x"; }', "stdin:1:17:", "return takes an integer, not string[2]"),
])
def test_refusals(script: str, where: str, message: str) -> None:
    p = trace(script, "--test", "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(where) and message in p.stderr.splitlines()[0], p.stderr


def test_return_from_for_loops() -> None:
    """'return N' in a for loop's body (a callback), nested or not, is the program's value; 'return'
    alone and exit() there leave it with 0."""
    require_root()
    p = trace('test:flat { @m[1] = 1; @m[2] = 2; for ($kv : @m) { if ($kv.1 == 2) { return 7; } } return 0; } '
              'test:nested { @a[1] = 1; for ($kv : @a) { for ($i : 0..3) { if ($i == 2) { return 3; } } } } '
              'test:passes { @b[1] = 1; for ($kv : @b) { if ($kv.1 == 5) { return 1; } } $n = 0; '
              'for ($i : 0..4) { $n += $i; } if ($n != 6) { return 1; } } '
              'test:plain { @c[1] = 1; for ($kv : @c) { return; } return 9; } '
              'test:exits { @d[1] = 1; for ($kv : @d) { exit(); } return 9; }', "--test")
    report = re.sub(r"\033\[\d+m", "", _times(p.stdout)).splitlines()
    assert [line for line in report if line.startswith(("[       OK ]", "[  FAILED  ] ")) and "(T)" in line] == [
        "[  FAILED  ] flat (T)", "[  FAILED  ] nested (T)", "[       OK ] passes (T)", "[       OK ] plain (T)",
        "[       OK ] exits (T)"], report


def test_tuples_compared() -> None:
    """== and != of tuples and records (bpftrace 0.25, upstream's tests/self/tuple.bt): as the type that
    holds both, element by element, strings to their NUL, a record's fields by name."""
    require_root()
    p = trace('test:eq { $x = ("hello", -6); $a = (1, true, $x); @b = (1, true, ("hello", -6)); '
              'if (!($a == @b) || $a != @b || $a == (1, true, ("ello", -6)) || !($a != (1, true, ("hell", -6)))) { '
              'return 1; } } '
              'test:records { $r = (a=1, b="xy"); if ($r != (b="xy", a=1) || $r == (a=2, b="xy")) { return 1; } } '
              'test:keys { @k[1, 2] = (3, 4); if (@k[1, 2] != (3, 4)) { return 1; } } '
              'test:wrong { if ((1, "a") == (1, "b")) { return 0; } return 1; }', "--test")
    report = re.sub(r"\033\[\d+m", "", p.stdout)
    assert "[  FAILED  ] 1 test, listed below:" in report and report.rstrip().endswith("[  FAILED  ] wrong"), report


def test_without_test_mode_the_tests_are_left_out() -> None:
    require_root()
    alone = trace("test:a { return 1; }")
    assert alone.returncode != 0 and "No probes attached; use --test to run test probes" in alone.stderr
    beside = trace('BEGIN { printf("hi\\n"); exit(); } test:a { return 1; }', "-q")
    assert beside.returncode == 0 and beside.stdout.startswith("hi\n"), beside.stderr
