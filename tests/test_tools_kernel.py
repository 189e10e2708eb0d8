"""The fentry/fexit modes of the tools, on kernels that allow BPF trampolines
(run by tests/vm in Debian's kernels under QEMU: ``./dev.sh vm-test``).
Each drives a real workload and checks the exact output, with no fallback
notice on stderr."""

from __future__ import annotations

import re
import subprocess
from contextlib import contextmanager

import pytest

from tests.test_tools import COMM, UNLINK_WORKLOAD, pycore, script, tmp_path  # noqa: F401

pytestmark = pytest.mark.kernel


MMAP_WORKLOAD = """
    import mmap, os, sys
    d = sys.argv[1]
    fd = os.open(os.path.join(d, "libcrack-test.so"), os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x")
    os.read(fd, 1)                      # read() looks fds up with fdget, not fget
    m = mmap.mmap(fd, 1)                # mmap() calls fget(fd)
    m.close()
    print(fd, file=open(os.path.join(d, "fd"), "w"))
"""


@contextmanager
def tmpfs(path):
    """A private tmpfs: the guest's /tmp is an overlay, where one unlink is two
    vfs_unlink calls (overlay, then upper layer) and tests want exactly one."""
    path.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "pycore-test", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_fget_crack_fexit(tmp_path, record_property):
    record_property("tool", "fget-crack")
    r = pycore("run", "fget-crack", "-c", script(tmp_path, MMAP_WORKLOAD) + f" {tmp_path}")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""                # fexit/fget attached: no fallback notice
    fd = int((tmp_path / "fd").read_text())
    # The only fget() of a crack file is mmap's, on fd; the fallback would also
    # have reported the open, so this output is fexit's.
    assert r.stdout.splitlines() == [f"{COMM} (fd{fd}):  libcrack-test.so"]


def test_vfs_unlink_fentry(tmp_path, record_property):
    record_property("tool", "vfs-unlink")
    with tmpfs(tmp_path / "mnt") as mnt:
        work = mnt / "unlinkdir"          # not the mount's root, whose dentry is "/"
        work.mkdir()
        r = pycore("run", "vfs-unlink", "-c", script(tmp_path, UNLINK_WORKLOAD) + f" {work}")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == f"{COMM} unlinkdir/a.txt\n{COMM} sub/b.txt\n{COMM} sub/c.txt\n"


WRITE_WORKLOAD = """
    import os, sys
    fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"12345678")
"""


def test_print_args_vfs_write(tmp_path, record_property):
    record_property("tool", "print-args")
    cmd = script(tmp_path, WRITE_WORKLOAD) + f" {tmp_path / 'out'}"
    r = pycore("run", "print-args", "vfs_write", "-c", cmd)
    assert r.returncode == 0, r.stderr
    pat = r"\{ \.file = 0x[0-9a-f]+, \.buf = 0x[0-9a-f]+, \.count = (\d+), \.pos = 0x[0-9a-f]+ \}"
    counts = [int(m.group(1)) for m in map(lambda l: re.fullmatch(pat, l), r.stdout.splitlines()) if m]
    assert 8 in counts, r.stdout


def test_print_args_deref_struct(tmp_path):
    cmd = script(tmp_path, WRITE_WORKLOAD) + f" {tmp_path / 'out'}"
    r = pycore("run", "print-args", "vfs_write", "--deref", "file", "-c", cmd)
    assert r.returncode == 0, r.stderr
    assert re.search(r"\.f_path = \{ \.mnt = 0x[0-9a-f]+, \.dentry = 0x[0-9a-f]+ \}", r.stdout), r.stdout


@pytest.mark.parametrize("tool", ["lock-contention", "fd-leak", "usdt-passwd"])
def test_tool_attaches_and_exits(tool, record_property):
    """The same shipped objects load and attach here with their first method:
    ``-d 0`` attaches, prints the (empty) summary and detaches."""
    record_property("tool", tool)
    r = pycore("run", tool, "-d", "0")
    assert r.returncode == 0, r.stderr
    assert "fallback" not in r.stderr, r.stderr
