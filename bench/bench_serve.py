"""What a scrape of pycore serve --script costs, against what a user does today.

    python bench/bench_serve.py [-n 200] [--seconds 10]

1. A 10,000-key count() map (the keys made by a gcc-built workload reading 1..10,000 bytes): one
   scrape of it as pycore serve writes it (ScriptCollector.maps_text and the health families'
   text, families_text, in this process, the map read from the kernel each time): milliseconds per
   scrape and CPU seconds per 1,000 scrapes.
2. The alternative: bpftrace 0.17 holding the same map and printing it as json every second
   (``interval:s:1 { print(@m); }`` -f json, BPFTRACE_MAP_KEYS_MAX=10000) into a small exporter
   (json.loads and the exposition text of each print, in Python): bpftrace's CPU time over the
   run minus an identical run without the print, plus the parse's. Compared per exported sample.
3. pycore serve with 20 small scripts over HTTP (2,240 map samples and 304 health samples a scrape),
   in the text format and in OpenMetrics (what Prometheus asks for): milliseconds per scrape, the
   server's CPU seconds per 1,000 scrapes; and the resident memory of serve with 10 scripts
   (bpftrace: ~85 MB each).

The issue's goals: <= 0.2x the alternative's CPU per exported sample, a 10,000-series scrape under
100 ms, serve with 10 scripts under 100 MB. A benchmark measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WORKLOAD = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {   /* reads 1..N bytes from /dev/zero, N = argv[1] */
    static char buf[1 << 16];
    int z = open("/dev/zero", O_RDONLY), n = atoi(argv[1]);
    for (int i = 1; i <= n; i++) if (read(z, buf, i) < 0) return 1;
    return 0;
}
"""
SCRIPT = 'tracepoint:syscalls:sys_enter_read /comm == "s25bench"/ { @m[args->count] = count(); }\n'
KEYS = 10_000
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(workload: str, n: int) -> tuple[float, float]:
    """(ms per scrape, CPU s per 1,000 scrapes) of the 10,000-key map, in this process."""
    from pycore.lang.metrics import ScriptCollector, families_text
    from pycore.lang.runtime import Script

    with Script(SCRIPT, filename="bench.bt", map_keys=KEYS) as script:
        script.load()
        script.attach()
        subprocess.run([workload, str(KEYS)], check=True)
        collector = ScriptCollector(script, "bench")
        text = collector.maps_text()
        assert text.count("\n") >= KEYS, "the map did not fill"
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            collector.maps_text()
            families_text(collector.health_rows())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / n * 1e3, cpu / n * 1e3


def theirs(workload: str, seconds: float) -> tuple[float, float, int]:
    """(bpftrace's CPU s per print, the exporter's parse CPU s per print, prints) of the same map."""
    env = {**os.environ, "BPFTRACE_MAP_KEYS_MAX": str(KEYS)}

    def run(printing: bool) -> tuple[float, list[str]]:
        prog = "BEGIN { printf(\"ready\\n\"); } " + SCRIPT + ("interval:s:1 { print(@m); }" if printing else "")
        p = subprocess.Popen(["bpftrace", "-f", "json", "-e", prog], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout is not None
        for line in p.stdout:
            if "ready" in line:
                break
        # read bpftrace's output as it comes, as an exporter does: a print of 10,000 keys (~110 kB) does
        # not fit a pipe's 64 kB, so unread, bpftrace would block in its first print and print once
        lines: list[tuple[float, str]] = []
        reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), x) for x in p.stdout), daemon=True)
        reader.start()
        subprocess.run([workload, str(KEYS)], check=True)
        t0, start = time.monotonic(), _cpu(p.pid)
        time.sleep(seconds)
        used, t1 = _cpu(p.pid) - start, time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
        reader.join(timeout=60)
        # the prints that ended within the CPU time measured (not the one at exit)
        return used, [x for t, x in lines if t0 <= t <= t1 and '"type": "map"' in x]

    idle, _ = run(False)
    busy, prints = run(True)
    parse = time.process_time()
    for line in prints:
        data = json.loads(line)["data"]["@m"]
        "".join(f'pycore_m_total{{count="{k}"}} {v}\n' for k, v in data.items())
    parse = time.process_time() - parse
    n = max(1, len(prints))
    return (busy - idle) / n, parse / n, len(prints)


#: the Accept header of Prometheus 2's scrapes
OPENMETRICS = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
               "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def served(workload: str, scripts: int, scrapes: int, accept: str = "") -> tuple[float, float, float]:
    """(ms per scrape, server CPU s per 1,000 scrapes, RSS MB) of pycore serve with ``scripts`` scripts
    (``accept``: the scrapes' Accept header)."""
    d = tempfile.mkdtemp(prefix="bench-serve-")
    try:
        paths = []
        for i in range(scripts):
            path = os.path.join(d, f"s{i}.bt")
            with open(path, "w") as f:
                f.write(f'tracepoint:syscalls:sys_enter_read /comm == "s25bench"/ {{ @m{i}[args.count % 100] = count(); '
                        f'@h{i} = hist(args.count); }}\n')
            paths.append(path)
        port = _free_port()
        argv = [sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{port}"]
        for path in paths:
            argv += ["--script", path]
        p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert p.stderr is not None
        try:
            line = p.stderr.readline()
            if not line.startswith("pycore serve: http://"):
                raise SystemExit(f"serve did not start: {line}")
            subprocess.run([workload, "1000"], check=True)
            url = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept} if accept else {})
            urllib.request.urlopen(url).read()
            rss = _rss_mb(p.pid)
            cpu, wall = _cpu(p.pid), time.perf_counter()
            for _ in range(scrapes):
                urllib.request.urlopen(url).read()
            wall, cpu = time.perf_counter() - wall, _cpu(p.pid) - cpu
        finally:            # a failed scrape leaves no server behind
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
        if err.strip():
            print(f"pycore serve ({scripts} scripts) said: {err.strip()}", file=sys.stderr)
        return wall / scrapes * 1e3, cpu / scrapes * 1e3, rss
    finally:
        shutil.rmtree(d)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=200, help="scrapes measured (default 200)")
    p.add_argument("--seconds", type=float, default=10, help="seconds bpftrace prints for (default 10)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-serve-w-") as d:
        with open(os.path.join(d, "w.c"), "w") as f:
            f.write(WORKLOAD)
        workload = os.path.join(d, "s25bench")
        subprocess.run(["gcc", "-O1", "-static", "-o", workload, os.path.join(d, "w.c")], check=True)
        ms, cpu_k = ours(workload, args.n)
        print(f"pycore, a {KEYS:,}-key map: {ms:.1f} ms a scrape, {cpu_k:.1f} CPU s per 1,000 scrapes")
        if shutil.which("bpftrace"):
            bt, parse, prints = theirs(workload, args.seconds)
            per_ours = cpu_k / 1000 / KEYS
            per_theirs = (bt + parse) / KEYS
            print(f"bpftrace -f json every 1 s + a Python exporter ({prints} prints): {bt * 1e3:.1f} ms CPU "
                  f"printing + {parse * 1e3:.1f} ms parsing per print of {KEYS:,} keys")
            print(f"CPU per exported sample: pycore {per_ours * 1e6:.2f} us, the alternative "
                  f"{per_theirs * 1e6:.2f} us: {per_ours / per_theirs:.2f}x (goal <= 0.2x)")
        for what, accept in (("text format", ""), ("OpenMetrics", OPENMETRICS)):
            ms20, cpu20, _ = served(workload, 20, args.n, accept)
            print(f"pycore serve, 20 scripts over HTTP, {what}: {ms20:.1f} ms a scrape, {cpu20:.1f} CPU s per "
                  "1,000 scrapes")
        _, _, rss = served(workload, 10, 5)
        print(f"pycore serve, 10 scripts: {rss:.0f} MB resident (goal < 100 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
