"""SIGKILL of a tool attached with a BPF trampoline (fentry/fexit) leaves
nothing behind: no program, no tracing link.  Needs a kernel that allows
trampolines, so it runs in the QEMU VM (tests/vm); the host's tp_btf and
USDT variants are in tests/test_robustness.py.

Unlike the fallbacks, the first-choice methods print nothing on attach, so
the test waits until bpftool shows the program with its link.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.test_robustness import PYCORE, links_of, prog_ids, wait_gone

pytestmark = pytest.mark.kernel


def wait_attached(name: str, before: set[int], timeout: float = 60.0) -> set[int]:
    """Our new program called ``name`` once it has a link (i.e. is attached)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ours = prog_ids(name) - before
        if ours and links_of(ours):
            return ours
        time.sleep(0.2)
    pytest.fail(f"{name} not loaded and linked within {timeout} s")


@pytest.mark.parametrize(("tool", "prog"), [("fget-crack", "fget_exit"), ("vfs-unlink", "vfs_unlink_entry")])
def test_kill9_trampoline_tool_leaves_nothing(tool, prog):
    before = prog_ids(prog)
    p = subprocess.Popen([*PYCORE, "run", tool], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ours = wait_attached(prog, before)
        assert len(ours) == 1
        assert p.poll() is None, p.stderr.read()
        p.kill()
        p.wait(30)
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGKILL
    assert "fallback" not in err, err        # it was the trampoline that got killed
    wait_gone(ours, timeout=30.0)            # TCG guests are slow: allow for RCU
