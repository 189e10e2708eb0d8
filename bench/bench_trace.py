"""Benchmark ``pycore trace`` against bpftrace 0.17 on the same scripts, in the same run.

1. start to attached: ``tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }``
   with ``BEGIN { printf("ready\n"); }`` beside it: both tools run BEGIN once
   every probe is attached, so the time from exec to the ``ready`` line is
   start-to-attached.  Also the whole run with ``BEGIN { exit(); }`` instead
   (attach, detach, exit: detaching a tracepoint waits ~80 ms for the
   kernel's RCU grace period, in both tools), and peak RSS (wait4).
   Target: pycore <= 0.25x bpftrace's start-to-attached, RSS < 40 MB.
   "pycore trace" is a script run before (its cache directory filled by the
   warm-up round); "pycore, new" a script not run before (the same with a
   new comment each time: its tree is not cached, so it is parsed);
   "pycore, cold" a first run: an empty XDG_CACHE_HOME (pycore/lang/parser.py;
   since the parser is generated ahead of time, this is a new script too).
2. per-event overhead: a C loop of N openat/close pairs on /dev/null, timed
   bare, under bpftrace and under pycore running the same counting script.
   Target: (pycore - bare) / (bpftrace - bare) <= 1.2.
3. a wildcard of kernel functions, where the kernel allows fentry/fexit (the
   kernel VMs, not this project's host): ``kfunc:vfs_* { @[probe] = count(); }``
   (about 70 trampolines) start to attached and whole run, as in 1.
4. the whole run of a ``-c`` command (``--only cmd``): ``pycore trace -e
   'tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }' -c
   /usr/bin/true`` against bpftrace's, exec to exit.  Target: <= 0.4x.  Beside
   it, for where the time goes: the same with ``-e 'BEGIN { exit(); }'`` (no
   tracepoint attached, so none detached: a tracepoint's detach waits ~80 ms
   for an RCU grace period, in both tools) and ``python -c pass``.
6. args from DWARF (``--only dwarf``): a script using a libc function's args,
   typed from libc6-dbg's DWARF, start to attached, with pycore's caches empty
   ("first"; "first DWARF": only the DWARF's, the script's parse tree kept; a
   uprobe's DWARF types are a BTF of their own, so no kernel BTF is read) and
   filled ("cached"): ``uprobe:libc:open_by_handle_at`` (whose
   args bpftrace 0.17 reads too) against bpftrace's, and
   ``uprobe:libc:getaddrinfo``'s ``str(args->name)`` (which aborts bpftrace
   0.17) against bpftrace's ``str(arg0)``, and pycore's (no DWARF read). Target: <= 1.0x.
7. a printf flood (``--only flood``): capable.bt's shape, ``time()`` then a printf of a string read
   from a map, for each of N getppid() calls of a C loop named ``flood`` (paced: 1 ms every 200
   calls, so neither ring fills); the tracer's CPU time (user + system, wait4) less an idle run's
   of the same script, per event printed. Target: none named; pycore's reading of alternating
   record lengths was quadratic in the backlog before d767528.
5. the floor (``--only floor``): how close to bpftrace any Python program can
   get on 1's start to attached. ``python -c pass``, then ``trace_floor.py``
   (maps made, a two-instruction program loaded and attached to the same
   tracepoint through pycore's native and link layers, ``ready`` printed:
   no parsing, checking, code generation or output), plainly and with
   ``-S -E``, against bpftrace and ``pycore trace`` in the same rounds.

The commands alternate within each round, one warm-up round; medians.
Measures, does not assert.

    python bench/bench_trace.py [--runs N] [--events N] [--only startup|overhead|kfunc|cmd|floor|dwarf|flood] [--pycore PATH]
"""

from __future__ import annotations

import argparse
import os
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
from bench_run import once, pycore_command  # noqa: E402 - the same whole-process measurement
COUNT = "tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }"
WHOLE = COUNT + " BEGIN { exit(); }"
READY = COUNT + ' BEGIN { printf("ready\\n"); }'
WILD = "kfunc:vfs_* { @[probe] = count(); }"   # bpftrace 0.17 refuses func in kfunc probes

LOOP_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < n; i++) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) close(fd);
    }
    return 0;
}
"""


def to_ready(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(seconds from exec to the 'ready' line BEGIN prints, peak RSS MiB of the whole run).

    The run is then stopped with SIGINT, sent again every STOP_AGAIN seconds
    until it exits: bpftrace 0.17 here sometimes loses a SIGINT that comes
    just after BEGIN's line and waits in epoll_wait for good (seen twice in a
    few hundred runs). A run that prints no 'ready' line in READY_TIMEOUT
    seconds is killed, and the benchmark stops with an error instead of hanging."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    timer = threading.Timer(READY_TIMEOUT, proc.kill)
    timer.start()
    try:
        ready = None
        for line in proc.stdout:
            if line.strip() == b"ready":
                ready = time.perf_counter() - start
                break
    finally:
        timer.cancel()
    stopped = threading.Event()
    pidfd = os.pidfd_open(proc.pid)   # signals through it never reach a recycled pid once it is reaped

    def stop() -> None:
        while not stopped.wait(STOP_AGAIN):
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGINT)
            except ProcessLookupError:
                return

    proc.send_signal(signal.SIGINT)
    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    stopped.set()
    stopper.join()
    os.close(pidfd)
    if ready is None:
        raise RuntimeError(f"{' '.join(argv)}: no 'ready' line in {READY_TIMEOUT} s")
    return ready, usage.ru_maxrss / 1024


READY_TIMEOUT = 20.0
STOP_AGAIN = 5.0


def under(tracer: list[str] | None, loop: list[str]) -> float:
    """Wall time of the loop, bare or while ``tracer`` runs the counting script."""
    if tracer is None:
        t0 = time.perf_counter()
        subprocess.run(loop, check=True)
        return time.perf_counter() - t0
    proc = subprocess.Popen(tracer, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # "Attaching 1 probe..." comes just before attach (stdout for bpftrace, stderr for pycore)
        for line in proc.stdout:
            if line.startswith(b"Attaching"):
                break
        else:
            raise RuntimeError(f"{tracer[0]} ended before attaching")
        time.sleep(0.5)                 # let the attach finish
        t0 = time.perf_counter()
        subprocess.run(loop, check=True)
        return time.perf_counter() - t0
    finally:
        proc.send_signal(2)
        proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--events", type=int, default=500000)
    ap.add_argument("--only", choices=("startup", "overhead", "kfunc", "cmd", "floor", "dwarf", "flood"),
                    help="run one section")
    ap.add_argument("--pycore", metavar="PATH", help="the pycore command to measure, e.g. a wheel installed "
                    "in a venv of its own (default: this checkout's .venv/bin/pycore, an editable install)")
    args = ap.parse_args()
    bpftrace = shutil.which("bpftrace")
    if not bpftrace:
        print("bpftrace not found (apt-get install bpftrace): nothing to compare with", file=sys.stderr)
        return 1
    pycore = [args.pycore] if args.pycore else pycore_command()
    # byte-compiled first, as an installed package is (pip compiles at install): with this machine's
    # PYTHONDONTWRITEBYTECODE an edited editable install compiles every module again at every
    # start, which read 69 ms and 46 MiB for a 29 ms, 17 MiB start
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "pycore"), str(ROOT / "btf")],
                   check=True, stdout=subprocess.DEVNULL)

    # 1. start to attached, and the whole run; 3. the same for a kfunc wildcard
    startups = []
    if args.only in (None, "startup"):
        startups += [("start to attached", READY, to_ready), ("whole run", WHOLE, once)]
    if args.only in (None, "kfunc"):
        from pycore.kernel.features import Features

        if Features().fentry:
            startups += [("kfunc:vfs_* start to attached", WILD + ' BEGIN { printf("ready\\n"); }', to_ready),
                         ("kfunc:vfs_* whole run", WILD + " BEGIN { exit(); }", once)]
        else:
            print("kfunc:vfs_*: skipped, this kernel refuses fentry/fexit (run it in the kernel VMs)")
    warm_cache = tempfile.mkdtemp(prefix="bench-trace-cache-")
    for title, program, measure in startups:
        commands = {"pycore trace": pycore + ["trace", "-e", program],
                    "pycore, new": pycore + ["trace", "-e", program],
                    "pycore, cold": pycore + ["trace", "-e", program],
                    "bpftrace": [bpftrace, "-B", "none", "-e", program]}  # unbuffered, so ready shows at once
        results: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in commands}
        for i in range(args.runs + 1):
            for name, argv in commands.items():
                # "pycore trace": the bench's own cache directory, filled by the warm-up round (not
                # ~/.cache, which the kernel VMs mount read-only); "cold": an empty one each time
                cold = tempfile.mkdtemp(prefix="bench-trace-cold-") if name.endswith("cold") else None
                env = {**os.environ, "XDG_CACHE_HOME": cold or warm_cache} if name.startswith("pycore") else None
                if name.endswith("new"):   # a script edited since the last run: a comment it has not seen
                    argv = argv[:-1] + [f"{program} // {os.getpid()} {i} {time.time_ns()}"]
                try:
                    wall, rss = measure(argv, env)
                finally:
                    if cold:
                        shutil.rmtree(cold, ignore_errors=True)
                if i:
                    results[name][0].append(wall)
                    results[name][1].append(rss)
        print(f"{title}, {program!r} ({args.runs} runs each, alternating)")
        med = {}
        for name, (walls, rss) in results.items():
            med[name] = statistics.median(walls)
            print(f"  {name:<14} {med[name]:7.3f} s   peak {max(rss):6.1f} MiB")
        print(f"  ratio pycore/bpftrace: {med['pycore trace'] / med['bpftrace']:.2f}x"
              + (" (target <= 0.25x)" if program is READY else "")
              + f"; new script {med['pycore, new'] / med['bpftrace']:.2f}x"
              + f"; cold {med['pycore, cold'] / med['bpftrace']:.2f}x")

    shutil.rmtree(warm_cache, ignore_errors=True)

    if args.only in (None, "cmd"):
        cmd_run(bpftrace, pycore, args.runs)
    if args.only in (None, "dwarf"):
        dwarf_args(bpftrace, pycore, args.runs)
    # 2. per-event overhead
    if args.only in (None, "floor"):
        floor(bpftrace, pycore, args.runs)
    if args.only in (None, "flood"):
        flood(bpftrace, pycore, args.runs)
    if args.only not in (None, "overhead"):
        return 0
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d, "loop.c"), Path(d, "loop")
        src.write_text(LOOP_C)
        subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
        loop = [str(exe), str(args.events)]
        times: dict[str, list[float]] = {"bare": [], "bpftrace": [], "pycore": []}
        tracers = {"bare": None, "bpftrace": [bpftrace, "-e", COUNT], "pycore": pycore + ["trace", "-e", COUNT]}
        for i in range(max(3, args.runs // 2) + 1):
            for name, tracer in tracers.items():
                t = under(tracer, loop)
                if i:
                    times[name].append(t)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"per-event overhead, {args.events} openat/close pairs")
    for k, v in m.items():
        print(f"  {k:<9} {v:7.3f} s   ({(v - m['bare']) / args.events * 1e9:6.0f} ns/event over bare)")
    if m["bpftrace"] > m["bare"]:
        print(f"  (pycore - bare) / (bpftrace - bare): {(m['pycore'] - m['bare']) / (m['bpftrace'] - m['bare']):.2f} "
              "(target <= 1.2)")
    return 0


FLOOD = ('BEGIN { @cap[(uint64)21] = "CAP_SYS_ADMIN"; } tracepoint:syscalls:sys_enter_getppid /comm == "flood"/ '
         '{ $cap = (uint64)21; time("%H:%M:%S  "); printf("%-6d %-6d %-16s %-4d %-20s %d\\n", uid, pid, comm, $cap, '
         '@cap[$cap], 0); }')
FLOOD_C = r"""
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    for (long i = 0; i < n; i++) {
        getppid();
        if (i % 200 == 199) usleep(1000);
    }
    return 0;
}
"""


def flood_cpu(tracer: list[str], loop: list[str] | None) -> tuple[float, int]:
    """(the tracer's CPU seconds, its lines naming CAP_SYS_ADMIN) for one run: attached, ``loop`` run
    (or nothing: the idle baseline), a second to print, then SIGINT."""
    proc = subprocess.Popen(tracer, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in proc.stdout:
        if line.startswith(b"Attaching"):
            break
    else:
        raise RuntimeError(f"{tracer[0]} ended before attaching")
    got: list[int] = []

    def count() -> None:
        got.append(sum(1 for ln in proc.stdout if b"CAP_SYS_ADMIN" in ln))

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.5)
    if loop:
        subprocess.run(loop, check=True)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    counter.join(60)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, got[0] if got else 0


def flood(bpftrace: str, pycore: list[str], runs: int, events: int = 20000) -> None:
    """7. CPU per printed event of a printf flood, pycore against bpftrace, less each one's idle run."""
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d, "flood")
        subprocess.run(["gcc", "-O2", "-x", "c", "-o", str(exe), "-"], input=FLOOD_C.encode(), check=True)
        tracers = {"pycore": pycore + ["trace", "-B", "full", "-e", FLOOD], "bpftrace": [bpftrace, "-e", FLOOD]}
        cpu: dict[str, list[float]] = {f"{n} {w}": [] for n in tracers for w in ("idle", "flood")}
        printed: dict[str, list[int]] = {n: [] for n in tracers}
        for i in range(max(3, runs // 2) + 1):
            for name, tracer in tracers.items():
                idle, _ = flood_cpu(tracer, None)
                busy, n = flood_cpu(tracer, [str(exe), str(events)])
                if i:
                    cpu[f"{name} idle"].append(idle)
                    cpu[f"{name} flood"].append(busy)
                    printed[name].append(n)
    print(f"printf flood, {events} events (time() + printf of a map's string)")
    per = {}
    for name in tracers:
        idle, busy = statistics.median(cpu[f"{name} idle"]), statistics.median(cpu[f"{name} flood"])
        per[name] = (busy - idle) / max(1, statistics.median(printed[name]))
        print(f"  {name:<9} CPU idle {idle:6.3f} s, flood {busy:6.3f} s, printed {min(printed[name])}-"
              f"{max(printed[name])}: {per[name] * 1e6:6.1f} us/event")
    print(f"  ratio pycore/bpftrace per event: {per['pycore'] / per['bpftrace']:.2f}x")


DWARF_READY = ' BEGIN { printf("ready\\n"); }'
HANDLE = 'uprobe:libc:open_by_handle_at { printf("%d\\n", args->flags); }'
GAI = 'uprobe:libc:getaddrinfo { printf("%s\\n", str(args->name)); }'
GAI_REG = 'uprobe:libc:getaddrinfo { printf("%s\\n", str(arg0)); }'


def dwarf_args(bpftrace: str, pycore: list[str], runs: int) -> None:
    """6. Start to attached of scripts using a libc function's args (libc6-dbg's DWARF)."""
    # caches: "cold" all empty (the parse tree too), "dwarf" only the DWARF's, "warm" kept
    commands = {"pycore, first": (pycore + ["trace", "-e", HANDLE + DWARF_READY], "cold"),
                "pycore, first DWARF": (pycore + ["trace", "-e", HANDLE + DWARF_READY], "dwarf"),
                "pycore, cached": (pycore + ["trace", "-e", HANDLE + DWARF_READY], "warm"),
                "bpftrace": ([bpftrace, "-B", "none", "-e", HANDLE + DWARF_READY], "warm"),
                "pycore getaddrinfo args": (pycore + ["trace", "-e", GAI + DWARF_READY], "warm"),
                "pycore getaddrinfo arg0": (pycore + ["trace", "-e", GAI_REG + DWARF_READY], "warm"),
                "bpftrace getaddrinfo arg0": ([bpftrace, "-B", "none", "-e", GAI_REG + DWARF_READY], "warm")}
    warm = tempfile.mkdtemp(prefix="bench-dwarf-cache-")
    btf_only = tempfile.mkdtemp(prefix="bench-dwarf-btf-")      # the kernel BTF's index kept, no DWARF entry
    results: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in commands}
    try:
        for i in range(runs + 1):
            for name, (argv, caches) in commands.items():
                cold = caches == "cold"
                cache = tempfile.mkdtemp(prefix="bench-dwarf-cold-") if cold else btf_only if caches == "dwarf" else warm
                if caches == "dwarf":
                    shutil.rmtree(os.path.join(btf_only, "pycore", "dwarf"), ignore_errors=True)
                env = {**os.environ, "XDG_CACHE_HOME": cache} if name.startswith("pycore") else None
                try:
                    wall, rss = to_ready(argv, env)
                finally:
                    if cold:
                        shutil.rmtree(cache, ignore_errors=True)
                if i:
                    results[name][0].append(wall)
                    results[name][1].append(rss)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
        shutil.rmtree(btf_only, ignore_errors=True)
    print(f"args from DWARF (libc6-dbg), start to attached ({runs} runs each, alternating)")
    med = {}
    for name, (walls, rss) in results.items():
        med[name] = statistics.median(walls)
        print(f"  {name:<26} {med[name]:7.3f} s   peak {max(rss):6.1f} MiB")
    print(f"  ratio pycore/bpftrace, open_by_handle_at's args: cached {med['pycore, cached'] / med['bpftrace']:.2f}x, "
          f"first {med['pycore, first'] / med['bpftrace']:.2f}x (DWARF alone "
          f"{med['pycore, first DWARF'] / med['bpftrace']:.2f}x); getaddrinfo's args against bpftrace's arg0: "
          f"{med['pycore getaddrinfo args'] / med['bpftrace getaddrinfo arg0']:.2f}x (target <= 1.0x), against "
          f"pycore's arg0: {med['pycore getaddrinfo args'] / med['pycore getaddrinfo arg0']:.2f}x")


def cmd_run(bpftrace: str, pycore: list[str], runs: int) -> None:
    """4. The whole run of ``-c /usr/bin/true``, exec to exit, against bpftrace's."""
    python = str(Path(pycore[0]).with_name("python")) if pycore[0].endswith("/pycore") else sys.executable
    cmd = ["-c", "/usr/bin/true"]
    cache = tempfile.mkdtemp(prefix="bench-trace-cmd-")
    commands = {
        "bpftrace": [bpftrace, "-e", COUNT, *cmd],
        "pycore trace": pycore + ["trace", "-e", COUNT, *cmd],
        "pycore, BEGIN exit": pycore + ["trace", "-e", "BEGIN { exit(); }", *cmd],
        "python -c pass": [python, "-c", "pass"],
    }
    walls: dict[str, list[float]] = {n: [] for n in commands}
    for i in range(runs + 1):
        for name, argv in commands.items():
            wall, _ = once(argv, {**os.environ, "XDG_CACHE_HOME": cache})
            if i:
                walls[name].append(wall)
    shutil.rmtree(cache, ignore_errors=True)
    med = {n: statistics.median(w) for n, w in walls.items()}
    print(f"whole run, {COUNT!r} -c /usr/bin/true ({runs} runs each, alternating)")
    for name, m in med.items():
        print(f"  {name:<20} {m * 1000:6.1f} ms   {m / med['bpftrace']:5.2f}x bpftrace")
    print(f"  ratio pycore/bpftrace: {med['pycore trace'] / med['bpftrace']:.2f}x (target <= 0.4x)")


def floor(bpftrace: str, pycore: list[str], runs: int) -> None:
    """4. What the interpreter and the kernel alone cost, against bpftrace's start to attached."""
    import site

    python = str(Path(pycore[0]).with_name("python")) if pycore[0].endswith("/pycore") else sys.executable
    floor_py = str(ROOT / "bench" / "trace_floor.py")
    paths = [str(ROOT)] + site.getsitepackages()
    cache = tempfile.mkdtemp(prefix="bench-trace-floor-")
    commands = {
        "bpftrace": (to_ready, [bpftrace, "-B", "none", "-e", READY]),
        "pycore trace": (to_ready, pycore + ["trace", "-e", READY]),
        "python -c pass": (once, [python, "-c", "pass"]),
        "floor": (to_ready, [python, floor_py]),
        "floor, -S -E": (to_ready, [python, "-S", "-E", floor_py] + paths),
        "python -S -E -c pass": (once, [python, "-S", "-E", "-c", "pass"]),
    }
    walls: dict[str, list[float]] = {n: [] for n in commands}
    for i in range(runs + 1):
        for name, (measure, argv) in commands.items():
            wall, _ = measure(argv, {**os.environ, "XDG_CACHE_HOME": cache})
            if i:
                walls[name].append(wall)
    shutil.rmtree(cache, ignore_errors=True)
    med = {n: statistics.median(w) for n, w in walls.items()}
    print(f"floor: start to attached, {READY!r} ({runs} runs each, alternating)")
    for name, m in med.items():
        print(f"  {name:<22} {m * 1000:6.1f} ms   {m / med['bpftrace']:5.2f}x bpftrace")
    print(f"  0.25x bpftrace is {med['bpftrace'] * 250:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
