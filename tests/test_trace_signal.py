"""signal() (bpftrace's) and signal_thread() (0.25): bpftrace 0.23.2's checks in its words, side by side
with it, and the signals really sent, to the process or to the thread the probe fired in."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from tests import bpftrace023
from tests.conftest import require_root

PYCORE = [sys.executable, "-m", "pycore", "trace", "--unsafe"]


def pycore(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*PYCORE, *args, "-e", script], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("script", [
    'BEGIN { signal("SIGUSR1"); }',
    'END { signal(9); }',
    'interval:s:1 { signal(10); }',
    'iter:task { signal(9); }',
    'software:cpu-clock:1000 { signal(9); }',
    'uprobe:/bin/bash:readline { signal("SIGFOO"); }',
    'uprobe:/bin/bash:readline { signal("STOP"); }',
    'uprobe:/bin/bash:readline { signal(65); }',
    'uprobe:/bin/bash:readline { signal(0); }',
    'uprobe:/bin/bash:readline { signal(1, 2); }',
    'uprobe:/bin/bash:readline { signal(); }',
    'uprobe:/bin/bash:readline { signal(comm); }',
])
def test_refused_as_023(script: str) -> None:
    """Each refused by both, pycore's error the same words as 0.23.2's."""
    require_root()
    theirs = bpftrace023.run(script, "--unsafe", "--dry-run")
    assert theirs.returncode != 0, theirs
    said = re.search(r"ERROR: (.*)", theirs.stderr).group(1)
    ours = pycore(script, "--dry-run")
    assert ours.returncode != 0 and "Traceback" not in ours.stderr
    assert f"error: {said}" in ours.stderr, (said, ours.stderr)


@pytest.mark.parametrize("script", ['uprobe:/bin/bash:readline { signal("kill"); }',
                                    'uprobe:/bin/bash:readline { $s = 10; signal($s); }',
                                    'uprobe:/bin/bash:readline { signal(64); }',
                                    'rawtracepoint:sched_switch { signal("USR1"); }'])
def test_accepted_as_023(script: str) -> None:
    require_root()
    assert bpftrace023.run(script, "--unsafe", "--dry-run").returncode == 0
    res = pycore(script, "--dry-run")
    assert res.returncode == 0, res.stderr


def test_signal_ends_the_command_as_023() -> None:
    """signal("SIGTERM") in the -c command's clock_nanosleep: sleep 5 ends at once, under both."""
    require_root()
    script = 'uprobe:libc:clock_nanosleep { signal("SIGTERM"); printf("sent\\n"); }'
    t0 = time.monotonic()
    theirs = bpftrace023.run(script, "--unsafe", "-q", "-c", "/bin/sleep 5", timeout=30)
    t1 = time.monotonic()
    ours = pycore(script, "-q", "-c", "/bin/sleep 5", timeout=30)
    t2 = time.monotonic()
    assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert ours.stdout.split("\n", 1)[0] == theirs.stdout.split("\n", 1)[0] == "sent"
    assert t1 - t0 < 4.5 and t2 - t1 < 4.5, (t1 - t0, t2 - t1)      # not the 5 s of the sleep


THREADS = textwrap.dedent(r"""
    #include <pthread.h>
    #include <signal.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/syscall.h>
    #include <unistd.h>

    static volatile long got, worker_tid;
    static int block;
    static void on_usr1(int s) { (void)s; got = syscall(SYS_gettid); }
    __attribute__((noinline)) void target(void) { __asm__ volatile(""); }
    static void *worker(void *a)
    {
        (void)a;
        if (block) {                /* this thread never takes SIGUSR1 */
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGUSR1);
            pthread_sigmask(SIG_BLOCK, &set, NULL);
        }
        worker_tid = syscall(SYS_gettid);
        for (int i = 0; i < 1500 && !got; i++) { target(); usleep(1000); }
        return NULL;
    }
    int main(int argc, char **argv)
    {
        pthread_t t;
        block = argc > 1 && !strcmp(argv[1], "block");
        signal(SIGUSR1, on_usr1);
        pthread_create(&t, NULL, worker, NULL);
        for (int i = 0; i < 1500 && !got; i++) usleep(1000);    /* main runs too: it can take the signal */
        pthread_join(t, NULL);
        printf("%s\n", !got ? "none" : got == worker_tid ? "worker" : "main");
        return 0;
    }
""")


@pytest.fixture(scope="module")
def threads(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("signal")
    (d / "threads.c").write_text(THREADS)
    exe = str(d / "threads")
    subprocess.run([shutil.which("gcc") or "cc", "-O1", "-pthread", str(d / "threads.c"), "-o", exe], check=True)
    return exe


@pytest.mark.parametrize("call, mode, who", [
    ("signal_thread", "", "worker"),     # to the thread that called target()
    ("signal_thread", "block", "none"),  # that thread blocks it: pending there, never taken
    ("signal", "block", "main"),         # to the process: a thread that takes it (main)
])
def test_signal_reaches_the_thread_or_the_process(threads: str, call: str, mode: str, who: str) -> None:
    require_root()
    res = pycore(f'uprobe:{threads}:target {{ {call}("SIGUSR1"); }}', "-q", "-c", f"{threads} {mode}".strip(),
                 timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == who, res.stdout
