"""Running a script: in a Python program (:class:`TraceSession`) or as ``pycore trace`` (:class:`TraceRunner`).

Both drive :class:`~pycore.lang.runtime.Script` the same way: load,
attach, BEGIN, events until the end, END, the maps.  The session hands out
:class:`~pycore.lang.runtime.Event` objects and reads maps live as Python
values; the runner prints what bpftrace prints, text or json.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from pycore.errors import Closed
from pycore.lang.runtime import Event, Script

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from typing import Any, Literal, TextIO, overload

    import threading

    from pycore.hist import Hist
    from pycore.lang.metrics import ScriptCollector
    from pycore.native.ringbuf import Lost
else:
    def overload(f):  # noqa: ANN001, ANN202 - typing's, for mypy only: importing typing costs pycore trace's
        return f      # start ~3 ms (tests/test_record.py); the last definition of each method is the real one

__all__ = ["TraceSession", "TraceRunner", "trace"]

#: Events written to the output at once (one write, one flush).
WRITE_EVENTS = 256


def trace(program: str, *, pid: int | None = None, params: tuple[str, ...] = (), unsafe: bool = False,
          ring_size: int | None = None, map_size: int | None = None, on_lost: Callable[[int], object] | None = None,
          on_end: Callable[[], object] | None = None) -> TraceSession:
    """Compile, load and attach a bpftrace program in this process; BEGIN has run when this returns.

    ``ring_size`` (bytes, a power-of-2 multiple of the page size; 2 MiB by default) sizes the ring
    buffer, ``map_size`` the entries of each map (bpftrace's ``max_map_keys``: the script's config block, else 4096);
    ``on_lost(n)`` is called with the records dropped since the last call (the programs count what the
    full ring refused) as a consumer reads on; ``on_end()`` once the ``pid`` target exits (the session
    then ends: :attr:`TraceSession.ended`, consumers stop).

    Raises :class:`~pycore.lang.errors.ScriptError` (with line:column) for a
    script the checker or the verifier refuses, :class:`~pycore.kernel.process.TargetError`
    for a ``pid`` that does not exist, PermissionError without the privileges, ValueError for
    a ``ring_size`` or ``map_size`` the kernel cannot have.
    """
    import mmap

    if ring_size is not None and (not isinstance(ring_size, int) or ring_size <= 0 or ring_size & (ring_size - 1)
                                  or ring_size % mmap.PAGESIZE):
        raise ValueError(f"ring_size must be a power-of-2 multiple of {mmap.PAGESIZE} bytes, not {ring_size!r}")
    if map_size is not None and (not isinstance(map_size, int) or map_size <= 0):
        raise ValueError(f"map_size must be an int > 0, not {map_size!r}")
    from pycore.kernel.privileges import missing_privileges
    from pycore.kernel.process import check_pid

    if pid:
        check_pid(pid)
    why = missing_privileges()
    if why:
        raise PermissionError(f"pycore: {why}")
    return TraceSession(program, pid=pid, params=params, unsafe=unsafe, ring_size=ring_size, map_size=map_size,
                        on_lost=on_lost, on_end=on_end)


class TraceSession:
    """One running script inside the caller's process; close it (or use ``with``) to detach.

    Consumers (:meth:`events`, :meth:`poll`, :meth:`run`, ``async for``) wait on the ring buffer's
    epoll fd or the event loop's reader; :meth:`close` from any thread or task wakes and ends them, and
    any later use raises :class:`~pycore.errors.Closed`.  The session ends (:attr:`ended`) at the
    script's ``exit()`` or when the ``pid`` target exits."""

    def __init__(self, program: str, *, pid: int | None = None, params: tuple[str, ...] = (),
                 unsafe: bool = False, filename: str = "<program>",
                 unsafe_hint: str = "pass unsafe=True to pycore.trace() to allow it",
                 ring_size: int | None = None, map_size: int | None = None,
                 on_lost: Callable[[int], object] | None = None, on_end: Callable[[], object] | None = None) -> None:
        import threading

        from pycore.lang.runtime import RING_SIZE

        self.script = Script(program, filename=filename, params=params, pid=pid, unsafe=unsafe,
                             map_keys=map_size, ring_size=ring_size or RING_SIZE)
        self.script.checker.unsafe_hint = unsafe_hint
        self._pending: list[Event] = []
        self._ended = False
        self.on_end = on_end
        self._watch = None
        self._close_lock = threading.Lock()
        try:
            self.script.load()
            ring = self.script.ring()       # mapped before attaching, as pycore trace does
            ring.on_lost = on_lost
            if pid:
                from pycore.kernel.process import PidWatch

                self._watch = PidWatch(pid)
                if self._watch.fileno() is not None:
                    ring.end_when(self._watch.fileno(), self._end)
            self.probes = self.script.start()   # BEGIN, then the probes: BEGIN's events come first
        except BaseException:
            self._close_native()
            raise

    def __repr__(self) -> str:
        state = "closed" if self.closed else "ended" if self._ended else f"{self.probes} probes attached"
        return f"<TraceSession {self.script.filename} {state}>"

    # state

    @property
    def closed(self) -> bool:
        return self.script._closed

    @property
    def ended(self) -> bool:
        """The script called exit() or the ``pid`` target exited: consumers stop once the ring is drained."""
        if not self._ended and not self.closed:
            if self.script.exited or (self._watch is not None and self._watch.exited()):
                self._end()
        return self._ended

    @ended.setter
    def ended(self, value: bool) -> None:  # kept for callers that set it to stop their own loops
        self._ended = value

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self.on_end is not None:
            self.on_end()

    @property
    def on_lost(self) -> Callable[[int], object] | None:
        """Called with the records dropped since the last call, as a consumer reads on."""
        self._require()
        return self.script.ring().on_lost

    @on_lost.setter
    def on_lost(self, callback: Callable[[int], object] | None) -> None:
        self._require()
        self.script.ring().on_lost = callback

    def _what(self) -> str:
        return "TraceSession" if self.script.filename == "<program>" else f"TraceSession {self.script.filename}"

    def _require(self) -> None:
        if self.script._closed:
            raise Closed(self._what())

    def _guard(self, read: Callable[[], Any]) -> Any:
        """``read()``; a close() from another thread meanwhile is this session's Closed, not an internal map's."""
        self._require()
        try:
            return read()
        except Closed:
            raise Closed(self._what()) from None
        except (ValueError, OSError):
            if self.script._closed:
                raise Closed(self._what()) from None
            raise

    # consumption

    def poll(self, callback: Callable[[Event], None], timeout: float = 0.0) -> int:
        """Hand every event now available to ``callback``, waiting up to ``timeout`` s (None: until one
        comes, close() or the end) when there is none; returns how many records were read."""
        self._require()
        n = 0
        while self._pending:
            callback(self._pending.pop(0))
            n += 1
        if self.ended:
            return n
        n += self._guard(lambda: self.script.poll(callback, timeout))
        if self.script.exited:
            self._end()
        return n

    def run(self, callback: Callable[[Event], None]) -> int:
        """The callback loop: ``callback(event)`` for every event until close() (from another thread, or
        the callback), the script's exit() or the ``pid`` target's exit; returns how many were read."""
        self._require()
        n = 0
        while not self.closed and not self.ended:
            try:
                n += self.poll(callback, None)
            except Closed:
                break
        return n

    @overload
    def events(self, timeout: float | None = 1.0, *, include_lost: Literal[False] = False) -> Iterator[Event]: ...
    @overload
    def events(self, timeout: float | None = 1.0, *, include_lost: bool) -> Iterator[Event | Lost]: ...

    def events(self, timeout: float | None = 1.0, *, include_lost: bool = False) -> Iterator[Event | Lost]:
        """Events as they come; ends after ``timeout`` seconds without one (None: never), at exit(),
        the ``pid`` target's exit or close().  ``include_lost``: a :class:`~pycore.native.ringbuf.Lost`
        marker where records were dropped."""
        self._require()
        return self._events(timeout, include_lost)

    def _events(self, timeout: float | None, include_lost: bool) -> Iterator[Event | Lost]:
        from pycore.native.ringbuf import Lost

        while self._pending:
            yield self._pending.pop(0)
        if self.ended:
            return
        script = self.script
        fast = script.event_fast    # a printf's Event without decode()'s general path (its docstring says why)
        try:
            for rec in script.ring().events(timeout, include_lost=include_lost):
                if type(rec) is Lost:
                    yield rec
                    continue
                ev = fast(rec)
                if ev is not None:
                    yield ev
                    continue
                yield from script.decode(rec)
                if script.exited:
                    self._end()
                    return
        except (Closed, ValueError, OSError):
            if not script._closed:
                raise

    def __aiter__(self) -> AsyncIterator[Event]:
        """``async for``: waits on the ring through the event loop's reader; ends as :meth:`events`."""
        self._require()
        return self._aevents(False)

    @overload
    def aevents(self, *, include_lost: Literal[False] = False) -> AsyncIterator[Event]: ...
    @overload
    def aevents(self, *, include_lost: bool) -> AsyncIterator[Event | Lost]: ...

    def aevents(self, *, include_lost: bool = False) -> AsyncIterator[Event | Lost]:
        """``async for ev in session.aevents(include_lost=True)``: with :class:`Lost` markers."""
        self._require()
        return self._aevents(include_lost)

    async def _aevents(self, include_lost: bool) -> AsyncIterator[Any]:
        from pycore.native.ringbuf import Lost

        while self._pending:
            yield self._pending.pop(0)
        if self.ended:
            return
        script = self.script
        fast = script.event_fast
        try:
            async for rec in script.ring().aevents(include_lost=include_lost):
                if type(rec) is Lost:
                    yield rec
                    continue
                ev = fast(rec)
                if ev is not None:
                    yield ev
                    continue
                for ev in script.decode(rec):
                    yield ev
                if script.exited:
                    self._end()
                    return
        except (Closed, ValueError, OSError):
            if not script._closed:
                raise

    # maps

    def maps(self) -> dict[str, Any]:
        """Every map read now: {"@name": {key: value}} (a hist is {bucket: count})."""
        return self._guard(lambda: {name: self.script.map_value(name) for name in sorted(self.script.layout.maps)})

    def map(self, name: str) -> Any:
        """One map read now (``"@name"`` or ``"name"``)."""
        return self._guard(lambda: self.script.map_value(self._map_name(name)))

    def map_text(self, name: str) -> str:
        """A map as bpftrace prints it (``"@name"`` or ``"name"``)."""
        return self._guard(lambda: self.script.map_text(self._map_name(name)))

    def hist(self, name: str, key: Any = None) -> Hist:
        """A hist()/lhist() map read now as a :class:`pycore.hist.Hist` (``.buckets()`` with their
        bounds); ``key`` picks one histogram of a keyed map (``@h[comm] = hist(...)``)."""
        from pycore.hist import Hist

        self._require()
        name = self._map_name(name)
        info = self.script.layout.maps[name]
        if info.kind not in ("hist", "lhist"):
            raise TypeError(f"{name} is a {info.kind or 'value'} map, not a hist() or lhist()")
        value = self._guard(lambda: self.script.map_value(name))
        if info.keys:
            if key is None:
                raise TypeError(f"{name} is keyed: give key= (one of {sorted(value, key=repr)[:10]!r})")
            if key not in value:
                raise KeyError(f"{name} has no key {key!r} (it has {sorted(value, key=repr)[:10]!r})")
            value = value[key]
        return Hist(value or {}, lhist=info.lhist if info.kind == "lhist" else None)

    def _map_name(self, name: str) -> str:
        """``@name`` of a map of the script; KeyError naming the maps it has otherwise."""
        if not name.startswith("@"):
            name = "@" + name
        if name not in self.script.layout.maps:
            raise KeyError(f"no map {name} (the script has: {', '.join(sorted(self.script.layout.maps)) or 'none'})")
        return name

    def collector(self, name: str = "script", *, series_limit: int | None = None,
                  lock: threading.Lock | None = None) -> ScriptCollector:
        """A ``prometheus_client`` collector of this script's maps, read from the kernel at each scrape, as
        ``pycore serve --script`` exports them (``pycore_script_<name>_<map>``, docs/serve.md).

        Register it in the agent's own registry; ``lock``, when given, is held while a scrape reads the
        maps, so that closing the session under the same lock never races a scrape.
        """
        from pycore.lang.metrics import DEFAULT_SERIES_LIMIT, ScriptCollector

        self._require()
        return ScriptCollector(self.script, name, series_limit=series_limit or DEFAULT_SERIES_LIMIT, lock=lock)

    @property
    def lost(self) -> int:
        """Records dropped because the ring was full, counted by the programs in the kernel."""
        return self._guard(self.script.lost_events)

    @property
    def map_size(self) -> int:
        """The keys each map can hold (``map_size=``; bpftrace's ``BPFTRACE_MAP_KEYS_MAX``)."""
        return self.script.map_keys

    @property
    def refused(self) -> dict[str, int]:
        """Map name -> updates of a new key the map refused because it held :attr:`map_size` keys
        already, counted by the programs in the kernel; only the maps that refused any."""
        return {k: n for k, n in self._guard(self.script.refused_keys).items() if n}

    def close(self) -> list[Event]:
        """Detach the probes, run END, then free everything, ending every consumer; returns what the
        ring still held, END's output and the final maps ([] when already closed).  Safe twice and
        from any thread or task.  As in bpftrace (and pycore trace), the probes are detached before
        END runs, so nothing they record comes after END's output."""
        out: list[Event] = []
        with self._close_lock:      # a second close() meanwhile waits, then finds it closed
            if self.script._closed:
                return out
            try:
                self.script.detach()
                # what the ring holds first (a poll reads up to a batch): else END's records wait
                # behind them, past one poll, or find the ring full and are lost
                while self.script.poll(out.append, 0):
                    pass
                self.script.run_special("END")
                self.script.poll(out.append, 0)
                if self.script.config.print_maps_on_exit:
                    out.extend(self.script.final_maps())
            finally:
                self._close_native()
        return out

    def _close_native(self) -> None:
        self.script.close()
        if self._watch is not None:
            self._watch.close()

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceRunner:
    """``pycore trace``: owns the process's signals and output, like bpftrace."""

    def __init__(self, text: str, *, filename: str, params: tuple[str, ...], pid: int | None, cmd: str | None,
                 unsafe: bool, verbose: bool, json: bool, folded: bool, duration: float | None,
                 out: TextIO | None = None, err: TextIO | None = None, quiet: bool = False, flush: bool = True,
                 map_keys: int | None = None, environ: Any = None) -> None:
        self.script = Script(text, filename=filename, params=params, pid=pid, unsafe=unsafe, map_keys=map_keys,
                             environ=environ)
        self.quiet = quiet
        self.flush = flush
        self.pid = pid
        self.cmd = cmd
        self.verbose = verbose
        self.json = json
        self.folded = folded
        self.duration = duration
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._stop = False
        self._signals = 0
        self._first_signal = 0.0        # time.monotonic() of the first Ctrl-C or SIGTERM
        self._dump = False              # SIGUSR1 arrived: print the maps at the next wake-up
        self._chunks: list[str] = []    # output of the records polled, written once per poll
        self._errors = 0                # error events seen (runtime errors, errorf())

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGUSR1:      # bpftrace's: print every map now, and go on
            self._dump = True
            return
        if not self._signals:
            self._first_signal = time.monotonic()
        self._signals += 1
        self._stop = True

    def _dump_maps(self) -> None:
        """SIGUSR1: every map as the end prints them (without the end's blank lines), tracing on; or,
        when the script has a self:signal:SIGUSR1 probe, that probe run instead (bpftrace 0.22+)."""
        self._dump = False
        if self.script.on_sigusr1:
            self.script.run_special("SIGUSR1")
            self.script.poll(self.emit, 0, printf=self._printf)
            return
        self._print_maps()

    def _print_maps(self) -> None:
        """Every map, as the end prints them: each read once, for the one form printed (final_maps()
        reads each twice, for its text and its Python value; a hist of many keys in a VM, slowly)."""
        from pycore.lang import output as O

        script = self.script
        for name in sorted(script.layout.maps):
            if self.json:
                self._chunks.append(script.map_json(name))
            elif self.folded:
                self._chunks.append(O.folded(script.map_entries(name)))
            else:
                self._chunks.append(script.map_text(name))

    def emit(self, ev: Event) -> None:
        from pycore.lang import output as O

        if ev.kind in ("error", "errorf", "helper_error"):
            self._errors += 1           # (--test: a test that reports an error fails)
        if ev.kind == "error" or (ev.kind in ("errorf", "warnf") and not self.json):
            self._write()
            self.err.write(ev.text if ev.kind == "error" else f"{ev.name}: {ev.value_type[0]}: {ev.text}\n")
            self.err.flush()
            return
        if self.json and ev.kind in ("errorf", "warnf"):     # bpftrace's: on stdout, with the top place
            from pycore.lang.output.values import quoted

            _, filename, line, col, _ = ev.value_type
            self._chunks.append(f'{{"type": "{ev.kind}", "msg": {quoted(ev.text)}, "filename": '
                                f'{quoted(filename)}, "line": {line}, "col": {col}}}\n')
        elif self.json:
            if ev.kind == "map":
                line = self.script.map_json(ev.name, *getattr(ev, "extra", ()))
            elif ev.kind == "print":
                line = O.value_json(ev.value, ev.value_type)
            elif ev.kind == "join":
                line = O.json_message("join", ev.text.rstrip("\n"))
            elif ev.kind == "helper_error":
                line = ev.json  # type: ignore[attr-defined]
            else:
                line = O.json_message(ev.kind, ev.text)
            self._chunks.append(line)
        elif ev.kind == "map" and self.folded:
            self._chunks.append(O.folded(self.script.map_entries(ev.name)))
        else:
            self._chunks.append(ev.text)
        if len(self._chunks) >= WRITE_EVENTS:
            self._write()

    def _printf(self, text: str) -> None:
        """A printf record's text, as Script.poll hands it without an Event."""
        if self.json:
            from pycore.lang import output as O

            text = O.json_message("printf", text)
        self._chunks.append(text)
        if len(self._chunks) >= WRITE_EVENTS:
            self._write()

    def _write(self) -> None:
        """What the last records printed, in one write (and one flush unless -B full): a flush per
        line made a flood of printf cost a system call a line.  At most WRITE_EVENTS of them: a
        write to a slow terminal blocks, and a Ctrl-C is acted on only once it is done."""
        if self._chunks:
            self.out.write("".join(self._chunks))
            self._chunks.clear()
        if self.flush:
            self.out.flush()

    def _poll(self, until: Callable[[], bool] | None = None) -> int:
        try:
            n = self.script.poll(self.emit, 0, printf=self._printf, until=until,
                                 text=None if self.json else self._printf)   # time()'s, plain
            if self._dump:
                self._dump_maps()
            return n
        finally:
            self._write()

    def _drain(self) -> None:
        """Print what the ring holds once the probes are detached (after Ctrl-C, for a while:
        :func:`pycore.native.ringbuf.drain`); what is left is counted on stderr, not printed."""
        from pycore.native.ringbuf import drain

        left = drain(self._poll, self.script.ring().skip, lambda: self._signals, self._first_signal)
        if left:
            print(f"pycore trace: {left} event{'s' if left > 1 else ''} in the buffer at Ctrl-C not printed",
                  file=self.err)

    def _run_tests(self) -> int:
        """Run each test probe once, in order (BPF_PROG_TEST_RUN), and print bpftrace 0.25's report:
        a test passes when it returns 0, calls no exit() with a code and reports no error; a failed
        test's output is printed, a passing one's is not. Returns how many failed."""
        import io

        script = self.script
        green, red, off = "\033[32m", "\033[31m", "\033[0m"
        names = [name for name, _ in script.tests]
        passed: list[bool] = []
        write = self.out.write
        for i, (name, prog) in enumerate(script.tests):
            if i == 0 and not self.json:
                write(f"{green}[==========]{off} Running {len(names)} tests.\n")
            if not self.json:
                write(f"{green}[ RUN      ]{off} {name}\n")
            captured = io.StringIO()
            out, err, errors, json = self.out, self.err, self._errors, self.json
            self.out = self.err = captured
            self.json = False       # a test's output is captured as text, in -f json too (upstream's)
            script.exit_code, script.exited = 0, False
            try:
                t0 = time.perf_counter_ns()
                retval = prog.test_run()
                took = time.perf_counter_ns() - t0
                self._poll()
            finally:
                self.out, self.err, self.json = out, err, json
            ok = retval == 0 and script.exit_code == 0 and self._errors == errors
            passed.append(ok)
            script.exit_code, script.exited = 0, False
            if self.json:       # upstream's JsonOutput::test_result: one line a test, the output as text
                from pycore.lang.output.values import quoted

                write(f'{{"type": "test_result", "data": {{{quoted(name)}: {{"duration": {took}, "passed": '
                      f'{"true" if ok else "false"}, "output": {quoted(captured.getvalue())}}}}}}}\n')
                continue
            if not ok:
                write("".join(line + "\n" for line in captured.getvalue().splitlines() if line))
            write(f"{green}[       OK ]{off} {name}" if ok else f"{red}[  FAILED  ]{off} {name}")
            write(f" ({_duration(took)})\n")
        failed = passed.count(False)
        if self.json:
            self._write()
            return failed

        def tests(n: int) -> str:
            return "test" if n == 1 else "tests"

        write(f"{green}[==========]{off} {len(names)} {tests(len(names))} ran.\n")
        write(f"{green}[  PASSED  ]{off} {len(names) - failed} {tests(len(names) - failed)}.\n")
        if failed:
            write(f"{red}[  FAILED  ]{off} {failed} {tests(failed)}, listed below:\n")
            for name, ok in zip(names, passed):
                if not ok:
                    write(f"{red}[  FAILED  ]{off} {name}\n")
        self._write()
        return failed

    def _missing_warnings(self) -> None:
        """The warnings of the attach points ``missing_probes = warn`` skipped, as bpftrace 0.23.2
        prints them after its Attaching line: a kfunc's when its programs load (in order), then a
        uprobe's when it attaches them (last first)."""
        script = self.script
        if script.config.missing_probes != "warn":
            return
        kfuncs = [w for w in script.missing if "No BTF found" in w]
        for line in kfuncs + [w for w in reversed(script.missing) if w not in kfuncs]:
            print(line, file=self.err)

    def run(self) -> int:
        from pycore.kernel.process import PidWatch, TargetError, check_pid, poll_until, spawn_held, stop_child

        script = self.script
        script.late_warnings = True       # missing_probes' warnings after "Attaching", as bpftrace 0.23.2
        child = None
        watch = None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
        try:
            for s in old:
                signal.signal(s, self._on_signal)
            try:
                if self.pid:
                    check_pid(self.pid)
                    watch = PidWatch(self.pid)
                if self.cmd:
                    child = spawn_held(self.cmd)
                    script.pid = child.pid
                    script.resolver.pid = child.pid
                    script.checker.cpid = child.pid
            except TargetError as e:
                print(f"pycore trace: {e}", file=self.err)
                return 2
            try:
                script.load(verbose=self.verbose)
            except BaseException:
                self._missing_warnings()          # bpftrace 0.23.2 has printed them when its load fails
                raise
            if self.verbose:
                for c in script.compiled:
                    print(f"{c.target.probe}: {len(c.insns)} instructions", file=self.err)
            # the ring mapped and the formatters imported before attaching, as bpftrace opens its
            # buffers first: else our own mmap (fget) and .pyc opens (vfs_open) show in the output
            script.ring()
            from pycore.lang import output as O

            # BEGIN runs, then the other probes are attached (Script.start, bpftrace's order), so that
            # nothing they record comes before BEGIN's output. "Attaching N probes..." comes after
            # (bpftrace prints it before): it says the probes are attached, which tests wait for, and
            # it still comes before any output, which is printed from the ring after this.
            n = script.start()
            if script.testing:      # bpftrace 0.25 --test: no Attaching line, no maps at the end
                self._poll()        # BEGIN's output, before the first test's
                failed = self._run_tests()
                script.run_special("END")
                self._poll()
                return 1 if failed else 0
            if self.json and not self.quiet:
                self.out.write(O.attached_json(n))
            elif not self.quiet:
                print(O.attached_text(n).rstrip("\n"), file=self.err)
            self._missing_warnings()
            if script.resolver.skipped:
                skipped = script.resolver.skipped
                print(f"pycore trace: {len(skipped)} wildcard match{'es' if len(skipped) > 1 else ''} skipped: "
                      + ", ".join(skipped), file=self.err)
            if self.verbose:
                from pycore.lang.runtime import _method

                for c in script.compiled:
                    print(f"  {c.target.probe}: {_method(c.target)}", file=self.err)
            if child is not None:
                os.kill(child.pid, signal.SIGCONT)
            stopped = lambda: self._stop or script.exited  # noqa: E731
            poll_until(lambda: self._poll(stopped), stopped=stopped, duration=self.duration, child=child,
                       watch=watch, ready=script.ring().fileno())
            # detached first, so the ring holds all there is to print; then END, then the maps
            ended = time.monotonic()
            script.detach()
            detached = time.monotonic()
            self._drain()
            drained = time.monotonic()
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            script.run_special("END")
            self._poll()
            from pycore.lang import output as O

            self._chunks.append(O.EXIT_PREAMBLE)    # bpftrace 0.23.2 prints it with print_maps_on_exit = 0 too
            if script.config.print_maps_on_exit:
                self._print_maps()
            self._write()
            lost, refused = script.counters()
            if lost:
                print((O.lost_json(lost) if self.json else O.lost_text(lost)).rstrip("\n"), file=self.err)
            for name, n in refused.items():   # bpftrace 0.17 says nothing; newer ones warn
                if n:
                    size = script.map_size(name)
                    why = "BPFTRACE_MAP_KEYS_MAX" if size == script.map_keys else "its declaration"
                    print(f"pycore trace: {name}: {n} key{'s' if n > 1 else ''} refused: the map was full at "
                          f"{size} keys ({why})", file=self.err)
            if script.exit_code:
                return script.exit_code
            if self.verbose:    # how long the end took, by step (Ctrl-C must be prompt: tests/test_stop*.py)
                since = f"{ended - self._first_signal:.3f} s after the signal, " if self._signals else ""
                print(f"pycore trace: ended {since}detached in {detached - ended:.3f} s, ring printed in "
                      f"{drained - detached:.3f} s, END and maps in {time.monotonic() - drained:.3f} s",
                      file=self.err)
            return 0
        finally:
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            script.close()
            if child is not None:
                stop_child(child)
            if watch is not None:
                watch.close()
            for s, h in old.items():
                signal.signal(s, h)


def _duration(ns: int) -> str:
    """A test's time as bpftrace's report gives it, in s, ms, us or ns by its size (bpftrace 0.25 to
    0.26.1 print the unit's scale there, "1000 us" for any time in microseconds: pycore the time)."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= scale:
            return f"{ns // scale} {unit}"
    return f"{ns} ns"

