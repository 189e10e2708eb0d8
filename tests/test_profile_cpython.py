"""pycore profile on CPython versions other than the host's 3.11: Debian 13's python3.13, run in the
Debian 13 root (``./dev.sh trixie-root`` builds it, with python3.13 and its headers), whose frame
offsets pycore reads from the interpreter itself (``_Py_DebugOffsets``); and 3.11 beside 3.13 under
``-a`` (each process its own layout in the program's ``py_procs`` map).

3.12's layout (pycore/elf/cpython.py) is from its published headers: no 3.12 runs here, and no test
pretends to check it (docs/profile.md says so).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from pycore.elf.cpython import DEBUG_OFFSETS, PythonBinary, layout_for
from tests.test_profile import CODE_FIELDS, FUNCS, PYCORE, ROOT, WORKLOAD, cpython_values, folded_stacks, profile_4000, \
    py_spy_record, python_name, shares, start_workload, stop_workload

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trixie() -> Path:
    """Debian 13's root, with python3.13 and libpython3.13-dev (built or completed once by dev.sh)."""
    env = dict(os.environ)
    env.pop("XDG_CACHE_HOME", None)         # the root outlives test runs: the user's own ~/.cache
    res = subprocess.run([str(ROOT / "dev.sh"), "trixie-root"], capture_output=True, text=True, timeout=900,
                         env=env, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        pytest.fail(f"./dev.sh trixie-root failed: {res.stderr.strip().splitlines()[-1:]}")
    root = Path(res.stdout.strip().splitlines()[-1])
    assert (root / "usr/bin/python3.13").exists()
    return root


def start_workload_313(root: Path, seconds: float = 60, workload: str = WORKLOAD.name) -> subprocess.Popen:
    """tests/profile_workload.py (or another of tests/) under the root's python3.13: the tests directory
    bound on its /mnt and /dev bound, in a mount namespace of its own (nothing stays mounted); the Popen's
    pid is python3.13's (unshare, sh and chroot each exec the next)."""
    script = textwrap.dedent("""\
        r=$1; t=$2; s=$3; w=$4
        mount --bind "$t" "$r/mnt" && mount --rbind /dev "$r/dev" || exit 125
        exec chroot "$r" python3.13 "/mnt/$w" "$s"
        """)
    proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(root),
                             str(WORKLOAD.parent), str(seconds), workload],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline().strip()
    assert line == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc


def test_debug_offsets_match_the_313_headers(tmp_path, trixie):
    """What pycore reads from python3.13's _Py_DebugOffsets (where each field sits in that struct, and the
    offsets it holds) against offsetof() in Debian 13's libpython3.13-dev headers."""
    binary = PythonBinary(str(trixie / "usr/bin/python3.13"))
    layout, name = layout_for(binary)
    assert layout is not None, name
    assert name.startswith("CPython 3.13.")
    names = [f"{s}.{f}" for s, fs in DEBUG_OFFSETS[(3, 13)] for f in fs]
    positions = {f"pos:{n}": f"offsetof(_Py_DebugOffsets, {n.split('.', 1)[1] if n.startswith('head.') else n})"
                 for n in names}
    fields = {
        "tstate_thread_id": "PyThreadState, native_thread_id",
        "tstate_cframe": "PyThreadState, current_frame",
        "tstate_next": "PyThreadState, next",
        "interpreters_head": "_PyRuntimeState, interpreters.head",
        "interp_threads_head": "PyInterpreterState, threads.head",
        "frame_previous": "_PyInterpreterFrame, previous",
        "frame_code": "_PyInterpreterFrame, f_executable",
        "frame_instr": "_PyInterpreterFrame, instr_ptr",
        "frame_owner": "_PyInterpreterFrame, owner",
        **CODE_FIELDS,
    }
    exprs = {k: f"offsetof({v})" for k, v in fields.items()}
    exprs.update(ascii_data="sizeof(PyASCIIObject)", compact_data="sizeof(PyCompactUnicodeObject)",
                 size="sizeof(_Py_DebugOffsets)", **positions)
    # the root's headers after the host's system ones: its pyconfig.h, not its libc
    got = cpython_values(tmp_path, [f"-I{trixie / 'usr/include/python3.13'}", "-idirafter", str(trixie / "usr/include")],
                         exprs)
    real = {k: v for k, v in got.items() if k in fields or k in ("ascii_data", "compact_data")}
    assert {k: getattr(layout, k) for k in real} == real
    assert {k[4:]: v for k, v in got.items() if k.startswith("pos:")} == {n: 8 * i for i, n in enumerate(names)}
    assert got["size"] == 8 * len(names)


def test_python313_shares_within_two_points_and_py_spy(trixie, tmp_path, record_property):
    """tests/test_profile.py's accuracy test on Debian 13's python3.13 in its own root: each function's
    share within 2 points of the workload's CPU times, the 220-frame recursion whole, the Python frames
    in place of _PyEval_EvalFrameDefault; then py-spy on the same process for comparison."""
    wl = start_workload_313(trixie)
    folded = tmp_path / "pycore.folded"
    spy_out = tmp_path / "pyspy.txt"
    try:
        time.sleep(0.5)
        profile_4000(wl.pid, folded, 10)
        py_spy_record(wl.pid, spy_out, 6)
    finally:
        truth = stop_workload(wl)
    expected = {f: 100.0 * truth["used"][f] / truth["cpu"] for f in FUNCS}
    stacks = folded_stacks(folded)
    got, n = shares(stacks, python_name)
    assert all(frames[0] == f"python3.13 ({wl.pid})" for frames, _ in stacks)
    # the file names are the process's own (its root's /mnt), and the recursion is read whole
    assert any(f == "spin (/mnt/profile_workload.py:41)" or f.startswith("spin (/mnt/profile_workload.py:")
               for frames, _ in stacks for f in frames)
    assert max(sum(python_name(f) == "deep" for f in frames) for frames, _ in stacks) == 220
    spliced = sum(n for frames, n in stacks
                  if any(a == "PyEval_EvalCode" and python_name(b) == "<module>" for a, b in zip(frames, frames[1:])))
    assert spliced >= 0.5 * n, (spliced, n)
    assert any("reads" in map(python_name, frames) and frames[-1].endswith("_[k]") for frames, _ in stacks)
    line = {f: f"{expected[f]:.1f}/{got[f]:.1f}" for f in FUNCS}
    print(f"\npython3.13 workload/pycore shares (%), {n} samples: {line}")
    record_property("pycore_shares_313", json.dumps({"truth": expected, "pycore": got, "samples": n}))
    spy_got, spy_n = shares(folded_stacks(spy_out), python_name)
    print(f"py-spy shares (%), {spy_n} samples: { {f: round(v, 1) for f, v in spy_got.items()} }")
    record_property("py_spy_shares_313", json.dumps({"py-spy": spy_got, "samples": spy_n}))
    assert spy_n > 0
    for f in FUNCS:
        assert abs(got[f] - expected[f]) <= 2.0, (f, expected, got)


def test_all_processes_311_beside_313(trixie, tmp_path):
    """-a with python3.11 and python3.13 busy at once: each gets its Python frames, read with its own
    version's offsets."""
    old, new = start_workload(), start_workload_313(trixie)
    out = tmp_path / "all.folded"
    try:
        time.sleep(0.5)
        res = subprocess.run(PYCORE + ["-a", "-d", "3", "-F", "199", "-o", str(out)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        for wl in (old, new):
            wl.send_signal(signal.SIGTERM)
            wl.communicate(timeout=30)
    assert res.returncode == 0, res.stderr
    stacks = folded_stacks(out)
    for wl, exe in ((old, "python3.11"), (new, "python3.13")):
        mine = [frames for frames, _ in stacks if frames[0] == f"{exe} ({wl.pid})"]
        assert mine, (exe, sorted({frames[0] for frames, _ in stacks}))
        assert any("spin" in map(python_name, frames) for frames in mine), exe
        assert any("deep" in map(python_name, frames) for frames in mine), exe


def test_shims_become_entries():
    """3.12+ marks a C call into the eval loop with a shim frame (owner FRAME_OWNED_BY_CSTACK) older than
    the call's frames; the splice wants 3.11's form, the call's first frame flagged is_entry."""
    from pycore.profile.stacks import Frame
    from pycore.profile.unwind import _shims_to_entries

    def p(name):  # noqa: ANN001, ANN202
        return Frame("python", name, "x.py", 1), False

    shim = (None, True)
    frames = [p("inner2"), p("inner1"), shim, p("outer2"), p("outer1"), shim]
    assert [(f.name, e) for f, e in _shims_to_entries(frames)] == [
        ("inner2", False), ("inner1", True), ("outer2", False), ("outer1", True)]
    # a walk cut before the outermost shim (256 frames): the last run is not marked
    assert [(f.name, e) for f, e in _shims_to_entries(frames[:4])] == [
        ("inner2", False), ("inner1", True), ("outer2", False)]
