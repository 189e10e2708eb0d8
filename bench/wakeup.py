"""Wake-up latency from a BPF event to the consumer, and the CPU of an idle agent (issue 24).

    .venv/bin/python bench/wakeup.py [--events 2000] [--interval-ms 1] [--reps 3] [--idle-seconds 10]

Latency: bpf_src/bench_ringbuf.bpf.c stamps each record with bpf_ktime_get_ns() (CLOCK_MONOTONIC) when
a paced producer process calls getpid() (one record a call, one call every --interval-ms); each
consumer takes CLOCK_MONOTONIC when the record reaches its code and keeps the difference:

  C        libbpf ring_buffer__poll, its callback (bench/ringbuf_consumer.c latency), in its own process
  events   for ev in rb.events(): pycore.native.ringbuf, as ToolSession.events() hands them out
  run      rb.run(callback): the callback loop (ToolSession.run / TraceSession.run)
  async    async for ev in rb: the event loop's reader on the ring's epoll fd
  trace    for ev in pycore.trace(...).events(): a script's printf of nsecs, decoded into Events
  floor, floor-async, floor-task
           no pycore code at all: the ring mmapped by the bench, a wake-up from select.epoll's poll()
           (floor), asyncio's add_reader callback (floor-async) or a task awaiting a Future that
           callback sets (floor-task) reads each record's ts and moves the consumer position: the
           least a Python consumer does, so the floor under events()/run() and under async for
           (a task too) on this machine

Consumers are interleaved over --reps repetitions (a fresh object and producer each); the table shows
the medians of each repetition's p50 and p99, and p99 as a ratio of C's (target: <= 2), then the range of
the repetitions' own p99 / C (each against C's run of the same repetition) and the load average: the
machine's other work moves a p99 far more than the consumers differ.

Idle CPU: 10 sessions open (5 pycore.trace() scripts, 5 open_tool("fget-crack") sessions) on probes
that do not fire for them, each with a consumer blocked in events(), run() or async for; the
process's CPU time (getrusage) over --idle-seconds, as a share of one core (target: < 0.1 %).
The bench measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ringbuf import build_consumer, load  # noqa: E402  (bench/ringbuf.py: the producer object and C consumer)

PY = sys.executable

PACED = """
import os, sys, time
n, interval = int(sys.argv[1]), float(sys.argv[2])
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
for _ in range(n):
    os.getpid()
    time.sleep(interval)
"""


class Paced:
    """A process calling getpid() ``n`` times, ``interval`` s apart, once started."""

    def __init__(self, n: int, interval: float) -> None:
        self.proc = subprocess.Popen([PY, "-c", PACED, str(n), str(interval)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def start(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def pct(values: list[int], p: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def run_c(binary: str, n: int, interval: float) -> tuple[int, int]:
    from btf.kinds import Kind

    prod = Paced(n, interval)
    obj = load(prod.pid, 1, 1 << 20)
    try:
        ring = obj.maps["events"].fd
        bss = next(m for m in obj.maps.values() if m.internal and m.name.endswith(".bss"))
        spec = obj.btf
        off = next(v.offset for sid in spec.ids_named(".bss", (Kind.DATASEC,))
                   for v in spec.type(sid).vars if spec.name(v.type_id) == "pycore_dropped")
        p = subprocess.Popen([binary, str(ring), str(bss.fd), str(bss.value_size), str(off), str(n), "latency"],
                             pass_fds=(ring, bss.fd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        p.stdin.write("go\n")
        p.stdin.close()
        prod.start()
        lines = p.stdout.read().splitlines()
        if p.wait() != 0:
            raise SystemExit("ringbuf_consumer latency failed")
        p50, p99 = (int(x) for x in lines[1].split())
        return p50, p99
    finally:
        prod.wait()
        obj.close()


def run_py(mode: str, n: int, interval: float) -> tuple[int, int]:
    from pycore.native.ringbuf import RingBuffer

    prod = Paced(n, interval)
    obj = load(prod.pid, 1, 1 << 20)
    lat: list[int] = []
    now = time.monotonic_ns
    try:
        rb = RingBuffer(obj, "events")
        prod.start()
        if mode == "events":
            for ev in rb.events(timeout=5):
                lat.append(now() - ev.ts)
                if len(lat) >= n:
                    break
        elif mode == "run":
            def cb(ev) -> None:  # noqa: ANN001
                lat.append(now() - ev.ts)
                if len(lat) >= n:
                    rb.close()
            rb.run(cb)
        else:
            async def consume() -> None:
                async for ev in rb:
                    lat.append(now() - ev.ts)
                    if len(lat) >= n:
                        break
            asyncio.run(consume())
        rb.close()
    finally:
        prod.wait()
        obj.close()
    return pct(lat, 0.5), pct(lat, 0.99)


def run_floor(mode: str, n: int, interval: float) -> tuple[int, int]:
    """The least any Python consumer can do on a wake-up: no pycore code between the kernel and the
    timestamp. The ring is mmapped here as the kernel lays it out; a wake-up reads the positions, takes
    each record's ts (struct bench_event's second u64) and moves the consumer position.
    ``floor``: select.epoll's poll() in a loop (what events() and run() wait in);
    ``floor-async``: asyncio's add_reader callback (what async for's reader runs in, before the task);
    ``floor-task``: a task awaiting a Future the reader callback sets, then reading: the floor of any
    consumer written as an asyncio task (async for resumes its task inside the reader instead)."""
    import mmap
    import select
    import struct

    size = 1 << 20
    prod = Paced(n, interval)
    obj = load(prod.pid, 1, size)
    lat: list[int] = []
    now = time.monotonic_ns
    fd = obj.maps["events"].fd
    page = mmap.PAGESIZE
    cons = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
    data = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
    u64, u32 = struct.Struct("<Q"), struct.Struct("<I")

    def drain() -> None:
        c, p = u64.unpack_from(cons)[0], u64.unpack_from(data)[0]
        while c < p:
            off = page + (c & (size - 1))
            length = u32.unpack_from(data, off)[0]
            if length & (1 << 31):        # busy: not committed yet
                break
            lat.append(now() - u64.unpack_from(data, off + 16)[0])
            c += (8 + (length & 0x3FFFFFFF) + 7) & ~7
        u64.pack_into(cons, 0, c)

    try:
        prod.start()
        if mode == "floor":
            ep = select.epoll()
            ep.register(fd, select.EPOLLIN)
            while len(lat) < n:
                if ep.poll(5):
                    drain()
            ep.close()
        elif mode == "floor-task":
            async def consume() -> None:
                loop = asyncio.get_running_loop()
                waiting: list = [None]

                def ready() -> None:
                    fut = waiting[0]
                    if fut is not None and not fut.done():
                        fut.set_result(None)
                loop.add_reader(fd, ready)
                while len(lat) < n:
                    if u64.unpack_from(cons)[0] == u64.unpack_from(data)[0]:
                        waiting[0] = loop.create_future()
                        await asyncio.wait_for(waiting[0], 60)
                        waiting[0] = None
                    drain()
                loop.remove_reader(fd)
            asyncio.run(consume())
        else:
            async def consume() -> None:
                loop = asyncio.get_running_loop()
                done = loop.create_future()

                def ready() -> None:
                    drain()
                    if len(lat) >= n and not done.done():
                        done.set_result(None)
                loop.add_reader(fd, ready)
                await asyncio.wait_for(done, 60)
                loop.remove_reader(fd)
            asyncio.run(consume())
    finally:
        cons.close()
        data.close()
        prod.wait()
        obj.close()
    return pct(lat, 0.5), pct(lat, 0.99)


def run_trace(n: int, interval: float) -> tuple[int, int]:
    import pycore

    prod = Paced(n, interval)
    lat: list[int] = []
    now = time.monotonic_ns
    s = pycore.trace(f'tracepoint:syscalls:sys_enter_getpid /pid == {prod.pid}/ {{ printf("%llu\\n", nsecs); }}')
    try:
        prod.start()
        for ev in s.events(timeout=5):
            lat.append(now() - int(ev.text))
            if len(lat) >= n:
                break
    finally:
        s.close()
        prod.wait()
    return pct(lat, 0.5), pct(lat, 0.99)


def idle_cpu(seconds: float) -> tuple[float, int]:
    """Share of one core this process used with 10 sessions open and waiting, and how many threads."""
    import pycore

    me = os.getpid()
    sessions: list = [pycore.trace(f"tracepoint:syscalls:sys_enter_getppid /pid == {me}/ {{ printf(\"x\\n\"); }}")
                      for _ in range(5)]
    sessions += [pycore.open_tool("fget-crack", pid=me, pattern="never-opened-zq") for _ in range(5)]
    threads = []
    for i, s in enumerate(sessions[:4] + sessions[5:9]):
        target = (lambda s=s: list(s.events(timeout=None))) if i % 2 else (lambda s=s: s.run(lambda ev: None))
        threads.append(threading.Thread(target=target, daemon=True))

    async def both() -> None:
        async def drain(s) -> None:  # noqa: ANN001
            async for _ in s:
                pass
        await asyncio.gather(drain(sessions[4]), drain(sessions[9]))

    threads.append(threading.Thread(target=lambda: asyncio.run(both()), daemon=True))
    for t in threads:
        t.start()
    time.sleep(1.0)  # everyone waiting
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    time.sleep(seconds)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    for s in sessions:
        s.close()
    for t in threads:
        t.join(2)
    alive = sum(t.is_alive() for t in threads)
    return cpu / (t1 - t0), alive


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2000, help="events per consumer run")
    ap.add_argument("--interval-ms", type=float, default=1.0, help="time between two events")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--only", default="C,floor,events,run,floor-async,floor-task,async,trace,idle")
    args = ap.parse_args()
    only = args.only.split(",")
    interval = args.interval_ms / 1000
    results: dict[str, list[tuple[int, int]]] = {}
    start_load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_consumer(tmp) if "C" in only else ""
        for _ in range(args.reps):
            for mode in ("C", "floor", "events", "run", "floor-async", "floor-task", "async", "trace"):
                if mode not in only:
                    continue
                if mode == "C":
                    r = run_c(binary, args.events, interval)
                elif mode == "trace":
                    r = run_trace(args.events, interval)
                elif mode.startswith("floor"):
                    r = run_floor(mode, args.events, interval)
                else:
                    r = run_py(mode, args.events, interval)
                results.setdefault(mode, []).append(r)
    if results:
        print(f"wake-up latency, BPF event -> consumer ({args.events} events, one per {args.interval_ms} ms, "
              f"median of {args.reps} runs)")
        c99 = statistics.median(r[1] for r in results["C"]) if "C" in results else None
        print(f"{'consumer':10s} {'p50 us':>8s} {'p99 us':>8s} {'p99 / C':>8s}  {'each run':>11s}")
        for mode, rs in results.items():
            p50 = statistics.median(r[0] for r in rs) / 1000
            p99 = statistics.median(r[1] for r in rs) / 1000
            ratio = f"{p99 * 1000 / c99:8.2f}" if c99 else ""
            # each repetition's p99 against C's of the same repetition: on a shared machine one
            # neighbour's burst moves a p99 several fold, which the median alone hides
            each = sorted(r[1] / c[1] for r, c in zip(rs, results["C"])) if c99 else []
            span = f"  {each[0]:.2f}-{each[-1]:.2f}" if each else ""
            print(f"{mode:10s} {p50:8.1f} {p99:8.1f} {ratio}{span}")
        print(f"load average {start_load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end "
              f"({os.cpu_count()} CPUs)")
    if "idle" in only:
        share, alive = idle_cpu(args.idle_seconds)
        print(f"idle agent, 10 sessions waiting: {share * 100:.4f} % of a core over {args.idle_seconds:g} s "
              f"(consumers still alive after close: {alive})")


if __name__ == "__main__":
    main()
