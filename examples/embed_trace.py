"""Run a bpftrace program inside this process with pycore.trace and read its maps live.

Counts this process's getppid() calls by a hist of their number, prints the
printf events and the maps as Python values, then closes (END runs, maps are
returned as bpftrace would print them).  Run as root:
.venv/bin/python examples/embed_trace.py
"""

import os

import pycore

PROGRAM = r"""
BEGIN { printf("tracing pid %d\n", $1); }
tracepoint:syscalls:sys_enter_getppid /pid == $1/ { @calls = count(); @by_comm[comm] = count(); }
END { printf("bye\n"); }
"""

with pycore.trace(PROGRAM, params=(str(os.getpid()),)) as session:
    for _ in range(3):
        os.getppid()
    for event in session.events(timeout=0.3):     # printf/print/time records as Event objects
        print("event:", event.text, end="")
    print("calls:", session.map("@calls"))         # read live: 3
    print("maps:", session.maps())                 # {'@by_comm': {'python': 3}, '@calls': 3}
    for event in session.close():                  # END's output, then every map as bpftrace prints it
        print("at close:", event.text, end="")
