"""py-calls: a CPython call flow from ``python:function__entry``/``__return``
(Debian's /usr/bin/python3.11), indented by depth like bcc's uflow.

Two things make it right on CPython 3.11, where a plain entry/return pair is
not enough (see bpf_src/tools/py_calls.bpf.c):

- 3.11 fires ``function__entry`` only on its tracing path, taken while the
  ``line`` probe's semaphore is up, so ``line`` is attached too (a program
  that does nothing: the uprobe's reference counter raises the semaphore);
- the depth is the length of the interpreter's own frame chain, walked in
  BPF with the offsets of :mod:`pycore.elf.cpython`, so it is the real depth
  even when tracing starts mid-run (``-p``).

For an interpreter without a known layout the depth is counted from the
probes since tracing began (uflow's way) and stderr says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, Tool

PYTHON = "/usr/bin/python3.11"


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """A Python function entered or returned from: one event (``struct py_call_event``), as ``open_tool`` yields it."""

    pid: int = 0
    tid: int = 0
    depth: int = 0
    lineno: int = 0
    is_return: int = 0
    pad: bytes = bytes(7)
    filename: str = ""
    funcname: str = ""


class PyCalls(Tool):
    name = "py-calls"
    description = "Python call flow: file, function, line, indented by depth (USDT function__entry/return)"
    object = "py_calls"
    methods = (Method("usdt/python:function__entry+function__return+line",
                      ("function_entry", "function_return", "line_enable"), "usdt"),)
    event = "py_call_event"
    event_type = Event

    options = (Option("binary", str, help="the python binary (default: the -p process's executable, "
                                          f"the -c command's, else {PYTHON})"),)

    def binary(self) -> str:
        """The file whose probes are attached."""
        import os
        import shlex
        import shutil

        if self.args.binary:
            return self.args.binary
        if self.args.pid:
            try:
                return os.readlink(f"/proc/{self.args.pid}/exe")
            except OSError:
                return PYTHON   # attach says the process does not exist
        if self.args.cmd:
            argv = shlex.split(self.args.cmd)
            found = shutil.which(argv[0]) if argv else None
            if found:
                return os.path.realpath(found)
        return PYTHON

    def configure(self, obj, method):  # noqa: ANN001
        import os

        from pycore.elf.cpython import PythonBinary, layout_for
        from pycore.elf.usdt import UsdtFile, check_binary

        path = self.binary()
        check_binary(path)
        with UsdtFile(path) as f:   # no probes: one line, exit 2, before any notice
            for name in ("function__entry", "function__return", "line"):
                f.probe("python", name)
            python = PythonBinary(f)
        self.runtime = None
        obj.globals["self_tgid"] = os.getpid()
        layout, why = layout_for(python)
        if layout is not None and not layout.gil_holder:
            layout, why = None, f"{why}: its _PyRuntime does not name the thread holding the GIL (3.11's does)"
        if layout is None:
            print(f"pycore: py-calls: {path}: {why}; depth is counted from the probes "
                  "since tracing began", file=self.err)
            return
        self.runtime = python.runtime_address()
        obj.globals["walk_frames"] = 1
        obj.globals["off_tstate_current"] = layout.tstate_current
        obj.globals["off_tstate_thread_id"] = layout.tstate_thread_id
        obj.globals["off_tstate_cframe"] = layout.tstate_cframe
        obj.globals["off_cframe_frame"] = layout.cframe_current_frame
        obj.globals["off_frame_previous"] = layout.frame_previous

    def attach(self, obj, method):  # noqa: ANN001
        from pycore.tools.usdt_common import attach_usdt

        # -c: the held child's pid (targ_tgid), so only its semaphores go up
        pid = self.args.pid or obj.globals["targ_tgid"] or -1
        runtime_at = obj.maps["runtime_at"]

        def locate_runtime(cookie: int, probe, i: int) -> None:  # noqa: ANN001
            # before the link: a hit that finds no delta has no depth (-1)
            if self.runtime is not None and probe.name != "line":
                runtime_at[cookie] = self.runtime - probe.locations[i].address

        attach_usdt(obj, self.binary(), pid,
                    {"function_entry": ("python", "function__entry"),
                     "function_return": ("python", "function__return"),
                     "line_enable": ("python", "line")}, on_spec=locate_runtime)

    def started(self, obj):  # noqa: ANN001
        if not self.args.json:
            self.out.write(f"{'PID':<6} {'TID':<6} CALL FLOW\n")
            self.out.flush()

    def format_event(self, ev: Any) -> str:
        arrow = "<- " if ev.is_return else "-> "
        indent = "  " * max(ev.depth - 1, 0)
        return f"{ev.pid:<6} {ev.tid:<6} {indent}{arrow}{ev.filename}.{ev.funcname}:{ev.lineno}"

    def event_json(self, ev: Any) -> dict[str, Any]:
        return {"pid": ev.pid, "tid": ev.tid, "event": "return" if ev.is_return else "entry",
                "depth": ev.depth, "filename": ev.filename, "funcname": ev.funcname, "lineno": ev.lineno}

    def summary(self, obj):  # noqa: ANN001
        unread = obj.globals["frames_unread"]
        if unread:
            print(f"pycore: py-calls: {unread} events without depth (the interpreter's frames "
                  "could not be read; shown at depth -1)", file=self.err)
        return ""

    def summary_json(self, obj):  # noqa: ANN001
        self.summary(obj)
        return None


TOOL = PyCalls
