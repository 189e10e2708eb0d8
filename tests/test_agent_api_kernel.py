"""The agent API's typed tool sessions where the tools' first methods attach (fentry/fexit: the
kernel VMs, ``./dev.sh vm-test``): print-args' FUNC given as ``func=``, events of each tool's own
Event class, no fallback notice."""

from __future__ import annotations

import mmap
import os
import tempfile

import pytest

import pycore
from pycore.tools import fget_crack, print_args

pytestmark = pytest.mark.kernel


def test_print_args_func_keyword_typed_events() -> None:
    """open_tool("print-args", func=...) (argparse's positional FUNC, once a SystemExit(2) here)."""
    with pycore.open_tool("print-args", pid=os.getpid(), func="vfs_write", deref="file") as tool:
        assert tool.notice == "" and tool.method.name == "fentry/FUNC"
        assert tool.options == {"func": "vfs_write", "deref": "file"}
        with tempfile.TemporaryFile() as f:
            os.write(f.fileno(), b"12345678")
        events = list(tool.events(timeout=0.5))
    assert events and all(type(e) is print_args.Event for e in events)
    assert 8 in [e.args[2] for e in events]          # vfs_write(file, buf, count, pos): count
    assert any(e.deref_len > 0 for e in events)      # *file copied


def test_fget_crack_fexit_typed_events() -> None:
    with pycore.open_tool("fget-crack", pid=os.getpid(), pattern="agent-api-k") as tool:
        assert tool.notice == "" and tool.method.name == "fexit/fget"
        with tempfile.TemporaryDirectory() as d:
            fd = os.open(os.path.join(d, "agent-api-k"), os.O_CREAT | os.O_RDWR, 0o600)
            os.write(fd, b"x")
            mmap.mmap(fd, 1).close()        # mmap() calls fget(fd) (read and fstat use fdget)
            os.close(fd)
        events = list(tool.events(timeout=0.5))
    assert events and all(type(e) is fget_crack.Event for e in events)
    assert {e.name for e in events} == {"agent-api-k"} and all(e.via_syscall == 0 for e in events)


def test_kprobe_script_attaches_where_kprobes_exist() -> None:
    """The other side of test_agent_api's FeatureMissing-at-line test: with kprobes, the same script runs."""
    with pycore.trace("kprobe:vfs_read /pid == $1/ { @n = count(); }", params=(str(os.getpid()),)) as s:
        with open("/dev/zero", "rb", buffering=0) as f:
            for _ in range(3):
                f.read(1)
        assert s.map("@n") >= 3
