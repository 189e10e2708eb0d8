"""The ``pycore`` command line: a thin dispatcher over subcommand modules.

Start-up time matters (``pycore list`` is meant to beat bpftrace), so this
module imports nothing heavy: each subcommand lives in its own module under
:mod:`pycore.commands`, named in :data:`COMMANDS`, and is imported only when
it runs.  A subcommand module provides ``add_arguments(parser)`` and
``run(args) -> int``.
"""

from __future__ import annotations

import importlib
import os
import sys

from pycore.errors import PycoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import NoReturn

__all__ = ["COMMANDS", "main"]

# name -> (module, one-line summary shown by `pycore --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("pycore.commands.list", "list probes (kfunc, tracepoint, ...) and kernel types"),
    "features": ("pycore.commands.features", "what this kernel can do: fentry, kprobes, tp_btf, ringbuf, ..."),
    "run": ("pycore.commands.run", "run a tool: pycore run fget-crack, vfs-unlink, lock-contention, ..."),
    "tools": ("pycore.commands.tools", "list the tools, their attach points, and which can run here"),
    "trace": ("pycore.commands.trace", "run a bpftrace script with no compiler: pycore trace -e 'PROGRAM' | FILE [ARG...]"),
    "serve": ("pycore.commands.serve", "export tools' and scripts' metrics for Prometheus, and CPU profiles for go tool pprof (--profile): pycore serve --listen 127.0.0.1:9435 TOOL..."),
    "build": ("pycore.commands.build", "compile your own BPF C into a CO-RE object: pycore build prog.bpf.c -o prog.bpf.o"),
    "skel": ("pycore.commands.skel", "a typed Python skeleton of a BPF object: pycore skel prog.bpf.o -o prog_skel.py"),
    "cmake-dir": ("pycore.commands.cmake_dir", "print the directory of pycore's CMake package (pycore_add_bpf_object)"),
    "profile": ("pycore.commands.profile", "sample stacks with Python, native and kernel frames: pycore profile -p PID [-d SECONDS] [-o out.folded]"),
    "pins": ("pycore.commands.pins", "list what is pinned on bpffs (maps, programs, links): pycore pins [DIR] [--remove]"),
}


def _top_parser() -> argparse.ArgumentParser:
    import argparse

    from pycore import __version__

    summary = "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="pycore",
        description="A Linux tracer in Python on libbpf CO-RE.",
        epilog=f"commands:\n{summary}\n\n'pycore COMMAND --help' describes a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pycore {__version__}")
    parser.add_argument("command", metavar="COMMAND", choices=list(COMMANDS),
                        help="one of: " + ", ".join(COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``pycore``; returns the exit status (0 ok, 1 nothing found, 2 usage or error)."""
    if argv is not None:
        return _main(list(argv))
    try:
        status = _main(sys.argv[1:])
    finally:
        # The command is over and the interpreter is about to flush and exit.  A
        # Ctrl-C now (a tool that stopped by itself as its target exited, say) has
        # nothing left to stop; with Python's own handler it would become an
        # uncaught KeyboardInterrupt during shutdown, and a finished run would die
        # of SIGINT.  Only the real command line does this: in-process callers keep
        # their handlers.
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit(status)


def _exit(status: int) -> NoReturn:
    """End the process now that the command has released everything: flush
    stdout and stderr, then ``os._exit``.  The interpreter's own teardown
    (collecting every module's objects) took 13 ms of a 130 ms
    ``pycore trace ... -c /usr/bin/true`` (bench/bench_trace.py --only cmd)
    and does nothing a finished command needs: commands close their own
    files, links and maps, and pycore registers no atexit handlers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            _silence_stdout()
            status = status or 141
        except (OSError, ValueError):
            pass
    os._exit(status)


def _main(argv: list[str]) -> int:
    try:
        quick = _quick(argv)
        if quick is not None:
            module, args = quick
            return int(module.run(args) or 0)
        import argparse

        top = _top_parser().parse_args(argv)
        module = importlib.import_module(COMMANDS[top.command][0])
        parser = argparse.ArgumentParser(prog=f"pycore {top.command}",
                                         description=module.__doc__.split("\n\n")[0] if module.__doc__ else None,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(parser)
        return int(module.run(parser.parse_args(top.args)) or 0)
    except SystemExit as e:  # argparse (--help, --version, usage errors); tools' SystemExit("why")
        if isinstance(e.code, int):
            return e.code
        if e.code is not None:
            print(e.code, file=sys.stderr)   # as the interpreter would, but with status 2
            return 2
        return 0
    except BrokenPipeError:
        _silence_stdout()
        return 141  # as if killed by SIGPIPE, like C tools piped into head
    except KeyboardInterrupt:
        return 130
    except (PycoreError, OSError, ValueError) as e:  # BtfError is a ValueError
        print(f"pycore: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug of ours: one line, the traceback on request
        if os.environ.get("PYCORE_DEBUG"):
            raise
        print(f"pycore: internal error: {type(e).__name__}: {e} (PYCORE_DEBUG=1 shows where)",
              file=sys.stderr)
        return 70  # EX_SOFTWARE


def _quick(argv: list[str]):  # noqa: ANN202 (module, namespace) or None
    """A command whose module reads its common command lines itself
    (``quick_args(argv)`` returning the namespace its parser would, or None
    for anything else), run without argparse: importing argparse and
    building the two parsers took ``pycore list 'tracepoint:zzz'`` from
    14.9 ms to 19.8 ms, and ``list -v 'tracepoint:*'`` runs against
    bpftrace's 50 ms."""
    if not argv or argv[0] not in COMMANDS:
        return None
    module = importlib.import_module(COMMANDS[argv[0]][0])
    quick_args = getattr(module, "quick_args", None)
    args = quick_args(argv[1:]) if quick_args is not None else None
    return None if args is None else (module, args)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of a broken
    pipe does not print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
