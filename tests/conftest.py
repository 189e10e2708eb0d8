"""Shared test helpers.

Markers (registered in pyproject.toml): ``kernel`` for tests that need
fentry/fexit/kprobes (run in the QEMU kernel VM, deselect on the host with
``-m "not kernel"``) and ``slow``.
"""

from __future__ import annotations

import os

import pytest


def is_root() -> bool:
    return os.geteuid() == 0


def require_root() -> None:
    """Skip the calling test unless running as root (BPF loading needs it)."""
    if not is_root():
        pytest.skip("needs root (CAP_BPF/CAP_PERFMON)")
