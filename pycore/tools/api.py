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

        options = (Option("min_fd", int, 0, "only descriptors from this one up"),)  # open_tool(min_fd=3), --min-fd 3

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
    from collections.abc import Callable, Mapping
    from typing import Any, ClassVar, TextIO

    from pycore.native.object import BpfObject

__all__ = ["Method", "Option", "OptionError", "Tool", "NoMethod", "FEATURE_CHECKS", "NEEDS", "tool_options",
           "check_options"]

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


class OptionError(PycoreError, ValueError):
    """A tool option with a value the tool cannot use; ``.tool`` and ``.option`` (its keyword) name it.

    ``str()`` is the API's message (``option 'pattern' ...``); :attr:`cli` is the line ``pycore run``
    prints, which names the option as its flag (``--pattern ...``).
    """

    def __init__(self, tool: str, option: str, message: str, cli: str | None = None) -> None:
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.option = option
        self.cli = f"pycore run {tool}: {cli or message}"


class Option:
    """One option of a tool, declared once for both faces of it.

    ``open_tool(NAME, name=value)`` takes it as a keyword, converted and checked
    here (:func:`tool_options`); ``pycore run NAME`` takes it as ``--name-with-dashes``
    (or as a positional argument when ``positional``), its help built from the same
    declaration.  ``type`` is ``str``, ``int``, ``float`` or ``bool`` (a flag);
    ``check(value)`` returns what is wrong with a value (it reads after the option's
    name: ``"is longer than 31 bytes"``) or None.
    """

    __slots__ = ("name", "type", "default", "help", "metavar", "choices", "required", "positional", "check")

    def __init__(self, name: str, type: type = str, default: Any = None, help: str = "", *,
                 metavar: str | None = None, choices: tuple[Any, ...] | None = None, required: bool = False,
                 positional: bool = False, check: Callable[[Any], str | None] | None = None) -> None:
        if type not in (str, int, float, bool):
            raise TypeError(f"option {name}: type must be str, int, float or bool, not {type!r}")
        self.name = name
        self.type = type
        self.default = False if type is bool and default is None else default
        self.help = help
        self.metavar = metavar
        self.choices = tuple(choices) if choices is not None else None
        self.required = required or positional
        self.positional = positional
        self.check = check

    @property
    def flag(self) -> str:
        """How ``pycore run`` spells it: ``--no-events``, or the metavar of a positional one."""
        return (self.metavar or self.name.upper()) if self.positional else "--" + self.name.replace("_", "-")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """This option on ``pycore run NAME``'s parser."""
        help = self.help
        if self.default not in (None, False, "") and "default" not in help:
            help = f"{help} (default {self.default})" if help else f"default {self.default}"
        if self.type is bool:
            parser.add_argument(self.flag, dest=self.name, action="store_true", help=help)
        elif self.positional:
            parser.add_argument(self.name, type=self.type, metavar=self.flag, choices=self.choices, help=help)
        else:
            parser.add_argument(self.flag, dest=self.name, type=self.type, default=self.default,
                                metavar=self.metavar, choices=self.choices, required=self.required, help=help)

    def error(self, tool: str, text: str) -> OptionError:
        """``text`` (reading after the option's name) said of this option, in the API's words and the CLI's."""
        return OptionError(tool, self.name, f"option {self.name!r} {text}", f"{self.flag} {text}")

    def convert(self, tool: str, value: Any) -> Any:
        """``value`` as the tool takes it: TypeError for a value of the wrong kind, OptionError (a
        ValueError) for one the option refuses."""
        kind = {str: "a str", int: "an int", float: "a number", bool: "True or False"}[self.type]
        if value is None and not self.required and self.type is not bool:
            return None
        if self.type is bool:
            if not isinstance(value, bool):
                raise TypeError(f"{tool}: option {self.name!r} takes {kind}, not {value!r}")
        elif self.type is str:
            import os

            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if not isinstance(value, str):
                raise TypeError(f"{tool}: option {self.name!r} takes {kind}, not {type(value).__name__}")
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)) \
                    or (self.type is int and isinstance(value, float)):
                raise TypeError(f"{tool}: option {self.name!r} takes {kind}, not {type(value).__name__}")
            try:
                value = self.type(value)
            except ValueError:
                raise self.error(tool, f"takes {kind}, not {value!r}") from None
            if self.type is float and (value != value or value in (float("inf"), float("-inf"))):
                raise self.error(tool, f"takes a finite number, not {value!r}")
        if self.choices is not None and value not in self.choices:
            raise self.error(tool, f"is one of {', '.join(map(repr, self.choices))}, not {value!r}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise self.error(tool, problem)
        return value


def tool_options(tool_cls: type[Tool], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``tool_cls`` from ``given`` (keywords of ``open_tool``): defaults filled,
    each converted and checked.  TypeError names an unknown option (and the known ones), a missing
    required one, or a value of the wrong kind; :class:`OptionError` (a ValueError) a value refused."""
    declared = {o.name: o for o in tool_cls.options}
    for key in given:
        if key not in declared:
            raise TypeError(f"{tool_cls.name}: no option {key!r} (has: {', '.join(declared) or 'none'})")
    values: dict[str, Any] = {}
    for name, opt in declared.items():
        if name in given:
            values[name] = opt.convert(tool_cls.name, given[name])
        elif opt.required:
            raise TypeError(f"{tool_cls.name}: missing required option {name!r}")
        else:
            values[name] = opt.default
    return values


def check_options(tool_cls: type[Tool], args: argparse.Namespace) -> None:
    """The checks of :func:`tool_options` on options ``pycore run`` parsed (argparse converted them)."""
    for opt in tool_cls.options:
        value = getattr(args, opt.name, None)
        if value is not None and opt.check is not None:
            problem = opt.check(value)
            if problem:
                raise opt.error(tool_cls.name, problem)


class Tool:
    """Base of every tool; subclasses set the class attributes and override hooks.

    An instance lives for one run; ``self.args`` holds the parsed options,
    ``self.method`` the attach method in use, ``self.out`` the output stream,
    ``self.err`` where notes for the user go (stderr under ``pycore run``; a
    :class:`~pycore.embed.session.ToolSession`'s ``notice`` in an agent, whose
    stderr the library never writes).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    object: ClassVar[str]
    methods: ClassVar[tuple[Method, ...]]
    options: ClassVar[tuple[Option, ...]] = ()   # the tool's own options: open_tool's keywords, pycore run's flags
    event: ClassVar[str | None] = None   # struct of the "events" ring buffer, None for none
    event_type: ClassVar[type | None] = None   # the dataclass events decode to (the module's ``Event``)
    ringbuf: ClassVar[str] = "events"

    def __init__(self, args: argparse.Namespace, out: TextIO | None = None) -> None:
        self.args = args
        self.out = out or sys.stdout
        self.err: TextIO = sys.stderr
        self.method: Method | None = None

    # -- hooks ---------------------------------------------------------------

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """``pycore run NAME``'s flags for :attr:`options` (declare options there, not here)."""
        for opt in cls.options:
            opt.add_to(parser)

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
