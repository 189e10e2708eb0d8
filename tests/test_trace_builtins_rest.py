"""The last builtins upstream's tools need (issue 30): ``func`` as bpftrace's ksym/usym type (so one
map holds it and ksym(), as upstream's xfsdist.bt does), and syscall_name(nr) (0.25, upstream's
syscount.bt). func is compared with bpftrace 0.23.2 where this host runs it (uprobes); syscall_name
with upstream's documented output (its stdlib's table: src/stdlib/strings/syscall.h)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.test_trace_values import pycore


def test_func_and_ksym_share_a_map() -> None:
    """xfsdist.bt's pattern: @name[0] = ksym(0) in BEGIN, @name[tid] = func in a kprobe: one type."""
    script = ('BEGIN { @name[0] = ksym(0); } kprobe:vfs_read { @name[tid] = func; @c[func] = count(); '
              'printf("%s\\n", func); } kretprobe:vfs_read { @us[@name[tid]] = hist(1); delete(@name, tid); }')
    p = pycore(script, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "map @name[int64]: int" in p.stdout and "map @c[uint64]: count" in p.stdout, p.stdout
    # and a ksym does not go where a usym is (bpftrace: different types)
    p = pycore('BEGIN { @n[0] = usym(0); } kprobe:vfs_read { @n[tid] = func; }', "--dry-run")
    assert p.returncode != 0 and "Traceback" not in p.stderr and len(p.stderr.splitlines()) == 3, p.stderr


def test_upstream_xfsdist_dry_runs() -> None:
    """Upstream's xfsdist.bt (missing_probes = ignore: this host may have no xfs) checks and lowers."""
    xfsdist = os.path.join(os.path.dirname(__file__), "data", "upstream-tools", "xfsdist.bt")
    p = subprocess.run([sys.executable, "-m", "pycore", "trace", "--dry-run", xfsdist], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_func_in_uprobes_is_named() -> None:
    """A uprobe's and a uretprobe's func is the function's name (a string: docs/trace.md says why)."""
    require_root()
    p = pycore('uprobe:libc:getppid /pid == cpid/ { printf("%s\\n", func); @f[func] = count(); } '
               'uretprobe:libc:getppid /pid == cpid/ { printf("ret %s\\n", func); @r[func] = count(); }',
               "-q", "-c", f"{sys.executable} -c 'import os; [os.getppid() for _ in range(3)]'")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("getppid\nret getppid\n" * 3), p.stdout
    assert "@f[getppid]: 3\n" in p.stdout and "@r[getppid]: 3\n" in p.stdout, p.stdout


def test_func_in_uprobes_where_bpftrace_023_differs() -> None:
    """Where pycore keeps a uprobe's func a name: 0.23.2's usym prints the address once the child has
    exited (its maps, printed after), pycore the name."""
    require_root()
    bpftrace023.require()
    script = 'uprobe:libc:exit /pid == cpid/ { @f[func] = count(); }'
    theirs = bpftrace023.run(script, "-q", "-c", "/bin/true")
    ours = pycore(script, "-q", "-c", "/bin/true")
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert re.search(r"^@f\[0x[0-9a-f]+\]: 1$", theirs.stdout, re.M), theirs.stdout
    assert ours.stdout.endswith("@f[exit]: 1\n"), ours.stdout


# syscall_name (0.25): upstream's docs (stdlib.md: syscall_name(__NR_read) is "read"); numbers with no call
# "Unknown syscall" (its table's unknown_syscall); the x32 numbers from 512 in its x86 table
def test_syscall_name_as_upstream() -> None:
    require_root()
    p = pycore('BEGIN { $n = 1; printf("%s|%s|%s|%s|%s\\n", syscall_name(0), syscall_name($n), syscall_name(-1), '
               'syscall_name(9999), syscall_name(547)); print(syscall_name(59)); @s[syscall_name(3)] = count(); '
               '@v = syscall_name(2); @t = (syscall_name(0), 1); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("read|write|Unknown syscall|Unknown syscall|pwritev2\nexecve\n\n\n"
                        "@s[close]: 1\n@t: (read, 1)\n@v: open\n"), p.stdout


def test_syscall_name_table_is_the_kernels() -> None:
    """The table agrees with this machine's <asm/unistd_64.h> wherever the header names a number."""
    from pycore.lang.syscalls import syscall_name

    header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
    if not os.path.exists(header):
        pytest.skip("no linux-libc-dev header here")
    seen = 0
    for line in open(header):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("__NR_"):
            assert syscall_name(int(parts[2])) == parts[1][5:], line
            seen += 1
    assert seen > 300


def test_syscall_name_errors() -> None:
    for script, want in [('BEGIN { $s = syscall_name("x"); }', "only supports integer arguments"),
                         ("BEGIN { $s = syscall_name(); }", "requires 1 argument")]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


@pytest.mark.kernel
def test_func_in_kprobes_and_kfuncs() -> None:
    """kprobe/kretprobe/kfunc/kretfunc: func is the function's address (bpf_get_func_ip), named when
    printed; in one map with ksym() (upstream's xfsdist.bt)."""
    require_root()
    p = pycore('BEGIN { @name[0] = ksym(0); } kprobe:vfs_read /pid == cpid/ { @name[tid] = func; @k[func] = count(); } '
               'kretprobe:vfs_read /pid == cpid/ { @kr[func] = count(); @n[@name[tid]] = count(); } '
               'kfunc:vfs_read /pid == cpid/ { @f[func] = count(); printf("%s\\n", func); } '
               'kretfunc:vfs_read /pid == cpid/ { @fr[func] = count(); }', "-q", "-c", "/usr/bin/cat /etc/hostname")
    assert p.returncode == 0, p.stderr
    for m in ("@k", "@kr", "@n", "@f", "@fr"):
        assert f"{m}[vfs_read]: " in p.stdout, p.stdout
    assert "vfs_read\n" in p.stdout


# len(ustack), len(kstack) (0.22): the frames bpf_get_stack takes, at most the stack's limit
_LEN = ('uprobe:libc:exit /pid == cpid/ { printf("%d %d %d %d\\n", len(ustack), len(ustack(2)), len(kstack), '
        'len(ustack(perf, 3))); @[len(ustack)] = count(); }')


def test_len_of_stacks_as_bpftrace_023() -> None:
    require_root()
    bpftrace023.require()
    theirs = bpftrace023.run(_LEN, "-q", "-c", "/bin/true")
    ours = pycore(_LEN, "-q", "-c", "/bin/true")
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert ours.stdout == theirs.stdout, (ours.stdout, theirs.stdout)


def test_len_of_stacks_limits() -> None:
    """A deep user stack (python's, built with frame pointers or not: at least its own frames) is cut at
    the stack's limit, as bpftrace's buffer of limit frames cuts it."""
    require_root()
    p = pycore('uprobe:libc:getppid /pid == cpid/ { printf("%d %d %d\\n", len(ustack) >= len(ustack(1)), '
               'len(ustack(1)), len(ustack(3)) <= 3); exit(); }', "-q", "-c",
               f"{sys.executable} -c 'import os, time; os.getppid(); time.sleep(0.3)'")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("1 1 1\n"), p.stdout


@pytest.mark.kernel
def test_len_of_stacks_in_kprobes() -> None:
    """A kprobe's kernel stack has frames (vfs_read's callers: ksys_read, the syscall entry...)."""
    require_root()
    p = pycore('kprobe:vfs_read /pid == cpid/ { printf("%d %d\\n", len(kstack) > 2, len(kstack(2))); exit(); }',
               "-q", "-c", "/usr/bin/cat /etc/hostname")
    assert p.returncode == 0, p.stderr
    assert "1 2\n" in p.stdout, p.stdout


@pytest.mark.parametrize("script, args, want", [
    ('BEGIN { printf("%s\\n", probetype); exit(); }', (), "special"),
    ('begin { print(probetype()); exit(); }', (), "special"),
    ('interval:ms:10 { printf("%s|%s\\n", probetype, probe); exit(); }', (), "interval|interval:ms:10"),
    ('uprobe:/bin/bash:main { @[probetype] = count(); }', ("-c", "/bin/bash -c true"), "@[uprobe]: 1"),
])
def test_probetype(script: str, args: tuple, want: str) -> None:
    """probetype (0.25): the probe's type as upstream's stdlib.md documents it (begin and end are
    ``special``), a string like ``probe``: printed, compared, a map key."""
    require_root()
    p = pycore(script, "-q", *args)
    assert p.returncode == 0, p.stderr
    assert want in p.stdout.splitlines(), p.stdout
