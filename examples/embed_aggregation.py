"""A tool that aggregates in the kernel (maps, no event stream): read its summary live.

fd-leak on this process: open three files, close one, ask which are still open.
Run as root: .venv/bin/python examples/embed_aggregation.py
"""

import os
import tempfile

import pycore

with pycore.open_tool("fd-leak", pid=os.getpid()) as tool, tempfile.TemporaryDirectory() as d:
    fds = [os.open(os.path.join(d, f"agg-demo-{i}"), os.O_CREAT | os.O_RDWR, 0o600) for i in range(3)]
    os.close(fds[0])
    leaked = tool.summary()["leaked"]           # the same dict `pycore run fd-leak --json` prints
    print("still open:", sorted(r["name"] for r in leaked if r["name"].startswith("agg-demo")))
    print(tool.summary_text(), end="")          # and the text `pycore run` prints
    for fd in fds[1:]:
        os.close(fd)
