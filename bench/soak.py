"""Soak: an agent-shaped pycore process under a high event rate, for a bounded time.

    .venv/bin/python bench/soak.py [--duration 600] [--json]

Runs ``pycore serve`` with fget-crack, fd-leak and lock-contention (the
agent use: several tools in one process, scraped over HTTP) while a
workload process opens and closes a file named ``libcrack-soak.so`` as fast
as it can, traced alone (``-p``): every open is one fget-crack event through the ring buffer, one
insert and one delete in fd-leak's map.  /metrics is scraped every second,
as Prometheus would.  Every ``--sample`` seconds the serve process's RSS and
open descriptor count are read from /proc, with the events and lost events
it reports.  It stops by itself after ``--duration`` seconds, SIGTERMs
serve, and checks that it exits 0 and leaves none of its programs loaded.

Prints the samples, then the verdict figures: RSS and fd count at the end
of warm-up and at the end (after warm-up the process should be flat), the
event rate and the lost share.  With ``--json`` prints one JSON object
(tests/test_soak.py runs a short soak that way and asserts on it).
It measures; it does not assert.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYCORE = [sys.executable, "-m", "pycore"]
TOOLS = ("fget-crack", "fd-leak", "lock-contention")
PROGRAMS = ("sys_exit_fd", "fget_exit", "fd_opened", "fd_closed")  # what serve loads for TOOLS' events

WORKLOAD = """
    import os, sys, time
    sys.stdin.readline()                # go: serve is attached to this pid
    path = os.path.join(sys.argv[1], "libcrack-soak.so")
    open(path, "w").close()             # one event too: opens + 1 in all
    n = 0
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        for _ in range(1000):
            os.close(os.open(path, os.O_RDONLY))
        n += 1000
    print(n, flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    """Sample name (with labels) -> value, from one GET /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def settled(port: int, opens: int, timeout: float = 15.0) -> dict[str, float]:
    """The metrics once the consumer has caught up: every open seen (events
    or lost), or the counts stopped moving, or ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        m = scrape(port)
        seen = m.get('pycore_events_total{tool="fget-crack"}', 0) + m.get('pycore_lost_events_total{tool="fget-crack"}', 0)
        if seen >= opens + 1 or seen == last or time.monotonic() > deadline:
            return m
        last = seen
        time.sleep(0.5)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS/VmHWM in KiB and the open descriptor count of ``pid``."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def loaded_programs() -> set[int]:
    text = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return {p["id"] for p in json.loads(text or "[]") if p.get("name") in PROGRAMS}


def soak(duration: float, sample_every: float, warmup: float) -> dict:
    port = free_port()
    before = loaded_programs()
    tmp = tempfile.TemporaryDirectory(prefix="pycore-soak-")
    script = Path(tmp.name) / "workload.py"
    script.write_text(textwrap.dedent(WORKLOAD))
    # The workload first, waiting for "go", so serve can trace it alone (-p):
    # other processes opening crack files neither disturb the count nor get
    # disturbed by ours.
    workload = subprocess.Popen([sys.executable, str(script), tmp.name, str(duration)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    serve = subprocess.Popen([*PYCORE, "serve", "--listen", f"127.0.0.1:{port}", "-p", str(workload.pid), *TOOLS],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples: list[dict] = []
    scrapes = 0
    try:
        while "http://" not in (line := serve.stderr.readline()):   # fallback notices come first
            if not line:
                raise RuntimeError(f"pycore serve exited with {serve.wait()} before serving")
        ours = loaded_programs() - before
        workload.stdin.write("go\n")
        workload.stdin.close()
        t0 = time.monotonic()
        next_sample = t0
        metrics: dict[str, float] = {}
        while workload.poll() is None:
            now = time.monotonic()
            if now >= next_sample:
                # Before this round's scrape, a second after the last one: the
                # server has closed that connection by now, so fds counts
                # only what serve holds (sampled right after a scrape, its
                # socket shows up now and then as one more fd).
                st = proc_status(serve.pid)
                samples.append({
                    "t": round(now - t0, 1), "rss_kb": st["VmRSS"], "hwm_kb": st["VmHWM"], "fds": st["fds"],
                    "events": int(metrics.get('pycore_events_total{tool="fget-crack"}', 0)),
                    "lost": int(metrics.get('pycore_lost_events_total{tool="fget-crack"}', 0)),
                })
                next_sample += sample_every
            metrics = scrape(port)
            scrapes += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        opens = int(workload.stdout.read().strip() or 0)
        elapsed = time.monotonic() - t0
        final = settled(port, opens)
    finally:
        if workload.poll() is None:
            workload.kill()
            workload.wait()
        serve.send_signal(signal.SIGTERM)
        try:
            rc = serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
            rc = serve.wait()
        tmp.cleanup()
    deadline = time.monotonic() + 10
    while (left := loaded_programs() & ours) and time.monotonic() < deadline:
        time.sleep(0.2)

    steady = [s for s in samples if s["t"] >= warmup] or samples
    events = int(final.get('pycore_events_total{tool="fget-crack"}', 0))
    lost = int(final.get('pycore_lost_events_total{tool="fget-crack"}', 0))
    return {
        "duration_s": round(elapsed, 1), "warmup_s": warmup, "scrapes": scrapes, "opens": opens,
        "events": events, "lost": lost, "events_per_s": round(events / elapsed),
        "rss_kb_after_warmup": steady[0]["rss_kb"], "rss_kb_end": steady[-1]["rss_kb"],
        "rss_kb_min": min(s["rss_kb"] for s in steady), "rss_kb_max": max(s["rss_kb"] for s in steady),
        "rss_kb_median_first_fifth": statistics.median(s["rss_kb"] for s in steady[:max(1, len(steady) // 5)]),
        "rss_kb_median_last_fifth": statistics.median(s["rss_kb"] for s in steady[-max(1, len(steady) // 5):]),
        "hwm_kb": samples[-1]["hwm_kb"],
        "fds_after_warmup": steady[0]["fds"], "fds_end": steady[-1]["fds"],
        "fds_min": min(s["fds"] for s in steady), "fds_max": max(s["fds"] for s in steady),
        "serve_exit": rc, "programs_left": sorted(left), "samples": samples,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between RSS/fd samples (default 10)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds before the flat part (default: a tenth)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    r = soak(a.duration, a.sample, a.duration / 10 if a.warmup is None else a.warmup)
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{'t(s)':>7} {'RSS(KiB)':>9} {'fds':>4} {'events':>11} {'lost':>9}")
    for s in r["samples"]:
        print(f"{s['t']:>7} {s['rss_kb']:>9} {s['fds']:>4} {s['events']:>11} {s['lost']:>9}")
    print(f"\nsoak: {r['duration_s']} s, {r['opens']} opens, {r['events']} events "
          f"({r['events_per_s']}/s), {r['lost']} lost ({100 * r['lost'] / max(1, r['events'] + r['lost']):.1f}%), "
          f"{r['scrapes']} scrapes")
    print(f"RSS after {r['warmup_s']:.0f} s warm-up {r['rss_kb_after_warmup']} KiB, end {r['rss_kb_end']} KiB, "
          f"range {r['rss_kb_min']}-{r['rss_kb_max']} KiB, median first/last fifth "
          f"{r['rss_kb_median_first_fifth']:.0f}/{r['rss_kb_median_last_fifth']:.0f} KiB, peak {r['hwm_kb']} KiB")
    print(f"fds after warm-up {r['fds_after_warmup']}, end {r['fds_end']}, range {r['fds_min']}-{r['fds_max']}")
    print(f"serve exit {r['serve_exit']}, programs left {r['programs_left'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
