"""The fentry/fexit modes of the tools, on kernels that allow BPF trampolines
(run by tests/vm in Debian's kernels under QEMU: ``./dev.sh vm-test``).
Each drives a real workload and checks the exact output, with no fallback
notice on stderr."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from tests.test_tools import COMM, FGET_WORKLOAD, UNLINK_WORKLOAD, pycore, script, tmp_path  # noqa: F401

pytestmark = pytest.mark.kernel


def test_fget_crack_fexit(tmp_path):
    cmd = script(tmp_path, FGET_WORKLOAD) + f" {tmp_path}"
    r = pycore("run", "fget-crack", "-c", cmd)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    fd, dup = json.loads((tmp_path / "fds.json").read_text())
    # fget sees lookups of the open fds, not the opens: fstat/ioctl/etc. on fd and dup
    lines = set(r.stdout.splitlines())
    assert lines <= {f"{COMM} (fd{fd}):  libcrack-test.so", f"{COMM} (fd{dup}):  libcrack-test.so"}


def test_fget_crack_fexit_sees_reads(tmp_path):
    body = """
        import os, sys
        fd = os.open(os.path.join(sys.argv[1], "libcrack-test.so"), os.O_CREAT | os.O_RDWR, 0o644)
        os.write(fd, b"x"); os.lseek(fd, 0, 0); os.read(fd, 1)
        print(fd, file=open(os.path.join(sys.argv[1], "fd"), "w"))
    """
    r = pycore("run", "fget-crack", "-c", script(tmp_path, body) + f" {tmp_path}")
    fd = int((tmp_path / "fd").read_text())
    assert f"{COMM} (fd{fd}):  libcrack-test.so" in r.stdout.splitlines()
    assert r.stderr == ""


def test_vfs_unlink_fentry(tmp_path):
    work = tmp_path / "unlinkdir"
    work.mkdir()
    r = pycore("run", "vfs-unlink", "-c", script(tmp_path, UNLINK_WORKLOAD) + f" {work}")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == f"{COMM} unlinkdir/a.txt\n{COMM} sub/b.txt\n{COMM} sub/c.txt\n"


def test_print_args_vfs_write(tmp_path):
    body = "import os\nos.write(1, b'12345678')\n"
    r = pycore("run", "print-args", "vfs_write", "-c", script(tmp_path, body))
    assert r.returncode == 0, r.stderr
    pat = r"\{ \.file = 0xffff[0-9a-f]+, \.buf = 0x[0-9a-f]+, \.count = (\d+), \.pos = 0x[0-9a-f]+ \}"
    counts = [int(m.group(1)) for m in map(lambda l: re.fullmatch(pat, l), r.stdout.splitlines()) if m]
    assert 8 in counts


def test_print_args_deref_struct(tmp_path):
    body = "import os\nos.write(1, b'12345678')\n"
    r = pycore("run", "print-args", "vfs_write", "--deref", "file", "-c", script(tmp_path, body))
    assert r.returncode == 0, r.stderr
    assert re.search(r"\.f_path = \{ \.mnt = 0xffff[0-9a-f]+, \.dentry = 0xffff[0-9a-f]+ \}", r.stdout)
