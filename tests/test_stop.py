"""Ctrl-C is prompt whatever the load, and the end of ``-c``/``-p`` is seen at once (issue 23, items 6, 8).

A tracer stopped by SIGINT while its probes flood the ring buffer detaches them
first, prints what the ring holds (buffered, not a flush per line), then its maps,
and exits within 2 s; after Ctrl-C it spends at most ringbuf.DRAIN_SECONDS on the ring,
even when its output goes to a slow reader (a serial console, a slow ssh link).
Which programs and links a tracer holds is read from its /proc/PID/fdinfo (names
are not unique: other tracers run beside the tests); bpftool then shows none of
them once it has exited. The same under the 6.12 kernel VM with kprobes and
fentry: tests/test_stop_kernel.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import bpftool_show, require_root, wait_ready

PYCORE = [sys.executable, "-m", "pycore"]
FLOOD = 'tracepoint:raw_syscalls:sys_enter { printf("%d %s\\n", pid, comm); }'


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


# The niceness the timing promises here assume of the tracer and of the test that measures it (its
# reader thread, its signals, its clock reads): not below the machine's other work. A suite run under
# `nice` (as the project runs it: niceness 10) beside a CPU load at the default 0 (stress-ng --cpu 2 on
# 2 cores) gave the tracer a tenth of a hog's share: -p's end seen after 83 and 183 ms, Ctrl-C past
# its 2 s, all in waiting for a CPU, not in the tracer. What each test proves is unchanged: a tick-bound
# end is still up to 100 ms late, a tracer that prints the whole ring after Ctrl-C still takes seconds.
PROMISED_NICE = -5


@pytest.fixture(autouse=True)
def _promised_priority() -> Iterator[None]:
    """This test's thread, and so every process and thread it starts (the tracer, the target, the
    busy loop, the reader), at PROMISED_NICE for the test; the niceness before, after it."""
    before = os.getpriority(os.PRIO_PROCESS, 0)      # 0: the calling thread (Linux)
    os.setpriority(os.PRIO_PROCESS, 0, PROMISED_NICE)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def bpf_ids(pid: int) -> tuple[set[int], set[int]]:
    """(program ids, link ids) of the BPF fds process ``pid`` holds now."""
    progs: set[int] = set()
    links: set[int] = set()
    d = Path(f"/proc/{pid}/fdinfo")
    for entry in d.iterdir() if d.exists() else ():
        try:
            text = entry.read_text()
        except OSError:
            continue
        if m := re.search(r"(?m)^prog_id:\s+(\d+)", text):
            progs.add(int(m.group(1)))
        if m := re.search(r"(?m)^link_id:\s+(\d+)", text):
            links.add(int(m.group(1)))
    return progs, links


def assert_released(progs: set[int], links: set[int]) -> None:
    """None of these programs and links is left in the kernel (freed after an RCU grace period: waited)."""
    deadline = time.monotonic() + 3
    while True:
        left_p = progs & {p["id"] for p in bpftool_show("prog")}
        left_l = links & {link["id"] for link in bpftool_show("link")}
        if not left_p and not left_l:
            return
        assert time.monotonic() < deadline, f"left in the kernel: programs {left_p}, links {left_l}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def loops(tmp_path_factory) -> dict[str, str]:
    """Busy loops making a system call each turn: getppid(), and open/close of /dev/null."""
    d = tmp_path_factory.mktemp("loops")
    out = {}
    for name, body in (("getppid", "syscall(SYS_getppid);"),
                       ("opens", 'int fd = open("/dev/null", O_RDONLY); if (fd >= 0) close(fd);')):
        src = d / f"{name}.c"
        src.write_text("#include <fcntl.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n"
                       f"int main(void) {{ for (;;) {{ {body} }} }}\n")
        subprocess.run(["gcc", "-O2", "-o", str(d / name), str(src)], check=True)
        out[name] = str(d / name)
    return out


class Reader:
    """Reads a process's stdout in a thread, at most ``rate`` bytes a second while the process runs."""

    def __init__(self, fd: int, proc: subprocess.Popen, rate: int | None = None) -> None:
        self.fd, self.proc, self.rate = fd, proc, rate
        self.lines = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            slow = self.rate is not None and self.proc.poll() is None
            chunk = os.read(self.fd, 1024 if slow else 1 << 16)
            if not chunk:
                return
            self.lines += chunk.count(b"\n")
            if slow:
                time.sleep(len(chunk) / self.rate)

    def wait_lines(self, n: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.lines < n:
            assert self.proc.poll() is None, f"exited before printing {n} lines: {self.proc.stderr.read()}"
            assert time.monotonic() < deadline, f"only {self.lines} lines in {timeout} s"
            time.sleep(0.02)

    def close(self) -> None:
        self.thread.join(30)
        os.close(self.fd)


def interrupt(argv: list[str], *, rate: int | None = None, during=None, lines: int = 2000,
              start: float = 30, load: list[str] | None = None) -> tuple[float, str, set[int], set[int]]:
    """Run ``argv`` until it has printed ``lines`` lines (within ``start`` seconds) and 0.3 s more, SIGINT
    it; (seconds from SIGINT to its exit, stderr, its programs, its links). ``during(proc, sent)`` runs
    between SIGINT and the exit. ``load``, a command run from the attach to the SIGINT (then stopped
    with SIGSTOP): for kprobe/fentry on a function it calls, whose text patching while another CPU
    runs it crashed the 6.12 guest under QEMU's TCG (an oops at vfs_read+0x5, RIP 0)."""
    r, w = os.pipe()
    proc = subprocess.Popen(argv, stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    reader = Reader(r, proc, rate)
    loader = None
    try:
        if load is not None:
            deadline = time.monotonic() + start
            while not bpf_ids(proc.pid)[1]:
                assert proc.poll() is None and time.monotonic() < deadline, "not attached"
                time.sleep(0.05)
            time.sleep(0.5)                 # the last link made is not yet the last attached
            loader = subprocess.Popen(load, stdout=subprocess.DEVNULL)
        reader.wait_lines(lines, start)
        time.sleep(0.3)
        progs, links = bpf_ids(proc.pid)
        assert progs and links, "no BPF program or link in the tracer's fds"
        if loader is not None:
            loader.send_signal(signal.SIGSTOP)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        if during is not None:
            during(proc, sent)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"{argv[2:]} still running 30 s after SIGINT")
        took = time.monotonic() - sent
        err = proc.stderr.read()
    finally:
        for p in (proc, loader):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        reader.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    return took, err, progs, links


# exercises 1-4 of the lab's lock-contention script (the kernel-tracing seed), with exercise 4
# printing the kind of each contended lock (include/trace/events/lock.h's flags); $1 is the threshold
EXERCISE4 = """\
tracepoint:lock:contention_begin
{
  @[tid, args.lock_addr] = nsecs;
  @flags[tid, args.lock_addr] = args.flags;
}

tracepoint:lock:contention_end
/@[tid, args.lock_addr] != 0/
{
  $lock_duration = nsecs - @[tid, args.lock_addr];
  if ($lock_duration > $1) {
    $f = @flags[tid, args.lock_addr];
    printf("%s lock %p blocked %lld ns\\n", $f & 0x20 ? "mutex" : ($f & 0x1 ? "spin" : ($f & 0x2 ? "read" :
           ($f & 0x4 ? "write" : "other"))), args.lock_addr, $lock_duration);
    @long_block_times[args.lock_addr] = hist($lock_duration);
  }
  delete(@[tid, args.lock_addr]);
  delete(@flags[tid, args.lock_addr]);
}

END
{
  clear(@);
  clear(@flags);
}
"""

# 8 threads renaming files in one directory, for ever: they contend on its inode's lock
RENAMES_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
static const char *dir;
static void *work(void *arg) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/f%ld", dir, (long)arg);
    snprintf(b, sizeof b, "%s/g%ld", dir, (long)arg);
    for (;;) { int fd = open(a, O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); rename(a, b); }
    return NULL;
}
int main(int argc, char **argv) {
    pthread_t t[8];
    dir = argv[1];
    for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, (void *)i);
    pthread_join(t[0], NULL);
    return 0;
}
"""
READS_C = r"""
#include <fcntl.h>
#include <unistd.h>
int main(void) { char c; int fd = open("/dev/zero", O_RDONLY); for (;;) read(fd, &c, 1); }
"""


def build(tmp_path, name: str, source: str, *flags: str) -> str:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-O2", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c"), *flags], check=True)
    return str(tmp_path / name)


@pytest.fixture
def background():
    procs: list[subprocess.Popen] = []
    yield lambda argv: procs.append(subprocess.Popen(argv))
    for p in procs:
        p.kill()
        p.wait()


def runs(argv: list[str], n: int, load: list[str] | None = None) -> None:
    """``n`` runs of ``argv`` stopped by SIGINT under the load: each exits within 2 s, leaving nothing."""
    took, notes = [], []
    for _ in range(n):
        seconds, err, progs, links = interrupt(argv, lines=200, start=120, load=load)
        took.append(seconds)
        notes += [line for line in err.splitlines() if line.startswith("pycore trace: ended")]
        assert_released(progs, links)
    print("seconds from SIGINT to exit:", " ".join(f"{t:.2f}" for t in took), *notes, sep="\n")
    assert max(took) < 2.0, " ".join(f"{t:.2f}" for t in took) + "\n" + "\n".join(notes)


@pytest.fixture
def busy(request, loops):
    """A busy loop running for the test (``busy("getppid")``)."""
    procs: list[subprocess.Popen] = []

    def start(name: str) -> subprocess.Popen:
        procs.append(subprocess.Popen([loops[name]]))
        return procs[-1]

    yield start
    for p in procs:
        p.kill()
        p.wait()


def detached_while_running(proc: subprocess.Popen, sent: float) -> None:
    """The tracer gives up its links while it still prints what the ring held (it prints for up to
    ringbuf.DRAIN_SECONDS to the slow reader): its probes were detached first."""
    while time.monotonic() < sent + 0.9:
        progs, links = bpf_ids(proc.pid)
        assert proc.poll() is None, "exited before it was seen detached"
        if not links:
            assert progs, "programs closed as soon as links: not in the drain"
            return
        time.sleep(0.02)
    pytest.fail("probes still attached 0.9 s after SIGINT")


def test_trace_ctrl_c_under_printf_flood(busy):
    """20 runs out of 20: a printf per system call of every process, a busy loop making them; each
    run exits within 2 s of SIGINT, and its programs and links are gone from the kernel."""
    busy("getppid")
    took = []
    for _ in range(20):
        seconds, _, progs, links = interrupt([*PYCORE, "trace", "-e", FLOOD])
        took.append(seconds)
        assert_released(progs, links)
    assert max(took) < 2.0, [f"{t:.2f}" for t in took]


def test_lock_contention_exercise4_20_of_20(tmp_path, background):
    """The kernel lab's lock-contention exercise 4 (a printf per contended lock, 8 threads renaming
    files in one directory): 20 runs out of 20 exit within 2 s of SIGINT, leaving nothing. The VMs run
    it 10 times a kernel (tests/test_stop_kernel.py), where a run costs 8-18 s."""
    (tmp_path / "work").mkdir()
    background(["nice", "-n", "19", build(tmp_path, "renames", RENAMES_C, "-pthread"), str(tmp_path / "work")])
    (tmp_path / "lock.bt").write_text(EXERCISE4)
    runs([*PYCORE, "trace", "-v", str(tmp_path / "lock.bt"), "0"], 20)


def test_trace_ctrl_c_slow_reader(busy):
    """Output read at 20 KB/s: the probes are detached at Ctrl-C, what the ring holds is printed for
    ringbuf.DRAIN_SECONDS, the rest counted on stderr; exit within 2 s (it took ~10 s: two batches of 8,192
    lines written, the probes attached all along)."""
    busy("getppid")
    for _ in range(3):
        seconds, err, progs, links = interrupt([*PYCORE, "trace", "-e", FLOOD], rate=20_000,
                                               during=detached_while_running)
        assert seconds < 2.0, f"{seconds:.2f} s"
        assert re.search(r"(?m)^pycore trace: \d+ events in the buffer at Ctrl-C not printed$", err), err
        assert_released(progs, links)


def test_trace_second_ctrl_c_skips_the_ring(busy):
    """A second Ctrl-C, while the ring is printed to the slow reader, skips the rest at once."""
    busy("getppid")

    def again(proc: subprocess.Popen, sent: float) -> None:
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)

    seconds, err, progs, links = interrupt([*PYCORE, "trace", "-e", FLOOD], rate=20_000, during=again)
    assert seconds < 0.45, f"{seconds:.2f} s (the ring is printed until 0.5 s after one Ctrl-C)"
    assert re.search(r"(?m)^pycore trace: \d+ events in the buffer at Ctrl-C not printed$", err), err
    assert_released(progs, links)


def test_run_ctrl_c_slow_reader(busy):
    """pycore run, a tool's events read at 20 KB/s: it drained the ring with the probes attached, so
    that a consumer slower than the probes never ended; now it detaches first and exits within 2 s."""
    busy("opens")
    for _ in range(3):
        seconds, err, progs, links = interrupt([*PYCORE, "run", "fget-crack", "--pattern", ""], rate=20_000,
                                               during=detached_while_running)
        assert seconds < 2.0, f"{seconds:.2f} s"
        assert re.search(r"(?m)^pycore: \d+ events in the buffer at Ctrl-C not printed$", err), err
        assert_released(progs, links)


# -- item 8: the end of -c and -p seen at once ----------------------------------------------------

EXITER_C = r"""
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
/* exiter [wait]: with an argument, write R (ready: SIGUSR1 handled, and held until it waits) and wait
   for SIGUSR1; then print CLOCK_MONOTONIC's ns (the clock of bpftrace's nsecs) and exit */
static void on_usr1(int sig) { (void)sig; }
int main(int argc, char **argv) {
    if (argc > 1) {
        sigset_t usr1, old;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, &old);
        signal(SIGUSR1, on_usr1);
        if (write(1, "R", 1) != 1) return 1;
        sigsuspend(&old);
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("exit %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    fflush(stdout);
    return 0;
}
"""
# no probe besides END, so that nothing is detached (a tracepoint's detach waits ~80 ms for an RCU
# grace period): END's nsecs less the target's exit time is how long the end took to be seen
END_ONLY = 'END { printf("end %lld\\n", nsecs); }'


@pytest.fixture(scope="module")
def exiter(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("exiter")
    (d / "exiter.c").write_text(EXITER_C)
    subprocess.run(["gcc", "-O2", "-o", str(d / "exiter"), str(d / "exiter.c")], check=True)
    return str(d / "exiter")


def seen_after(out: str) -> float:
    """Milliseconds from the target's exit to END, from the two lines the run printed."""
    exited = int(re.search(r"(?m)^exit (\d+)$", out).group(1))
    end = int(re.search(r"(?m)^end (\d+)$", out).group(1))
    assert end > exited, out
    return (end - exited) / 1e6


def test_cmd_end_seen_at_once(exiter):
    """-c: the command exits at once; its end was seen at the next 100 ms tick of the loop (~99 ms
    each time: the loop starts its wait as the command starts), now through its pidfd."""
    waits = []
    for _ in range(3):
        r = subprocess.run([*PYCORE, "trace", "-q", "-e", END_ONLY, "-c", exiter], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        waits.append(seen_after(r.stdout))
    assert min(waits) < 50, [f"{w:.1f} ms" for w in waits]


def test_pid_end_seen_at_once(exiter):
    """-p: the process exits when told to, at a time unrelated to the loop's tick (up to 100 ms
    before: 50 on average); the worst of five runs now well under 50 ms."""
    waits = []
    for _ in range(5):
        target = subprocess.Popen([exiter, "wait"], stdout=subprocess.PIPE, text=True)
        try:
            wait_ready(target)        # a SIGUSR1 before its handler would kill it
            tracer = subprocess.Popen([*PYCORE, "trace", "-e", END_ONLY, "-p", str(target.pid)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert tracer.stderr.readline().startswith("Attaching"), tracer.stderr.read()
            time.sleep(0.15)          # in its loop by now, at some phase of its tick
            target.send_signal(signal.SIGUSR1)
            exited = target.stdout.read()
            target.wait(10)
            out, err = tracer.communicate(timeout=30)
        finally:
            for p in (target, locals().get("tracer")):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        assert tracer.returncode == 0, err
        waits.append(seen_after(exited + out))
    assert max(waits) < 50, [f"{w:.1f} ms" for w in waits]
