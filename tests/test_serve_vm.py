"""pycore serve --script with scripts served unchanged (issue 25's last acceptance item): the kernel
lab's lock-contention exercise (a hist keyed by lock) and bpftrace 0.17's own tools as Debian installs
them (/usr/sbin/*.bt), scraped over HTTP while a workload of known shape runs.

- the lab exercise (tests/test_trace.py's LOCK_EXERCISES: exercises 1-4 as a user writes them, `$1`
  the threshold, unset here: 0 as in bpftrace) needs tracepoints only: it runs on the host and in the
  kernel VMs. bpftrace 0.17 runs the same exercise at the same time (spelt `args->`, which 0.17
  wants) and starts the workload (-c), so the lock the workload contends most is seen whole by both:
  its series must hold the same number of contentions bpftrace counted.
- bpftrace's tools in the kernel VMs, which have kprobes: tcpsynbl.bt (kprobe:tcp_v4_syn_recv_sock:
  a hist of the accept backlog per backlog limit), vfscount.bt (kprobe:vfs_*: a count per function)
  and tcpconnect.bt (kprobe:tcp_connect). tcpconnect.bt keeps no map (a printf per connect): its
  lines go to the log and its count is the probe's run count; tcpsynbl.bt sees the same connects in
  a map. biolatency.bt is not among them: its four kprobes (blk_account_io_start/done and their
  __ forms) attach in neither Debian kernel, with bpftrace 0.17 either (6.1 inlines the start,
  6.12 refuses all four: bpftrace skips them and serves an empty hist; pycore refuses the script).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest

from tests.conftest import running, stop
from tests.test_serve_script import _get, _le_counts, _samples, _script, serving, workload  # noqa: F401
from tests.test_tools_kernel import tmpfs
from tests.test_trace import LOCK_EXERCISES

kernel = pytest.mark.kernel
TOOLS = Path("/usr/sbin")
INF = float("inf")

# N threads renaming files in one directory, ITER times each: they contend on the directory's lock
RENAMES_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
static const char *dir;
static long iters;
static void *work(void *arg) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/f%ld", dir, (long)arg);
    snprintf(b, sizeof b, "%s/g%ld", dir, (long)arg);
    for (long i = 0; i < iters; i++) {
        int fd = open(a, O_CREAT | O_WRONLY, 0644);
        if (fd >= 0) close(fd);
        rename(a, b);
    }
    return NULL;
}
int main(int argc, char **argv) {
    pthread_t t[8];
    dir = argv[1];
    iters = atol(argv[2]);
    for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (long i = 0; i < 8; i++) pthread_join(t[i], NULL);
    return 0;
}
"""

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bound(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)", text.strip())
    assert m, text
    return int(m.group(1)) * UNITS[m.group(2)]


def bpftrace_hists(out: str, name: str) -> dict[int, dict[float, int]]:
    """bpftrace's text of a hist map keyed by an address: {key: {le: cumulative count}}, the way
    Prometheus reads the buckets ([0] -> le 0, [1] -> 1, [a, b) -> b - 1)."""
    hists: dict[int, dict[float, int]] = {}
    for m in re.finditer(rf"(?m)^@{name}\[(0x[0-9a-f]+)\]: \n((?:\[.*\n)+)", out):
        per: dict[float, int] = {}
        for line in m.group(2).splitlines():
            b = re.match(r"\[([^,\]]+)(?:, ([^)]+)\))?\]?\s+(\d+) \|", line)
            assert b, line
            le = _bound(b.group(2)) - 1 if b.group(2) else _bound(b.group(1))
            per[le] = int(b.group(3))
        total, cum = 0, {}
        for le in sorted(per):
            total += per[le]
            cum[le] = total
        cum[INF] = total
        hists[int(m.group(1), 16)] = cum
    return hists


def served_hists(m: dict[str, float], family: str, label: str) -> dict[int, dict[float, float]]:
    """{address: {le: cumulative count}} of one histogram family keyed by a pointer (a label in hex, as
    bpftrace prints the key) as scraped."""
    out: dict[int, dict[float, float]] = {}
    for k, v in m.items():
        g = re.fullmatch(rf'{family}_bucket\{{{label}="0x([0-9a-f]+)",le="([^"]+)"\}}', k)
        if g:
            out.setdefault(int(g.group(1), 16), {})[float(g.group(2))] = v
    return out


def check_buckets(cum: dict[float, float]) -> None:
    """Buckets of a bpftrace hist as Prometheus wants them: le 0, 1, 3, ..., 2^k - 1 without a gap up
    to the highest used, counts cumulative, +Inf the last."""
    finite = sorted(le for le in cum if le != INF)
    assert finite == [2 ** k - 1 for k in range(len(finite))], finite
    counts = [cum[le] for le in finite] + [cum[INF]]
    assert counts == sorted(counts) and counts[-1] == cum[INF], cum


def scrape(p: subprocess.Popen, port: int) -> str:
    """/metrics; on an HTTP error, the server stopped and its log in the failure."""
    try:
        return _get(port)
    except urllib.error.HTTPError as e:
        _, err = stop(p)
        pytest.fail(f"/metrics: {e}: {e.read().decode(errors='replace')}\nserve's log:\n{p.startup}{err}")


def median_bucket(cum: dict[float, float]) -> int:
    """Index of the bucket (0: le 0, k: le 2^k - 1) that holds the median."""
    return next(int(le + 1).bit_length() - 1 for le in sorted(cum) if cum[le] >= cum[INF] / 2)


def promtool(exposition: str) -> None:
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def build(tmp_path: Path, name: str, source: str, *flags: str) -> str:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-O2", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c"), *flags], check=True)
    return str(tmp_path / name)


# -- the kernel lab's lock-contention exercise ----------------------------------------------------

def lock_exercise_served(tmp_path: Path, iters: int) -> None:
    bpftrace = shutil.which("bpftrace")
    assert bpftrace, "bpftrace is installed by ./dev.sh"
    served = _script(tmp_path, "lock.bt", LOCK_EXERCISES)       # as written, args.lock_addr and all
    (tmp_path / "peer.bt").write_text(LOCK_EXERCISES.replace("args.", "args->"))
    t0 = time.monotonic()
    renames = build(tmp_path, "renames", RENAMES_C, "-pthread")
    t1 = time.monotonic()
    with tmpfs(tmp_path / "mnt") as mnt, serving("--script", served) as (p, port):
        assert 'pycore_script_up{script="lock"} 1' in scrape(p, port)
        t2 = time.monotonic()
        # bpftrace attaches, then starts the workload and waits for it: all its contentions are in both
        peer = subprocess.run([bpftrace, "-c", f"{renames} {mnt} {iters}", str(tmp_path / "peer.bt")],
                              capture_output=True, text=True, timeout=600)
        assert peer.returncode == 0, peer.stderr
        t3 = time.monotonic()
        exposition = scrape(p, port)
        later = scrape(p, port)
    print(f"seconds: gcc {t1 - t0:.1f}, serve up {t2 - t1:.1f}, bpftrace -c workload {t3 - t2:.1f}")
    assert p.returncode == 0, p.tail
    assert "Traceback" not in p.tail
    m = _samples(exposition)
    theirs = bpftrace_hists(peer.stdout, "long_block_times")
    ours = served_hists(m, "pycore_script_lock_long_block_times", "lock_addr")
    assert theirs and ours, (peer.stdout[:500], exposition[:500])
    for cum in ours.values():
        check_buckets(cum)
    assert min(ours) >= 0xff00_0000_0000_0000    # kernel addresses (6.12's direct map: 0xff1...)
    # the lock the workload contended most: each tracer timed every one of its contentions
    hot = max(theirs, key=lambda k: theirs[k][INF])
    assert hot in ours, (hex(hot), sorted(map(hex, ours)))
    print(f"lock {hex(hot)}: {theirs[hot][INF]} contentions; bpftrace {theirs[hot]}; served {ours[hot]}")
    assert ours[hot][INF] == theirs[hot][INF] >= 10
    # the same durations, each timed by its own program: one tracer's program runs between the other's
    # clock reads, which moves every duration by its cost (~10% of them across 1 us on the host), so
    # the medians are compared: the same bucket or a neighbour
    assert abs(median_bucket(ours[hot]) - median_bucket(theirs[hot])) <= 1, (ours[hot], theirs[hot])
    # exercise 4: the kind of each lock contended, counted when it began. A scrape reads the maps one
    # after another while the kernel's threads go on contending, so the kinds are taken from a later
    # scrape. Still one kind was missing twice in CI (109 kinds for 110 timed; 74 for 75 with the later
    # scrape): a begin's count() update lost while its @[tid, lock] update went in. Not explained yet;
    # a hash map update refused with -EBUSY (its bucket lock taken again on the same CPU, as bpftrace's
    # maps would be too) fits. So nearly every one, not every one.
    kinds = {k: v for k, v in _samples(later).items() if k.startswith("pycore_script_lock_type_total{")}
    assert kinds and all(re.fullmatch(r'pycore_script_lock_type_total\{key0="(spin|read|write|rt|percpu|mutex|'
                                      r'other)"\}', k) for k in kinds), kinds
    assert sum(kinds.values()) >= 0.95 * sum(c[INF] for c in ours.values())
    promtool(exposition)


def test_lock_contention_exercise_served(tmp_path):
    lock_exercise_served(tmp_path, 3000)


@kernel
def test_lock_contention_exercise_served_vm(tmp_path):
    lock_exercise_served(tmp_path, 600)


def test_a_line_of_several_records(workload, tmp_path):
    """tcpconnect.bt's way of printing, on the host: time(), printf() without a newline, then one with
    it; the log has the line whole, as bpftrace's output has it."""
    path = _script(tmp_path, "parts.bt", 'tracepoint:syscalls:sys_enter_openat /comm == "s25work"/ '
                                         '{ time("%H:%M:%S "); printf("%-8d %-16s ", pid, comm); '
                                         'printf("%s\\n", str(args.filename)); }\n')
    (tmp_path / "target").touch()
    with serving("--script", path) as (p, port):
        subprocess.run([workload, "3", "target"], check=True, cwd=tmp_path)
        time.sleep(1)
    lines = [ln for ln in p.tail.splitlines() if ln.startswith("parts: ")]
    assert len(lines) == 4 and all(re.fullmatch(r"parts: \d\d:\d\d:\d\d \d+ +s25work +\S+", ln) for ln in lines), lines
    assert [ln.split()[-1] for ln in lines] == ["target"] * 3 + ["/dev/zero"], lines


# -- bpftrace's tools: tcpsynbl.bt, vfscount.bt, tcpconnect.bt -------------------------------------

BACKLOG, CONNECTS, RW = 16, 10, 500


def connects(n: int) -> tuple[int, list[socket.socket]]:
    """n IPv4 connections to a listener of ours with backlog BACKLOG, none accepted until the last is
    queued: the i-th handshake finds i sockets waiting (tcpsynbl.bt's sk_ack_backlog)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(BACKLOG)
    port = srv.getsockname()[1]
    clients = []
    for i in range(n):
        clients.append(socket.create_connection(("127.0.0.1", port)))
        deadline = time.monotonic() + 10
        # a listener's TCP_INFO: tcpi_unacked is its accept queue (sk_ack_backlog), tcpi_sacked its limit
        while True:
            info = srv.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
            unacked, sacked = int.from_bytes(info[24:28], "little"), int.from_bytes(info[28:32], "little")
            if unacked == i + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert (unacked, sacked) == (i + 1, BACKLOG)
    accepted = [srv.accept()[0] for _ in range(n)]
    for s in clients + accepted + [srv]:
        s.close()
    return port, clients


@kernel
def test_bpftrace_tools_served():
    tools = [str(TOOLS / t) for t in ("tcpsynbl.bt", "vfscount.bt", "tcpconnect.bt")]
    with serving(*[a for t in tools for a in ("--script", t)]) as (p, port):
        first = _samples(scrape(p, port))
        for name in ("tcpsynbl", "vfscount", "tcpconnect"):
            assert first[f'pycore_script_up{{script="{name}"}}'] == 1, p.startup
        listener, _ = connects(CONNECTS)
        before = _samples(scrape(p, port))
        zero, null = os.open("/dev/zero", os.O_RDONLY), os.open("/dev/null", os.O_WRONLY)
        for _ in range(RW):
            os.write(null, os.read(zero, 100))
        os.close(zero)
        os.close(null)
        exposition = scrape(p, port)
        time.sleep(1)                   # the last output lines reach the log
    assert p.returncode == 0, p.tail
    assert "Traceback" not in p.tail
    m = _samples(exposition)

    # tcpsynbl.bt: @backlog[limit] = hist(backlog): the i-th of the connects found i waiting
    syn = _le_counts(m, "pycore_script_tcpsynbl_backlog", f'key0="{BACKLOG}"')
    print("tcpsynbl:", syn)
    assert syn == {le: sum(1 for i in range(CONNECTS) if i <= le) for le in (0, 1, 3, 7, 15, INF)}, syn
    # other series: serve's own listener (http.server's backlog of 5), which took the scrapes
    assert {re.search(r'key0="(\d+)"', k).group(1) for k in m if k.startswith("pycore_script_tcpsynbl_")} <= {
        str(BACKLOG), "5"}

    # tcpconnect.bt: no map; a line per connect in the log, and the probe's run count
    lines = [ln for ln in p.tail.splitlines() if ln.startswith("tcpconnect: ") and ln.split()[-1] == str(listener)]
    print("tcpconnect:", *lines, sep="\n  ")
    assert len(lines) == CONNECTS, p.tail
    # TIME PID COMM SADDR SPORT DADDR DPORT: time(), then two printf()s, one line of the log
    row = rf"tcpconnect: \d\d:\d\d:\d\d {os.getpid()} +\S+ +127\.0\.0\.1 +\d+ +127\.0\.0\.1 +{listener}"
    assert all(re.fullmatch(row, ln.rstrip()) for ln in lines), lines
    assert re.search(r"(?m)^tcpconnect: TIME +PID +COMM +SADDR +SPORT +DADDR +DPORT *$", p.startup), p.startup
    runs = m['pycore_script_probe_runs_total{probe="kprobe:tcp_connect",script="tcpconnect"}']
    assert runs >= CONNECTS     # and the scrapes' own connects

    # vfscount.bt: @[func] = count() over kprobe:vfs_*, a label per function
    series = {f: f'pycore_script_vfscount_map_total{{func="{f}"}}' for f in ("vfs_read", "vfs_write")}
    delta = {f: m[k] - before.get(k, 0) for f, k in series.items()}
    print("vfscount, increase over the reads and writes:", delta)
    assert all(RW <= d < RW + 200 for d in delta.values()), delta
    promtool(exposition)
