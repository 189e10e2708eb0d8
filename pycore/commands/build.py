"""Compile BPF C into a CO-RE object the way pycore builds its own (build time only).

Runs clang -target bpf -O2 -g -D__TARGET_ARCH_<arch> with pycore's headers
(#include "pycore.bpf.h": vmlinux.h, libbpf's bpf_helpers.h, bpf_tracing.h,
bpf_core_read.h, pycore_reserve()), a vmlinux.h written from the running
kernel's BTF (cached under ~/.cache/pycore/vmlinux) or from --btf FILE, and
libbpf's headers (libbpf-dev); several sources are linked into one object
with bpftool; then llvm-strip -g (BTF stays). The result loads with
pycore.BpfObject. Needs clang, llvm and libbpf-dev: apt-get install clang
llvm libbpf-dev. Errors are one line, exit status 2.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", nargs="*", metavar="SOURCE.bpf.c", help="BPF C source(s); several are linked into one object")
    parser.add_argument("-o", "--output", metavar="OUT.bpf.o",
                        help="the object to write (default: SOURCE's name with .o, in the current directory)")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                        help="look for headers here first (repeatable)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                        help="define a macro (repeatable)")
    parser.add_argument("--arch", metavar="ARCH",
                        help="__TARGET_ARCH_<ARCH> for bpf_tracing.h: x86, arm64, s390, powerpc, riscv, ... "
                             "(default: this machine's)")
    header = parser.add_mutually_exclusive_group()
    header.add_argument("--btf", metavar="FILE",
                        help="write vmlinux.h from this kernel BTF (raw, or an ELF vmlinux with .BTF) "
                             "instead of /sys/kernel/btf/vmlinux")
    header.add_argument("--vmlinux-h", metavar="FILE", help="use this ready vmlinux.h")
    parser.add_argument("--keep-debug", action="store_true", help="keep the DWARF debug info (no llvm-strip -g)")
    parser.add_argument("--clang", metavar="PATH", help="the clang to run (default: the first clang on PATH)")
    parser.add_argument("--depfile", metavar="FILE", help="write the headers the object depends on, make-style (for CMake/ninja)")
    parser.add_argument("--check", action="store_true",
                        help="build nothing: say which clang, headers and vmlinux.h a build would use, "
                             "or what is missing (exit 2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the commands run")


def run(args: argparse.Namespace) -> int:
    from pycore.build.compile import BuildOptions, build, check, default_output
    from pycore.build.errors import BuildError

    if args.check:
        options = BuildOptions(sources=args.sources, output=args.output or "", include_dirs=args.include_dirs,
                               arch=args.arch, btf=args.btf, vmlinux_h=args.vmlinux_h,
                               keep_debug=args.keep_debug, clang=args.clang)
        for what, where in check(options):
            print(f"{what + ':':<16} {where}")
        return 0
    if not args.sources:
        raise BuildError("no source given: pycore build SOURCE.bpf.c [-o OUT.bpf.o]")
    if args.output is None:
        if len(args.sources) > 1:
            raise BuildError("several sources need -o OUT.bpf.o")
        args.output = default_output(args.sources[0])
    build(BuildOptions(sources=args.sources, output=args.output, include_dirs=args.include_dirs,
                       defines=args.defines, arch=args.arch, btf=args.btf, vmlinux_h=args.vmlinux_h,
                       keep_debug=args.keep_debug, depfile=args.depfile, clang=args.clang,
                       verbose=args.verbose))
    return 0
