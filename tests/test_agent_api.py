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
from tests.conftest import for_everyone, require_root

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


def test_run_help_lists_every_tool_with_its_options() -> None:
    from pycore.tools import registry

    out = subprocess.run([*PYCORE, "run", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.split("takes the same):\n", 1)[1].splitlines()}
    assert list(rows) == registry.names()
    for name, words in rows.items():
        flags = [w.strip("[]") for w in words if w.strip("[]").startswith("--") or w.isupper()]
        declared = [o.flag for o in registry.get(name).options]
        assert [f for f in flags if f in declared] == declared, (name, words)


def test_cli_checks_as_the_api_does() -> None:
    """The command line refuses what the API refuses, in one line with the flag's name."""
    r = subprocess.run([*PYCORE, "run", "lock-contention", "--threshold", "-5", "-d", "0"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "pycore run lock-contention: --threshold is negative\n")


# -- the small items -------------------------------------------------------------------------------

def test_map_text_of_a_missing_map_names_those_that_exist() -> None:
    require_root()
    with pycore.trace("BEGIN { @calls = count(); @by[1] = sum(2); }") as session:
        for read in (session.map_text, session.map, session.hist):
            with pytest.raises(KeyError) as exc:
                read("@nope")
            assert exc.value.args[0] == "no map @nope (the script has: @by, @calls)"
        assert session.map_text("calls") == "@calls: 1\n"


def test_kprobe_on_a_kernel_without_kprobes_is_feature_missing_at_its_line() -> None:
    require_root()
    if os.path.exists("/sys/bus/event_source/devices/kprobe"):
        pytest.skip("this kernel has kprobes")
    program = "BEGIN { }\n\n  kprobe:vfs_read { @reads = count(); }\n"
    with pytest.raises(pycore.FeatureMissing) as exc:
        pycore.trace(program)
    err = exc.value
    assert isinstance(err, pycore.ScriptError) and isinstance(err, pycore.ScriptFeatureMissing)
    assert (err.line, err.col) == (3, 3)
    assert str(err).startswith("<program>:3:3: error: this kernel cannot attach kprobes")
    assert err.format().splitlines()[1:] == ["  kprobe:vfs_read { @reads = count(); }", "  ^"]


def test_unsafe_refusal_names_the_api_argument() -> None:
    require_root()
    with pytest.raises(pycore.ScriptError) as exc:
        pycore.trace('BEGIN { system("true"); }')
    assert str(exc.value) == "<program>:1:9: error: system() is unsafe: pass unsafe=True to pycore.trace() to allow it"
    # the command line keeps its flag's name
    r = subprocess.run([*PYCORE, "trace", "-e", 'BEGIN { system("true"); }'], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "system() is unsafe: run with --unsafe to allow it" in r.stderr


def _links_of(prog_id: int) -> int:
    from tests.conftest import bpftool_show

    return sum(1 for link in bpftool_show("link") if link.get("prog_id") == prog_id)


def test_link_close_and_context_manager() -> None:
    """Links close as everything else does; `with` detaches; destroy() stays as the same call."""
    require_root()
    from pycore import BpfObject, Link, object_path

    with BpfObject(object_path("fget_crack")) as obj:
        for prog in obj.programs.values():
            prog.autoload = prog.name == "sys_exit_fd"
        obj.load()
        prog = obj.programs["sys_exit_fd"]
        prog_id = _prog_id(prog.fd)
        with prog.attach() as link:
            assert isinstance(link, Link) and not link.closed
            assert _links_of(prog_id) == 1
        assert link.closed and _links_of(prog_id) == 0
        with pytest.raises(ValueError, match="link is closed"):
            link.fd
        link.close()          # twice: nothing
        again = prog.attach()
        assert _links_of(prog_id) == 1
        again.destroy()       # the old name
        assert again.closed and _links_of(prog_id) == 0


def _prog_id(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as f:
        for line in f:
            if line.startswith("prog_id:"):
                return int(line.split()[1])
    raise AssertionError("no prog_id in fdinfo")


# -- one public surface ----------------------------------------------------------------------------

def _error_classes() -> dict[str, type]:
    """Every PycoreError subclass a module of the package defines (found in the source, then imported)."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(pycore.__file__).parent
    found: dict[str, type] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]
        if not names:
            continue
        module = ".".join(("pycore", *path.relative_to(root).with_suffix("").parts))
        mod = importlib.import_module(module)
        for name in names:
            cls = getattr(mod, name)
            if isinstance(cls, type) and issubclass(cls, pycore.PycoreError):
                found[name] = cls
    return found


def test_every_error_class_is_importable_from_pycore() -> None:
    errors = _error_classes()
    assert {"ScriptError", "TargetError", "NoMethod", "OptionError", "PinMismatch"} <= set(errors)
    for name, cls in errors.items():
        assert name in pycore.__all__, name
        assert getattr(pycore, name) is cls, name
    from pycore import ScriptError, TargetError  # the two

    assert issubclass(ScriptError, pycore.PycoreError) and issubclass(TargetError, pycore.PycoreError)


def _backticked(text: str) -> set[str]:
    import re

    return set(re.findall(r"`([A-Za-z_]+)`", text))


def test_public_names_are_one_list() -> None:
    """pycore.__all__, docs/architecture.md's "Public import paths" and docs/embedding.md's "Import
    paths" name the same things, and each name imports."""
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    arch = (docs / "architecture.md").read_text().split("## Public import paths", 1)[1]
    arch = arch.split("The modules that", 1)[0]
    embed = (docs / "embedding.md").read_text().split("## Import paths", 1)[1].split("\n## ", 1)[0]
    exported = set(pycore.__all__) - {"__version__"}
    assert _backticked(arch) - {"pycore", "__all__"} == exported
    assert _backticked(embed) - {"pycore", "__all__"} == exported
    for name in exported:
        assert getattr(pycore, name) is not None
    assert {"trace", "TraceSession", "Event"} <= exported
    tools = (docs / "embedding.md").read_text().split("- Names are those of `pycore tools`:", 1)[1].split(".\n", 1)[0]
    listed = {w.strip() for w in tools.replace("\n", " ").split(",")}
    assert listed == set(_registry())


# -- typed: histograms with their bounds ------------------------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402


@given(st.integers(min_value=-(2**63), max_value=2**64 - 1))
def test_log2_bucket_bounds_hold_its_values(value: int) -> None:
    from pycore.hist import log2_bounds, log2_bucket

    lo, hi = log2_bounds(log2_bucket(value))
    assert (lo is None or lo <= value) and (hi is None or value < hi)


@given(st.integers(-10**6, 10**6), st.integers(-1000, 1000), st.integers(1, 1000), st.integers(1, 50))
def test_linear_bucket_bounds_hold_its_values(value: int, lo: int, width: int, step: int) -> None:
    from pycore.hist import linear_bounds, linear_bucket

    hi = lo + width
    b_lo, b_hi = linear_bounds(linear_bucket(value, lo, hi, step), lo, hi, step)
    assert (b_lo is None or b_lo <= value) and (b_hi is None or value < b_hi)


def test_trace_hist_buckets_with_bounds() -> None:
    """What an agent does with a latency histogram: the rows bpftrace prints, with numbers, not labels."""
    require_root()
    from pycore import Bucket, Hist

    program = ("BEGIN { @h = hist(0); @h = hist(5); @h = hist(6); @h = hist(100); @h = hist(-3);"
               " @l = lhist(150, 0, 100, 50); @l = lhist(20, 0, 100, 50); @k[\"a\"] = hist(1); }")
    with pycore.trace(program) as session:
        h = session.hist("@h")
        assert isinstance(h, Hist) and h.total == 5
        assert h.buckets() == [Bucket(None, 0, 1), Bucket(0, 1, 1), Bucket(1, 2, 0), Bucket(2, 4, 0),
                               Bucket(4, 8, 2), Bucket(8, 16, 0), Bucket(16, 32, 0), Bucket(32, 64, 0),
                               Bucket(64, 128, 1)]
        assert h.text() == session.map_text("@h").split("\n", 1)[1].rstrip("\n") + "\n"
        assert session.hist("l").buckets() == [Bucket(0, 50, 1), Bucket(50, 100, 0), Bucket(100, None, 1)]
        assert session.hist("@k", key="a").buckets() == [Bucket(1, 2, 1)]
        with pytest.raises(TypeError, match="keyed: give key="):
            session.hist("@k")


# -- typed: tool events, open_tool's overloads, per-CPU maps in skeletons ---------------------------

def _event_tools() -> list[str]:
    from pycore.tools import registry

    return [n for n in registry.names() if registry.get(n).event is not None]


@pytest.mark.parametrize("name", _event_tools())
def test_each_tool_event_class_is_its_objects_struct(name: str) -> None:
    """pycore.tools.MODULE.Event is a dataclass whose fields are the BTF struct's, in order (the codec
    checks that when it decodes to it): so the class mypy sees is the one events are."""
    import dataclasses
    import importlib

    from pycore import BpfObject, object_path
    from pycore.embed.session import _use_event_type
    from pycore.native.codec import decoder_for
    from pycore.tools import registry

    tool = registry.get(name)
    module = importlib.import_module(registry.TOOLS[name])
    assert tool.event_type is module.Event and dataclasses.is_dataclass(module.Event)
    with BpfObject(object_path(tool.object)) as obj:
        assert tool.event is not None
        _use_event_type(obj, tool.event, module.Event)
        codec = decoder_for(obj.btf, f"struct {tool.event}")
        assert codec.cls is module.Event
        assert type(codec.decode(bytes(codec.size))) is module.Event


def test_tool_events_are_the_modules_event_class() -> None:
    require_root()
    import tempfile

    from pycore.tools import fget_crack

    with pycore.open_tool("fget-crack", pid=os.getpid(), pattern="typed-event") as tool:
        with tempfile.TemporaryDirectory() as d:
            os.close(os.open(os.path.join(d, "typed-event"), os.O_CREAT | os.O_RDWR, 0o600))
        events = list(tool.events(timeout=0.5))
    assert [type(e) for e in events] == [fget_crack.Event]
    assert events[0].name == "typed-event" and events[0].pid == os.getpid()


def test_open_tool_overloads_are_the_declared_options() -> None:
    """open_tool's typed overloads (what mypy checks an agent against) say each tool's options with
    the types and requiredness of its Option declarations, and its Event class."""
    import inspect
    import typing

    from pycore.embed import session
    from pycore.tools import registry

    by_name = {}
    for fn in typing.get_overloads(session.open_tool):
        ann = inspect.signature(fn).parameters["name"].annotation
        if ann.startswith("Literal["):
            by_name[ann[len('Literal["'):-2]] = fn
    assert set(by_name) == set(registry.names())
    for name, fn in by_name.items():
        tool = registry.get(name)
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.name not in ("name", "pid", *session.SESSION_OPTIONS)]
        assert [p.name for p in params] == [o.name for o in tool.options], name
        for p, opt in zip(params, tool.options):
            want = opt.type.__name__ + (" | None" if opt.default is None and opt.type is not bool
                                        and not opt.required else "")
            assert p.annotation == want, (name, p.name, p.annotation, want)
            assert (p.default is inspect.Parameter.empty) == opt.required, (name, p.name)
        module = registry.TOOLS[name].rsplit(".", 1)[1]
        expected = f"ToolSession[{module}.Event]" if tool.event else "ToolSession[NoReturn]"
        assert sig.return_annotation == expected, (name, sig.return_annotation)


def run_mypy(directory: "os.PathLike[str] | str", source: str, path: str = "") -> "subprocess.CompletedProcess[str]":
    """mypy --strict on ``source`` (written as agent.py in ``directory``), as an agent's CI runs it."""
    import pathlib
    import textwrap

    d = pathlib.Path(directory)
    (d / "agent.py").write_text(textwrap.dedent(source))
    env = {**os.environ, "MYPYPATH": path} if path else None
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
                           str(pathlib.Path(__file__).resolve().parent.parent / ".mypy_cache"), "agent.py"],
                          capture_output=True, text=True, cwd=d, timeout=600, env=env)


TOOL_AGENT = """
import os
import pycore
from pycore.tools import fget_crack

def watch() -> list[str]:
    names: list[str] = []
    with pycore.open_tool("fget-crack", pid=os.getpid(), pattern="x") as tool:
        for ev in tool.events(timeout=0.1):
            e: fget_crack.Event = ev
            names.append(f"{e.comm} {e.fd + 1} {ev.name}")
        tool.poll(lambda ev: names.append(ev.comm), timeout=0)
    with pycore.open_tool("print-args", func="vfs_read", deref="file") as args:
        for call in args.events(timeout=0):
            names.append(str(call.args[0] + call.nargs))
    return names
"""

TOOL_AGENT_BAD = """
import pycore

def watch() -> None:
    with pycore.open_tool("fget-crack", pattern="x") as tool:
        for ev in tool.events():
            print(ev.nmae)
    pycore.open_tool("fget-crack", patern="x")
    pycore.open_tool("lock-contention", threshold="50")
    pycore.open_tool("fd-leak", pid="1")
"""


def test_mypy_checks_tool_options_and_event_fields(tmp_path: "os.PathLike[str]") -> None:
    ok = run_mypy(tmp_path, TOOL_AGENT)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run_mypy(tmp_path, TOOL_AGENT_BAD)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    out = bad.stdout
    assert 'agent.py:7: error: "Event" has no attribute "nmae"' in out, out
    assert 'agent.py:8: error: Unexpected keyword argument "patern" for overloaded function "open_tool"; ' \
           'did you mean "pattern"?' in out, out
    for line in (9, 10):  # threshold="50" (a float), pid="1" (an int)
        assert f'agent.py:{line}: error: No overload variant of "open_tool" matches argument types "str", "str"' \
            in out, out


PERCPU_AGENT = """
from test_maps_skel import TestMaps

def totals() -> int:
    with TestMaps.open() as skel:
        skel.load()
        per_cpu: list[int] | None = skel.maps.pcpu_array.lookup_percpu(0)
        rows: list[tuple[int, list[int]]] = skel.maps.lru_pcpu.items_percpu()
        summed: int | None = skel.maps.pcpu_array.lookup(0)
        return sum(per_cpu or []) + len(rows) + (summed or 0)
"""


def test_mypy_accepts_lookup_percpu_on_a_skeletons_per_cpu_map(tmp_path: "os.PathLike[str]") -> None:
    """docs/embedding.md's `lookup_percpu`/`items_percpu` on a per-CPU map type-check (the .pyi
    typed every map as a plain TypedMap), and stay refused on a map that is not per-CPU."""
    import pathlib
    import shutil

    from pycore import object_path
    from pycore.skel.generate import generate

    d = pathlib.Path(tmp_path)
    shutil.copy(object_path("test_maps"), d / "test_maps.bpf.o")
    generate(str(d / "test_maps.bpf.o"), str(d / "test_maps_skel.py"), bytes_maps=["raw"])
    ok = run_mypy(d, PERCPU_AGENT)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run_mypy(d, PERCPU_AGENT.replace("lru_pcpu.items_percpu", "lru.items_percpu"))
    assert bad.returncode == 1 and 'has no attribute "items_percpu"' in bad.stdout, bad.stdout


# -- mypy --strict on the three example agents ---------------------------------------------------

# example -> (the line with a field read, the same line misspelt, mypy's complaint)
TYPED_EXAMPLES = {
    "embed_asyncio_trace.py": ('if ev.kind == "printf":', 'if ev.knd == "printf":',
                               '"Event" has no attribute "knd"; maybe "kind"?'),
    "embed_prometheus.py": ("opened.labels(comm=event.comm).inc()", "opened.labels(comm=event.com).inc()",
                            '"Event" has no attribute "com"; maybe "comm"?'),
    "embed_skeleton_pins.py": ("events={[e.seq for e in events]}", "events={[e.sequence for e in events]}",
                               '"CallEvent" has no attribute "sequence"'),
}


@pytest.fixture(scope="module")
def example_build(tmp_path_factory: pytest.TempPathFactory) -> str:
    """embed_skeleton_pins.py's object and skeleton, built as the example builds them (pycore build, skel)."""
    import importlib.util
    from pathlib import Path

    d = tmp_path_factory.mktemp("example-build")
    path = Path(__file__).resolve().parent.parent / "examples" / "embed_skeleton_pins.py"
    spec = importlib.util.spec_from_file_location("embed_skeleton_pins", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    old = os.environ.get("PYCORE_EXAMPLE_BUILD")
    os.environ["PYCORE_EXAMPLE_BUILD"] = str(d)
    try:
        return str(module.build_dir())
    finally:
        if old is None:
            del os.environ["PYCORE_EXAMPLE_BUILD"]
        else:
            os.environ["PYCORE_EXAMPLE_BUILD"] = old


@pytest.mark.parametrize("name", sorted(TYPED_EXAMPLES))
def test_mypy_strict_on_the_example_agents(name: str, example_build: str, tmp_path: "os.PathLike[str]") -> None:
    """Each example agent passes mypy --strict as it is, and fails with a field misspelt in a copy."""
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "examples" / name).read_text()
    good, bad, complaint = TYPED_EXAMPLES[name]
    assert source.count(good) == 1, (name, good)
    ok = run_mypy(tmp_path, source, path=example_build)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    typo = run_mypy(tmp_path, source.replace(good, bad), path=example_build)
    line = source[:source.index(good)].count("\n") + 1
    assert typo.returncode == 1, typo.stdout + typo.stderr
    assert f"agent.py:{line}: error: {complaint}" in typo.stdout, typo.stdout


# -- docs/embedding.md's bad-input table, the rows of this part of the API ---------------------------

UNPRIVILEGED = r"""
import os, sys
os.setgid(65534); os.setgroups([]); os.setuid(65534)
import pycore
for call in (lambda: pycore.open_tool("fget-crack"), lambda: pycore.trace("BEGIN { }")):
    try:
        call()
    except PermissionError as exc:
        print(type(exc).__name__, exc)
"""


def test_bad_input_table() -> None:
    """Each row of docs/embedding.md's "Errors" table that needs no special kernel, as an agent hits it."""
    require_root()
    docs = (pathlib_root() / "docs" / "embedding.md").read_text().split("## Errors", 1)[1]
    # not root: run as nobody (no CAP_BPF or CAP_PERFMON)
    r = subprocess.run(for_everyone([sys.executable, "-c", UNPRIVILEGED]), capture_output=True, text=True,
                       timeout=60, cwd="/")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and len(lines) == 2, r.stdout + r.stderr
    assert all(line.startswith("PermissionError pycore: ") and "CAP_BPF" in line for line in lines), lines
    assert "`PermissionError` from `open_tool` and `trace`" in docs
    # no attach method works here (print-args needs fentry): NoMethod, unless this kernel has fentry
    try:
        pycore.open_tool("print-args", func="vfs_read").close()
    except pycore.NoMethod as exc:
        assert "what would work:" in str(exc)
    # unknown tool, unknown option, missing option, wrong kind, refused value
    with pytest.raises(KeyError, match="no tool 'nope'; known: fget-crack"):
        pycore.open_tool("nope")
    with pytest.raises(TypeError, match=r"no option 'bogus' \(has: threshold, flags\)"):
        pycore.open_tool("lock-contention", bogus=1)
    with pytest.raises(pycore.OptionError, match="option 'threshold' takes a number"):
        pycore.open_tool("lock-contention", threshold="fast")
    # a pid that does not exist
    with pytest.raises(pycore.TargetError):
        pycore.open_tool("fget-crack", pid=2**22 + 1)
    with pytest.raises(pycore.TargetError):
        pycore.trace("BEGIN { }", pid=2**22 + 1)
    # a script refused, at its place
    with pytest.raises(pycore.ScriptError) as exc:
        pycore.trace("BEGIN { @x = nosuchfunc(1); }")
    assert (exc.value.line, exc.value.col) == (1, 14)
    assert exc.value.format().splitlines()[1:] == ["BEGIN { @x = nosuchfunc(1); }", " " * 13 + "^"]
    # a map the script does not have
    with pycore.trace("BEGIN { @a = count(); }") as session, pytest.raises(KeyError, match="the script has: @a"):
        session.map("@b")


def pathlib_root() -> "pathlib.Path":
    import pathlib

    return pathlib.Path(__file__).resolve().parent.parent


def test_tool_notes_go_to_the_notice_not_stderr(tmp_path: "pathlib.Path", capfd: pytest.CaptureFixture[str]) -> None:
    """py-calls on an interpreter whose frames it cannot walk says so: in session.notice (it wrote to
    the agent's stderr), as `pycore run` says it on stderr."""
    require_root()
    import shutil

    from tests.test_py_calls import FAKE_PYTHON

    if not os.path.exists("/usr/include/x86_64-linux-gnu/sys/sdt.h"):
        pytest.fail("systemtap-sdt-dev is not installed (dev.sh installs it)")
    src = tmp_path / "fake.c"
    src.write_text(FAKE_PYTHON)
    exe = tmp_path / "fakepython"
    subprocess.run([shutil.which("gcc") or "cc", "-O1", str(src), "-o", str(exe)], check=True)
    capfd.readouterr()
    with pycore.open_tool("py-calls", binary=str(exe)) as tool:
        notice = tool.notice
    assert notice == (f"pycore: py-calls: {exe}: no Py_Version symbol (CPython before 3.11, or not CPython); "
                      "depth is counted from the probes since tracing began")
    assert capfd.readouterr() == ("", "")
