"""Whole-process time and peak memory of a vmlinux.h dump: bpftool vs ours.

    python bench/bench_dump.py [-n 5] [--btf /sys/kernel/btf/vmlinux]

Each run is a fresh process writing to /dev/null, and the commands take
turns, one run each per round.  Ours runs twice over:
*cold*, the first run on a kernel (a new, empty cache directory each time:
pass one is walked, and its index written to the cache), and *warm*, with
the cache in a private directory filled by one untimed run (what every
later run costs).  Reported:
median wall time, the ratio to bpftool's median measured in the same run
(the issue's target is at most 3x), the CPU time of a run (user + system, of
every process the run starts), and each command's peak RSS
(ru_maxrss of the children, which only grows, so each command is measured
in a fresh helper process).  ``btf``'s byte code is compiled first, as an
installed package has it (a shell with PYTHONDONTWRITEBYTECODE would
otherwise make every run compile the edited modules again).  A benchmark
measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _measure(cmd: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    """Wall time, peak RSS (KiB) and CPU time (user + system, all processes)
    of one run; measured in a helper so that another command's children do
    not mask them."""
    helper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(json.loads(sys.argv[1]), stdout=subprocess.DEVNULL, check=True)\n"
        "t = time.perf_counter() - t\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([t, ru.ru_maxrss, ru.ru_utime + ru.ru_stime]))\n"
    )
    got = subprocess.run([sys.executable, "-c", helper, json.dumps(cmd)],
                         capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    wall, rss, cpu = json.loads(got.stdout)
    return wall, rss, cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=5, help="runs per command (default 5)")
    p.add_argument("--btf", default="/sys/kernel/btf/vmlinux")
    args = p.parse_args()
    ours = [sys.executable, "-m", "btf", "dump", args.btf, "--format", "c"]
    base = {**os.environ, "PYTHONPATH": ROOT}
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "btf")], check=True)
    with tempfile.TemporaryDirectory(prefix="bench-dump-cache-") as cache:
        warm_env = {**base, "PYCORE_CACHE_DIR": os.path.join(cache, "warm")}
        subprocess.run(ours, stdout=subprocess.DEVNULL, check=True, env=warm_env, cwd=ROOT)  # fill it
        first_runs = iter(range(1 << 30))
        commands = {
            "bpftool": (["bpftool", "btf", "dump", "file", args.btf, "format", "c"], lambda: base),
            "ours, cold cache": (ours, lambda: {**base, "PYCORE_CACHE_DIR": os.path.join(cache, f"first-{next(first_runs)}")}),
            "ours, warm cache": (ours, lambda: warm_env),
        }
        # Rounds: each command once per round, so that the machine's drift
        # (these are shared hosts) weighs on all three alike; a round's own
        # ratio compares runs made seconds apart.
        times: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, int] = dict.fromkeys(commands, 0)
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.n):
            for name, (cmd, env) in commands.items():
                wall, peak, used = _measure(cmd, env())
                times[name].append(wall)
                rss[name] = max(rss[name], peak)
                cpu[name].append(used)
        for name in commands:
            print(f"{name:17} median {statistics.median(times[name]) * 1000:7.1f} ms  "
                  f"(runs: {', '.join(f'{t * 1000:.0f}' for t in times[name])})  "
                  f"CPU {statistics.median(cpu[name]) * 1000:6.1f} ms  peak RSS {rss[name] / 1024:6.1f} MiB")
    theirs = statistics.median(times["bpftool"])
    for name in ("ours, cold cache", "ours, warm cache"):
        rounds = [t / b for t, b in zip(times[name], times["bpftool"])]
        print(f"ratio {name} / bpftool: {statistics.median(times[name]) / theirs:.2f}x of the medians, "
              f"{statistics.median(rounds):.2f}x the median round "
              f"(rounds {min(rounds):.2f}-{max(rounds):.2f}; target <= 3x)")
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
