"""py-calls on Debian's /usr/bin/python3.11: the exact call flow of known
scripts (entries, returns, depth read from the interpreter's frames, file,
function, line), under -c and attached mid-run with -p, --json; the frame
offsets against CPython's own headers; the counted-depth fallback and the
errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pycore.elf.cpython import LAYOUTS, PythonBinary, layout_for
from tests.conftest import running, stop

PYTHON = "/usr/bin/python3.11"
HEADERS = "/usr/include/python3.11"

# No skip without python3.11: ./dev.sh installs it, and a missing one should fail.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

# Recursion, an exception leaving a frame, a generator resumed three times,
# and a second thread (its fib sits under threading's three frames).
FLOW_SCRIPT = """\
import threading


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def leaf():
    raise ValueError("no")


def middle():
    try:
        leaf()
    except ValueError:
        return 1


def gen():
    yield 1
    yield 2


def main():
    fib(2)
    middle()
    list(gen())
    t = threading.Thread(target=fib, args=(1,))
    t.start()
    t.join()


main()
"""

# (thread, event, depth, function, line): "main" or "other" thread.
FLOW = [
    ("main", "entry", 1, "<module>", 0),
    ("main", "entry", 2, "main", 26),
    ("main", "entry", 3, "fib", 4),
    ("main", "entry", 4, "fib", 4),
    ("main", "return", 4, "fib", 6),
    ("main", "entry", 4, "fib", 4),
    ("main", "return", 4, "fib", 6),
    ("main", "return", 3, "fib", 7),
    ("main", "entry", 3, "middle", 14),
    ("main", "entry", 4, "leaf", 10),
    ("main", "return", 4, "leaf", 11),     # left by the exception
    ("main", "return", 3, "middle", 18),
    ("main", "entry", 3, "gen", 21),
    ("main", "return", 3, "gen", 22),      # yield 1
    ("main", "entry", 3, "gen", 22),
    ("main", "return", 3, "gen", 23),      # yield 2
    ("main", "entry", 3, "gen", 23),
    ("main", "return", 3, "gen", 23),      # StopIteration
    ("other", "entry", 4, "fib", 4),       # Thread._bootstrap, _bootstrap_inner, run, fib
    ("other", "return", 4, "fib", 6),
    ("main", "return", 2, "main", 32),
    ("main", "return", 1, "<module>", 35),
]

# Waits (inside wait(), called from <module>) until a file appears, after
# saying it is in there (PATH.ready): the tool attaches while two frames are
# already running. The wait loop calls os.path.exists every half millisecond
# so that attaching happens among calls: a probe hit before the tool has set
# up its per-location state shows up as an event without depth.
WAIT_SCRIPT = """\
import os
import sys
import time


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def wait(path):
    open(path + ".ready", "w").close()
    while not os.path.exists(path):
        time.sleep(0.0005)
    fib(2)


wait(sys.argv[1])
"""

WAIT_FLOW = [
    ("main", "entry", 3, "fib", 6),
    ("main", "entry", 4, "fib", 6),
    ("main", "return", 4, "fib", 8),
    ("main", "entry", 4, "fib", 6),
    ("main", "return", 4, "fib", 8),
    ("main", "return", 3, "fib", 9),
    ("main", "return", 2, "wait", 16),
    ("main", "return", 1, "<module>", 19),
]


def pycore(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pycore", *args], capture_output=True, text=True,
                          timeout=120, **kw)


def split_row(line: str) -> tuple[str, str, str]:
    """PID, TID and the indented flow of one output line (columns at least 6 wide)."""
    pid, tid = line.split()[:2]
    start = line.index(tid, len(pid)) + max(len(tid), 6) + 1
    return pid, tid, line[start:]


def inside_wait(go: Path, timeout: float = 30.0) -> None:
    """Until WAIT_SCRIPT says it is inside wait() (a fixed sleep raced a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not Path(f"{go}.ready").exists():
        assert time.monotonic() < deadline, "the target never reached wait()"
        time.sleep(0.02)


def text_flow(out: str, script: str) -> list[tuple]:
    """The script's lines of the text output, parsed back (depth from the indent)."""
    rows = []
    for line in out.splitlines()[1:]:
        pid, tid, rest = split_row(line)
        flow = rest.lstrip(" ")
        indent = len(rest) - len(flow)
        assert indent % 2 == 0, line
        arrow, what = flow[:3], flow[3:]
        if not what.startswith(script + "."):
            continue
        func, lineno = what[len(script) + 1:].rsplit(":", 1)
        rows.append(("main" if tid == pid else "other", {"-> ": "entry", "<- ": "return"}[arrow],
                     indent // 2 + 1, func, int(lineno)))
    return rows


def json_flow(out: str, script: str) -> list[tuple]:
    rows = []
    for line in out.splitlines():
        ev = json.loads(line)
        if ev["filename"] == script:
            rows.append(("main" if ev["tid"] == ev["pid"] else "other", ev["event"], ev["depth"],
                         ev["funcname"], ev["lineno"]))
    return rows


def test_flow_under_c(tmp_path, record_property):
    record_property("tool", "py-calls")
    script = tmp_path / "flow.py"
    script.write_text(FLOW_SCRIPT)
    r = pycore("run", "py-calls", "-c", f"{PYTHON} {script}")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.splitlines()[0].split() == ["PID", "TID", "CALL", "FLOW"]
    assert text_flow(r.stdout, str(script)) == FLOW
    # the interpreter's start-up is traced too, each entry with its return
    assert r.stdout.count(" -> ") == r.stdout.count(" <- ") > 100


def test_flow_json(tmp_path):
    script = tmp_path / "flow.py"
    script.write_text(FLOW_SCRIPT)
    r = pycore("run", "py-calls", "--json", "-c", f"{PYTHON} {script}")
    assert r.returncode == 0, r.stderr
    assert json_flow(r.stdout, str(script)) == FLOW
    first = json.loads(r.stdout.splitlines()[0])
    assert set(first) == {"pid", "tid", "event", "depth", "filename", "funcname", "lineno"}


def test_attached_mid_run_with_p(tmp_path):
    """-p on a process already two frames deep: depths are the real ones."""
    script = tmp_path / "wait.py"
    script.write_text(WAIT_SCRIPT)
    go = tmp_path / "go"
    with running([PYTHON, str(script), str(go)], stdout=None, stderr=None) as target:
        inside_wait(go)
        with running([sys.executable, "-m", "pycore", "run", "py-calls", "-p", str(target.pid)]) as tool:
            header = tool.stdout.readline()   # printed once attached
            assert header.split() == ["PID", "TID", "CALL", "FLOW"], tool.stderr.read()
            go.touch()
            assert target.wait(30) == 0
            time.sleep(0.3)
            out, err = stop(tool, timeout=60)
    assert tool.returncode == 0, err
    assert err == ""
    assert text_flow(header + out, str(script)) == WAIT_FLOW


def test_depth_in_a_pid_namespace(tmp_path):
    """native_thread_id is the pid namespace's tid: the BPF check must compare like with like."""
    script = tmp_path / "wait.py"
    script.write_text(WAIT_SCRIPT)
    go = tmp_path / "go"
    with running(["unshare", "--pid", "--fork", "--kill-child", PYTHON, str(script), str(go)],
                 stdout=None, stderr=None) as outer:
        inside_wait(go)
        with open(f"/proc/{outer.pid}/task/{outer.pid}/children") as f:
            inner = int(f.read().split()[0])   # python, pid 1 in its namespace
        with running([sys.executable, "-m", "pycore", "run", "py-calls", "-p", str(inner)]) as tool:
            lines = [tool.stdout.readline()]                          # the header: attached
            reader = threading.Thread(target=lambda: lines.extend(tool.stdout), daemon=True)
            reader.start()
            go.touch()
            assert outer.wait(30) == 0
            # Ctrl-C once the flow is printed: at Ctrl-C the tool says how many events it left in the
            # ring unprinted, which a loaded machine's slower consumer can leave if it is sent at once
            deadline = time.monotonic() + 60
            while len(text_flow("".join(lines), str(script))) < len(WAIT_FLOW) and time.monotonic() < deadline:
                time.sleep(0.05)
            _, err = stop(tool, timeout=60, communicate=False)
            reader.join(10)
            err = tool.stderr.read()
    assert tool.returncode == 0 and err == "", err
    assert text_flow("".join(lines), str(script)) == WAIT_FLOW


def test_layout_matches_cpython_headers(tmp_path):
    """The 3.11 offsets are offsetof() against the installed python3.11-dev headers."""
    if not os.path.exists(f"{HEADERS}/internal/pycore_frame.h"):
        pytest.fail("python3.11-dev is not installed (dev.sh installs it)")
    src = tmp_path / "offsets.c"
    src.write_text(textwrap.dedent("""\
        #define Py_BUILD_CORE 1
        #include <Python.h>
        #include <stddef.h>
        #include <stdio.h>
        #include "internal/pycore_runtime.h"
        #include "internal/pycore_frame.h"
        int main(void)
        {
            printf("%d %d\\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
            printf("%zu %zu %zu %zu %zu\\n",
                   offsetof(_PyRuntimeState, gilstate.tstate_current),
                   offsetof(PyThreadState, native_thread_id),
                   offsetof(PyThreadState, cframe),
                   offsetof(_PyCFrame, current_frame),
                   offsetof(_PyInterpreterFrame, previous));
            return 0;
        }
        """))
    exe = tmp_path / "offsets"
    subprocess.run([shutil.which("gcc") or "cc", f"-I{HEADERS}", str(src), "-o", str(exe)], check=True)
    version, offsets = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    layout = LAYOUTS[tuple(int(v) for v in version.split())]
    assert [int(v) for v in offsets.split()] == [layout.tstate_current, layout.tstate_thread_id,
                                                 layout.tstate_cframe, layout.cframe_current_frame,
                                                 layout.frame_previous]


def test_version_read_from_the_binary():
    real = subprocess.run([PYTHON, "-c", "import sys; print(*sys.version_info[:3])"],
                          capture_output=True, text=True, check=True).stdout.split()
    binary = PythonBinary(PYTHON)
    assert binary.version == tuple(int(v) for v in real)
    layout, name = layout_for(binary)
    assert layout is LAYOUTS[(3, 11)] and name == "CPython {}.{}.{}".format(*real)


FAKE_PYTHON = r"""
#include <sys/sdt.h>
/* CPython's probe names and arguments (filename, funcname, lineno), no CPython. */
static void call(const char *f, int first, int last)
{
    DTRACE_PROBE3(python, function__entry, "fake.py", f, first);
    DTRACE_PROBE3(python, line, "fake.py", f, first + 1);
    if (f[0] == 'a')
        call("b", 10, 11);
    DTRACE_PROBE3(python, function__return, "fake.py", f, last);
}
int main(void)
{
    /* fault the strings in: BPF cannot read a page not yet mapped */
    const char *volatile strings[] = {"fake.py", "a", "b"};
    volatile char touch = 0;
    for (int i = 0; i < 3; i++)
        touch += strings[i][0];
    call("a", 1, 2);
    return 0;
}
"""


def test_no_layout_counts_depth_with_a_notice(tmp_path):
    """A binary with CPython's probes but no CPython 3.11 in it: one notice, counted depth."""
    if not os.path.exists("/usr/include/x86_64-linux-gnu/sys/sdt.h"):
        pytest.fail("systemtap-sdt-dev is not installed (dev.sh installs it)")
    src = tmp_path / "fake.c"
    src.write_text(FAKE_PYTHON)
    exe = tmp_path / "fakepython"
    subprocess.run([shutil.which("gcc") or "cc", "-O1", str(src), "-o", str(exe)], check=True)
    r = pycore("run", "py-calls", "-c", str(exe))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f"pycore: py-calls: {exe}: no Py_Version symbol (CPython before 3.11, "
                                     "or not CPython); depth is counted from the probes since tracing began"]
    assert [split_row(line)[2] for line in r.stdout.splitlines()[1:]] == [
        "-> fake.py.a:1", "  -> fake.py.b:10", "  <- fake.py.b:11", "<- fake.py.a:2"]


def test_errors_exit_2():
    r = pycore("run", "py-calls", "-p", "999999999", "-d", "0")
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = pycore("run", "py-calls", "--binary", "/bin/true", "-d", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == ["pycore: error: /bin/true: no USDT probes (no .note.stapsdt)"]
    r = pycore("run", "py-calls", "--binary", "/nonexistent/python", "-d", "0")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "no such file" in r.stderr


def semaphores(pid: int) -> dict[str, int]:
    """CPython's probe semaphores in a running process (Debian's python3.11 is not PIE)."""
    from pycore.elf.usdt import UsdtFile

    values = {}
    with UsdtFile(PYTHON) as f, open(f"/proc/{pid}/mem", "rb") as mem:
        for name in ("function__entry", "function__return", "line"):
            mem.seek(f.probe("python", name).semaphore)
            values[name] = int.from_bytes(mem.read(2), "little")
    return values


def test_semaphores_up_while_tracing_then_back_to_zero():
    """The line semaphore puts 3.11 on its slow tracing path: it must come down after."""
    with running([PYTHON, "-c", "import time\nwhile True: time.sleep(0.05)"], stdout=None, stderr=None) as target:
        time.sleep(0.3)
        assert semaphores(target.pid) == {"function__entry": 0, "function__return": 0, "line": 0}
        with running([sys.executable, "-m", "pycore", "run", "py-calls", "-p", str(target.pid)]) as tool:
            tool.stdout.readline()   # attached
            assert semaphores(target.pid) == {"function__entry": 1, "function__return": 1, "line": 1}
            stop(tool, timeout=60)
        assert tool.returncode == 0
        assert semaphores(target.pid) == {"function__entry": 0, "function__return": 0, "line": 0}
