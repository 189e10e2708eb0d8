"""The agent API as an agent author meets it (issue 24): options are keywords checked against the
tool's declarations, errors are exceptions naming what is wrong, nothing exits or writes to stderr,
and the public names are one list.  Host tests: option checks need no kernel feature."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pycore
from tests.conftest import require_root

PYCORE = [sys.executable, "-m", "pycore"]


def _open_quietly(capfd: pytest.CaptureFixture[str], name: str, **options: object) -> BaseException | None:
    """open_tool as an agent calls it, catching Exception as a long-running agent does: a
    SystemExit would escape this (and fail the test); whatever the library wrote to the
    process's stderr or stdout is checked to be nothing."""
    try:
        session = pycore.open_tool(name, **options)
    except Exception as exc:  # noqa: BLE001 (the point: an agent's catch-all)
        caught: BaseException | None = exc
    else:
        session.close()
        caught = None
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), f"open_tool({name!r}, {options!r}) wrote to the process's output"
    return caught


# -- options are an API, not argv --------------------------------------------------------------

def test_positional_option_as_keyword_never_exits(capfd: pytest.CaptureFixture[str]) -> None:
    """print-args' FUNC is positional on the command line and a keyword here: it used to raise
    SystemExit(2) with argparse's usage on stderr."""
    require_root()
    exc = _open_quietly(capfd, "print-args", func="vfs_read")
    # on a kernel with fentry it runs; elsewhere the one error is that no attach method works
    assert exc is None or isinstance(exc, pycore.NoMethod), exc


@pytest.mark.parametrize(("name", "options", "error", "words"), [
    ("print-args", {}, TypeError, "missing required option 'func'"),
    ("print-args", {"func": 3}, TypeError, "option 'func' takes a str, not int"),
    ("print-args", {"func": "no_such_func_xyz"}, ValueError, "option 'func': no_such_func_xyz is not in this kernel's BTF"),
    ("print-args", {"func": "vfs_read", "deref": "nope"}, ValueError,
     "option 'deref' is 'nope', which is no argument of vfs_read"),
    ("lock-contention", {"threshold": "abc"}, ValueError, "option 'threshold' takes a number, not 'abc'"),
    ("lock-contention", {"threshold": [50]}, TypeError, "option 'threshold' takes a number, not list"),
    ("lock-contention", {"threshold": float("nan")}, ValueError, "option 'threshold' takes a finite number"),
    ("lock-contention", {"threshold": -1}, ValueError, "option 'threshold' is negative"),
    ("lock-contention", {"flags": "yes"}, TypeError, "option 'flags' takes True or False"),
    ("fget-crack", {"pattern": "x" * 32}, ValueError, "option 'pattern' is longer than 31 bytes"),
    ("fget-crack", {"pattern": b"crack"}, TypeError, "option 'pattern' takes a str, not bytes"),
    ("fget-crack", {"json": True}, TypeError, "no option 'json' (has: pattern)"),
    ("net-drops", {"no_events": 1}, TypeError, "option 'no_events' takes True or False"),
    ("pg-queries", {"min_ms": "fast"}, ValueError, "option 'min_ms' takes a number, not 'fast'"),
    ("fget-crack", {"pid": "12"}, TypeError, "pid takes a process id"),
])
def test_bad_option_is_an_exception_naming_it(capfd: pytest.CaptureFixture[str], name: str,
                                              options: dict[str, object], error: type[Exception],
                                              words: str) -> None:
    require_root()
    exc = _open_quietly(capfd, name, **options)
    assert isinstance(exc, error), exc
    assert str(exc) == f"{name}: {words}" or str(exc).startswith(f"{name}: {words}"), str(exc)
    if isinstance(exc, ValueError):
        from pycore.tools.api import OptionError

        assert isinstance(exc, OptionError) and isinstance(exc, pycore.PycoreError)
        assert exc.tool == name and exc.option in options


def test_options_are_converted_as_declared() -> None:
    """A number given as text is converted (as on the command line), not multiplied as a string."""
    require_root()
    with pycore.open_tool("lock-contention", threshold="2.5") as tool:
        assert tool.options == {"threshold": 2.5, "flags": False}
    with pycore.open_tool("lock-contention", threshold=7, flags=True) as tool:
        assert tool.options == {"threshold": 7.0, "flags": True}
        assert type(tool.options["threshold"]) is float


def _registry() -> list[str]:
    from pycore.tools import registry

    return registry.names()


@pytest.mark.parametrize("name", _registry())
def test_cli_is_built_from_the_same_declarations(name: str) -> None:
    """Every declared option is a flag (or positional) of `pycore run NAME --help` with its help, and
    `pycore tools --json` lists them: one declaration for the API and the command line."""
    from pycore.tools import registry

    tool = registry.get(name)
    out = subprocess.run([*PYCORE, "run", name, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for opt in tool.options:
        assert opt.flag in text
        assert " ".join(opt.help.split()[:4]) in text, (opt.name, opt.help)
    rows = [json.loads(line) for line in subprocess.run([*PYCORE, "tools", "--json", "--no-check"],
                                                        capture_output=True, text=True, timeout=60).stdout.splitlines()]
    row = next(r for r in rows if r["name"] == name)
    assert [(o["name"], o["flag"], o["type"], o["required"]) for o in row["options"]] == \
        [(o.name, o.flag, o.type.__name__, o.required) for o in tool.options]


def test_cli_checks_as_the_api_does() -> None:
    """The command line refuses what the API refuses, in one line with the flag's name."""
    r = subprocess.run([*PYCORE, "run", "lock-contention", "--threshold", "-5", "-d", "0"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "pycore run lock-contention: --threshold is negative\n")
