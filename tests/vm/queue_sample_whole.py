"""Run only by tests/vm/test_queue.py: a module that is one unit of the queue (VM_QUEUE), whose
tests must all run in the process that took it. Each records the process it ran in
($PYCORE_SAMPLE_PIDS)."""

import os
import pytest

VM_QUEUE = "module"


@pytest.mark.parametrize("n", range(3))
def test_together(n: int) -> None:
    with open(os.environ["PYCORE_SAMPLE_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\n")
