"""Per-event cost of a printf of a string, pycore trace at max_strlen 64 and 1024 against bpftrace 0.23.2.

Issue #30 (0.23's ``max_strlen`` default, 1024): what a string of 1024 costs per event where 64 cost
little. A static C program calls ``hit(s)`` N times with a 23-byte string; each tracer runs
``uprobe:PROG:hit { printf("%s\\n", str(arg0)); }`` (and, with ``--key``, ``@[str(arg0)] = count()``
beside it). Figures, medians of the rounds (the tracers alternate within a round, one warm-up round):

- loop: the traced loop's wall time over the bare loop's, per event (the probe's cost in the traced
  process: the uprobe's trap, the program, the ring's copy);
- cpu: the tracer's own CPU time (user + system, its children's included: bpftrace runs under
  ``./dev.sh bpftrace-0.23``, chrooted) per event received: reading and printing the records;
- got: the lines received of N (the rest were lost: the ring was full);
- prog: the BPF program's own run time per run (the kernel's run_time_ns / run_cnt, counted while
  this bench holds a bpf_enable_stats fd; read with bpftool): what the string's handling costs,
  without the uprobe's trap and the contention between the loop and the tracer that the two above
  include on a loaded machine.

bpftrace 0.23.2 runs through ``tests/bpftrace023.py`` (the Debian 13 root ``./dev.sh`` builds); the
program is built into that root's /tmp so that both attach to the same file.

``--before PATH`` adds the rows of another pycore command (e.g. a checkout of main before this change:
``/work/main/.venv/bin/pycore``) at 64 and 1024.

    python bench/bench_strlen.py [--runs N] [--events N] [--key] [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_run import pycore_command  # noqa: E402
from tests import bpftrace023  # noqa: E402

LOOP_C = r"""
#include <stdlib.h>
__attribute__((noinline)) void hit(const char *s) { __asm__ volatile("" :: "r"(s)); }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) hit("a string of 23 bytes ok");
    return 0;
}
"""


def _cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _progs() -> dict[int, tuple[int, int]]:
    """Every loaded BPF program's id -> (run_time_ns, run_cnt)."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in json.loads(out)}


def traced(tracer: list[str] | None, loop: list[str], env: dict[str, str] | None) -> tuple[float, float, int, float]:
    """(loop wall seconds, tracer CPU seconds, lines the tracer printed, the tracer's programs' ns a run)."""
    if tracer is None:
        t0 = time.perf_counter()
        subprocess.run(loop, check=True)
        return time.perf_counter() - t0, 0.0, 0, 0.0
    before = set(_progs())
    cpu0 = _cpu()
    proc = subprocess.Popen(tracer, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    lines = 0
    for line in proc.stdout:          # "Attaching 1 probe..." (bpftrace: stdout, pycore: stderr)
        if line.startswith(b"Attaching"):
            break
    else:
        raise RuntimeError(f"{tracer} ended before attaching")

    def drain() -> None:
        nonlocal lines
        for ln in proc.stdout:
            lines += ln.startswith(b"a string")

    reader = threading.Thread(target=drain)
    reader.start()
    time.sleep(1.0)                   # bpftrace says it before it attaches
    t0 = time.perf_counter()
    subprocess.run(loop, check=True)
    wall = time.perf_counter() - t0
    ran = [v for k, v in _progs().items() if k not in before and v[1]]
    prog_ns = sum(v[0] for v in ran) / max(1, sum(v[1] for v in ran))
    time.sleep(1.0)                   # let the tracer print what is in its ring
    proc.send_signal(2)
    proc.wait(60)
    reader.join(60)
    return wall, _cpu() - cpu0, lines, prog_ns


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--key", action="store_true", help="also count the string as a map key")
    ap.add_argument("--before", metavar="PATH", help="another pycore command to measure beside (an older checkout)")
    args = ap.parse_args()
    bpftrace023.require = lambda: None        # noqa: E731 - no pytest here: available() says why not
    why = bpftrace023.available()
    if why:
        print(f"bpftrace 0.23.2: {why}", file=sys.stderr)
        return 1
    from pycore.native import libbpf as L

    stats = L.lib.bpf_enable_stats(0)         # BPF_STATS_RUN_TIME, while this fd is open
    if stats < 0:
        print(f"bpf_enable_stats: {L.error_text(stats)}", file=sys.stderr)
        return 1
    root = bpftrace023.root()
    d = Path(root, "tmp", f"bench-strlen-{os.getpid()}")
    d.mkdir(parents=True, exist_ok=True)
    exe = d / "loop"
    try:
        subprocess.run(["gcc", "-O2", "-static", "-x", "c", "-o", str(exe), "-"], input=LOOP_C, text=True, check=True)
        script = 'uprobe:{p}:hit {{ printf("%s\\n", str(arg0));' + (" @[str(arg0)] = count();" if args.key else "") + " }}"
        inside = str(exe)[len(root):]
        base = dict(os.environ)
        base.pop("BPFTRACE_MAX_STRLEN", None)
        tracers: dict[str, tuple[list[str] | None, dict[str, str] | None]] = {
            "bare": (None, None),
            "pycore 64": (pycore_command() + ["trace", "-e", script.format(p=exe)], {**base, "BPFTRACE_MAX_STRLEN": "64"}),
            "pycore 1024": (pycore_command() + ["trace", "-e", script.format(p=exe)], {**base, "BPFTRACE_MAX_STRLEN": "1024"}),
            "pycore default": (pycore_command() + ["trace", "-e", script.format(p=exe)], base),
            "bpftrace 0.23.2": (bpftrace023.argv("-e", script.format(p=inside)), bpftrace023.env()),
        }
        if args.before:
            for n in ("64", "1024"):
                tracers[f"before {n}"] = ([args.before, "trace", "-e", script.format(p=exe)],
                                          {**base, "BPFTRACE_MAX_STRLEN": n})
        res: dict[str, list[tuple[float, float, int, float]]] = {n: [] for n in tracers}
        loop = [str(exe), str(args.events)]
        for i in range(args.runs + 1):
            for name, (argv, env) in tracers.items():
                r = traced(argv, loop, env)
                if i:
                    res[name].append(r)
    finally:
        os.close(stats)
        if exe.exists():
            exe.unlink()
        d.rmdir()
    n = args.events
    bare = statistics.median(r[0] for r in res["bare"])
    print(f"printf(\"%s\\n\", str(arg0)){' + @[str(arg0)] = count()' if args.key else ''}, {n} events, "
          f"{args.runs} rounds, medians")
    loop_ns, cpu_ns, prog_ns = {}, {}, {}
    for name, rs in res.items():
        if name == "bare":
            print(f"  {'bare loop':<16} {bare:6.3f} s")
            continue
        wall = statistics.median(r[0] for r in rs)
        got = statistics.median(r[2] for r in rs)
        loop_ns[name] = (wall - bare) / n * 1e9
        cpu_ns[name] = statistics.median(r[1] for r in rs) / max(got, 1) * 1e9
        prog_ns[name] = statistics.median(r[3] for r in rs)
        print(f"  {name:<16} loop +{loop_ns[name]:6.0f} ns/event   tracer cpu {cpu_ns[name]:6.0f} ns/line   "
              f"prog {prog_ns[name]:5.0f} ns/run   got {got / n:6.1%}")
    ref = "bpftrace 0.23.2"
    base = "before 64" if "before 64" in res else "pycore 64"
    for name in [n for n in res if n.startswith(("pycore", "before"))]:
        print(f"  {name:<16} / {base}: loop {loop_ns[name] / loop_ns[base]:.2f}x, cpu "
              f"{cpu_ns[name] / cpu_ns[base]:.2f}x, prog {prog_ns[name] / prog_ns[base]:.2f}x;  / {ref}: loop "
              f"{loop_ns[name] / loop_ns[ref]:.2f}x, cpu {cpu_ns[name] / cpu_ns[ref]:.2f}x, prog "
              f"{prog_ns[name] / prog_ns[ref]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
