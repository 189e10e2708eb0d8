"""Benchmark a for-loop over a 1,000-key map, per event, ``pycore trace`` against bpftrace 0.23.2, same run.

Issue #30's figure: the per-event cost of ``for ($kv : @m)`` over a map of 1,000 keys, <= 1.0x
bpftrace 0.23.2's. A small static program calls ``fill(i)`` for i in 0..999, then times N calls of
``tick()`` and prints the nanoseconds per call, over and over (2 ms apart). The script fills ``@m``
from ``fill``'s uprobe and walks it on each ``tick``:

    uprobe:P:fill { @m[arg0] = (int64)arg0; }
    uprobe:P:tick { $n = 0; for ($kv : @m) { $n += $kv.1; } @s = $n; }

An event's cost is the median per-call time while the tracer is attached less the median with
nothing attached (the uprobe's own cost is in both tracers' figures, about 1 us of ~15-40 us). The
tracers alternate, one warm-up round; medians. bpftrace 0.23.2 runs chrooted in the Debian 13 root
(as bench_trace023.py runs it: one private mount namespace for the whole benchmark), on a copy of
the program in the root's /tmp that pycore traces by its outside path. Measures, does not assert.

    python bench/bench_trace_loops.py [--runs N] [--calls N]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_run import pycore_command  # noqa: E402
from bench_trace023 import in_namespace, trixie  # noqa: E402 - the same chroot, the same namespace

TICKER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) void fill(long i) { __asm__ volatile("" :: "r"(i)); }
__attribute__((noinline)) void tick(void) { __asm__ volatile(""); }
static long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    struct timespec pause = {0, 2000000};
    setvbuf(stdout, 0, _IOLBF, 0);
    for (;;) {
        for (long i = 0; i < 1000; i++) fill(i);
        long t = now();
        for (int i = 0; i < n; i++) tick();
        printf("%ld\n", (now() - t) / n);
        nanosleep(&pause, 0);
    }
}
"""

SCRIPT = """uprobe:%(p)s:fill { @m[arg0] = (int64)arg0; }
uprobe:%(p)s:tick { $n = 0; for ($kv : @m) { $n += $kv.1; } @s = $n; }
END { clear(@m); clear(@s); }
"""


class Ticker:
    """The program, its per-call times read as they come, each with when it came."""

    def __init__(self, path: Path, calls: int) -> None:
        self.p = subprocess.Popen([str(path), str(calls)], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[float, int]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            self.samples.append((time.monotonic(), int(line)))

    def median(self, seconds: float) -> float:
        """The median per-call time over the next ``seconds``."""
        start = time.monotonic()
        time.sleep(seconds)
        got = [v for t, v in self.samples if t > start]
        return statistics.median(got) if got else float("nan")

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def traced(ticker: Ticker, argv: list[str], settle: float = 1.5, seconds: float = 2.0) -> float:
    """The median per-call time with ``argv`` attached (from ``settle`` s after it says Attaching)."""
    t = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        while not (seen and seen[-1].startswith("Attaching")):
            line = t.stdout.readline()
            if not line or len(seen) > 20:
                raise RuntimeError(f"{argv[0]}: never attached: {''.join(seen + [line])}")
            seen.append(line)
        threading.Thread(target=t.stdout.read, daemon=True).start()   # keep its pipe drained
        time.sleep(settle)
        return ticker.median(seconds)
    finally:
        t.send_signal(signal.SIGINT)
        try:
            t.wait(timeout=30)
        except subprocess.TimeoutExpired:
            t.kill()
            t.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=100, help="tick() calls a sample times")
    args = ap.parse_args()
    root = trixie()
    in_namespace(root)
    pycore = pycore_command()
    work = Path(tempfile.mkdtemp(prefix="pycore-bench-", dir=root / "tmp"))
    inside = "/" + str(work.relative_to(root))
    program = work / "ticker"
    subprocess.run(["gcc", "-O1", "-static", "-o", str(program), "-x", "c", "-"], input=TICKER_C.encode(),
                   check=True)
    (work / "loop.bt").write_text(SCRIPT % {"p": program})
    (work / "loop-inside.bt").write_text(SCRIPT % {"p": f"{inside}/ticker"})
    commands = {"pycore trace": pycore + ["trace", "-B", "line", str(work / "loop.bt")],
                "bpftrace 0.23.2": ["chroot", str(root), "bpftrace", "-B", "line", f"{inside}/loop-inside.bt"]}
    ticker = Ticker(program, args.calls)
    try:
        bare: list[float] = []
        cost: dict[str, list[float]] = {name: [] for name in commands}
        for r in range(args.runs + 1):
            for name, argv in commands.items():
                base = ticker.median(1.0)
                t = traced(ticker, argv)
                if r:
                    bare.append(base)
                    cost[name].append(t - base)
    finally:
        ticker.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"per-event cost of a for-loop over a 1,000-key map (uprobe on tick(), {args.runs} rounds, medians;"
          f" bare call {statistics.median(bare):.0f} ns):")
    med = {name: statistics.median(v) for name, v in cost.items()}
    for name, m in med.items():
        print(f"  {name:<18} {m / 1000:8.2f} us/event   {m / 1000 / 1000 * 1000:6.1f} ns/element")
    print(f"  ratio pycore/bpftrace 0.23.2: {med['pycore trace'] / med['bpftrace 0.23.2']:.2f}x (target <= 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
