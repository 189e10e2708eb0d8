"""The process a trace follows: ``-p PID`` checked and watched, ``-c CMD`` started held.

``pycore run`` and ``pycore trace`` share these rules, which are bpftrace's:
a PID that does not exist is an error before anything loads; tracing ends
when the traced process exits; a command that cannot be started is an error
with a non-zero exit, not an empty trace.
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

__all__ = ["TargetError", "check_pid", "PidWatch", "spawn_held", "stop_child", "poll_until"]

from pycore.errors import PycoreError


class TargetError(PycoreError):
    """The process to trace does not exist, or the command cannot be started (one line)."""


def check_pid(pid: int) -> None:
    """Raise :class:`TargetError` unless process ``pid`` exists (a zombie counts as gone)."""
    if pid <= 0:
        raise TargetError(f"-p {pid}: not a process id")
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0:1]
    except FileNotFoundError:
        raise TargetError(f"process {pid} does not exist") from None
    except OSError as e:
        raise TargetError(f"process {pid}: {e.strerror}") from None
    if state in ([b"Z"], [b"X"]):
        raise TargetError(f"process {pid} has exited")


class PidWatch:
    """Tells when a process has exited, without being its parent.

    A pidfd (Linux >= 5.3) becomes readable when the process exits; where
    there is none, ``/proc/PID`` is polled.  ``fileno()`` lets a caller add
    it to its own poll set.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._fd = None

    def fileno(self) -> int | None:
        return self._fd

    def exited(self) -> bool:
        """True once the process is gone (or a zombie waiting for its parent)."""
        if self._fd is not None:
            import select

            return bool(select.select([self._fd], [], [], 0)[0])
        try:
            check_pid(self.pid)
        except TargetError:
            return True
        return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PidWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resolve_command(argv0: str) -> str:
    import shutil

    if "/" in argv0:
        path = argv0
        if not os.path.exists(path):
            raise TargetError(f"-c: cannot run {argv0!r}: no such file")
    else:
        found = shutil.which(argv0)
        if found is None:
            raise TargetError(f"-c: cannot run {argv0!r}: not found on PATH")
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise TargetError(f"-c: cannot run {argv0!r}: not an executable file")
    return path


def spawn_held(cmd: str) -> subprocess.Popen[bytes]:
    """Start ``cmd`` held before exec: a ``/bin/sh`` stops itself, then execs it (same pid).

    Its pid is known, and the kernel-side filter set, before the command
    runs anything; SIGCONT lets it go.  (No pipe or redirection: those would
    show up as the command's own fd activity; and ``preexec_fn`` cannot
    wait, Popen blocks until the exec.)  The command is split like a shell
    would, without a shell; one that cannot be started is a
    :class:`TargetError` here, before anything is loaded.
    """
    import shlex
    import subprocess

    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        raise TargetError(f"-c: {e}") from None
    if not argv:
        raise TargetError("-c: empty command")
    _resolve_command(argv[0])
    child = subprocess.Popen(["/bin/sh", "-c", 'kill -STOP $$; exec "$@"', "sh", *argv])
    os.waitpid(child.pid, os.WUNTRACED)  # stopped (or already dead: then poll() says so)
    return child


def stop_child(child: subprocess.Popen[bytes]) -> None:
    """End a child we started (held or running), and reap it."""
    import subprocess

    if child.poll() is None:
        child.terminate()
        os.kill(child.pid, signal.SIGCONT)  # a held child must wake up to die
        try:
            child.wait(2)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def poll_until(poll: Callable[[], object], *, stopped: Callable[[], bool], duration: float | None,
               child: subprocess.Popen[bytes] | None, watch: PidWatch | None, ready: int | None = None,
               tick: float = 0.1) -> None:
    """Call ``poll()`` until ``stopped()``, ``duration`` seconds, the ``-c`` child's exit or the ``-p`` process's.

    The one loop of ``pycore run`` and ``pycore trace``.  It sleeps in one
    epoll set holding ``ready`` (an fd readable when there is something for
    ``poll`` to do: a ring buffer's), pidfds of the child and of the watched
    process, and a signal wakeup fd (``signal.set_wakeup_fd``, from the main
    thread), so that each of those ends the wait at once: the end of ``-c
    true`` was seen at the next 100 ms tick before.  ``tick`` still bounds
    each wait, for what no fd tells (a kernel without pidfds).  ``poll()``
    must not block; it runs after every wake-up.
    """
    import select
    import time

    deadline = None if duration is None else time.monotonic() + duration
    ep = select.epoll()
    owned: list[int] = []
    wake_r = -1
    old_wakeup = None
    try:
        if ready is not None:
            ep.register(ready, select.EPOLLIN)
        if child is not None:
            try:
                fd = os.pidfd_open(child.pid)
            except OSError:
                pass                        # no pidfds: child.poll() at each tick
            else:
                owned.append(fd)
                ep.register(fd, select.EPOLLIN)
        if watch is not None and watch.fileno() is not None:
            ep.register(watch.fileno(), select.EPOLLIN)
        try:
            wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            owned += [wake_r, wake_w]
            old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
            ep.register(wake_r, select.EPOLLIN)
        except ValueError:                  # not the main thread: signals are seen at the tick
            old_wakeup = None
        while not stopped():
            timeout = tick
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                timeout = min(timeout, left)
            ep.poll(timeout)                # a signal's handler has run when this returns
            if wake_r >= 0:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            try:
                poll()
            except InterruptedError:
                pass
            if child is not None and child.poll() is not None:
                return
            if watch is not None and watch.exited():
                return  # the traced process is gone: end as bpftrace does
    finally:
        if old_wakeup is not None:
            signal.set_wakeup_fd(old_wakeup)
        ep.close()
        for fd in owned:
            os.close(fd)
