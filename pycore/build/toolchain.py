"""The tools a BPF build needs, found on this machine, or a BuildError saying how to get them."""

from __future__ import annotations

import os
import platform
import shutil

from pycore.build.errors import BuildError

__all__ = ["APT_HINT", "ARCHES", "find_clang", "find_llvm_strip", "find_bpftool", "libbpf_include_dir",
           "target_arch"]

APT_HINT = "apt-get install clang llvm libbpf-dev"

# Newest first: a bare `clang` wins, then the versioned names Debian and Ubuntu install.
_CLANG_NAMES = ("clang", *(f"clang-{v}" for v in range(21, 13, -1)))

# bpf_tracing.h's __TARGET_ARCH_<arch> names, and what platform.machine() and
# Debian call the same machines.
ARCHES = ("x86", "arm64", "arm", "s390", "powerpc", "riscv", "mips", "sparc", "loongarch")
_ALIASES = {
    "x86_64": "x86", "amd64": "x86", "i386": "x86", "i686": "x86",
    "aarch64": "arm64", "armv7l": "arm", "armhf": "arm", "armel": "arm",
    "s390x": "s390", "ppc64le": "powerpc", "ppc64el": "powerpc", "ppc64": "powerpc",
    "riscv64": "riscv", "mips64": "mips", "mips64el": "mips", "mipsel": "mips",
    "sparc64": "sparc", "loongarch64": "loongarch", "loong64": "loongarch",
}


def find_clang(explicit: str | None = None) -> str:
    """Path of the clang to use: ``explicit`` if given, else the first clang on PATH."""
    if explicit:
        path = shutil.which(explicit)
        if path is None:
            raise BuildError(f"clang {explicit!r} not found or not executable")
        return path
    for name in _CLANG_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise BuildError(f"clang not found on PATH: it compiles BPF C ({APT_HINT})")


def find_llvm_strip(clang: str) -> str | None:
    """llvm-strip from clang's own LLVM first (``/usr/lib/llvm-N/bin``), else from PATH; None if absent."""
    real_dir = os.path.dirname(os.path.realpath(clang))
    beside = os.path.join(real_dir, "llvm-strip")
    if os.access(beside, os.X_OK):
        return beside
    suffix = os.path.basename(clang).removeprefix("clang")  # "" or "-14"
    for name in dict.fromkeys((f"llvm-strip{suffix}", "llvm-strip")):
        path = shutil.which(name)
        if path:
            return path
    return None


def find_bpftool() -> str:
    """bpftool, which links several objects into one (``bpftool gen object``)."""
    path = shutil.which("bpftool") or shutil.which("bpftool", path="/usr/sbin:/sbin:/usr/local/sbin")
    if path is None:
        raise BuildError("bpftool not found: linking several sources into one object needs it "
                         "(apt-get install bpftool), or build one object per source")
    return path


def libbpf_include_dir(include_dirs: list[str]) -> str | None:
    """Where ``bpf/bpf_helpers.h`` lives: None when one of ``include_dirs`` has it, else a system directory."""
    if any(os.path.isfile(os.path.join(d, "bpf", "bpf_helpers.h")) for d in include_dirs):
        return None
    system = ("/usr/include", "/usr/local/include")
    for d in system:
        if os.path.isfile(os.path.join(d, "bpf", "bpf_helpers.h")):
            return d
    raise BuildError(f"libbpf's headers (bpf/bpf_helpers.h) not found in {', '.join(system)}: "
                     f"apt-get install libbpf-dev, or give -I DIR with DIR/bpf/bpf_helpers.h")


def target_arch(name: str | None = None) -> str:
    """The ``__TARGET_ARCH_<arch>`` name for ``name`` (an arch or machine name), this machine's by default."""
    wanted = (name or platform.machine()).lower()
    arch = _ALIASES.get(wanted, wanted)
    if arch not in ARCHES:
        origin = "--arch" if name else f"this machine ({platform.machine()})"
        raise BuildError(f"{origin}: unknown BPF target architecture {wanted!r}; one of {', '.join(ARCHES)}")
    return arch
