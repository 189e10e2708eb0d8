"""List what is pinned on bpffs (maps, programs, links), or unpin it with --remove.

    pycore pins                              everything under /sys/fs/bpf
    pycore pins /sys/fs/bpf/myagent          an agent's pin_dir (BpfObject(..., pin_dir=...))
    pycore pins /sys/fs/bpf/myagent --remove unpin it all: maps are freed, links detached

Maps show their type, key and value sizes, max_entries and BTF key/value
types; links their program.  Exit status: 0, 1 if nothing is pinned there,
2 on errors (not on bpffs, no such directory, no privileges).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", nargs="?", default=None,
                        help="a directory on bpffs, or one pin (default: /sys/fs/bpf, recursively)")
    parser.add_argument("--remove", action="store_true",
                        help="unpin everything under DIR (DIR required) and remove the directories left empty")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per pin")


def run(args: argparse.Namespace) -> int:
    from pycore.errors import PinError
    from pycore.native import bpffs

    if args.remove and args.dir is None:
        raise PinError("pins --remove needs a DIR (the agent's pin_dir): it will not unpin everything "
                       f"under {bpffs.BPFFS_ROOT}")
    directory = args.dir or bpffs.BPFFS_ROOT
    entries = bpffs.remove(directory) if args.remove else bpffs.walk(directory)
    if args.json:
        json.dump([e.as_dict() for e in entries], sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif entries:
        verb = "unpinned " if args.remove else ""
        width = max(len(e.path) for e in entries)
        for e in entries:
            print(f"{verb}{e.path:<{width}}  {e.kind or '?':<4}  {e.id or '':>6}  {e.describe()}")
    else:
        print(f"nothing pinned under {directory}", file=sys.stderr)
    if args.remove:
        return 0
    return 0 if entries else 1
