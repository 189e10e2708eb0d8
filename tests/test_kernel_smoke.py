"""Smoke tests of the kernel VM path (tests/vm/): fexit and kprobe really run.

All tests here are marked ``kernel``: the host kernel refuses fentry/fexit and
has no kprobes, so they run only in the QEMU VM of ``python -m tests.vm.run``
(the host suite runs ``-m "not kernel"``).  Inside the VM nothing is skipped:
a kernel that cannot do what these tests need is a failure.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pycore.native.object import BpfObject
from pycore.native.shipped import object_path

pytestmark = pytest.mark.kernel

VENV_BIN = Path(sys.executable).parent


def _only(obj: BpfObject, name: str) -> None:
    """Load only program ``name`` of ``obj``."""
    for p in obj.programs.values():
        p.autoload = p.name == name


def _my_hits(obj: BpfObject) -> tuple[int, int]:
    """(fget, vfs_read) counted for this process by vm_smoke.bpf.o."""
    raw = obj.maps["hits"].lookup_raw(struct.pack("I", os.getpid()))
    return struct.unpack("QQ", raw) if raw is not None else (0, 0)


def _open_and_read(n: int = 5) -> None:
    """Make this process call vfs_read (read) and fget (mmap of a file) ``n`` times each."""
    for _ in range(n):
        with open("/proc/self/stat", "rb") as f:
            f.read(4096)  # read(2) -> ksys_read -> vfs_read
        with open(sys.executable, "rb") as f:
            with mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_READ):  # mmap(2) -> ksys_mmap_pgoff -> fget
                pass


def test_selftest_fexit_fget_loads_and_attaches():
    """The shipped selftest.bpf.o's fexit/fget program loads and attaches here."""
    with BpfObject(object_path("selftest")) as obj:
        _only(obj, "selftest_fexit_fget")
        obj.load()
        links = obj.attach()
        assert [link.attached for link in links] == [True]
        _open_and_read()


def test_fexit_fget_counts():
    with BpfObject(object_path("vm_smoke")) as obj:
        _only(obj, "vm_smoke_fexit_fget")
        obj.load()
        obj.attach()
        before = _my_hits(obj)[0]
        _open_and_read()
        assert _my_hits(obj)[0] > before


def test_kprobe_vfs_read_counts():
    with BpfObject(object_path("vm_smoke")) as obj:
        _only(obj, "vm_smoke_kprobe_vfs_read")
        obj.load()
        obj.attach()
        before = _my_hits(obj)[1]
        _open_and_read()
        after = _my_hits(obj)[1]
        assert after >= before + 5  # at least one read(2) per _open_and_read round


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(f"$ {' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


def test_pycore_list_kfunc_vfs_read():
    proc = _run([str(VENV_BIN / "pycore"), "list", "-v", "kfunc:vfs_read"])
    assert proc.returncode == 0, proc.stderr
    assert "vfs_read" in proc.stdout and "struct file * file" in proc.stdout


def test_bpftrace_list_kfunc_vfs_read():
    bpftrace = shutil.which("bpftrace")
    assert bpftrace, "bpftrace is not installed (./dev.sh setup installs it)"
    proc = _run([bpftrace, "-lv", "kfunc:vfs_read"])
    assert proc.returncode == 0, proc.stderr
    assert "vfs_read" in proc.stdout


def _probe_blocks(text: str) -> dict[str, list[str]]:
    """``kfunc:vmlinux:NAME`` -> its argument lines, from a ``-lv`` listing.

    pycore may end a probe line with ``# fentry cannot attach: ...``; that
    note is pycore's own, so it is dropped before comparing.
    """
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("    "):
            assert current is not None, f"argument line before any probe: {line!r}"
            current.append(line.strip())
        else:
            current = blocks.setdefault(line.split("#")[0].strip(), [])
    return blocks


def test_list_kfunc_vfs_matches_bpftrace():
    """Where available_filter_functions is readable, `pycore list -v` and
    `bpftrace -lv` agree on which vfs_* functions exist and on every
    argument line (issue: real kernels in CI)."""
    bpftrace = shutil.which("bpftrace")
    assert bpftrace, "bpftrace is not installed (./dev.sh setup installs it)"
    ours = _run([str(VENV_BIN / "pycore"), "list", "-v", "kfunc:vfs_*"])
    theirs = _run([bpftrace, "-lv", "kfunc:vfs_*"])
    assert ours.returncode == 0 and theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert "available_filter_functions" not in ours.stderr  # no fallback in the VM
    mine, ref = _probe_blocks(ours.stdout), _probe_blocks(theirs.stdout)
    assert len(ref) > 50
    assert sorted(mine) == sorted(ref)
    differ = {name: (mine[name], ref[name]) for name in ref if mine[name] != ref[name]}
    assert not differ, differ
