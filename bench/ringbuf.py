"""Ring buffer consumers compared on one producer load, plus start-up time and RSS.

    .venv/bin/python bench/ringbuf.py [--events 16000000] [--per-call 256] [--reps 3]

The producer is bpf_src/bench_ringbuf.bpf.c: every getpid() of a producer
process emits --per-call 32-byte events.  For each consumer a fresh producer
process makes the same number of calls while the consumer runs in this
process (or, for (a) and (e), in a C process sharing the map fds):

  (a) C: libbpf ring_buffer__poll, callback counts (bench/ringbuf_consumer.c)
  (b) naive Python: ctypes ring_buffer__poll, callback, struct.unpack, dataclass
  (c) pycore.native.ringbuf into dataclasses (RingBuffer.consume)
  (d) pycore.native.ringbuf columnar (RingBuffer.read_batch, numpy)
  (e) C: libbpf ring_buffer__poll, callback copies each record's fields into
      the next element of a preallocated array of structs: what (d) does,
      so (d)/(e) is the fair ratio for the columnar path ((a) decodes nothing)

By default the producer first fills a 64 MiB ring with no consumer reading,
and each consumer is timed draining it: its capacity, with no producer
competing for the two CPUs and no wake-ups.  With --live the consumer runs
while the producer does; a consumer slower than the producer then loses
events (counted in pycore_dropped) and its rate is events consumed per
second until consumed + lost reaches the number produced, while a consumer
faster than the producer measures the producer (a caught-up consumer also
makes every submit send a wake-up, which slows the producer).
Consumers are interleaved over --reps repetitions; the table shows medians.
(d)'s first repetition in the process is the slow one (min of its range):
its array lands on memory the process never touched, and first-touch page
faults cost more than the copy on the VMs measured (50 MB: ~100 ms); later
arrays reuse freed memory, as in a consumer that runs for a while.  (e)
touches its array before the clock starts.
The bench measures and prints; it asserts nothing (targets in the issues:
(c) >= 2.5 x (b), (d) >= 40 % of (e), start < 60 ms, RSS < 40 MB), except that
(e)'s array must hold what the producer wrote (a checksum of seq and value).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import weakref

ROOT = pathlib.Path(__file__).resolve().parent.parent
PY = sys.executable

PRODUCER = """
import os, sys
n = int(sys.argv[1])
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
getpid = os.getpid
for _ in range(n):
    getpid()
"""


class Producer:
    """A process that calls getpid() ``calls`` times once started."""

    def __init__(self, calls: int) -> None:
        self.proc = subprocess.Popen([PY, "-c", PRODUCER, str(calls)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def start(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def load(pid: int, per_call: int, ring_size: int):
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path

    obj = BpfObject(object_path("bench_ringbuf"))
    obj.globals["target_tgid"] = pid
    obj.globals["events_per_call"] = per_call
    obj.maps["events"].max_entries = ring_size
    obj.load()
    obj.attach()
    return obj


_globals: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def dropped(obj) -> int:
    """pycore_dropped, live (obj.globals parses the ELF: build it once per object)."""
    g = _globals.get(obj)
    if g is None:
        g = _globals[obj] = obj.globals
    return int(g["pycore_dropped"])


# -- consumers: each returns (consumed, seconds from producer start to last event) ----


def run_c(obj, expected: int, prod: Producer, binary: str, mode: str = "count") -> tuple[int, float, int]:
    """(consumed, seconds, checksum of the decoded seq + value fields; 0 when counting)."""
    from btf.kinds import Kind

    ring = obj.maps["events"].fd
    bss = next(m for m in obj.maps.values() if m.internal and m.name.endswith(".bss"))
    spec = obj.btf
    off = next(v.offset for sid in spec.ids_named(".bss", (Kind.DATASEC,))
               for v in spec.type(sid).vars if spec.name(v.type_id) == "pycore_dropped")
    p = subprocess.Popen([binary, str(ring), str(bss.fd), str(bss.value_size), str(off), str(expected), mode],
                         pass_fds=(ring, bss.fd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    if prod is not None:
        prod.start()
    p.stdin.write("go\n")
    p.stdin.close()
    out = p.stdout.read().split()
    if p.wait() != 0:
        raise SystemExit(f"ringbuf_consumer {mode} failed (exit {p.returncode})")
    start = t0 if prod is not None else float(out[1])  # a drain is timed from its first poll, as (b)..(d) are
    return int(out[0]), float(out[2]) - start, int(out[3])


def run_naive(obj, expected: int, prod: Producer) -> tuple[int, float]:
    """What one writes without pycore: ctypes, a Python callback per event, struct.unpack."""
    import ctypes
    import struct
    from dataclasses import dataclass

    @dataclass
    class BenchEvent:
        seq: int
        ts: int
        pid: int
        cpu: int
        value: int

    lib = ctypes.CDLL("libbpf.so.1")
    cb_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    lib.ring_buffer__new.restype = ctypes.c_void_p
    lib.ring_buffer__new.argtypes = [ctypes.c_int, cb_type, ctypes.c_void_p, ctypes.c_void_p]
    lib.ring_buffer__poll.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ring_buffer__free.argtypes = [ctypes.c_void_p]
    unpack = struct.Struct("<QQIIQ").unpack
    state = {"n": 0}
    sink = []

    def on_event(ctx, data, size):
        ev = BenchEvent(*unpack(ctypes.string_at(data, size)))
        sink.append(ev)
        if len(sink) > 4096:
            state["n"] += len(sink)
            sink.clear()
        return 0

    cb = cb_type(on_event)
    rb = lib.ring_buffer__new(obj.maps["events"].fd, cb, None, None)
    t0 = last = time.monotonic()
    if prod is not None:
        prod.start()
    n = 0
    while n + dropped(obj) < expected:
        if lib.ring_buffer__poll(rb, 100) > 0:
            last = time.monotonic()
        n = state["n"] + len(sink)
    lib.ring_buffer__free(rb)
    return n, last - t0


def run_pycore(obj, expected: int, prod: Producer) -> tuple[int, float]:
    from pycore.native.ringbuf import RingBuffer

    with RingBuffer(obj, "events") as rb:
        # (the codec and its dataclass were built with the RingBuffer: no warm-up that consumes)
        t0 = last = time.monotonic()
        if prod is not None:
            prod.start()
        while rb.consumed + dropped(obj) < expected:
            events = rb.consume()
            if events:
                last = time.monotonic()
            else:
                rb.wait(0.1)
        return rb.consumed, last - t0


def run_numpy(obj, expected: int, prod: Producer) -> tuple[int, float]:
    from pycore.native.ringbuf import RingBuffer

    with RingBuffer(obj, "events") as rb:
        rb.codec.numpy_dtype()  # warm-up without consuming: numpy import and dtype
        t0 = last = time.monotonic()
        if prod is not None:
            prod.start()
        while rb.consumed + dropped(obj) < expected:
            arr = rb.read_batch()
            if len(arr):
                last = time.monotonic()
            else:
                rb.wait(0.1)
        return rb.consumed, last - t0


# -- start-up and RSS ---------------------------------------------------------------

STARTUP = """
import os
import pycore
from pycore.native.object import BpfObject
from pycore.native.shipped import object_path
obj = BpfObject(object_path("test_ringbuf"))
obj.globals["target_tgid"] = os.getpid()
obj.load()
obj.attach()
print("attached", flush=True)
"""

RSS = """
import os, time
from pycore.native.object import BpfObject
from pycore.native.shipped import object_path
from pycore.native.ringbuf import RingBuffer
obj = BpfObject(object_path("bench_ringbuf"))
obj.globals["target_tgid"] = os.getpid()
obj.globals["events_per_call"] = 64
obj.maps["events"].max_entries = 1 << 20
obj.load(); obj.attach()
n = 0
with RingBuffer(obj, "events") as rb:
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        for _ in range(100):
            os.getpid()
        n += len(rb.consume())
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
print(n, status["VmHWM"].split()[0], status["VmRSS"].split()[0])
"""


def startup_times(runs: int) -> list[float]:
    """Process start to "attached" (the exit that follows detaches, which waits
    for an RCU grace period in the kernel; that is not start-up)."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen([PY, "-c", STARTUP], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "attached"
        out.append(time.perf_counter() - t0)
        p.wait()
    return out


def baseline_times(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        out.append(time.perf_counter() - t0)
    return out


def rss_kib() -> tuple[int, int, int]:
    out = subprocess.run([PY, "-c", RSS], check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]), int(out[2])


def build_consumer(tmp: str) -> str:
    binary = os.path.join(tmp, "ringbuf_consumer")
    subprocess.run(["gcc", "-O2", "-Wall", "-o", binary, str(ROOT / "bench" / "ringbuf_consumer.c"), "-lbpf"],
                   check=True)
    return binary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=16_000_000, help="events produced per consumer run")
    ap.add_argument("--per-call", type=int, default=256, help="events per getpid() (1..256)")
    ap.add_argument("--ring-size", type=int, default=8 << 20, help="ring buffer bytes (power of 2)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--startup-runs", type=int, default=7)
    ap.add_argument("--only", default="abcde", help="consumers to run (subset of abcde)")
    ap.add_argument("--live", action="store_true",
                    help="consume while the producer runs (measures the lossy steady state; a consumer "
                         "faster than the producer then measures the producer) instead of draining a "
                         "ring filled beforehand (consumer capacity; the default)")
    args = ap.parse_args()

    try:
        import numpy  # noqa: F401
        have_numpy = True
    except ImportError:
        have_numpy = False
        print("numpy missing: (d) skipped (.venv/bin/pip install numpy)", file=sys.stderr)

    if not args.live:
        # Drain: fill a ring that holds everything, then time only the consumer.
        ring = 1 << 26  # 64 MiB holds 1.67 M records of 40 bytes
        args.ring_size = max(args.ring_size, ring)
        args.events = min(args.events, (args.ring_size // 40) * 15 // 16)
    calls = max(1, args.events // args.per_call)
    expected = calls * args.per_call
    # seq runs 0..expected-1, value 0..per_call-1 within each call's burst
    want_checksum = expected * (expected - 1) // 2 + calls * args.per_call * (args.per_call - 1) // 2
    names = {"a": "(a) C libbpf ring_buffer__poll, count", "b": "(b) naive ctypes + struct.unpack + dataclass",
             "c": "(c) pycore RingBuffer -> dataclasses", "d": "(d) pycore RingBuffer.read_batch (numpy)",
             "e": "(e) C libbpf ring_buffer__poll, decode to structs"}
    modes = [m for m in args.only if m in names and (m != "d" or have_numpy)]
    rates: dict[str, list[float]] = {m: [] for m in modes}
    losses: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_consumer(tmp) if "a" in modes or "e" in modes else ""
        for rep in range(args.reps):
            for m in modes:
                prod = Producer(calls)
                obj = load(prod.pid, args.per_call, args.ring_size)
                if not args.live:
                    prod.start()
                    prod.wait()  # the ring now holds `expected` records
                    assert dropped(obj) == 0, "ring too small to hold the fill"
                try:
                    live = prod if args.live else None
                    if m in "ae":
                        n, secs, checksum = run_c(obj, expected, live, binary, "count" if m == "a" else "decode")
                        if m == "e" and n == expected and checksum != want_checksum:
                            raise SystemExit(f"(e) decoded wrong records: checksum {checksum} != {want_checksum}")
                    elif m == "b":
                        n, secs = run_naive(obj, expected, live)
                    elif m == "c":
                        n, secs = run_pycore(obj, expected, live)
                    else:
                        n, secs = run_numpy(obj, expected, live)
                    lost = dropped(obj)
                finally:
                    if args.live:
                        prod.wait()
                    obj.close()
                rate = n / secs if secs > 0 else float("nan")
                rates[m].append(rate)
                losses[m].append(lost / expected)
                print(f"rep {rep + 1} {m}: {n:>10,} events in {secs:.3f} s = {rate / 1e6:7.2f} M/s, "
                      f"lost {lost:,}", file=sys.stderr)

    med = {m: statistics.median(v) for m, v in rates.items()}
    how = "consumed while produced" if args.live else "drained from a ring filled beforehand"
    print(f"\nring buffer consumers, {how}: {expected:,} events x {args.reps} reps, {args.per_call} x 32-byte "
          f"events per getpid(), ring {args.ring_size >> 10} KiB, {os.cpu_count()} CPUs (medians)")
    print(f"{'consumer':48} {'M events/s':>11} {'min..max':>15} {'lost':>7}")
    for m in modes:
        print(f"{names[m]:48} {med[m] / 1e6:11.2f} {min(rates[m]) / 1e6:7.2f}..{max(rates[m]) / 1e6:<7.2f}"
              f" {statistics.median(losses[m]):7.1%}")
    if "b" in med and "c" in med:
        print(f"{'(c)/(b)  (target >= 2.5)':48} {med['c'] / med['b']:11.2f}")
    if "e" in med and "d" in med:
        print(f"{'(d)/(e)  (target >= 0.40)':48} {med['d'] / med['e']:11.2f}")
    if "a" in med and "d" in med:
        print(f"{'(d)/(a)  (counting only, for reference)':48} {med['d'] / med['a']:11.2f}")
    if "a" in med and "e" in med:
        print(f"{'(e)/(a)  (what decoding costs C)':48} {med['e'] / med['a']:11.2f}")

    base = baseline_times(args.startup_runs)
    start = startup_times(args.startup_runs)
    n, hwm, rss = rss_kib()
    print(f"\n{'whole process':48} {'median':>11} {'min..max':>15}")
    print(f"{'python -c pass':48} {statistics.median(base) * 1e3:9.1f} ms "
          f"{min(base) * 1e3:6.1f}..{max(base) * 1e3:.1f}")
    print(f"{'import pycore + open/load/attach (to attached)':48} {statistics.median(start) * 1e3:9.1f} ms "
          f"{min(start) * 1e3:6.1f}..{max(start) * 1e3:.1f}   (target < 60 ms)")
    print(f"{'RSS consuming one ring buffer (1 MiB) for 1 s':48} {hwm / 1024:9.1f} MB peak, {rss / 1024:.1f} MB "
          f"at the end, {n:,} events   (target < 40 MB)")


if __name__ == "__main__":
    main()
