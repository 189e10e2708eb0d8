"""Shared test helpers.

Markers (registered in pyproject.toml): ``kernel`` for tests that need
fentry/fexit/kprobes (run in the QEMU kernel VM, deselect on the host with
``-m "not kernel"``) and ``slow``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import contextmanager
from typing import Any, Iterator

import pytest


def is_root() -> bool:
    return os.geteuid() == 0


def require_root() -> None:
    """Skip the calling test unless running as root (BPF loading needs it)."""
    if not is_root():
        pytest.skip("needs root (CAP_BPF/CAP_PERFMON)")


@contextmanager
def running(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """A process with text pipes for stdout and stderr, killed and reaped on
    the way out if the test left it running (a failed assertion, say)."""
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    p = subprocess.Popen(argv, **popen)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def stop(p: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 30) -> tuple[str, str]:
    """Send ``sig`` and collect what the process wrote until it exits."""
    p.send_signal(sig)
    return p.communicate(timeout=timeout)
