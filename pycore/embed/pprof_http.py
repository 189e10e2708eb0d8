"""``/debug/pprof/`` for ``pycore serve --profile``: Go's net/http/pprof CPU profile, over pycore's sampler.

``GET /debug/pprof/profile?seconds=N`` samples every process of the host
(``pycore profile -a``; ``pid=PID`` narrows it to one process) for N seconds
(default 30, as Go) and answers the gzipped profile.proto that ``go tool
pprof`` and Parca pull, with Go's headers.  As Go does, one CPU profile at a
time: a second request meanwhile gets 500 "Could not enable CPU profiling: cpu
profiling already in use" (each profile attaches a program to a perf event
per CPU; a bounded cost per host is what a fleet's scrapers expect, and they
know Go's answer).  Unlike Go, a ``seconds`` that is not a whole number from
1 to :data:`MAX_SECONDS` is refused (400, one line) rather than taken as 30:
pycore's server has no write timeout for Go's other 400 to apply.

Nothing stays attached: the profile's session is closed when the time is up,
when the client goes away (its connection polled every 0.2 s), and by
:meth:`PprofEndpoint.close` (serve's exit, SIGTERM or Ctrl-C).  The
profiler's health (samples, lost samples, unwind failures by reason,
requests by status) is a ``prometheus_client`` collector: :meth:`collect`.
"""

from __future__ import annotations

import html
import os
import select
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

from pycore.errors import PycoreError
from pycore.profile.session import ProfileSession
from pycore.profile.unwind import FAILURES

__all__ = ["CONNECTION", "DEFAULT_SECONDS", "MAX_SECONDS", "PprofEndpoint"]

DEFAULT_SECONDS = 30
MAX_SECONDS = 86400
#: the WSGI environ key where serve's request handler puts the client's socket (for a disconnect)
CONNECTION = "pycore.connection"
BUSY = "Could not enable CPU profiling: cpu profiling already in use"
_POLL = 0.2
_GONE = select.POLLRDHUP | select.POLLHUP | select.POLLERR


class _Refused(Exception):
    """An HTTP error: status line and its one-line body."""

    def __init__(self, status: str, text: str) -> None:
        super().__init__(text)
        self.status = status


class PprofEndpoint:
    """The WSGI app of ``/debug/pprof/...`` and the profiler's health families."""

    def __init__(self, hz: int = 99) -> None:
        # what a profile loads lazily, imported at serve's start rather than in the first request's time
        import pycore.profile.pprof  # noqa: F401
        import pycore.profile.sampler  # noqa: F401
        import pycore.profile.symbols  # noqa: F401

        self.hz = hz
        self._busy = threading.Lock()           # one CPU profile at a time, as Go
        self._lock = threading.Lock()           # the counters and the running session
        self._closing = threading.Event()
        self._session: Any = None
        self._samples = 0
        self._lost = 0
        self._failures: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()

    # -- HTTP ----------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/debug/pprof", "/debug/pprof/"):
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                      ("X-Content-Type-Options", "nosniff")])
            return [_INDEX]
        if path != "/debug/pprof/profile":
            return _error(start_response, "404 Not Found", "Unknown profile")
        try:
            seconds, pid = _query(environ.get("QUERY_STRING", ""))
            session = self._profile(seconds, pid, environ.get(CONNECTION))
        except _Refused as e:
            self._count(e.status[:3])
            return _error(start_response, e.status, str(e))
        if session is None:             # the client went away: no one to write the profile to
            self._count("499")
            return _error(start_response, "499 Client Closed Request", "the client went away")
        body = session.pprof()
        self._count("200")
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Disposition", 'attachment; filename="profile"'),
                                  ("X-Content-Type-Options", "nosniff")])
        return [body]

    def _count(self, code: str) -> None:
        with self._lock:
            self._requests[code] += 1

    def _profile(self, seconds: int, pid: int | None, conn: Any) -> Any:
        """Sample for ``seconds`` (less when serve stops): the closed ProfileSession, or None when the
        client went away first (counted as 499, nginx's status for a client that closed its request)."""
        if not self._busy.acquire(blocking=False):
            raise _Refused("500 Internal Server Error", BUSY)
        try:
            if self._closing.is_set():
                raise _Refused("503 Service Unavailable", "pycore serve is stopping")
            try:
                session = ProfileSession(pid, hz=self.hz, all_processes=pid is None)
            except (PycoreError, OSError, ValueError) as e:
                raise _Refused("500 Internal Server Error",
                               f"Could not enable CPU profiling: {' '.join(str(e).split())}") from None
            with self._lock:
                self._session = session
            try:
                gone = self._wait(seconds, conn)
            finally:
                session.close()
                samples, lost, failures = session.health()
                with self._lock:
                    self._session = None
                    self._samples += samples
                    self._lost += lost
                    self._failures.update(failures)
            return None if gone else session
        finally:
            self._busy.release()

    def _wait(self, seconds: int, conn: Any) -> bool:
        """Wait ``seconds``, or until serve stops; True when the client went away first."""
        poller = None
        if conn is not None:
            poller = select.poll()
            poller.register(conn.fileno(), _GONE)
        end = time.monotonic() + seconds
        while not self._closing.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            if poller is not None and poller.poll(0):
                return True
            self._closing.wait(min(_POLL, left))
        return False

    def close(self) -> None:
        """Stop the profile being taken, if any, and detach it (serve's exit); later requests get 503."""
        self._closing.set()
        with self._lock:
            session = self._session
        if session is not None:
            session.close()

    # -- Prometheus ----------------------------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        """pycore_profile_* counters: every profile taken so far, the running one's samples included."""
        from prometheus_client.core import CounterMetricFamily

        with self._lock:
            samples, lost, failures = self._samples, self._lost, Counter(self._failures)
            requests = dict(self._requests)
            if self._session is not None:
                s, lo, f = self._session.health()
                samples, lost = samples + s, lost + lo
                failures.update(f)
        c = CounterMetricFamily("pycore_profile_samples", "samples received by /debug/pprof/profile's profiles")
        c.add_metric([], samples)
        yield c
        c = CounterMetricFamily("pycore_profile_lost_samples",
                                "samples the BPF program dropped because the ring buffer was full")
        c.add_metric([], lost)
        yield c
        c = CounterMetricFamily("pycore_profile_unwind_failures",
                                "samples whose stack could not be read whole, by reason (docs/profile.md)",
                                labels=["reason"])
        for reason in FAILURES:
            c.add_metric([reason], failures.get(reason, 0))
        yield c
        c = CounterMetricFamily("pycore_profile_requests", "requests of /debug/pprof/profile by HTTP status "
                                "(499: the client went away first)", labels=["code"])
        for code in sorted(requests):
            c.add_metric([code], requests[code])
        yield c


def _query(query: str) -> tuple[int, int | None]:
    """(seconds, pid or None) of the query string; a bad value is refused with a 400."""
    q = parse_qs(query, keep_blank_values=True)
    raw = q.get("seconds", [""])[-1]
    seconds = DEFAULT_SECONDS
    if raw != "":
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_SECONDS:
            raise _Refused("400 Bad Request", f"seconds={raw[:40]!r}: a whole number of seconds, 1 to {MAX_SECONDS}")
        seconds = int(raw)
    pid = None
    if "pid" in q:
        raw = q["pid"][-1]
        if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
            raise _Refused("400 Bad Request", f"pid={raw[:40]!r}: a process id")
        if not os.path.exists(f"/proc/{int(raw)}"):
            raise _Refused("400 Bad Request", f"pid={int(raw)}: no such process")
        pid = int(raw)
    return seconds, pid


def _error(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    """Go's serveError: plain text, one line, X-Go-Pprof."""
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("X-Go-Pprof", "1"),
                            ("X-Content-Type-Options", "nosniff")])
    return [text.encode() + b"\n"]


_INDEX = f"""<html>
<head>
<title>/debug/pprof/</title>
</head>
<body>
/debug/pprof/
<br>
Types of profiles available:
<table>
<thead><td>Count</td><td>Profile</td></thead>
<tr><td></td><td><a href="profile?seconds={DEFAULT_SECONDS}">profile</a></td></tr>
</table>
<br>
<p>
<div class=profile-name>profile: </div> {html.escape(
    "CPU profile of the host (pycore's sampler: Python, native and kernel frames). You can specify the "
    "duration in the seconds GET parameter, and one process with pid. After you get the profile file, "
    "use the go tool pprof command to investigate the profile.")}<br>
</p>
</body>
</html>
""".encode()
