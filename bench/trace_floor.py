"""The least a Python tracer can do for bench_trace's start-to-attached script, and nothing more.

Not a tracer: a lower bound.  It creates the maps ``pycore trace`` creates for
``tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }`` (the count
map, the ring), loads a two-instruction program (``r0 = 0; exit``) instead of
the script's, attaches it to the tracepoint through pycore's own native and
link layers, and prints ``ready`` itself instead of running BEGIN.  No parser,
no checker, no code generation, no output formatting, no error handling.

Any Python implementation of ``pycore trace`` that uses this interpreter and a
libbpf binding does at least this much, so the time from exec to its
``ready`` line bounds what such an implementation can reach.
``bench_trace.py --only floor`` runs it beside bpftrace, plainly (as a
console script runs) and with ``-S -E`` (no site-packages, no environment:
the interpreter's own floor, which an installed console script cannot use).
"""

import os
import sys

sys.path[:0] = sys.argv[1:]   # with -S: the checkout and the site-packages that hold cffi
from pycore.link.tracepoint import attach_tracepoint
from pycore.native.program import MapType, ProgType, create_map, load_program

counts = create_map(MapType.PERCPU_HASH, 16, 8, 4096, name="AT_")
ring = create_map(MapType.RINGBUF, 0, 0, 1 << 20, name="ring")
prog = load_program(bytes.fromhex("b700000000000000" "9500000000000000"), ProgType.TRACEPOINT, name="floor")
link = attach_tracepoint(prog, "syscalls", "sys_enter_openat")
os.write(1, b"ready\n")
try:
    import signal

    signal.pause()    # held attached until the bench's SIGINT
except KeyboardInterrupt:
    pass
