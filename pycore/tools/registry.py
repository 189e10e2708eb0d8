"""Which tools exist: name -> module, imported only when asked for.

To add a tool, write ``pycore/tools/MODULE.py`` defining ``TOOL`` (a
:class:`pycore.tools.api.Tool` subclass) and add one line to :data:`TOOLS`.
Kept as a plain table so ``pycore run NAME`` imports exactly one tool.
"""

from __future__ import annotations

import importlib
import importlib.util

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.tools.api import Tool

__all__ = ["TOOLS", "get", "names"]

TOOLS: dict[str, str] = {
    "fget-crack": "pycore.tools.fget_crack",
    "vfs-unlink": "pycore.tools.vfs_unlink",
    "lock-contention": "pycore.tools.lock_contention",
    "fd-leak": "pycore.tools.fd_leak",
    "print-args": "pycore.tools.print_args",
    "usdt-passwd": "pycore.tools.usdt_passwd",
    "pg-queries": "pycore.tools.pg_queries",
    "py-calls": "pycore.tools.py_calls",
    "net-drops": "pycore.tools.net_drops",
}


def names() -> list[str]:
    """Registered tool names whose module is present, in table order."""
    return [n for n, m in TOOLS.items() if importlib.util.find_spec(m) is not None]


def get(name: str) -> type[Tool]:
    """The Tool class registered as ``name``; KeyError naming the known ones if absent."""
    try:
        module = TOOLS[name]
    except KeyError:
        raise KeyError(f"no tool {name!r}; known: {', '.join(names())}") from None
    return importlib.import_module(module).TOOL
