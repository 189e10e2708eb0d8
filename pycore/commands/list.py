"""List what can be traced: probes and kernel types, as bpftrace -l does.

patterns (bpftrace syntax; * and ? are wildcards anywhere):
  kfunc:vfs_*            kernel functions (fentry); also kfunc:MODULE:FUNC
  kretfunc:vfs_read      function returns (fexit)
  tracepoint:sched:*     static tracepoints, tracepoint:CATEGORY:NAME
  rawtracepoint:sched_*  raw / BTF tracepoints (tp_btf)
  kprobe:vfs_*           kprobes, where the kernel has them
  'struct dentry'        kernel types: struct, union, enum, typedef NAME
  usdt:/path/bin:prov:*  USDT probes of a file (-v: arguments, semaphore,
                         locations; -vv: each location and its argument specs);
                         with -p PID, usdt alone lists every mapped object's
  uprobe:/bin/bash:*rl*  functions of a file (.symtab/.dynsym, demangled);
                         with -p PID, uprobe:* lists the process's executable's

With no pattern, every probe of every type is listed; with -p PID and no
pattern, what bpftrace -l -p PID lists: the functions of the process's
executable (uprobe:), then the USDT probes of every object it maps (usdt:),
files named under /proc/PID/root.  -v adds each probe's arguments (and return
value), or prints a type's C definition.

exit status: 0 something listed, 1 nothing matched (a file without USDT
probes too), 2 bad pattern or error.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n\n", 1)[1]
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show probe arguments and types' definitions (-vv: USDT locations)")
    parser.add_argument("-p", "--pid", type=int, default=None,
                        help="usdt/uprobe: the objects mapped by this process (alone: its probes, "
                             "as bpftrace -l -p PID)")
    parser.add_argument("pattern", nargs="?", help="what to list, e.g. 'kfunc:vfs_*' or 'struct dentry'")


def quick_args(argv: list[str]):  # noqa: ANN201 (a namespace, or None)
    """What add_arguments' parser makes of ``-v``/``-vv``/``--verbose`` and
    one pattern, for :func:`pycore.cli.main` to skip argparse (5 ms of
    start-up); None for any other command line (-p, --help, errors), which
    argparse then reads."""
    verbose, pattern = 0, None
    for arg in argv:
        if arg == "--verbose":
            verbose += 1
        elif arg.startswith("-"):
            if len(arg) < 2 or arg.strip("v") != "-":
                return None
            verbose += len(arg) - 1
        elif pattern is None:
            pattern = arg
        else:
            return None
    from types import SimpleNamespace

    return SimpleNamespace(verbose=verbose, pid=None, pattern=pattern)


def _warn(message: str) -> None:
    sys.stdout.flush()  # keep notes in order with what was already listed
    print(f"pycore: {message}", file=sys.stderr, flush=True)


def _kinds_available() -> set[str]:
    """Asked only to word a refused pattern: it loads trial programs."""
    from pycore.listing.kernel import kinds_available

    return kinds_available()


def run(args: argparse.Namespace) -> int:
    from pycore.listing.patterns import PatternError, all_patterns, parse_pattern, process_patterns

    if args.pattern is None:
        patterns = all_patterns() if args.pid is None else process_patterns()
    else:
        try:
            patterns = parse_pattern(args.pattern, available=_kinds_available)
        except PatternError as e:
            print(f"pycore list: {e}", file=sys.stderr)
            return 2

    from pycore.listing.kernel import Lister

    lister = Lister(verbose=args.verbose, warn=_warn)
    lister.pid = args.pid
    write = sys.stdout.write
    found = 0
    for pattern in patterns:
        batch: list[str] = []
        for entry in lister.entries(pattern):
            found += 1
            batch.extend(entry.lines())
            if len(batch) >= 4096:
                write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            write("\n".join(batch) + "\n")
    sys.stdout.flush()
    if not found:
        what = repr(args.pattern) if args.pattern is not None else "anything"
        where = f" in process {args.pid}" if args.pid is not None else ""
        print(f"pycore list: nothing matches {what}{where}", file=sys.stderr)
        return 1
    return 0
