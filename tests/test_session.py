"""pycore.open_tool: the built-in tools as objects in the calling process."""

from __future__ import annotations

import os
import tempfile

import pytest

import pycore
from tests.conftest import require_root


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def test_options_and_errors():
    with pytest.raises(TypeError, match="no option 'bogus' \\(has: pattern\\)"):
        pycore.open_tool("fget-crack", bogus=1)
    with pytest.raises(KeyError, match="no tool 'nope'"):
        pycore.open_tool("nope")
    with pytest.raises(ValueError, match="option .pattern. is longer than 31 bytes"):
        pycore.open_tool("fget-crack", pattern="x" * 40)


def test_two_sessions_of_one_tool_and_close_twice():
    a = pycore.open_tool("fget-crack", pid=os.getpid(), pattern="sess-a")
    b = pycore.open_tool("fget-crack", pid=os.getpid(), pattern="sess-")
    try:
        assert a.method.name == "tp_btf/sys_exit" and "fallback" in a.notice
        with tempfile.TemporaryDirectory() as d:
            for n in ("sess-a", "sess-b"):
                os.close(os.open(os.path.join(d, n), os.O_CREAT | os.O_RDWR, 0o600))
        assert [e.name for e in a.events(timeout=0.3)] == ["sess-a"]
        assert [e.name for e in b.events(timeout=0.3)] == ["sess-a", "sess-b"]
    finally:
        a.close()
        b.close()
    a.close()
    assert a.closed and "closed" in repr(a)


def test_aggregating_tool_has_no_event_stream():
    with pycore.open_tool("lock-contention", threshold=1) as tool:
        assert not tool.has_events
        assert isinstance(tool.summary(), dict)
        with pytest.raises(ValueError, match="no event stream"):
            next(tool.events(0))
