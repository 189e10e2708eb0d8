"""Print the directory of pycore's CMake package, for find_package(pycore CONFIG) in an agent's build.

    execute_process(COMMAND ${Python_EXECUTABLE} -m pycore cmake-dir
                    OUTPUT_VARIABLE pycore_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
    find_package(pycore CONFIG REQUIRED)
    pycore_add_bpf_object(counter SOURCES counter.bpf.c SKELETON INSTALL_DIR mypkg)
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include", action="store_true",
                        help="print the directory of pycore's BPF headers (pycore.bpf.h) instead")


def run(args: argparse.Namespace) -> int:
    from pycore.build.headers import cmake_dir, include_dir

    print(include_dir() if args.include else cmake_dir())
    return 0
