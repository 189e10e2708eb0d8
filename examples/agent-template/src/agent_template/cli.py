"""agent-template: execs on this machine as they happen, then the processes that made the most system calls.

    agent-template [-d SECONDS] [--top N] [--json]

One line per exec while it runs (a JSON object per line with --json); at
the end (after -d SECONDS, Ctrl-C or SIGTERM) the top N processes by
system calls, the execs seen and the events lost. Needs root (CAP_BPF and
CAP_PERFMON). Errors are one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from pycore.errors import PycoreError

from agent_template.counter_skel import Counter, ExecEvent

PROG = "agent-template"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after this long (default: Ctrl-C)")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="how many processes to list by system calls (0: all; default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args(argv)
    if args.duration is not None and args.duration <= 0:
        p.error("-d: SECONDS must be positive")
    if args.top < 0:
        p.error("--top: N must be 0 or more")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print(f"{PROG}: needs root (CAP_BPF and CAP_PERFMON) to load BPF programs", file=sys.stderr)
        return 2
    try:
        return run(args)
    except PycoreError as e:  # load, verifier, attach: pycore says what failed, in one line
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def run(args: argparse.Namespace) -> int:
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def show(event: ExecEvent) -> None:
        if args.json:
            print(json.dumps({"exec": dataclasses.asdict(event)}), flush=True)
        else:
            print(f"exec pid={event.pid} ppid={event.ppid} uid={event.uid} comm={event.comm} "
                  f"file={event.filename}", flush=True)

    # counter_skel.py is generated at build time from counter.bpf.o (pycore skel): every name and type
    # below is checked by mypy against the object's BTF.
    with Counter.open() as skel:  # counter.bpf.o beside the skeleton
        skel.rodata.ignore_tgid = os.getpid()  # the agent's own system calls are not counted
        skel.load()
        skel.attach()
        print(f"{PROG}: attached ({', '.join(sorted(skel.obj.programs))}); "
              f"{'for %g s' % args.duration if args.duration else 'Ctrl-C stops'}", file=sys.stderr, flush=True)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        ring = skel.rings.events
        while not stopping:
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                break
            ring.poll(show, timeout=left)
        ring.poll(show, timeout=0)  # what arrived before the end
        lost = ring.lost or 0
        counts = sorted(((pid, v.count, v.comm) for pid, v in skel.maps.syscalls.items()),
                        key=lambda row: row[1], reverse=True)
        if args.top:
            counts = counts[:args.top]
        summary: dict[str, Any] = {
            "execs_seen": skel.bss.execs_seen, "lost": lost,
            "syscalls": [{"pid": pid, "comm": comm, "count": n} for pid, n, comm in counts]}
    if args.json:
        print(json.dumps({"summary": summary}), flush=True)
    else:
        print(f"{'PID':>8} {'COMM':<16} {'SYSCALLS':>10}")
        for row in summary["syscalls"]:
            print(f"{row['pid']:>8} {row['comm']:<16} {row['count']:>10}")
        print(f"execs seen: {summary['execs_seen']}, events lost: {summary['lost']}")
    return 0
