"""pycore's distribution is pycore-bpf (the "pycore" on the public index is an unrelated project): the
installed metadata says so, and every message and doc that tells users what to pip install names it,
with extras the project has. The messages are checked where they are printed: in a venv whose
site-packages is this one's without prometheus_client, numpy and capstone."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = PROJECT["name"]
EXTRAS = set(PROJECT["optional-dependencies"])
# `pip install [options] 'NAME[extra,...]'`, quoted or not
PIP_EXTRA = re.compile(r"pip install\b[^\n`]*?'?([A-Za-z0-9_.-]+)\[([\w,]+)\]")


def test_distribution_name_and_metadata() -> None:
    assert NAME == "pycore-bpf"
    dist = importlib.metadata.distribution(NAME)
    import pycore
    assert dist.version == pycore.__version__
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"pycore": "pycore.cli:main"}  # the command keeps its name
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("pycore")  # none left from before the rename (./dev.sh removes it)


def _texts() -> list[pathlib.Path]:
    files = [ROOT / "README.md", ROOT / "dev.sh", *(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").rglob("*.py")]
    files += [p for p in (ROOT / "examples").rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".toml", ".txt"}
              and "build" not in p.parts]
    files += list((ROOT / "pycore").rglob("*.py"))
    files += [p for p in (ROOT / ".ci").rglob("*") if p.is_file()]
    return files


def test_every_pip_install_names_the_distribution() -> None:
    found: list[tuple[str, str, str]] = []
    for path in _texts():
        text = path.read_text(errors="replace")
        rel = str(path.relative_to(ROOT))
        for m in PIP_EXTRA.finditer(text):
            found.append((rel, m.group(1), m.group(2)))
        assert not re.search(r"(?<![\w-])pycore\[[a-z][\w,]*\]", text), f"{rel} names the distribution 'pycore[...]'"
        assert not re.search(r"""["']pycore\s*[~=<>!]=""", text), f"{rel} requires 'pycore' by its old name"
    assert {(rel, extra) for rel, _, extra in found} >= {
        ("pycore/commands/serve.py", "prometheus"), ("pycore/native/codec.py", "numpy"),
        ("pycore/elf/symbols.py", "disasm"), ("docs/serve.md", "prometheus"), ("README.md", "prometheus")}, found
    for rel, name, extras in found:
        assert name in (NAME, "."), f"{rel}: pip install '{name}[{extras}]' is not {NAME}"
        assert set(extras.split(",")) <= EXTRAS, f"{rel}: no extra {extras} in pyproject.toml ({sorted(EXTRAS)})"


@pytest.fixture(scope="module")
def venv_without_extras(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A venv whose site-packages holds links to this venv's, pycore-bpf's editable install included,
    except prometheus_client, numpy and capstone (the 'prometheus', 'numpy' and 'disasm' extras)."""
    venv = tmp_path_factory.mktemp("noextras") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    ours = pathlib.Path(sysconfig.get_paths()["purelib"])
    theirs = next((venv / "lib").glob("python3*/site-packages"))
    left_out = re.compile(r"(prometheus_client|numpy|capstone)([-.]|$)", re.I)
    for entry in ours.iterdir():
        if not left_out.match(entry.name):
            (theirs / entry.name).symlink_to(entry)
    return venv


def _run(venv: pathlib.Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(venv / "bin" / "python"), *argv], capture_output=True, text=True, timeout=60,
                          cwd="/", env=env)


def test_the_venv_lacks_the_extras(venv_without_extras: pathlib.Path) -> None:
    r = _run(venv_without_extras, "-c", "import importlib.metadata as m, importlib.util as u, pycore\n"
             f"print(m.version({NAME!r}), pycore.__file__)\n"
             "print([n for n in ('prometheus_client', 'numpy', 'capstone') if u.find_spec(n)])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"0.1.0 {ROOT / 'pycore' / '__init__.py'}", "[]"]


def test_serve_without_prometheus_client(venv_without_extras: pathlib.Path) -> None:
    r = _run(venv_without_extras, "-m", "pycore", "serve", "--script", "/dev/null")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"pycore serve: needs prometheus_client (pip install '{NAME}[prometheus]')\n"


def test_numpy_dtype_without_numpy(venv_without_extras: pathlib.Path) -> None:
    r = _run(venv_without_extras, "-c", "from pycore.native.object import BpfObject\n"
             "from pycore.native.shipped import object_path\n"
             "from pycore.native.codec import decoder_for\n"
             "with BpfObject(object_path('test_maps')) as obj:\n"
             "    try:\n        decoder_for(obj.btf, 'tm_value').numpy_dtype()\n"
             "    except ImportError as e:\n        print(e)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"Codec.numpy_dtype() needs numpy: pip install '{NAME}[numpy]'\n"


def test_uprobe_offset_without_capstone(venv_without_extras: pathlib.Path) -> None:
    r = _run(venv_without_extras, "-c", "from pycore.elf.symbols import check_offset, find_function\n"
             "print(check_offset('/bin/bash', find_function('/bin/bash', 'readline'), 1))")
    assert r.returncode == 0, r.stderr
    assert f"pip install '{NAME}[disasm]'" in r.stdout, r.stdout
