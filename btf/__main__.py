"""``python -m btf``: dump BTF as C or as bpftool's raw listing, or show one type.

    python -m btf dump FILE [--format c|raw] [--base BASE_FILE] [-o OUT]
    python -m btf show FILE NAME

FILE is raw BTF (``/sys/kernel/btf/vmlinux``) or an ELF object with a
``.BTF`` section.  Bad input is reported in one line and exits with 2.
"""

from __future__ import annotations

import gc
import os
import sys
from types import SimpleNamespace  # imported already, by enum

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings here
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import TextIO

from .cdump import write_header
from .cformat import CFormatter
from .errors import BtfError
from .kinds import Kind
from .raw import dump_raw
from .spec import Spec

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    import argparse  # see _plain_args
    import functools

    # add_argument makes a help formatter for every argument (to check its
    # metavar), and the default one imports shutil to ask the terminal's
    # width: 1.6 ms.  The width only matters when help is printed, so the
    # parsers are built with a fixed one and then get the default formatter
    # back.
    building = functools.partial(argparse.HelpFormatter, width=80)
    p = argparse.ArgumentParser(prog="python -m btf", description="Read BTF, the BPF Type Format.",
                                formatter_class=building)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="dump every type, as a C header or in bpftool's raw format",
                       formatter_class=building)
    d.add_argument("file", help="raw BTF or an ELF object with a .BTF section")
    d.add_argument("--format", choices=("c", "raw"), default="raw",
                   help="c: a compilable vmlinux.h; raw: bpftool's listing (default)")
    d.add_argument("--base", metavar="BASE_FILE", help="base BTF of split BTF (kernel modules)")
    d.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    s = sub.add_parser("show", help="print one type's C definition", formatter_class=building)
    s.add_argument("file", help="raw BTF or an ELF object with a .BTF section")
    s.add_argument("name", help="type name, optionally with its keyword: 'struct dentry'")
    s.add_argument("--base", metavar="BASE_FILE", help="base BTF of split BTF (kernel modules)")
    for parser in (p, d, s):
        parser.formatter_class = argparse.HelpFormatter
    return p


def _load(path: str, base_path: str | None) -> Spec:
    base = Spec.from_file(base_path) if base_path else None
    return Spec.from_file(path, base)


def _dump(args: argparse.Namespace, out: TextIO) -> None:
    # A one-shot process: the cyclic collector would only walk the dump's
    # million objects again once write_header turned it back on (20 ms at
    # the end of a kernel dump), and _exit leaves the memory to the kernel.
    gc.disable()
    spec = _load(args.file, args.base)
    if args.format == "c":
        write_header(spec, out)
    else:
        dump_raw(spec, out)


_KEYWORDS = {"struct": "STRUCT", "union": "UNION", "enum": "ENUM", "typedef": "TYPEDEF"}


def _show(args: argparse.Namespace, out: TextIO) -> int:
    spec = _load(args.file, args.base)
    words = args.name.split()
    name = words[-1]
    kinds = None
    if len(words) == 2 and words[0] in _KEYWORDS:
        kinds = (Kind[_KEYWORDS[words[0]]],) + ((Kind.ENUM64,) if words[0] == "enum" else ())
    ids = spec.ids_named(name, kinds)
    ids = [i for i in ids if spec.kind(i) not in (Kind.FUNC, Kind.VAR, Kind.DECL_TAG, Kind.DATASEC)] or ids
    if not ids:
        print(f"error: no type named {args.name!r}", file=sys.stderr)
        return 1
    fmt = CFormatter()
    for type_id in ids:
        out.write(fmt.definition(spec.type(type_id)) + ";\n")
    return 0


# The plain forms of the two commands, read without argparse: importing it
# (with re, gettext and locale), building its three parsers and parsing is
# 3.6 ms of every run, where this reading takes 5 us.  Anything else (help,
# --opt=value, a mistake) goes to argparse, which says what is wrong.
_OPTIONS = {"dump": {"--format": "format", "--base": "base", "-o": "output", "--output": "output"},
            "show": {"--base": "base"}}
_POSITIONAL = {"dump": ("file",), "show": ("file", "name")}
_DEFAULTS = {"dump": {"format": "raw", "base": None, "output": None}, "show": {"base": None}}


def _plain_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """What ``_parser().parse_args(argv)`` returns, for argv in the forms
    of the usage above; None for any other."""
    if not argv or argv[0] not in _OPTIONS:
        return None
    command = argv[0]
    options = _OPTIONS[command]
    values: dict[str, str | None] = {"command": command, **_DEFAULTS[command]}
    positional = []
    rest = iter(argv[1:])
    for arg in rest:
        if arg in options:
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            values[options[arg]] = value
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    if len(positional) != len(_POSITIONAL[command]) or values.get("format", "c") not in ("c", "raw"):
        return None
    values.update(zip(_POSITIONAL[command], positional))
    return SimpleNamespace(**values)  # type: ignore[return-value]  # reads the same


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = _plain_args(argv) or _parser().parse_args(argv)
    out: TextIO = sys.stdout
    try:
        if getattr(args, "output", None):
            out = open(args.output, "w", encoding="utf-8")
        try:
            if args.command == "dump":
                _dump(args, out)
                return 0
            return _show(args, out)
        finally:
            if out is not sys.stdout:
                out.close()
    except BrokenPipeError:
        # the reader (``| head``) went away: not an error; keep exit-time flush quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (BtfError, OSError) as exc:
        msg = str(exc) if not isinstance(exc, OSError) or not exc.filename else \
            f"{exc.filename}: {exc.strerror or exc}"
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _exit(code: int) -> None:
    """End the process once everything is written, without the interpreter's
    teardown: a dump leaves about a million objects, and freeing them one by
    one at exit took a tenth of the whole run (as a C tool, we let the
    kernel take the memory back)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader went away: not an error, as in main()
    except OSError as exc:
        print(f"error: standard output: {exc.strerror or exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
