"""Serve tools' metrics over HTTP for Prometheus: pycore serve [--listen HOST:PORT] TOOL...

Each TOOL is attached as 'pycore run TOOL' would (same fallbacks, default
options), its events are counted as they arrive, and /metrics exports
pycore_events_total, pycore_lost_events_total, per-program run counts and
run time from the kernel's BPF statistics (on while serving), and the tools'
aggregations (lock-contention's histogram, fd-leak's open descriptors,
net-drops' drops by namespace, interface and reason).
SIGTERM or Ctrl-C stops it and detaches everything.

Needs the 'prometheus' extra (prometheus_client).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default="127.0.0.1:9435", metavar="HOST:PORT",
                        help="address to serve /metrics on (default 127.0.0.1:9435)")
    parser.add_argument("-p", "--pid", type=int, default=0, help="trace only this process")
    parser.add_argument("tools", nargs="+", metavar="TOOL", help="tools to run ('pycore tools' lists them)")


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {text!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def run(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("pycore serve: needs prometheus_client (pip install 'pycore[prometheus]')", file=sys.stderr)
        return 2
    from pycore.kernel.privileges import missing_privileges

    why = missing_privileges()
    if why:
        print(f"pycore serve: {why}", file=sys.stderr)
        return 2
    host, port = _address(args.listen)
    from pycore.tools import registry

    for name in args.tools:
        try:
            registry.get(name)
        except KeyError as exc:
            print(f"pycore serve: {exc.args[0]}", file=sys.stderr)
            return 2

    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import CollectorRegistry, make_wsgi_app

    from pycore.embed.metrics import ToolCollector
    from pycore.native.progstats import RunTimeStats
    from pycore.embed.session import NoMethod, open_tool

    stop = threading.Event()
    old = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    sessions = []
    threads: list[threading.Thread] = []
    server = None
    stats = None
    try:
        stats = RunTimeStats()
        for name in dict.fromkeys(args.tools):
            try:
                sessions.append(open_tool(name, pid=args.pid))
            except NoMethod as exc:
                print(exc, file=sys.stderr)
                return 1
            if sessions[-1].notice:
                print(sessions[-1].notice, file=sys.stderr)
        collector = ToolCollector(sessions)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)

        class Quiet(WSGIRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

        server = make_server(host, port, make_wsgi_app(registry), handler_class=Quiet)
        for s in sessions:
            if s.has_events:
                t = threading.Thread(target=_consume, args=(s, collector), daemon=True, name=f"pycore-{s.name}")
                t.start()
                threads.append(t)
        web = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        web.start()
        print(f"pycore serve: http://{host}:{server.server_port}/metrics ({', '.join(s.name for s in sessions)})",
              file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        if server is not None:
            server.shutdown()
            server.server_close()
        for s in sessions:
            s.close()
        for t in threads:
            t.join(5)
        if stats is not None:
            stats.close()
        for s, h in old.items():
            signal.signal(s, h)


def _consume(session, collector) -> None:  # noqa: ANN001
    name = session.name
    try:
        while not session.closed:
            n = session.poll(lambda ev: None, timeout=0.5)
            if n:
                collector.count(name, n)
    except ValueError:  # closed under us: the end
        pass
