"""The Tool API: a ready-made tracer that ``pycore run NAME`` runs.

A tool is one precompiled BPF object (``bpf_src/tools/NAME.bpf.c``) plus a
:class:`Tool` subclass that says how to attach it, sets its parameters as
``.rodata`` before load, and renders what comes back (ring-buffer events as
they arrive, map aggregations at the end).  This module does the rest, the
same way for every tool (:mod:`pycore.tools.runner` runs it):

- common options: ``-p PID`` (the object's ``targ_tgid`` .rodata, filtered
  in the kernel), ``-c CMD`` (start CMD held before exec, trace its pid,
  stop when it exits), ``-d SECONDS`` (``-d 0``: attach, print the summary,
  exit), ``--json`` (one JSON object per line);
- attach-method fallback: :attr:`Tool.methods` lists ways to attach in order
  of preference.  Each is tried for real (load + attach: the kernel's answer,
  not a guess from the version), the first that works is used, stderr says
  so when it is not the first, and when none works the error names what is
  missing and what would work;
- clean stop: Ctrl-C/SIGTERM/-d/CMD exit end the loop, the summary is
  printed, and the object is closed, so no program or link stays attached.

A minimal tool (``bpf_src/tools/opens.bpf.c`` defines ``targ_tgid`` via
``#include "tools/tools.bpf.h"``, a ring buffer ``events`` of ``struct
opens_event`` and the programs ``fexit_open`` and ``tp_open``)::

    from pycore.tools.api import Method, Tool

    class Opens(Tool):
        name = "opens"
        description = "files opened, by process"
        object = "opens"                       # pycore/bpf/opens.bpf.o
        methods = (Method("fexit/do_sys_openat2", ("fexit_open",), "fexit"),
                   Method("tracepoint/syscalls/sys_exit_openat", ("tp_open",), "tracepoint"))
        event = "opens_event"                  # None: no ring buffer

        @classmethod
        def add_arguments(cls, parser):
            parser.add_argument("--min-fd", type=int, default=0)

        def configure(self, obj, method):      # before load: .rodata
            obj.globals["min_fd"] = self.args.min_fd

        def format_event(self, ev):            # a dataclass from the ring buffer
            return f"{ev.comm} {ev.name}"

    TOOL = Opens                               # and a line in pycore/tools/registry.py

Override :meth:`Tool.attach` for attach points the section name cannot
express (uprobes/USDT: ``obj.programs[p].attach_usdt(...)``), and
:meth:`Tool.summary` / :meth:`Tool.summary_json` for end-of-run output.
"""

from __future__ import annotations

import sys

from pycore.errors import PycoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, ClassVar, TextIO

    from pycore.native.object import BpfObject

__all__ = ["Method", "Tool", "NoMethod", "FEATURE_CHECKS", "NEEDS"]

# Method.feature -> the pycore.kernel.features check that predicts it (None: always there).
FEATURE_CHECKS: dict[str, str | None] = {
    "fentry": "fentry", "fexit": "fexit", "tp_btf": "tp_btf", "raw_tp": "tp_btf",
    "tracepoint": "tracefs", "kprobe": "kprobes", "uprobe": None, "usdt": "uprobe_ref_ctr",
}

# What each kind of attach point needs, said to users when it is missing.
NEEDS: dict[str, str] = {
    "fentry": "a kernel that allows BPF trampolines (Linux >= 5.5 with BTF and ftrace not blocked; "
              "'pycore features' shows fentry: yes), e.g. Debian's stock 6.1 or 6.12 kernels",
    "fexit": "a kernel that allows BPF trampolines (Linux >= 5.5 with BTF and ftrace not blocked; "
             "'pycore features' shows fexit: yes), e.g. Debian's stock 6.1 or 6.12 kernels",
    "tp_btf": "BTF-typed tracepoints (Linux >= 5.5 with /sys/kernel/btf/vmlinux)",
    "raw_tp": "raw tracepoints (Linux >= 4.17)",
    "tracepoint": "tracefs and the tracepoint (CONFIG_FTRACE_SYSCALLS for syscalls:*)",
    "kprobe": "CONFIG_KPROBES",
    "uprobe": "CONFIG_UPROBE_EVENTS",
    "usdt": "CONFIG_UPROBE_EVENTS with reference counters (Linux >= 4.20)",
}


class Method:
    """One way for a tool to attach.

    ``name`` is what users read (``"fexit/fget"``); ``programs`` are the
    object's programs loaded and attached for it (the others are not
    loaded); ``feature`` is its kind, a key of :data:`NEEDS`; ``note`` says
    what differs when this method is the one used (shown with the fallback
    notice).
    """

    __slots__ = ("name", "programs", "feature", "note")

    def __init__(self, name: str, programs: tuple[str, ...], feature: str, note: str = "") -> None:
        self.name = name
        self.programs = tuple(programs)
        self.feature = feature
        self.note = note

    def __repr__(self) -> str:
        return f"Method({self.name!r}, {self.programs!r}, {self.feature!r})"


class NoMethod(PycoreError):
    """No attach method of a tool works on this kernel; ``str()`` says why and what would."""


class Tool:
    """Base of every tool; subclasses set the class attributes and override hooks.

    An instance lives for one run; ``self.args`` holds the parsed options,
    ``self.method`` the attach method in use, ``self.out`` the output stream.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    object: ClassVar[str]
    methods: ClassVar[tuple[Method, ...]]
    event: ClassVar[str | None] = None   # struct of the "events" ring buffer, None for none
    ringbuf: ClassVar[str] = "events"

    def __init__(self, args: argparse.Namespace, out: TextIO | None = None) -> None:
        self.args = args
        self.out = out or sys.stdout
        self.method: Method | None = None

    # -- hooks ---------------------------------------------------------------

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Tool parameters (become .rodata in :meth:`configure`)."""

    def configure(self, obj: BpfObject, method: Method) -> None:
        """Set .rodata/.bss globals before load (``targ_tgid`` is already set)."""

    def attach(self, obj: BpfObject, method: Method) -> None:
        """Attach ``method.programs``; the default attaches each by its SEC() name."""
        for name in method.programs:
            obj.programs[name].attach()

    def started(self, obj: BpfObject) -> None:
        """Called once attached, before events flow (print a header here)."""

    def format_event(self, event: Any) -> str | None:
        """One line of text for an event (None: print nothing)."""
        return str(event)

    def event_json(self, event: Any) -> dict[str, Any] | None:
        """One JSON object for an event; default: the dataclass's fields."""
        return _plain(event)

    def summary(self, obj: BpfObject) -> str:
        """End-of-run text (aggregations read from maps); printed as is."""
        return ""

    def summary_json(self, obj: BpfObject) -> dict[str, Any] | None:
        """End-of-run JSON object, or None."""
        return None

    def close(self) -> None:
        """Release what the tool holds besides its BPF object (called once detached)."""

    # -- helpers ---------------------------------------------------------------

    @classmethod
    def attach_points(cls) -> str:
        return ", ".join(m.name for m in cls.methods)


def _plain(value: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
