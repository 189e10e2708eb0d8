"""Run a bpftrace script: pycore trace -e 'PROGRAM' | pycore trace FILE [ARG...].

The bpftrace language, compiled by pycore into BPF instructions and checked
by the kernel's verifier: no LLVM or clang at run time. Output is bpftrace's:
'Attaching N probes...' on stderr, printf lines as they happen, and at the
end (Ctrl-C, exit(), END, the -c command or the -p process ending) every
non-empty map. docs/trace.md describes the language subset and the engine.
"""

from __future__ import annotations

import signal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["add_arguments", "quick_args", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-e", dest="program", metavar="PROGRAM", help="the script, on the command line")
    parser.add_argument("file", nargs="?", metavar="FILE", help="a script file (.bt); - reads the script from stdin")
    parser.add_argument("params", nargs="*", metavar="ARG", help="positional parameters: $1, $2, ... ($# counts them); after '--', "
                        "--NAME=VALUE (or --NAME) is the script's getopt(\"NAME\") and --help lists those")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-p", "--pid", type=int, metavar="PID",
                        help="uprobes/usdt in this process; tracing ends when it exits")
    target.add_argument("-c", "--cmd", metavar="CMD", help="run CMD, trace it, end when it exits")
    parser.add_argument("-f", "--format", choices=("text", "json"), default="text",
                        help="output format (json: one object per line, as bpftrace's)")
    parser.add_argument("--folded", action="store_true",
                        help="print maps keyed by a stack as folded stacks (for flame graphs)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="say what attached where and how; show the verifier's log on rejection "
                             "(with -l: arguments and types, as pycore list -v)")
    parser.add_argument("-l", dest="list", action="store_true",
                        help="list probes matching FILE as a pattern, as bpftrace -l (pycore list's listing)")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, resolve against BTF, print the plan; attach nothing")
    parser.add_argument("--unsafe", action="store_true", help="allow system(), signal() and override()")
    parser.add_argument("--test", action="store_true",
                        help="run the script's test:NAME probes, each once, and say which pass (as bpftrace 0.25 "
                             "--test): BEGIN, the tests, END; nothing attached, no maps printed")
    parser.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after SECONDS")
    parser.add_argument("-o", dest="output", metavar="FILE", help="write the output to FILE (as bpftrace -o)")
    parser.add_argument("-q", dest="quiet", action="store_true", help="no 'Attaching N probes...' (as bpftrace -q)")
    parser.add_argument("-B", dest="buffering", choices=("none", "line", "full"), default="line",
                        help="output buffering: line (the default) and none write each event at once; full "
                             "when the buffer fills")


def quick_args(argv: list[str]):  # noqa: ANN201 (a namespace, or None)
    """What add_arguments' parser makes of the two common command lines,
    ``-e PROGRAM [ARG...]`` and ``FILE [ARG...]``, for :func:`pycore.cli.main`
    to skip argparse: importing it, and the shutil, bz2, lzma and locale
    modules it pulls in while building the two parsers, cost ~12 ms of a
    ~75 ms start-to-attached (bench/bench_trace.py). None for anything else
    (any option, or a word that starts with '-'), which argparse then reads."""
    words = argv[1:] if argv[:1] == ["-e"] else argv
    if not words or any(w.startswith("-") for w in words):
        return None
    if argv[:1] == ["-e"]:   # -e PROGRAM A B: argparse gives A to FILE, B on to ARG
        program, file, params = words[0], (words[1] if len(words) > 1 else None), words[2:]
    else:
        program, file, params = None, words[0], words[1:]
    from types import SimpleNamespace

    return SimpleNamespace(program=program, file=file, params=params, pid=None, cmd=None, format="text",
                           folded=False, verbose=0, list=False, dry_run=False, unsafe=False, duration=None, output=None,
                           quiet=False, buffering="line", test=False)


# Probe kinds listed by a pattern; the others print as bpftrace 0.23.2 lists them in a program
# (``special::``, ``interval:s:``, ``software:cpu-clock:``, ``watchpoint::``).
_LISTED = {"kfunc", "kretfunc", "kprobe", "kretprobe", "rawtracepoint", "tracepoint", "iter", "usdt", "uprobe",
           "uretprobe", "software", "hardware"}


def _list_program(args: argparse.Namespace) -> int:
    """``-l -e PROGRAM`` / ``-l FILE``: the probes the program would attach, each of its attach points
    listed as ``-l PATTERN`` lists it (wildcards expanded, -v adds the arguments), in the program's
    order, repeats kept, as bpftrace 0.22+ does. The program is parsed, not checked."""
    from pycore.lang.errors import ScriptError
    from pycore.lang.parser import parse
    from pycore.listing.kernel import Lister
    from pycore.listing.patterns import PatternError, parse_pattern

    if args.program is not None:
        text, filename = args.program, "stdin"
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                text, filename = f.read(), args.file
        except (OSError, UnicodeDecodeError) as e:
            print(f"pycore trace: {args.file}: {getattr(e, 'strerror', None) or 'not a text file'}", file=sys.stderr)
            return 2
    lister = Lister(verbose=bool(args.verbose), warn=lambda m: print(f"pycore: {m}", file=sys.stderr))
    lister.pid = args.pid
    lines: list[str] = []
    try:
        program = parse(text, filename)
        for block in program.probes:
            for spec in block.probes:
                if spec.kind not in _LISTED:
                    first = spec.parts[0] if spec.parts and spec.kind not in ("watchpoint", "asyncwatchpoint") else ""
                    lines.append(f"{'special' if spec.kind in ('BEGIN', 'END') else spec.kind}:{first}:")
                    continue
                parts = spec.parts[:1] if spec.kind in ("software", "hardware") else spec.parts   # not the count
                written = spec.text.split(":", 1)[0]    # fentry: lists as fentry, kfunc: as kfunc
                pattern = ":".join([written, *([spec.target] if spec.target else []), *parts])
                found = []
                try:
                    for p in parse_pattern(pattern):
                        for entry in lister.entries(p):
                            found.extend(entry.lines())
                except PatternError as e:
                    raise ScriptError(str(e), spec.pos.line, spec.pos.col, filename, text, len(spec.text)) from None
                if not found:
                    raise ScriptError(f"{spec.text}: matches no probe on this system", spec.pos.line, spec.pos.col,
                                      filename, text, len(spec.text))
                lines.extend(found)
    except ScriptError as e:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        print(e.format(), file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0


def run(args: argparse.Namespace) -> int:
    from pycore.lang.errors import ScriptError

    if getattr(args, "list", False):      # bpftrace -l [-v] [-p PID] [PATTERN]: the tutorial's first step
        from types import SimpleNamespace

        from pycore.commands import list as listing

        if args.params or args.cmd:
            print("pycore trace: -l takes a pattern, a program (-e) or a script file (and -p PID, -v)",
                  file=sys.stderr)
            return 2
        if args.program is not None or (args.file and os.path.isfile(args.file)):
            return _list_program(args)          # bpftrace 0.22+: the program's own probes
        return listing.run(SimpleNamespace(verbose=args.verbose, pid=args.pid, pattern=args.file))
    if args.program is None and args.file == "-":     # bpftrace -: the script from standard input
        text, filename, params = sys.stdin.read(), "stdin", list(args.params)
    elif args.program is not None:
        text, filename = args.program, "stdin"
        params = ([args.file] if args.file else []) + list(args.params)
    elif args.file:
        try:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"pycore trace: {args.file}: {e.strerror}", file=sys.stderr)
            return 2
        except UnicodeDecodeError:
            print(f"pycore trace: {args.file}: not a text file", file=sys.stderr)
            return 2
        filename, params = args.file, list(args.params)
    else:
        print("pycore trace: give a program with -e 'PROGRAM' or a script file", file=sys.stderr)
        return 2

    from pycore.lang.config import ConfigError
    from pycore.lang.session import TraceRunner

    out = None
    if args.output:
        try:
            out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        except OSError as e:
            print(f"pycore trace: -o {args.output}: {e.strerror}", file=sys.stderr)
            return 2
    try:
        runner = TraceRunner(text, filename=filename, params=tuple(params), pid=args.pid, cmd=args.cmd,
                             unsafe=args.unsafe, verbose=bool(args.verbose), json=args.format == "json",
                             folded=args.folded, duration=args.duration, out=out, quiet=args.quiet,
                             flush=args.buffering != "full", environ=os.environ)
        runner.script.testing = args.test
        for line in runner.script.config.warnings:     # deprecated BPFTRACE_* names, as bpftrace says
            print(line, file=sys.stderr)
        if "--help" in params:     # bpftrace 0.24: '-- --help' lists the script's getopt() options
            print(runner.script.options.help())
            return 0
        if args.dry_run:
            if args.cmd:
                runner.script.checker.cpid = -1     # the command's pid, not known until it runs
            print(runner.script.plan())
            return 0
        from pycore.kernel.privileges import missing_privileges

        why = missing_privileges()
        if why:
            print(f"pycore trace: {why}", file=sys.stderr)
            return 2
        return runner.run()
    except ConfigError as e:
        print(f"pycore trace: {e}", file=sys.stderr)
        return 2
    except ScriptError as e:
        print(e.format(), file=sys.stderr)
        if args.verbose and getattr(e, "verifier", ""):
            print(e.verifier, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if out is not None:
            out.close()

