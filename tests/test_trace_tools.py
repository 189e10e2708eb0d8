"""bpftrace 0.17's own tools (Debian's bpftrace package installs them as /usr/sbin/*.bt),
as shipped, through pycore trace: every one is resolved and checked against the kernel
(--dry-run) on the host and in the kernel VMs (Debian's 6.1 and 6.12, which have kprobes),
and those with a workload whose output is known run side by side with bpftrace.

A tool a kernel cannot take fails with one line naming the reason, listed below with
what bpftrace 0.17 does with the same tool there.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require_root, stop
from tests.test_trace_kernel import CONNECT_PY   # two IPv4 connections and one IPv6, to a port of ours

TOOLS = Path("/usr/sbin")
PYCORE = [sys.executable, "-m", "pycore", "trace"]
BPFTRACE = shutil.which("bpftrace")

# tool -> the one-line error pycore gives on this host (and what bpftrace 0.17 does here)
HOST_REFUSALS = {
    # a kprobe wildcard is listed from the kprobe PMU's functions: the host has no kprobes (the
    # kernel VMs run them); bpftrace lists available_filter_functions. (dcsnoop.bt and vfsstat.bt
    # check: their wildcards are left out, beside attach points named in full)
    "vfscount.bt": "kprobe:vfs_*: matches no probe on this system",
    # bpftrace: "Failed to resolve kernel symbol: avenrun"
    "loads.bt": "no kernel symbol 'avenrun'",
    # a kernel-internal macro (include/linux/sched.h): bpftrace fails too, on its headers
    "runqlat.bt": "unknown identifier 'TASK_RUNNING'",
    # the script's own struct cfs_rq: bpftrace takes BTF's too, with the same error
    "runqlen.bt": "struct cfs_rq has no field 'nr_running'",
    # (ssllatency.bt and sslsnoop.bt: libcrypto's static functions are not in the stripped library;
    # as bpftrace 0.23.2, a probe missing beside others in its block is a warning and skipped)
    # glibc 2.34 moved pthread_create into libc: bpftrace attaches BEGIN alone and says nothing
    "threadsnoop.bt": "no function 'pthread_create' in /lib/x86_64-linux-gnu/libpthread.so.0",
}
# in the kernel VMs: kprobes are there, kallsyms has avenrun, and 6.1/6.12's struct cfs_rq still
# has nr_running
VM_REFUSALS = {tool: why for tool, why in HOST_REFUSALS.items()
               if tool not in ("vfscount.bt", "loads.bt", "runqlen.bt")}
SHIPPED = sorted(p.name for p in TOOLS.glob("*.bt"))
kernel = pytest.mark.kernel


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def test_bpftrace_ships_its_tools() -> None:
    """The package this file reads (./dev.sh installs bpftrace): not an empty parametrization."""
    assert len(SHIPPED) >= 30, SHIPPED
    assert set(HOST_REFUSALS) <= set(SHIPPED)


def dry_run(tool: str, refusals: dict[str, str]) -> None:
    r = subprocess.run([*PYCORE, "--dry-run", str(TOOLS / tool)], capture_output=True, text=True, timeout=240)
    why = refusals.get(tool)
    if why is None:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip(), "the plan lists the probes"
    else:
        assert r.returncode == 2, r.stdout
        first = r.stderr.splitlines()[0]
        assert first.startswith(f"{TOOLS / tool}:") and why in first, r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.parametrize("tool", SHIPPED)
def test_tool_dry_run(tool: str) -> None:
    from pycore.kernel.features import Features

    if Features().fentry:
        pytest.skip("the host's list: this kernel has what the VM list is for (test_tool_dry_run_vm)")
    dry_run(tool, HOST_REFUSALS)


@kernel
def test_tools_checked_in_vm() -> None:
    """Each tool resolved and checked against the VM's kernel, in this process (a pycore process per
    tool costs minutes under TCG): the plan, or the one error VM_REFUSALS names."""
    from pycore.lang.errors import ScriptError
    from pycore.lang.runtime import Script

    wrong = []
    for tool in SHIPPED:
        path = TOOLS / tool
        try:
            Script(path.read_text(), filename=str(path)).plan()
            got = None
        except ScriptError as e:
            got = str(e)
        why = VM_REFUSALS.get(tool)
        if (why is None) != (got is None) or (why is not None and why not in got):
            wrong.append(f"{tool}: expected {why or 'a plan'}, got {got or 'a plan'}")
    assert not wrong, "\n".join(wrong)


def _side_by_side(tool: str, workload: list[str], ready: list[str]) -> tuple[list[str], list[str]]:
    """Both tracers running the tool at once; ``ready`` is run until each has printed an event of it
    (bpftrace 0.17 compiles with LLVM before it attaches, seconds under load: a fixed wait missed
    the workload), then the workload once. Their stdout lines: the headers, and the events (lines
    that start with the time) of the workload's process alone, whatever else runs on the machine."""
    procs = [subprocess.Popen(argv + [str(TOOLS / tool)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in (PYCORE, [BPFTRACE])]
    outs: list[list[str]] = [[], []]
    readers = [threading.Thread(target=lambda p=p, out=out: out.extend(p.stdout), daemon=True)
               for p, out in zip(procs, outs)]
    for t in readers:
        t.start()

    def of(pid: int, out: list[str]) -> list[str]:
        return [line for line in out if EVENT.match(line) and str(pid) in line.split()]

    try:
        deadline = time.monotonic() + 60
        while True:
            for p in procs:
                assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, f"not attached within 60 s: {outs}"
            pid = subprocess.Popen(ready).pid
            time.sleep(0.5)
            if all(of(pid, out) for out in outs):
                break
        work = subprocess.Popen(workload)
        assert work.wait(60) == 0
        time.sleep(0.5)
    finally:
        for p in procs:
            stop(p, signal.SIGINT, communicate=False)
        for t in readers:
            t.join(10)
    ours, theirs = ([line.rstrip("\n") for line in out if not EVENT.match(line) or line in of(work.pid, out)]
                    for out in outs)
    return ours, [ln for ln in theirs if not ln.startswith("Attaching ")]


EVENT = re.compile(r"\d\d:\d\d:\d\d ")


NANOSLEEP = textwrap.dedent("""
    import ctypes
    class timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
    libc = ctypes.CDLL(None)
    for s, ns in ((0, 250_000_000), (1, 5_000_000)):
        libc.syscall(35, ctypes.byref(timespec(s, ns)), None)     # nanosleep(2) itself, not clock_nanosleep
""")
NANOSLEEP_READY = NANOSLEEP.replace("((0, 250_000_000), (1, 5_000_000))", "((0, 1_000_000),)")   # 0.001 s


def test_naptime_side_by_side() -> None:
    """naptime.bt: a syscall tracepoint's struct pointer (args->rqtp->tv_sec), read from user memory."""
    assert BPFTRACE
    ours, theirs = _side_by_side("naptime.bt", [sys.executable, "-c", NANOSLEEP],
                                 [sys.executable, "-c", NANOSLEEP_READY])
    comm = Path(sys.executable).name[:15]
    assert [ln.split()[4:] for ln in ours[2:] if ln.strip()] == [[comm, "0.250"], [comm, "1.005"]], ours
    # the time of day may tick between the two tracers' lines: compare from the PPID column on
    assert [ln.split()[1:] for ln in ours] == [ln.split()[1:] for ln in theirs]


GETADDRINFO = "import socket; socket.getaddrinfo('localhost', 80); socket.gethostbyname('localhost')"


def test_gethostlatency_side_by_side() -> None:
    """gethostlatency.bt: uprobe:libc:..., the library named as bpftrace names it (the linker's cache)."""
    assert BPFTRACE
    ours, theirs = _side_by_side("gethostlatency.bt", [sys.executable, "-c", GETADDRINFO],
                                 [sys.executable, "-c", "import socket; socket.getaddrinfo('127.0.0.2', 80)"])
    # TIME PID COMM LATms HOST: the time and the latency differ run to run
    mine = [(ln.split()[1], ln.split()[2], ln.split()[4]) for ln in ours[2:] if ln.strip()]
    comm = Path(sys.executable).name[:15]
    assert [m[1:] for m in mine] == [(comm, "localhost"), (comm, "localhost")], ours
    assert mine == [(ln.split()[1], ln.split()[2], ln.split()[4]) for ln in theirs[2:] if ln.strip()]
    assert ours[:2] == theirs[:2]


# -- in the kernel VMs: kprobe tools with -c, side by side --------------------------------------------

def run_tool(tracer: list[str], tool: str, cmd: str) -> list[str]:
    r = subprocess.run([*tracer, "-c", cmd, str(TOOLS / tool)], capture_output=True, text=True, timeout=240,
                       env={k: v for k, v in os.environ.items() if not k.startswith("LC_")} | {"LC_ALL": "C"})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return [ln for ln in r.stdout.splitlines() if not ln.startswith("Attaching ")]


def both(tool: str, cmd: str) -> tuple[list[str], list[str]]:
    assert BPFTRACE, "bpftrace is installed by ./dev.sh"
    return run_tool(PYCORE, tool, cmd), run_tool([BPFTRACE], tool, cmd)


@pytest.fixture
def connect(tmp_path):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, timeout=30)
    (tmp_path / "connect.py").write_text(CONNECT_PY)
    return f"/usr/bin/python3.11 {tmp_path / 'connect.py'} 45681"


@kernel
def test_tcpconnect_vm(connect):
    """tcpconnect.bt: kprobe:tcp_connect, AF_INET from <sys/socket.h>, ntop of v4 and v6, bswap."""
    ours, theirs = both("tcpconnect.bt", connect)
    # TIME PID COMM SADDR SPORT DADDR DPORT: the time, the pid and the ephemeral port differ run to run
    cols = [[ln.split()[i] for i in (2, 3, 5, 6)] for ln in ours if " python3.11 " in ln]
    assert cols == [["python3.11", "127.0.0.1", "127.0.0.1", "45681"]] * 2 + [["python3.11", "::1", "::1", "45681"]], ours
    assert cols == [[ln.split()[i] for i in (2, 3, 5, 6)] for ln in theirs if " python3.11 " in ln]
    assert ours[:2] == theirs[:2]


@kernel
def test_tcplife_vm(connect):
    """tcplife.bt: kprobe:tcp_set_state, TCP_* enum constants from BTF, AF_INET, the sockets' bytes."""
    ours, theirs = both("tcplife.bt", connect)
    # PID COMM LADDR LPORT RADDR RPORT TX_KB RX_KB MS: ours, of the six sockets, without pid, ports, ms
    def rows(out: list[str]) -> list[list[str]]:
        return sorted([ln.split()[i] for i in (1, 2, 4, 6, 7)] for ln in out if " python3.11 " in ln)
    assert len(rows(ours)) == 6 and {r[1] for r in rows(ours)} == {"127.0.0.1", "::1"}, ours
    assert rows(ours) == rows(theirs)
    assert ours[0] == theirs[0]


@kernel
def test_vfscount_vm():
    """vfscount.bt: a kprobe wildcard over vfs_*, @[func] counts; dd's 100 reads and writes are in both."""
    ours, theirs = both("vfscount.bt", "/usr/bin/dd if=/dev/zero of=/dev/null bs=1000 count=100")
    for out in (ours, theirs):
        counts = {ln.split("]")[0][2:]: int(ln.split()[-1]) for ln in out if ln.startswith("@[")}
        assert counts.get("vfs_read", 0) >= 100 and counts.get("vfs_write", 0) >= 100, out
    assert ours[0] == theirs[0]
