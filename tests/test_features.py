"""pycore.kernel.features and `pycore features` on the host kernel (KERNEL-LAB.md).

The expected values are this host's: a 6.18 sandbox where fentry/fexit load
with EPERM, kprobes are absent, and tp_btf, ring buffers, BTF and attach
cookies work.  In the QEMU kernel VM (full Debian kernels) the fentry and
kprobe expectations flip, hence the `kernel` marker on the inverse checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import as_nobody, require_root
from pycore.kernel.features import CHECKS, Features, Result
from pycore.kernel.privileges import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, missing_privileges

HOST_KERNEL = not os.path.exists("/sys/bus/event_source/devices/kprobe")  # the sandbox has no kprobes
host_only = pytest.mark.skipif(not HOST_KERNEL, reason="expectations of the sandboxed host kernel")
PYCORE = [sys.executable, "-m", "pycore"]


@pytest.fixture(scope="module")
def features() -> Features:
    require_root()
    f = Features()
    f.detect()
    return f


def test_every_check_has_a_one_line_result(features):
    results = features.detect()
    assert list(results) == list(CHECKS)
    for name, r in results.items():
        assert isinstance(r, Result) and r.name == name
        assert r.detail and "\n" not in r.detail
        assert bool(r) is r.ok


def test_results_are_cached_per_instance(features):
    assert features.fentry is features.fentry
    assert Features().fentry is not features.fentry  # no global cache


def test_unknown_check_is_a_key_error(features):
    with pytest.raises(KeyError):
        features.check("nosuch")


def test_works_everywhere(features):
    assert features.btf.ok and "/sys/kernel/btf/vmlinux" in features.btf.detail
    assert features.ringbuf.ok
    assert features.tp_btf.ok and "fired" in features.tp_btf.detail
    assert features.cookies.ok, features.cookies.detail
    assert features.uprobe_ref_ctr.ok
    assert features.tracefs.ok
    assert features.bpf_stats.ok
    assert features.kernel.value == os.uname().release
    assert features.libbpf.value and features.libbpf.value.count(".") == 1
    assert "ring_buffer__consume_n" in features.libbpf.detail


@host_only
def test_host_fentry_fexit_refused_with_eperm(features):
    for r in (features.fentry, features.fexit):
        assert not r.ok
        assert r.error == "EPERM"
        assert "EPERM" in r.detail and "trampoline" in r.detail
        assert "ftrace" in r.detail  # says the sandbox blocks ftrace


@host_only
def test_host_has_no_kprobes(features):
    assert not features.kprobes.ok
    assert "CONFIG_KPROBES" in features.kprobes.detail


@host_only
def test_host_lockdown_and_filter_functions(features):
    assert features.lockdown.value == "integrity" and features.lockdown.ok
    assert not features.filter_functions.ok and features.filter_functions.error == "EPERM"


@pytest.mark.kernel
def test_full_kernel_has_fentry_fexit_and_kprobes(features):
    assert features.fentry.ok, features.fentry.detail
    assert features.fexit.ok, features.fexit.detail
    assert features.kprobes.ok, features.kprobes.detail


def test_missing_privileges_from_capeff():
    assert missing_privileges(1 << CAP_SYS_ADMIN) is None
    assert missing_privileges(1 << CAP_BPF | 1 << CAP_PERFMON) is None
    msg = missing_privileges(1 << CAP_BPF)
    assert msg and "CAP_PERFMON" in msg and "has CAP_BPF" in msg
    assert "none of them" in missing_privileges(0)


def test_cli_json():
    require_root()
    out = subprocess.run(PYCORE + ["features", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data) == list(CHECKS)
    assert data["tp_btf"]["ok"] is True and data["ringbuf"]["ok"] is True and data["btf"]["ok"] is True
    assert data["cookies"]["ok"] is True
    if HOST_KERNEL:
        assert data["fentry"] == {"ok": False, "detail": data["fentry"]["detail"], "error": "EPERM", "value": None}
        assert data["kprobes"]["ok"] is False


def test_cli_table():
    require_root()
    out = subprocess.run(PYCORE + ["features"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(CHECKS)
    column = {line.index(" yes ") if " yes " in line else line.index(" no ") for line in lines}
    assert len(column) == 1  # yes/no aligned
    assert any(line.startswith("tp_btf") and " yes " in line for line in lines)


def test_cli_without_privileges_exits_2():
    require_root()  # to become nobody
    out = subprocess.run(as_nobody(PYCORE + ["features"]), capture_output=True, text=True, timeout=60,
                         cwd="/", env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert "CAP_BPF" in out.stderr and "CAP_PERFMON" in out.stderr


def test_a_broken_check_becomes_a_failed_result():
    class Broken(Features):
        def _probe_btf(self):
            raise RuntimeError("boom")

    r = Broken().btf
    assert not r.ok and "RuntimeError: boom" in r.detail
