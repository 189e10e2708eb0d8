"""Sample on-CPU stacks: pycore profile [-p PID | -c CMD | -a] [-F HZ] [-d SECONDS] [-o FILE] [--format F].

Each sample holds the kernel stack, the native user stack and, for a CPython
3.11, 3.12 or 3.13 process, its Python frames (name, file, line) where the interpreter runs
them; the process and the thread are the root frames.  Without -o: the
functions with the most samples, by self and total time.  --off-cpu: the
stacks where threads wait (switched out to switched in), weighted by the
time waited.  docs/profile.md says more.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

__all__ = ["add_arguments", "run", "FORMATS"]

# --format -> the file name endings that choose it
FORMATS = {"folded": (".folded", ".txt"), "pprof": (".pb.gz", ".pprof"),
           "speedscope": (".speedscope.json", ".json"), "html": (".html", ".htm"), "top": ()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("-p", "--pid", type=int, help="sample this process (all its threads)")
    target.add_argument("-c", "--cmd", metavar="CMD", help="run CMD and sample it until it exits")
    target.add_argument("-a", "--all", action="store_true", help="sample every process")
    parser.add_argument("-F", "--frequency", type=int, metavar="HZ",
                        help="samples a second on each CPU (default 99; not with --off-cpu)")
    parser.add_argument("-d", "--duration", type=float, metavar="SECONDS",
                        help="stop after this long (default: Ctrl-C, or the process's exit)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the profile here (format from "
                        "--format or the name: .folded, .pb.gz, .speedscope.json, .html)")
    parser.add_argument("--format", choices=list(FORMATS), help="folded, pprof, speedscope, html or top "
                        "(default: from -o's name; top without -o)")
    parser.add_argument("--top", type=int, default=25, metavar="N", help="rows of the table (default 25)")
    parser.add_argument("--sort", choices=("self", "total"), default="self", help="the table's order")
    parser.add_argument("--off-cpu", action="store_true", help="where threads wait, not where they run: "
                        "stacks weighted by the time from switch-out to switch-in")
    parser.add_argument("--min-block", type=int, metavar="US", help="--off-cpu: leave out waits shorter "
                        "than US microseconds (default 1)")


def _fail(message: str) -> int:
    print(f"pycore profile: {message}", file=sys.stderr)
    return 2


def _format_of(args: argparse.Namespace) -> str | None:
    if args.format:
        return args.format
    if not args.output:
        return "top"
    for name, endings in FORMATS.items():
        if args.output.endswith(endings):
            return name
    return None


def _spawn_held(argv: list[str]) -> tuple[int, int]:
    """Fork a child that execs ``argv`` once released (a byte on the returned pipe end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            os.read(r, 1)
            os.close(r)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(r)
    return pid, w


class _Signals:
    """SIGINT and SIGTERM, counted by the handler, never raised: the loops look at the count. The
    first stops sampling (what was sampled is written), a second stops the native walks that follow
    (the records left are counted as the kernel walked them), later ones are let be. A raised
    KeyboardInterrupt may land inside a threading primitive's Python code (``Event.set()`` takes its
    Condition's lock in Python) after the lock was taken and before the ``with`` that releases it,
    leaving it held: the next ``set()`` then waits for ever (a suite run hung after a Ctrl-C, and
    Ctrl-C pressed twice could kill the command mid-write). pycore trace and the tools count them too."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1

    @property
    def stop(self) -> bool:
        return self.count >= 1

    @property
    def abandon(self) -> bool:
        return self.count >= 2


def run(args: argparse.Namespace) -> int:
    import shlex
    import shutil

    fmt = _format_of(args)
    if fmt is None:
        return _fail(f"{args.output}: cannot tell the format from the name; say --format "
                     + "|".join(FORMATS))
    if args.off_cpu and args.frequency is not None:
        return _fail("-F: --off-cpu does not sample: it records every wait (leave -F out)")
    if args.min_block is not None and not args.off_cpu:
        return _fail("--min-block: only with --off-cpu")
    if args.min_block is not None and args.min_block < 0:
        return _fail(f"--min-block {args.min_block}: must be 0 or more microseconds")
    if args.frequency is None:
        args.frequency = 99
    if not 1 <= args.frequency <= 10000:
        return _fail(f"-F {args.frequency}: the frequency must be 1 to 10000 Hz")
    if args.duration is not None and args.duration <= 0:
        return _fail(f"-d {args.duration:g}: the duration must be positive")
    argv: list[str] = []
    if args.pid is not None and (args.pid <= 0 or not os.path.exists(f"/proc/{args.pid}")):
        return _fail(f"-p {args.pid}: no such process")
    if args.cmd is not None:
        try:
            argv = shlex.split(args.cmd)
        except ValueError as e:
            return _fail(f"-c: {e}")
        if not argv or shutil.which(argv[0]) is None:
            return _fail(f"-c: command not found: {argv[0] if argv else '(empty)'}")

    from pycore.kernel.privileges import missing_privileges

    why = missing_privileges()
    if why:
        return _fail(why)

    signals = _Signals()
    old_handlers = {sig: signal.signal(sig, signals) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _sample(args, fmt, argv, signals)
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)


def _sample(args: argparse.Namespace, fmt: str, argv: list[str], signals: _Signals) -> int:
    """Sample until -d, the target's end or a signal, then walk, name and write (``signals``: SIGINT
    and SIGTERM counted)."""
    from pycore.profile.sampler import Sampler
    from pycore.profile.unwind import HEADER, Unwinder

    child, release = (None, None)
    if argv:
        child, release = _spawn_held(argv)
    target = args.pid or child
    sampler = Sampler(target, args.frequency, all_processes=args.all, off_cpu=args.off_cpu,
                      min_block_us=1 if args.min_block is None else args.min_block)
    unwinder = Unwinder(args.frequency, sampler.pythons, off_cpu=args.off_cpu)
    seen: set[int] = set()

    def handle(data: bytes) -> None:
        pid = HEADER.unpack_from(data)[0]
        if pid not in seen:
            seen.add(pid)
            if args.all:
                sampler.register(pid, quiet=True)
        unwinder.add(data)

    ended = ""
    start = time.monotonic()
    try:
        try:
            sampler.start()
        except Exception as e:  # noqa: BLE001 - one line: what failed to load or attach
            return _fail(f"cannot start sampling: {e}")
        unwinder.start()                # the native walks, in a thread of their own
        start = time.monotonic()
        if args.pid:
            if sampler.register(args.pid) is None:
                _note_not_python(args.pid, sampler.not_python.get(args.pid, ""))
        if child is not None:
            os.write(release, b"x")
            os.close(release)
            release = None
            follow = _ExecFollower(sampler, child)
            follow.check(wait=0.2)
        deadline = start + args.duration if args.duration else None

        def due() -> bool:
            return signals.stop or (deadline is not None and time.monotonic() >= deadline)

        while not due():
            now = time.monotonic()
            # a slow consumer (an emulated CPU) reads a full ring for seconds: the deadline and the
            # signals are looked at after each record (-d 8 sampled 17 s in a 6.12 VM while the
            # records waiting were read); a signal ends the wait at once (the poll's epoll_wait is
            # resumed after the handler, for at most 0.1 s)
            sampler.poll(handle, 0.1 if deadline is None else min(0.1, max(deadline - now, 0.0)), due)
            if child is not None:
                follow.check()
                if os.waitpid(child, os.WNOHANG)[0]:
                    child = None
                    ended = "done"
                    break
            elif args.pid and not os.path.exists(f"/proc/{args.pid}"):
                ended = f"process {args.pid} exited after {time.monotonic() - start:.1f} s"
                break
    finally:
        sampler.stop()                  # sampling ends here; then every record it left is read
        stopped = time.monotonic()
        if release is not None:
            os.close(release)
        try:
            while not signals.abandon and sampler.poll(handle, 0, lambda: signals.abandon):
                pass
        except Exception:  # noqa: BLE001 - the ring may be closed already (a failed start)
            pass
        lost = sampler.lost
        sampler.close()
        unwinder.close()
        if child is not None:
            _end_child(child)
    if not signals.abandon:
        unwinder.walk(until=lambda: signals.abandon)    # what the walker thread had not walked
    if signals.abandon:                 # the rest as the kernel walked them (frame pointers)
        unwinder.count_unwalked()
    if args.cmd and args.pid is None and child is None and not seen and ended != "done":
        return 2
    duration = stopped - start
    profile = unwinder.profile()
    profile.duration = duration
    profile.lost = lost
    if ended and ended != "done":
        taken = f"{profile.waits} waits" if args.off_cpu else f"{profile.samples} samples"
        print(f"pycore profile: {ended}; writing the {taken} taken", file=sys.stderr)
    _write(profile, fmt, args)
    _summary(profile, args)
    return 0


def _image(pid: int | str) -> tuple[int, int, bytes] | None:
    """What a process runs: its executable file's identity and its command line (None: gone)."""
    try:
        st = os.stat(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return st.st_dev, st.st_ino, f.read()
    except OSError:
        return None


class _ExecFollower:
    """The -c command's child, registered at each exec it makes: at the first (the command's own,
    which may run this very python3.11), and at each later one, a wrapper's (``sh -c 'exec python3
    app.py'``, a venv's entry script). Nothing is registered before the first exec: the child is a
    fork of this process until then, and its CPython's runtime lies elsewhere once exec has mapped the
    interpreter again. Polled from the sampling loop (each 0.1 s at most), so a wrapper however
    slow to exec is followed; the old wait gave up after 1 s (an exec under TCG can take longer)
    and never saw a second exec."""

    #: after an exec, how long a process that is not (yet) a CPython is looked at again: a shared
    #: libpython is mapped by the dynamic loader after the exec
    SETTLE_SECONDS = 2.0

    def __init__(self, sampler, pid: int) -> None:  # noqa: ANN001
        self.sampler = sampler
        self.pid = pid
        self.image = _image("self")          # the fork's, until its exec
        self.execd_at: float | None = None

    def check(self, wait: float = 0.0) -> None:
        """Register the child again if it has exec'd since; ``wait``: up to so long for an exec."""
        end = time.monotonic() + wait
        while True:
            image = _image(self.pid)
            if image is None:
                return
            now = time.monotonic()
            if image != self.image:
                self.image, self.execd_at = image, now
                self.sampler.forget(self.pid)
                self.sampler.register(self.pid, quiet=True)
                return
            if self.execd_at is not None:
                if self.pid not in self.sampler.pythons and now - self.execd_at < self.SETTLE_SECONDS:
                    self.sampler.register(self.pid, quiet=True)
                return
            if now >= end:
                return
            time.sleep(0.001)


def _end_child(pid: int) -> None:
    """The -c command outlived the profile (-d, Ctrl-C): end it, nothing is left behind."""
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _note_not_python(pid: int, why: str) -> None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except OSError:
        comm = "?"
    print(f"pycore profile: process {pid} ({comm}): {why}; sampling native and kernel frames only",
          file=sys.stderr)


def _write(profile, fmt: str, args: argparse.Namespace) -> None:  # noqa: ANN001
    if fmt == "pprof":
        from pycore.profile.pprof import write_pprof

        if args.output:
            with open(args.output, "wb") as f:
                write_pprof(profile, f)
        else:
            sys.stdout.flush()
            write_pprof(profile, sys.stdout.buffer)
        return
    out = open(args.output, "w") if args.output else sys.stdout
    try:
        if fmt == "folded":
            from pycore.profile.folded import write_folded

            write_folded(profile, out)
        elif fmt == "speedscope":
            from pycore.profile.speedscope import write_speedscope

            write_speedscope(profile, out)
        elif fmt == "html":
            from pycore.profile.html import write_html

            write_html(profile, out, _title(args))
        else:
            from pycore.profile.top import write_top

            write_top(profile, out, args.top, args.sort)
    finally:
        if args.output:
            out.close()


def _title(args: argparse.Namespace) -> str:
    what = f"-p {args.pid}" if args.pid else f"-c {args.cmd}" if args.cmd else "-a"
    return f"pycore profile {what}, " + ("off-CPU" if args.off_cpu else f"{args.frequency} Hz")


def _summary(profile, args: argparse.Namespace) -> None:  # noqa: ANN001
    notes = []
    if profile.lost:
        notes.append(f"{profile.lost} lost")
    if profile.python_unread:
        notes.append(f"{profile.python_unread} without readable Python frames")
    if profile.truncated:
        notes.append(f"{profile.truncated} with Python stacks cut at 256 frames")
    extra = f" ({', '.join(notes)})" if notes else ""
    where = f", written to {args.output}" if args.output else ""
    what = (f"{profile.waits} waits, {profile.samples * profile.unit_seconds:.2f} s off-CPU" if profile.off_cpu
            else f"{profile.samples} samples")
    print(f"pycore profile: {what} in {profile.duration:.1f} s{extra}{where}", file=sys.stderr)
