"""A waiting workload with a known split, for pycore profile --off-cpu's tests and bench/bench_profile.py.

Run with python3.11: ``python3.11 tests/offcpu_workload.py [SECONDS]``.  In
rounds, the main thread waits in two functions and does almost nothing else:

- ``sleeper``: time.sleep(SLEEP) (clock_nanosleep in the kernel);
- ``reader``: asks a helper process for a byte and blocks in os.read on a
  pipe until it comes (the helper sleeps PIPE_WAIT first; it is another
  process, so a profile of this one does not see its own waits).

Each function's wall time and CPU time are measured by the workload itself
(``time.perf_counter()`` and ``time.thread_time()``); a function's off-CPU
time is the difference.  On SIGTERM (or after SECONDS) it prints, as JSON on
stdout, each function's off-CPU seconds (``off``), the whole loop's off-CPU
seconds (``total``) and the rounds done; on SIGUSR2, the same so far, and it
goes on.  SIGUSR1 starts the measurement afresh (SECONDS count from then).
"ready" on stderr when it runs.
"""

import json
import os
import signal
import sys
import time

SLEEP = 0.006
PIPE_WAIT = 0.004
FUNCS = ("sleeper", "reader")

off = dict.fromkeys(FUNCS, 0.0)
stop = False
restart = False
start = [0.0, 0.0, 0]          # wall and CPU time at the measurement's start, rounds since


def sleeper():
    time.sleep(SLEEP)


def reader(ask, answer):
    os.write(ask, b"?")
    return os.read(answer, 1)


def helper(ask, answer):
    """The other end of reader's pipe: a byte back PIPE_WAIT after each request."""
    while os.read(ask, 1):
        time.sleep(PIPE_WAIT)
        os.write(answer, b"!")
    os._exit(0)


def timed(name, func, *args):
    w, c = time.perf_counter(), time.thread_time()
    func(*args)
    off[name] += (time.perf_counter() - w) - (time.thread_time() - c)


def on_term(signum, frame):
    global stop
    stop = True


def on_usr1(signum, frame):
    global restart
    restart = True


def report():
    total = (time.perf_counter() - start[0]) - (time.thread_time() - start[1])
    print(json.dumps({"off": off, "total": total, "rounds": start[2]}), flush=True)


def on_usr2(signum, frame):
    report()


def main():
    global restart
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    ask_r, ask_w = os.pipe()
    ans_r, ans_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ask_w)
        os.close(ans_r)
        helper(ask_r, ans_w)
    os.close(ask_r)
    os.close(ans_w)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGUSR2, on_usr2)
    print("ready", file=sys.stderr, flush=True)
    restart = True
    while not stop:
        if restart:
            restart = False
            off.update(dict.fromkeys(FUNCS, 0.0))
            start[:] = time.perf_counter(), time.thread_time(), 0
            end = start[0] + seconds
        if time.perf_counter() >= end:
            break
        timed("sleeper", sleeper)
        timed("reader", reader, ask_w, ans_r)
        start[2] += 1
    report()
    os.close(ask_w)
    os.waitpid(child, 0)


if __name__ == "__main__":
    main()
