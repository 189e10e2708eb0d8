"""Benchmark uprobe parameters from DWARF: ``pycore list -v`` against ``bpftrace -lv`` on
libc with libc6-dbg (its separate debug file, 5.8 MB of .debug_info in 2,063 units).

Measures, does not assert.  Whole processes: wall time, CPU time (user +
system: what a loaded machine changes least) and the child's peak RSS
(ru_maxrss from wait4), medians of ``--runs`` runs (peak: the largest):

* ``uprobe:libc:getaddrinfo``: one function, found through .debug_aranges
  (no index, no cache);
* ``uprobe:libc:*`` first run: the cache directory empty, so the whole-file
  index is built (every unit's top-level DIEs) and stored;
* ``uprobe:libc:*`` cached: the index read back (keyed by build id).

bpftrace 0.17 looks each listed function up in every unit in turn: its
``-lv 'uprobe:libc:*'`` takes minutes, so it runs ``--bpftrace-runs`` times
(default 1; 0 leaves it out).  The ratios are from this same run.  The listings are also
compared: bpftrace lists more names (symbol versions such as
``glob64@@GLIBC_2.27``; the debug file's local functions are listed by both
since issue 30); for the functions both list, the parameter lines must be
equal, and the count that differ is printed.

    python bench/bench_dwarf.py [--runs N] [--bpftrace-runs N]
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
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def pycore_command() -> list[str]:
    venv = ROOT / ".venv" / "bin" / "pycore"
    return [str(venv)] if venv.exists() else [sys.executable, "-m", "pycore"]


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS MiB, stdout) of one run."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
        out.seek(0)
        return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read().decode()


def measure(argv: list[str], runs: int, env: dict[str, str],
            fresh_cache: bool = False) -> tuple[float, float, float, str]:
    """(median wall, median CPU, max peak RSS, last stdout); ``fresh_cache``: an empty
    cache directory each run."""
    times, cpus, peaks, text = [], [], [], ""
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            e = dict(env, PYCORE_CACHE_DIR=cache) if fresh_cache else env
            wall, cpu, rss, text = run(argv, e)
        times.append(wall)
        cpus.append(cpu)
        peaks.append(rss)
    return statistics.median(times), statistics.median(cpus), max(peaks), text


def entries(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("uprobe:"):
            current = out.setdefault(line, [])
        else:
            current.append(line)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bpftrace-runs", type=int, default=1)
    args = parser.parse_args()
    pycore = pycore_command()
    python = str(Path(pycore[0]).parent / "python") if pycore[0] != sys.executable else sys.executable
    subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "pycore"), str(ROOT / "btf")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bpftrace = shutil.which("bpftrace")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYCORE_CACHE_DIR=cache)
        rows: list[tuple[str, float, float, float]] = []
        one = ["list", "-v", f"uprobe:{LIBC}:getaddrinfo"]
        every = ["list", "-v", "uprobe:libc:*"]
        got = {}
        for label, argv, runs, fresh in (
                ("pycore list -v uprobe:libc:getaddrinfo", [*pycore, *one], args.runs, True),
                ("pycore list -v 'uprobe:libc:*' (first run)", [*pycore, *every], args.runs, True),
                ("pycore list -v 'uprobe:libc:*' (cached)", None, args.runs, False)):
            if argv is None:
                run([*pycore, *every], env)                       # fills the cache
                argv = [*pycore, *every]
            wall, cpu, rss, text = measure(argv, runs, env, fresh)
            rows.append((label, wall, cpu, rss))
            got[label] = text
        if bpftrace:
            for label, argv, runs in (("bpftrace -lv uprobe:libc:getaddrinfo", [bpftrace, "-lv", f"uprobe:{LIBC}:getaddrinfo"],
                                       args.runs),
                                      ("bpftrace -lv 'uprobe:libc:*'", [bpftrace, "-lv", "uprobe:libc:*"],
                                       args.bpftrace_runs)):
                if not runs:
                    continue
                wall, cpu, rss, text = measure(argv, runs, env)
                rows.append((label, wall, cpu, rss))
                got[label] = text
    width = max(len(row[0]) for row in rows)
    print(f"pycore: {' '.join(pycore)}   runs: {args.runs} (median wall and CPU, max peak RSS); "
          f"bpftrace 'uprobe:libc:*': {args.bpftrace_runs}")
    print(f"{'command':<{width}}  {'wall s':>8}  {'CPU s':>8}  {'RSS MiB':>8}")
    for label, wall, cpu, rss in rows:
        print(f"{label:<{width}}  {wall:8.3f}  {cpu:8.3f}  {rss:8.1f}")
    walls = {row[0]: row[1] for row in rows}
    print(f"largest pycore peak RSS: {max(row[3] for row in rows if row[0].startswith('pycore')):.1f} MiB "
          "(target < 80)")
    if bpftrace and args.bpftrace_runs:
        bt = walls["bpftrace -lv 'uprobe:libc:*'"]
        for label in ("pycore list -v 'uprobe:libc:*' (first run)", "pycore list -v 'uprobe:libc:*' (cached)"):
            print(f"{label}: {walls[label] / bt:.4f}x bpftrace")
        print(f"getaddrinfo: {walls['pycore list -v uprobe:libc:getaddrinfo'] / walls['bpftrace -lv uprobe:libc:getaddrinfo']:.2f}x"
              " bpftrace")
        ours, theirs = entries(got["pycore list -v 'uprobe:libc:*' (cached)"]), entries(got["bpftrace -lv 'uprobe:libc:*'"])
        common = [k for k in ours if k in theirs]
        differ = [k for k in common if ours[k] != theirs[k]]
        print(f"listings: {len(ours)} functions listed by pycore, {len(theirs)} by bpftrace, {len(common)} by both, "
              f"{sum(1 for k in common if ours[k])} with parameters, {len(differ)} differing"
              + (f" (first: {differ[0]})" if differ else ""))
        if got["pycore list -v 'uprobe:libc:*' (first run)"] != got["pycore list -v 'uprobe:libc:*' (cached)"]:
            print("first and cached runs differ!")
    elif bpftrace:
        print(f"getaddrinfo: {walls['pycore list -v uprobe:libc:getaddrinfo'] / walls['bpftrace -lv uprobe:libc:getaddrinfo']:.2f}x"
              " bpftrace (--bpftrace-runs 0: bpftrace's 'uprobe:libc:*' not run)")
    else:
        print("bpftrace not installed: no ratios")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
