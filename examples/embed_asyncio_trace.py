"""A bpftrace program inside an asyncio agent: pycore.trace, ``async for`` over its events, a
latency histogram read live with its bucket bounds.  Typed: ``mypy --strict`` checks it
(tests/test_agent_api.py runs mypy on it, and on a copy with a field misspelt).

Times this process's nanosleep() calls, prints each printf event as it comes, then the
histogram's rows as numbers.  Run as root: .venv/bin/python examples/embed_asyncio_trace.py
"""

from __future__ import annotations

import asyncio
import os

import pycore

PROGRAM = r"""
tracepoint:syscalls:sys_enter_clock_nanosleep /pid == $1/ { @start[tid] = nsecs; }
tracepoint:syscalls:sys_exit_clock_nanosleep /pid == $1 && @start[tid]/ {
    @us = hist((nsecs - @start[tid]) / 1000);
    printf("slept %d us\n", (nsecs - @start[tid]) / 1000);
    delete(@start[tid]);
}
"""


async def sleeper(n: int) -> None:
    """The workload: n short sleeps in a thread (time.sleep is clock_nanosleep)."""
    import time

    for _ in range(n):
        await asyncio.to_thread(time.sleep, 0.002)


async def main() -> None:
    with pycore.trace(PROGRAM, params=(str(os.getpid()),)) as session:
        work = asyncio.create_task(sleeper(3))
        seen = 0

        async def consume() -> None:
            nonlocal seen
            async for event in session:          # a pycore.Event per printf
                ev: pycore.Event = event
                if ev.kind == "printf":
                    print("event:", ev.text, end="")
                    seen += 1
                    if seen == 3:
                        return

        await asyncio.wait_for(consume(), timeout=10)
        await work
        hist: pycore.Hist = session.hist("@us")
        for bucket in hist.buckets():            # Bucket(lo, hi, count): lo <= us < hi
            if bucket.count:
                print(f"bucket: [{bucket.lo}, {bucket.hi}) us: {bucket.count}")
        print("total:", hist.total, "lost:", session.lost)


if __name__ == "__main__":
    asyncio.run(main())
