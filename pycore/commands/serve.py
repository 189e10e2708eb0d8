"""Serve tools' and bpftrace scripts' metrics over HTTP for Prometheus: pycore serve [--listen HOST:PORT] [--script FILE.bt] [--scripts-dir DIR] [--profile] TOOL...

Each TOOL is attached as 'pycore run TOOL' would (same fallbacks, default
options), its events are counted as they arrive, and /metrics exports
pycore_events_total, pycore_lost_events_total, per-program run counts and
run time from the kernel's BPF statistics (on while serving), and the tools'
aggregations (lock-contention's histogram, fd-leak's open descriptors,
net-drops' drops by namespace, interface and reason).
With ``--script FILE.bt`` (repeatable) each bpftrace script runs as
'pycore trace' runs it and its maps are exported as they are when scraped
(pycore_script_<script>_<map>, docs/serve.md); its printf output goes to
stderr, rate-limited.  ``--scripts-dir DIR`` serves every ``*.bt`` file of DIR.
SIGHUP reloads what changed (so does a changed file in a --scripts-dir,
without SIGHUP): unchanged scripts keep their maps, a script that no longer
loads keeps its previous version running (pycore.embed.scripts.ScriptSet).
/-/healthy and /-/ready answer as Prometheus's own.
With ``--profile``, /debug/pprof/profile?seconds=N answers as Go's
net/http/pprof does (the whole host sampled by pycore's profiler, for go tool
pprof and Parca: pycore.embed.pprof_http), and /metrics has the profiler's
health (pycore_profile_*).
SIGTERM or Ctrl-C stops it and detaches everything.

Needs the 'prometheus' extra (prometheus_client).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default="127.0.0.1:9435", metavar="HOST:PORT",
                        help="address to serve /metrics on (default 127.0.0.1:9435)")
    parser.add_argument("-p", "--pid", type=int, default=0,
                        help="trace only this process (the tools; the scripts as pycore trace -p does)")
    parser.add_argument("--script", action="append", default=[], metavar="FILE.bt",
                        help="serve a bpftrace script's maps (repeatable; the file must be writable by root only); "
                             "SIGHUP reloads the scripts that changed, the others keep their maps")
    parser.add_argument("--scripts-dir", action="append", default=[], metavar="DIR",
                        help="serve every *.bt file of DIR (repeatable; DIR writable by root only); a file "
                             "added, changed or removed there is reloaded within ~2 s, without SIGHUP")
    parser.add_argument("--unsafe", action="store_true", help="allow system(), signal() and override() in scripts")
    parser.add_argument("--series-limit", type=int, default=10_000, metavar="N",
                        help="series one script may export per scrape; the rest is cut and counted (default 10000)")
    parser.add_argument("--log-rate", type=float, default=100.0, metavar="LINES",
                        help="output lines per second and script written to stderr; the rest is counted "
                             "(default 100)")
    parser.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                        help="TLS, client certificates and basic auth, in the file format of Prometheus's "
                             "exporter-toolkit (node_exporter's; docs/serve.md)")
    parser.add_argument("--map-keys-max", type=int, metavar="N",
                        help="keys each map of a script can hold (default: BPFTRACE_MAX_MAP_KEYS or "
                             "BPFTRACE_MAP_KEYS_MAX, else the script's config block max_map_keys, else 4096); "
                             "what a full map refuses is counted (pycore_script_map_keys_refused_total)")
    parser.add_argument("--profile", action="store_true",
                        help="answer /debug/pprof/profile?seconds=N (default 30) as Go's net/http/pprof: the "
                             "whole host's CPU profile (pid=PID: one process), gzipped profile.proto for go tool "
                             "pprof and Parca; one at a time; the profiler's health in /metrics (docs/serve.md)")
    parser.add_argument("tools", nargs="*", metavar="TOOL", help="tools to run ('pycore tools' lists them)")


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {text!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def run(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("pycore serve: needs prometheus_client (pip install 'pycore-bpf[prometheus]')", file=sys.stderr)
        return 2
    from pycore.kernel.privileges import missing_privileges

    why = missing_privileges()
    if why:
        print(f"pycore serve: {why}", file=sys.stderr)
        return 2
    if not args.tools and not args.script and not args.scripts_dir and not args.profile:
        print("pycore serve: give a TOOL or --script FILE.bt (or --scripts-dir DIR, or --profile)", file=sys.stderr)
        return 2
    if args.series_limit < 1 or args.log_rate <= 0:
        print("pycore serve: --series-limit and --log-rate must be positive", file=sys.stderr)
        return 2
    try:
        host, port = _address(args.listen)
    except ValueError as e:
        print(f"pycore serve: {e}", file=sys.stderr)
        return 2
    web_config = None
    if getattr(args, "web_config_file", None):
        from pycore.embed.webconfig import WebConfigError, WebConfigFile

        try:
            web_config = WebConfigFile(args.web_config_file)
        except WebConfigError as e:
            print(f"pycore serve: {e}", file=sys.stderr)
            return 2
    # as pycore trace: bpftrace 0.23.2's name first, then the deprecated one (a script's config block
    # max_map_keys holds when neither is set)
    env_name = "BPFTRACE_MAX_MAP_KEYS" if "BPFTRACE_MAX_MAP_KEYS" in os.environ else "BPFTRACE_MAP_KEYS_MAX"
    map_keys, raw = args.map_keys_max, os.environ.get(env_name)
    if map_keys is None and raw is not None:
        map_keys = int(raw) if raw.strip().isdigit() else 0
    if map_keys is not None and map_keys < 1:
        what = f"--map-keys-max {map_keys}" if args.map_keys_max is not None else f"{env_name}={raw!r}"
        print(f"pycore serve: {what}: give a number of keys, at least 1", file=sys.stderr)
        return 2
    if args.pid:
        from pycore.kernel.process import TargetError, check_pid

        try:
            check_pid(args.pid)
        except TargetError as e:
            print(f"pycore serve: {e}", file=sys.stderr)
            return 2
    from pycore.embed.scripts import ScriptSet, UntrustedScript

    scripts = ScriptSet(args.script, args.scripts_dir, unsafe=args.unsafe, series_limit=args.series_limit,
                        log_rate=args.log_rate, pid=args.pid or None, map_size=map_keys)
    try:
        scripts.start()
    except UntrustedScript as e:
        print(f"pycore serve: {e}", file=sys.stderr)
        return 2
    from pycore.tools import registry

    for name in args.tools:
        try:
            registry.get(name)
        except KeyError as exc:
            print(f"pycore serve: {exc.args[0]}", file=sys.stderr)
            return 2

    from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app

    from pycore.embed.metrics import ToolCollector
    from pycore.errors import BpfError
    from pycore.native.progstats import RunTimeStats
    from pycore.embed.session import NoMethod, open_tool

    stop = _SignalledStop()
    hups: list[int] = []        # SIGHUPs not acted on yet (list.append: no lock in the handler)
    old = {s: signal.signal(s, stop.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    old[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda signum, frame: hups.append(signum))
    sessions = []
    threads: list[threading.Thread] = []
    server = None
    stats = None
    pprof = None
    ready = threading.Event()
    try:
        try:
            stats = RunTimeStats()
        except BpfError as e:  # CAP_BPF and CAP_PERFMON without CAP_SYS_ADMIN (a hardened service): run anyway
            print(f"pycore serve: probes' run counts and time not counted ({e}; or sysctl "
                  "kernel.bpf_stats_enabled=1)", file=sys.stderr)
        exposed = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=exposed)       # the server's own CPU, memory and descriptors
        from pycore.embed.scripts import ScriptsCollector

        served = ScriptsCollector(scripts)
        app = _scripts_app(exposed, served, ready) if scripts else make_wsgi_app(exposed)
        if args.profile:
            from pycore.embed.pprof_http import PprofEndpoint

            pprof = PprofEndpoint()
            exposed.register(pprof)
        try:
            server = _server(host, port, app, ready, web_config, pprof)
        except OSError as e:
            print(f"pycore serve: cannot listen on {args.listen}: {e.strerror}", file=sys.stderr)
            return 2
        web = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        web.start()
        scripts.load(stop)
        if stop.is_set():
            return 0
        for name in dict.fromkeys(args.tools):
            try:
                sessions.append(open_tool(name, pid=args.pid))
            except NoMethod as exc:
                print(exc, file=sys.stderr)
                return 1
            if sessions[-1].notice:
                print(sessions[-1].notice, file=sys.stderr)
        collector = ToolCollector(sessions)
        exposed.register(collector)       # the scripts' health: written by _scripts_app, once ready
        for s in sessions:
            if s.has_events:
                t = threading.Thread(target=_consume, args=(s, collector), daemon=True, name=f"pycore-{s.name}")
                t.start()
                threads.append(t)
        ready.set()
        what = [s.name for s in sessions] + [f"{s.name}.bt" + ("" if s.up else " (down)") for s in scripts.scripts]
        if pprof is not None:
            what.append("/debug/pprof/profile")
        scheme = "https" if web_config is not None and web_config.tls else "http"
        print(f"pycore serve: {scheme}://{host}:{server.server_port}/metrics ({', '.join(what)})",
              file=sys.stderr, flush=True)
        scripts.watch(stop)
        while not stop.is_set():
            time.sleep(0.2)             # a signal's handler runs in it; the sleep then goes on, 0.2 s at most
            if hups and not stop.is_set():
                hups.clear()
                if scripts:
                    scripts.reload("SIGHUP")
                else:
                    print("pycore serve: SIGHUP: no scripts to reload", file=sys.stderr, flush=True)
        return 0
    finally:
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        if pprof is not None:
            pprof.close()       # a profile being taken: detached now, not at the process's exit
        if server is not None:
            server.shutdown()
            server.server_close()
        for s in sessions:
            s.close()
        stop.set()          # the directories' watch
        scripts.close()
        for t in threads:
            t.join(5)
        if stats is not None:
            stats.close()
        for s, h in old.items():
            signal.signal(s, h)


class _SignalledStop(threading.Event):
    """Set by SIGINT or SIGTERM. The handler only raises a flag, which :meth:`is_set` reads: a handler
    that called ``Event.set()`` takes the Event's Condition lock, in Python code, and when the signal
    came while this same thread held that lock (inside its own ``wait()`` or ``clear()``) it would wait
    on itself for ever (not seen here; pycore profile hung after a Ctrl-C raised as an exception). The serving loop polls; ``set()`` proper, which wakes the threads waiting on it
    (the directories' watch), is called from ordinary code at the end."""

    signalled = False

    def on_signal(self, signum: int, frame: object) -> None:
        self.signalled = True

    def is_set(self) -> bool:
        return self.signalled or super().is_set()


def _scripts_app(exposed: Any, served: Any, ready: threading.Event) -> Any:
    """/metrics with scripts: their maps' text written directly (ScriptsCollector.maps_text: a
    10,000-series map in a fraction of prometheus_client's time), then ``exposed``'s families (the
    process's, the tools'), then, once ``ready``, the scripts' health, also written directly
    (ScriptsCollector.health_text: the bytes prometheus_client would write, where it was ~70% of a
    20-script scrape's CPU, bench/bench_serve.py); OpenMetrics when the scraper's Accept asks for it
    (Prometheus 2 does), else the text format 0.0.4; gzip when asked for."""
    import gzip

    from prometheus_client.exposition import choose_encoder

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        om = content_type.startswith("application/openmetrics-text")
        text = served.maps_text(openmetrics=om) + encoder(exposed).decode()
        if ready.is_set():
            if om:      # the health before OpenMetrics' "# EOF", which ends prometheus_client's text
                text = text.removesuffix("# EOF\n") + served.health_text(openmetrics=True) + "# EOF\n"
            else:
                text += served.health_text()
        body = text.encode()
        headers = [("Content-Type", content_type)]
        if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            body = gzip.compress(body, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]

    return app


def _server(host: str, port: int, metrics: Any, ready: threading.Event, web: Any = None, pprof: Any = None) -> Any:
    """A WSGI server answering scrapes concurrently (a thread each: a slow scraper does not hold up
    another, nor does a profile being taken), /metrics from ``metrics``, /-/healthy and /-/ready (503
    until ``ready``) as Prometheus, and /debug/pprof/ from ``pprof`` (a PprofEndpoint) when given.
    ``web`` (a WebConfigFile): TLS, its handshake in the connection's thread, not the accept loop;
    basic auth, headers and rate limit on every path."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def get_environ(self) -> dict[str, Any]:
            env = super().get_environ()
            env["pycore.connection"] = self.connection      # pprof_http.CONNECTION: is the client gone?
            return env

    class Threading(ThreadingMixIn, WSGIServer):
        daemon_threads = True

        def finish_request(self, request: Any, client_address: Any) -> None:
            if web is None or not web.tls:
                return super().finish_request(request, client_address)
            conn = web.handshake(request, client_address)
            if conn is None:
                return None
            try:
                return super().finish_request(conn, client_address)
            finally:
                conn.close()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/-/healthy":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"pycore serve is Healthy.\n"]
        if path == "/-/ready":
            if ready.is_set():
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"pycore serve is Ready.\n"]
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"pycore serve is loading.\n"]
        if pprof is not None and path.startswith("/debug/pprof"):
            return pprof(environ, start_response)
        return metrics(environ, start_response)

    if ":" in host:
        Threading.address_family = socket.AF_INET6
    return make_server(host, port, app if web is None else web.wrap(app), server_class=Threading,
                       handler_class=Quiet)


def _consume(session, collector) -> None:  # noqa: ANN001
    name = session.name
    try:
        while not session.closed:
            n = session.poll(lambda ev: None, timeout=0.5)
            if n:
                collector.count(name, n)
    except ValueError:  # closed under us: the end
        pass
