"""A kernel's VMs pull its tests from one queue (tests/vm/queue.py); the runner starts VMs for the
kernel with most left (tests/vm/run.py: schedule). All on the host: the queue's guest side is
tests/conftest.py, run here by two pytest processes at once, as two VMs run it."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import queue
from .durations import nodeid
from .harness import Kernel, Result
from .run import Queue, schedule

REPO = Path(__file__).resolve().parents[2]


def test_units_longest_first_a_whole_module_one_unit():
    ids = ["tests/a.py::x", "tests/b.py::y[1]", "tests/b.py::y[2]", "tests/a.py::z", "tests/c.py::w"]
    got = queue.units(ids, {"tests/a.py::x": 5, "tests/b.py::y[1]": 2, "tests/b.py::y[2]": 4, "tests/a.py::z": 1},
                      whole={"tests/b.py"})
    assert [(u.key, u.nodeids, u.cost) for u in got] == [
        ("tests/b.py", ("tests/b.py::y[1]", "tests/b.py::y[2]"), 6),
        ("tests/a.py::x", ("tests/a.py::x",), 5),
        ("tests/c.py::w", ("tests/c.py::w",), 3),         # unknown: the median of 5, 2, 4, 1
        ("tests/a.py::z", ("tests/a.py::z",), 1),
    ]


def _claim_all(args: tuple[str, str, list[str]]) -> list[str]:
    where, who, keys = args
    return [k for k in keys if queue.claim(Path(where), queue.Unit(k, (k,), 1.0), who)]


def test_each_unit_is_taken_once_by_racing_processes(tmp_path: Path):
    keys = [f"tests/t.py::test[{i}]" for i in range(300)]
    with multiprocessing.get_context("fork").Pool(4) as pool:
        won = pool.map(_claim_all, [(str(tmp_path), f"vm{i}", keys) for i in range(4)])
    assert sorted(sum(won, [])) == sorted(keys)
    taken = queue.claimed(tmp_path)
    assert set(taken) == set(keys) and all(key in won[int(taken[key][2:])] for key in keys)


def test_coverage_names_what_went_wrong():
    expected = ["a", "b", "c", "d"]
    taken = {"a": "vm1", "b": "vm1", "c": "vm2"}
    assert queue.coverage(expected, taken, {"vm1": ["a", "b"], "vm2": ["c"]}) == ["1 test(s) ran in no VM: d"]
    assert queue.coverage(expected[:3], taken, {"vm1": ["a"], "vm2": ["c", "a"]}) == [
        "a ran twice (vm1, vm2)", "1 test(s) taken but not reported by their VM: b"]
    assert queue.coverage(expected[:3], taken, {"vm2": ["c"]}) == []      # vm1 has no junit: its failure says so
    assert queue.left(expected, taken, {"a": 1, "d": 7}) == 7


def _junit_ids(path: Path) -> list[str]:
    return [nodeid(c.get("classname", ""), c.get("name", "")) for c in ET.parse(path).iter("testcase")]


def test_two_pytests_share_one_queue(tmp_path: Path):
    """tests/conftest.py's side: two pytest processes over one queue (as a kernel's two VMs) run every
    test once between them, both take some, and a VM_QUEUE = "module" module runs in one of them."""
    where = tmp_path / "queue"
    where.mkdir()
    files = ["tests/vm/queue_sample.py", "tests/vm/queue_sample_whole.py"]
    procs = []
    for name in ("vm1", "vm2"):
        env = dict(os.environ, PYCORE_VM_QUEUE=str(where), PYCORE_VM_NAME=name, PYCORE_VM_SERIES="none",
                   PYCORE_SAMPLE_PIDS=str(tmp_path / "whole.pids"))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
             f"--junitxml={tmp_path / name}.xml", *files], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    ran = {name: _junit_ids(tmp_path / f"{name}.xml") for name in ("vm1", "vm2")}
    every = [f"tests/vm/queue_sample.py::test_each[{n}]" for n in range(8)] + \
            [f"tests/vm/queue_sample_whole.py::test_together[{n}]" for n in range(3)]
    assert sorted(ran["vm1"] + ran["vm2"]) == sorted(every), ran
    assert all(any("queue_sample.py" in i for i in ids) for ids in ran.values()), ran
    assert len(set((tmp_path / "whole.pids").read_text().split())) == 1
    assert queue.coverage(every, queue.claimed(where), ran) == []


def test_without_a_queue_pytest_runs_everything(tmp_path: Path):
    """No PYCORE_VM_QUEUE (the host, or a VM told to run all): pytest's own loop, every test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYCORE_VM_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           f"--junitxml={tmp_path / 'all.xml'}", "tests/vm/queue_sample_whole.py"],
                          cwd=REPO, env=env | {"PYCORE_SAMPLE_PIDS": str(tmp_path / "pids")},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert len(_junit_ids(tmp_path / "all.xml")) == 3 and len((tmp_path / "pids").read_text().split()) == 3


class FakeVMs:
    """run() for schedule(): a VM that takes its queue's tests one at a time, each in ``step`` s."""

    def __init__(self, step: float = 0.02):
        self.step = step
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}          # series -> VMs running
        self.most = 0
        self.started: list[tuple[str, str]] = []

    def __call__(self, q: Queue, name: str) -> Result:
        with self.lock:
            self.started.append((q.kernel.series, name))
            self.now[q.kernel.series] = self.now.get(q.kernel.series, 0) + 1
            self.most = max(self.most, sum(self.now.values()))
        time.sleep(self.step * 3)        # a VM's boot and collection
        for unit in queue.units(q.nodes, q.weights):
            if queue.claim(q.path, unit, name):
                time.sleep(self.step)
        with self.lock:
            self.now[q.kernel.series] -= 1
        return Result(kernel=q.kernel, outdir=q.path.parent / name, exitcode=0)


def _queues(tmp_path: Path, sizes: dict[str, int]) -> list[Queue]:
    out = []
    for series, n in sizes.items():
        kernel = Kernel(series=series, release=f"{series}.0-1-amd64", root=tmp_path)
        nodes = [f"tests/test_{series}.py::t[{i}]" for i in range(n)]
        out.append(Queue(kernel, tmp_path / f"queue-{series}", nodes, dict.fromkeys(nodes, 10.0)))
    return out


def test_schedule_one_vm_beside_the_host_tests_then_two(tmp_path: Path):
    """The kernel with most work first; the second slot opens when the host tests end; every queue
    emptied; a kernel gets a second VM only for a share worth a VM's start."""
    queues = _queues(tmp_path, {"6.1": 50, "6.12": 60})
    host_done = threading.Event()
    threading.Timer(2.0, host_done.set).start()
    # 6.12 alone from 0 to 3.15 s, 6.1 from 2 s (6.12 has 20 tests left, 10 each for two VMs; 6.1 all
    # its 50): at 3.15 s 6.1 has about 27 tests left (270 s), a share of 135 for a second VM
    vms = FakeVMs(step=0.05)
    results = schedule(queues, vms, lambda: 2 if host_done.is_set() else 1, min_share=50.0, poll=0.05)
    assert vms.started[0] == ("6.12", "6.12.0-1-amd64") and vms.most == 2
    assert all(q.left() == 0 for q in queues)
    assert [r.outdir.name for r in results] == [name for _, name in vms.started]
    assert {series for series, _ in vms.started} == {"6.1", "6.12"}
    assert vms.started[1:] == [("6.1", "6.1.0-1-amd64"), ("6.1", "6.1.0-1-amd64+2")]


def test_schedule_starts_no_vm_for_too_little(tmp_path: Path):
    queues = _queues(tmp_path, {"6.1": 3})
    vms = FakeVMs()
    schedule(queues, vms, lambda: 2, min_share=50.0, poll=0.05)
    assert vms.started == [("6.1", "6.1.0-1-amd64")]       # 30 s of tests: not worth a second VM


def test_schedule_gives_a_failed_kernel_no_more_vms(tmp_path: Path):
    queues = _queues(tmp_path, {"6.1": 40})
    results = schedule(queues, lambda q, name: Result(kernel=q.kernel, outdir=tmp_path / name, exitcode=1),
                       lambda: 2, min_share=50.0, poll=0.05)
    # both started at once (400 s of tests: 200 each), both died before they took a test, and no third
    assert [r.outdir.name for r in results] == ["6.1.0-1-amd64", "6.1.0-1-amd64+2"]
    assert queues[0].closed and queues[0].left() == 400


def test_schedule_ends_when_a_vm_leaves_tests_it_cannot_take(tmp_path: Path):
    """A VM that ends well but leaves tests untaken (its guest collected other tests than the host)
    closes its kernel's queue: no VM after VM for ever; the run's checks name the tests."""
    queues = _queues(tmp_path, {"6.1": 40})
    started = []

    def run(q, name):  # noqa: ANN001, ANN202
        started.append(name)
        return Result(kernel=q.kernel, outdir=tmp_path / name, exitcode=0)

    schedule(queues, run, lambda: 1, min_share=50.0, poll=0.05)
    assert started == ["6.1.0-1-amd64"] and queues[0].closed and queues[0].left() == 400
