"""for loops (issue 30): ``for ($kv : @m)`` (bpftrace 0.21) side by side with the real bpftrace 0.23.2
(tests/bpftrace023.py), and what 0.24+ added (range loops ``for ($i : a..b)``, ``for`` without
parentheses, break/continue/return in a for loop) against upstream's documented output (its
tests/runtime/for). A map's elements come in the kernel's hash order, which is not the insertion
order and not the same from one map to the next: outputs are compared as sorted lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.traced import traced
from tests.test_trace_values import refused_as_023

PYCORE = [sys.executable, "-m", "pycore", "trace"]


def pycore(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*PYCORE, *args, "-e", script], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def lines(text: str) -> list[str]:
    return sorted(text.splitlines())


def same_as_023(script: str) -> str:
    """pycore's stdout for ``script``, asserted equal (as sorted lines) to bpftrace 0.23.2's; both -q, exit 0."""
    require_root()
    theirs = bpftrace023.run(script, "-q")
    ours = pycore(script, "-q")
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert lines(ours.stdout) == lines(theirs.stdout), (script, theirs.stdout, ours.stdout, ours.stderr)
    return ours.stdout


MAP_LOOPS = [
    # one key, two keys ($kv.0 a tuple), strings, $kv whole
    ('BEGIN { @m[1] = 2; @m[3] = 4; for ($kv : @m) { printf("%d %d\\n", $kv.0, $kv.1); } exit(); }',
     ["1 2", "3 4"]),
    ('BEGIN { @m[1, "a"] = 2; @m[3, "b"] = 4; for ($kv : @m) { printf("%d %s %d\\n", $kv.0.0, $kv.0.1, $kv.1); '
     'print($kv); } exit(); }', ["1 a 2", "3 b 4", "((1, a), 2)", "((3, b), 4)"]),
    ('BEGIN { @m["abc"] = "aa"; @m["de"] = "dd"; for ($kv : @m) { print($kv); printf("%s=%s\\n", $kv.0, $kv.1); } '
     'exit(); }', ["(abc, aa)", "(de, dd)", "abc=aa", "de=dd"]),
    # the body reads and writes the script's variables (0.22+), integers and strings
    ('BEGIN { $x = 1; $s = "abc"; @m[1] = 2; @m[3] = 4; for ($kv : @m) { $x = $x + $kv.1; $s = "de"; } '
     'printf("%d %s\\n", $x, $s); exit(); }', ["7 de"]),
    ('BEGIN { @m[0] = 0; @m[1] = 1; $v = 123; for ($kv : @m) { print($v); $v *= 2; } print($v); exit(); }',
     ["123", "246", "492"]),
    # count, sum, min, max, avg maps: the value combined over the CPUs (an avg's average)
    ('BEGIN { @c[1] = count(); @c[2] = count(); @c[2] = count(); for ($kv : @c) { print($kv); '
     'printf("%d\\n", (int64)$kv.1); } exit(); }', ["(1, 1)", "(2, 2)", "1", "2"]),
    ('BEGIN { @a[1] = avg(5); @a[1] = avg(8); @n[1] = min(5); @n[1] = min(-2); @x["k"] = max(7); @s[2, 3] = sum(-3); '
     'for ($kv : @a) { print($kv); } for ($kv : @n) { print($kv); } for ($kv : @x) { print($kv); } '
     'for ($kv : @s) { print($kv); } exit(); }', ["(1, 6)", "(1, -2)", "(k, 7)", "((2, 3), -3)"]),
    # nested loops, and a map filled in the body
    ('BEGIN { $t = 0; @m[1] = 2; @m[2] = 5; @n[3] = 4; @n[5] = 6; for ($kv : @m) { for ($kv2 : @n) { '
     'printf("%d %d\\n", $kv.0, $kv2.0); $t += $kv.1 * $kv2.1; } } printf("t %d\\n", $t); exit(); }',
     ["1 3", "1 5", "2 3", "2 5", "t 70"]),
    ('BEGIN { @m[16] = 32; @m[64] = 128; for ($kv : @m) { @new[$kv.1] = $kv.0; @t[$kv.0] = $kv; } exit(); }',
     ["@new[32]: 16", "@new[128]: 64", "@t[16]: (16, 32)", "@t[64]: (64, 128)"]),
    # a multi-key map's key as one tuple, $kv.0: a key of another map, of delete(), has_key(), a read
    ('BEGIN { @[0, 0, 0] = 1; @[0, 0, 1] = 1; @[0, 1, 0] = 1; @[1, 0, 0] = 1; for ($kv : @) { if ($kv.0.1 == 1) { '
     'delete(@, $kv.0); } } exit(); }', ["@[0, 0, 0]: 1", "@[0, 0, 1]: 1", "@[1, 0, 0]: 1"]),
    ('BEGIN { @m[1, "ab"] = 1; @m[2, "c"] = 2; for ($kv : @m) { @n[$kv.0] = $kv.1 + 1; printf("%d\\n", @m[$kv.0]); '
     'if (has_key(@m, $kv.0)) { printf("yes\\n"); } } exit(); }', ["@n[1, ab]: 2", "@n[2, c]: 3", "yes"]),
    # exit() in the body ends the loop and the probe
    ('BEGIN { @m[1] = 2; @m[3] = 4; for ($kv : @m) { printf("in\\n"); exit(); } printf("after\\n"); }', ["in"]),
    # a map a later probe assigns (bpftrace types maps over the whole script): empty at BEGIN
    ('BEGIN { for ($kv : @m) { printf("%d\\n", $kv.1); } exit(); } END { @m[1] = 2; for ($kv : @m) { '
     'printf("end %d\\n", $kv.1); } }', ["end 2"]),
]


@pytest.mark.parametrize("script,expected", MAP_LOOPS)
def test_map_loops_as_bpftrace_023(script: str, expected: list[str]) -> None:
    out = same_as_023(script)
    assert set(expected) <= set(out.splitlines()), out


def test_map_loop_in_an_interval_probe_as_bpftrace_023() -> None:
    script = ('BEGIN { @m[7] = 8; @m[9] = 10; } interval:ms:50 { @n++; for ($kv : @m) { printf("%d %d %d\\n", @n, '
              '$kv.0, $kv.1); } if (@n == 2) { exit(); } }')
    out = same_as_023(script)
    assert {"1 7 8", "1 9 10", "2 7 8", "2 9 10"} <= set(out.splitlines())


# what bpftrace 0.23.2 refuses, pycore does too: one error line, a non-zero exit
REFUSALS = [
    ('BEGIN { @h[1] = hist(5); for ($kv : @h) { } exit(); }', "Loop expression does not support type: hist_t"),
    ('BEGIN { @h[1] = stats(5); for ($kv : @h) { } exit(); }', "Loop expression does not support type: stats_t"),
    ('BEGIN { @m = 1; for ($kv : @m) { } exit(); }', "Maps used as for-loop expressions must have keys"),
    ('BEGIN { $x = 1; for ($kv : $x) { } exit(); }', "Loop expression must be a map"),
    ('BEGIN { @m[1] = 2; for ($kv : @m) { } printf("%d\\n", $kv.0); exit(); }',
     "Undefined or undeclared variable: $kv"),
    ('BEGIN { @m[1] = 2; for ($kv : @m) { $y = 5; } printf("%d\\n", $y); exit(); }',
     "Undefined or undeclared variable: $y"),
    ('BEGIN { @m[1] = 2; $kv = 1; for ($kv : @m) { } exit(); }', "Loop declaration shadows existing variable: $kv"),
    ('BEGIN { @m[1] = 2; for ($kv : @m) { $kv = 1; } exit(); }', "cannot assign int64"),
    ('BEGIN { for ($kv : @m) { } exit(); }', "Undefined map: @m"),
]


@pytest.mark.parametrize("script,ours", REFUSALS)
def test_refusals_as_bpftrace_023(script: str, ours: str) -> None:
    p = refused_as_023(script, ours)
    assert len([x for x in p.stderr.splitlines() if "error" in x]) == 1, p.stderr


# bpftrace 0.24+ (upstream's tests/runtime/for): break, continue and return in a map loop, which
# 0.23.2 refused ("'break' statement is not allowed in a for-loop"); pycore takes the newer rule
NEWER_MAP_LOOPS = [
    ('BEGIN { @m["foo"] = 1; @m["bar"] = 2; print("start"); for ($i : @m) { print($i.0); break; } print("done"); '
     'clear(@m); exit(); }', lambda out: out.startswith("start\n") and out.splitlines()[1] in ("foo", "bar")
     and out.splitlines()[2] == "done" and len(out.splitlines()) == 3),
    ('BEGIN { @m["foo"] = 1; @m["bar"] = 2; print("start"); for ($i : @m) { if ($i.0 == "bar") { continue; } '
     'print($i.0); } clear(@m); exit(); }', lambda out: out == "start\nfoo\n"),
    ('BEGIN { @m["foo"] = 1; @m["bar"] = 2; for ($i : @m) { if ($i.0 == "bar") { print($i.0); clear(@m); return; } '
     '} print("end"); }', lambda out: out == "bar\n"),
    ('BEGIN { @a[16] = 32; @a[17] = 33; @b[64] = 128; @b[65] = 129; @b[66] = 130; for ($kv : @a) { printf("A"); '
     'for ($kv2 : @b) { printf("B"); } } printf("\\n"); clear(@a); clear(@b); exit(); }',
     lambda out: out == "ABBBABBB\n"),
]


@pytest.mark.parametrize("script,ok", NEWER_MAP_LOOPS)
def test_map_loop_jumps_as_upstream(script: str, ok) -> None:   # noqa: ANN001
    require_root()
    p = pycore(script, "-q", "-c", "/bin/true")   # the end of the script where it returns before exit()
    assert p.returncode == 0 and ok(p.stdout.rstrip("\n") + "\n"), (p.stdout, p.stderr)


def test_023_refuses_what_upstream_allows() -> None:
    """The newer rule is a choice: 0.23.2 refuses break in a for loop (docs/trace.md says pycore takes 0.24's)."""
    require_root()
    theirs = bpftrace023.run('BEGIN { @m[1] = 2; for ($kv : @m) { break; } exit(); }')
    assert theirs.returncode != 0 and "'break' statement is not allowed in a for-loop" in theirs.stderr


# range loops (0.24): start included, end excluded, both evaluated once; upstream's tests/runtime/for
RANGES = [
    ('BEGIN { for ($i : 0..5) { print($i); } exit(); }', "0\n1\n2\n3\n4\n"),
    ('BEGIN { $start = 2; $end = 7; for ($i : $start..$end) { print($i); } exit(); }', "2\n3\n4\n5\n6\n"),
    ('BEGIN { for ($i : (1+1)..(2*4)) { print($i); } exit(); }', "2\n3\n4\n5\n6\n7\n"),
    ('BEGIN { @map[5] = 3; for ($i : 0..@map[5]) { print($i); } clear(@map); exit(); }', "0\n1\n2\n"),
    ('BEGIN { for ($i : 1..0) { print("here"); } for ($i : 5..5) { print("here"); } exit(); }', ""),
    ('BEGIN { for ($i : (-3)..3) { print($i); } exit(); }', "-3\n-2\n-1\n0\n1\n2\n"),
    ('BEGIN { $sum = 0; for ($i : 1..5) { $sum += $i; } print($sum); exit(); }', "10\n"),
    ('BEGIN { @a = 10; for ($i : 0..@a) { @a += 1; } exit(); }', "\n\n@a: 20\n"),
    ('BEGIN { for ($i : 1..4) { if ($i == 2) { break; } print($i); } print("5"); exit(); }', "1\n5\n"),
    ('BEGIN { for ($i : 1..4) { if ($i == 2) { continue; } print($i); } exit(); }', "1\n3\n"),
    ('BEGIN { for ($i : 1..4) { for ($j : 1..$i) { print($j); if ($j == 2) { return; } } } print("end"); }',
     "1\n1\n2\n"),
    ('BEGIN { $a = 4; for ($i : 0..$a) { print($i); $a--; } exit(); }', "0\n1\n2\n3\n"),
    # without parentheses, as upstream's opensnoop.bt writes it
    ('BEGIN { for $i : 0..3 { printf("%d\\n", $i); } exit(); }', "0\n1\n2\n"),
    ('BEGIN { @m[1] = 2; for $kv : @m { printf("%d\\n", $kv.1); } clear(@m); exit(); }', "2\n"),
    # a range inside a map loop, and the other way round
    ('BEGIN { @m[2] = 3; for ($kv : @m) { for ($i : $kv.0..$kv.1) { print($i); } } clear(@m); exit(); }', "2\n"),
    ('BEGIN { @m[7] = 1; for ($i : 0..2) { for ($kv : @m) { printf("%d %d\\n", $i, $kv.0); } } clear(@m); exit(); }',
     "0 7\n1 7\n"),
]


@pytest.mark.parametrize("script,expected", RANGES)
def test_range_loops_as_upstream(script: str, expected: str) -> None:
    require_root()
    p = pycore(script, "-q", "-c", "/bin/true")
    assert p.returncode == 0 and p.stdout.rstrip("\n") == expected.rstrip("\n"), (p.stdout, p.stderr)


RANGE_REFUSALS = [
    ('BEGIN { for ($i : "a"..2) { } }', "Loop range requires an integer"),
    ('BEGIN { @c = count(); for ($i : 0..@c) { } }', "Loop range requires an integer"),
    ('BEGIN { for ($i : 0..3) { } print($i); }', "Undefined or undeclared variable: $i"),
    ('BEGIN { for ($i : 0..3 { } }', "expected ')'"),
]


@pytest.mark.parametrize("script,ours", RANGE_REFUSALS)
def test_range_refusals(script: str, ours: str) -> None:
    p = pycore(script, "--dry-run")
    assert p.returncode != 0 and ours in p.stderr and "Traceback" not in p.stderr, p.stderr


PER_CPU = ('tracepoint:syscalls:sys_enter_getppid /pid == $1/ { @c[1] = count(); @s[1] = sum(cpu + 1); '
           '@a[1] = avg(cpu * 10 - 7); } '
           'END { for ($kv : @c) { printf("c %d\\n", (int64)$kv.1); } for ($kv : @s) { printf("s %d\\n", (int64)$kv.1); } '
           'for ($kv : @a) { printf("a %d\\n", (int64)$kv.1); } clear(@c); clear(@s); clear(@a); }')



def test_map_loop_combines_cpus_as_bpftrace_023() -> None:
    """A count/sum/avg map's value in a for loop is every CPU's combined, as bpftrace 0.21+ gives it,
    not the value of the CPU the loop runs on."""
    require_root()
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    bpftrace023.require()
    theirs = traced(bpftrace023.argv(), PER_CPU, env=bpftrace023.env())
    ours = traced(PYCORE, PER_CPU)
    # 10 calls: 5 on CPU 0, 5 on CPU 1; sum 5*1 + 5*2; avg (5*-7 + 5*3)/10 = -2
    want = ["c 10", "s 15", "a -2"]
    assert [x for x in theirs.splitlines() if x[:2] in ("c ", "s ", "a ")] == want, theirs
    assert [x for x in ours.splitlines() if x[:2] in ("c ", "s ", "a ")] == want, ours


@pytest.mark.kernel
def test_loops_load_on_this_kernel() -> None:
    """The callbacks (BPF-to-BPF functions with func_info BTF, bpf_for_each_map_elem, bpf_loop and
    bpf_map_lookup_percpu_elem) pass this kernel's verifier, in a kprobe-free script: nested map and
    range loops that write the script's variables, break and return."""
    require_root()
    script = ('BEGIN { @m[1, "a"] = 2; @m[3, "b"] = 4; @c[5] = count(); $t = 0; $s = "x"; '
              'for ($kv : @m) { for ($i : 0..$kv.1) { $t += $i; if ($i == 2) { break; } } '
              'for ($kv2 : @c) { $t += (int64)$kv2.1 * 100; $s = $kv.0.1; } } '
              'printf("%d\\n", $t); for ($j : 0..10) { if ($j == 1) { printf("r\\n"); return; } } printf("no\\n"); }'
              ' END { clear(@m); clear(@c); }')
    p = pycore(script, "-q", "-c", "/bin/true")
    assert p.returncode == 0, p.stderr
    # $kv.1 = 2: 0+1; 4: 0+1+2 (break); +100 twice
    assert p.stdout.rstrip("\n") == "204\nr", (p.stdout, p.stderr)


# each statement pycore lowers, in a loop's body (a callback of its own: no r6-r9 of the caller's,
# its own stack frame), where the verifier of this kernel must take it
BODIES = [
    'printf("%d %s %s\\n", $i, comm, $s);', '@c[$i] = count(); @h = hist($i); @l = lhist($i, 0, 10, 1);',
    '@a = avg($i); @st = stats($i);', '$s = "loop"; $t = ($i, $s); print($t);', '@k[kstack(3)] = count();',
    'if ($i == 1) { $x = 1; } else { $x = 2; }', '$w = 0; while ($w < 3) { $w++; }',
    'unroll(2) { $x += 1; }', '@m[$i] = $i; delete(@m[$i]);', 'time("%H\\n"); clear(@c);', '$x = @m[$i] + 1;',
    '$p = (int16 *)32; $p += $i;', '$x = strncmp(comm, "py", 2); $y = @a;',
]


@pytest.mark.parametrize("body", BODIES)
def test_loop_bodies_load(body: str) -> None:
    """A statement in a range loop, in a map loop, in both nested: the programs load (nothing attached)."""
    from pycore.lang.runtime import Script

    require_root()
    pre = '$x = 0; $s = "str"; $i = 7; $y = 0; @m[1] = 1; @c[0] = count(); @a = avg(1); @k[kstack(3)] = count(); '
    for loop in (f"for ($j : 0..3) {{ $i = $j; {body} }}", f"for ($kv : @m) {{ $i = $kv.0; {body} }}",
                 f"for ($kv : @m) {{ for ($j : 0..$kv.1) {{ $i = $j; {body} }} }}"):
        with Script(f"tracepoint:syscalls:sys_enter_getppid {{ {pre}{loop} }}") as script:
            script.load()


def test_tuple_keys_as_bpftrace_023() -> None:
    """A tuple as a map's key is that map's keys (bpftrace 0.21+: @m[(1, 2)] is @m[1, 2]), as a for loop's
    $kv.0 is; a tuple in a tuple is not (pycore refuses it, 0.23.2 takes it)."""
    out = same_as_023('BEGIN { @[(1, 2)] = count(); @[1, 2] = count(); $t = (3, "a"); @s[$t] = 5; @s[4, "b"] = 6; '
                      'exit(); }')
    assert {"@[1, 2]: 2", "@s[3, a]: 5", "@s[4, b]: 6"} <= set(out.splitlines()), out
    # a later key widens the map's string: the tuple's elements are put where the key's are
    out = same_as_023('BEGIN { @m["ab", 1] = 1; for ($kv : @m) { @n[$kv.0] = 2; } @n["a much longer string", 3] = 3; '
                      '@m["x", 1] = 1; for ($kv : @m) { if (has_key(@n, $kv.0)) { printf("has %s\\n", $kv.0.0); } } '
                      '$t = ("a", 1); @s[$t] = 5; @s["a somewhat longer key", 2] = 6; @s[$t] = 7; exit(); }')
    assert {"has ab", "@s[a, 1]: 7", "@n[ab, 1]: 2"} <= set(out.splitlines()), out
