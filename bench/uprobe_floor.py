"""The least a Python tracer can do for bench_trace023's start-to-attached script, and nothing more.

Not a tracer: a lower bound, as trace_floor.py is for a tracepoint.  It creates a hash map and the
ring ``pycore trace`` creates, loads a two-instruction program (``r0 = 0; exit``), attaches it as a
uprobe to ``tick`` of the ticker (argv[1], at the file offset argv[2], which the benchmark finds once
beforehand), through pycore's own native and link layers, and prints ``ready``.  No parser, no
checker, no ELF reading, no code generation, no BEGIN, no output.  Any Python tracer using this
interpreter and a libbpf binding does at least this much before its uprobe can fire.
"""

import os
import sys

sys.path[:0] = sys.argv[3:]   # with -S: the checkout and the site-packages that hold cffi
from pycore.link.uprobe import attach_uprobe
from pycore.native.program import MapType, ProgType, create_map, load_program

counts = create_map(MapType.HASH, 8, 8, 2048, name="m")
ring = create_map(MapType.RINGBUF, 0, 0, 1 << 20, name="ring")
prog = load_program(bytes.fromhex("b700000000000000" "9500000000000000"), ProgType.KPROBE, name="floor")
link = attach_uprobe(prog, sys.argv[1], int(sys.argv[2]))
os.write(1, b"ready\n")
try:
    import signal

    signal.pause()    # held attached until the bench's SIGINT
except KeyboardInterrupt:
    pass
