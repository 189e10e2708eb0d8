"""Benchmark ``pycore trace`` against bpftrace 0.23.2 (Debian 13's) and 0.17 (Debian 12's), same run.

Issue #30's figures, for a script in today's language (a ``config`` block, ``let``, a for-loop
over a map):

1. start to attached: the script's uprobe is on ``tick()`` of a small static program that calls
   it every millisecond; the time from exec to the probe's ``ready`` line (it then exits) is start
   to attached, give or take a millisecond, whatever order a tracer runs BEGIN and attaches in
   (0.23.2 and pycore: BEGIN first; 0.17: after).  Target: pycore <= 0.4x 0.23.2.  Beside them the
   floor (``uprobe_floor.py``): two maps, a two-instruction program loaded and attached as the
   same uprobe through pycore's native and link layers, ``ready`` printed; no language at all.
2. the whole run of ``-c /usr/bin/true`` with the same script, exec to exit.  Target: <= 0.4x.
3. the parse of every tool of Debian 13's bpftrace package (its ``/usr/sbin/*.bt``) and of
   upstream's ``tools/`` when ``--upstream DIR`` is given: the slowest, in-process, the tree not
   cached (``pycore.lang.parser.parse``).  Target: <= 5 ms.

bpftrace 0.23.2 runs chrooted in the Debian 13 root ``./dev.sh trixie-root`` builds.  To keep
the mounts that needs out of its times, the benchmark runs itself once in a private mount
namespace with /proc, /dev and /sys bound into the root, and runs ``chroot ROOT bpftrace`` (about
1 ms more than a plain exec).  The ticker is copied into the root's /tmp, so both tracers attach to
the same file: pycore by its path from outside, bpftrace by its path inside.  bpftrace 0.17 gets
the script without the config block, ``let`` and the loop (it has none of them): its figure is for
reference only.

The commands alternate within each round after one warm-up round; medians.  Measures, does not
assert.

    python bench/bench_trace023.py [--runs N] [--only ready|cmd|parse] [--upstream DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_run import once, pycore_command  # noqa: E402 - the same whole-process measurement
from bench_trace import to_ready  # noqa: E402 - exec to the 'ready' line, then SIGINT

TICKER_C = r"""
#include <time.h>
__attribute__((noinline)) void tick(void) { __asm__ volatile(""); }
int main(void) {
    struct timespec ms = {0, 1000000};
    for (;;) { tick(); nanosleep(&ms, 0); }
}
"""

NEW = """config = { max_map_keys = 2048 }
BEGIN { @m[1] = 1; @m[2] = 2; }
uprobe:%s:tick {
  let $n = 0;
  for ($kv : @m) { $n = $n + $kv.1; }
  printf("ready\\n");
  exit();
}
END { clear(@m); }
"""

OLD = """BEGIN { @m[1] = 1; @m[2] = 2; }
uprobe:%s:tick { $n = @m[1] + @m[2]; printf("ready\\n"); exit(); }
END { clear(@m); }
"""


def trixie() -> Path:
    out = subprocess.run([str(ROOT / "dev.sh"), "trixie-root"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def in_namespace(root: Path) -> None:
    """Re-run this benchmark in a private mount namespace with /proc, /dev, /sys bound into ``root``."""
    if os.environ.get("PYCORE_BENCH_NS") == str(root):
        return
    script = ('for m in proc dev sys; do mount --rbind "/$m" "$0/$m" || exit 125; done; '
              'ulimit -l unlimited 2>/dev/null; exec "$@"')
    env = dict(os.environ, PYCORE_BENCH_NS=str(root))
    os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(root),
                           sys.executable, *sys.argv], env)


def medians(commands: dict[str, object], runs: int, measure) -> dict[str, float]:  # noqa: ANN001
    times: dict[str, list[float]] = {name: [] for name in commands}
    for r in range(runs + 1):
        for name, argv in commands.items():
            t = measure(argv)
            if r:
                times[name].append(t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def report(title: str, med: dict[str, float], ref: str, target: str) -> None:
    print(title)
    for name, m in med.items():
        print(f"  {name:<22} {m * 1000:7.1f} ms   {m / med[ref]:5.2f}x {ref}")
    print(f"  ratio pycore/{ref}: {med['pycore trace'] / med[ref]:.2f}x (target {target})")


def parse_times(dirs: list[Path]) -> None:
    """3. The parse of each tool, in-process, no cache: the slowest, and the median of 5 for it."""
    from pycore.lang.parser import parse

    parse("BEGIN { }", "warm-up")   # the parser's tables are built on first use, once a process
    results = []
    for d in dirs:
        for path in sorted(glob.glob(str(d / "*.bt"))):
            text = Path(path).read_text()
            best = []
            for _ in range(5):
                t = time.perf_counter()
                try:
                    parse(text, path)
                except Exception as e:   # a tool in a newer language than pycore's: say so, go on
                    best = [float("nan")]
                    print(f"  {Path(path).name}: does not parse: {str(e).splitlines()[0][:100]}")
                    break
                best.append(time.perf_counter() - t)
            results.append((statistics.median(best), len(text), path))
    ok = [r for r in results if r[0] == r[0]]
    ok.sort(reverse=True)
    print(f"parse of {len(results)} tools ({len(ok)} parse), in-process, no cache:")
    for t, size, path in ok[:3]:
        print(f"  {t * 1000:6.2f} ms  {size:6d} bytes  {path}")
    biggest = max(ok, key=lambda r: r[1])
    print(f"  largest tool: {biggest[0] * 1000:.2f} ms ({Path(biggest[2]).name}, {biggest[1]} bytes; target <= 5 ms)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--only", choices=["ready", "cmd", "parse"])
    ap.add_argument("--upstream", type=Path, help="a directory of upstream bpftrace's tools/*.bt to parse too")
    args = ap.parse_args()
    # an installed pycore runs from compiled bytecode (pip compiles it at install); where the
    # environment forbids writing it (PYTHONDONTWRITEBYTECODE, set in some sandboxes), every run would
    # compile every module again: 150 ms instead of 60 to attached, measured here
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    root = trixie()
    if args.only in (None, "ready", "cmd"):
        in_namespace(root)
    if args.only in (None, "parse"):
        parse_times([root / "usr/sbin"] + ([args.upstream] if args.upstream else []))
    if args.only == "parse":
        return 0
    pycore = pycore_command()
    old = shutil.which("bpftrace")
    work = Path(tempfile.mkdtemp(prefix="pycore-bench-", dir=root / "tmp"))
    inside = "/" + str(work.relative_to(root))
    ticker = work / "ticker"
    subprocess.run(["gcc", "-O1", "-static", "-o", str(ticker), "-x", "c", "-"], input=TICKER_C.encode(), check=True)
    runner = subprocess.Popen([str(ticker)])
    try:
        scripts = {}
        for name, text in {"new": NEW % ticker, "new-inside": NEW % f"{inside}/ticker", "old": OLD % ticker}.items():
            scripts[name] = work / f"{name}.bt"
            scripts[name].write_text(text)
        b023 = ["chroot", str(root), "bpftrace"]
        if args.only in (None, "ready"):
            commands = {"pycore trace": pycore + ["trace", str(scripts["new"])],
                        "bpftrace 0.23.2": b023 + ["-B", "none", f"{inside}/new-inside.bt"]}
            if old:
                commands["bpftrace 0.17 (old)"] = [old, "-B", "none", str(scripts["old"])]
            import site

            from pycore.elf.file import ElfFile

            with ElfFile(str(ticker)) as elf:
                offset = elf.file_offset(elf.symbols()["tick"])
            python = str(Path(pycore[0]).with_name("python")) if pycore[0].endswith("/pycore") else sys.executable
            floor = [str(ROOT / "bench" / "uprobe_floor.py"), str(ticker), str(offset)]
            commands["floor"] = [python, *floor]
            commands["floor, -S -E"] = [python, "-S", "-E", *floor, str(ROOT), *site.getsitepackages()]
            med = medians(commands, args.runs, lambda argv: to_ready(argv)[0])
            report("1. start to attached (exec to the uprobe's first event), config + let + for-loop:",
                   med, "bpftrace 0.23.2", "<= 0.4x")
        if args.only in (None, "cmd"):
            commands = {"pycore trace": pycore + ["trace", str(scripts["new"]), "-c", "/usr/bin/true"],
                        "bpftrace 0.23.2": b023 + [f"{inside}/new-inside.bt", "-c", "/usr/bin/true"]}
            if old:
                commands["bpftrace 0.17 (old)"] = [old, str(scripts["old"]), "-c", "/usr/bin/true"]
            med = medians(commands, args.runs, lambda argv: once(argv)[0])
            report("2. whole run of -c /usr/bin/true, same script:", med, "bpftrace 0.23.2", "<= 0.4x")
    finally:
        runner.kill()
        runner.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
