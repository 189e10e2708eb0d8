"""Run only by tests/vm/test_oops_report.py, in a VM: crashes the guest's kernel on purpose.

Not named test_*.py, so that no collection finds it; the harness passes it by path.
"""

import pytest

pytestmark = pytest.mark.kernel


def test_crash():
    with open("/proc/sysrq-trigger", "w") as sysrq:   # a real kernel panic ("sysrq triggered crash")
        sysrq.write("c")
