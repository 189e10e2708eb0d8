"""Upstream bpftrace's current tools (tests/data/upstream-tools, 0.24-0.26 syntax): ``pycore trace
--dry-run`` accepts every one, parsed, checked against this kernel's BTF and lowered (issue #30).

Two need what this kernel may not give, and each is checked against the kernel itself rather than
assumed: loads.bt reads ``avenrun`` (absent from /proc/kallsyms on some kernels), vfscount.bt attaches
kprobes to ``vfs_*`` (none where the kernel has no kprobes or hides its function list)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).parent / "data" / "upstream-tools"
NAMES = sorted(p.name for p in TOOLS.glob("*.bt"))


def _kallsyms_has(name: str) -> bool:
    with open("/proc/kallsyms") as f:
        return any(line.split()[2] == name and int(line.split()[0], 16) for line in f if len(line.split()) >= 3)


def _kprobes_on(pattern_prefix: str) -> bool:
    for path in ("/sys/kernel/tracing/available_filter_functions", "/sys/kernel/debug/tracing/available_filter_functions"):
        try:
            with open(path) as f:
                return any(line.startswith(pattern_prefix) for line in f)
        except OSError:
            continue
    return False


def test_all_39_are_here() -> None:
    assert len(NAMES) == 39, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_dry_run(name: str) -> None:
    res = subprocess.run([sys.executable, "-m", "pycore", "trace", "--dry-run", str(TOOLS / name)],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in res.stderr, res.stderr
    if name == "loads.bt" and not _kallsyms_has("avenrun"):
        assert res.returncode == 2 and "no kernel symbol 'avenrun' in /proc/kallsyms" in res.stderr, res.stderr
        return
    if name == "vfscount.bt" and not _kprobes_on("vfs_"):
        assert res.returncode == 2 and "kprobe:vfs_*: matches no probe on this system" in res.stderr, res.stderr
        return
    assert res.returncode == 0, res.stderr
