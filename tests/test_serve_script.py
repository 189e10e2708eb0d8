"""pycore serve --script: a bpftrace script's maps scraped over HTTP while a gcc-built workload runs.

The expected figures come from what the workload did (its opens, its read sizes), counted here in
Python the way Prometheus reads a histogram (values <= le), not from pycore's bucket code.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager

import pytest

from tests.conftest import require_root, running, stop
from tests.test_robustness import bpftool, wait_gone

pytest.importorskip("prometheus_client")

WORKLOAD = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* s25work N PATH SIZE...: opens PATH N times, then reads SIZE bytes from /dev/zero for each SIZE;
   first, with SLEEPS=k SLEEP_MS=m in the environment, sleeps k times m ms (clock_nanosleep) */
int main(int argc, char **argv) {
    static char buf[65536];
    int n = atoi(argv[1]);
    int sleeps = getenv("SLEEPS") ? atoi(getenv("SLEEPS")) : 0;
    long ms = getenv("SLEEP_MS") ? atol(getenv("SLEEP_MS")) : 0;
    for (int i = 0; i < sleeps; i++) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    }
    for (int i = 0; i < n; i++) {
        int fd = open(argv[2], O_RDONLY);
        if (fd >= 0) close(fd);
    }
    int z = open("/dev/zero", O_RDONLY);
    for (int i = 3; i < argc; i++)
        if (read(z, buf, atoi(argv[i])) < 0) return 1;
    close(z);
    return 0;
}
"""

SCRIPT = r"""
// @opens: help="files the workload opened" labels=command,file
tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ {
  @opens[comm, str(args.filename)] = count();
}
tracepoint:syscalls:sys_enter_read /comm == "s25work"/ {
  @bytes[comm] = sum(args.count);
  @sizes = hist(args.count);
  @linear[comm] = lhist(args.count, 0, 1000, 100);
  @biggest = max(args.count);
  @mean[pid] = avg(args.count);
  @last = args.count;
}
"""


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    d = tmp_path_factory.mktemp("s25")
    (d / "w.c").write_text(WORKLOAD)
    exe = d / "s25work"
    # static: no dynamic loader opening and reading libc under the workload's name
    subprocess.run(["gcc", "-O1", "-static", "-o", str(exe), str(d / "w.c")], check=True)
    return str(exe)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str = "/metrics") -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def promtool_check(exposition: str) -> None:
    """``promtool check metrics`` (Debian's prometheus package, dev.sh installs it) accepts the text."""
    if not shutil.which("promtool"):
        pytest.fail("promtool is not installed (dev.sh installs Debian's prometheus)")
    r = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _script(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, 0o644)
    return str(path)


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None):
    """pycore serve ARGS on a free port: (process, port) once it says it serves; SIGTERM at the end."""
    require_root()
    port = _free_port()
    with running([sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{port}", *args], env=env) as p:
        lines = []
        while True:
            line = p.stderr.readline()
            lines.append(line)
            if not line or line.startswith("pycore serve: http://"):
                break
        if not line:
            pytest.fail(f"serve did not start: {''.join(lines)}")
        p.startup = "".join(lines)  # type: ignore[attr-defined]
        yield p, port
        if p.poll() is None:
            out, err = stop(p, signal.SIGTERM)
            p.tail = err  # type: ignore[attr-defined]


def _programs_using(map_name: str) -> set[int]:
    """Ids of the programs that use a map of this name (a script's @opens is AT_opens in the kernel);
    another agent's programs of the same probe do not, unless they run the same script."""
    maps = {m["id"] for m in bpftool("map") if m.get("name") == map_name}
    return {p["id"] for p in bpftool("prog") if maps & set(p.get("map_ids", ()))}


def _le_counts(samples: dict[str, float], family: str, labels: str = "") -> dict[float, float]:
    """{le: cumulative count} of one histogram series (``labels``: its other labels, as exposed)."""
    out = {}
    for k, v in samples.items():
        m = re.fullmatch(rf'{family}_bucket\{{{labels}{"," if labels else ""}le="([^"]+)"\}}', k)
        if m:
            out[float(m.group(1))] = v
    return out


def test_script_maps_scraped(workload, tmp_path):
    path = _script(tmp_path, "opens.bt", SCRIPT)
    target = "target-file"      # relative (run in tmp_path): str() keeps 63 bytes, as bpftrace's
    (tmp_path / target).touch()
    opens = 37
    sizes = [1, 3, 4, 100, 250, 999, 1000, 4096, 5000, 5000]
    with serving("--script", path) as (p, port):
        progs_open, progs_read = _programs_using("AT_opens"), _programs_using("AT_sizes")
        assert len(progs_open) == len(progs_read) == 1
        ours = progs_open | progs_read
        assert _get(port, "/-/healthy").startswith("pycore serve is Healthy")
        assert _get(port, "/-/ready").startswith("pycore serve is Ready")
        before = _samples(_get(port))
        assert before['pycore_script_up{script="opens"}'] == 1
        assert before['pycore_script_info{error="",file="%s",script="opens"}' % path] == 1
        subprocess.run([workload, str(opens), target, *map(str, sizes)], check=True, cwd=tmp_path)
        exposition = _get(port)
        m = _samples(exposition)
    assert p.returncode == 0, p.tail
    assert "Traceback" not in p.tail
    wait_gone(ours)     # SIGTERM detached and freed them
    assert m[f'pycore_script_opens_opens_total{{command="s25work",file="{target}"}}'] == opens
    assert 'help="' not in exposition and "# HELP pycore_script_opens_opens_total files the workload opened" in exposition
    assert m['pycore_script_opens_bytes_total{comm="s25work"}'] == sum(sizes)
    assert m["pycore_script_opens_biggest"] == max(sizes)
    assert m["pycore_script_opens_last"] == sizes[-1]
    means = {k: v for k, v in m.items() if k.startswith("pycore_script_opens_mean_")}
    assert len(means) == 2 and re.fullmatch(r'pycore_script_opens_mean_count\{pid="\d+"\}', min(means))
    assert sorted(means.values()) == [len(sizes), sum(sizes)]
    # a hist: le are bpftrace's bounds 2^k - 1 (integers below 2^k), counts as Prometheus reads them
    log2 = _le_counts(m, "pycore_script_opens_sizes")
    assert log2[float("inf")] == len(sizes)
    assert {le for le in log2 if le != float("inf")} == {2 ** k - 1 for k in range(0, 14)}
    for le, n in log2.items():
        assert n == sum(1 for s in sizes if s <= le), le
    lin = _le_counts(m, "pycore_script_opens_linear", 'comm="s25work"')
    assert {le for le in lin if le != float("inf")} == {99 + 100 * k for k in range(10)}
    for le, n in lin.items():
        assert n == sum(1 for s in sizes if s <= le), le
    assert m['pycore_script_up{script="opens"}'] == 1
    assert m['pycore_script_series_cut_total{script="opens"}'] == 0
    assert m['pycore_script_lost_events_total{script="opens"}'] == 0
    runs = 'pycore_script_probe_runs_total{probe="tracepoint:syscalls:sys_enter_read",script="opens"}'
    assert m[runs] >= len(sizes)
    assert m['pycore_script_map_keys{map="@opens",script="opens"}'] >= 1
    assert 10e6 < m["process_resident_memory_bytes"] < 500e6 and m["process_cpu_seconds_total"] > 0
    promtool_check(exposition)


def test_broken_script_is_down_and_the_good_one_serves(workload, tmp_path):
    good = _script(tmp_path, "good.bt", 'tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ '
                                        '{ @n = count(); }\n')
    broken = _script(tmp_path, "broken.bt", "tracepoint:syscalls:sys_enter_openat { @x = args.no_such_field; }\n")
    unsafe = _script(tmp_path, "unsafe.bt", 'BEGIN { system("true"); }\n')
    badlabel = _script(tmp_path, "badlabel.bt", '// @a: labels=le\nBEGIN { @a[1] = 1; }\n')
    ended = _script(tmp_path, "ended.bt", 'BEGIN { @a = 42; printf("bye\\n"); exit(); }\n')
    # script good_n's @total would be pycore_script_good_n_total, the samples of good's @n = count()
    twin = _script(tmp_path, "good_n.bt", "BEGIN { @total = 5; @fine = 1; }\n")
    with serving("--script", good, "--script", broken, "--script", unsafe, "--script", badlabel,
                 "--script", ended, "--script", twin) as (p, port):
        subprocess.run([workload, "5", "/"], check=True)
        m = _samples(_get(port))
    assert p.returncode == 0 and "Traceback" not in p.tail
    assert "script broken: not loaded: " in p.startup and "no_such_field" in p.startup
    assert m['pycore_script_up{script="good"}'] == 1
    assert m['pycore_script_up{script="broken"}'] == 0
    assert m['pycore_script_up{script="unsafe"}'] == 0
    assert m["pycore_script_good_n_total"] == 5 + 1     # and /dev/zero
    info = [k for k in m if k.startswith("pycore_script_info{") and 'script="broken"' in k]
    assert len(info) == 1 and "no_such_field" in info[0] and f"{broken}:1:" in info[0]
    info = [k for k in m if k.startswith("pycore_script_info{") and 'script="unsafe"' in k]
    assert len(info) == 1 and "--unsafe" in info[0]
    info = [k for k in m if k.startswith("pycore_script_info{") and 'script="badlabel"' in k]
    assert m['pycore_script_up{script="badlabel"}'] == 0 and "line 1: labels=le" in info[0]
    # exit(): down, detached, its maps still served, its printf logged
    info = [k for k in m if k.startswith("pycore_script_info{") and 'script="ended"' in k]
    assert m['pycore_script_up{script="ended"}'] == 0 and "exit()" in info[0]
    assert m["pycore_script_ended_a"] == 42
    assert "ended: bye\n" in p.startup + p.tail
    assert m["pycore_script_good_n_fine"] == 1 and m["pycore_script_good_n_total"] == 6     # good's @n
    assert "script good_n: @total: not exported: pycore_script_good_n_total is also another script's" in p.startup


def test_printf_is_logged_rate_limited(workload, tmp_path):
    path = _script(tmp_path, "talk.bt", 'tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ '
                                        '{ printf("open %s\\n", str(args.filename)); }\n')
    with serving("--script", path, "--log-rate", "5") as (p, port):
        subprocess.run([workload, "200", "/"], check=True)
        deadline = time.monotonic() + 10
        while True:
            m = _samples(_get(port))
            done = m['pycore_script_log_lines_total{script="talk"}'] + m['pycore_script_log_dropped_total{script="talk"}']
            if done >= 201 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "open /" not in _get(port)        # never in the scrape
    logged = [ln for ln in p.tail.splitlines() if ln.startswith("talk: open ")]
    assert done == 201       # 200 opens of / and one of /dev/zero
    assert 1 <= len(logged) == m['pycore_script_log_lines_total{script="talk"}'] <= 10
    said = sum(int(n) for n in re.findall(r"script talk: (\d+) output lines? dropped", p.tail))
    assert said == m['pycore_script_log_dropped_total{script="talk"}'] == 201 - len(logged)


def test_series_limit_cuts_and_counts(workload, tmp_path):
    path = _script(tmp_path, "many.bt", 'tracepoint:syscalls:sys_enter_read /comm == "s25work"/ '
                                        '{ @by_size[args.count] = count(); }\n')
    sizes = list(range(1, 31))
    with serving("--script", path, "--series-limit", "12") as (p, port):
        subprocess.run([workload, "0", "/", *map(str, sizes)], check=True)
        m = _samples(_get(port))
    series = [k for k in m if k.startswith("pycore_script_many_by_size_total{")]
    assert len(series) == 12 and all(m[k] == 1 for k in series)
    assert m['pycore_script_series{script="many"}'] == 12
    assert m['pycore_script_map_keys{map="@by_size",script="many"}'] == len(sizes)
    assert m['pycore_script_series_cut_total{script="many"}'] == len(sizes) - 12


def test_insecure_script_file_refused(tmp_path):
    require_root()
    path = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    os.chmod(path, 0o646)
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--script", path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and "a user other than root can write" in r.stderr
    os.chmod(path, 0o644)
    os.chown(path, 65534, 65534)
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--script", path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "owner uid 65534" in r.stderr and len(r.stderr.splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--script", str(tmp_path / "none.bt")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "No such file" in r.stderr and len(r.stderr.splitlines()) == 1


def test_agent_collector(workload, tmp_path):
    """pycore.trace()'s session gives the same families to an agent's own registry."""
    require_root()
    from prometheus_client import CollectorRegistry, generate_latest

    import pycore

    with pycore.trace(SCRIPT) as s:
        registry = CollectorRegistry(auto_describe=False)
        collector = s.collector("agent")
        registry.register(collector)
        subprocess.run([workload, "9", "/", "1", "77", "300", "300"], check=True)
        families = generate_latest(registry).decode()
        text = collector.maps_text()       # what pycore serve writes without prometheus_client
    m = _samples(families)
    assert m['pycore_script_agent_opens_total{command="s25work",file="/"}'] == 9
    assert m['pycore_script_agent_bytes_total{comm="s25work"}'] == 678
    # opens: / and /dev/zero; bytes; sizes: le 0..511 and +Inf (300 < 512); linear: le 99..399 and +Inf;
    # biggest; mean: _count and _sum; last
    assert m['pycore_script_series{script="agent"}'] == 2 + 1 + 11 + 5 + 1 + 2 + 1
    assert _parsed(text) == {k: v for k, v in _parsed(families).items() if k[0].startswith("pycore_script_agent_")}


def test_big_map_by_batch_and_key_by_key(workload):
    """A 3,000-key map scraped as serve writes it: each key with its count; the same text read by the
    kernel's batch lookup and by the key-by-key walk of kernels without it, and at a second scrape
    (labels decoded once and then found by the key's bytes)."""
    require_root()
    from pycore.lang.metrics import ScriptCollector
    from pycore.lang.runtime import Script

    text = ('tracepoint:syscalls:sys_enter_read /comm == "s25work"/ { @n[args.count] = count(); '
            '@by[comm, args.count % 7] = sum(args.count); @mean[args.count % 5] = avg(args.count); '
            '@top[args.count % 3] = max(args.count); @last[args.count % 2] = args.count; '
            '@sizes[args.count % 2] = hist(args.count); }\n')
    sizes = [*range(1, 3001), 7]
    with Script(text, filename="big.bt", map_keys=4000) as script:
        script.load()
        script.attach()
        collector = ScriptCollector(script, "big")
        empty = collector.maps_text()
        subprocess.run([workload, "0", "/", *map(str, sizes)], check=True)
        batch, again = collector.maps_text(), collector.maps_text()
        assert script._maps["@n"].batch_used
        for name in ("@n", "@by", "@mean", "@top", "@last", "@sizes"):
            script._maps[name].batch_used = False
        walked = ScriptCollector(script, "big").maps_text()
    assert [line for line in empty.splitlines() if not line.startswith("# ")] == []
    assert batch == again == walked
    m = _samples(batch)
    assert {k: v for k, v in m.items() if k.startswith("pycore_script_big_n_total{")} == \
        {f'pycore_script_big_n_total{{count="{s}"}}': sizes.count(s) for s in sizes}
    assert {k: v for k, v in m.items() if k.startswith("pycore_script_big_by_total{")} == \
        {f'pycore_script_big_by_total{{comm="s25work",key1="{r}"}}': sum(s for s in sizes if s % 7 == r)
         for r in range(7)}
    for r in range(5):
        assert m[f'pycore_script_big_mean_count{{key0="{r}"}}'] == sum(1 for s in sizes if s % 5 == r)
        assert m[f'pycore_script_big_mean_sum{{key0="{r}"}}'] == sum(s for s in sizes if s % 5 == r)
    for r in range(3):
        assert m[f'pycore_script_big_top{{key0="{r}"}}'] == max(s for s in sizes if s % 3 == r)
    assert m['pycore_script_big_last{key0="1"}'] == 7 and m['pycore_script_big_last{key0="0"}'] == 3000
    assert m['pycore_script_big_sizes_bucket{key0="1",le="+Inf"}'] == 1501


def _parsed(text: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_clear_zero_delete_seen_as_prometheus_expects(workload, tmp_path):
    """clear() removes a map's series, zero() sets its counters to 0 (a counter reset), delete() one key."""
    path = _script(tmp_path, "reset.bt", r"""
tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ {
  @cleared[comm] = count(); @zeroed[comm] = count(); @deleted[comm] = count(); @kept[comm] = count();
}
tracepoint:syscalls:sys_enter_read /comm == "s25work" && args.count == 7/ {
  clear(@cleared); zero(@zeroed); delete(@deleted[comm]);
}
""")
    key = '{comm="s25work"}'
    with serving("--script", path) as (p, port):
        subprocess.run([workload, "4", "/"], check=True)
        m1 = _samples(_get(port))
        subprocess.run([workload, "0", "/", "7"], check=True)
        # clear() and zero() are done by pycore when their ring record arrives (as in bpftrace); delete() in the kernel
        m2 = _wait("clear() and zero()", lambda: (lambda m: m if f"pycore_script_reset_cleared_total{key}" not in m
                                                  else None)(_samples(_get(port))), timeout=10)
    for name in ("cleared", "zeroed", "deleted", "kept"):
        assert m1[f"pycore_script_reset_{name}_total{key}"] == 5
    assert m2[f"pycore_script_reset_zeroed_total{key}"] == 0
    assert f"pycore_script_reset_deleted_total{key}" not in m2
    assert m2[f"pycore_script_reset_kept_total{key}"] == 6
    assert "Traceback" not in p.tail


def test_stack_key_folded_as_bpftrace_prints_it(workload, tmp_path):
    """A kstack key is one label, its frames root first joined by ';': bpftrace's frames (leaf first),
    from bpftrace running the same script beside it, reversed."""
    if shutil.which("bpftrace") is None:
        pytest.skip("needs bpftrace")
    text = 'tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ { @k[kstack(4)] = count(); }\n'
    path = _script(tmp_path, "stk.bt", text)
    with serving("--script", path) as (p, port), \
            running(["bpftrace", "-e", 'BEGIN { printf("ready\\n"); } ' + text]) as bt:
        while bt.stdout.readline() not in ("ready\n", ""):    # BEGIN runs once every probe is attached
            pass
        subprocess.run([workload, "6", "/"], check=True)
        m = _samples(_get(port))
        out, _ = stop(bt)
    theirs = {";".join(reversed(frames.split())): int(n)
              for frames, n in re.findall(r"@k\[\n(.*?)\]: (\d+)", out, re.S)}
    ours = {re.fullmatch(r'pycore_script_stk_k_total\{kstack="(.*)"\}', k).group(1): v
            for k, v in m.items() if k.startswith("pycore_script_stk_k_total{")}
    assert theirs and sum(theirs.values()) == 7
    assert ours == theirs


LATENCY = r"""
// @lat_us: help="clock_nanosleep time of the workload, microseconds"
tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ { @opens[comm, str(args.filename)] = count(); }
tracepoint:syscalls:sys_enter_clock_nanosleep /comm == "s25work"/ { @start[tid] = nsecs; }
tracepoint:syscalls:sys_exit_clock_nanosleep /@start[tid]/ {
  @lat_us = hist((nsecs - @start[tid]) / 1000);
  delete(@start[tid]);
}
"""


def _promql(port: int, query: str, at: float | None = None) -> list[dict]:
    import json

    args = {"query": query, **({"time": f"{at:.3f}"} if at is not None else {})}
    url = f"http://127.0.0.1:{port}/api/v1/query?{urllib.parse.urlencode(args)}"
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait(what: str, check, timeout: float = 30.0):  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.25)


@contextmanager
def prometheus(tmp_path, scrape_configs: str):  # noqa: ANN001
    """Debian's Prometheus (installed by ./dev.sh), scraping every second with these scrape_configs:
    its port once it is ready; stopped at the end."""
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is installed by ./dev.sh"
    pport = _free_port()
    (tmp_path / "prometheus.yml").write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                             f"scrape_configs:\n{scrape_configs}")
    with running([binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{pport}"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as prom:
        def ready() -> bool:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{pport}/-/ready", timeout=2).status == 200
            except OSError:
                return False
        _wait("prometheus ready", ready)
        yield pport
        prom.terminate()
        prom.wait(20)


@pytest.mark.slow
def test_real_prometheus_scrapes(workload, tmp_path):
    """Debian's Prometheus scrapes pycore serve every second; PromQL sees what the workload did."""
    path = _script(tmp_path, "lat.bt", LATENCY)
    opens, sleeps, sleep_ms = 25, 9, 20     # 20 ms: bucket [16384, 32768) us, 12 ms of slack above
    with serving("--script", path) as (p, port), \
            prometheus(tmp_path, f"  - job_name: pycore\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n") \
            as pport:
        series = 'pycore_script_lat_opens_total{comm="s25work",filename="/"}'
        subprocess.run([workload, "1", "/"], check=True)    # the series exists before the run measured
        _wait("the first scrape of the series", lambda: _promql(pport, series))
        time.sleep(2.5)
        t0 = time.time()
        subprocess.run([workload, str(opens), "/"], check=True, env={**os.environ, "SLEEPS": str(sleeps),
                                                                   "SLEEP_MS": str(sleep_ms)})
        _wait("the run scraped", lambda: [r for r in _promql(pport, series) if float(r["value"][1]) == 1 + opens])
        span = 10        # the range: the baseline's samples before the run, the run's after it
        time.sleep(max(0.0, t0 + span - 1 - time.time()))
        t1 = time.time()
        exact = _promql(pport, f"{series} - {series} offset {span}s", at=t1)
        inc = _promql(pport, f"increase({series}[{span}s])", at=t1)
        q = _promql(pport, "histogram_quantile(0.5, pycore_script_lat_lat_us_bucket)", at=t1)
        up = _promql(pport, 'pycore_script_up{script="lat"}', at=t1)
    print(f"increase {inc[0]['value'][1]} over {span}s for {opens} opens; median {q[0]['value'][1]} us")
    assert float(exact[0]["value"][1]) == opens
    # increase() extrapolates from its first and last samples to the ends of its range (1 s scrapes):
    # the run's opens times span / (the samples' own span, at least span - 1.5 s)
    assert opens <= float(inc[0]["value"][1]) <= opens * span / (span - 1.5)
    assert 2 ** 14 - 1 < float(q[0]["value"][1]) <= 2 ** 15 - 1
    assert float(up[0]["value"][1]) == 1


def test_label_names_and_a_slow_scraper(workload, tmp_path):
    """Labels named from the key (probe, cpu; key0, key1 where an expression names none), the map @ as
    'map', pointers in hex; a scraper that sends half a request does not hold up another (a thread per scrape)."""
    path = _script(tmp_path, "names.bt", "tracepoint:syscalls:sys_enter_openat,tracepoint:syscalls:sys_enter_read "
                                         '/comm == "s25work"/ { @[probe] = count(); @p[probe, cpu] = count(); '
                                         '@odd[pid / 2, "x"] = count(); @addr[(int8 *)4096, (uint8 *)-1] = count(); }\n')
    with serving("--script", path) as (p, port):
        proc = subprocess.run([workload, "2", "/", "5", "6", "7"], check=True)
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")     # and never the end of it
            t = time.monotonic()
            m = _samples(_get(port))
            took = time.monotonic() - t
    assert proc.returncode == 0 and took < 5
    assert m['pycore_script_names_map_total{probe="tracepoint:syscalls:sys_enter_openat"}'] == 3
    assert m['pycore_script_names_map_total{probe="tracepoint:syscalls:sys_enter_read"}'] == 3
    by_probe = [k for k in m if k.startswith("pycore_script_names_p_total{")]
    assert all(re.fullmatch(r'pycore_script_names_p_total\{probe="tracepoint:syscalls:sys_enter_\w+",cpu="\d+"\}', k)
               for k in by_probe) and sum(m[k] for k in by_probe) == 6
    odd = [k for k in m if k.startswith("pycore_script_names_odd_total{")]
    assert len(odd) == 1 and re.fullmatch(r'pycore_script_names_odd_total\{key0="\d+",key1="x"\}', odd[0])
    # pointers in hex, as bpftrace prints them as map keys
    assert m['pycore_script_names_addr_total{key0="0x1000",key1="0xffffffffffffffff"}'] == 6


def test_bad_pid_and_no_work(tmp_path):
    require_root()
    path = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    for argv, says in ((["-p", "999999999", "--script", path], "999999999"), ([], "give a TOOL or --script")):
        r = subprocess.run([sys.executable, "-m", "pycore", "serve", *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
