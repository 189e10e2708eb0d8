"""Embed a built-in tool and read its events with a plain for loop.

Opens fget-crack for this process only, opens a matching file, prints the
event.  Run as root: .venv/bin/python examples/embed_iterator.py
"""

import os
import tempfile

import pycore

with pycore.open_tool("fget-crack", pid=os.getpid(), pattern="embed-demo") as tool:
    if tool.notice:
        print(tool.notice)                      # e.g. the tp_btf fallback where fexit is refused
    with tempfile.TemporaryDirectory() as d:
        fd = os.open(os.path.join(d, "embed-demo.txt"), os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        for event in tool.events(timeout=0.5):  # ends after 0.5 s without events
            print("event:", tool.format(event))  # event.comm, .fd, .name: a dataclass
    print("lost:", tool.lost)
