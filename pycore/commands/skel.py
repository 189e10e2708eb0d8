"""Generate a typed Python skeleton (a module and its .pyi) for a BPF object, from its BTF.

    pycore skel OBJ.bpf.o [-o OUT.py] [--ring MAP=STRUCT ...] [--bytes-map MAP ...] [--class NAME]

OUT.py (default: OBJ_skel.py in the current directory) holds one class,
Counter for counter.bpf.o, with typed attributes for the object's programs,
maps (key/value dataclasses), globals (rodata set before load, bss/data read
live) and ring buffers (their event dataclass): Counter.open() -> load() ->
attach(). OUT.pyi beside it types it for mypy. A ring buffer's struct comes
from PYCORE_RING_EVENT(map, struct NAME) in the C source (pycore.bpf.h) or
--ring. Build time only: the object is read, not loaded. Errors are one line,
exit status 2, and then nothing is written.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ.bpf.o", help="a BPF object with BTF (pycore build makes one)")
    parser.add_argument("-o", "--output", metavar="OUT.py",
                        help="the module to write, and OUT.pyi beside it (default: OBJ_skel.py here)")
    parser.add_argument("--ring", action="append", default=[], metavar="MAP=STRUCT",
                        help="the struct ring buffer MAP carries (repeatable; overrides PYCORE_RING_EVENT)")
    parser.add_argument("--bytes-map", action="append", default=[], metavar="MAP",
                        help="type a map whose key/value types are not in BTF as bytes (repeatable)")
    parser.add_argument("--class", dest="class_name", metavar="NAME",
                        help="the skeleton class's name (default: from the object's, counter.bpf.o -> Counter)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")


def run(args: argparse.Namespace) -> int:
    from pycore.skel.generate import generate

    py, pyi = generate(args.object, args.output, args.class_name, args.ring, args.bytes_map)
    if not args.quiet:
        print(f"{py} {pyi}")
    return 0
