"""USDT attach through pycore.elf.usdt on the host kernel: the demo, all 71 PostgreSQL
probes (with %rip-relative arguments), and the USDT tools end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from usdt_targets import POSTGRES, pg_available, pg_server, postmaster_pid  # noqa: E402

from pycore.native.object import BpfObject  # noqa: E402
from pycore.native.shipped import object_path  # noqa: E402
from pycore.native.ringbuf import RingBuffer  # noqa: E402
from pycore.elf.usdt import UsdtAttacher  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def demo() -> str:
    from pycore.tools.usdt_passwd import demo_binary

    return demo_binary()


class Collector:
    """Drains the ring buffer in a thread so busy probes (lwlock) do not overflow it."""

    def __init__(self, obj: BpfObject) -> None:
        self.rb = RingBuffer(obj, "events", event="usdt_hit_event")
        self.events: list = []
        self._stop = False
        self._t = threading.Thread(target=self._run)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            self.events.extend(self.rb.consume(100000))
            self.rb.wait(0.05)

    def stop(self) -> list:
        time.sleep(0.2)
        self._stop = True
        self._t.join()
        self.events.extend(self.rb.consume())
        return self.events


def test_demo_all_locations_and_semaphore():
    with BpfObject(object_path("test_usdt")) as obj:
        obj.load()
        att = UsdtAttacher(obj)
        found = att.attach("usdt_hit", demo(), "passwd", "passwdfound")
        lookup = att.attach("usdt_hit", demo(), "passwd", "lookup")
        assert len(found) == 2 and len(lookup) == 1
        col = Collector(obj)
        subprocess.run([demo(), "1", "1"], check=True)
        events = col.stop()
    names = [(att.where[e.cookie][0].name, att.where[e.cookie][1]) for e in events]
    entries = sum(1 for line in open("/etc/passwd") if line.strip())
    # the semaphore-guarded probe fires once per entry: the kernel bumped the semaphore
    assert names.count(("lookup", 0)) == entries
    # both locations of passwdfound fire (users and system accounts)
    assert {i for n, i in names if n == "passwdfound"} == {0, 1}
    assert sum(1 for n, _ in names if n == "passwdfound") == entries
    assert all(e.err == 0 for e in events)


def test_tool_usdt_passwd(record_property):
    record_property("tool", "usdt-passwd")
    proc = subprocess.Popen([demo(), "0", "100"])
    try:
        out = subprocess.run([sys.executable, "-m", "pycore", "run", "usdt-passwd", "-d", "1"],
                             capture_output=True, text=True, timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\d+\s+root\s+/root$", out.stdout, re.M)


def test_errors_exit_2(tmp_path):
    def run(*a):
        return subprocess.run([sys.executable, "-m", "pycore", *a], capture_output=True, text=True, timeout=60)
    r = run("run", "pg-queries", "--binary", "/bin/true", "-d", "0")
    assert r.returncode == 2 and "no USDT probes" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(not pg_available(), reason="PostgreSQL 15 not installed")
def test_postgres_all_71_probes_decode():
    with BpfObject(object_path("test_usdt")) as obj:
        obj.load()
        att = UsdtAttacher(obj)
        f = att.file(POSTGRES)
        links = [ln for p in f.probes() for ln in att.attach_probe("usdt_hit", f, p)]
        assert len(links) == 71
        col = Collector(obj)
        with pg_server(shared_buffers="16MB") as server:
            server.psql("create table t(a int)", "insert into t select generate_series(1, 1000)", "checkpoint")
            shared = server.psql("select setting from pg_settings where name = 'shared_buffers'").strip()
            # this server's postmaster and children (its checkpointer): the probes are in every postgres,
            # and a suite run beside this one (another clone's) runs initdb and servers of its own
            pm = postmaster_pid(server)
            ours = {pm, *map(int, subprocess.run(["pgrep", "-P", str(pm)], capture_output=True,
                                                 text=True).stdout.split())}
            events = col.stop()
    assert int(shared) == 2048
    last = {}
    for e in events:
        if e.pid in ours:
            last[att.where[e.cookie][0].name] = e
    assert all(e.err == 0 for e in events)
    # -4@NBuffers(%rip): the server's shared_buffers in pages (initdb's own server used 128MB)
    assert last["checkpoint__done"].args[1] == 2048
    assert last["buffer__sync__done"].args[0] == 2048
    assert last["buffer__sync__start"].args[0] == 2048   # the same value, from %eax


@pytest.mark.skipif(not pg_available(), reason="PostgreSQL 15 not installed")
def test_tool_pg_queries(record_property):
    record_property("tool", "pg-queries")
    with pg_server() as server:
        tool = subprocess.Popen([sys.executable, "-m", "pycore", "run", "pg-queries", "-d", "6"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert tool.stdout.readline().split() == ["PID", "MS", "QUERY"], tool.stderr.read()  # attached
        server.psql("select pg_sleep(0.2)", "select 41 + 1")
        out, err = tool.communicate(timeout=60)
    assert tool.returncode == 0, err
    rows = {m.group(2): float(m.group(1)) for m in re.finditer(r"^\d+\s+([\d.]+) (.*)$", out, re.M)}
    assert 200 <= rows["select pg_sleep(0.2)"] < 5000
    assert rows["select 41 + 1"] < 200


@pytest.mark.skipif(not pg_available(), reason="PostgreSQL 15 not installed")
def test_tool_pg_queries_min_ms():
    with pg_server() as server:
        tool = subprocess.Popen([sys.executable, "-m", "pycore", "run", "pg-queries", "--min-ms", "100", "-d", "6"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert tool.stdout.readline().split() == ["PID", "MS", "QUERY"], tool.stderr.read()  # attached
        server.psql("select pg_sleep(0.15)", "select 41 + 1")
        out, err = tool.communicate(timeout=60)
    assert "select pg_sleep(0.15)" in out
    assert "select 41 + 1" not in out
