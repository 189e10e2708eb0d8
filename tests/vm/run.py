"""python -m tests.vm.run [--kernel SERIES]... [--timeout S] [--host-xml F] [-- PYTEST_ARGS]

Boots each Debian kernel series (default: 6.1 and 6.12) under QEMU, runs
``pytest -m kernel PYTEST_ARGS`` in it (see harness.py), prints timings and a
matrix, and exits 0 only when every kernel's pytest exited 0 and each of its
tests ran once.  A kernel's VMs pull its tests from one queue
(tests/vm/queue.py); :func:`schedule` starts a VM whenever a slot is free, for
the kernel with most left.  Results go to ``build/vm/RELEASE/`` (junit.xml,
pytest.log, console.log, exitcode), and to ``build/vm/RELEASE+2/``, ``+3``...
for a kernel's further VMs.

The matrix
----------
Columns: the kernels, then ``host`` (the running kernel) when a host junit
file exists (``--host-xml``, default ``build/vm/host.xml``; make it with
``./dev.sh test --junitxml=build/vm/host.xml``).  Rows: one per test that ran
in a VM, keyed by ``test_file::name``; a test that calls
``record_property("tool", NAME)`` is keyed by ``tool:NAME`` instead, so tools
tested on the host (with a fallback) and in the VM share a row.  Host tests
without a ``tool`` property are not shown.  Cells, read from junit.xml only:

- ``ok``       passed
- ``fallback`` passed after recording ``record_property("fallback", WHY)``
- ``FAIL``     failed or errored
- ``-``        not run there (absent, deselected or skipped)

Several tests on one row: the worst cell wins (FAIL > fallback > ok > -).
The first row, ``(vm run)``, is the harness's own verdict for each kernel
(booted, wrote an exit code, pytest exited 0).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import signal
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from . import durations, queue

from .harness import (REPO, TCG, HarnessError, Kernel, Result, explain, fetch, kernel_test_nodes, log, precompile,
                      run_kernel, stop_all)

RANK = {"-": 0, "ok": 1, "fallback": 2, "FAIL": 3}


def read_junit(path: Path) -> dict[str, str]:
    """Row key -> cell for every testcase of a junit xml (pytest's format)."""
    cells: dict[str, str] = {}
    for case in ET.parse(path).iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if "tool" in props:
            key = f"tool:{props['tool']}"
        else:
            parts = case.get("classname", "").split(".")  # tests.test_x[.TestClass]
            first = next((i for i, p in enumerate(parts) if p.startswith("test_")), 0)
            key = "::".join(parts[first:] + [case.get("name", "")])  # test_x[::TestClass]::test_y
        if case.find("failure") is not None or case.find("error") is not None:
            cell = "FAIL"
        elif case.find("skipped") is not None:
            cell = "-"
        elif "fallback" in props:
            cell = "fallback"
        else:
            cell = "ok"
        if RANK[cell] >= RANK[cells.get(key, "-")]:
            cells[key] = cell
    return cells


def matrix(results: list[Result], failed_setup: list[str], host_xml: Path | None) -> str:
    columns: list[tuple[str, dict[str, str]]] = []
    rows: dict[str, None] = {"(vm run)": None}
    merged: dict[str, dict[str, str]] = {}       # a kernel's VMs make one column
    for r in results:
        cells = read_junit(r.junit) if r.junit.exists() else {}
        rows.update(dict.fromkeys(cells))
        cells["(vm run)"] = "ok" if r.ok else "FAIL"
        column = merged.setdefault(r.kernel.series, {})
        for key, cell in cells.items():
            if RANK[cell] >= RANK[column.get(key, "-")]:
                column[key] = cell
    columns.extend(merged.items())
    columns += [(s, {"(vm run)": "FAIL"}) for s in failed_setup]
    if host_xml is not None and host_xml.exists():
        cells = read_junit(host_xml)
        rows.update(dict.fromkeys(k for k in cells if k.startswith("tool:")))
        columns.append((f"host {os.uname().release.split('-')[0]}", cells))
    width = max(map(len, rows))
    lines = ["  ".join([" " * width] + [f"{name:>9}" for name, _ in columns])]
    for row in rows:
        lines.append("  ".join([f"{row:<{width}}"] + [f"{cells.get(row, '-'):>9}" for _, cells in columns]))
    return "\n".join(lines)


#: VMs at once with --parallel: one a host CPU (this host and CI's have two)
PARALLEL = 2
#: A kernel gets another VM beside those it has only when its untaken tests, shared with that VM,
#: come to at least this many recorded seconds each: a VM costs about a minute and a half before its
#: first test under TCG (boot 10 to 15 s, pytest's collection 70 to 90 s), so fewer would not pay.
MIN_SHARE = 100.0


class Queue:
    """A kernel's queue (tests/vm/queue.py): its directory, the tests it holds and their recorded
    times, and the VMs the runner has started for it."""

    def __init__(self, kernel: Kernel, path: Path, nodes: list[str], weights: dict[str, float]):
        self.kernel, self.path, self.nodes, self.weights = kernel, path, nodes, weights
        self.started = 0            # VMs started for this kernel
        self.closed = False         # start no more VMs: one failed, or one ended with tests left
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)

    def left(self) -> float:
        """Recorded seconds of tests no VM has taken yet."""
        return queue.left(self.nodes, queue.claimed(self.path), self.weights)

    def name(self) -> str:
        """The next VM's result directory: the release, then RELEASE+2, +3..."""
        return self.kernel.release if self.started == 1 else f"{self.kernel.release}+{self.started}"


def schedule(queues: list[Queue], run: Callable[[Queue, str], Result], capacity: Callable[[], int],
             min_share: float = MIN_SHARE, poll: float = 1.0) -> list[Result]:
    """Run VMs until every queue is empty, at most ``capacity()`` at once (asked again each poll: it
    grows when the host tests end). A free slot goes to the kernel with most untaken work per VM,
    counting the new one: to a kernel without a running VM whenever it has work left, to one with
    running VMs when that share is at least ``min_share``. A kernel whose VM failed, or ended with
    tests untaken, gets no more.
    The results in the order the VMs started."""
    launched: list[concurrent.futures.Future[Result]] = []
    running: dict[concurrent.futures.Future[Result], Queue] = {}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        try:
            while True:
                busy = {id(q): sum(1 for r in running.values() if r is q) for q in queues}
                while len(running) < max(1, capacity()):
                    shares = [(q.left() / (busy[id(q)] + 1), q) for q in queues if not q.closed]
                    shares = [(share, q) for share, q in shares
                              if share > 0 and (busy[id(q)] == 0 or share >= min_share)]
                    if not shares:
                        break
                    _, q = max(shares, key=lambda sq: sq[0])
                    q.started += 1
                    busy[id(q)] += 1
                    future = pool.submit(run, q, q.name())
                    running[future] = q
                    launched.append(future)
                if not running:
                    break
                done, _ = concurrent.futures.wait(running, timeout=poll,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    q = running.pop(future)
                    # a VM that ended well leaves nothing it could take: tests left with no sibling
                    # running are tests its guest did not collect (checks() names them), and another
                    # VM would end the same way
                    q.closed = q.closed or not future.result().ok or (
                        q not in running.values() and q.left() > 0)
        except BaseException:       # Ctrl-C, SIGTERM: the pool waits for its threads, which stop now
            log(f"interrupted: {stop_all()} VM(s) stopped")
            raise
    return [future.result() for future in launched]


def failures(results: list[Result], host_xml: Path | None) -> list[str]:
    """One line per failed test or failed VM run, last in the output: a CI log keeps its head and
    its tail, and the middle (consoles, tracebacks) is what gets cut."""
    out = []
    for r in results:
        if r.error:
            out.append(f"{r.kernel.series}: {r.error}")
        if r.oopses:
            out.append(f"{r.kernel.series}: {len(r.oopses)} kernel report(s) in {r.outdir / 'console.log'}")
    named = [(r.kernel.series, r.junit) for r in results]
    if host_xml is not None:
        named.append(("host", host_xml))
    for column, path in named:
        if not path.exists():
            continue
        try:
            cases = list(ET.parse(path).iter("testcase"))
        except ET.ParseError as exc:
            out.append(f"{column}: {path}: {exc}")
            continue
        for case in cases:
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is None:
                continue
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            message = (bad.get("message") or "").strip().splitlines()
            out.append(f"{column}: {name}: {message[0][:200] if message else bad.tag}")
    return out


def reported(result: Result) -> list[str]:
    """The node ids in a VM's junit ([] when it is unreadable: failures() says so)."""
    try:
        return [durations.nodeid(c.get("classname", ""), c.get("name", "")) for c in ET.parse(result.junit).iter("testcase")]
    except (OSError, ET.ParseError):
        return []


def checks(queues: list[Queue], results: list[Result]) -> list[str]:
    """Each kernel's tests ran once, in one of its VMs (tests.vm.queue.coverage), one line a problem."""
    out = []
    for q in queues:
        runs = {r.outdir.name: reported(r) for r in results if r.kernel is q.kernel and r.junit.exists()}
        out += [f"{q.kernel.series}: {problem}" for problem in queue.coverage(q.nodes, queue.claimed(q.path), runs)]
    return out


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.vm.run", description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", action="append", metavar="SERIES",
                    help="Debian kernel series, e.g. 6.1 or 6.12 (repeatable; default both)")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds a VM may run (default 3600: the first VM, beside the host tests, runs "
                         "about 2,200 s here)")
    ap.add_argument("--stall", type=float, default=900,
                    help="seconds a VM may go without starting a test before it counts as hung (default 900: "
                         "the longest test takes about 120 s, a VM about 100 s to its first)")
    ap.add_argument("--min-share", type=float, default=MIN_SHARE,
                    help=f"recorded seconds of tests a further VM of a kernel must have to itself (default "
                         f"{MIN_SHARE:.0f})")
    ap.add_argument("--tcg", choices=["single", "multi"], default=TCG,
                    help=f"QEMU's TCG threading (default {TCG}: see harness.TCG for why)")
    ap.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=None,
                    help=f"{PARALLEL} VMs at once (default: yes with --tcg single, no with multi)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "vm", help="result directory")
    ap.add_argument("--host-xml", type=Path, default=None,
                    help="host pytest junit xml for the matrix's host column (default OUT/host.xml)")
    ap.add_argument("--host-done", type=Path, default=None, metavar="FILE",
                    help="the host tests run beside: one VM at a time until FILE exists, then --parallel's "
                         f"{PARALLEL} (./dev.sh test writes it when its host tests end)")
    ap.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = ap.parse_args(argv)
    if args.pytest_args[:1] == ["--"]:  # argparse keeps a second "--"
        del args.pytest_args[0]
    series = args.kernel or ["6.1", "6.12"]
    if args.parallel is None:
        args.parallel = args.tcg == "single"
    out = args.out.resolve()
    parent = os.getppid()
    signal.signal(signal.SIGTERM, _terminate)     # ./dev.sh test stops us so when it is interrupted

    try:
        nodes = kernel_test_nodes(args.pytest_args)
    except HarnessError as exc:
        log(f"FAIL: {exc}")
        return 1
    files = sorted({node.split("::", 1)[0] for node in nodes})
    log(f"kernel tests in: {' '.join(files)}")
    precompile()
    kernels: list[Kernel] = []
    failed_setup: list[str] = []
    for s in series:
        try:
            kernels.append(fetch(s))
        except HarnessError as exc:
            log(f"FAIL {s}: {exc}")
            failed_setup.append(s)

    table = durations.load()
    queues = []
    for kernel in kernels:
        for stale in out.glob(f"{kernel.release}*"):    # an earlier run's VMs: not this run's results
            shutil.rmtree(stale, ignore_errors=True)
        queues.append(Queue(kernel, out / f"queue-{kernel.series}", nodes, table.get(kernel.series, {})))

    def run(q: Queue, name: str) -> Result:
        log(f"{name}: a VM for {q.kernel.series}'s queue ({q.left():.0f} s of tests left by the recorded times)")
        return run_kernel(q.kernel, out / name, args.pytest_args + files, args.timeout, args.tcg, q.path,
                          args.stall)

    if args.host_done is not None:
        log(f"beside the host tests: one VM at a time until {args.host_done} exists, then {PARALLEL}")
    width = PARALLEL if args.parallel else 1

    def capacity() -> int:
        # Under single-threaded TCG a VM keeps one host CPU busy: two VMs side by side, each with a
        # CPU to itself; while the host tests run (they keep about one CPU busy), one
        return 1 if args.host_done is not None and not args.host_done.exists() else width

    results = schedule(queues, run, capacity, args.min_share)
    if args.host_done is not None:
        while not args.host_done.exists() and os.getppid() == parent:
            time.sleep(1)      # the host tests' junit makes the matrix's last column
    for r in results:
        explain(r)
    bad = checks(queues, results)

    print("\nkernel                  download   boot->cmd   guest uptime   whole run   tests   pytest exit")
    for r in results:
        dl = "cached" if r.kernel.download_s is None else f"{r.kernel.download_s:.1f} s"
        boot = "-" if r.boot_s is None else f"{r.boot_s:.1f} s"
        up = "-" if r.guest_uptime_s is None else f"{r.guest_uptime_s:.1f} s"
        tests = len(reported(r)) if r.junit.exists() else "-"
        print(f"{r.outdir.name:<22}  {dl:>8}  {boot:>10}  {up:>13}  {r.total_s:>8.1f} s  {tests:>6}"
              f"   {r.exitcode if r.error == '' else r.error}")
    for s in failed_setup:
        print(f"{s:<22}  setup failed (see above)")
    print()
    print(matrix(results, failed_setup, args.host_xml or out / "host.xml"))
    bad += failures(results, args.host_xml or out / "host.xml")
    if bad:
        print(f"\nfailed ({len(bad)}):")
        for line in bad:
            print(f"  {line}")
    return 0 if results and not failed_setup and not bad and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
