"""Show what this kernel and libbpf can do (trial loads, not version guesses).

Prints one line per feature: name, yes/no, and what was tried, the error
and what to do about it.  --json prints one JSON object instead.  Needs
root (or CAP_BPF and CAP_PERFMON): without them every trial would fail
for the wrong reason, so the command refuses with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object: feature -> {ok, detail, ...}")


def run(args: argparse.Namespace) -> int:
    from pycore.kernel.privileges import missing_privileges

    why = missing_privileges()
    if why:
        print(f"pycore features: {why}", file=sys.stderr)
        return 2

    from pycore.kernel.features import Features

    results = Features().detect()
    if args.json:
        json.dump({name: r.as_dict() for name, r in results.items()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    width = max(len(name) for name in results)
    for name, r in results.items():
        print(f"{name:<{width}}  {'yes' if r.ok else 'no ':<3}  {r.detail}")
    return 0
