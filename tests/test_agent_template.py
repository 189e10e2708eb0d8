"""examples/agent-template, as its README says to install it: pycore built into a wheel, a directory
of wheels (pycore's, its dependencies', scikit-build-core's), then in a clean venv
``pip install --no-index --find-links wheels/ .`` (the template built against that pycore by
pycore_add_bpf_object, and installed, with no index: pycore's distribution, pycore-bpf, is not
published there, and the public index's "pycore" is an unrelated project); its console script run
against the real kernel with a workload, and mypy --strict over the
installed package, its generated skeleton included.

Slow (about 30 s the first time: pycore's wheel, the downloads, the venv, the template's build).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from tests.conftest import bpftool_show, prog_ids_of, require_root, running

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "examples" / "agent-template"
PACKAGE = "agent_template"

pytestmark = pytest.mark.slow

TIMINGS: dict[str, float] = {}


def run(argv: list[str | os.PathLike[str]], what: str, timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    TIMINGS[what] = time.monotonic() - t0
    assert r.returncode == 0, f"{what} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="session")
def pycore_wheels(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A directory holding pycore's wheel, built once per session from this tree
    (its own build directory: the editable install's is left alone)."""
    d = tmp_path_factory.mktemp("wheels")
    run([sys.executable, "-m", "pip", "wheel", "--progress-bar=off", "--no-deps", "-w", d,
         f"--config-settings=build-dir={d / 'build'}", ROOT], "pycore wheel")
    shutil.rmtree(d / "build")
    assert len(list(d.glob("pycore_bpf-*.whl"))) == 1
    return d


# The README's commands, run as written (from the template's directory, wheels/ beside it); the test
# checks the README still says exactly these.
README_DOWNLOAD = "pip download -d wheels/ wheels/pycore_bpf-0.1.0-*.whl scikit-build-core"
README_INSTALL = "pip install --no-index --find-links wheels/ ."


def test_readme_says_how_to_install_from_a_wheel_directory() -> None:
    text = (TEMPLATE / "README.md").read_text()
    for line in ("pip wheel /path/to/pycore -w wheels/ --no-deps", README_DOWNLOAD, README_INSTALL):
        assert f"\n{line}\n" in text, line
    assert "unrelated" in text and "pip install .\n" not in text


@pytest.fixture(scope="module")
def agent_venv(pycore_wheels: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A clean venv, and the template installed into it by the README's commands: a wheels/ directory
    with pycore's wheel, then what `pip download` adds to it, then `pip install --no-index
    --find-links wheels/ .` from a copy of the template (its build isolation gets scikit-build-core
    and pycore from wheels/ too). Returns the venv."""
    import glob
    import shlex

    venv = tmp_path_factory.mktemp("agent") / "venv"
    run([sys.executable, "-m", "venv", venv], "venv")
    py = venv / "bin" / "python"
    work = tmp_path_factory.mktemp("template") / "agent-template"
    shutil.copytree(TEMPLATE, work, ignore=shutil.ignore_patterns("build", "wheels", "*.egg-info"))
    (work / "wheels").mkdir()
    shutil.copy(next(pycore_wheels.glob("pycore_bpf-*.whl")), work / "wheels")

    def readme(line: str, what: str) -> None:
        argv = [a for word in shlex.split(line) for a in (sorted(glob.glob(word, root_dir=work)) or [word])]
        assert argv[0] == "pip"
        run([py, "-m", "pip", argv[1], "--progress-bar=off", *argv[2:]], what, cwd=work)

    readme(README_DOWNLOAD, "pip download")
    readme(README_INSTALL, "install from wheels/")
    return venv


def site_packages(venv: pathlib.Path) -> pathlib.Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def test_template_wheel_carries_object_and_skeleton(agent_venv: pathlib.Path,
                                                    record_property: Callable[[str, object], None]) -> None:
    for what, seconds in TIMINGS.items():  # the figures of this run: pytest -s, and the junit XML
        print(f"{what}: {seconds:.1f} s")
        record_property(what, f"{seconds:.1f}")
    pkg = site_packages(agent_venv) / PACKAGE
    installed = {p.name for p in pkg.iterdir()}
    assert {"counter.bpf.o", "counter_skel.py", "counter_skel.pyi", "cli.py", "py.typed"} <= installed, installed
    assert "class Counter(_skel.Skeleton):" in (pkg / "counter_skel.py").read_text()
    assert "counter.bpf.c" not in installed  # the wheel carries the object, not the source
    assert (pkg / "counter.bpf.o").read_bytes()[:4] == b"\x7fELF"
    # the pycore the template was built and runs against is this tree's (distribution pycore-bpf), not
    # PyPI's unrelated "pycore"
    r = run([agent_venv / "bin" / "python", "-c", "import pycore; print(pycore.__version__, pycore.__file__)"],
            "pycore version", cwd="/")
    version, path = r.stdout.split()
    assert version == __import__("pycore").__version__ and path.startswith(str(agent_venv))


def workload(tmp: pathlib.Path) -> tuple[pathlib.Path, int, int]:
    """Exec a copy of true five times, and run dd making ~40000 system calls; (true's path, dd's pid, execs)."""
    true = tmp / "agent-wl-true"
    shutil.copy("/bin/true", true)
    for _ in range(5):
        subprocess.run([true], check=True)
    dd = subprocess.run(["sh", "-c", "echo $$; exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none"],
                        capture_output=True, text=True, check=True)
    return true, int(dd.stdout), 5 + 2  # the sh exec'ing dd: two more execs


def test_agent_runs_against_the_kernel(agent_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    require_root()
    agent = agent_venv / "bin" / "agent-template"
    with running([str(agent), "-d", "4", "--json", "--top", "0"], cwd="/") as p:
        assert p.stderr is not None and p.stdout is not None
        ready = p.stderr.readline()
        assert "attached (on_exec, on_sys_enter)" in ready, ready + p.stderr.read()
        progs = prog_ids_of(p.pid)
        names = {prog.get("name") for prog in bpftool_show("prog") if prog["id"] in progs}
        assert {"on_exec", "on_sys_enter"} <= names, (progs, names)
        true, dd_pid, execs = workload(tmp_path)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    lines = [json.loads(line) for line in out.splitlines()]
    events = [line["exec"] for line in lines if "exec" in line]
    summary = lines[-1]["summary"]

    ours = [e for e in events if e["filename"] == str(true)]
    assert len(ours) == 5, events
    assert all(e["comm"] == true.name[:15] and e["ppid"] == os.getpid() and e["uid"] == 0 for e in ours)
    assert any(e["pid"] == dd_pid and e["filename"].endswith("/dd") and e["comm"] == "dd" for e in events)

    assert summary["execs_seen"] >= execs and summary["lost"] == 0
    by_pid = {row["pid"]: row for row in summary["syscalls"]}
    assert by_pid[dd_pid]["comm"] == "dd"  # renamed by the exec in the map too
    assert by_pid[dd_pid]["count"] >= 40000  # a read and a write per byte
    assert p.pid not in by_pid, "the .rodata setting ignore_tgid did not keep the agent's own calls out"
    # its own programs, by id: another agent (a suite run from another clone, beside this one) has
    # the same names
    loaded = {prog["id"]: prog.get("name") for prog in bpftool_show("prog")}
    assert not progs & set(loaded), \
        f"programs left loaded after the agent exited: {sorted(loaded[i] for i in progs & set(loaded))}"


def test_agent_errors_are_one_line(agent_venv: pathlib.Path) -> None:
    r = subprocess.run([agent_venv / "bin" / "agent-template", "-d", "-1"], capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert r.returncode == 2 and "-d: SECONDS must be positive" in r.stderr and "Traceback" not in r.stderr


def test_template_type_checks(agent_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """mypy --strict over the installed package, its generated skeleton included, against the pycore
    installed beside it; and the skeleton's types bite: a wrong global type, a misspelled map, field,
    ring or global, a field used as the wrong type, each fail the check on their line."""
    mypy = [sys.executable, "-m", "mypy", "--python-executable", str(agent_venv / "bin" / "python"),
            "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "mypy-cache")]
    r = subprocess.run([*mypy, "-p", PACKAGE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found in 4 source files" in r.stdout, r.stdout  # __init__, __main__, cli, counter_skel
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from agent_template.counter_skel import Counter, ExecEvent\n"
        "def f(skel: Counter, e: ExecEvent) -> None:\n"
        "    skel.rodata.ignore_tgid = 'me'\n"
        "    print(skel.maps.syscals)\n"
        "    print(e.filenam)\n"
        "    n: str = e.pid\n"
        "    print(skel.rings.event)\n"
        "    print(skel.bss.exec_seen, n)\n"
        "    for pid, v in skel.maps.syscalls.items():\n"
        "        print(pid + v.comm)\n")
    r = subprocess.run([*mypy, str(wrong)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = sorted({int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error: " in line})
    assert lines == [3, 4, 5, 6, 7, 8, 10], r.stdout
