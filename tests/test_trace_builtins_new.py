"""Builtins and functions of bpftrace 0.18-0.26 (issue 30): each compared with bpftrace 0.23.2's own
output where 0.23.2 has it (same_as_023 runs both), and with what upstream's docs say (and the
machine's own facts: the parent process, the CPUs) for the 0.24+ ones that 0.23.2 refuses."""

from __future__ import annotations

import os

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.test_trace_values import pycore, same_as_023

# (script, expected): both bpftrace 0.23.2 and pycore print exactly this
AS_023 = [
    # offsetof (0.18) and of sub-fields (0.22), of a declared struct and of the kernel's
    ('struct Foo { int a; struct { char x; long y; } b; short c[3]; }; BEGIN { printf("%d %d %d %d\\n", '
     'offsetof(struct Foo, a), offsetof(struct Foo, b), offsetof(struct Foo, b.y), offsetof(struct Foo, c)); '
     'exit(); }', "0 8 16 24\n\n\n"),
    ('BEGIN { @o = offsetof(struct task_struct, se.avg) - offsetof(struct task_struct, se); '
     '@p = offsetof(struct sched_entity, avg) == @o; exit(); }', None),
    # strerror (0.21): the number, named when printed: printf's %s, print(), map values, tuples
    ('BEGIN { printf("%s|%s|%s\\n", strerror(2), strerror(0), strerror(9999)); print(strerror(13)); '
     '@e = strerror(1); @t = (strerror(3), 1); exit(); }',
     "No such file or directory|Success|Unknown error 9999\nPermission denied\n\n\n"
     "@e: Operation not permitted\n@t: (No such process, 1)\n"),
    # nsecs(clock) (0.19): boot >= monotonic, sw_tai within a second of tai, plain nsecs is boot's (0.19+)
    ('BEGIN { $m = nsecs(monotonic); $b = nsecs(boot); $t = nsecs(tai); $s = nsecs(sw_tai); $n = nsecs; '
     'printf("%d %d %d %d\\n", $b >= $m, ($s - $t) / 1000000000, $n >= $b, $n - $b < 1000000000); exit(); }',
     "1 0 1 1\n\n\n"),
    # a key-less count() is always there (a one-slot per-CPU array in bpftrace): @c: 0 when never
    # counted, cleared or deleted; other maps that are empty print nothing
    ('BEGIN { @a = count(); clear(@a); @b = count(); delete(@b); @c = sum(3); clear(@c); @d = 5; clear(@d); '
     'exit(); }', "\n\n@a: 0\n@b: 0\n\n\n"),
    ('BEGIN { if (0) { @a = count(); @b = sum(1); @c = 1; @d = hist(1); @e = stats(1); } exit(); }',
     "\n\n@a: 0\n\n\n\n\n\n"),
    ('BEGIN { @a = count(); clear(@a); print(@a); @k[1] = count(); clear(@k); exit(); }', "@a: 0\n\n\n@a: 0\n\n"),
    # enums (0.21+): named when printed from maps (keys, values, tuples), by print() and by %s (not
    # %d), sorted by their numbers; a struct member of enum type too; int -> enum casts (0.22)
    ('enum foo { A = 1, B = 2, C = 3 }; BEGIN { @t = (B, 5); @[C, B] = 1; @[A, A] = 2; @v = A; print(A); '
     'printf("%s %d %x|%5s|%-4s|\\n", B, B, C, A, B); @s[C] = 1; @s[A] = 2; @s[B] = 3; @w[B] = A; @w[A] = C; '
     '@w[C] = B; $e = (enum foo)2; print($e); @m = C + 1; exit(); }',
     "A\nB 2 3|    A|B   |\nB\n\n\n@[C, B]: 1\n@[A, A]: 2\n@m: 4\n@s[C]: 1\n@s[A]: 2\n@s[B]: 3\n@t: (B, 5)\n"
     "@v: A\n@w[B]: A\n@w[C]: B\n@w[A]: C\n"),
    ('BEGIN { $x = BPF_MAP_TYPE_HASH; @y = BPF_MAP_TYPE_ARRAY + 0; @z[BPF_MAP_TYPE_ARRAY] = 1; '
     '@z[BPF_MAP_TYPE_HASH] = 2; printf("%s\\n", $x); exit(); }',
     "BPF_MAP_TYPE_HASH\n\n\n@y: 2\n@z[BPF_MAP_TYPE_ARRAY]: 1\n@z[BPF_MAP_TYPE_HASH]: 2\n"),
    ('BEGIN { @t = curtask->restart_block.nanosleep.type; printf("%s %d\\n", curtask->restart_block.nanosleep.type, '
     'curtask->restart_block.nanosleep.type); print(curtask->restart_block.nanosleep); exit(); }',
     "TT_NONE 0\n{ .clockid = 0, .type = TT_NONE, .rmtp = 0x0, .compat_rmtp = 0x0, .expires = 0 }\n\n\n"
     "@t: TT_NONE\n"),
    # int <-> int array casts (0.18): the integer's bytes, in variables, maps (keys and values), tuples, print()
    ('BEGIN { $a = (uint8[8])0x0102030405060708; printf("%d %d\\n", $a[0], $a[7]); $b = (uint64)$a; '
     'printf("%x\\n", $b); exit(); }', "8 1\n5060708\n\n\n"),
    ('BEGIN { @a = (uint8[8])0x0102030405060708; @c = (uint32[2])12345678901234; '
     '@d[(uint16[4])0x0102030405060708] = 1; @e = (int8[8])-2; $x = (int16[4])-3; @f = (int64)$x; '
     '@g = (uint32[2])(uint64)@a; print((uint8[8])258); @h = ((uint16[4])1, 2); exit(); }',
     "[2,1,0,0,0,0,0,0]\n\n\n@a: [8,7,6,5,4,3,2,1]\n@c: [1942892530,2874]\n@d[[1800,1286,772,258]]: 1\n"
     "@e: [-2,-1,-1,-1,-1,-1,-1,-1]\n@f: -3\n@g: [84281096,16909060]\n@h: ([1,0,0,0], 2)\n"),
    # signed min and max of negative values; a map read before it is written is 0
    ('BEGIN { @mn = min(-5); @mn = min(-10); @mx = max(-5); @mx = max(-10); exit(); }', "\n\n@mn: -10\n@mx: -5\n"),
    ('BEGIN { if (0) { @x = 5; @m[1] = 1; } printf("%d %d\\n", @x, @m[2]); exit(); }', "0 0\n\n\n\n\n"),
]


@pytest.mark.parametrize("script,expected", AS_023)
def test_builtins_as_bpftrace_023(script: str, expected: str | None) -> None:
    ours = same_as_023(script)
    if expected is not None:
        assert ours == expected


# hist(v, k) (0.20): 2**k buckets per power of 2, in text and json
HIST_K = ('BEGIN { @ = hist(100, 2); @ = hist(1000, 2); @ = hist(0, 2); @ = hist(3, 2); @ = hist(5, 2); '
          '@ = hist(-1, 2); @ = hist(7, 2); @ = hist(8, 2); @ = hist(3000000, 2); @b[1] = hist(12345, 5); '
          '@b[1] = hist(100, 5); @b[2] = hist(64, 5); @c = hist(2000000000, 3); @d = hist(1, 0); @d = hist(9, 0); '
          'exit(); }')


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_hist_k_as_bpftrace_023(fmt: str) -> None:
    """Every bucket's bounds and counts, and the head ("@h:", no space after it), as 0.23.2 prints them."""
    require_root()
    theirs = bpftrace023.run(HIST_K, "-q", "-f", fmt)
    ours = pycore(HIST_K, "-q", "-f", fmt)
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert len(ours.stdout) > 1000, ours.stdout
    assert theirs.stdout == ours.stdout


def test_hist_k_refusals() -> None:
    for script, want in [
        ("BEGIN { @ = hist(1, 6); }", "2**k for k in 0..5, not 6"),
        ("BEGIN { @ = hist(1, 2); @ = hist(1, 3); }", "@: hist() with k = 3 here and k = 2 elsewhere"),
        ("BEGIN { @ = hist(1, 2); @ = hist(1); }", "@: hist() with k = 0 here and k = 2 elsewhere"),
        ("BEGIN { @ = hist(1, pid); }", "expected a constant integer"),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_offsetof_errors() -> None:
    for script, want in [
        ("BEGIN { @ = offsetof(struct task_struct, no_such_field); }", "'struct task_struct' has no field named "
                                                                       "'no_such_field'"),
        ("BEGIN { @ = offsetof(struct task_struct, pid.x); }", "is not a struct or union"),
        ("BEGIN { @ = offsetof(struct task_struct); }", "offsetof() takes a struct and a field"),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_offsetof_of_an_expression() -> None:
    """offsetof(EXPRESSION, field): the struct is the expression's type (upstream's second form)."""
    require_root()
    p = pycore('BEGIN { printf("%d\\n", offsetof(*curtask, se.avg) == offsetof(struct task_struct, se.avg)); '
               'exit(); }', "-q")
    assert p.returncode == 0 and p.stdout.startswith("1\n"), p.stderr


def test_enum_cast_refusals() -> None:
    """A constant that is none of the enum's values is refused, with 0.23.2's words."""
    for script, want in [
        ("enum foo { A = 1, B = 2 }; BEGIN { $e = (enum foo)7; }", "Enum: foo doesn't contain a variant value of 7"),
        ("enum foo { A = 1, B = 2 }; BEGIN { $e = (enum foo)-1; }", "doesn't contain a variant value of -1"),
        ('BEGIN { $e = (enum foo)"x"; }', 'cannot cast string'),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_int_array_cast_refusals() -> None:
    """Casts between sizes that differ are refused with 0.23.2's words."""
    for script, want in [
        ('BEGIN { $a = (uint8[8])0x0102030405060708; @y = (int32)$a; }', 'Cannot cast from "uint8[8]" to "int32"'),
        ("BEGIN { $a = (uint8[4])5; }", 'Cannot cast from "int64" to "uint8[4]"'),
        ("BEGIN { @ = (uint64)curtask->cpus_mask.bits; }", 'Cannot cast from "uint64['),
        ('BEGIN { $a = (uint8[8])"abcdefgh"; }', 'Cannot cast from "string'),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_enum_json_keeps_numbers() -> None:
    """-f json prints an enum as its number, in maps and tuples, as 0.23.2 does."""
    script = ('enum foo { A = 1, B = 2, C = 3 }; BEGIN { @t = (B, 5); @[C, B] = 1; @v = A; print(A); '
              'printf("%s %d\\n", B, B); exit(); }')
    require_root()
    theirs = bpftrace023.run(script, "-q", "-f", "json")
    ours = pycore(script, "-q", "-f", "json")
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert ours.stdout == theirs.stdout and '"@v": 1' in ours.stdout


def test_enum_mixed_with_integers() -> None:
    """An enum's value and a plain integer in one variable or map are plain integers (0.17 scripts that
    mix a kernel enum field with numbers keep working)."""
    require_root()
    p = pycore('BEGIN { $x = BPF_MAP_TYPE_HASH; $x = 7; @m = BPF_MAP_TYPE_HASH; @m = 9; @k[BPF_MAP_TYPE_HASH] = 1; '
               '@k[5] = 2; printf("%d\\n", $x); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "7\n\n\n@k[1]: 1\n@k[5]: 2\n@m: 9\n", p.stdout


def test_strerror_refuses_a_string() -> None:
    p = pycore('BEGIN { printf("%s\\n", strerror("x")); }', "--dry-run")
    assert p.returncode != 0 and "strerror() only supports integer arguments" in p.stderr


# -- 0.24+ (bpftrace 0.23.2 refuses these): upstream's documented meaning, on this machine's facts ---------

def _possible_cpus() -> int:
    with open("/sys/devices/system/cpu/possible") as f:
        return max(int(r.split("-")[-1]) for r in f.read().strip().split(",")) + 1


def test_ppid_pcomm_comm_pid_spellings() -> None:
    """ppid / ppid() / ppid(curtask) (0.24-0.25's standard library: task.real_parent.pid), pcomm the
    parent's name, comm() and pid() with parentheses, pid(init) and tid(curr_ns) (0.24): this test
    process is pycore's parent."""
    require_root()
    with open("/proc/self/comm") as f:
        me = f.read().strip()
    p = pycore('BEGIN { printf("%d %d %d %s %s|%s %d %d %d %d\\n", ppid, ppid(), ppid(curtask), pcomm, pcomm(), '
               'comm(), pid() == pid, pid(init) == pid, tid(curr_ns) == tid, tid(init) == tid()); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"{os.getpid()} {os.getpid()} {os.getpid()} {me} {me}|python 1 1 1 1", \
        p.stdout


def test_ncpus_and_usermode() -> None:
    """ncpus is the possible CPUs (0.24, as bpftrace counts them); usermode is 1 in BEGIN (upstream folds
    a special probe's to 1)."""
    require_root()
    p = pycore('BEGIN { printf("%d %d %d\\n", ncpus, ncpus(), usermode); @[usermode()] = count(); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{_possible_cpus()} {_possible_cpus()} 1\n\n\n@[1]: 1\n"


def test_usermode_in_a_uprobe_and_a_tracepoint() -> None:
    """A uprobe fires in user mode (cs & 3 == 3), a syscall tracepoint in the kernel (folded to 0)."""
    require_root()
    p = pycore('uprobe:libc:getppid { @u[usermode] = count(); } tracepoint:syscalls:sys_enter_getppid '
               '/comm == "python3"/ { @k[usermode] = count(); }',
               "-q", "-c", "python3 -c 'import os; [os.getppid() for _ in range(5)]'")
    assert p.returncode == 0, p.stderr
    assert "@u[1]: " in p.stdout and "@k[0]: 5\n" in p.stdout, p.stdout
    assert "@u[0]" not in p.stdout and "@k[1]" not in p.stdout, p.stdout


def test_errorf_and_warnf_as_upstream_documents() -> None:
    """errorf()/warnf() (0.24): printf's text on stderr after the call's place (file:line:col-end),
    upstream's tests/runtime/call (errorf, errorf_length_modifiers, warnf); other output goes on."""
    require_root()
    p = pycore('BEGIN { errorf("Something bad with args: %d, %s", 10, "arg2"); '
               '$x = 0x12345678abcdef; errorf("%hhx %hx %x %jx\\n", $x, $x, $x, $x); '
               'warnf("Something kinda bad with args: %d, %s", 10, "arg2"); printf("after\\n"); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "after\n\n\n"
    assert p.stderr.splitlines() == ["stdin:1:9-62: ERROR: Something bad with args: 10, arg2",
                                     "stdin:1:87-130: ERROR: ef cdef 78abcdef 12345678abcdef", "",
                                     "stdin:1:132-190: WARNING: Something kinda bad with args: 10, arg2"], p.stderr


def test_errorf_json() -> None:
    """-f json: bpftrace's {"type": "errorf", "msg": ..., "filename": ..., "line": ..., "col": ...} on stdout."""
    require_root()
    p = pycore('BEGIN { errorf("bad \\"%s\\"", "x"); warnf("w"); exit(); }', "-q", "-f", "json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:2] == [
        '{"type": "errorf", "msg": "bad \\"x\\"", "filename": "stdin", "line": 1, "col": 9}',
        '{"type": "warnf", "msg": "w", "filename": "stdin", "line": 1, "col": 36}'], p.stdout


def test_len_of_maps() -> None:
    """len(@m) (0.20): the map's elements as the kernel counts them (bpf_map_sum_elem_count, Linux 6.6+,
    as bpftrace 0.23.2 calls it; 0.23.2 itself cannot run it on this host, which hides the function
    list it reads first), after inserts and deletes, of plain and per-CPU (count()) maps; a key-less
    count() always holds its one element."""
    require_root()
    p = pycore('BEGIN { @a[1] = 1; @a[2] = 2; @c[1] = count(); @c[5] = count(); @c[6] = count(); delete(@a, 1); '
               '@s = count(); clear(@s); $n = len(@a); printf("%d %d %d %d\\n", $n, len(@c), len(@s), len(@e)); '
               'if (0) { @e[1] = 1; } exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("1 3 1 0\n"), p.stdout


def test_str_concat_as_upstream_tests_it() -> None:
    """str_concat (upstream after 0.26): upstream's tests/self/strings.bt (a variable built from itself),
    and the result as a value, a map key and value, empty sides."""
    require_root()
    p = pycore('BEGIN { $log = "log"; $filename = "system.journal"; $path = str_concat("var", "/"); '
               '$path = str_concat("/", $path); $path = str_concat($path, "log/"); $path = str_concat($path, $filename); '
               'printf("%d %s|%s|\\n", $path == "/var/log/system.journal", $path, str_concat("ab", "cde")); '
               '@m[str_concat("k", "1")] = 1; @v = str_concat("", "z"); @w = str_concat("y", ""); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "1 /var/log/system.journal|abcde|\n\n\n@m[k1]: 1\n@v: z\n@w: y\n", p.stdout
    p = pycore('BEGIN { @ = str_concat("a", 1); }', "--dry-run")
    assert p.returncode != 0 and "str_concat() takes strings, not int64" in p.stderr, p.stderr


def test_errors_of_the_new_spellings() -> None:
    for script, want in [
        ("BEGIN { @ = pid(foo); }", "pid() takes a pid namespace: pid(curr_ns) or pid(init)"),
        ("BEGIN { @ = nsecs(wall); }", "nsecs() takes a clock"),
        ("BEGIN { @ = ppid(1, 2); }", "unknown function ppid()"),
        ('BEGIN { errorf("%d"); }', "errorf: Not enough arguments for format string"),
        ("BEGIN { @ = errorf(\"x\"); }", "errorf() gives no value"),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


# -- in the kernel VMs: the host's kernel finds no per-CPU symbol for a BPF program (bpftrace 0.23.2's
# percpu_kaddr fails there alike: "ldimm64 failed to find the address for kernel symbol") and refuses fentry

@pytest.mark.kernel
def test_percpu_kaddr_runqueues() -> None:
    """percpu_kaddr (0.22), upstream's documented use: CPU n's runqueue says it is CPU n's (rq->cpu), this
    CPU's is cpu's; a CPU past the last gives NULL (checked before use, as bpftrace requires)."""
    require_root()
    p = pycore('BEGIN { $q = (struct rq *)percpu_kaddr("runqueues", 0); $t = (struct rq *)percpu_kaddr("runqueues"); '
               '$n = (struct rq *)percpu_kaddr("runqueues", 100000); if ($q != 0) { printf("%d %d %d\\n", $q->cpu, '
               '$t->cpu == cpu, $n == 0); } $p = percpu_kaddr("process_counts"); printf("%d\\n", *$p >= 0); '
               'exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("0 1 1\n1\n"), p.stdout


@pytest.mark.kernel
def test_path_with_a_size() -> None:
    """path(p, size) (0.21): bpf_d_path into a buffer of that size; the whole path when it fits."""
    require_root()
    p = pycore('kfunc:security_file_open /pid == cpid/ { printf("%s|%s|%d\\n", path(args->file->f_path), '
               'path(args->file->f_path, 16), sizeof(path(args->file->f_path, 16))); }', "-q", "-c",
               "/usr/bin/cat /etc/hostname")
    assert p.returncode == 0, p.stderr
    assert "/etc/hostname|/etc/hostname|16\n" in p.stdout, p.stdout
