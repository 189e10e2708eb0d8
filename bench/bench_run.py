"""Benchmark ``pycore run lock-contention -d 0`` against bpftrace running the
kernel lab's lock-contention script to the same point: attached, then exit.

bpftrace gets the lab's script with its exercises done (threshold parameter,
``@long_block_times`` hist per lock address, END printing only that) plus an
``interval:ms:1 { exit(); }`` probe, so it exits right after attaching, as
``-d 0`` does.  Whole-process wall time and peak RSS (ru_maxrss from wait4);
the two commands alternate, one warm-up each, medians over ``--runs``.
Target: pycore at most 0.25x bpftrace's time.  Measures, does not assert.

    python bench/bench_run.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAB_SCRIPT = """\
tracepoint:lock:contention_begin
{
  @[tid, args->lock_addr] = nsecs;
}

tracepoint:lock:contention_end
/@[tid, args->lock_addr] != 0/
{
  $lock_duration = nsecs - @[tid, args->lock_addr];
  if ($lock_duration > $1) {
    @long_block_times[args->lock_addr] = hist($lock_duration);
  }
  delete(@[tid, args->lock_addr]);
}

interval:ms:1 { exit(); }

END
{
  clear(@);
}
"""


def pycore_command() -> list[str]:
    venv = ROOT / ".venv" / "bin" / "pycore"
    return [str(venv)] if venv.exists() else [sys.executable, "-m", "pycore"]


def once(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one run; raises if it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {err.strip()}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    bpftrace = shutil.which("bpftrace")
    with tempfile.NamedTemporaryFile("w", suffix=".bt", delete=False) as f:
        f.write(LAB_SCRIPT)
        script = f.name
    commands = {"pycore run lock-contention -d 0": pycore_command() + ["run", "lock-contention", "-d", "0"]}
    if bpftrace:
        commands["bpftrace lab script (exit at first interval:ms:1)"] = [bpftrace, script, "100000"]
    else:
        print("bpftrace not found: measuring pycore only", file=sys.stderr)
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
    try:
        for i in range(args.runs + 1):
            for name, argv in commands.items():
                wall, rss = once(argv)
                if i:  # the first round warms caches
                    results[name][0].append(wall)
                    results[name][1].append(rss)
    finally:
        os.unlink(script)
    width = max(map(len, commands))
    print(f"{'command':<{width}}  {'median s':>9}  {'peak MiB':>9}   ({args.runs} runs each, alternating)")
    medians = {}
    for name, (walls, rsss) in results.items():
        medians[name] = statistics.median(walls)
        print(f"{name:<{width}}  {medians[name]:>9.3f}  {max(rsss):>9.1f}")
    if len(medians) == 2:
        p, b = medians.values()
        print(f"pycore / bpftrace = {p / b:.3f}x (target <= 0.25x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
