"""The VM harness's matrix cells, read from pytest junit xml (runs on the host)."""

from __future__ import annotations

from pathlib import Path

from .harness import Kernel, Result
from .run import Job, failures, matrix, plan, read_junit, run_jobs

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="tests.test_a" name="test_pass" time="0.1"/>
 <testcase classname="tests.test_a" name="test_fail" time="0.1"><failure message="assert 2 == 3&#10;more"/></testcase>
 <testcase classname="tests.test_a" name="test_error" time="0.1"><error message="x"/></testcase>
 <testcase classname="tests.test_a" name="test_skip" time="0.1"><skipped message="x"/></testcase>
 <testcase classname="tests.test_a.TestC" name="test_fb" time="0.1">
  <properties><property name="fallback" value="tp_btf instead of fexit"/></properties></testcase>
 <testcase classname="tests.test_b" name="test_t1" time="0.1">
  <properties><property name="tool" value="opensnoop"/></properties></testcase>
 <testcase classname="tests.test_b" name="test_t2" time="0.1">
  <properties><property name="tool" value="opensnoop"/><property name="fallback" value="y"/></properties>
 </testcase>
</testsuite></testsuites>
"""


def test_read_junit_cells(tmp_path: Path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    assert read_junit(path) == {
        "test_a::test_pass": "ok",
        "test_a::test_fail": "FAIL",
        "test_a::test_error": "FAIL",
        "test_a::test_skip": "-",
        "test_a::TestC::test_fb": "fallback",
        "tool:opensnoop": "fallback",  # the worst of ok and fallback
    }


def test_failures_are_listed_last_one_line_each(tmp_path: Path):
    """The summary dev.sh prints after the matrix: a timed-out VM, and each failed or errored test
    with its message's first line, the host's too."""
    (tmp_path / "vm").mkdir()
    (tmp_path / "vm" / "junit.xml").write_text(JUNIT)
    (tmp_path / "host.xml").write_text(JUNIT.replace("test_error", "test_other"))
    kernel = Kernel(series="6.12", release="6.12.1", root=tmp_path)
    run = Result(kernel=kernel, outdir=tmp_path / "vm", exitcode=None, error="timed out after 1800 s")
    assert failures([run], tmp_path / "host.xml") == [
        "6.12: timed out after 1800 s",
        "6.12: tests.test_a::test_fail: assert 2 == 3",
        "6.12: tests.test_a::test_error: x",
        "host: tests.test_a::test_fail: assert 2 == 3",
        "host: tests.test_a::test_other: x",
    ]


def test_plan_deals_each_kernels_tests_over_vms(tmp_path: Path):
    """Each kernel's tests are dealt over two VMs (tests/conftest.py keeps each VM's share), 6.12's
    first (the costlier: the side-by-side tools)."""
    k61 = Kernel(series="6.1", release="6.1.0-1-amd64", root=tmp_path)
    k612 = Kernel(series="6.12", release="6.12.1+deb12-amd64", root=tmp_path)
    nodes = ["tests/test_a.py::test_1", "tests/test_a.py::test_2", "tests/test_b.py::test_3"]
    files = ["tests/test_a.py", "tests/test_b.py"]
    jobs = plan([k61, k612], files, nodes, parallel=True)
    assert [(j.kernel.series, j.name, j.tests, j.shard) for j in jobs] == [
        ("6.12", "6.12.1+deb12-amd64", files, "1/2"), ("6.12", "6.12.1+deb12-amd64+2", files, "2/2"),
        ("6.1", "6.1.0-1-amd64", files, "1/2"), ("6.1", "6.1.0-1-amd64+2", files, "2/2")]
    # one after the other (multi-threaded TCG), with host collection failed, or one test: one VM a kernel
    for no_split in (plan([k61, k612], files, nodes, parallel=False), plan([k61, k612], [], [], parallel=True)):
        assert [(j.name, j.shard) for j in no_split] == [(k61.release, ""), (k612.release, "")]
    assert [(j.name, j.shard) for j in plan([k61, k612], files[:1], nodes[:1], parallel=True)] == [
        (k612.release, ""), (k61.release, "")]


def test_shares_longest_first_to_the_least_loaded_vm():
    """tests.vm.durations.shares: LPT over the recorded times; an unknown test counts as the median."""
    from .durations import shares

    assert shares(["a", "b", "c", "d"], {"a": 10, "b": 1, "c": 1, "d": 8}, 2) == [0, 1, 1, 1]
    assert shares(["x", "a", "b"], {"a": 4, "b": 2}, 2) == [1, 0, 1]        # x: the median, 3
    assert shares(["b", "a", "c"], {}, 3) == [1, 0, 2]                         # no table: by id


def test_durations_recorded_from_a_runs_junit(tmp_path: Path):
    """Each VM run's junit.xml into the table, by the kernel's series (from the result directory) and
    node id; skipped tests too (they take no time there); what the table had is kept."""
    from .durations import record

    for name in ("6.12.1+deb12-amd64+2", "6.1.0-1-amd64"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "junit.xml").write_text(JUNIT)
    table = record(tmp_path, {"6.1": {"tests/test_old.py::test_x": 3.0}})
    assert sorted(table) == ["6.1", "6.12"]
    assert table["6.12"]["tests/test_a.py::test_pass"] == 0.1
    assert table["6.12"]["tests/test_a.py::TestC::test_fb"] == 0.1
    assert table["6.1"]["tests/test_old.py::test_x"] == 3.0 and "tests/test_a.py::test_skip" in table["6.1"]


def test_shards_deal_every_test_of_the_selection_once():
    """The guest's side (tests/conftest.py): PYCORE_VM_SHARD=I/N keeps the I-th VM's share of the tests
    the run selected; the shares together are the selection, each test once."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
            "tests/vm/test_matrix.py", "tests/vm/test_oops_report.py", "-k", "not failures_are_listed"]

    def collect(shard: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYCORE_VM_SHARD", "PYCORE_VM_SERIES")}
        if shard:
            env.update(PYCORE_VM_SHARD=shard, PYCORE_VM_SERIES="6.12")
        out = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if "::" in line]

    whole, shards = collect(""), [collect(f"{i}/3") for i in (1, 2, 3)]
    assert len(whole) >= 6 and "tests/vm/test_matrix.py::test_failures_are_listed_last_one_line_each" not in whole
    assert sorted(sum(shards, [])) == sorted(whole) and all(shards)


def test_matrix_shows_one_column_a_kernel(tmp_path: Path):
    """A kernel's two VMs make one column, the worst of their cells."""
    k612 = Kernel(series="6.12", release="6.12.1+deb12-amd64", root=tmp_path)
    for name, body in (("a", JUNIT), ("b", JUNIT.replace('name="test_pass"', 'name="test_pass2"'))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "junit.xml").write_text(body)
    runs = [Result(kernel=k612, outdir=tmp_path / "a", exitcode=0),
            Result(kernel=k612, outdir=tmp_path / "b", exitcode=1)]
    table = matrix(runs, [], None).splitlines()
    assert table[0].split() == ["6.12"]
    assert table[1].split() == ["(vm", "run)", "FAIL"]
    cells = {line.split()[0]: line.split()[1] for line in table[2:]}
    assert cells["test_a::test_pass"] == cells["test_a::test_pass2"] == "ok"


def test_run_jobs_one_vm_beside_the_host_tests_then_two(tmp_path: Path):
    """The jobs start in plan order, never more at once than capacity() allows, and the second slot
    opens when the host tests end (capacity goes from 1 to 2); results come back in plan order."""
    import threading
    import time

    k = Kernel(series="6.1", release="6.1.0-1-amd64", root=tmp_path)
    jobs = [Job(k, f"job{i}", []) for i in range(4)]
    lock = threading.Lock()
    at_once, most, started = [0], [0], []
    host_done = threading.Event()

    def run(job):  # noqa: ANN001, ANN202
        with lock:
            started.append((job[1], host_done.is_set()))
            at_once[0] += 1
            most[0] = max(most[0], at_once[0])
        time.sleep(0.3 if job[1] != "job0" else 1.5)
        with lock:
            at_once[0] -= 1
        return Result(kernel=k, outdir=tmp_path / job[1], exitcode=0)

    threading.Timer(1.0, host_done.set).start()
    results = run_jobs(jobs, run, lambda: 2 if host_done.is_set() else 1)
    assert [r.outdir.name for r in results] == ["job0", "job1", "job2", "job3"]
    assert [name for name, _ in started] == ["job0", "job1", "job2", "job3"]
    assert started[1] == ("job1", True)      # job0 alone until the host tests ended
    assert most[0] == 2
