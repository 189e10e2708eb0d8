"""bpftrace 0.17's own tools (Debian's bpftrace package installs them as /usr/sbin/*.bt),
as shipped, through pycore trace on the host: every one is resolved and checked against
this kernel (--dry-run), and those that the host can run and that have a deterministic
workload run side by side with bpftrace.

A tool the host cannot take fails with one line naming the reason, listed below with
what bpftrace 0.17 does with the same tool here.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import require_root, stop

TOOLS = Path("/usr/sbin")
PYCORE = [sys.executable, "-m", "pycore", "trace"]
BPFTRACE = shutil.which("bpftrace")

# tool -> the one-line error pycore gives on this host (and what bpftrace 0.17 does here)
HOST_REFUSALS = {
    # kprobe wildcards are listed from the kprobe PMU's functions: the host has no kprobes
    # (the kernel VMs run them); bpftrace lists available_filter_functions
    "dcsnoop.bt": "kprobe:lookup_fast.constprop.*: matches no probe on this system",
    "vfscount.bt": "kprobe:vfs_*: matches no probe on this system",
    "vfsstat.bt": "kprobe:vfs_read*: matches no probe on this system",
    # bpftrace: "Failed to resolve kernel symbol: avenrun"
    "loads.bt": "no kernel symbol 'avenrun'",
    # a kernel-internal macro (include/linux/sched.h): bpftrace fails too, on its headers
    "runqlat.bt": "unknown identifier 'TASK_RUNNING'",
    # the script's own struct cfs_rq: bpftrace takes BTF's too, with the same error
    "runqlen.bt": "struct cfs_rq has no field 'nr_running'",
    # libcrypto's static functions are not in the stripped library: bpftrace attaches
    # nothing for them and says nothing
    "ssllatency.bt": "no function 'rsa_ossl_public_encrypt' in",
    "sslsnoop.bt": "no function 'rsa_ossl_public_encrypt' in",
    # glibc 2.34 moved pthread_create into libc: bpftrace attaches BEGIN alone and says nothing
    "threadsnoop.bt": "no function 'pthread_create' in /lib/x86_64-linux-gnu/libpthread.so.0",
}
SHIPPED = sorted(p.name for p in TOOLS.glob("*.bt"))


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def test_bpftrace_ships_its_tools() -> None:
    """The package this file reads (./dev.sh installs bpftrace): not an empty parametrization."""
    assert len(SHIPPED) >= 30, SHIPPED
    assert set(HOST_REFUSALS) <= set(SHIPPED)


@pytest.mark.parametrize("tool", SHIPPED)
def test_tool_dry_run(tool: str) -> None:
    r = subprocess.run([*PYCORE, "--dry-run", str(TOOLS / tool)], capture_output=True, text=True, timeout=120)
    why = HOST_REFUSALS.get(tool)
    if why is None:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip(), "the plan lists the probes"
    else:
        assert r.returncode == 2, r.stdout
        first = r.stderr.splitlines()[0]
        assert first.startswith(f"{TOOLS / tool}:") and why in first, r.stderr
        assert "Traceback" not in r.stderr


def _side_by_side(tool: str, workload: list[str], settle: float = 1.5) -> tuple[list[str], list[str]]:
    """Both tracers running the tool at once, the workload run once both are attached; their stdout lines."""
    procs = [subprocess.Popen(argv + [str(TOOLS / tool)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in (PYCORE, [BPFTRACE])]
    try:
        time.sleep(settle)
        for p in procs:
            assert p.poll() is None, p.stderr.read()
        subprocess.run(workload, check=True, timeout=60)
        time.sleep(0.5)
    finally:
        outs = [stop(p, signal.SIGINT)[0].splitlines() for p in procs]
    return outs[0], [ln for ln in outs[1] if not ln.startswith("Attaching ")]


NANOSLEEP = textwrap.dedent("""
    import ctypes
    class timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
    libc = ctypes.CDLL(None)
    for s, ns in ((0, 250_000_000), (1, 5_000_000)):
        libc.syscall(35, ctypes.byref(timespec(s, ns)), None)     # nanosleep(2) itself, not clock_nanosleep
""")


def test_naptime_side_by_side() -> None:
    """naptime.bt: a syscall tracepoint's struct pointer (args->rqtp->tv_sec), read from user memory."""
    assert BPFTRACE
    ours, theirs = _side_by_side("naptime.bt", [sys.executable, "-c", NANOSLEEP])
    comm = Path(sys.executable).name[:15]
    assert [ln.split()[4:] for ln in ours[2:] if ln.strip()] == [[comm, "0.250"], [comm, "1.005"]], ours
    # the time of day may tick between the two tracers' lines: compare from the PPID column on
    assert [ln.split()[1:] for ln in ours] == [ln.split()[1:] for ln in theirs]


GETADDRINFO = "import socket; socket.getaddrinfo('localhost', 80); socket.gethostbyname('localhost')"


def test_gethostlatency_side_by_side() -> None:
    """gethostlatency.bt: uprobe:libc:..., the library named as bpftrace names it (the linker's cache)."""
    assert BPFTRACE
    ours, theirs = _side_by_side("gethostlatency.bt", [sys.executable, "-c", GETADDRINFO])
    # TIME PID COMM LATms HOST: the time and the latency differ run to run
    mine = [(ln.split()[1], ln.split()[2], ln.split()[4]) for ln in ours[2:] if ln.strip()]
    comm = Path(sys.executable).name[:15]
    assert [m[1:] for m in mine] == [(comm, "localhost"), (comm, "localhost")], ours
    assert mine == [(ln.split()[1], ln.split()[2], ln.split()[4]) for ln in theirs[2:] if ln.strip()]
    assert ours[:2] == theirs[:2]
