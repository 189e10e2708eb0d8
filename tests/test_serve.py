"""pycore serve: a real scrape of /metrics while tools run, then SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import require_root, running, stop
from tests.test_robustness import prog_ids, wait_gone

pytest.importorskip("prometheus_client")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {line.split()[2]: 0.0 for line in text.splitlines() if line.startswith("# TYPE ")}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_serve_exports_and_stops_cleanly(tmp_path_factory):
    require_root()
    port = _free_port()
    names = ("sys_exit_fd", "tp_btf_begin", "tp_btf_end", "fd_opened", "fd_closed")
    with running([sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{port}",
                  "fget-crack", "lock-contention", "fd-leak"]) as p:
        for _ in range(3):
            line = p.stderr.readline()
            if line.startswith("pycore serve: http://"):
                break
        else:
            pytest.fail(f"serve did not start: {line}")
        ours = prog_ids(*names, of=p.pid)
        assert len(ours) == 5
        m1 = _scrape(port)
        d = tmp_path_factory.mktemp("work")
        for i in range(25):
            os.close(os.open(os.path.join(d, f"libcrack-{i}.so"), os.O_CREAT | os.O_RDWR, 0o600))
        time.sleep(1.2)  # the consumer polls every 0.5 s at most
        m2 = _scrape(port)
        out, err = stop(p, signal.SIGTERM)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    ev = 'pycore_events_total{tool="fget-crack"}'
    assert m2[ev] - m1.get(ev, 0) >= 25
    assert m2['pycore_lost_events_total{tool="fget-crack"}'] == 0
    runs = 'pycore_prog_runs_total{program="sys_exit_fd",tool="fget-crack"}'
    assert m2[runs] > m1[runs] >= 0
    assert m2['pycore_prog_run_time_seconds_total{program="sys_exit_fd",tool="fget-crack"}'] > 0
    assert m2['pycore_prog_runs_total{program="fd_opened",tool="fd-leak"}'] > 0
    assert 'pycore_lock_contention_block_seconds_bucket{le="+Inf",tool="lock-contention"}' in m2
    assert "pycore_fd_leak_open_descriptors" in m2   # its TYPE line; samples depend on the host
    for k in m2:
        if k.startswith("pycore_fd_leak_open_descriptors{"):
            assert re.fullmatch(r'pycore_fd_leak_open_descriptors\{comm="[^"]*",pid="\d+"\}', k)
    wait_gone(ours)


def test_serve_bad_listen_and_unknown_tool():
    require_root()
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--listen", "nope", "fget-crack"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "expected HOST:PORT" in r.stderr
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "no-such-tool"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no tool 'no-such-tool'" in r.stderr and "Traceback" not in r.stderr
