"""The tools of ``pycore run`` on the host kernel, each driving a real workload.

The host refuses fentry/fexit, so fget-crack and vfs-unlink run their
fallbacks here and the tests check that they say so; the fentry/fexit paths
are in tests/test_tools_kernel.py (kernel VM).  Workloads run under ``-c``
so the in-kernel pid filter makes the output exact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import bpftool_show, prog_ids_of, require_root, running, stop

PYCORE = [sys.executable, "-m", "pycore"]
COMM = os.path.basename(sys.executable)[:15]   # comm is the basename execve was given


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def pycore(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCORE, *args], capture_output=True, text=True, timeout=timeout)


def script(tmp_path, body: str) -> str:
    """A Python workload as a -c command line."""
    path = tmp_path / "workload.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


# -- framework ---------------------------------------------------------------------


def test_tools_lists_every_tool_with_attach_points_and_verdict():
    r = pycore("tools")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for name in ("fget-crack", "vfs-unlink", "lock-contention", "fd-leak", "print-args"):
        assert name in out
    assert "attach: fexit/fget, tp_btf/sys_exit  [ok (fallback): tp_btf/sys_exit]" in out
    assert "attach: fentry/FUNC  [cannot run here]" in out


def test_tools_json():
    rows = [json.loads(line) for line in pycore("tools", "--json").stdout.splitlines()]
    by = {r["name"]: r for r in rows}
    assert by["fget-crack"]["runs_here"] == "fallback"
    assert by["fget-crack"]["method"] == "tp_btf/sys_exit"
    assert by["lock-contention"]["runs_here"] == "yes"


def test_unknown_tool():
    r = pycore("run", "no-such-tool")
    assert r.returncode == 2
    assert "no tool 'no-such-tool'; known: fget-crack" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("print-args", "no_such_func_xyz", "-d", "0"), "pycore run print-args: no_such_func_xyz is not in this kernel's BTF"),
    (("fget-crack", "--pattern", "x" * 300, "-d", "0"), "pycore run fget-crack: --pattern is longer than 31 bytes"),
])
def test_tool_option_errors_say_why(args, message):
    """A tool refusing its options says why in one line (it used to exit 2 silently)."""
    r = pycore("run", *args)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", message + "\n")


def test_duration_zero_attaches_and_exits():
    t0 = time.monotonic()
    r = pycore("run", "fget-crack", "-d", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert time.monotonic() - t0 < 10


def _our_prog_ids(name: str) -> set[int]:
    return {p["id"] for p in bpftool_show("prog") if p.get("name") == name}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_cleanly_and_detaches(sig):
    with running([*PYCORE, "run", "fget-crack"]) as p:
        notice = p.stderr.readline()  # printed once attached
        assert "using the tp_btf/sys_exit fallback" in notice
        ours = _our_prog_ids("sys_exit_fd") & prog_ids_of(p.pid)   # not another run's of the same name
        assert len(ours) == 1
        out, err = stop(p, sig, timeout=20)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    for _ in range(50):  # the kernel frees programs after an RCU grace period
        if not _our_prog_ids("sys_exit_fd") & ours:
            break
        time.sleep(0.1)
    else:
        pytest.fail("program still loaded after the signal")


# -- fget-crack ----------------------------------------------------------------------

FGET_WORKLOAD = """
    import json, os, sys
    d = sys.argv[1]
    fd = os.open(os.path.join(d, "libcrack-test.so"), os.O_CREAT | os.O_RDWR, 0o644)
    dup = os.dup(fd)
    other = os.open(os.path.join(d, "unrelated.txt"), os.O_CREAT | os.O_RDWR, 0o644)
    with open(os.path.join(d, "fds.json"), "w") as f:
        json.dump([fd, dup], f)
"""

FALLBACK_NOTICE = ("pycore: fexit/fget cannot attach (this kernel refuses fentry/fexit); using the "
                   "tp_btf/sys_exit fallback (descriptors returned by open/openat/openat2/creat/dup*/"
                   "fcntl F_DUPFD, not every fget)\n")


@pytest.fixture
def tmp_path(tmp_path_factory):
    """A temporary directory whose path does not contain "crack" (pytest's would: the test names)."""
    return tmp_path_factory.mktemp("work")


def test_fget_crack_fallback_exact_output(tmp_path, record_property):
    record_property("tool", "fget-crack")
    record_property("fallback", "tp_btf/sys_exit")
    cmd = script(tmp_path, FGET_WORKLOAD) + f" {tmp_path}"
    r = pycore("run", "fget-crack", "-c", cmd)
    assert r.returncode == 0, r.stderr
    fd, dup = json.loads((tmp_path / "fds.json").read_text())
    assert r.stdout == f"{COMM} (fd{fd}):  libcrack-test.so\n{COMM} (fd{dup}):  libcrack-test.so\n"
    assert r.stderr == FALLBACK_NOTICE


def test_fget_crack_pattern_and_json(tmp_path):
    cmd = script(tmp_path, FGET_WORKLOAD) + f" {tmp_path}"
    r = pycore("run", "fget-crack", "--pattern", "unrelated", "--json", "-c", cmd)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(events) == 1
    e = events[0]
    assert (e["comm"], e["name"], e["via"]) == (COMM, "unrelated.txt", "syscall 257")
    assert e["fd"] == json.loads((tmp_path / "fds.json").read_text())[1] + 1


def test_fget_crack_pid_filter(tmp_path):
    """-p: another process opening a matching file is not reported."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        p = subprocess.Popen([*PYCORE, "run", "fget-crack", "-p", str(target.pid), "-d", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stderr.readline()
        (tmp_path / "libcrack-test.so").write_text("x")
        open(tmp_path / "libcrack-test.so").close()
        out, err = p.communicate(timeout=30)
    finally:
        target.kill()
    assert p.returncode == 0, err
    assert out == ""


# -- vfs-unlink -----------------------------------------------------------------------

UNLINK_WORKLOAD = """
    import os, sys
    os.chdir(sys.argv[1])
    os.makedirs("sub")
    for name in ("a.txt", "sub/b.txt", "sub/c.txt"):
        open(name, "w").close()
    os.unlink("a.txt")                      # relative to the cwd
    os.unlink("sub/b.txt")                  # parent from the path
    d = os.open("sub", os.O_RDONLY | os.O_DIRECTORY)
    os.unlink("c.txt", dir_fd=d)            # relative to a dirfd
    try:
        os.unlink("missing.txt")            # fails: not reported
    except FileNotFoundError:
        pass
    os.rmdir("sub")                         # rmdir is not vfs_unlink
"""


def test_vfs_unlink_fallback_exact_output(tmp_path, record_property):
    record_property("tool", "vfs-unlink")
    record_property("fallback", "syscall tracepoints")
    work = tmp_path / "unlinkdir"
    work.mkdir()
    cmd = script(tmp_path, UNLINK_WORKLOAD) + f" {work}"
    r = pycore("run", "vfs-unlink", "-c", cmd)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{COMM} unlinkdir/a.txt\n{COMM} sub/b.txt\n{COMM} sub/c.txt\n"
    assert r.stderr == ("pycore: fentry/vfs_unlink cannot attach (this kernel refuses fentry/fexit); "
                        "using the tracepoint/syscalls/sys_{enter,exit}_unlink{,at} fallback "
                        "(successful unlink/unlinkat calls, names from the path as given)\n")


def test_vfs_unlink_json(tmp_path):
    work = tmp_path / "unlinkdir"
    work.mkdir()
    cmd = script(tmp_path, UNLINK_WORKLOAD) + f" {work}"
    r = pycore("run", "vfs-unlink", "--json", "-c", cmd)
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(e["parent"], e["name"], e["path"]) for e in events] == [
        ("unlinkdir", "a.txt", "a.txt"), ("sub", "b.txt", "sub/b.txt"), ("sub", "c.txt", "c.txt")]


def test_vfs_unlink_dentry_index_from_btf():
    import btf

    from pycore.tools.vfs_unlink import dentry_arg_index

    assert dentry_arg_index(btf.load_kernel_spec()) == 2   # (idmap, dir, dentry, delegated_inode)


# -- lock-contention -------------------------------------------------------------------

CONTENTION_WORKLOAD = """
    import os, sys, threading
    d = sys.argv[1]
    def work(i):                      # renames in one directory contend on its i_rwsem
        for _ in range(1500):
            p = os.path.join(d, f"f{i}")
            open(p, "w").close()
            os.rename(p, os.path.join(d, f"g{i}"))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
"""

HIST_ROW = r"\[(\d+[KMG]?), (\d+[KMG]?)\)\s+\d+ \|@*\s*\|"


def test_lock_contention_hist_output(tmp_path, record_property):
    record_property("tool", "lock-contention")
    import re

    work = tmp_path / "renames"
    work.mkdir()
    cmd = script(tmp_path, CONTENTION_WORKLOAD) + f" {work}"
    r = pycore("run", "lock-contention", "--threshold", "1", "-c", cmd, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""                      # tp_btf works here: no fallback notice
    assert r.stdout.startswith("\n@[")         # bpftrace starts the END output with a blank line
    blocks = r.stdout[1:].split("\n\n")
    assert len(blocks) > 1, r.stdout
    for block in blocks:
        if not block:
            continue
        title, *rows = block.rstrip("\n").split("\n")
        assert re.fullmatch(r"@\[0xffff[0-9a-f]{12}\]: ", title), title
        assert rows and all(re.fullmatch(HIST_ROW, row) for row in rows), block
        assert int(re.search(r"\) +(\d+)", rows[0]).group(1)) > 0   # no leading empty buckets


def test_lock_contention_flags_and_json(tmp_path):
    import re

    work = tmp_path / "renames"
    work.mkdir()
    cmd = script(tmp_path, CONTENTION_WORKLOAD) + f" {work}"
    r = pycore("run", "lock-contention", "--threshold", "1", "--flags", "-c", cmd, timeout=120)
    titles = [line for line in r.stdout.splitlines() if line.startswith("@[")]
    assert titles
    names = r"(SPIN|READ|WRITE|RT|PERCPU|MUTEX)"
    assert all(re.fullmatch(rf"@\[0xffff[0-9a-f]{{12}}, {names}(\|{names})*\]: ", t) for t in titles), titles
    r = pycore("run", "lock-contention", "--threshold", "1", "--json", "-c", cmd, timeout=120)
    summary = json.loads(r.stdout.splitlines()[-1])
    assert summary["long_block_times"]
    assert all(sum(h["buckets"].values()) > 0 for h in summary["long_block_times"])


def test_print_flags_parsed_from_tracefs():
    from pycore.tools.lock_contention import DEFAULT_FLAGS, FORMAT, flag_names, parse_print_flags

    with open(FORMAT) as f:
        names = parse_print_flags(f.read())
    assert names == DEFAULT_FLAGS
    assert flag_names(0x22, names) == "READ|MUTEX"
    assert flag_names(0x41, names) == "SPIN|0x40"


def test_lock_contention_high_threshold_prints_nothing():
    r = pycore("run", "lock-contention", "--threshold", "10000000", "-d", "0.5")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


# -- fd-leak ---------------------------------------------------------------------------

LEAK_WORKLOAD = """
    import json, os, sys, time
    d = sys.argv[1]
    fds = [os.open(os.path.join(d, f"leak-{i}.txt"), os.O_CREAT | os.O_RDWR, 0o644) for i in range(4)]
    os.close(fds[0])                 # closed: not a leak
    os.close(fds[2])
    kept = os.dup(fds[1])            # a dup is a descriptor of its own
    with open(os.path.join(d, "closed-by-with.txt"), "w"):
        pass
    with open(os.path.join(d, "fds.json"), "w") as f:
        json.dump([fds[1], fds[3], kept], f)
    time.sleep(0.2)
"""


def test_fd_leak_reports_what_the_child_never_closed(tmp_path, record_property):
    record_property("tool", "fd-leak")
    import re

    cmd = script(tmp_path, LEAK_WORKLOAD) + f" {tmp_path}"
    r = pycore("run", "fd-leak", "-c", cmd)
    assert r.returncode == 0, r.stderr
    a, b, dup = json.loads((tmp_path / "fds.json").read_text())
    lines = r.stdout.splitlines()
    assert lines[:2] == ["3 descriptors opened and never closed:",
                         "    PID COMM               FD   AGE(s)  NAME"]
    rows = [re.fullmatch(r"\s*(\d+) (\S+)\s+(\d+)\s+([\d.]+)  (.*)", line).groups() for line in lines[2:]]
    assert [(c, int(fd), n) for _, c, fd, _, n in rows] == sorted(   # by fd
        [(COMM, a, "leak-1.txt"), (COMM, b, "leak-3.txt"), (COMM, dup, "leak-1.txt")], key=lambda x: x[1])
    assert all(0.15 < float(age) < 30 for *_, age, _ in rows)
    assert len({pid for pid, *_ in rows}) == 1


def test_fd_leak_json_and_nothing_left(tmp_path):
    cmd = script(tmp_path, "import os\nos.close(os.open('/dev/null', os.O_RDONLY))\n")
    r = pycore("run", "fd-leak", "-c", cmd)
    assert r.stdout == "no descriptors left open\n", r.stdout
    cmd = script(tmp_path, LEAK_WORKLOAD) + f" {tmp_path}"
    leaked = json.loads(pycore("run", "fd-leak", "--json", "-c", cmd).stdout)["leaked"]
    assert sorted(x["name"] for x in leaked) == ["leak-1.txt", "leak-1.txt", "leak-3.txt"]


# -- print-args --------------------------------------------------------------------------


def test_print_args_says_plainly_it_needs_fentry():
    r = pycore("run", "print-args", "vfs_write", "-d", "1")
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith("pycore: print-args cannot run on this kernel: none of its attach methods works:\n"
                               "  fentry/FUNC: this kernel refuses fentry/fexit\n"
                               "what would work: a kernel that allows BPF trampolines")


def test_print_args_formats_values_from_btf():
    import struct

    import btf
    from btf.kinds import Kind

    from pycore.tools.print_args import format_value

    spec = btf.load_kernel_spec()
    path = spec.type(spec.ids_named("path", (Kind.STRUCT,))[0])
    data = struct.pack("<QQ", 0xffff888100000020, 0xffff888109431b00)
    assert format_value(path, data) == "{ .mnt = 0xffff888100000020, .dentry = 0xffff888109431b00 }"
    proto = spec.type(spec.type(spec.ids_named("vfs_write", (Kind.FUNC,))[0]).type_id)
    raw = struct.pack("<4Q", 0xffff88a79ffa6900, 0x7f77b8ff9730, 8, 0xffffc900268f7ef8)
    line = "{ " + ", ".join(f".{p.name} = {format_value(p.type, raw, 8 * i)}" for i, p in enumerate(proto.params)) + " }"
    assert line == "{ .file = 0xffff88a79ffa6900, .buf = 0x7f77b8ff9730, .count = 8, .pos = 0xffffc900268f7ef8 }"
