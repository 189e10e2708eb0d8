"""bpftrace scripts served as Prometheus metrics: ``pycore serve --script FILE.bt``.

Each script runs as ``pycore trace`` runs it (a :class:`~pycore.lang.session.TraceSession`);
its maps are read when scraped (:class:`~pycore.lang.metrics.ScriptCollector`);
its printf output goes to the log (stderr), one line per event, at most
``log_rate`` lines a second (what is dropped is counted, in the log and as a
metric).  A script that does not load is reported (``pycore_script_up`` 0,
the error in ``pycore_script_info``) and the others serve on.

:class:`ScriptSet` owns the served scripts (``--script`` files and ``--scripts-dir``
directories) and reloads what changed (SIGHUP, a changed file in a directory):
an unchanged script keeps its session and maps; a changed one replaces the old
only once it loaded; one that no longer loads leaves its previous version running.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
import time

from prometheus_client.registry import Collector

from pycore.lang.metrics import DEFAULT_SERIES_LIMIT, Family, families_of, families_text, sanitize_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator
    from typing import Any, TextIO

    from pycore.lang.metrics import ScriptCollector
    from pycore.lang.runtime import Event
    from pycore.lang.session import TraceSession

__all__ = ["ServedScript", "ScriptSet", "ScriptsCollector", "read_trusted", "trusted_dir", "script_name",
           "UntrustedScript", "keep_apart"]

WATCH_INTERVAL = 1.0    # seconds between two looks at the --scripts-dir directories


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
        _check_root_only(path, st, "a script", "its probes")
        with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.close(fd)


def _check_root_only(path: str, st: os.stat_result, what: str, runs: str) -> None:
    """``path`` (``st``) and every directory above it writable by root only."""
    if _writable_by_others(st, False):
        raise UntrustedScript(f"{path}: refusing {what} that a user other than root can write (owner uid "
                              f"{st.st_uid}, mode {stat.filemode(st.st_mode)}): {runs} run in the kernel; "
                              "chown root and chmod go-w it")
    _check_dirs(path, os.path.dirname(os.path.realpath(path)))


def _check_dirs(path: str, d: str) -> None:
    """``d`` and every directory above it writable by root only (a sticky root directory passes)."""
    while True:
        dst = os.stat(d)
        if _writable_by_others(dst, True):
            raise UntrustedScript(f"{path}: refusing a script in {d}, a directory a user other than root can "
                                  f"write (owner uid {dst.st_uid}, mode {stat.filemode(dst.st_mode)})")
        if d == "/":
            break
        d = os.path.dirname(d)


def trusted_dir(path: str) -> list[str]:
    """The ``*.bt`` files of a scripts directory, sorted, once the directory passes the check of
    :func:`read_trusted` (the directory itself may not even be sticky: anyone could add a script to
    it); names starting with ``.`` are left out (editors' lock and swap files)."""
    try:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise UntrustedScript(f"{path}: not a directory")
        _check_root_only(path, st, "a scripts directory", "its scripts")
        with os.scandir(path) as it:
            names = sorted(e.name for e in it if e.name.endswith(".bt") and not e.name.startswith(".")
                           and e.is_file())
    except OSError as e:
        raise UntrustedScript(f"{path}: {e.strerror}") from None
    return [os.path.join(path, n) for n in names]


class ServedScript:
    """One script of the server: its session (None when it did not load), its consumer, its log budget."""

    def __init__(self, path: str, name: str, *, unsafe: bool = False, series_limit: int = DEFAULT_SERIES_LIMIT,
                 log_rate: float = 100.0, err: TextIO | None = None, text: str | None = None,
                 pid: int | None = None, map_size: int | None = None) -> None:
        self.path = path
        self.name = name
        self.unsafe = unsafe
        self.series_limit = series_limit
        self.log_rate = log_rate
        self.err = err or sys.stderr
        self.text = text
        self.pid = pid
        self.map_size = map_size        # keys a map can hold (--map-keys-max), None: bpftrace's 4096
        self.session: TraceSession | None = None
        self.collector: ScriptCollector | None = None
        self.error = ""
        self.reload_error = ""      # why the file's new text did not replace this running version
        self.all_plans: list[Any] = []     # the collector's plans before keep_apart()
        self.lock = threading.Lock()
        self.logged = 0
        self.dropped = 0
        self._unsaid = 0            # dropped since the log last said so
        self._tokens = log_rate
        self._refill = time.monotonic()
        self._said = 0.0
        self._partial = ""          # output of records with no newline yet (time() then printf(), as tcpconnect.bt)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def up(self) -> bool:
        return self.session is not None and not self.error

    @property
    def problem(self) -> str:
        """What pycore_script_info's ``error`` says: why it is down, or why the file's new text did not
        load while this version serves on."""
        if self.error or not self.reload_error:
            return self.error
        return f"reload failed, the previous version serves on: {self.reload_error}"

    def load(self, report: bool = True) -> bool:
        """Compile, load and attach; on failure the error is kept (and logged unless not ``report``) and
        False returned."""
        from pycore.errors import PycoreError
        from pycore.lang.metrics import AnnotationError
        from pycore.lang.session import TraceSession

        try:
            text = self.text if self.text is not None else read_trusted(self.path)
            session = TraceSession(text, filename=self.path, unsafe=self.unsafe, pid=self.pid, map_size=self.map_size,
                                   unsafe_hint="run pycore serve with --unsafe to allow it")
        except (PycoreError, OSError, UntrustedScript) as e:
            self.error = _one_line(str(e))
            if report:
                self.say(f"not loaded: {self.error}")
            return False
        try:
            self.collector = session.collector(self.name, series_limit=self.series_limit, lock=self.lock)
        except AnnotationError as e:
            session.close()
            self.error = f"{self.path}: {e}"
            if report:
                self.say(f"not loaded: {self.error}")
            return False
        self.all_plans = list(self.collector.plans)
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

    def _log(self, ev: Event | None) -> None:
        """Log the output's complete lines (``None``: the rest too); a line may take several records."""
        if ev is not None and ev.kind == "map" and not ev.text:
            return
        text = self._partial + (ev.text if ev is not None else "")
        cut = text.rfind("\n") + 1 if ev is not None and len(text) < 4096 else len(text)
        text, self._partial = text[:cut], text[cut:]
        if not text:
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
        lines = text.rstrip("\n").split("\n") if text.strip("\n") else [""]
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
            self._log(None)
            self._say_dropped(now=True)


class ScriptSet:
    """The served scripts: the ``--script`` files and the ``*.bt`` files of the ``--scripts-dir``
    directories, loaded, reloaded and closed here so that a scrape sees one consistent list.

    :attr:`scripts` is replaced whole by a reload, never changed in place: a scrape in another thread
    iterates the list it got. A reload (:meth:`reload`, on SIGHUP or a changed directory) reads every
    file again and, per script: an unchanged text keeps its session (its maps, its counters: they
    keep counting); a changed text is loaded beside the running version and replaces it only once it
    loaded (the old one then runs its END and is detached); a text that does not load leaves the old
    version running (``pycore_script_up`` stays 1, the error is in ``pycore_script_info``); a file
    gone is closed and its series disappear; a new file is loaded. A script that never loaded is
    tried again. ``pycore_scripts_last_reload_successful`` is 0 while any file does not load as it
    now reads.

    The directories are watched by :meth:`watch`, a look at the files' inode, size, times and mode
    every :data:`WATCH_INTERVAL` seconds, not inotify: the standard library has no inotify, a few
    ``stat`` calls a second cost nothing next to the scripts, and a poll also sees what inotify
    misses (network file systems, a Kubernetes ConfigMap's symlink swap, a directory replaced whole).
    A change is acted on once two looks agree, so a file being written is not loaded half-way.
    """

    def __init__(self, files: list[str], dirs: list[str], *, unsafe: bool = False,
                 series_limit: int = DEFAULT_SERIES_LIMIT, log_rate: float = 100.0, pid: int | None = None,
                 err: TextIO | None = None, map_size: int | None = None) -> None:
        self.files = list(files)
        self.dirs = [os.path.normpath(d) for d in dirs]
        self.options: dict[str, Any] = {"unsafe": unsafe, "series_limit": series_limit, "log_rate": log_rate,
                                        "pid": pid, "err": err, "map_size": map_size}
        self.err = err or sys.stderr
        self.scripts: list[ServedScript] = []
        self.reloads = 0            # after the start
        self.failures = 0
        self.last_ok = True
        self.last_ok_time = 0.0
        self._lock = threading.Lock()       # one load, reload or close at a time
        self._closed = False
        self._seen: object = None           # the directories' signature as last read

    def __bool__(self) -> bool:
        return bool(self.files or self.dirs)

    def _wanted(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(path, name) of every script the files and directories give now, each path once; and the
        errors of directories that could not be listed (their scripts are then left as they are)."""
        paths = list(self.files)
        errors = []
        for d in self.dirs:
            try:
                paths += trusted_dir(d)
            except UntrustedScript as e:
                errors.append(str(e))
                paths += [s.path for s in self.scripts if os.path.dirname(s.path) == d]
        seen: set[str] = set()
        out = []
        for p in paths:
            real = os.path.realpath(p)
            if real not in seen:
                seen.add(real)
                out.append((p, script_name(p)))
        return out, errors

    def _signature(self) -> object:
        """What the watch compares: each directory's files with their inode, size, times, mode, owner."""
        sig: list[tuple[object, ...]] = []
        for d in self.dirs:
            try:
                st = os.stat(d)
                files = []
                with os.scandir(d) as it:
                    for e in it:
                        if e.name.endswith(".bt"):
                            try:
                                f = os.stat(e.path)
                            except OSError:
                                continue
                            files.append((e.name, f.st_ino, f.st_size, f.st_mtime_ns, f.st_ctime_ns, f.st_mode,
                                          f.st_uid, f.st_gid))
                sig.append((d, st.st_ino, st.st_mode, st.st_uid, st.st_gid, sorted(files)))
            except OSError as e:
                sig.append((d, e.errno))
        return sig

    def start(self) -> None:
        """Read every file (nothing loaded yet): raises :class:`UntrustedScript` with the first file or
        directory refused, or two files of one name, for ``serve`` to exit with."""
        self._seen = self._signature()
        wanted, errors = self._wanted()
        if errors:
            raise UntrustedScript(errors[0])
        names: dict[str, str] = {}
        for path, name in wanted:
            if name in names:
                raise UntrustedScript(f"two scripts named {name} ({names[name]}, {path}): their metrics would mix")
            names[name] = path
            self.scripts.append(ServedScript(path, name, text=read_trusted(path), **self.options))

    def load(self, stop: threading.Event | None = None) -> None:
        """Load what :meth:`start` read (``stop``: give up between two scripts)."""
        with self._lock:
            for s in self.scripts:
                if stop is not None and stop.is_set():
                    return
                s.load()
            keep_apart(self.scripts)
            self._done(all(s.session is not None for s in self.scripts))

    def _done(self, ok: bool) -> None:
        self.last_ok = ok
        if ok:
            self.last_ok_time = time.time()

    def reload(self, why: str) -> bool:
        """Reload what changed (the class's docstring says how), one log line per script; True when
        every file loaded as it now reads."""
        with self._lock:
            if self._closed:
                return False
            self.reloads += 1
            self._seen = self._signature()
            wanted, errors = self._wanted()
            for e in errors:
                self._say(f"reload: {_one_line(e)}: its scripts are left as they are")
            ok = not errors
            old = {s.path: s for s in self.scripts}
            owner = {s.name: s.path for s in self.scripts}
            wanted_paths = {p for p, _ in wanted}
            new: list[ServedScript] = []
            retired: list[ServedScript] = []
            names: set[str] = set()
            said = {"loaded": 0, "kept": 0, "replaced": 0, "failed": 0, "removed": 0}
            for path, name in wanted:
                cur = old.pop(path, None)
                other = owner.get(name)
                if name in names or (other not in (None, path) and other in wanted_paths):
                    self._say(f"reload: {path}: failed: two scripts named {name}: their metrics would mix")
                    said["failed"] += 1
                    ok = False
                    if cur is not None:
                        retired.append(cur)
                    continue
                names.add(name)
                try:
                    text: str | None = read_trusted(path)
                    error = ""
                except UntrustedScript as e:
                    text, error = None, _one_line(str(e))
                if cur is not None and cur.session is not None and (text is None or text == cur.text):
                    cur.reload_error = error
                    new.append(cur)
                    if error:
                        cur.say(f"reload: failed: {error} (the previous version serves on)")
                        said["failed"] += 1
                        ok = False
                    else:
                        cur.say("reload: kept")
                        said["kept"] += 1
                    continue
                s = ServedScript(path, name, text=text, **self.options)
                if text is not None and s.load(report=False):
                    new.append(s)
                    if cur is not None:
                        retired.append(cur)
                    if cur is not None and cur.session is not None:
                        s.say("reload: replaced")
                        said["replaced"] += 1
                    else:                       # new, or down until now
                        s.say("reload: loaded")
                        said["loaded"] += 1
                    continue
                s.error = s.error or error
                ok = False
                said["failed"] += 1
                if cur is not None and cur.session is not None:
                    cur.reload_error = s.error
                    new.append(cur)
                    cur.say(f"reload: failed: {s.error} (the previous version serves on)")
                else:
                    new.append(s)
                    s.say(f"reload: failed: {s.error}")
                    if cur is not None:
                        retired.append(cur)
            for s in old.values():
                s.say("reload: removed")
                said["removed"] += 1
                retired.append(s)
            keep_apart(new, first={s.path for s in self.scripts})
            self.scripts = new                  # the swap: scrapes from now on see the new list
            for s in retired:
                s.close()
            if not ok:
                self.failures += 1
            self._done(ok)
            self._say(f"reload ({why}) done: " + ", ".join(f"{n} {k}" for k, n in said.items() if n)
                      + ("" if ok else "; not every file loaded"))
            return ok

    def watch(self, stop: threading.Event, interval: float = WATCH_INTERVAL) -> threading.Thread | None:
        """A thread reloading when a file of the directories changed, until ``stop`` (None without
        directories)."""
        if not self.dirs:
            return None

        def run() -> None:
            last = self._seen
            while not stop.wait(interval):
                now = self._signature()
                if now != self._seen and now == last:
                    self.reload("a file changed in " + ", ".join(self.dirs))
                last = now

        t = threading.Thread(target=run, daemon=True, name="pycore-scripts-watch")
        t.start()
        return t

    def reload_families(self) -> Iterator[Any]:
        """pycore_scripts_last_reload_successful and its kin, named as Prometheus's own
        (prometheus_config_last_reload_successful...)."""
        yield from families_of(self.reload_rows())

    def reload_rows(self) -> list[Family]:
        """:meth:`reload_families` as rows (pycore.lang.metrics.Family)."""
        return [
            ("pycore_scripts_last_reload_successful", "gauge", "1 when the last load or reload of the scripts "
             "loaded every file as it reads, else 0 (the log says which)", (), [([], 1 if self.last_ok else 0)]),
            ("pycore_scripts_last_reload_success_timestamp_seconds", "gauge", "when the scripts were last "
             "loaded or reloaded without a failure (Unix time)", (), [([], self.last_ok_time)]),
            ("pycore_scripts_reloads", "counter", "reloads of the scripts since the start (SIGHUP, a changed "
             "file in a --scripts-dir)", (), [([], self.reloads)]),
            ("pycore_scripts_reload_failures", "counter", "reloads after which a file did not load (its "
             "previous version, if any, serves on)", (), [([], self.failures)])]

    def close(self) -> None:
        """Every script's END run, and everything detached (SIGTERM)."""
        with self._lock:
            self._closed = True
            for s in self.scripts:
                s.close()

    def _say(self, text: str) -> None:
        self.err.write(f"pycore serve: {text}\n")
        self.err.flush()


class ScriptsCollector(Collector):
    """Health of every served script, and the maps of those running (a ``prometheus_client`` collector)."""

    def __init__(self, scripts: list[ServedScript] | ScriptSet) -> None:
        self.source = scripts
        self.text_maps = False      # the maps are written by maps_text(), collect() gives the rest

    @property
    def scripts(self) -> list[ServedScript]:
        """The scripts now: a reload replaces a ScriptSet's list whole, so a scrape iterates the one it got
        (a script closed meanwhile gives no maps: its collector checks under the script's lock)."""
        src = self.source
        return src.scripts if isinstance(src, ScriptSet) else src

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        if self.text_maps:
            yield from families_of(self.health_rows())
            return
        head, rest = self._read(lambda c: list(c.collect()))
        yield from families_of(head)
        yield from _merge(rest)

    def health_rows(self) -> list[Family]:
        """Every family but the maps' (up, info, log lines, reloads, then each running script's health,
        one family of each name), read now, as rows (pycore.lang.metrics.Family): what :meth:`collect`
        gives once :meth:`maps_text` wrote the maps, and :meth:`health_text` writes."""
        head, rest = self._read(lambda c: c.health_rows())
        return head + _merge_rows(rest)

    def health_text(self, openmetrics: bool = False) -> str:
        """:meth:`health_rows` in the text format (or OpenMetrics' without its ``# EOF``): the bytes
        prometheus_client writes for :meth:`collect`'s families, written directly
        (pycore.lang.metrics.families_text says how and what it saves)."""
        return families_text(self.health_rows(), openmetrics)

    def _read(self, per_script: Callable[[ScriptCollector], list[Any]]) -> tuple[list[Family], list[Any]]:
        """The families pycore writes of every script (up, info, log lines; the reloads'), and what
        ``per_script`` gives of each running one (its health, and its maps unless written as text)."""
        up: Family = ("pycore_script_up", "gauge", "1 while the script is loaded and attached, 0 if it did not "
                      "load or has ended (pycore_script_info says why)", ("script",), [])
        info: Family = ("pycore_script_info", "gauge", "the script's file, and why it is down (empty when up)",
                        ("script", "file", "error"), [])
        logged: Family = ("pycore_script_log_lines", "counter", "output lines of the script written to the log",
                          ("script",), [])
        dropped: Family = ("pycore_script_log_dropped", "counter", "output lines of the script not logged "
                           "(over the log rate)", ("script",), [])
        rest: list[Any] = []
        for s in self.scripts:
            up[4].append(([s.name], 1 if s.up else 0))
            info[4].append(([s.name, s.path, s.problem], 1))
            if s.session is None or s.collector is None:
                continue
            logged[4].append(([s.name], s.logged))
            dropped[4].append(([s.name], s.dropped))
            try:
                rest.extend(per_script(s.collector))
            except OSError as e:       # a map read failed: said, the other scripts still scraped
                s.say(f"reading its maps: {e}")
        head = [up, info, logged, dropped]
        if isinstance(self.source, ScriptSet):
            head += self.source.reload_rows()
        return head, rest

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


def keep_apart(scripts: list[ServedScript], first: Collection[str] = ()) -> None:
    """Maps of two scripts whose metrics share a name (script a_b's @c and script a's @b_c): the later
    one is left out, and the log says so (one exposition cannot hold both). Scripts whose path is in
    ``first`` (those serving before a reload) keep theirs over the others; a map left out comes back
    once the other script is gone."""
    from pycore.lang.metrics import sample_names

    taken: set[str] = set()
    for s in sorted(scripts, key=lambda s: s.path not in first):
        if s.collector is None:
            continue
        keep = []
        for p in s.all_plans:
            names = sample_names(p.metric, p.type)
            if names & taken:
                if p in s.collector.plans:
                    s.say(f"{p.map_name}: not exported: {p.metric} is also another script's metric "
                          f"(rename it with // {p.map_name}: name=...)")
                continue
            taken |= names
            keep.append(p)
        with s.lock:
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


def _merge_rows(rows: list[Family]) -> list[Family]:
    """Rows of one name from several scripts (pycore_script_series...) as one family each, in the
    order the names first come (as :func:`_merge`)."""
    byname: dict[str, Family] = {}
    for f in rows:
        have = byname.get(f[0])
        if have is None:
            byname[f[0]] = (f[0], f[1], f[2], f[3], list(f[4]))
        else:
            have[4].extend(f[4])
    return list(byname.values())


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip())
