"""Where pycore's files for builds live: its BPF headers and its CMake package.

Installed, they are package data: ``pycore/include/`` (put there by
CMakeLists.txt) and ``pycore/cmake/``.  In a source checkout the headers
are ``bpf_src/`` itself, and that wins, so an edited header is the one
used.  An editable install spans both (``pycore.__path__`` lists the
source tree and site-packages).
"""

from __future__ import annotations

import os
import sys

from pycore.build.errors import BuildError

__all__ = ["HEADERS", "include_dir", "cmake_dir"]

# the headers pycore ships for BPF C: `#include "pycore.bpf.h"`
HEADERS = ("pycore.bpf.h", "pycore_usdt.bpf.h")


def _package_dirs() -> list[str]:
    # sys.modules, not `import pycore`: the package re-exports layers above this one
    return list(getattr(sys.modules["pycore"], "__path__", []))


def include_dir() -> str:
    """The directory to give clang with -I for ``pycore.bpf.h`` and ``pycore_usdt.bpf.h``."""
    dirs = _package_dirs()
    candidates = [os.path.join(os.path.dirname(d), "bpf_src") for d in dirs]
    candidates += [os.path.join(d, "include") for d in dirs]
    for d in candidates:
        if all(os.path.isfile(os.path.join(d, h)) for h in HEADERS):
            return d
    raise BuildError(f"pycore's BPF headers ({', '.join(HEADERS)}) are not in the installed package "
                     f"(looked in {', '.join(candidates)}): reinstall pycore")


def cmake_dir() -> str:
    """The directory holding ``pycoreConfig.cmake`` and ``PycoreBpf.cmake``."""
    candidates = [os.path.join(d, "cmake") for d in _package_dirs()]
    for d in candidates:
        if os.path.isfile(os.path.join(d, "pycoreConfig.cmake")):
            return d
    raise BuildError(f"pycore's CMake files are not in the installed package "
                     f"(looked in {', '.join(candidates)}): reinstall pycore")
