"""Locate the BPF objects shipped inside the package.

The build (CMakeLists.txt, driven by scikit-build-core on ``pip install``)
compiles every ``bpf_src/**/NAME.bpf.c`` and installs ``NAME.bpf.o`` as
package data in ``pycore/bpf/``. Nothing is compiled at run time.

The directory is looked up in each entry of ``pycore.__path__`` (an editable
install redirects imports to the source tree while the built objects live in
site-packages, so the package may span several directories), and the
environment variable ``PYCORE_BPF_DIR``, when set, takes precedence.
"""

from __future__ import annotations

import os
import pathlib
import sys

__all__ = ["BUILD_HINT", "bpf_dirs", "object_path", "available_objects"]

BUILD_HINT = (
    "the BPF objects are built from bpf_src/ when the package is installed: "
    "run ./dev.sh (or pip install -e . with clang, llvm and libbpf-dev present)"
)

_SUFFIX = ".bpf.o"


def bpf_dirs() -> list[pathlib.Path]:
    """Directories searched for ``NAME.bpf.o``, in order of precedence."""
    dirs: list[pathlib.Path] = []
    env = os.environ.get("PYCORE_BPF_DIR")
    if env:
        dirs.append(pathlib.Path(env))
    # sys.modules, not `import pycore`: the package re-exports the layers above this one
    for entry in getattr(sys.modules[__name__.partition(".")[0]], "__path__", []):
        d = pathlib.Path(entry) / "bpf"
        if d not in dirs:
            dirs.append(d)
    return dirs


def object_path(name: str) -> pathlib.Path:
    """Path of the shipped object ``pycore/bpf/NAME.bpf.o``.

    ``name`` is the program's base name (``"selftest"``); a trailing
    ``.bpf.o`` is accepted. Raises :class:`FileNotFoundError` when it is
    not installed.
    """
    if name.endswith(_SUFFIX):
        name = name[: -len(_SUFFIX)]
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"invalid BPF object name: {name!r}")
    dirs = bpf_dirs()
    for d in dirs:
        p = d / (name + _SUFFIX)
        if p.is_file():
            return p
    searched = ", ".join(str(d) for d in dirs) or "(no directory)"
    raise FileNotFoundError(
        f"BPF object {name}{_SUFFIX} not found (searched {searched}); {BUILD_HINT}"
    )


def available_objects() -> list[str]:
    """Sorted base names of every shipped ``NAME.bpf.o``."""
    names: set[str] = set()
    for d in bpf_dirs():
        if d.is_dir():
            names.update(
                p.name[: -len(_SUFFIX)] for p in d.iterdir() if p.name.endswith(_SUFFIX)
            )
    return sorted(names)
