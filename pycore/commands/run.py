"""Run a tool: pycore run NAME [-p PID | -c CMD] [-d SECONDS] [--json] [tool options].

'pycore tools' lists the tools; 'pycore run NAME --help' describes one.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run", "tool_parser"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tool", metavar="NAME", help="the tool ('pycore tools' lists them)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its options ('pycore run NAME --help')")


def tool_parser(tool_cls) -> argparse.ArgumentParser:
    from pycore.tools.base import add_common_arguments

    parser = argparse.ArgumentParser(
        prog=f"pycore run {tool_cls.name}", description=tool_cls.description,
        epilog=f"attach methods, in order of preference: {tool_cls.attach_points()}")
    tool_cls.add_arguments(parser)
    add_common_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from pycore.tools import registry

    try:
        tool_cls = registry.get(args.tool)
    except KeyError as exc:
        print(f"pycore run: {exc.args[0]}", file=sys.stderr)
        return 2
    targs = tool_parser(tool_cls).parse_args(args.args)

    from pycore.privileges import missing_privileges

    why = missing_privileges()
    if why:
        print(f"pycore run: {why}", file=sys.stderr)
        return 2
    from pycore.tools.base import Runner

    return Runner(tool_cls(targs)).run()
