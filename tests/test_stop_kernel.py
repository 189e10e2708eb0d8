"""Ctrl-C is prompt whatever the load, in Debian's kernels under QEMU (tests/vm; issue 23, item 6).

What tests/test_stop.py checks on the host, where the probes kprobe/kfunc need run: the kernel lab's
lock-contention exercise 4 as written (a printf per contended lock) took 18 to 48 s to exit after
SIGINT in the 6.12 VM, printing thousands of lines more, and ``pycore run print-args`` outlived 30 s.
Under TCG everything is slow, which is the point: each run must still exit within 2 s of SIGINT,
20 runs out of 20, with none of its programs or links left in the kernel.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.test_stop import PYCORE, assert_released, interrupt
from tests.test_tools_kernel import tmpfs

pytestmark = pytest.mark.kernel

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


def test_lock_contention_exercise4(tmp_path, background):
    with tmpfs(tmp_path / "mnt") as mnt:
        (mnt / "work").mkdir()
        # niced: 8 threads at the tracer's priority on the guest's 2 CPUs starved it and the test's own
        # wait (the exit's Python and kernel tail, 0.2 s unloaded, took up to 1.2 s); they contend as much
        background(["nice", "-n", "19", build(tmp_path, "renames", RENAMES_C, "-pthread"), str(mnt / "work")])
        (tmp_path / "lock.bt").write_text(EXERCISE4)
        runs([*PYCORE, "trace", "-v", str(tmp_path / "lock.bt"), "0"], 20)   # -v: the end's steps timed


def test_kprobe_printf_flood(tmp_path):
    """A printf per vfs_read() of a loop of 1-byte reads (the loop stopped around the attach and
    the detach: see interrupt())."""
    # 5 runs a kernel: the host's test_stop.py holds the 20-of-20 flood (each run costs ~10 s under TCG)
    runs([*PYCORE, "trace", "-v", "-e", 'kprobe:vfs_read { printf("%d %s\\n", pid, comm); }'], 5,
         load=[build(tmp_path, "reads", READS_C)])


def test_print_args_flood(tmp_path):
    """pycore run print-args (fentry) on vfs_read, called by a loop of 1-byte reads: it outlived 30 s."""
    runs([*PYCORE, "run", "print-args", "vfs_read"], 5, load=[build(tmp_path, "reads", READS_C)])
