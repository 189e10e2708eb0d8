"""The compile, defined once: ``pycore build``, the CMake function and pycore's own objects all run this.

Each source is compiled with ``clang -target bpf -O2 -g`` (``-g`` makes
the ``.BTF``/``.BTF.ext`` sections CO-RE relocates with), against the
given include directories, a ``vmlinux.h``, pycore's headers and libbpf's
headers, in that order, so a project's own ``vmlinux.h`` wins (pycore.bpf.h
includes ``<vmlinux.h>``, found through -I only).  Several sources are
linked into one object by ``bpftool gen object``.  Then ``llvm-strip -g``
drops the DWARF (BTF stays).  The output appears whole or not at all:
everything is built under a temporary name first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import TextIO

from pycore.build import toolchain
from pycore.build.errors import BuildError
from pycore.build.headers import include_dir
from pycore.build.vmlinux import KERNEL_BTF, cache_root, given_vmlinux_dir, vmlinux_dir

__all__ = ["CFLAGS", "BuildOptions", "Toolchain", "build", "check", "compile_command", "default_output",
           "toolchain_for"]

# What CO-RE needs (BPF target, BTF from -g, -O2: the verifier refuses what
# -O0 makes of most programs) and what pycore's sources hold to.
CFLAGS = ("-target", "bpf", "-O2", "-g", "-Wall", "-Werror=implicit-function-declaration")


@dataclasses.dataclass
class BuildOptions:
    """What ``pycore build`` was asked to do; see ``pycore build --help``."""

    sources: Sequence[str]
    output: str
    include_dirs: Sequence[str] = ()
    defines: Sequence[str] = ()
    arch: str | None = None
    btf: str | None = None
    vmlinux_h: str | None = None
    keep_debug: bool = False
    depfile: str | None = None
    clang: str | None = None
    verbose: bool = False


def default_output(source: str) -> str:
    """``dir/prog.bpf.c`` -> ``prog.bpf.o`` (in the current directory)."""
    base = os.path.basename(source)
    return (base[:-2] if base.endswith(".c") else base) + ".o"


def compile_command(clang: str, source: str, output: str, *, arch: str, include_dirs: Sequence[str],
                    defines: Sequence[str] = (), depfile: str | None = None,
                    depfile_target: str | None = None) -> list[str]:
    """The clang command line for one source."""
    cmd = [clang, *CFLAGS, f"-D__TARGET_ARCH_{arch}"]
    cmd += [f"-D{d}" for d in defines]
    for d in include_dirs:
        cmd += ["-I", d]
    if depfile:
        cmd += ["-MD", "-MF", depfile, "-MT", depfile_target or output]
    cmd += ["-c", source, "-o", output]
    return cmd


@dataclasses.dataclass
class Toolchain:
    """What a build of ``options`` will run and read, found on this machine."""

    arch: str
    clang: str
    llvm_strip: str | None
    bpftool: str | None
    include_dirs: list[str]  # the user's, then pycore's; vmlinux.h's goes between them (see build)
    libbpf_dir: str | None  # None: one of the user's directories has bpf/bpf_helpers.h


def toolchain_for(options: BuildOptions) -> Toolchain:
    """Find everything ``options`` needs, or raise BuildError naming what is missing."""
    for src in options.sources:
        if not os.path.isfile(src):
            raise BuildError(f"{src}: no such file")
    if options.btf and options.vmlinux_h:
        raise BuildError("--btf and --vmlinux-h both given: a vmlinux.h comes from one or the other")
    arch = toolchain.target_arch(options.arch)
    clang = toolchain.find_clang(options.clang)
    user_dirs = list(options.include_dirs)
    for d in user_dirs:
        if not os.path.isdir(d):
            raise BuildError(f"-I {d}: no such directory")
    libbpf = toolchain.libbpf_include_dir(user_dirs)
    return Toolchain(arch=arch, clang=clang,
                     llvm_strip=None if options.keep_debug else toolchain.find_llvm_strip(clang),
                     bpftool=toolchain.find_bpftool() if len(options.sources) > 1 else None,
                     include_dirs=[*user_dirs, include_dir()], libbpf_dir=libbpf)


def _vmlinux(options: BuildOptions) -> contextlib.AbstractContextManager[str]:
    return given_vmlinux_dir(options.vmlinux_h) if options.vmlinux_h else vmlinux_dir(options.btf)


def check(options: BuildOptions) -> list[tuple[str, str]]:
    """(what, where) for each thing a build would use; BuildError for the first one missing."""
    tools = toolchain_for(options)
    with _vmlinux(options) as vmlinux:
        header = os.path.join(vmlinux, "vmlinux.h")
    if options.vmlinux_h:
        where = os.path.abspath(options.vmlinux_h)
    elif os.path.exists(header):
        where = f"{header} (from {options.btf or KERNEL_BTF})"
    else:
        where = f"written from {options.btf or KERNEL_BTF} at each build ({cache_root()} is not writable)"
    return [
        ("clang", tools.clang),
        ("llvm-strip", tools.llvm_strip or ("not used (--keep-debug)" if options.keep_debug else "not found")),
        ("target", f"__TARGET_ARCH_{tools.arch}"),
        ("pycore headers", tools.include_dirs[-1]),
        ("libbpf headers", os.path.join(tools.libbpf_dir, "bpf") if tools.libbpf_dir else "from -I"),
        ("vmlinux.h", where),
    ]


def build(options: BuildOptions, stderr: TextIO | None = None) -> str:
    """Build ``options.output`` from ``options.sources``; returns its path or raises BuildError."""
    err = stderr or sys.stderr
    if not options.sources:
        raise BuildError("no source given")
    tools = toolchain_for(options)
    if tools.llvm_strip is None and not options.keep_debug:
        print(f"pycore build: llvm-strip not found: {options.output} keeps its DWARF debug info "
              f"(apt-get install llvm)", file=err)

    output = os.path.abspath(options.output)
    out_dir = os.path.dirname(output)
    os.makedirs(out_dir, exist_ok=True)
    with _vmlinux(options) as vmlinux_include, _scratch(out_dir) as scratch:
        user, pycore_dir = tools.include_dirs[:-1], tools.include_dirs[-1]
        dirs = [*user, vmlinux_include, pycore_dir, *([tools.libbpf_dir] if tools.libbpf_dir else [])]
        objects, depfiles = [], []
        for i, src in enumerate(options.sources):
            obj = os.path.join(scratch, f"{i}.o")
            dep = os.path.join(scratch, f"{i}.d") if options.depfile else None
            cmd = compile_command(tools.clang, src, obj, arch=tools.arch, include_dirs=dirs,
                                  defines=options.defines, depfile=dep, depfile_target=output)
            if err.isatty():
                cmd.insert(1, "-fcolor-diagnostics")
            _run(cmd, err, options.verbose, what=src, output=options.output)
            objects.append(obj)
            if dep:
                depfiles.append(dep)
        result = objects[0]
        if tools.bpftool:
            result = os.path.join(scratch, "linked.o")
            _run([tools.bpftool, "gen", "object", result, *objects], err, options.verbose,
                 what="bpftool gen object", output=options.output)
        if tools.llvm_strip:
            _run([tools.llvm_strip, "-g", result], err, options.verbose, what="llvm-strip -g",
                 output=options.output)
        if options.depfile:
            extra = [os.path.abspath(options.btf)] if options.btf else []
            _write_depfile(options.depfile, output, depfiles, extra)
        os.replace(result, output)
    return output


@contextlib.contextmanager
def _scratch(out_dir: str) -> Iterator[str]:
    """A temporary directory beside the output, so the final rename stays on one file system."""
    with tempfile.TemporaryDirectory(prefix=".pycore-build-", dir=out_dir) as d:
        yield d


def _run(cmd: list[str], err: TextIO, verbose: bool, what: str, output: str) -> None:
    if verbose:
        print(shlex.join(cmd), file=err)
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace")
    except OSError as e:
        raise BuildError(f"cannot run {cmd[0]}: {e.strerror}") from None
    if proc.stdout:
        err.write(proc.stdout)
        err.flush()
    if proc.returncode == 0:
        return
    if proc.returncode < 0:
        raise BuildError(f"{what}: {os.path.basename(cmd[0])} was killed by signal {-proc.returncode}; "
                         f"{output} not written")
    errors = len(re.findall(r"\berror:", proc.stdout))
    found = f"{errors} error{'s' if errors != 1 else ''}" if errors else f"exit status {proc.returncode}"
    raise BuildError(f"{what}: {os.path.basename(cmd[0])} failed ({found}, shown above); {output} not written")


_TOKEN = re.compile(r"(?:\\.|[^\s\\])+")


def _depfile_paths(text: str) -> list[str]:
    """The prerequisites of clang's make-style depfile (``target: dep dep \\`` lines)."""
    text = text.replace("\\\n", " ")
    _, _, deps = text.partition(": ")
    return [re.sub(r"\\(.)", r"\1", t).replace("$$", "$") for t in _TOKEN.findall(deps)]


def _write_depfile(path: str, target: str, depfiles: list[str], extra: list[str]) -> None:
    """One rule for the output, whatever number of sources made it (ninja wants one)."""
    deps: dict[str, None] = {}
    for d in depfiles:
        with open(d, encoding="utf-8", errors="surrogateescape") as f:
            deps.update(dict.fromkeys(_depfile_paths(f.read())))
    deps.update(dict.fromkeys(extra))

    def esc(p: str) -> str:
        return p.replace("$", "$$").replace(" ", "\\ ").replace("#", "\\#")

    lines = [f"{esc(target)}:"] + [f" {esc(p)}" for p in deps]
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(" \\\n".join(lines) + "\n")
