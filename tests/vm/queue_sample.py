"""Run only by tests/vm/test_queue.py, in two pytest processes that share one queue (tests/vm/queue.py).

Not named test_*.py, so that no collection finds it; the test passes it by path. Each test waits
until both processes have taken a unit, so that the two always share the work, whatever the load.
"""

import os
import time
from pathlib import Path

import pytest

from tests.vm import queue


@pytest.fixture(autouse=True)
def both_taking() -> None:
    where = Path(os.environ["PYCORE_VM_QUEUE"])
    deadline = time.monotonic() + 60
    while len(set(queue.claimed(where).values())) < 2:
        assert time.monotonic() < deadline, "the other process took nothing in 60 s"
        time.sleep(0.05)


@pytest.mark.parametrize("n", range(8))
def test_each(n: int) -> None:
    time.sleep(0.1)
