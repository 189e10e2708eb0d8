"""The suite interrupted: SIGTERM ends a pytest run as Ctrl-C does, its fixtures torn down.

./dev.sh test runs the host tests as a background job (so that its trap can run while they do), and
a script's background job ignores SIGINT; its trap, on Ctrl-C or a CI timeout's SIGTERM, sends them
SIGTERM, which tests/conftest.py turns into KeyboardInterrupt. The fixtures then end what the tests
started (traces, servers, workloads) rather than leave them running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SLEEPER = '''
import os, time
import pytest

@pytest.fixture
def held():
    open(os.environ["MARK"], "w").write("set up")
    yield
    open(os.environ["MARK"], "w").write("torn down")

def test_sleeps(held):
    time.sleep(120)
'''


def test_sigterm_ends_the_run_as_ctrl_c(tmp_path: Path) -> None:
    test = tmp_path / "test_sleeper.py"
    test.write_text(SLEEPER)
    mark = tmp_path / "mark"
    # SIGINT ignored, as in ./dev.sh test's background job: only SIGTERM can end it cleanly
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          "-q", str(test)], cwd=ROOT, env={**__import__("os").environ, "MARK": str(mark)},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while not (mark.exists() and mark.read_text() == "set up"):
            assert p.poll() is None and time.monotonic() < deadline, p.stdout.read() if p.stdout else ""
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2 and "KeyboardInterrupt" in out, out     # pytest's "interrupted"
    assert mark.read_text() == "torn down"
