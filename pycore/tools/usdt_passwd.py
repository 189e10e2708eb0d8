"""usdt-passwd: usernames and home directories seen by the usdt-passwd demo
(``passwd:passwdfound``, the USDT lab's exercise), at every location."""

from __future__ import annotations

import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, Tool


def demo_binary() -> str:
    """The demo built by CMake from examples/usdt-passwd (installed next to the BPF objects)."""
    from pycore.native.shipped import bpf_dirs

    for d in bpf_dirs():
        p = d / "usdt-passwd"
        if p.is_file():
            return str(p)
    from pycore.elf.stapsdt import UsdtError

    raise UsdtError("usdt-passwd demo not built (needs sys/sdt.h: Debian systemtap-sdt-dev; ./dev.sh setup)")


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """A user the demo found: one event (``struct passwd_event``), as ``open_tool`` yields it."""

    pid: int = 0
    cookie: int = 0
    username: str = ""
    homedir: str = ""


class UsdtPasswd(Tool):
    name = "usdt-passwd"
    description = "usernames and home directories from the usdt-passwd demo's passwdfound probe"
    object = "usdt_passwd"
    methods = (Method("usdt/passwd:passwdfound", ("passwdfound",), "usdt"),)
    event = "passwd_event"
    event_type = Event

    options = (Option("binary", str, help="the usdt-passwd binary (default: the built demo)"),)

    def attach(self, obj, method):  # noqa: ANN001
        from pycore.tools.usdt_common import attach_usdt

        attach_usdt(obj, self.args.binary or demo_binary(), self.args.pid,
                    {"passwdfound": ("passwd", "passwdfound")})

    def started(self, obj):  # noqa: ANN001
        if not self.args.json:
            self.out.write(f"{'PID':<8} {'USERNAME':<20} HOMEDIR\n")
            self.out.flush()

    def format_event(self, ev: Any) -> str:
        return f"{ev.pid:<8} {ev.username:<20} {ev.homedir}"


TOOL = UsdtPasswd
