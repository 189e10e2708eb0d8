"""pycore.hist against real bpftrace: the same values, the same text."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from pycore import hist
from conftest import require_root

DATASETS = {
    "small": [0, 1, 1, 2, 3, 5, 1000, 1024, 2047, 1048576, -5],
    "one": [7],
    "skewed": [3] * 40 + [4] + [900000] * 3,
    "random": [random.Random(3).randrange(0, 1 << random.Random(4 + i).randrange(1, 31)) for i in range(150)],
}
LINEAR = {
    "l_small": ([3, -1, 55, 55, 150, 99], (0, 100, 10)),
    "l_k": ([3000, 5000, 5000, 9000], (0, 10240, 1024)),
    "l_mid": ([7, 17], (5, 25, 5)),
    "l_over": ([500], (0, 100, 10)),
    "l_random": ([random.Random(5 + i).randrange(0, 2000) for i in range(120)], (100, 1500, 50)),
}


def bpftrace_maps(script: str) -> dict[str, str]:
    out = subprocess.run(["bpftrace", "-e", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    blocks: dict[str, str] = {}
    for block in out.stdout.split("\n\n"):
        block = block.strip("\n")
        if block.startswith("@"):
            name = block.split(":", 1)[0]
            blocks[name] = block + "\n"
    return blocks


@pytest.fixture(scope="module")
def bpftrace_output() -> dict[str, str]:
    if not shutil.which("bpftrace"):
        pytest.skip("bpftrace not installed")
    require_root()
    stmts = []
    for name, values in DATASETS.items():
        stmts += [f"@{name} = hist({v});" for v in values]
    for name, (values, (lo, hi, step)) in LINEAR.items():
        stmts += [f"@{name} = lhist({v}, {lo}, {hi}, {step});" for v in values]
    return bpftrace_maps("BEGIN { " + " ".join(stmts) + " exit(); }")


@pytest.mark.parametrize("name", DATASETS)
def test_log2_matches_bpftrace(bpftrace_output: dict[str, str], name: str) -> None:
    ours = hist.log2_hist(hist.from_values(DATASETS[name]), f"@{name}")
    assert ours == bpftrace_output[f"@{name}"] + "\n"


@pytest.mark.parametrize("name", LINEAR)
def test_linear_matches_bpftrace(bpftrace_output: dict[str, str], name: str) -> None:
    values, (lo, hi, step) = LINEAR[name]
    ours = hist.linear_hist(hist.from_values(values, (lo, hi, step)), lo, hi, step, f"@{name}")
    assert ours == bpftrace_output[f"@{name}"] + "\n"


def test_exact_rows() -> None:
    text = hist.render_log2({3: 2, 4: 1, 12: 4})
    lines = text.splitlines()
    assert lines[0] == "[2, 4)                 2 |" + "@" * 26 + " " * 26 + "|"
    assert lines[-1] == "[1K, 2K)               4 |" + "@" * 52 + "|"
    assert len(lines) == 10  # [2, 4) .. [1K, 2K), zero rows in between kept


def test_buckets() -> None:
    assert [hist.log2_bucket(v) for v in (-1, 0, 1, 2, 3, 4, 1023, 1024)] == [0, 1, 2, 3, 3, 4, 11, 12]
    assert [hist.linear_bucket(v, 0, 100, 10) for v in (-1, 0, 9, 10, 99, 100, 1000)] == [0, 1, 1, 2, 10, 11, 11]
    assert hist.render_log2({}) == ""
    assert hist.render_log2([0, 0, 5]) == "[1]                    5 |" + "@" * 52 + "|\n"
    with pytest.raises(ValueError):
        hist.render_linear({1: 1}, 10, 0, 1)


def test_from_bpf_map() -> None:
    """A BPF array map keyed by bucket index renders like the dict it holds."""
    require_root()
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path

    with BpfObject(object_path("test_maps")) as obj:
        obj.load()
        m = obj.maps["hist"]
        counts = hist.from_values(DATASETS["random"])
        m.update(counts)
        assert hist.log2_hist(m, "@random") == hist.log2_hist(counts, "@random")
