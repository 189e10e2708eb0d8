"""The VM harness's matrix cells, read from pytest junit xml (runs on the host)."""

from __future__ import annotations

from pathlib import Path

from .harness import Kernel, Result
from .run import failures, matrix, read_junit

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
