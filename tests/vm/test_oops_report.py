"""A kernel oops or panic in a VM fails the run and names the test that was running (issue 29).

Boots Debian's 6.12 under QEMU (about 20 s) and crashes it on purpose from a test
(tests/vm/guest_crash.py writes "c" to /proc/sysrq-trigger): the harness must fail the run, say
which test was running and keep the kernel's report, with no retry.
"""

from __future__ import annotations

from pathlib import Path

from .harness import fetch, oopses, precompile, run_kernel

# An oops and the panic it led to, as 6.12 printed them under TCG (console.log, trimmed), with the
# test marks the guest's conftest writes to /dev/kmsg.
CONSOLE = """\
[    7.391020] pycore-test: tests/test_stop_kernel.py::test_kprobe_printf_flood
[    7.400111] pycore-test: tests/test_stop_kernel.py::test_lock_contention_exercise4
[   18.587636] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[   18.588000] CPU: 1 UID: 0 PID: 353 Comm: renames Not tainted 6.12.117+deb12-amd64 #1  Debian 6.12.117-1~deb12u1
[   18.588340] RIP: 0010:rwsem_down_write_slowpath+0x32f/0x640
[   18.589957] RIP: 0033:0x7f7474237090
[   18.590807] RIP: 0010:rwsem_down_write_slowpath+0x32f/0x640
[   18.590989] Kernel panic - not syncing: Fatal exception in interrupt
[   19.000000] pycore-test: tests/test_stop_kernel.py::test_print_args_flood
[   19.100000] ------------[ cut here ]------------
[   19.100001] WARNING: CPU: 0 PID: 1 at kernel/bpf/core.c:123 f+0x1/0x2
"""


def test_oopses_names_the_running_test():
    reports = oopses(CONSOLE)
    assert len(reports) == 2                        # the oops and its panic are one report
    assert reports[0].splitlines()[0] == "running: tests/test_stop_kernel.py::test_lock_contention_exercise4"
    assert "Oops: int3" in reports[0].splitlines()[1] and "Kernel panic" in reports[0]
    assert reports[1].splitlines()[:2] == ["running: tests/test_stop_kernel.py::test_print_args_flood",
                                           "[   19.100001] WARNING: CPU: 0 PID: 1 at kernel/bpf/core.c:123 f+0x1/0x2"]
    assert oopses(CONSOLE.split("[   18.587636]")[0]) == []


def test_a_kernel_panic_fails_the_vm_run(tmp_path: Path):
    precompile()
    result = run_kernel(fetch("6.12"), tmp_path / "out", ["tests/vm/guest_crash.py"], timeout=600)
    assert not result.ok
    assert result.exitcode is None                  # the guest died in the test
    assert "tests/vm/guest_crash.py::test_crash ran" in result.error, result.error
    assert "sysrq triggered crash" in result.oopses[0], result.oopses


def test_failures_are_written_as_they_happen(tmp_path: Path):
    """A guest run cut short by the harness's timeout never prints pytest's summary: each failure is
    written to PYCORE_VM_FAILURES when it happens (tests/conftest.py), and harness.explain prints it."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    test = repo / "tests" / "vm" / f"_failing_{os.getpid()}_test.py"
    test.write_text("def test_fails():\n    assert 6 * 7 == 41, 'the answer moved'\n\ndef test_passes():\n    pass\n")
    out = tmp_path / "failures.log"
    try:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        str(test)], cwd=repo, env=dict(os.environ, PYCORE_VM_FAILURES=str(out)),
                       capture_output=True, timeout=120)
    finally:
        test.unlink()
    text = out.read_text()
    assert f"=== tests/vm/{test.name}::test_fails (call) ===" in text
    assert "the answer moved" in text and "test_passes" not in text


def test_an_interrupted_runner_leaves_no_vm_behind(tmp_path: Path):
    """vng starts a session of its own, so a signal to the runner never reaches QEMU: the runner
    stops its VMs itself when it is interrupted (SIGTERM, as ./dev.sh test sends on Ctrl-C). Its two
    tests go to two VMs (--min-share 0) that pull them from the kernel's queue: each VM is told the
    queue and takes a test from it (a share once never reached the guest, and each VM ran every test)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    runner = subprocess.Popen([sys.executable, "-m", "tests.vm.run", "--kernel", "6.1", "--out", str(out),
                               "--min-share", "0", "--", "tests/vm/guest_sleep.py"], cwd=repo, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def qemus() -> list[int]:
        """The QEMUs whose command line names ``out`` (their --rwdir)."""
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"qemu-system-x86_64") and any(str(out).encode() in a for a in argv):
                found.append(int(proc.name))
        return found

    try:
        deadline = time.monotonic() + 300
        while len(list(out.glob("*/started"))) < 2:
            assert runner.poll() is None and time.monotonic() < deadline, runner.stdout.read() if runner.stdout else ""
            time.sleep(0.5)
        assert len(qemus()) == 2, "the VMs are not running"
        told = sorted(g.read_text().split("PYCORE_VM_QUEUE=", 1)[1].split()[:3] for g in out.glob("*/guest.sh"))
        assert [t[0] for t in told] == [str(out / "queue-6.1")] * 2 and [t[2] for t in told] == ["PYCORE_VM_SERIES=6.1"] * 2
        # the guests' pytests take the tests from the queue (tests/conftest.py) and start them
        from . import queue
        while sorted(queue.claimed(out / "queue-6.1").values()) != sorted(run.name for run in out.glob("6.1*")) \
                or len(list(out.glob("6.1*/current"))) < 2:
            assert runner.poll() is None and time.monotonic() < deadline, queue.claimed(out / "queue-6.1")
            time.sleep(0.5)
        runner.send_signal(signal.SIGTERM)
        output, _ = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.terminate()
            runner.wait(60)
        for pid in qemus():     # what the runner left (the test failed): not left to the next test
            os.kill(pid, signal.SIGKILL)
    assert runner.returncode == 128 + signal.SIGTERM, output
    assert "interrupted: 2 VM(s) stopped" in output, output
    assert qemus() == [], "QEMU outlived its runner"
