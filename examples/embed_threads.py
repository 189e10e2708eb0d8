"""Two tools in one process, each consumed by its own thread, stopped from the main thread.

close() is thread-safe: it wakes a consumer blocked in events() and ends its loop.
Run as root: .venv/bin/python examples/embed_threads.py
"""

import os
import tempfile
import threading
import time

import pycore

counts = {"a": 0, "b": 0}
a = pycore.open_tool("fget-crack", pid=os.getpid(), pattern="thread-demo")
b = pycore.open_tool("fget-crack", pid=os.getpid(), pattern="thread-demo-b")


def consume(name, tool):
    for _ in tool.events(timeout=None):         # blocks until close()
        counts[name] += 1


threads = [threading.Thread(target=consume, args=item) for item in (("a", a), ("b", b))]
for t in threads:
    t.start()
with tempfile.TemporaryDirectory() as d:
    for name in ("thread-demo-a", "thread-demo-b"):
        os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_RDWR, 0o600))
time.sleep(0.5)
a.close()
b.close()
for t in threads:
    t.join(5)
print("a saw", counts["a"], "b saw", counts["b"], "alive", [t.is_alive() for t in threads])
