"""A switch-heavy loop for bench/bench_profile.py's off-CPU figures (python3.11).

The main thread writes a byte to a helper process and blocks reading its answer, as fast as it
can: two context switches a round, waits of a few microseconds.  SIGUSR1 starts counting afresh;
SIGTERM prints {"rate": rounds per second, "rounds": N} as JSON and exits.  "ready" on stderr.
"""

import json, os, signal, sys, time
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
if os.fork() == 0:
    os.close(a_w); os.close(b_r)
    while os.read(a_r, 1):
        os.write(b_w, b"!")
    os._exit(0)
os.close(a_r); os.close(b_w)
n = 0
t0 = time.perf_counter()
def usr1(*_):
    global n, t0
    n, t0 = 0, time.perf_counter()
def term(*_):
    print(json.dumps({"rate": n / (time.perf_counter() - t0), "rounds": n}), flush=True)
    os._exit(0)
signal.signal(signal.SIGUSR1, usr1)
signal.signal(signal.SIGTERM, term)
print("ready", file=sys.stderr, flush=True)
while True:
    os.write(a_w, b"?")
    os.read(b_r, 1)
    n += 1
