"""bpftrace scripts served as Prometheus metrics: ``pycore serve --script FILE.bt``.

Each script runs as ``pycore trace`` runs it (a :class:`~pycore.lang.session.TraceSession`);
its maps are read when scraped (:class:`~pycore.lang.metrics.ScriptCollector`);
its printf output goes to the log (stderr), one line per event, at most
``log_rate`` lines a second (what is dropped is counted, in the log and as a
metric).  A script that does not load is reported (``pycore_script_up`` 0,
the error in ``pycore_script_info``) and the others serve on.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
import time

from prometheus_client.registry import Collector

from pycore.lang.metrics import DEFAULT_SERIES_LIMIT, sanitize_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, TextIO

    from pycore.lang.metrics import ScriptCollector
    from pycore.lang.runtime import Event
    from pycore.lang.session import TraceSession

__all__ = ["ServedScript", "ScriptsCollector", "read_trusted", "script_name", "UntrustedScript", "keep_apart"]


class UntrustedScript(ValueError):
    """A script file (or its directory) that someone other than root could change."""


def script_name(path: str) -> str:
    """The name a script is served under: its file name without ``.bt``, as a metric name part."""
    base = os.path.basename(path)
    return sanitize_name(base[:-3] if base.endswith(".bt") else base) or "script"


def _writable_by_others(st: os.stat_result, directory: bool) -> bool:
    if directory and st.st_mode & stat.S_ISVTX and st.st_uid == 0:
        return False        # /tmp: others can add files, not replace root's
    return st.st_uid != 0 or bool(st.st_mode & stat.S_IWOTH) or (bool(st.st_mode & stat.S_IWGRP) and st.st_gid != 0)


def read_trusted(path: str) -> str:
    """The text of a script file only root can change (the file and every directory above it): its
    programs run in the kernel, so a file another user can write would let them run anything there."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise UntrustedScript(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedScript(f"{path}: not a regular file")
        if _writable_by_others(st, False):
            raise UntrustedScript(f"{path}: refusing a script that a user other than root can write "
                                  f"(owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}): its probes run "
                                  "in the kernel; chown root and chmod go-w it")
        d = os.path.dirname(os.path.realpath(path))
        while True:
            dst = os.stat(d)
            if _writable_by_others(dst, True):
                raise UntrustedScript(f"{path}: refusing a script in {d}, a directory a user other than root can "
                                      f"write (owner uid {dst.st_uid}, mode {stat.filemode(dst.st_mode)})")
            if d == "/":
                break
            d = os.path.dirname(d)
        with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.close(fd)


class ServedScript:
    """One script of the server: its session (None when it did not load), its consumer, its log budget."""

    def __init__(self, path: str, name: str, *, unsafe: bool = False, series_limit: int = DEFAULT_SERIES_LIMIT,
                 log_rate: float = 100.0, err: TextIO | None = None, text: str | None = None,
                 pid: int | None = None) -> None:
        self.path = path
        self.name = name
        self.unsafe = unsafe
        self.series_limit = series_limit
        self.log_rate = log_rate
        self.err = err or sys.stderr
        self.text = text
        self.pid = pid
        self.session: TraceSession | None = None
        self.collector: ScriptCollector | None = None
        self.error = ""
        self.lock = threading.Lock()
        self.logged = 0
        self.dropped = 0
        self._unsaid = 0            # dropped since the log last said so
        self._tokens = log_rate
        self._refill = time.monotonic()
        self._said = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def up(self) -> bool:
        return self.session is not None and not self.error

    def load(self) -> bool:
        """Compile, load and attach; on failure the error is kept (and logged) and False returned."""
        from pycore.errors import PycoreError
        from pycore.lang.metrics import AnnotationError
        from pycore.lang.session import TraceSession

        try:
            text = self.text if self.text is not None else read_trusted(self.path)
            session = TraceSession(text, filename=self.path, unsafe=self.unsafe, pid=self.pid,
                                   unsafe_hint="run pycore serve with --unsafe to allow it")
        except (PycoreError, OSError, UntrustedScript) as e:
            self.error = _one_line(str(e))
            self.say(f"not loaded: {self.error}")
            return False
        try:
            self.collector = session.collector(self.name, series_limit=self.series_limit, lock=self.lock)
        except AnnotationError as e:
            session.close()
            self.error = f"{self.path}: {e}"
            self.say(f"not loaded: {self.error}")
            return False
        self.session = session
        for note in self.collector.notes:
            self.say(note)
        session.poll(self._log, 0)      # BEGIN's output, and its exit() before the first scrape
        if session.ended:
            self._ended()
            return True
        self._thread = threading.Thread(target=self._consume, daemon=True, name=f"pycore-script-{self.name}")
        self._thread.start()
        return True

    def say(self, text: str) -> None:
        self.err.write(f"pycore serve: script {self.name}: {text}\n")
        self.err.flush()

    def _consume(self) -> None:
        """The script's output to the log, until close() or the script's exit()."""
        session = self.session
        assert session is not None
        try:
            while not self._stop.is_set():
                session.poll(self._log, timeout=0.5)
                if session.ended:
                    self._ended()
                    return
                self._say_dropped()
        except (ValueError, OSError):    # closed under us: the end
            pass

    def _ended(self) -> None:
        """exit(): detached as bpftrace ends there, its maps kept for the scrapes, reported down."""
        assert self.session is not None
        with self.lock:
            self.session.script.detach()
        self.error = "the script called exit(): its probes are detached, its maps still served"
        self.say(self.error)

    def _log(self, ev: Event) -> None:
        if ev.kind == "map" and not ev.text:
            return
        now = time.monotonic()
        self._tokens = min(self.log_rate, self._tokens + (now - self._refill) * self.log_rate)
        self._refill = now
        if self._tokens < 1:
            self.dropped += 1
            self._unsaid += 1
            return
        self._tokens -= 1
        self.logged += 1
        lines = ev.text.rstrip("\n").split("\n") if ev.text.strip("\n") else [""]
        self.err.write("".join(f"{self.name}: {line}\n" for line in lines))
        self.err.flush()

    def _say_dropped(self, now: bool = False) -> None:
        """How many lines were dropped since it was last said: once a second at most (``now``: at once)."""
        if self._unsaid and (now or time.monotonic() - self._said >= 1.0):
            self._said = time.monotonic()
            n, self._unsaid = self._unsaid, 0
            self.say(f"{n} output line{'s' if n > 1 else ''} dropped (over {self.log_rate:g} a second)")

    def close(self) -> None:
        """Stop the consumer, run END (its output logged), detach and free everything."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self.session is not None:
            with self.lock:
                try:
                    for ev in self.session.close():
                        if ev.kind != "map":
                            self._log(ev)
                except OSError as e:
                    self.say(f"END: {e}")
            self._say_dropped(now=True)


class ScriptsCollector(Collector):
    """Health of every served script, and the maps of those running (a ``prometheus_client`` collector)."""

    def __init__(self, scripts: list[ServedScript]) -> None:
        self.scripts = scripts
        self.text_maps = False      # the maps are written by maps_text(), collect() gives the rest

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        up = GaugeMetricFamily("pycore_script_up", "1 while the script is loaded and attached, 0 if it did not "
                               "load or has ended (pycore_script_info says why)", labels=["script"])
        info = GaugeMetricFamily("pycore_script_info", "the script's file, and why it is down (empty when up)",
                                 labels=["script", "file", "error"])
        logged = CounterMetricFamily("pycore_script_log_lines", "output lines of the script written to the log",
                                     labels=["script"])
        dropped = CounterMetricFamily("pycore_script_log_dropped", "output lines of the script not logged "
                                      "(over the log rate)", labels=["script"])
        rest: list[Any] = []
        for s in self.scripts:
            up.add_metric([s.name], 1 if s.up else 0)
            info.add_metric([s.name, s.path, s.error], 1)
            if s.session is None or s.collector is None:
                continue
            logged.add_metric([s.name], s.logged)
            dropped.add_metric([s.name], s.dropped)
            try:
                rest.extend(s.collector.health() if self.text_maps else s.collector.collect())
            except OSError as e:       # a map read failed: said, the other scripts still scraped
                s.say(f"reading its maps: {e}")
        yield from (up, info, logged, dropped)
        yield from _merge(rest)

    def maps_text(self, openmetrics: bool = False) -> str:
        """Every running script's maps in the text format (or OpenMetrics' without its ``# EOF``), read
        now (then :meth:`collect` gives their health only: ``text_maps``)."""
        self.text_maps = True
        parts = []
        for s in self.scripts:
            if s.collector is not None:
                try:
                    parts.append(s.collector.maps_text(openmetrics))
                except OSError as e:
                    s.say(f"reading its maps: {e}")
        return "".join(parts)


def keep_apart(scripts: list[ServedScript]) -> None:
    """Maps of two scripts whose metrics share a name (script a_b's @c and script a's @b_c): the later
    one is left out, and the log says so (one exposition cannot hold both)."""
    from pycore.lang.metrics import sample_names

    taken: set[str] = set()
    for s in scripts:
        if s.collector is None:
            continue
        keep = []
        for p in s.collector.plans:
            names = sample_names(p.metric, p.type)
            if names & taken:
                s.say(f"{p.map_name}: not exported: {p.metric} is also another script's metric "
                      f"(rename it with // {p.map_name}: name=...)")
                continue
            taken |= names
            keep.append(p)
        s.collector.plans = keep


def _merge(families: list[Any]) -> Iterator[Any]:
    """Families of one name from several scripts (pycore_script_series...) as one family each."""
    byname: dict[str, Any] = {}
    for f in families:
        have = byname.get(f.name)
        if have is None:
            byname[f.name] = f
        else:
            have.samples.extend(f.samples)
    yield from byname.values()


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip())
