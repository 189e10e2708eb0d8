"""python -m tests.vm.run [--kernel SERIES]... [--timeout S] [--host-xml F] [-- PYTEST_ARGS]

Boots each Debian kernel series (default: 6.1 and 6.12) under QEMU, runs
``pytest -m kernel PYTEST_ARGS`` in it (see harness.py), prints timings and a
matrix, and exits 0 only when every kernel's pytest exited 0.  Results go to
``build/vm/RELEASE/`` (junit.xml, pytest.log, console.log, exitcode), and to
``build/vm/RELEASE+2/`` for the second VM of a kernel (its tests are dealt
over VMs: :data:`SHARDS`).

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
import signal
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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
    merged: dict[str, dict[str, str]] = {}       # a kernel's runs (SHARDS) make one column
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
#: VMs a kernel's tests are dealt over with --parallel. Under TCG a VM's run is its tests' CPU time
#: (at 64ebe61, each kernel's tests in one VM: 6.12's 1,715 s with the side-by-side comparisons with
#: bpftrace 0.23.2, which run on 6.12 only, 1,723 s beside the host tests; 6.1's 969 s). ./dev.sh
#: test runs one VM beside the host tests (about 20 minutes), two after them: 6.12's halves first,
#: then 6.1's, end about together, and no VM comes near --timeout
SHARDS = {"6.12": 2, "6.1": 2}


class Job(NamedTuple):
    kernel: Kernel
    name: str            # the result directory's name: the release, +2 for its second VM
    tests: list[str]     # the test files (pytest arguments)
    shard: str = ""      # "I/N": the I-th VM's share of N (tests/conftest.py); "": all


def plan(kernels: list[Kernel], files: list[str], nodes: list[str], parallel: bool) -> list[Job]:
    """The VM runs, in the order they start.

    With --parallel, each kernel's tests are dealt over :data:`SHARDS` VMs by the time each took
    before (tests.vm.durations: the guest keeps its share), so that the VMs take about equal time;
    6.12's first, whose tests cost most (the side-by-side tools run on 6.12 alone). Otherwise, or
    when the host could not collect the tests (``nodes`` empty), one VM a kernel; never more VMs
    than tests."""
    if not (parallel and nodes):
        return [Job(kernel, kernel.release, list(files)) for kernel in kernels]
    jobs = []
    for kernel in sorted(kernels, key=lambda k: k.series != "6.12"):
        shards = min(SHARDS.get(kernel.series, 2), len(nodes))
        for i in range(1, shards + 1):
            jobs.append(Job(kernel, kernel.release if i == 1 else f"{kernel.release}+{i}", list(files),
                            f"{i}/{shards}" if shards > 1 else ""))
    return jobs


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


def run_jobs(jobs: list[Job], run: Callable[[Job], Result], capacity: Callable[[], int]) -> list[Result]:
    """Run the jobs in their order, at most ``capacity()`` at once (asked again each second: it grows
    when the host tests end); the results in the jobs' order."""
    results: dict[int, Result] = {}
    running: dict[concurrent.futures.Future[Result], int] = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, len(jobs))) as pool:
        nxt = 0
        try:
            while nxt < len(jobs) or running:
                while nxt < len(jobs) and len(running) < max(1, capacity()):
                    running[pool.submit(run, jobs[nxt])] = nxt
                    nxt += 1
                done, _ = concurrent.futures.wait(running, timeout=1,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    results[running.pop(future)] = future.result()
        except BaseException:       # Ctrl-C, SIGTERM: the pool waits for its threads, which stop now
            log(f"interrupted: {stop_all()} VM(s) stopped")
            raise
    return [results[i] for i in range(len(jobs))]


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.vm.run", description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", action="append", metavar="SERIES",
                    help="Debian kernel series, e.g. 6.1 or 6.12 (repeatable; default both)")
    ap.add_argument("--timeout", type=float, default=2400,
                    help="seconds per VM (default 2400: a VM's share of the tests takes 500 to 1,000 s here, "
                         "a little more beside the host tests; a hung VM fails within CI's 90 minutes)")
    ap.add_argument("--tcg", choices=["single", "multi"], default=TCG,
                    help=f"QEMU's TCG threading (default {TCG}: see harness.TCG for why)")
    ap.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=None,
                    help="boot the kernels side by side (default: yes with --tcg single, no with multi)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "vm", help="result directory")
    ap.add_argument("--host-xml", type=Path, default=None,
                    help="host pytest junit xml for the matrix's host column (default OUT/host.xml)")
    ap.add_argument("--host-done", type=Path, default=None, metavar="FILE",
                    help="the host tests run beside: one VM at a time until FILE exists, then --parallel's "
                         "two (./dev.sh test writes it when its host tests end)")
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
    log(f"kernel tests in: {' '.join(files) or '(guest collects all)'}")
    precompile()
    kernels: list[Kernel] = []
    failed_setup: list[str] = []
    for s in series:
        try:
            kernels.append(fetch(s))
        except HarnessError as exc:
            log(f"FAIL {s}: {exc}")
            failed_setup.append(s)

    jobs = plan(kernels, files, nodes, args.parallel)

    def run(job: Job) -> Result:
        return run_kernel(job.kernel, out / job.name, args.pytest_args + job.tests, args.timeout, args.tcg,
                          job.shard)

    if args.host_done is not None:
        log(f"beside the host tests: one VM at a time until {args.host_done} exists, then {PARALLEL}")
    width = PARALLEL if args.parallel else 1

    def capacity() -> int:
        # Under single-threaded TCG a VM keeps one host CPU busy: two VMs side by side, each with a
        # CPU to itself; while the host tests run (they keep about one CPU busy), one
        return 1 if args.host_done is not None and not args.host_done.exists() else width

    results = run_jobs(jobs, run, capacity)
    if args.host_done is not None:
        while not args.host_done.exists() and os.getppid() == parent:
            time.sleep(1)      # the host tests' junit makes the matrix's last column
    for r in results:
        explain(r)

    print("\nkernel                  download   boot->cmd   guest uptime   whole run   pytest exit")
    for r in results:
        dl = "cached" if r.kernel.download_s is None else f"{r.kernel.download_s:.1f} s"
        boot = "-" if r.boot_s is None else f"{r.boot_s:.1f} s"
        up = "-" if r.guest_uptime_s is None else f"{r.guest_uptime_s:.1f} s"
        print(f"{r.outdir.name:<22}  {dl:>8}  {boot:>10}  {up:>13}  {r.total_s:>8.1f} s"
              f"   {r.exitcode if r.error == '' else r.error}")
    for s in failed_setup:
        print(f"{s:<22}  setup failed (see above)")
    print()
    print(matrix(results, failed_setup, args.host_xml or out / "host.xml"))
    bad = failures(results, args.host_xml or out / "host.xml")
    if bad:
        print(f"\nfailed ({len(bad)}):")
        for line in bad:
            print(f"  {line}")
    return 0 if results and not failed_setup and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
