"""pycore profile --off-cpu on the real kernel: a CPython 3.11 workload with a known split of its waits.

The workload (tests/offcpu_workload.py) waits in two functions, ``sleeper``
(time.sleep: clock_nanosleep) about 60% and ``reader`` (os.read on a pipe a
helper process answers) about 40% of its wall time, and measures each
function's off-CPU time itself (wall minus CPU time).  pycore's share of the
time waited under each function must be within 2 points of it; the kernel
frames must show the wait path, the Python frames be spliced into the native
stack, and every format carry the time waited in its own unit.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import gone, programs, prog_ids_of
from tests.test_profile_cpython import start_workload_313, trixie  # noqa: F401 - trixie: a fixture
from tests.test_profile import CHROMIUM, PYTHON, flame_nodes, folded_stacks, parse_flame, python_name, stop_workload

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "offcpu_workload.py"
PYCORE = [sys.executable, "-m", "pycore", "profile"]
FUNCS = ("sleeper", "reader")


def start_workload(seconds: float = 60) -> subprocess.Popen:
    proc = subprocess.Popen([PYTHON, str(WORKLOAD), str(seconds)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    return proc


def run_profile(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(PYCORE + list(args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def held_while_running(p: subprocess.Popen, timeout: float = 30) -> set[int]:
    """The ids of the programs process ``p`` holds once it has loaded one (on_switch)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        ids = prog_ids_of(p.pid)
        if "on_switch" in programs(ids):
            return ids
        time.sleep(0.1)
    raise AssertionError("pycore profile --off-cpu never held its on_switch program")


def weights(stacks: list[tuple[list[str], int]]) -> tuple[dict[str, int], int]:
    """Microseconds waited under each workload function (once per stack), and in all."""
    got = dict.fromkeys(FUNCS, 0)
    for frames, n in stacks:
        names = {python_name(f) for f in frames}
        for func in FUNCS:
            if func in names:
                got[func] += n
    return got, sum(n for _, n in stacks)


def test_shares_kernel_paths_and_splice(record_property):
    """pycore.profile(pid, off_cpu=True): each function's share of the time waited within 2 points of the
    workload's own; the kernel frames are the wait's (nanosleep, pipe read, down to __schedule); the
    Python frames sit in the native stack; only on_switch is attached, and nothing after close()."""
    wl = start_workload()
    try:
        truth, prof, ids = profile_off_cpu(wl, 6)
        assert gone(ids)
        folded = prof.folded()                     # named while the workload still runs
        top = prof.top(100, "total")
    finally:
        stop_workload(wl)
    stacks, share, expected = shares_of(folded, truth)
    got, total = weights(stacks)
    print(f"\nworkload/pycore off-CPU shares (%), {prof.profile.waits} waits, {total / 1e6:.2f} s: "
          f"{ {f: f'{expected[f]:.1f}/{share[f]:.1f}' for f in FUNCS} }")
    record_property("offcpu_shares", json.dumps({"truth": expected, "pycore": share, "waits": prof.profile.waits}))
    for f in FUNCS:
        assert abs(share[f] - expected[f]) <= 2.0, (f, expected, share)
    # the time waited is the workload's: 6 s less the waits cut by the window's ends
    assert 0.9 * truth["total"] <= total / 1e6 <= 1.05 * truth["total"] + 0.1, (total, truth)
    assert all(frames[0] == f"python3.11 ({wl.pid})" for frames, _ in stacks)
    # every wait ends in __schedule (the tracepoint's own frames above it are cut), the wait path above it
    assert all(frames[-1] == "__schedule_[k]" for frames, _ in stacks)
    sleeps = [(frames, n) for frames, n in stacks if "sleeper" in map(python_name, frames)]
    reads = [(frames, n) for frames, n in stacks if "reader" in map(python_name, frames)]
    assert sum(n for frames, n in sleeps if "do_nanosleep_[k]" in frames) >= 0.9 * got["sleeper"]
    assert sum(n for frames, n in reads if any(f.endswith("pipe_read_[k]") for f in frames)) >= 0.8 * got["reader"]
    # spliced: <module> in place of the _PyEval_EvalFrameDefault PyEval_EvalCode calls, and native
    # frames (time.sleep's C code, libc's clock_nanosleep) between sleeper and the kernel's frames
    spliced = sum(n for frames, n in stacks
                  if any(a == "PyEval_EvalCode" and python_name(b) == "<module>" for a, b in zip(frames, frames[1:])))
    assert spliced >= 0.9 * total, (spliced, total)
    for frames, _ in sleeps:
        after = frames[[python_name(f) for f in frames].index("sleeper") + 1:]
        if "do_nanosleep_[k]" in after:            # (not a preemption in sleeper's own bytecode)
            native = after[:next(i for i, f in enumerate(after) if f.endswith("_[k]"))]
            assert "clock_nanosleep" in native, frames
    # top: seconds waited, the functions' totals
    head, *rows = top.splitlines()
    assert re.fullmatch(r"\d+\.\d\d s off-CPU in \d+ waits \(\d+\.\d s\)", head), head
    assert float(head.split()[0]) == pytest.approx(total / 1e6, abs=0.01)
    row = next(r for r in rows if r.endswith(f"sleeper ({WORKLOAD})"))
    assert float(row.split()[2]) == pytest.approx(share["sleeper"], abs=0.1)
    assert float(row.split()[3]) == pytest.approx(got["sleeper"] / 1e6, abs=0.01)


def profile_off_cpu(proc: subprocess.Popen, seconds: float) -> tuple[dict, object, set[int]]:
    """pycore.profile(off_cpu=True) over the workload for ``seconds``, its truth from SIGUSR1 (once
    attached) to SIGUSR2 (just before detaching): (the truth, the closed session, its program ids)."""
    import pycore

    with pycore.profile(proc.pid, off_cpu=True) as prof:
        ids = prog_ids_of(os.getpid())
        assert programs(ids) == {"on_switch"}
        proc.send_signal(signal.SIGUSR1)
        time.sleep(seconds)
        proc.send_signal(signal.SIGUSR2)
        truth = json.loads(proc.stdout.readline())
    return truth, prof, ids


def shares_of(folded: str, truth: dict) -> tuple[list, dict[str, float], dict[str, float]]:
    """(the stacks, pycore's share of the time waited under each function, the workload's)."""
    stacks = [(line.rsplit(" ", 1)[0].split(";"), int(line.rsplit(" ", 1)[1])) for line in folded.splitlines()]
    got, total = weights(stacks)
    return (stacks, {f: 100.0 * got[f] / total for f in FUNCS},
            {f: 100.0 * truth["off"][f] / truth["total"] for f in FUNCS})


def test_python313_in_its_root(trixie):  # noqa: F811 - the fixture imported above
    """The same split on Debian 13's python3.13 in its own root (the offsets it publishes): within 2 points."""
    wl = start_workload_313(trixie, workload=WORKLOAD.name)
    try:
        truth, prof, _ = profile_off_cpu(wl, 5)
        folded = prof.folded()
    finally:
        stop_workload(wl)
    stacks, share, expected = shares_of(folded, truth)
    print(f"\npython3.13 workload/pycore off-CPU shares (%): { {f: f'{expected[f]:.1f}/{share[f]:.1f}' for f in FUNCS} }")
    assert all(frames[0] == f"python3.13 ({wl.pid})" for frames, _ in stacks)
    assert any("do_nanosleep_[k]" in frames and "sleeper" in map(python_name, frames) for frames, _ in stacks)
    for f in FUNCS:
        assert abs(share[f] - expected[f]) <= 2.0, (f, expected, share)


def test_cli_p_formats(tmp_path):
    """-p: pprof with the wait unit read by go tool pprof -top, speedscope weights and the HTML page in
    seconds waited, top without -o; the summary line says waits and seconds."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not installed (dev.sh installs golang-go): go tool pprof reads the .pb.gz")
    wl = start_workload()
    pb, ss, page = tmp_path / "w.pb.gz", tmp_path / "w.speedscope.json", tmp_path / "w.html"
    try:
        runs = [run_profile("--off-cpu", "-p", str(wl.pid), "-d", "2", "-o", str(out)) for out in (pb, ss, page)]
        table = run_profile("--off-cpu", "-p", str(wl.pid), "-d", "2", "--sort", "total", "--top", "80")
    finally:
        stop_workload(wl)
    for res in runs + [table]:
        assert res.returncode == 0, res.stderr
        assert re.fullmatch(r"pycore profile: \d+ waits, \d+\.\d\d s off-CPU in \d\.\d s(, written to .*)?\n",
                            res.stderr), res.stderr
    # pprof: one value, wait/nanoseconds; go tool pprof prints it in seconds
    raw = gzip.decompress(pb.read_bytes())
    # sample_type {type: 1, unit: 2}, then the samples (no second value); strings 0..2: "", wait, nanoseconds
    assert raw.startswith(b"\x0a\x04\x08\x01\x10\x02\x12") and b"2\x002\x04wait2\x0bnanoseconds" in raw
    top = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=200", str(pb)], capture_output=True,
                         text=True, timeout=120)
    assert top.returncode == 0, top.stderr
    assert "Type: wait" in top.stdout, top.stdout
    m = re.search(r"Showing nodes accounting for [\d.]+m?s, [\d.]+% of ([\d.]+)(m?s) total", top.stdout)
    assert m, top.stdout
    seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    assert 1.5 <= seconds <= 2.2, top.stdout
    cum = {}
    for line in top.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-1] in FUNCS:
            cum[parts[-1]] = float(parts[4].rstrip("%"))
    assert set(cum) == set(FUNCS) and 45 < cum["sleeper"] < 75 and 25 < cum["reader"] < 55, top.stdout
    # speedscope: weights are seconds waited
    doc = json.loads(ss.read_text())
    prof = doc["profiles"][0]
    assert prof["unit"] == "seconds" and 1.5 <= sum(prof["weights"]) <= 2.2, sum(prof["weights"])
    # the page: its hover and search speak in seconds waited
    flame = parse_flame(page.read_text())
    assert flame["offcpu"] is True and flame["hz"] == 0 and 1.5e6 <= flame["samples"] <= 2.2e6
    head = table.stdout.splitlines()[0]
    assert re.fullmatch(r"\d+\.\d\d s off-CPU in \d+ waits \(2\.\d s\)", head), head
    assert any(line.endswith(f"reader ({WORKLOAD})") for line in table.stdout.splitlines())


def test_html_off_cpu_in_chromium(tmp_path):
    """The off-CPU page in headless Chromium: its info line, hover and search say seconds waited (the
    tree's microseconds) and shares."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed (pyproject's test extra has it)")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing (dev.sh installs Debian's chromium)")
    wl = start_workload()
    page_file = tmp_path / "wait.html"
    try:
        res = run_profile("--off-cpu", "-p", str(wl.pid), "-d", "2", "-o", str(page_file))
    finally:
        stop_workload(wl)
    assert res.returncode == 0, res.stderr
    doc = parse_flame(page_file.read_text())
    nodes = flame_nodes(doc["tree"], doc["names"])
    total = nodes[0][1]
    outer = [i for i, (path, _, _) in enumerate(nodes) if path and python_name(path[-1]) == "sleeper"]
    sleeper = max(outer, key=lambda i: nodes[i][1])
    hit = sum(nodes[i][1] for i, (path, _, _) in enumerate(nodes) if path and python_name(path[-1]) == "reader")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            assert page.title() == f"pycore profile -p {wl.pid}, off-CPU"
            info = page.inner_text("#info")
            assert re.fullmatch(r"off-CPU: ([\d.]+) s waited in (\d+) waits, [\d.]+ s", info), info
            assert float(info.split()[1]) == pytest.approx(total / 1e6, abs=0.006)
            page.locator(f'.f[data-i="{sleeper}"]').hover()
            status = page.inner_text("#status")
            m = re.fullmatch(r"(sleeper \(.*?\))  ([\d.]+) s waited, ([\d.]+)% of all", status)
            assert m and m.group(1) == nodes[sleeper][0][-1], status
            assert float(m.group(2)) == pytest.approx(nodes[sleeper][1] / 1e6, abs=0.0006)
            assert float(m.group(3)) == pytest.approx(100 * nodes[sleeper][1] / total, abs=0.006)
            page.fill("#search", "reader (")
            assert page.inner_text("#matched") == f"Matched: {hit / 1e6:.3f} s waited ({100 * hit / total:.2f}%)"
        finally:
            browser.close()
    assert errors == [] and hit > 0


def test_cli_c_and_all(tmp_path):
    """-c runs the workload to its end; -a records every process's waits but pycore's own."""
    out = tmp_path / "c.folded"
    res = run_profile("--off-cpu", "-c", f"{PYTHON} {WORKLOAD} 2", "-o", str(out))
    assert res.returncode == 0, res.stderr
    names = {python_name(f) for frames, _ in folded_stacks(out) for f in frames}
    assert {"<module>", "main", "timed", "sleeper", "reader"} <= names
    wl = start_workload()
    everything = tmp_path / "all.folded"
    try:
        prof = subprocess.Popen(PYCORE + ["--off-cpu", "-a", "-d", "1.5", "-o", str(everything)], cwd=ROOT,
                                stderr=subprocess.PIPE, text=True)
        ids = held_while_running(prof)
        _, err = prof.communicate(timeout=120)
    finally:
        stop_workload(wl)
    assert prof.returncode == 0, err
    stacks = folded_stacks(everything)
    mine = [frames for frames, _ in stacks if frames[0] == f"python3.11 ({wl.pid})"]
    assert any("sleeper" in map(python_name, frames) for frames in mine)
    assert len({frames[0] for frames, _ in stacks}) > 2          # other processes' waits too
    assert not any(frames[0].endswith(f"({prof.pid})") for frames, _ in stacks)
    assert gone(ids)


def test_min_block_leaves_short_waits_out(tmp_path):
    """--min-block 5000: the 6 ms sleeps stay, most of the ~4 ms pipe waits go."""
    wl = start_workload()
    out = tmp_path / "m.folded"
    try:
        res = run_profile("--off-cpu", "--min-block", "5000", "-p", str(wl.pid), "-d", "2", "-o", str(out))
    finally:
        stop_workload(wl)
    assert res.returncode == 0, res.stderr
    got, total = weights(folded_stacks(out))
    assert got["sleeper"] >= 0.8 * total, (got, total)


def test_signal_writes_and_detaches(tmp_path):
    wl = start_workload()
    out = tmp_path / "t.folded"
    try:
        prof = subprocess.Popen(PYCORE + ["--off-cpu", "-p", str(wl.pid), "-o", str(out)], stderr=subprocess.PIPE,
                                text=True, cwd=ROOT)
        ids = held_while_running(prof)
        time.sleep(1.5)
        prof.send_signal(signal.SIGTERM)
        _, err = prof.communicate(timeout=60)
    finally:
        stop_workload(wl)
    assert prof.returncode == 0, err
    assert folded_stacks(out)
    assert gone(ids)


@pytest.mark.parametrize("args, message", [
    (("-F", "99"), "-F: --off-cpu does not sample: it records every wait (leave -F out)"),
    (("--min-block", "-1"), "--min-block -1: must be 0 or more microseconds"),
])
def test_bad_combinations(args, message):
    res = run_profile("--off-cpu", "-p", str(os.getpid()), "-d", "1", *args)
    assert (res.returncode, res.stderr, res.stdout) == (2, f"pycore profile: {message}\n", "")


def test_min_block_without_off_cpu():
    res = run_profile("--min-block", "10", "-p", str(os.getpid()), "-d", "1")
    assert (res.returncode, res.stderr) == (2, "pycore profile: --min-block: only with --off-cpu\n")


def test_api_bad_combinations():
    import pycore

    with pytest.raises(ValueError, match="hz does not apply with off_cpu=True"):
        pycore.profile(os.getpid(), off_cpu=True, hz=99)
    with pytest.raises(ValueError, match="min_block_us=-5: 0 or more microseconds"):
        pycore.profile(os.getpid(), off_cpu=True, min_block_us=-5)
    assert "on_switch" not in programs(prog_ids_of(os.getpid()))
