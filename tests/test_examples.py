"""Every examples/embed_*.py runs, as a subprocess with a time bound, and prints
what its docstring promises, so the embedding examples cannot rot."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.conftest import ensure_bpffs, require_root

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("embed_*.py"))

# example -> what its output must contain
EXPECT = {
    "embed_iterator.py": ["event: ", "embed-demo.txt", "lost: 0"],
    "embed_callback.py": ["events: 3 ['callback-demo-0', 'callback-demo-1', 'callback-demo-2']"],
    "embed_asyncio.py": ["event: {", "'name': 'async-demo.txt'"],
    "embed_aggregation.py": ["still open: ['agg-demo-1', 'agg-demo-2']", "2 descriptors opened and never closed"],
    "embed_threads.py": ["a saw 2 b saw 1 alive [False, False]"],
    "embed_trace.py": ["event: tracing pid ", "calls: 3", "'@calls': 3", "at close: bye", "at close: @calls: 3"],
    "embed_asyncio_trace.py": ["event: slept ", "bucket: [", "total: 3 lost: 0"],
    "embed_prometheus.py": ["handled: 4 lost: 0", 'metric: demo_files_opened_total{comm="python'],
    "embed_skeleton_pins.py": ["run: reused=False count=3 events=[1, 2, 3] total=3",
                               "run: reused=True count=5 events=[4, 5] total=2", "pins left: False"],
}


def test_every_example_has_expectations():
    assert {p.name for p in EXAMPLES} == set(EXPECT)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path: pathlib.Path) -> None:
    require_root()
    ensure_bpffs()     # embed_skeleton_pins.py pins under /sys/fs/bpf
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    for text in EXPECT[path.name]:
        assert text in r.stdout, r.stdout
