"""Probe kinds of bpftrace 0.18-0.23 that need the 6.12 VM (fentry, kprobes, and iterators, which
0.23.2's feature check refuses on the host), side by side with bpftrace 0.23.2 chrooted into Debian 13's
root (tests/bpftrace023.py): ``fentry``/``fexit`` and ``kprobe:MODULE:FUNC`` in ``probe`` and ``func``,
listings of iterators and of a program's kernel probes, ``iter:task_vma``. The host's part:
tests/test_trace_probes_023.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import require_root

kernel = pytest.mark.kernel
PYCORE = [sys.executable, "-m", "pycore"]


@pytest.fixture(autouse=True)
def _ready() -> None:
    require_root()
    bpftrace023.require()


def pycore(*args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*PYCORE, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def bpftrace(*args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(bpftrace023.argv(*args), capture_output=True, text=True, timeout=300,
                       env=bpftrace023.env(), stdin=subprocess.DEVNULL)
    r.stdout = "".join(ln for ln in r.stdout.splitlines(True) if not ln.startswith("Attaching "))
    return r


NAMES = ('fentry:vfs_read /pid == cpid/ { printf("A %s %s\\n", probe, func); } '
         'f:vfs_read /pid == cpid/ { printf("B %s %s\\n", probe, func); } '
         'fexit:vfs_read /pid == cpid/ { printf("C %s %s\\n", probe, func); } '
         'kprobe:vmlinux:vfs_read /pid == cpid/ { printf("D %s %s\\n", probe, func); } '
         'kprobe:vfs_read* /pid == cpid/ { printf("E %s %s\\n", probe, func); } '
         'kretprobe:vfs_read /pid == cpid/ { printf("F %s %s\\n", probe, func); }')


@kernel
def test_probe_and_func_names_as_023() -> None:
    """``probe`` and ``func`` of fentry/fexit (and f:), kprobe:MODULE:FUNC and a kprobe wildcard, as
    0.23.2 prints them (the loader's reads of /bin/true: the same lines, whatever their number).
    0.23.2 refuses ``?`` in a probe's name (a syntax error; pycore takes it): ``*`` here."""
    ours, theirs = pycore("trace", "-c", "/bin/true", "-e", NAMES), bpftrace("-c", "/bin/true", "-e", NAMES)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    mine, refs = sorted(set(ours.stdout.split("\n")) - {""}), sorted(set(theirs.stdout.split("\n")) - {""})
    assert mine == refs and {line[0] for line in mine} == set("ABCDEF"), (mine, refs)


@kernel
def test_kernel_listings_as_023() -> None:
    """``-l 'iter:*'`` (every iterator of this kernel), ``-lv iter:task_vma`` and ``-l`` of a program's
    fentry/fexit/kprobe probes print what 0.23.2 prints."""
    program = "fentry:vfs_read {} fexit:vfs_read {} kprobe:vfs_read* {} iter:task {}"
    for args in (["-l", "iter:*"], ["-lv", "iter:task_vma"], ["-l", "-e", program]):
        theirs = bpftrace(*args)
        ours = pycore("trace", *args)
        assert theirs.returncode == 0, (args, theirs.stderr)
        assert ours.returncode == 0, (args, ours.stderr)
        assert ours.stdout == theirs.stdout and ours.stdout, (args, ours.stdout, theirs.stdout)


@kernel
def test_iter_task_vma_as_023() -> None:
    """iter:task_vma over one held process: its mappings, as 0.23.2 walks them."""
    held = subprocess.Popen(["/usr/bin/sleep", "300"])
    try:
        program = (f'iter:task_vma /ctx->task->tgid == {held.pid}/ {{ printf("%s %lx-%lx %lx\\n", '
                   "ctx->task->comm, ctx->vma->vm_start, ctx->vma->vm_end, ctx->vma->vm_flags); }")
        ours, theirs = pycore("trace", "-e", program), bpftrace("-e", program)
    finally:
        held.kill()
        held.wait()
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout and ours.stdout.startswith("sleep "), (ours.stdout, theirs.stdout)
