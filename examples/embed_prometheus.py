"""A built-in tool feeding Prometheus metrics from a callback: open_tool + poll(callback) +
prometheus_client.  Typed: the callback takes the tool's own event class
(``pycore.tools.fget_crack.Event``), so ``mypy --strict`` checks every field it reads
(tests/test_agent_api.py runs mypy on it, and on a copy with a field misspelt).

Counts the files this process opens whose name holds "prom-demo", by process name, and
prints the metric as the exposition format serves it.  A real agent would call
``prometheus_client.start_http_server(PORT)`` and keep polling.
Run as root: .venv/bin/python examples/embed_prometheus.py
"""

from __future__ import annotations

import os
import tempfile

from prometheus_client import CollectorRegistry, Counter, generate_latest

import pycore
from pycore.tools.fget_crack import Event

registry = CollectorRegistry()
opened = Counter("demo_files_opened", "files opened whose name holds the pattern", ["comm"], registry=registry)
longest = [0]


def on_event(event: Event) -> None:
    """Called by poll() for each event, in the polling thread."""
    opened.labels(comm=event.comm).inc()
    longest[0] = max(longest[0], len(event.name))


def main() -> None:
    try:
        tool = pycore.open_tool("fget-crack", pid=os.getpid(), pattern="prom-demo")
    except pycore.NoMethod as exc:       # a kernel where no attach method works: say so, carry on
        print("fget-crack cannot run here:", exc)
        return
    with tool:
        with tempfile.TemporaryDirectory() as d:
            for i in range(4):
                os.close(os.open(os.path.join(d, f"prom-demo-{i}"), os.O_CREAT | os.O_RDWR, 0o600))
        handled = 0
        while n := tool.poll(on_event, timeout=0.5):    # 0 after 0.5 s without events
            handled += n
        print("handled:", handled, "lost:", tool.lost, "longest name:", longest[0])
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("demo_files_opened_total"):
            print("metric:", line)


if __name__ == "__main__":
    main()
