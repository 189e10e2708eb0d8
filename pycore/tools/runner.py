"""Running one tool as ``pycore run`` does: options, attach-method fallback, event loop, clean stop.

:class:`Runner` owns nothing global but the signal handlers it sets for the
duration of :meth:`Runner.run`; :mod:`pycore.embed.session` reuses its
:meth:`Runner.open` (method choice and fallback) without the loop.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time

from pycore.kernel.process import PidWatch, TargetError, check_pid, poll_until, spawn_held, stop_child
from pycore.tools.api import NEEDS, Method, NoMethod, Tool

# Start-up time is a feature (``-d 0`` is benchmarked against bpftrace): json,
# subprocess, shlex and argparse are imported where they are needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import subprocess
    from collections.abc import Callable
    from typing import Any, TextIO

    from pycore.native.object import BpfObject

__all__ = ["Runner", "add_common_arguments", "tool_parser", "reason"]

WRITE_EVENTS = 256   # events written at once


def tool_parser(tool_cls: type[Tool]) -> argparse.ArgumentParser:
    """The option parser of ``pycore run NAME``: the tool's own options, then the common ones."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=f"pycore run {tool_cls.name}", description=tool_cls.description,
        epilog=f"attach methods, in order of preference: {tool_cls.attach_points()}")
    tool_cls.add_arguments(parser)
    add_common_arguments(parser)
    return parser


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
        self._signals = 0
        self._first_signal = 0.0        # time.monotonic() of the first Ctrl-C or SIGTERM
        self._chunks: list[str] = []

    # -- attach ----------------------------------------------------------------

    def open(self, tgid: int, sizes: Callable[[BpfObject], None] | None = None) -> BpfObject:
        """Load and attach the first method that works; raise :class:`NoMethod` if none.
        ``sizes(obj)``, when given, sets map sizes after the tool's configure(), before load."""
        from pycore.errors import BpfError
        from pycore.native.object import BpfObject
        from pycore.native.shipped import object_path

        tool = self.tool
        path = object_path(tool.object)
        failures: list[tuple[Method, BaseException]] = []
        for method in tool.methods:
            if method.feature == "tracepoint":
                from pycore.kernel.tracefs import find_tracefs

                find_tracefs()  # mounts it where tracepoint attach looks, when root
            obj = BpfObject(path)
            try:
                for prog in obj.programs.values():
                    prog.autoload = prog.name in method.programs
                if tgid:
                    obj.globals["targ_tgid"] = tgid
                tool.configure(obj, method)
                if sizes is not None:
                    sizes(obj)
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
        watch: PidWatch | None = None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for s in old:
                signal.signal(s, self._on_signal)
            tgid = args.pid or 0
            try:
                if tgid:
                    check_pid(tgid)
                    watch = PidWatch(tgid)
                if args.cmd:
                    child = spawn_held(args.cmd)
                    tgid = child.pid
            except TargetError as exc:
                print(f"pycore run: {exc}", file=self.err)
                return 2
            try:
                obj = self.open(tgid)
            except NoMethod as exc:
                print(exc, file=self.err)
                return 1
            self.tool.started(obj)
            if child is not None:
                os.kill(child.pid, signal.SIGCONT)
            if args.duration != 0:
                self._loop(obj, child, watch)
            obj.detach()     # first: the ring then holds all there is to print, and nothing refills it
            self._drain(obj)
            for s in old:
                signal.signal(s, signal.SIG_IGN)
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
                stop_child(child)
            if watch is not None:
                watch.close()
            for s, h in old.items():
                signal.signal(s, h)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self._signals:
            self._first_signal = time.monotonic()
        self._signals += 1
        self._stop = True

    def _ringbuf(self, obj: BpfObject):
        if self.tool.event is None:
            return None
        if not hasattr(self, "_rb"):
            from pycore.native.ringbuf import RingBuffer

            self._rb = RingBuffer(obj, self.tool.ringbuf, event=self.tool.event)
        return self._rb

    def _loop(self, obj: BpfObject, child: subprocess.Popen[bytes] | None, watch: PidWatch | None) -> None:
        rb = self._ringbuf(obj)
        stopped = lambda: self._stop  # noqa: E731
        poll = (lambda: None) if rb is None else (lambda: self._poll(rb, stopped))
        poll_until(poll, stopped=stopped, duration=self.tool.args.duration, child=child, watch=watch,
                   ready=None if rb is None else rb.fileno())

    def _poll(self, rb: Any, until: Any) -> int:
        try:
            return rb.poll(self._emit, 0, until)
        finally:
            self._write()

    def _drain(self, obj: BpfObject) -> None:
        """Print what the ring holds, the probes detached (after Ctrl-C, for a while:
        :func:`pycore.native.ringbuf.drain`); what is left is counted on stderr."""
        from pycore.native.ringbuf import drain

        rb = self._ringbuf(obj)
        if rb is None:
            return
        left = drain(lambda until: self._poll(rb, until), rb.skip, lambda: self._signals, self._first_signal)
        if left:
            print(f"pycore: {left} event{'s' if left > 1 else ''} in the buffer at Ctrl-C not printed",
                  file=self.err)

    def _emit(self, event: Any) -> None:
        if self.tool.args.json:
            import json

            obj = self.tool.event_json(event)
            if obj is not None:
                self._chunks.append(json.dumps(obj) + "\n")
        else:
            line = self.tool.format_event(event)
            if line is not None:
                self._chunks.append(line + "\n")
        if len(self._chunks) >= WRITE_EVENTS:
            self._write()

    def _write(self) -> None:
        """Events in one write and one flush (a flush per line cost a system call each); at most
        WRITE_EVENTS of them, as a write to a slow terminal blocks and delays a Ctrl-C."""
        out = self.tool.out
        if self._chunks:
            out.write("".join(self._chunks))
            self._chunks.clear()
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
