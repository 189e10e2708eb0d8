"""A CPU-bound workload with a known split, for pycore profile's tests and bench/bench_profile.py.

Run with python3.11: ``python3.11 tests/profile_workload.py [SECONDS]``.  In
rounds of about ``ROUND`` seconds of this thread's CPU time, each function below
burns its share of the round, timed by the workload itself with
``time.thread_time()`` (CPU time, so a busy machine that takes the CPU away
does not move the split).  SIGUSR1 starts the measurement
afresh (SECONDS count from then).  On SIGTERM (or after SECONDS) it prints, as JSON
on stdout, the CPU seconds each function really took and the work it did
(``ops``: busy-loop iterations; the benchmark compares them with and
without a profiler), and exits; on SIGUSR2 it prints the same line and goes on
(a profiler can then name its frames from a live process).

- ``spin``: a pure Python busy loop;
- ``deep``: recursion 220 frames down, then the same busy loop at the bottom;
- ``digest``: hashlib's SHA-256 over 256 KiB (C, the GIL released);
- ``reads``: os.read of /dev/zero (the time in the kernel, GIL released).

Each round's length is drawn from 10 to 30 ms and its functions run in a
shuffled order: a fixed round in a fixed order is periodic, and a round that
took two sampling periods of 99 Hz (20.2 ms: 20 ms plus the last digest's
overrun) put every sample in the same two functions, spin and digest at 48%
each in go tool pprof and the other two at 1.4% (a whole test run; the
sampler was right, the workload aliased with it).
"""

import hashlib
import json
import os
import random
import signal
import sys
import time

SHARES = {"spin": 0.30, "deep": 0.25, "digest": 0.20, "reads": 0.25}
ROUND = 0.02                    # seconds of CPU time a round, on average
DEPTH = 220

clock = time.thread_time
used = dict.fromkeys(SHARES, 0.0)
ops = dict.fromkeys(SHARES, 0)
stop = False
report = False


def spin(budget):
    end = clock() + budget
    n = 0
    while clock() < end:
        for _ in range(200):
            n += 1
    return n


def deep(budget, depth=DEPTH):
    if depth > 1:
        return deep(budget, depth - 1)
    return spin_at_bottom(budget)


def spin_at_bottom(budget):
    end = clock() + budget
    n = 0
    while clock() < end:
        for _ in range(200):
            n += 1
    return n


DATA = os.urandom(256 * 1024)


def digest(budget):
    end = clock() + budget
    n = 0
    while clock() < end:
        hashlib.sha256(DATA).digest()
        n += 1
    return n


ZERO = os.open("/dev/zero", os.O_RDONLY)


def reads(budget):
    end = clock() + budget
    n = 0
    while clock() < end:
        os.read(ZERO, 1 << 20)
        n += 1
    return n


FUNCS = {"spin": spin, "deep": deep, "digest": digest, "reads": reads}


def on_term(signum, frame):
    global stop
    stop = True


def on_usr2(signum, frame):
    global report
    report = True


def on_usr1(signum, frame):
    """Measure from now on (bench/bench_profile.py: once the profiler is running)."""
    global start, cpu0
    start, cpu0 = time.monotonic(), clock()
    for name in SHARES:
        used[name], ops[name] = 0.0, 0


def main():
    global start, cpu0, report
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGUSR2, on_usr2)
    limit = float(sys.argv[1]) if len(sys.argv) > 1 else None
    start, cpu0 = time.monotonic(), clock()
    print("ready", flush=True, file=sys.stderr)
    order = list(SHARES)
    while not stop and (limit is None or time.monotonic() - start < limit):
        length = ROUND * random.uniform(0.5, 1.5)
        random.shuffle(order)
        for name in order:
            t0 = clock()
            ops[name] += FUNCS[name](SHARES[name] * length)
            # from the measurement's start when SIGUSR1 came during the call: the call's time before
            # it is not the window's (a 6.1 VM run read deep 41.8%, the four shares summing to 118%:
            # that one call held 18 points of the window's CPU time before it began, the thread
            # charged with kernel work while pycore attached, as Debian's kernels charge interrupts)
            used[name] += clock() - max(t0, cpu0)
        if report:
            report = False
            print_report()
    print_report()


def print_report():
    print(json.dumps({"used": used, "ops": ops, "cpu": clock() - cpu0,
                      "wall": time.monotonic() - start}), flush=True)


if __name__ == "__main__":
    main()
