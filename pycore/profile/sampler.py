"""The sampling side: the BPF object, one CPU-clock perf event per CPU, the ring buffer.

Every CPU gets a software CPU-clock event at ``hz`` samples a second (the
frequency mode, as bpftrace's ``profile:hz:99`` and perf do) running the
``on_sample`` program; the program keeps the samples of the target process
(``-p``/``-c``) or of every process but pycore and the idle task (``-a``).
:meth:`Sampler.close` closes the links, the perf events and the object, in
that order, and is safe to call twice: the command calls it on every way out
(the end, ``-d``, Ctrl-C, SIGTERM, an error).

With ``off_cpu`` the perf events are not opened: the ``on_switch`` program
(``tp_btf/sched_switch``) records a profiled thread's stacks as it is switched
out and sends them, with the wait in microseconds, when it is switched in.
"""

from __future__ import annotations

import os
import threading
import time

from pycore.profile.pyframes import PythonProcess, find_python

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["OBJECT", "Sampler"]

OBJECT = "profile"
# threads whose pending wait the off-CPU program keeps (16.5 KiB each, preallocated): one
# process's threads, or every process's; past it the least recently switched thread's is dropped
WAIT_SLOTS, WAIT_SLOTS_ALL = 512, 4096


NO_CFRAME = 0xFFFF      # struct py_proc.cframe_frame: 3.13's PyThreadState.current_frame is the frame


def py_proc(py: PythonProcess) -> dict[str, int]:
    """``struct py_proc`` of the BPF program: where ``py``'s CPython is and its version's offsets."""
    L = py.layout
    return {"runtime": py.runtime, "tstate_current": L.tstate_current,
            "interpreters_head": L.interpreters_head, "interp_threads_head": L.interp_threads_head,
            "tstate_next": L.tstate_next, "tstate_thread_id": L.tstate_thread_id,
            "tstate_frame": L.tstate_cframe,
            "cframe_frame": NO_CFRAME if L.cframe_current_frame is None else L.cframe_current_frame,
            "frame_previous": L.frame_previous, "frame_code": L.frame_code, "frame_instr": L.frame_instr,
            "frame_flags": L.frame_owner or L.frame_is_entry, "pad": 0}


class Sampler:
    """Load, attach, drain.  ``pid``: the one process sampled (None with ``all_processes``)."""

    def __init__(self, pid: int | None, hz: int = 99, *, all_processes: bool = False,
                 exclude_self: bool = True, off_cpu: bool = False, min_block_us: int = 1) -> None:
        self.pid = pid
        self.off_cpu = off_cpu
        self.min_block_us = min_block_us
        self.exclude_self = exclude_self       # False: pycore.profile(os.getpid()) samples its caller
        self.hz = hz
        self.all_processes = all_processes
        self.pythons: dict[int, PythonProcess] = {}
        self.not_python: dict[int, str] = {}           # pid -> why its Python frames are not read
        self._perf_fds: list[int] = []
        self._link_fds: list[int] = []
        self._fds_lock = threading.Lock()       # stop() from one thread, close() from another
        self._obj = None
        self._ring = None
        self.started_at = 0.0

    def start(self) -> None:
        """Load the program and start sampling (everything opened is closed again on failure)."""
        from pycore.link.base import online_cpus
        from pycore.link.perf_event import PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE, PerfEventAttr, \
            attach_bpf, perf_event_open
        from pycore.native.object import BpfObject
        from pycore.native.ringbuf import RingBuffer
        from pycore.native.shipped import object_path

        try:
            obj = self._obj = BpfObject(object_path(OBJECT))
            g = obj.globals
            g["self_tgid"] = os.getpid() if self.exclude_self else 0
            g["targ_tgid"] = self.pid or 0
            g["all_processes"] = 1 if self.all_processes else 0
            if self.off_cpu:
                g["min_block_us"] = self.min_block_us
                obj.programs["on_sample"].autoload = False
                obj.programs["on_switch"].autoload = True
                obj.maps["waits"].max_entries = WAIT_SLOTS_ALL if self.all_processes else WAIT_SLOTS
            obj.load()
            if self.pid:
                self.register(self.pid)
            elif self.all_processes:
                for entry in os.listdir("/proc"):
                    if entry.isdigit() and int(entry) != os.getpid():
                        self.register(int(entry), quiet=True)
            self._ring = RingBuffer(obj, "samples", bytes)
            if self.off_cpu:
                obj.programs["on_switch"].attach()      # a link the object owns: closed with it
                self.started_at = time.monotonic()
                return
            prog_fd = obj.programs["on_sample"].fd
            attr = PerfEventAttr(type=PERF_TYPE_SOFTWARE, config=PERF_COUNT_SW_CPU_CLOCK,
                                 sample_period=self.hz, freq=True)
            for cpu in online_cpus():
                fd = perf_event_open(attr, pid=-1, cpu=cpu, what=f"cpu-clock sampling at {self.hz} Hz")
                self._perf_fds.append(fd)
                link = attach_bpf(prog_fd, fd, what="profile")
                if link is not None:
                    self._link_fds.append(link)
            self.started_at = time.monotonic()
        except BaseException:
            self.close()
            raise

    def register(self, pid: int, *, quiet: bool = False) -> PythonProcess | None:
        """Tell the program where ``pid``'s CPython keeps its threads (None: not a CPython it can read)."""
        if pid in self.pythons:
            return self.pythons[pid]
        py, why = find_python(pid)
        if py is None:
            self.not_python[pid] = why
            return None
        self._obj.maps["py_procs"][pid] = py_proc(py)
        self.pythons[pid] = py
        return py

    def forget(self, pid: int) -> None:
        """Drop what :meth:`register` knew of ``pid`` (it has exec'd since: register it again)."""
        self.not_python.pop(pid, None)
        if self.pythons.pop(pid, None) is not None and self._obj is not None:
            try:
                del self._obj.maps["py_procs"][pid]
            except KeyError:
                pass

    def poll(self, handle: Callable[[bytes], object], timeout: float,
             until: Callable[[], bool] | None = None) -> int:
        """Hand each record waiting (for up to ``timeout`` s) to ``handle``; ``until``: asked after each
        record, the rest of the batch kept for the next call once it is true (a deadline)."""
        return self._ring.poll(handle, timeout, until) if self._ring is not None else 0

    @property
    def lost(self) -> int:
        """Samples the ring buffer had no room for (the program's count)."""
        return int(self._obj.globals["pycore_dropped"]) if self._obj is not None else 0

    @property
    def taken(self) -> int:
        """Samples (off-CPU: waits) the program sent (the target's, or every process's with ``-a``)."""
        return int(self._obj.globals["samples_taken"]) if self._obj is not None else 0

    def stop(self) -> None:
        """Stop sampling (close the links and perf events); the ring keeps what was sampled for
        :meth:`poll` until :meth:`close`.  Safe twice, and from another thread than poll's."""
        with self._fds_lock:
            fds, self._link_fds, self._perf_fds = self._link_fds + self._perf_fds, [], []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        """Detach and release everything (links, perf events, ring, object); safe twice."""
        self.stop()
        if self._ring is not None:
            self._ring.close()
            self._ring = None
        if self._obj is not None:
            self._obj.close()
            self._obj = None

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
