"""Run a tool: pycore run NAME [-p PID | -c CMD] [-d SECONDS] [--json] [tool options].

'pycore tools' lists the tools; 'pycore run NAME --help' describes one.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run", "tools_help"]

_TOOLS = "\0tools\0"   # the epilog's place holder: the tools are imported only when help is printed


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def add_text(self, text: str | None) -> None:
        super().add_text(tools_help() if text == _TOOLS else text)


def tools_help() -> str:
    """Every tool and its options, from the tools' own Option declarations (what open_tool takes too)."""
    from pycore.tools import registry

    lines = ["tools and their options (open_tool(NAME, option=value) takes the same):"]
    for name in registry.names():
        tool = registry.get(name)
        usage = " ".join(o.flag if o.positional else f"[{o.flag}]" if o.type is bool
                         else f"[{o.flag} {o.metavar or o.name.upper()}]" for o in tool.options)
        lines.append(f"  {name} {usage}".rstrip())
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tool", metavar="NAME", help="the tool ('pycore tools' lists them)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its options ('pycore run NAME --help')")
    parser.epilog = _TOOLS
    parser.formatter_class = _HelpFormatter


def run(args: argparse.Namespace) -> int:
    from pycore.tools import registry
    from pycore.tools.api import OptionError, check_options
    from pycore.tools.runner import tool_parser

    try:
        tool_cls = registry.get(args.tool)
    except KeyError as exc:
        print(f"pycore run: {exc.args[0]}", file=sys.stderr)
        return 2
    # the parser and the checks are those open_tool uses: both come from the tool's Option declarations
    targs = tool_parser(tool_cls).parse_args(args.args)
    try:
        check_options(tool_cls, targs)
    except OptionError as exc:
        print(exc.cli, file=sys.stderr)
        return 2

    from pycore.kernel.privileges import missing_privileges

    why = missing_privileges()
    if why:
        print(f"pycore run: {why}", file=sys.stderr)
        return 2
    from pycore.tools.runner import Runner

    try:
        return Runner(tool_cls(targs)).run()
    except OptionError as exc:   # a value only the kernel can judge (print-args' FUNC not in BTF)
        print(exc.cli, file=sys.stderr)
        return 2
