"""Features of bpftraces after 0.17 (issue 30): those pycore has (has_key, delete(@m, key); for loops in
tests/test_trace_loops.py) give what
bpftrace 0.23.2 gives; those it has not fail with one error naming the feature and the bpftrace version
that added it, checked against 0.23.2 (which has what came before 0.24 and refuses what came after)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.test_trace_values import pycore, same_as_023

IMPLEMENTED = [
    ('BEGIN { @m[1] = 2; printf("%d %d\\n", has_key(@m, 1), has_key(@m, 3)); delete(@m, 1); '
     'printf("%d\\n", has_key(@m, 1)); @m[5] = 1; exit(); }', "1 0\n0\n\n\n@m[5]: 1\n"),
    ('BEGIN { @m[1] = count(); printf("%d\\n", has_key(@m, 1)); if (has_key(@m, 1)) { printf("yes\\n"); } '
     '$x = has_key(@m, 2) + 1; printf("%d\\n", $x); exit(); }', "1\nyes\n1\n\n\n@m[1]: 1\n"),
    ('BEGIN { @m[1, 2] = 1; printf("%d\\n", has_key(@m, (1, 2))); delete(@m, (1, 2)); '
     'printf("%d\\n", has_key(@m, (1, 2))); exit(); }', "1\n0\n\n\n\n"),   # the empty map: a blank line
    ('BEGIN { @m["a"] = 1; @m["b"] = 2; printf("%d\\n", has_key(@m, "a")); delete(@m, "a"); exit(); }',
     "1\n\n\n@m[b]: 2\n"),
    ('BEGIN { @m = 1; delete(@m); @n = 2; exit(); }', "\n\n\n@n: 2\n"),
    # has_key() as a statement, its value dropped (pycore stopped at an internal error)
    ('BEGIN { @m[1] = 1; has_key(@m, 1); exit(); }', "\n\n@m[1]: 1\n"),
]


@pytest.mark.parametrize("script,expected", IMPLEMENTED)
def test_has_key_and_delete_as_bpftrace_023(script: str, expected: str) -> None:
    assert same_as_023(script) == expected


def test_has_key_refusal() -> None:
    p = pycore('BEGIN { @m = 1; printf("%d\\n", has_key(@m)); exit(); }', "--dry-run")
    assert p.returncode != 0 and "has_key() takes a map and a key" in p.stderr


# (script, the feature as the error names it, the bpftrace version that added it). let, map
# declarations, begin/end, durations, ?: and conditions without parentheses: tests/test_trace_syntax_new.py
NEWER = [
    ('uprobe:/bin/bash:readline { print(dw_ustack()); }', "dw_ustack()", "0.26"),
]


def test_a_config_block_is_not_a_block_expression() -> None:
    """A script with a config block that fails further on is told what failed there, not about a
    block."""
    for script in ("config = { max_strlen = 16 } BEGIN { $x = ; }", "config={max_strlen=16}\nBEGIN { $x = ; }"):
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "unexpected ';'" in p.stderr and "block" not in p.stderr, p.stderr


@pytest.mark.parametrize("script,what,version", NEWER)
def test_newer_features_named(script: str, what: str, version: str) -> None:
    """One error (its line, the script's line, a caret), naming the feature and the version."""
    p = pycore(script, "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 3 and lines[0].startswith("stdin:1:"), p.stderr
    assert what in lines[0] and f"new in bpftrace {version}" in lines[0], lines[0]


@pytest.mark.parametrize("script,what,version", NEWER)
def test_newer_feature_versions_against_bpftrace_023(script: str, what: str, version: str) -> None:
    """The versions named agree with 0.23.2: what came before 0.24 it accepts, what came after it refuses."""
    require_root()
    p = bpftrace023.run(script, "--dry-run")
    if tuple(int(x) for x in version.split(".")) < (0, 24):
        if "len(@m)" in what:   # 0.23.2 has len() but reads available_filter_functions to build it
            assert p.returncode == 0 or "available_filter_functions" in p.stderr, p.stderr
        else:
            assert p.returncode == 0, p.stderr
    else:
        assert p.returncode != 0 and "ERROR" in p.stderr, p.stdout


def test_old_scripts_still_parse() -> None:
    """The newer-feature patterns read only failed parses: a ternary, a map named @for, a variable $let,
    '?' and ':' in strings are 0.17 scripts as before."""
    script = ('BEGIN { @for = 1; $let = 2; $x = $let ? 1 : 2; printf("a ?: b for ($i : 1..5) %d\\n", $x); '
              '@if[1] = 1; exit(); }')
    p = subprocess.run([sys.executable, "-m", "pycore", "trace", "--dry-run", "-e", script], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
