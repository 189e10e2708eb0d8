"""The Tool API: a ready-made tracer that ``pycore run NAME`` runs.

A tool is one precompiled BPF object (``bpf_src/tools/NAME.bpf.c``) plus a
:class:`Tool` subclass that says how to attach it, sets its parameters as
``.rodata`` before load, and renders what comes back (ring-buffer events as
they arrive, map aggregations at the end).  This module does the rest, the
same way for every tool:

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

    from pycore.tools.base import Method, Tool

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

import errno
import os
import signal
import sys
import time

# Start-up time is a feature (``-d 0`` is benchmarked against bpftrace): json,
# subprocess, shlex and dataclasses are imported where they are needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import subprocess
    from typing import Any, ClassVar, TextIO

    from pycore.errors import BpfError
    from pycore.object import BpfObject

__all__ = ["Method", "Tool", "Runner", "add_common_arguments", "NoMethod"]

# Method.feature -> the pycore.features check that predicts it (None: always there).
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


class NoMethod(Exception):
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


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every tool takes."""
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-p", "--pid", type=int, default=0, metavar="PID",
                        help="trace only this process (filtered in the kernel)")
    target.add_argument("-c", "--cmd", metavar="CMD",
                        help="run CMD (split like a shell would, no shell), trace it, stop when it exits")
    parser.add_argument("-d", "--duration", type=float, default=None, metavar="SECONDS",
                        help="stop after SECONDS (0: attach, print the summary and exit)")
    parser.add_argument("--json", action="store_true", help="one JSON object per event (and per summary)")


def reason(method: Method, exc: BaseException) -> str:
    """Why ``method`` could not load or attach, in a few words."""
    err = getattr(exc, "errno", 0) or 0
    text = str(exc)
    if method.feature in ("fentry", "fexit"):
        if err == errno.EPERM:
            return "this kernel refuses fentry/fexit"
        if err in (524, errno.EOPNOTSUPP):
            return "no BPF trampoline on this kernel"
    if err == errno.ESRCH or "failed to find kernel BTF type ID" in text:
        return "its target is not in this kernel's BTF"
    if method.feature == "kprobe" and err in (errno.ENOENT, errno.EOPNOTSUPP, errno.EINVAL):
        return "this kernel has no kprobes"
    if method.feature == "tracepoint" and err == errno.ENOENT:
        return "the tracepoint does not exist (or tracefs is not mounted)"
    name = errno.errorcode.get(err)
    return f"{name}: {text}" if name else text


class Runner:
    """Runs one tool: pick the method, attach, stream events, summarise, detach."""

    def __init__(self, tool: Tool, *, err: TextIO | None = None) -> None:
        self.tool = tool
        self.err = err or sys.stderr
        self.obj: BpfObject | None = None
        self._stop = False

    # -- attach ----------------------------------------------------------------

    def open(self, tgid: int) -> BpfObject:
        """Load and attach the first method that works; raise :class:`NoMethod` if none."""
        from pycore.errors import BpfError
        from pycore.object import BpfObject
        from pycore.objects import object_path

        tool = self.tool
        path = object_path(tool.object)
        failures: list[tuple[Method, BaseException]] = []
        for method in tool.methods:
            if method.feature == "tracepoint":
                _ensure_tracefs()
            obj = BpfObject(path)
            try:
                for prog in obj.programs.values():
                    prog.autoload = prog.name in method.programs
                if tgid:
                    obj.globals["targ_tgid"] = tgid
                tool.configure(obj, method)
                obj.load()
                tool.attach(obj, method)
            except (BpfError, OSError) as exc:
                obj.close()
                failures.append((method, exc))
                continue
            except BaseException:
                obj.close()
                raise
            if failures:
                first, exc = failures[0]
                note = f" ({method.note})" if method.note else ""
                print(f"pycore: {first.name} cannot attach ({reason(first, exc)}); "
                      f"using the {method.name} fallback{note}", file=self.err)
            tool.method = method
            self.obj = obj
            return obj
        lines = [f"pycore: {tool.name} cannot run on this kernel: none of its attach methods works:"]
        for method, exc in failures:
            lines.append(f"  {method.name}: {reason(method, exc)}")
        needs = dict.fromkeys(NEEDS.get(m.feature, m.feature) for m, _ in failures)
        lines.append("what would work: " + "; or ".join(needs))
        raise NoMethod("\n".join(lines))

    # -- run -------------------------------------------------------------------

    def run(self) -> int:
        """The whole run; returns the exit status."""
        args = self.tool.args
        child: subprocess.Popen[bytes] | None = None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for s in old:
                signal.signal(s, self._on_signal)
            tgid = args.pid or 0
            if args.cmd:
                child = _spawn_held(args.cmd)
                tgid = child.pid
            try:
                obj = self.open(tgid)
            except NoMethod as exc:
                print(exc, file=self.err)
                return 1
            self.tool.started(obj)
            if child is not None:
                os.kill(child.pid, signal.SIGCONT)
            if args.duration != 0:
                self._loop(obj, child)
            self._drain(obj)
            self._summarise(obj)
            return 0
        except BrokenPipeError:
            raise
        finally:
            # no signal may interrupt the clean-up: nothing must stay attached
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            if self.obj is not None:
                self.obj.close()
            self.tool.close()
            if child is not None:
                _stop_child(child)
            for s, h in old.items():
                signal.signal(s, h)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stop = True

    def _ringbuf(self, obj: BpfObject):
        if self.tool.event is None:
            return None
        if not hasattr(self, "_rb"):
            from pycore.ringbuf import RingBuffer

            self._rb = RingBuffer(obj, self.tool.ringbuf, event=self.tool.event)
        return self._rb

    def _loop(self, obj: BpfObject, child: subprocess.Popen[bytes] | None) -> None:
        duration = self.tool.args.duration
        deadline = None if duration is None else time.monotonic() + duration
        rb = self._ringbuf(obj)
        while not self._stop:
            timeout = 0.1
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                timeout = min(timeout, left)
            if rb is not None:
                try:
                    rb.poll(self._emit, timeout)
                except InterruptedError:
                    pass
            else:
                time.sleep(timeout)
            if child is not None and child.poll() is not None:
                break

    def _drain(self, obj: BpfObject) -> None:
        rb = self._ringbuf(obj)
        if rb is not None:
            while rb.poll(self._emit, 0):
                pass

    def _emit(self, event: Any) -> None:
        out = self.tool.out
        if self.tool.args.json:
            import json

            obj = self.tool.event_json(event)
            if obj is not None:
                out.write(json.dumps(obj) + "\n")
        else:
            line = self.tool.format_event(event)
            if line is not None:
                out.write(line + "\n")
        out.flush()

    def _summarise(self, obj: BpfObject) -> None:
        out = self.tool.out
        lost = 0
        rb = self._ringbuf(obj)
        if rb is not None:
            lost = rb.lost
            rb.close()
        if self.tool.args.json:
            import json

            s = self.tool.summary_json(obj)
            if s is not None:
                out.write(json.dumps(s) + "\n")
        else:
            text = self.tool.summary(obj)
            if text:
                out.write(text if text.endswith("\n") else text + "\n")
        out.flush()
        if lost:
            print(f"pycore: {lost} events lost (ring buffer full)", file=self.err)


def _spawn_held(cmd: str) -> subprocess.Popen[bytes]:
    """Start ``cmd`` held before exec: a ``/bin/sh`` stops itself, then execs it (same pid).

    Its pid is known, and the kernel-side filter set, before the command
    runs anything; SIGCONT lets it go.  (No pipe or redirection: those would
    show up as the command's own fd activity; and ``preexec_fn`` cannot
    wait, Popen blocks until the exec.)
    """
    import shlex
    import subprocess

    argv = shlex.split(cmd)
    if not argv:
        raise ValueError("-c: empty command")
    child = subprocess.Popen(["/bin/sh", "-c", 'kill -STOP $$; exec "$@"', "sh", *argv])
    os.waitpid(child.pid, os.WUNTRACED)  # stopped (or already dead: then poll() says so)
    return child


def _stop_child(child: subprocess.Popen[bytes]) -> None:
    import subprocess

    if child.poll() is None:
        child.terminate()
        os.kill(child.pid, signal.SIGCONT)  # a held child must wake up to die
        try:
            child.wait(2)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _ensure_tracefs() -> None:
    """Mount tracefs where tracepoint attach looks for it (root only; quiet otherwise)."""
    try:
        with open("/proc/mounts") as f:
            if " /sys/kernel/tracing tracefs " in f.read():
                return
        import subprocess

        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       check=False, capture_output=True)
    except OSError:
        pass
