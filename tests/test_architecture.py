"""The tree's architecture, checked: every import points down a layer, and no import circles.

docs/architecture.md draws the layers; pyproject.toml's [tool.importlinter] contracts say the
same, and `lint-imports` (import-linter) checks them here, so a fresh clone needs nothing beside
it. A module may import its own layer and the layers below it, at module level or inside a
function (both run); imports under ``if TYPE_CHECKING:`` are annotations and do not count.
import-linter's acyclic_siblings contract sees circles between the modules and folders of each
folder, not one through a package's own ``__init__``: test_no_module_import_circles does.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Run in a subprocess with `python -S` and the checkout first on the path, so that the files
# checked are ROOT's (or a copy's), never an installed pycore's (an editable install's finder
# would redirect `pycore` to its own checkout whatever sys.path says).
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

CIRCLES = """
import sys, grimp
graph = grimp.build_graph("pycore", "btf", exclude_type_checking_imports=True)
seen, circles = set(), []
for a in sorted(graph.modules):
    for b in sorted(graph.find_modules_directly_imported_by(a)):
        if a != b and graph.chain_exists(importer=b, imported=a):
            chain = [a, *graph.find_shortest_chain(importer=b, imported=a)]
            if frozenset(chain) not in seen:
                seen.add(frozenset(chain))
                circles.append(" -> ".join(chain))
print("\\n".join(circles))
print(f"circles={len(circles)}")
sys.exit(1 if circles else 0)
"""


def run_isolated(root: pathlib.Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    others = [p for p in sys.path if p and pathlib.Path(p).is_dir() and pathlib.Path(p).resolve() != ROOT]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), *others]), COLUMNS="500")
    return subprocess.run([sys.executable, "-S", "-c", code, *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def lint_imports(root: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return run_isolated(root, LINT, "--no-cache", "--no-logo")


def test_import_linter_contracts() -> None:
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout, r.stdout


def test_no_module_import_circles() -> None:
    r = run_isolated(ROOT, CIRCLES)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "circles=0", r.stdout + r.stderr


def copy_tree(dest: pathlib.Path) -> pathlib.Path:
    for pkg in ("pycore", "btf"):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest)
    return dest


def append(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write("\n" + text + "\n")


def broken(r: subprocess.CompletedProcess[str]) -> str:
    """The report's broken contracts, violations and all ('' when every contract is kept)."""
    return r.stdout.partition("Broken contracts")[2]


# what is added to a copy of the tree, the id of the contract it breaks (others may break too: an
# import up a layer is a circle too) and a line of the report that names the added import
BAD = {
    "elf imports lang (up)": ({"pycore/elf/__init__.py": "import pycore.lang"}, "layers",
                              "pycore.elf is not allowed to import pycore.lang"),
    "native imports listing (up)": ({"pycore/native/__init__.py": "from pycore.listing import patterns"},
                                    "layers", "pycore.native is not allowed to import pycore.listing"),
    "a folder in no layer": ({"pycore/newlayer/__init__.py": "import pycore.errors"}, "layers",
                             "- pycore.newlayer\n"),
    "btf imports pycore": ({"btf/types.py": "import pycore.errors"}, "btf-apart", "btf.types -> pycore.errors"),
    "build imports native": ({"pycore/build/errors.py": "import pycore.native"}, "build-below",
                             "pycore.build.errors -> pycore.native"),
    "native imports build": ({"pycore/native/__init__.py": "import pycore.build"}, "build-above",
                             "pycore.native -> pycore.build"),
    "two modules of lang import each other, in functions": (
        {"pycore/lang/zz_a.py": "def f():\n    import pycore.lang.zz_b",
         "pycore/lang/zz_b.py": "def g():\n    from pycore.lang import zz_a"}, "no-cycles", ".zz_"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_contracts_bite(tmp_path: pathlib.Path, case: str) -> None:
    """Each contract fails on a copy of the tree with one bad import added (the copy alone is
    checked), and the report names that import."""
    root = copy_tree(tmp_path)
    additions, contract, evidence = BAD[case]
    for rel, text in additions.items():
        append(root / rel, text)
    r = lint_imports(root)
    assert r.returncode == 1, r.stdout + r.stderr
    names = {c["id"]: c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
    assert f"{names[contract]} BROKEN" in r.stdout.splitlines(), r.stdout
    assert evidence in broken(r), r.stdout


# imports the layers allow: down a layer (lang's C declarations read elf's DWARF, which writes BTF),
# and an annotation's import up a layer
GOOD = {
    "lang imports elf": {"pycore/lang/zz_decl.py": "from pycore.elf import symbols"},
    "elf imports btf": {"pycore/elf/zz_dwarf.py": "import btf.writer"},
    "an import up, only for annotations": {
        "pycore/elf/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pycore.lang.checker"},
}


@pytest.mark.parametrize("case", sorted(GOOD))
def test_what_the_layers_allow(tmp_path: pathlib.Path, case: str) -> None:
    """Nothing breaks that was not broken in the copy before the import was added."""
    root = copy_tree(tmp_path)
    before = lint_imports(root)
    for rel, text in GOOD[case].items():
        append(root / rel, text)
    after = lint_imports(root)
    assert after.returncode == before.returncode and broken(after) == broken(before), after.stdout


def test_a_circle_through_a_package_init_is_found(tmp_path: pathlib.Path) -> None:
    """lang/__init__ -> lang.types -> lang (its __init__): acyclic_siblings does not see it."""
    root = copy_tree(tmp_path)
    append(root / "pycore/lang/__init__.py", "import pycore.lang.types")
    append(root / "pycore/lang/types.py", "import pycore.lang")
    r = run_isolated(root, CIRCLES)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "pycore.lang -> pycore.lang.types -> pycore.lang" in r.stdout or \
        "pycore.lang.types -> pycore.lang -> pycore.lang.types" in r.stdout, r.stdout


def test_one_import_style_in_pycore() -> None:
    """pycore imports its own modules absolutely (btf, a package apart, relatively); files headed
    '# Generated' (the grammar's tables) are left out."""
    relative = [str(p.relative_to(ROOT)) for p in (ROOT / "pycore").rglob("*.py")
                if not p.read_text().startswith("# Generated") and any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))]
    assert not relative, relative
