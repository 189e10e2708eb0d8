"""A script traced over a workload on two CPUs, the same way for pycore trace and the bpftrace it is
compared with (tests of per-CPU values, loops over per-CPU maps and block scoping in a real probe).

The workload starts stopped (SIGSTOP); once the tracer is attached it calls getppid() 3 times on
CPU 0, 5 on CPU 1 and 2 on CPU 0, and ends; then the tracer gets SIGINT.  "Attached" is seen, not
guessed: the script gets one more probe, ``sys_enter_getpgid`` of this test's own process printing
``ready``, and the test calls getpgid() until that line comes (bpftrace 0.23.2 says "Attaching"
before it attaches, and a fixed wait for it was a guess about the machine's load).  The ``ready``
lines are left out of what is returned.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

WORKLOAD = ("import os, signal; os.kill(os.getpid(), signal.SIGSTOP)\n"
            "for cpu, n in ((0, 3), (1, 5), (0, 2)):\n"
            "    os.sched_setaffinity(0, {cpu})\n"
            "    for _ in range(n):\n"
            "        os.getppid()\n")

_READY = ' tracepoint:syscalls:sys_enter_getpgid /pid == $2/ { printf("ready\\n"); }'


def traced(argv: list[str], script: str, *, timeout: float = 60, **popen) -> str:
    """``script`` (its $1 is the workload's pid) traced over :data:`WORKLOAD` by the tracer ``argv``
    (pycore trace or a bpftrace, given ``-B line``); its stdout and stderr from the first ``ready`` line
    on (so not "Attaching" and the warnings before it), without ``ready`` lines and bpftrace's memlock
    warning."""
    w = subprocess.Popen([sys.executable, "-c", WORKLOAD])
    try:
        deadline = time.monotonic() + 10
        while open(f"/proc/{w.pid}/stat").read().split(") ")[1][0] != "T":
            assert time.monotonic() < deadline, "the workload never stopped itself"
            time.sleep(0.01)
        t = subprocess.Popen([*argv, "-B", "line", "-e", script + _READY, str(w.pid), str(os.getpid())],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)
        try:
            raw, deadline = b"", time.monotonic() + timeout
            while b"ready\n" not in raw:
                assert time.monotonic() < deadline, f"no ready line in {timeout} s: {raw!r}"
                os.getpgid(0)                           # the ready probe's event, once attached
                if select.select([t.stdout], [], [], 0.05)[0]:
                    chunk = os.read(t.stdout.fileno(), 65536)
                    assert chunk, f"the tracer ended before it was attached: {raw!r}"
                    raw += chunk
            buf = raw.decode()
            os.kill(w.pid, signal.SIGCONT)
            w.wait(timeout=30)
            time.sleep(0.5)                             # the workload's last events reach the tracer
            t.send_signal(signal.SIGINT)
            out = buf.split("ready\n", 1)[1] + t.communicate(timeout=30)[0].decode()   # what came once attached
        finally:
            if t.poll() is None:
                t.kill()
                t.wait()
        assert t.returncode == 0, out
        return "".join(line for line in out.splitlines(keepends=True)
                       if line != "ready\n" and "RLIMIT_MEMLOCK" not in line)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
