"""The tree's architecture, checked: no import circles, and every import points down a layer.

docs/architecture.md draws the layers; this is the same list. A module may
import its own layer and the layers below it, at module level or inside a
function (both run); imports under ``if TYPE_CHECKING:`` are annotations and
do not count.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CYCLES_TOOL = ROOT.parent / "shared" / "tools" / "import-cycles.py"

# bottom first; a module belongs to the longest prefix listed
LAYERS: list[tuple[str, ...]] = [
    ("btf",),
    ("pycore.errors", "pycore.hist", "pycore.record"),
    ("pycore.build",),  # build time only: errors and btf below it; only commands.build imports it
    ("pycore.asm",),
    ("pycore.native",),
    ("pycore.link",),
    ("pycore.kernel",),
    ("pycore.elf",),
    ("pycore.listing",),
    ("pycore.skel",),  # typed skeletons: native below it; generated modules import pycore.skel
    ("pycore.lang",),
    ("pycore.tools",),
    ("pycore.embed",),
    ("pycore.commands", "pycore.cli", "pycore.__main__", "pycore"),
]


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in ("pycore", "btf"):
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def runtime_imports(path: pathlib.Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for e in child.orelse:
                    walk(e)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in child.names)
            walk(child)

    walk(tree)
    return {m for m in found if m.split(".")[0] in ("pycore", "btf")}


def test_no_import_circles() -> None:
    assert CYCLES_TOOL.is_file(), f"{CYCLES_TOOL} is missing (shared/ must sit beside the checkout)"
    r = subprocess.run([sys.executable, str(CYCLES_TOOL), str(ROOT), "pycore", "btf"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "circles=0", r.stdout


def test_every_import_points_down() -> None:
    mods = modules()
    wrong = []
    for module, path in sorted(mods.items()):
        if module == "pycore":
            continue  # the package's lazy re-exports (pycore.BpfObject, ...) are the public face
        mine = layer_of(module)
        assert mine >= 0, f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md"
        for target in runtime_imports(path, module):
            # `from pycore.native import libbpf` names a module; `from x import name` its parent
            while target not in mods and "." in target:
                target = target.rpartition(".")[0]
            if target in mods and layer_of(target) > mine:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that point up a layer:\n" + "\n".join(wrong)


def test_one_import_style_in_pycore() -> None:
    """pycore imports its own modules absolutely (btf, a package apart, relatively); generated
    code (lark's standalone parser, whose dead branches import lark's own modules) is not ours."""
    relative = [str(p.relative_to(ROOT)) for p in (ROOT / "pycore").rglob("*.py")
                if not p.read_text().startswith("# Generated") and any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))]
    assert not relative, relative
