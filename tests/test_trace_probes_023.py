"""Probe kinds of bpftrace 0.18-0.23 (issue 30), side by side with a real bpftrace 0.23.2 on the host
where this kernel lets it run them (tests/bpftrace023.py): ``-l`` of a program's probes (0.22),
``self:signal:SIGUSR1`` (0.22), software and hardware listings, ``fentry``/``fexit`` names, every BPF
iterator (``iter:task_vma``, 0.18/0.19), raw tracepoint listing and wildcards (0.19).
What needs fentry, kprobes or iterators in 0.23.2 (whose iterator check fails here) is compared in the
6.12 VM: tests/test_trace_probes_023_kernel.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.test_tools_023_kernel import ROOT023

PYCORE = [sys.executable, "-m", "pycore"]


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def pycore(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*PYCORE, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def bpftrace(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    bpftrace023.require()
    r = subprocess.run(bpftrace023.argv(*args), capture_output=True, text=True, timeout=timeout,
                       env=bpftrace023.env(), stdin=subprocess.DEVNULL)
    r.stderr = "".join(ln for ln in r.stderr.splitlines(True) if "RLIMIT_MEMLOCK" not in ln)
    return r


# -- -l of a program's probes (bpftrace 0.22) ---------------------------------------------------------

LISTED_PROGRAMS = [
    # each attach point listed as -l PATTERN lists it, in the program's order, repeats kept; kinds
    # without names to list print as 0.23.2 prints them (special::, interval:s:, software:NAME:)
    'tracepoint:sched:sched_switch, rawtracepoint:sched_wak* { printf("x\\n"); } BEGIN { @x[1] = 1; } '
    "uprobe:/bin/bash:readline {} interval:s:1 {} software:cpu* {} END {}",
    "tracepoint:sched:sched_switch {} tracepoint:sched:sched_switch {}",
    "t:sched:sched_sw* /pid == 1/ { @x = count(); } i:ms:100 {} profile:hz:99 {} p:s:1 {}",
    "hardware:cache-misses:10 {} software:faults {} s:cs:5 {} watchpoint:0x1000:8:w {}",
    "uprobe:/bin/bash:readl* {} uretprobe:/bin/bash:readline {}",
]


@pytest.mark.parametrize("program", LISTED_PROGRAMS)
def test_list_a_program_as_023(program: str) -> None:
    ours, theirs = pycore("trace", "-l", "-e", program), bpftrace("-l", "-e", program)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout and ours.stdout


def test_list_a_script_file_as_023() -> None:
    """``-l FILE``: a file that exists is a script (the same file in 0.23.2's root)."""
    bpftrace023.require()
    name = f"pycore-list-{os.getpid()}.bt"
    path = ROOT023 / "tmp" / name
    path.write_text("tracepoint:syscalls:sys_enter_open* { @[probe] = count(); }\nBEGIN { exit(); }\n")
    try:
        ours, theirs = pycore("trace", "-l", str(path)), bpftrace("-l", f"/tmp/{name}")
    finally:
        path.unlink()
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0 and ours.stdout == theirs.stdout, (ours.stdout, ours.stderr, theirs.stdout)
    assert "tracepoint:syscalls:sys_enter_openat\n" in ours.stdout and ours.stdout.endswith("special::\n")


@pytest.mark.parametrize("program,theirs_says", [
    ("tracepoint:sched:nope {}", "tracepoint not found: sched:nope"),
    ("tracepoint:sched:sched_switch { $x = }", "syntax error"),
])
def test_list_a_bad_program(program: str, theirs_says: str) -> None:
    """Both refuse, with one error at the place (pycore's wording is its own)."""
    ours, theirs = pycore("trace", "-l", "-e", program), bpftrace("-l", "-e", program)
    assert theirs.returncode != 0 and theirs_says in theirs.stderr, theirs.stderr
    assert ours.returncode == 2 and ours.stdout == ""
    assert ours.stderr.startswith("stdin:1:") and len(ours.stderr.splitlines()) == 3, ours.stderr


def test_list_with_arguments_refused() -> None:
    r = pycore("trace", "-l", "-c", "/bin/true", "-e", "BEGIN {}")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("pattern", ["software:*", "hardware:*", "software:cpu*", "s:faults", "h:cycles"])
def test_perf_event_listing_as_023(pattern: str) -> None:
    ours, theirs = pycore("list", pattern), bpftrace("-l", pattern)
    assert ours.returncode == 0 and ours.stdout == theirs.stdout and ours.stdout, (ours.stdout, theirs.stdout)


# -- self:signal:SIGUSR1 (bpftrace 0.22) ----------------------------------------------------------------

SIGNAL_PROGRAM = ('self:signal:SIGUSR1 { printf("got %d %s\\n", @a, probe); @a++; } '
                  'BEGIN { @a = 1; printf("begin\\n"); } interval:ms:MS { exit(); }')


def _signalled(argv: list[str], marker: str, env: dict[str, str] | None = None) -> str:
    """Run a tracer, send SIGUSR1 twice once it has attached, return its stdout and stderr."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         stdin=subprocess.DEVNULL)
    out = []
    assert p.stdout is not None
    for line in p.stdout:
        out.append(line)
        if line == "begin\n":
            break
    time.sleep(0.3)
    pid = int(subprocess.run(["pgrep", "-n", "-f", marker], capture_output=True, text=True).stdout.split()[0])
    for _ in range(2):
        os.kill(pid, signal.SIGUSR1)
        time.sleep(0.4)
    rest, _ = p.communicate(timeout=60)
    return "".join(out) + rest


def test_self_signal_as_023() -> None:
    """SIGUSR1 runs the probe, twice, and does not print the maps (as it does without the probe)."""
    bpftrace023.require()
    ours = _signalled([*PYCORE, "trace", "-e", SIGNAL_PROGRAM.replace("MS", "4001")], "interval:ms:4001")
    theirs = _signalled(bpftrace023.argv("-e", SIGNAL_PROGRAM.replace("MS", "4002")), "interval:ms:4002",
                        bpftrace023.env())
    theirs = "".join(ln for ln in theirs.splitlines(True) if "RLIMIT_MEMLOCK" not in ln)
    assert ours == theirs, (ours, theirs)
    assert "got 1 self:signal:SIGUSR1\ngot 2 self:signal:SIGUSR1\n" in ours and ours.endswith("@a: 3\n")


@pytest.mark.parametrize("probe,says", [
    ("self:signal:SIGUSR2", "SIGUSR2 is not a supported signal"),
    ("self:signal:USR1", "USR1 is not a supported signal"),
    ("self:foo:SIGUSR1", "foo is not a supported trigger"),
    ("self:signal:*", "* is not a supported signal"),
])
def test_self_signal_errors_as_023(probe: str, says: str) -> None:
    ours, theirs = pycore("trace", "--dry-run", "-e", f"{probe} {{}}"), bpftrace("--dry-run", "-e", f"{probe} {{}}")
    assert theirs.returncode != 0 and says in theirs.stderr, theirs.stderr
    assert ours.returncode == 2 and says in ours.stderr.splitlines()[0], ours.stderr


def test_self_signal_plan() -> None:
    r = pycore("trace", "--dry-run", "-e", 'self:signal:SIGUSR1 { printf("%d %s\\n", pid, probe); }')
    assert r.returncode == 0 and r.stdout.startswith("self:signal:SIGUSR1 "), r.stdout


# -- fentry / fexit names (bpftrace 0.20+) ------------------------------------------------------------

def test_fentry_names_in_listing_and_probe() -> None:
    """Written fentry/fexit (f, fr), a probe lists and prints as 0.23.2 does (fentry:vmlinux:vfs_read);
    written kfunc/kretfunc, as 0.17 and the lab's listings (kfunc:vmlinux:vfs_read)."""
    assert pycore("list", "fentry:vfs_read").stdout == "fentry:vmlinux:vfs_read\n"
    assert pycore("list", "fexit:vfs_read").stdout == "fexit:vmlinux:vfs_read\n"
    assert pycore("list", "kfunc:vfs_read").stdout == "kfunc:vmlinux:vfs_read\n"
    plan = pycore("trace", "--dry-run", "-e", "fentry:vfs_read, f:vfs_write, fr:vfs_write, kfunc:vfs_open, "
                  "kretfunc:vfs_open { printf(\"%s\\n\", probe); }").stdout.split()
    assert [w for w in plan if ":" in w] == ["fentry:vmlinux:vfs_read", "fentry:vmlinux:vfs_write",
                                             "fexit:vmlinux:vfs_write", "kfunc:vmlinux:vfs_open",
                                             "kretfunc:vmlinux:vfs_open"]


# -- iterators (bpftrace 0.18: task_vma; 0.19: every iterator) ------------------------------------------

def test_iterators_listed_from_btf() -> None:
    """Every ``struct bpf_iter__NAME`` with its ``bpf_iter_NAME`` function, sorted, as 0.23.2 finds them
    (0.23.2 itself lists none here: its trial load fails on this kernel; the VM compares the lists)."""
    out = pycore("list", "iter:*").stdout.splitlines()
    assert {"iter:task", "iter:task_file", "iter:task_vma", "iter:bpf_map", "iter:tcp"} <= set(out), out
    assert out == sorted(out) and not any(ln.endswith("__safe_trusted") for ln in out)
    assert pycore("list", "-v", "iter:task_vma").stdout == (
        "iter:task_vma\n    struct task_struct * task\n    struct vm_area_struct * vma\n")


def test_iter_task_vma_runs() -> None:
    """iter:task_vma walks a process's mappings: the same ranges as /proc/PID/maps."""
    held = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)
        r = pycore("trace", "-e", f'iter:task_vma /ctx->task->tgid == {held.pid}/ {{ printf("%lx-%lx\\n", '
                   "ctx->vma->vm_start, ctx->vma->vm_end); }")
        with open(f"/proc/{held.pid}/maps") as f:     # less [vsyscall], a fixed page, not a VMA
            maps = [line.split()[0] for line in f if not line.rstrip().endswith("[vsyscall]")]
    finally:
        held.kill()
        held.wait()
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln] == maps


@pytest.mark.parametrize("program,says", [
    ("iter:nope {}", "this kernel's BTF has no iterator bpf_iter_nope"),
    ("iter:task:list {}", "pinning an iterator (iter:NAME:PIN) is not in pycore trace"),
    ("iter:task {} iter:task_vma {}", "only one iter probe"),
])
def test_iter_errors(program: str, says: str) -> None:
    r = pycore("trace", "--dry-run", "-e", program)
    assert r.returncode == 2 and says in r.stderr.splitlines()[0], r.stderr


# -- raw tracepoints (bpftrace 0.19: wildcards and listing) ---------------------------------------------

def test_rawtracepoint_listing_against_023() -> None:
    """pycore lists raw tracepoints from BTF, as upstream since 0.24 (with their arguments); 0.23.2 lists
    tracefs's events instead (less the syscalls' enter/exit). Every name 0.23.2 lists is listed; the
    others are the kernel's bare tracepoints (no trace event), which attach all the same."""
    ours = set(pycore("list", "rawtracepoint:*").stdout.splitlines())
    theirs = set(bpftrace("-l", "rawtracepoint:*").stdout.splitlines())
    assert theirs and theirs <= ours, sorted(theirs - ours)[:20]
    events = {line.split(":")[1].strip() for line in open("/sys/kernel/tracing/available_events")}
    assert all(name.split(":", 1)[1] not in events for name in ours - theirs), sorted(ours - theirs)


def test_rawtracepoint_wildcard_attaches() -> None:
    """rawtracepoint:sched_wak* expands as the listing does; ``probe`` names each match."""
    r = pycore("trace", "-e", 'rawtracepoint:sched_wak* { @[probe] = count(); } interval:ms:300 { exit(); }')
    assert r.returncode == 0, r.stderr
    assert "@[rawtracepoint:sched_waking]: " in r.stdout, r.stdout
    assert "Attaching 5 probes" in r.stderr, r.stderr


# -- software probes' order ----------------------------------------------------------------------------

SOFTWARE_TWICE = ('software:page-faults:1 /pid == cpid/ { printf("a\\n"); } '
                  'software:page-faults:1 /pid == cpid/ { printf("b\\n"); } '
                  'software:context-switches:1 /pid == cpid/ { printf("c\\n"); } '
                  'software:context-switches:1 /pid == cpid/ { printf("d\\n"); }')


def test_software_probes_fire_in_script_order_as_023() -> None:
    """Two blocks on one software event fire in the script's order, as in bpftrace 0.23.2 (and 0.17):
    each a is followed by its b, each c by its d (the kernel runs a CPU's events newest first, so
    pycore attaches them in reverse)."""
    for argv in ([*PYCORE, "trace"], bpftrace023.argv()):
        r = subprocess.run([*argv, "-c", "/bin/sleep 0.01", "-e", SOFTWARE_TWICE], capture_output=True, text=True,
                           timeout=120, env=bpftrace023.env(), stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        seq = "".join(ln for ln in r.stdout.split() if ln in "abcd")
        assert seq.count("a") >= 10 and seq.replace("ab", "").replace("cd", "") == "", (argv[0], seq)


# -- two differences the 39 tools showed (tests/test_tools_023_kernel.py) -----------------------------

def test_cleared_count_map_prints_zero() -> None:
    """pidpersec.bt: ``@ = count(); clear(@); print(@)`` prints ``@: 0`` in 0.23.2 (and at the end)."""
    program = 'BEGIN { @ = count(); clear(@); print(@); printf("--\\n"); exit(); }'
    ours, theirs = pycore("trace", "-q", "-e", program), bpftrace("-q", "-e", program)
    assert theirs.stdout == "@: 0\n--\n\n\n@: 0\n", theirs.stdout
    assert ours.stdout == theirs.stdout


def test_delete_missing_key_warning() -> None:
    """runqlat.bt, tcplife.bt, dcsnoop.bt: 0.23.2 warns on stdout at each delete() of a key that is not
    there (upstream: still so when delete()'s result is not used)."""
    program = "BEGIN { @m[1] = 1; delete(@m[2]); exit(); }"
    ours, theirs = pycore("trace", "-q", "-e", program), bpftrace("-q", "-e", program)
    assert "WARNING: Can't delete map element because it does not exist." in theirs.stdout, theirs.stdout
    assert ours.stdout == theirs.stdout
