"""``pycore.profile(...)``: the profiler inside a Python program, with the command's exports.

Sampling starts before :func:`profile` returns (loaded, attached, the target's
CPython registered); a daemon thread drains the ring buffer every 100 ms, as
the command's loop does.  :meth:`ProfileSession.close` (or the ``with``
block's end) stops the thread, drains what is left and closes the links, the
perf events and the object: nothing stays attached.  The samples stay, so the
exports can be called after ``close()`` as often as wanted; called while
sampling runs, they give the samples so far.

Profiling the calling process itself (``pid=os.getpid()``) is allowed: its
drain thread's own samples are then in the profile, under its own thread.
"""

from __future__ import annotations

import gzip
import io
import os
import threading
import time

from pycore.profile.stacks import Profile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.profile.sampler import Sampler
    from pycore.profile.unwind import Unwinder

__all__ = ["ProfileSession", "profile"]

POLL_SECONDS = 0.1


def profile(pid: int | None = None, *, hz: int | None = None, all_processes: bool = False,
            off_cpu: bool = False, min_block_us: int = 1) -> ProfileSession:
    """Start sampling process ``pid`` (all its threads), or every process with ``all_processes=True``,
    at ``hz`` samples a second on each CPU (default 99).  ``off_cpu=True``: record where the threads
    wait instead (every switch-out to its switch-in, waits under ``min_block_us`` left out), each stack
    weighted by the microseconds waited; ``hz`` does not apply.  Raises ``PermissionError`` without
    CAP_BPF/CAP_PERFMON, :class:`pycore.TargetError` for a ``pid`` that does not exist, ``ValueError``
    for a bad ``hz`` or combination."""
    return ProfileSession(pid, hz=hz, all_processes=all_processes, off_cpu=off_cpu, min_block_us=min_block_us)


class ProfileSession:
    """A running (then closed) profile: ``folded()``, ``pprof()``, ``speedscope()``, ``html()``, ``top()``."""

    def __init__(self, pid: int | None = None, *, hz: int | None = None, all_processes: bool = False,
                 off_cpu: bool = False, min_block_us: int = 1) -> None:
        from pycore.kernel.privileges import missing_privileges
        from pycore.kernel.process import TargetError
        from pycore.profile.sampler import Sampler
        from pycore.profile.unwind import HEADER, Unwinder

        if (pid is None) == (not all_processes):
            raise ValueError("profile(): give a pid or all_processes=True (one of the two)")
        if off_cpu and hz is not None:
            raise ValueError("profile(): hz does not apply with off_cpu=True (every wait is recorded)")
        if not isinstance(min_block_us, int) or min_block_us < 0:
            raise ValueError(f"profile(): min_block_us={min_block_us!r}: 0 or more microseconds")
        if hz is None:
            hz = 99
        if not isinstance(hz, int) or not 1 <= hz <= 10000:
            raise ValueError(f"profile(): hz={hz!r}: the frequency must be 1 to 10000 Hz")
        if pid is not None and (pid <= 0 or not os.path.exists(f"/proc/{pid}")):
            raise TargetError(f"profile(): pid {pid}: no such process")
        why = missing_privileges()
        if why:
            raise PermissionError(why)
        self.pid = pid
        self.hz = hz
        self._header = HEADER
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._result: Profile | None = None
        self._sampler: Sampler | None = Sampler(pid, hz, all_processes=all_processes,
                                                exclude_self=pid != os.getpid(), off_cpu=off_cpu,
                                                min_block_us=min_block_us)
        self._unwinder: Unwinder = Unwinder(hz, self._sampler.pythons, off_cpu=off_cpu)
        self._seen: set[int] = set()
        self._lost = 0
        self._sampler.start()              # closes what it opened when it fails
        self._unwinder.start()             # the native walks, in a thread of their own
        self._start = time.monotonic()
        self._end: float | None = None
        self._thread = threading.Thread(target=self._drain, name="pycore-profile", daemon=True)
        self._thread.start()

    # -- sampling ------------------------------------------------------------------------------
    def _handle(self, data: bytes) -> None:
        pid = self._header.unpack_from(data)[0]
        if pid not in self._seen:
            self._seen.add(pid)
            if self._sampler is not None and self._sampler.all_processes:
                self._sampler.register(pid, quiet=True)
        self._unwinder.add(data)

    def _drain(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self._sampler is None:
                    return
                self._sampler.poll(self._handle, 0)
                self._lost = self._sampler.lost
            self._stop.wait(POLL_SECONDS)

    @property
    def closed(self) -> bool:
        return self._sampler is None

    def close(self) -> None:
        """Stop sampling and detach (the samples stay); safe to call twice."""
        self._stop.set()
        sampler = self._sampler
        if sampler is not None:
            # sampling ends now, not once the drain thread has caught up (the profile's duration)
            sampler.stop()
            if self._end is None:
                self._end = time.monotonic()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if self._sampler is None:
                return
            try:
                self._sampler.poll(self._handle, 0)
            finally:
                self._lost = self._sampler.lost
                self._sampler.close()
                self._sampler = None
                self._unwinder.close()     # the walker thread, the processes' memory
                if self._end is None:
                    self._end = time.monotonic()

    def __enter__(self) -> ProfileSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- results -------------------------------------------------------------------------------
    @property
    def profile(self) -> Profile:
        """The samples (so far, while sampling runs) as named stacks."""
        if self._result is not None:
            return self._result
        with self._lock:
            if self._sampler is not None:
                self._sampler.poll(self._handle, 0)
            prof = self._unwinder.profile()
            prof.lost = self._sampler.lost if self._sampler is not None else self._lost
            prof.duration = (self._end or time.monotonic()) - self._start
            if self._sampler is None:
                self._unwinder.close()
                self._result = prof
        return prof

    def health(self) -> tuple[int, int, dict[str, int]]:
        """(samples received, samples lost, stacks not read whole by reason:
        :data:`pycore.profile.unwind.FAILURES`) so far, without naming the stacks: cheap enough for
        every scrape of pycore serve --profile's metrics.  Read without the session's lock, which
        the drain thread holds while it unwinds what the ring holds (a scrape does not wait for that):
        the lost count as of the last drain."""
        return self._unwinder.samples, self._lost, dict(self._unwinder.failures)

    @property
    def samples(self) -> int:
        """Samples taken (off-CPU: microseconds waited, the sum of the stacks' weights)."""
        return self.profile.samples

    def folded(self) -> str:
        """flamegraph.pl's input: ``frame;frame;... COUNT`` lines, sorted."""
        from pycore.profile.folded import write_folded

        out = io.StringIO()
        write_folded(self.profile, out)
        return out.getvalue()

    def pprof(self) -> bytes:
        """google/pprof's profile.proto, gzipped (``go tool pprof`` reads it)."""
        from pycore.profile.pprof import encode_pprof

        return gzip.compress(encode_pprof(self.profile))

    def speedscope(self) -> str:
        """speedscope's own file format (JSON text)."""
        from pycore.profile.speedscope import write_speedscope

        out = io.StringIO()
        write_speedscope(self.profile, out)
        return out.getvalue()

    def html(self, title: str = "pycore profile") -> str:
        """The self-contained interactive flame graph (one HTML page, no network)."""
        from pycore.profile.html import write_html

        out = io.StringIO()
        write_html(self.profile, out, title)
        return out.getvalue()

    def top(self, limit: int = 25, by: str = "self") -> str:
        """The terminal's table: the ``limit`` functions with the most samples by ``by`` (self or total)."""
        from pycore.profile.top import write_top

        if by not in ("self", "total"):
            raise ValueError(f"top(): by={by!r}: self or total")
        out = io.StringIO()
        write_top(self.profile, out, limit, by)
        return out.getvalue()
