"""Whole-process time and peak memory of a vmlinux.h dump: bpftool vs ours.

    python bench/bench_dump.py [-n 5] [--btf /sys/kernel/btf/vmlinux]

Each run is a fresh process writing to /dev/null; we report the median
wall time, the ratio, and each tool's peak RSS (ru_maxrss of the children,
which only grows, so it is read after each tool's own runs in a fresh
helper process).  A benchmark measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _measure(cmd: list[str], n: int) -> tuple[list[float], int]:
    """Wall times of n runs and the peak RSS (KiB) of the largest, measured
    in a helper so that another tool's children do not mask it."""
    helper = (
        "import json, resource, subprocess, sys, time\n"
        "cmd, n = json.loads(sys.argv[1]), int(sys.argv[2])\n"
        "times = []\n"
        "for _ in range(n):\n"
        "    t = time.perf_counter()\n"
        "    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)\n"
        "    times.append(time.perf_counter() - t)\n"
        "print(json.dumps([times, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    got = subprocess.run([sys.executable, "-c", helper, json.dumps(cmd), str(n)],
                         capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    times, rss = json.loads(got.stdout)
    return times, rss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=5, help="runs per tool (default 5)")
    p.add_argument("--btf", default="/sys/kernel/btf/vmlinux")
    args = p.parse_args()
    tools = {
        "bpftool": ["bpftool", "btf", "dump", "file", args.btf, "format", "c"],
        "python -m btf": [sys.executable, "-m", "btf", "dump", args.btf, "--format", "c"],
    }
    results = {}
    for name, cmd in tools.items():
        times, rss = _measure(cmd, args.n)
        results[name] = (statistics.median(times), rss)
        print(f"{name:14} median {results[name][0] * 1000:7.1f} ms  "
              f"(runs: {', '.join(f'{t * 1000:.0f}' for t in times)})  peak RSS {rss / 1024:6.1f} MiB")
    ours, theirs = results["python -m btf"][0], results["bpftool"][0]
    print(f"ratio python/bpftool: {ours / theirs:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
