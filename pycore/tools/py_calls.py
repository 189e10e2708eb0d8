"""py-calls: a CPython call flow from ``python:function__entry``/``__return``
(Debian's /usr/bin/python3.11), indented by depth like bcc's uflow."""

from __future__ import annotations

import argparse
from typing import Any

from pycore.tools.base import Method, Tool

PYTHON = "/usr/bin/python3.11"


class PyCalls(Tool):
    name = "py-calls"
    description = "Python call flow: file, function, line, indented by depth (USDT function__entry/return)"
    object = "py_calls"
    methods = (Method("usdt/python:function__entry+function__return",
                      ("function_entry", "function_return"), "usdt"),)
    event = "py_call_event"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--binary", default=None,
                            help=f"the python binary (default: the -p process's executable, else {PYTHON})")

    def attach(self, obj, method):  # noqa: ANN001
        import os

        from pycore.tools.usdt_common import attach_usdt

        binary = self.args.binary
        if binary is None:
            binary = PYTHON
            if self.args.pid:
                try:
                    binary = os.readlink(f"/proc/{self.args.pid}/exe")
                except OSError:
                    pass
        attach_usdt(obj, binary, self.args.pid,
                    {"function_entry": ("python", "function__entry"),
                     "function_return": ("python", "function__return")})

    def started(self, obj):  # noqa: ANN001
        if not self.args.json:
            self.out.write(f"{'PID':<8} {'TID':<8} CALL FLOW\n")
            self.out.flush()

    def format_event(self, ev: Any) -> str:
        arrow = "<- " if ev.is_return else "-> "
        indent = "  " * max(ev.depth - 1, 0)
        return f"{ev.pid:<8} {ev.tid:<8} {indent}{arrow}{ev.filename}:{ev.funcname}:{ev.lineno}"


TOOL = PyCalls
