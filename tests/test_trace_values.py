"""Values as bpftrace 0.23.2 gives them (issue 30), side by side with the real one (tests/bpftrace023.py):
aggregate maps read in expressions, pointer-typed map values."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.traced import traced

PYCORE = [sys.executable, "-m", "pycore", "trace"]


def pycore(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*PYCORE, *args, "-e", script], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# bpftrace 0.23.2 reports a read of an aggregate map's missing key, on stdout (its helper-error
# warning, "WARNING: Success", with the script's line and a marker), then reads 0; pycore reads 0
_LOOKUP_WARNING = re.compile(r"^stdin:\S+: WARNING: Success\nAdditional Info - helper: map_lookup_percpu_elem, "
                             r"retcode: 0\n.*\n *~+\n", re.M)


def same_as_023(script: str) -> str:
    """pycore's stdout for ``script``, asserted equal to bpftrace 0.23.2's (both -q, both exit 0)."""
    require_root()
    theirs = bpftrace023.run(script, "-q")
    ours = pycore(script, "-q")
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == _LOOKUP_WARNING.sub("", theirs.stdout), (script, theirs.stdout, ours.stderr)
    return ours.stdout


def refused_as_023(script: str, ours: str) -> subprocess.CompletedProcess:
    """``script`` refused by bpftrace 0.23.2 and by pycore, pycore's error holding ``ours``, no traceback."""
    require_root()
    theirs = bpftrace023.run(script)
    assert theirs.returncode != 0 and "ERROR" in theirs.stderr, theirs
    p = pycore(script)
    assert p.returncode != 0 and ours in p.stderr and "Traceback" not in p.stderr, p.stderr
    return p


# reading count/sum/min/max/avg maps: bpftrace 0.21+ reads the combined value (an avg's average)
AGGREGATE_READS = [
    ('BEGIN { @a = avg(5); $x = @a; printf("%d\\n", $x); exit(); }', "5\n"),
    ('BEGIN { @a = avg(5); @a = avg(2); $x = @a * 2; $y = @a + 1; $z = (int64)@a; '
     'printf("%d %d %d\\n", $x, $y, $z); exit(); }', "6 4 3\n"),
    ('BEGIN { @a = avg(-7); @a = avg(2); $x = @a; printf("%d\\n", $x); exit(); }', "-2\n"),   # toward zero
    ('BEGIN { @a = avg(-5); @a = avg(-2); $x = @a; printf("%d\\n", $x); exit(); }', "-3\n"),
    ('BEGIN { @c = count(); @c = count(); @s = sum(-7); @mi = min(-3); @mi = min(-4); @ma = max(4); '
     '@ma = max(-3); $c = @c; $s = @s; $mi = @mi; $ma = @ma; printf("%d %d %d %d\\n", $c, $s, $mi, $ma); '
     'exit(); }', "2 -7 -4 4\n"),
    ('BEGIN { @a[2] = avg(3); $x = @a[1]; $y = @a[2]; printf("%d %d\\n", $x, $y); exit(); }', "0 3\n"),
    ('BEGIN { $x = @a; @a = avg(3); printf("%d\\n", $x); exit(); }', "0\n"),
    ('BEGIN { @a = avg(5); if (@a > 2) { printf("gt\\n"); } exit(); }', "gt\n"),
    ('BEGIN { @c = sum(2); @b = @c + 1; @d = (int64)@c; printf("%d %d\\n", @b, @d); clear(@c); clear(@b); '
     'clear(@d); exit(); }', "3 2\n"),
    ('BEGIN { @c = min(2); @m[@c] = 1; $t = (@c, 1); print($t); clear(@c); exit(); }', "(2, 1)\n"),
    ('BEGIN { @c = count(); $x = @c == 1; $y = (int64)@c ? 7 : 8; $z = -(int64)@c; print(@c + 1); '
     'printf("%d %d %d\\n", $x, $y, $z); exit(); }', "2\n1 7 -1\n"),
]


@pytest.mark.parametrize("script,expected", AGGREGATE_READS)
def test_aggregate_reads_match_bpftrace_023(script: str, expected: str) -> None:
    out = same_as_023(script)
    assert out.startswith(expected)


# where bpftrace 0.23.2 refuses an aggregate map as a value, pycore does too (one error, a non-zero exit)
AGGREGATE_REFUSALS = [
    ('BEGIN { @a = avg(5); @b = @a; exit(); }', "cannot be assigned from one map to another"),
    ('BEGIN { @c = count(); @b = @c; exit(); }', "cannot be assigned from one map to another"),
    ('BEGIN { @c = count(); printf("%d\\n", @c); exit(); }', "printf cannot print a count() map"),
    ('BEGIN { @h = hist(5); $x = @h; exit(); }', "is a hist"),
    ('BEGIN { @h = stats(5); $x = @h; exit(); }', "is a stats"),
    ('BEGIN { @h = lhist(5, 0, 10, 1); printf("%d\\n", @h); exit(); }', "is a lhist"),
    ('BEGIN { @a = count(); @a++; exit(); }', "@a holds count values"),
    ('BEGIN { @c = count(); if (@c) { printf("y\\n"); } exit(); }', "Invalid condition in if(): count_t"),
    ('BEGIN { @c = max(2); $x = @c ? 5 : 6; exit(); }', "Invalid condition in ternary: max_t"),
    ('BEGIN { @c = min(2); $x = -@c; exit(); }', "The - operator can not be used on expressions of type 'min_t'"),
    ('BEGIN { @c = count(); $x = !@c; exit(); }', "The ! operator"),
    ('BEGIN { @c = sum(1); $x = ~@c; exit(); }', "The ~ operator"),
    ('BEGIN { @c = stats(3); $x = (int64)@c; exit(); }', "is a stats"),
]


@pytest.mark.parametrize("script,ours", AGGREGATE_REFUSALS)
def test_aggregate_refusals_as_bpftrace_023(script: str, ours: str) -> None:
    refused_as_023(script, ours)


PER_CPU = ('tracepoint:syscalls:sys_enter_getppid /pid == $1/ { @c = count(); @s = sum(cpu + 1); '
           '@a = avg(cpu * 100 - 7); @st = stats(cpu * 100 - 7); @mi = min(cpu); @ma = max(cpu); } '
           'END { printf("%d %d %d %d %d\\n", (int64)@c, (int64)@s, (int64)@a, (int64)@mi, (int64)@ma); '
           'clear(@c); clear(@s); clear(@a); clear(@mi); clear(@ma); }')



def test_aggregate_reads_combine_cpus_as_bpftrace_023() -> None:
    """A per-CPU aggregate read in a probe is the sum (min, max, average) over every CPU's value, as
    bpftrace 0.21+ reads it, not the value of the CPU the probe runs on."""
    require_root()
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    bpftrace023.require()
    theirs = traced(bpftrace023.argv(), PER_CPU, env=bpftrace023.env())
    ours = traced(PYCORE, PER_CPU)
    # 10 calls: 5 on CPU 0, 5 on CPU 1; sum 5*1 + 5*2; avg (5*-7 + 5*93)/10 = 43 (pycore read 33 until
    # avg's insert and add were one step: each CPU's first value after another CPU's insert was lost)
    # (bpftrace 0.23.2 then prints its cleared scalar maps as 0, pycore none: the first line is the values)
    assert theirs.splitlines()[0] == "10 15 43 0 1"
    assert ours.splitlines()[0] == "10 15 43 0 1"
    assert "@st: count 10, average 43, total 430" in theirs.splitlines()
    assert "@st: count 10, average 43, total 430" in ours.splitlines()


# a pointer kept in a map or a tuple keeps its type: += -= ++ -- step by the pointee's size, and it
# prints in hex, as bpftrace 0.21+ (0.17 stepped but printed decimal)
POINTER_VALUES = [
    ('BEGIN { @ = (int16 *)32; @ += 1; exit(); }', "\n\n@: 0x22\n"),
    ('BEGIN { @ = (int16 *)32; @++; exit(); }', "\n\n@: 0x22\n"),
    ('BEGIN { @ = (int32 *)32; @--; @ -= 2; exit(); }', "\n\n@: 0x14\n"),
    ('BEGIN { @ = (int32 *)32; $x = @++; $y = ++@; printf("%p %p\\n", $x, $y); exit(); }',
     "0x20 0x28\n\n\n@: 0x28\n"),
    ('BEGIN { @[1] = (int64 *)32; @[1] += 2; $p = @[1] + 1; printf("%p\\n", $p); exit(); }',
     "0x38\n\n\n@[1]: 0x30\n"),
    ('BEGIN { @ = (struct task_struct *)0; @ += 1; $s = sizeof(struct task_struct); @s = $s; exit(); }', None),
    ('BEGIN { $t = ((int16 *)32, 1); $t2 = ($t.0 + 1, 2); print($t); print($t2); @t = $t2; exit(); }',
     "(0x20, 1)\n(0x22, 2)\n\n\n@t: (0x22, 2)\n"),
    ('BEGIN { $p = (int16 *)32; print($p); @v = $p; exit(); }', "0x20\n\n\n@v: 0x20\n"),
]


@pytest.mark.parametrize("script,expected", POINTER_VALUES)
def test_pointer_values_as_bpftrace_023(script: str, expected: str | None) -> None:
    out = same_as_023(script)
    if expected is not None:
        assert out == expected
    else:   # a struct pointer steps by the struct's size
        text = dict(line.split(": ") for line in out.split("\n") if ": " in line)
        assert int(text["@"], 16) == int(text["@s"])


def test_pointer_values_json_as_bpftrace_023() -> None:
    """-f json keeps a pointer a number, in 0.23.2 as in pycore."""
    require_root()
    script = 'BEGIN { @ = (int16 *)32; @ += 1; $t = ((int8 *)1, 2); print($t); exit(); }'
    theirs = bpftrace023.run(script, "-q", "-f", "json")
    ours = pycore(script, "-q", "-f", "json")
    assert theirs.returncode == ours.returncode == 0
    assert ours.stdout == theirs.stdout
    assert '{"type": "map", "data": {"@": 34}}' in ours.stdout


POINTER_REFUSALS = [
    'BEGIN { @ = (int16 *)32; @ *= 2; exit(); }',
    'BEGIN { @ = (int16 *)32; @ = 5; exit(); }',
    'BEGIN { @ = 5; @ = (int16 *)32; exit(); }',
]


@pytest.mark.parametrize("script", POINTER_REFUSALS)
def test_pointer_value_refusals_as_bpftrace_023(script: str) -> None:
    require_root()
    theirs = bpftrace023.run(script)
    assert theirs.returncode != 0 and "ERROR" in theirs.stderr
    p = pycore(script)
    assert p.returncode != 0 and "Traceback" not in p.stderr and len(p.stderr.splitlines()) == 3, p.stderr


# two threads, one on each CPU, call getpgid(i) for the same i at the same moment (a spin barrier
# before each call), so both probes find key i missing and both insert it
RACE_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int arrived[2];
static int n;

static void *run(void *arg) {
    int me = (int)(long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof set, &set);
    for (int i = 1; i <= n; i++) {
        atomic_store(&arrived[me], i);
        while (atomic_load(&arrived[!me]) < i)
            ;
        syscall(SYS_getpgid, 1000000 + i);
    }
    return NULL;
}

int main(int argc, char **argv) {
    n = atoi(argv[1]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}
"""


@pytest.mark.parametrize("agg,each", [("count()", r"2"), ("sum(2)", r"4"),
                                       ("stats(4)", r"count 2, average 4, total 8"),
                                       ("hist(4)", r"\n\[4, 8\) +2 \|@+\|\n")])
def test_a_new_key_inserted_by_two_cpus_at_once_keeps_both(tmp_path, agg: str, each: str) -> None:
    """Two CPUs that both find a key missing both insert it; the one refused (-EEXIST) adds to the
    other's entry. pycore lost that count (20,000 races: ~19,800 counts lost), and bpftrace 0.23.2 loses
    it with a "File exists" warning (vfsstat.bt in the 6.12 VM); bpftrace 0.17 adds it."""
    require_root()
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    (tmp_path / "race.c").write_text(RACE_C)
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(tmp_path / "race"), str(tmp_path / "race.c")], check=True)
    n = 2000
    script = (f'config = {{ max_map_keys = {n + 10} }} tracepoint:syscalls:sys_enter_getpgid /comm == "race"/ '
              f'{{ @[args.pid] = {agg}; }}')
    p = subprocess.run([*PYCORE, "-e", script, "-c", f"{tmp_path / 'race'} {n}"], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "WARNING" not in p.stdout, p.stdout + p.stderr
    entries = re.findall(r"^@\[(\d+)\]:(.*?)(?=^@|\Z)", p.stdout, re.M | re.S)
    assert sorted(int(k) for k, _ in entries) == list(range(1_000_001, 1_000_001 + n))
    lost = [k for k, v in entries if not re.fullmatch(rf"\s*{each}\s*", v)]
    assert not lost, (len(lost), dict(entries)[lost[0]])
