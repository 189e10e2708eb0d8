"""pycore serve --profile: go tool pprof pulls the host's CPU profile as from Go's net/http/pprof, over
the web config's TLS and basic auth, while a python3.11 workload runs; the
profiler's health in /metrics (promtool checks it); Go's answers to bad input and to a second profile
at once; nothing attached after the request, after a client that went away, or after SIGTERM.

go tool pprof (Debian's Go 1.19) fetches with its own client (cmd/pprof/pprof.go): it ignores its
-tls_ca/-tls_cert/-tls_key flags (they are google/pprof's, for symbolization), sends no client
certificate and trusts the system's roots, which Go reads from SSL_CERT_FILE: the test's CA is given
so, and the web config asks for client certificates only if given (VerifyClientCertIfGiven; the
Python client here sends one, verified).

Whether a profile is attached is read from serve's own descriptors (its perf events and BPF programs
and links): ``bpftool prog show`` would also list another test's profiler running on this host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
from collections import Counter

import pytest

from pycore.link.base import online_cpus
from tests.conftest import stop
from tests.test_profile import start_workload, stop_workload
from tests.test_serve_script import _samples, _wait, promtool_check
from tests.test_serve_web import PASSWORD, _client, _fetch, _web_config, pki, serving  # noqa: F401

pytest.importorskip("prometheus_client")

PROFILE = "/debug/pprof/profile"
BUSY = "Could not enable CPU profiling: cpu profiling already in use\n"


def attached(pid: int) -> Counter:
    """serve's descriptors of perf events, BPF programs and BPF links, by kind."""
    kinds: Counter = Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        for kind in ("[perf_event]", "bpf-prog", "bpf_link"):
            if target == f"anon_inode:{kind}":
                kinds[kind] += 1
    return kinds


def go() -> str:
    path = shutil.which("go")
    if path is None:
        pytest.fail("go is not installed (dev.sh installs golang-go): go tool pprof pulls the profile")
    return path


def test_go_tool_pprof_pulls_over_tls_and_basic_auth(pki, tmp_path, record_property):  # noqa: F811
    """go tool pprof (trusting the CA, the password in the URL) gets the host's profile with the
    workload's Python functions at the top; meanwhile /metrics answers at once and a second go tool
    pprof gets Go's 500 and prints its line; the health counters move; nothing stays attached."""
    config = _web_config(pki, tmp_path, auth_type="VerifyClientCertIfGiven")
    ctx = _client(pki)
    wl = start_workload()
    try:
        with serving("--profile", "--web.config.file", config) as (p, port):
            assert "/debug/pprof/profile" in p.startup
            assert attached(p.pid) == Counter()
            status, _, body = _fetch(port, ctx, password=None, path=f"{PROFILE}?seconds=1")
            assert status == 401
            for query, text in (("seconds=abc", "seconds='abc': a whole number of seconds, 1 to 86400\n"),
                                ("seconds=0", "seconds='0': a whole number of seconds, 1 to 86400\n"),
                                ("seconds=-5", "seconds='-5': a whole number of seconds, 1 to 86400\n"),
                                ("seconds=86401", "seconds='86401': a whole number of seconds, 1 to 86400\n"),
                                ("seconds=2&pid=x", "pid='x': a process id\n"),
                                ("seconds=2&pid=999999999", "pid=999999999: no such process\n")):
                status, headers, body = _fetch(port, ctx, path=f"{PROFILE}?{query}")
                assert (status, body) == (400, text), query
                assert headers["Content-Type"] == "text/plain; charset=utf-8" and headers["X-Go-Pprof"] == "1"
            status, headers, body = _fetch(port, ctx, path="/debug/pprof/heap")
            assert (status, body) == (404, "Unknown profile\n")
            status, headers, body = _fetch(port, ctx, path="/debug/pprof/")
            assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
            assert '<a href="profile?seconds=30">profile</a>' in body
            before = _samples(_fetch(port, ctx)[2])
            assert before["pycore_profile_samples_total"] == 0

            url = f"https://prom:{urllib.parse.quote(PASSWORD)}@localhost:{port}{PROFILE}?seconds=5"
            env = dict(os.environ, PPROF_TMPDIR=str(tmp_path), HOME=str(tmp_path), SSL_CERT_FILE=str(pki / "ca.crt"))
            # -timeout: go tool pprof waits 1.5 x seconds + 5 s by default; the answer comes after the
            # seconds plus the load, attach, drain and naming, 1 to 3 s here, up to 8 s when this 2-core
            # host runs a load of 9 (a whole test run beside): 12.5 s was once too short
            pull = subprocess.Popen([go(), "tool", "pprof", "-top", "-nodecount=400", "-timeout=60", url],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            try:
                _wait("the profile attached", lambda: attached(p.pid)["[perf_event]"] > 0 or pull.poll() is not None)
                if pull.poll() is not None:
                    pytest.fail(f"go tool pprof ended first: {pull.communicate()}")
                during = attached(p.pid)
                assert during["[perf_event]"] == len(online_cpus()) and during["bpf-prog"] >= 1
                wl.send_signal(signal.SIGUSR1)      # the workload measures its own split from now
                t0 = time.monotonic()
                status, _, text = _fetch(port, ctx)
                scrape = time.monotonic() - t0
                assert status == 200 and scrape < 3, scrape     # not held up by the profile being taken
                assert "pycore_profile_samples_total" in text
                second = subprocess.run([go(), "tool", "pprof", "-raw", url.replace("seconds=5", "seconds=1")],
                                        capture_output=True, text=True, env=env, timeout=60)
                assert second.returncode != 0
                assert f"server response: 500 Internal Server Error - {BUSY}" in second.stderr, second.stderr
                out, err = pull.communicate(timeout=120)
                truth = stop_workload(wl)
            finally:
                if pull.poll() is None:
                    pull.kill()
                    pull.wait()
            assert pull.returncode == 0, err
            assert attached(p.pid) == Counter()
            lines = out.splitlines()
            assert "Type: cpu" in lines and any(line.startswith("Duration: 5") for line in lines), out
            # -top's rows: flat flat% sum% cum cum% name; cum counts each function once per sample. Within
            # the workload's own process (its root frame) each Python loop's share is the one the
            # workload measured of itself over the same window, within 10 points, the one under the
            # 220-frame recursion with its recursion. (Two whole runs once failed here, spin and digest
            # 48% each: the workload's fixed 20 ms round had aliased with 99 Hz sampling; its rounds
            # are random now, tests/profile_workload.py. <module> is pprof's "<unknown>": it drops
            # what is in angle brackets, as C++ template arguments.)
            cum = {parts[5]: float(parts[4].rstrip("%")) for parts in (line.split(None, 5) for line in lines)
                   if len(parts) == 6 and parts[4].endswith("%")}
            ours = cum.get(f"python3.11 ({wl.pid})", 0)
            assert ours > 5, out
            got = {row: 100.0 * cum.get(row, 0) / ours for row in ("spin", "spin_at_bottom", "digest")}
            truth = {f: 100.0 * truth["used"][f] / truth["cpu"] for f in ("spin", "deep", "digest")}
            record_property("serve_profile_shares", json.dumps({"pycore": got, "truth": truth}))
            assert got["spin"] == pytest.approx(truth["spin"], abs=10), (got, truth, out)
            assert got["spin_at_bottom"] == pytest.approx(truth["deep"], abs=10), (got, truth, out)
            assert got["digest"] == pytest.approx(truth["digest"], abs=10), (got, truth, out)
            assert cum.get("deep", 0) >= cum["spin_at_bottom"], out

            _, headers, exposition = _fetch(port, ctx)
            promtool_check(exposition)
            after = _samples(exposition)
            assert after["pycore_profile_samples_total"] > 100
            assert after["pycore_profile_lost_samples_total"] >= 0
            assert after['pycore_profile_requests_total{code="200"}'] == 1
            assert after['pycore_profile_requests_total{code="400"}'] == 6
            assert after['pycore_profile_requests_total{code="500"}'] == 1
            reasons = {k for k in after if k.startswith("pycore_profile_unwind_failures_total{")}
            assert 'pycore_profile_unwind_failures_total{reason="python_truncated"}' in reasons
            assert 'pycore_profile_unwind_failures_total{reason="native_no_cfi"}' in reasons
            assert sum(after[k] for k in reasons) < after["pycore_profile_samples_total"]
    finally:
        if wl.poll() is None:
            stop_workload(wl)


def _request(port: int, query: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"GET {PROFILE}?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return s


def test_client_gone_and_sigterm_detach(tmp_path):
    """A client that goes away mid-profile gets its profile detached within a second or two (counted
    as 499); SIGTERM during a 60 s profile ends serve at once, exit status 0; pid= narrows the profile
    to one process and the answer is Go's (headers, a gzipped profile.proto)."""
    wl = start_workload()
    try:
        with serving("--profile") as (p, port):
            s = _request(port, "seconds=60")
            _wait("the profile attached", lambda: attached(p.pid)["[perf_event]"] > 0)
            s.close()
            # sampling stops (perf events and links closed) within a poll or two; the program and its ring
            # are closed once the drain thread has caught up, seconds later under this host's load
            t0 = time.monotonic()
            _wait("detached after the client went",
                  lambda: attached(p.pid)["[perf_event]"] == attached(p.pid)["bpf_link"] == 0, timeout=10)
            assert time.monotonic() - t0 < 5
            _wait("closed after the client went", lambda: attached(p.pid) == Counter(), timeout=60)
            m = _samples(_fetch(port, None, password=None)[2])
            assert m['pycore_profile_requests_total{code="499"}'] == 1

            status, headers, body = _fetch_bytes(port, f"seconds=1&pid={wl.pid}")
            assert status == 200, body
            assert headers["Content-Type"] == "application/octet-stream"
            assert headers["Content-Disposition"] == 'attachment; filename="profile"'
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert body[:2] == b"\x1f\x8b"
            pb = tmp_path / "one.pb.gz"
            pb.write_bytes(body)
            top = subprocess.run([go(), "tool", "pprof", "-top", "-nodecount=400", str(pb)], capture_output=True,
                                 text=True, timeout=120, env=dict(os.environ, HOME=str(tmp_path)))
            assert top.returncode == 0, top.stderr
            assert " spin\n" in top.stdout or " spin_at_bottom\n" in top.stdout, top.stdout
            assert "_[k]" in top.stdout             # kernel frames, and only the workload's process:
            assert top.stdout.splitlines()[0] == "File: python3.11"

            s = _request(port, "seconds=60")
            _wait("the profile attached", lambda: attached(p.pid)["[perf_event]"] > 0)
            t0 = time.monotonic()
            out, err = stop(p, signal.SIGTERM, timeout=30)
            took = time.monotonic() - t0
            s.close()
            assert p.returncode == 0, err
            assert took < 10, took
            assert "Traceback" not in err
    finally:
        stop_workload(wl)


def _fetch_bytes(port: int, query: str) -> tuple[int, dict[str, str], bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", f"{PROFILE}?{query}")
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def test_not_served_without_profile(tmp_path):
    """Without --profile, /debug/pprof/profile is not served: /metrics answers it, as any other path."""
    from tests.test_serve_script import serving as plain

    script = tmp_path / "one.bt"
    script.write_text("tracepoint:syscalls:sys_enter_getpid { @n = count(); }\n")
    os.chmod(script, 0o644)
    with plain("--script", str(script)) as (p, port):
        status, _, body = _fetch(port, None, password=None, path=f"{PROFILE}?seconds=1")
        assert status == 200 and "# HELP" in body    # /metrics answers every other path, as before
        assert "pycore_profile_" not in body
