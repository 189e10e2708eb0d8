"""python -m tests.vm.exercise4_loop [--kernel 6.12] [--tcg multi|single] [--cpus N] [--tracer pycore|bpftrace] [--runs N]

Issue 29's experiment: the kernel lab's lock-contention exercise 4 (tests/test_stop_kernel.py), run
``--runs`` times in a row in one Debian kernel under QEMU, while 8 threads rename files in one
directory (they contend on its inode's rwsem, where ``trace_contention_begin`` sits). Each run
attaches the two ``lock:contention_*`` tracepoints, reads 200 lines and is stopped with SIGINT: every
attach and every detach patches the tracepoints' static branches (``text_poke_bp``: an int3 first,
then the rest, each step followed by a sync of every CPU) while the other vCPU runs through them.

A run that oopses panics the guest; the host counts it, keeps the console, boots again and goes on
from the next run, until ``--runs`` are done or ``--max-boots`` boots. The summary line says how
many runs ran, how many oopses, and in which run each was (its RIP line). Results go to
``build/vm/exercise4/MODE/``.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .harness import REPO, VENV_BIN, fetch, log, oopses, vng_command

# What the guest runs: stdlib only, started with the venv's python.
GUEST_LOOP = r'''
import os, selectors, signal, subprocess, sys, time
out, tracer, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
argv = {"pycore": [sys.argv[5], "trace", "-v", out + "/lock.bt", "0"],
        "bpftrace": ["/usr/bin/bpftrace", out + "/lock017.bt", "0"]}[tracer]
os.makedirs("/run/ex4", exist_ok=True)
subprocess.run(["mount", "-t", "tmpfs", "ex4", "/run/ex4"], check=True)
os.makedirs("/run/ex4/work")
load = subprocess.Popen(["nice", "-n", "19", out + "/renames", "/run/ex4/work"])
progress = open(out + "/progress", "a")
def note(line):
    progress.write(line + "\n"); progress.flush(); os.fsync(progress.fileno())
    with open("/dev/kmsg", "w") as k:      # beside the kernel's own lines in the console
        k.write(f"exercise4: {line}\n")
for i in range(first, last):
    note(f"start {i}")
    t0 = time.monotonic()
    err = open(out + f"/stderr.{i}", "w")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
    sel = selectors.DefaultSelector(); sel.register(p.stdout, selectors.EVENT_READ)
    lines = 0
    while lines < 200 and time.monotonic() - t0 < 120 and p.poll() is None:
        if sel.select(1):
            chunk = os.read(p.stdout.fileno(), 65536)
            lines += chunk.count(b"\n")
    time.sleep(0.3)
    note(f"sigint {i}")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    drain = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < drain:
        if sel.select(0.2):
            os.read(p.stdout.fileno(), 65536)
    if p.poll() is None:
        p.kill()
    p.wait()
    note(f"done {i} rc={p.returncode} lines={lines} exit_s={time.monotonic() - sent:.2f} "
         f"run_s={time.monotonic() - t0:.1f}")
load.kill()
note("finished")
'''

GUEST_SH = """\
#!/bin/sh
cut -d' ' -f1 /proc/uptime >{out}/started
cd {repo} || exit 1
{python} {out}/loop.py {out} {tracer} {first} {last} {pycore} >>{out}/loop.log 2>&1
echo $? >{out}/exitcode
"""


def build_renames(out: Path) -> None:
    from tests.test_stop_kernel import RENAMES_C   # the test's own workload, not a copy
    (out / "renames.c").write_text(RENAMES_C)
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(out / "renames"), str(out / "renames.c")], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.vm.exercise4_loop", description=__doc__.split("\n\n")[1])
    ap.add_argument("--kernel", default="6.12")
    ap.add_argument("--tcg", choices=["multi", "single"], default="multi")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--tracer", choices=["pycore", "bpftrace"], default="pycore")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--max-boots", type=int, default=10)
    ap.add_argument("--max-oops", type=int, default=10, help="stop after this many oopses")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per boot")
    args = ap.parse_args(argv)
    from tests.test_stop_kernel import EXERCISE4

    kernel = fetch(args.kernel)
    mode = f"{kernel.release}-{args.tracer}-tcg-{args.tcg}-{args.cpus}cpu"
    base = REPO / "build" / "vm" / "exercise4" / mode
    subprocess.run(["rm", "-rf", str(base)], check=True)
    base.mkdir(parents=True)
    done, found, boots, t_all = 0, [], 0, time.monotonic()
    while done < args.runs and boots < args.max_boots and len(found) < args.max_oops:
        boots += 1
        out = base / f"boot{boots}"
        out.mkdir()
        build_renames(out)
        (out / "lock.bt").write_text(EXERCISE4)
        (out / "lock017.bt").write_text(EXERCISE4.replace("args.", "args->"))
        (out / "loop.py").write_text(GUEST_LOOP)
        (out / "guest.sh").write_text(GUEST_SH.format(
            out=shlex.quote(str(out)), repo=shlex.quote(str(REPO)), python=VENV_BIN / "python",
            tracer=args.tracer, first=done, last=args.runs, pycore=VENV_BIN / "pycore"))
        cmd = vng_command(kernel, out, cpus=args.cpus, tcg=args.tcg)
        log(f"{mode}: boot {boots}, runs {done}..{args.runs - 1}")
        t0 = time.monotonic()
        with open(out / "console.log", "wb") as console:
            try:
                subprocess.run(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=console,
                               stderr=subprocess.STDOUT, timeout=args.timeout,
                               env={"PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin"})
            except subprocess.TimeoutExpired:
                log(f"{mode}: boot {boots} timed out after {args.timeout:.0f} s")
        progress = (out / "progress").read_text().splitlines() if (out / "progress").exists() else []
        ended = [line for line in progress if line.startswith("done ")]
        progress = [line for line in progress if not line.startswith("sigint ")]
        started = [line for line in progress if line.startswith("start ")]
        for line in ended:
            print(f"  {line}")
        console = (out / "console.log").read_text(errors="replace")
        for oops in oopses(console):
            during = started[-1] if len(started) > len(ended) else "(between runs)"
            found.append((boots, during, oops))
            log(f"{mode}: boot {boots}: {oops.splitlines()[0]} during {during}")
        log(f"{mode}: boot {boots}: {len(ended)} runs in {time.monotonic() - t0:.0f} s")
        if not ended and not found:
            log(f"{mode}: boot {boots} ran nothing; see {out}/console.log")
            break
        done += len(ended) + (1 if len(started) > len(ended) else 0)   # the run that oopsed counts
    summary = (f"{mode}: {done} runs in {boots} boots, {len(found)} oops(es), "
               f"{time.monotonic() - t_all:.0f} s")
    print(summary)
    for boot, during, oops in found:
        rip = next((line for line in oops.splitlines() if "RIP:" in line), "")
        print(f"  boot {boot}, {during}: {oops.splitlines()[0].strip()} | {rip.strip()}")
    (base / "summary.txt").write_text(summary + "\n" + "".join(
        f"boot {b}, {d}:\n{o}\n" for b, d, o in found))
    return 0 if not found and done >= args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
