"""List the tools 'pycore run' knows: what each does, where it attaches, and
whether it can run on this kernel (from the same trial loads as 'pycore features').
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_arguments", "run", "verdict"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per tool")
    parser.add_argument("--no-check", action="store_true",
                        help="do not measure this kernel (no root needed)")


def verdict(tool_cls, features) -> tuple[str, str | None]:
    """('yes'|'fallback'|'no', the method expected to be used)."""
    from pycore.tools.api import FEATURE_CHECKS

    for i, m in enumerate(tool_cls.methods):
        check = FEATURE_CHECKS.get(m.feature)
        if check is None or features.check(check):
            return ("yes" if i == 0 else "fallback"), m.name
    return "no", None


def run(args: argparse.Namespace) -> int:
    from pycore.tools import registry

    features = None
    if not args.no_check:
        from pycore.kernel.privileges import missing_privileges

        if missing_privileges() is None:
            from pycore.kernel.features import Features

            features = Features()
    rows = []
    for name in registry.names():
        cls = registry.get(name)
        state, method = verdict(cls, features) if features else ("?", None)
        rows.append((name, cls, state, method))
    if args.json:
        for name, cls, state, method in rows:
            options = [{"name": o.name, "flag": o.flag, "type": o.type.__name__, "default": o.default,
                        "required": o.required, "help": o.help} for o in cls.options]
            print(json.dumps({"name": name, "description": cls.description,
                              "attach": [m.name for m in cls.methods], "options": options,
                              "runs_here": state, "method": method}))
        return 0
    width = max(len(r[0]) for r in rows)
    for name, cls, state, method in rows:
        mark = {"yes": "ok", "fallback": "ok (fallback)", "no": "cannot run here", "?": "not checked"}[state]
        print(f"{name:<{width}}  {cls.description}")
        print(f"{'':<{width}}  attach: {cls.attach_points()}  [{mark}{': ' + method if state == 'fallback' else ''}]")
    if features is None and not args.no_check:
        print("pycore tools: run as root to check which tools can run on this kernel", file=sys.stderr)
    return 0
