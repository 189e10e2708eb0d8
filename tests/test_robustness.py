"""What production agents need from pycore, checked for real on the host kernel:

- a tracer killed with SIGKILL leaves nothing behind: no program, no link,
  no uprobe, and the traced process's USDT semaphore back at 0 (the kernel
  owns all of it through our fds, so it must clean up when they close);
- a full ring buffer counts what it drops and the consumer keeps going;
- several tracers on one probe point each see every event;
- without privileges, one clear line and exit status 2;
- no fd or memory growth over many open/load/attach/close cycles, and
  close() from another thread ends a blocked consumer.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.conftest import NOBODY, bpftool_show, for_everyone, prog_ids_of, require_root

PYCORE = [sys.executable, "-m", "pycore"]


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


# -- helpers -------------------------------------------------------------------------


def bpftool(kind: str) -> list[dict]:
    return bpftool_show(kind)


def prog_ids(*names: str, of: int | None = None) -> set[int]:
    """The loaded programs called one of ``names``; with ``of``, only process ``of``'s (another run of
    the suite may load the same names meanwhile)."""
    held = prog_ids_of(of) if of is not None else None
    return {p["id"] for p in bpftool("prog") if p.get("name") in names and (held is None or p["id"] in held)}


def links_of(progs: set[int]) -> set[int]:
    return {ln["id"] for ln in bpftool("link") if ln.get("prog_id") in progs}


def perf_attachments(progs: set[int]) -> list[dict]:
    """uprobes (and other perf events) holding one of ``progs`` (``bpftool perf``)."""
    return [p for p in bpftool("perf") if p.get("prog_id") in progs]


def wait_gone(progs: set[int], timeout: float = 10.0) -> None:
    """The kernel frees programs after an RCU grace period: poll for it."""
    deadline = time.monotonic() + timeout
    while True:
        left = {p["id"] for p in bpftool("prog")} & progs
        if not left and not links_of(progs):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"programs {sorted(left)} / links {sorted(links_of(progs))} still there")
        time.sleep(0.1)


def wait_new(names: tuple[str, ...], pids: list[int], count: int, timeout: float = 30.0) -> set[int]:
    """Programs called ``names`` held by processes ``pids``, once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ours = set().union(*(prog_ids(*names, of=pid) for pid in pids))
        if len(ours) >= count:
            return ours
        time.sleep(0.1)
    pytest.fail(f"{names} not loaded within {timeout} s")


def uprobe_events_mentioning(path: str) -> list[str]:
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            return [line for line in f if path in line]
    except OSError:
        return []


def demo() -> str:
    from pycore.tools.usdt_passwd import demo_binary

    return demo_binary()


def semaphore_address(pid: int, path: str, file_offset: int) -> int:
    """Where a file offset of ``path`` is mapped in ``pid`` (from /proc/PID/maps)."""
    real = os.path.realpath(path)
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or parts[5] != real:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            off = int(parts[2], 16)
            if off <= file_offset < off + (hi - lo):
                return lo + file_offset - off
    raise LookupError(f"offset {file_offset:#x} of {path} not mapped in {pid}")


def read_semaphore(pid: int, addr: int) -> int:
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return int.from_bytes(f.read(2), "little")


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise LookupError("VmRSS")


# -- (a) SIGKILL leaves nothing attached ------------------------------------------------


def test_kill9_fget_crack_leaves_nothing():
    p = subprocess.Popen([*PYCORE, "run", "fget-crack"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert "using the tp_btf/sys_exit fallback" in p.stderr.readline()  # printed once attached
        ours = prog_ids("sys_exit_fd", of=p.pid)
        assert len(ours) == 1
        assert links_of(ours), "the tp_btf link should show in bpftool link show"
        p.kill()
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGKILL
    wait_gone(ours)


def test_kill9_usdt_tool_leaves_no_uprobe():
    path = demo()
    target = subprocess.Popen([path, "0", "50"], stdout=subprocess.DEVNULL)
    p = subprocess.Popen([*PYCORE, "run", "usdt-passwd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("PID"), p.stderr.read()  # the header: attached
        assert p.stdout.readline().strip(), "no event from the demo"
        ours = prog_ids("passwdfound", of=p.pid)
        assert len(ours) == 1
        assert perf_attachments(ours), "the uprobes should show in bpftool perf show"
        p.kill()
        p.wait(10)
        wait_gone(ours)
        assert not perf_attachments(ours)
        assert not uprobe_events_mentioning(path)
        assert target.poll() is None, "the traced process must survive its tracer"
    finally:
        for proc in (p, target):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


AGENT = """
    import sys, time
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path
    from pycore.elf.usdt import UsdtAttacher
    obj = BpfObject(object_path("test_usdt"))
    obj.load()
    UsdtAttacher(obj).attach("usdt_hit", sys.argv[1], "passwd", "lookup", pid=int(sys.argv[2]))
    print("attached", flush=True)
    time.sleep(600)
"""


def test_kill9_usdt_agent_semaphore_back_to_zero(tmp_path):
    """passwd:lookup has a semaphore: the kernel raises it while a uprobe with
    ref_ctr_offset is attached, and must lower it when SIGKILL closes our fds."""
    from pycore.elf.usdt import UsdtFile

    path = demo()
    with UsdtFile(path) as f:
        sema_off = f.probe("passwd", "lookup").semaphore_offset
    assert sema_off
    target = subprocess.Popen([path, "0", "50"], stdout=subprocess.DEVNULL)
    agent_py = tmp_path / "agent.py"
    agent_py.write_text(textwrap.dedent(AGENT))
    agent = None
    try:
        for _ in range(100):  # until the loader has mapped the binary
            try:
                addr = semaphore_address(target.pid, path, sema_off)
                break
            except LookupError:
                time.sleep(0.02)
        assert read_semaphore(target.pid, addr) == 0
        agent = subprocess.Popen([sys.executable, str(agent_py), path, str(target.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert agent.stdout.readline().strip() == "attached", agent.stderr.read()
        assert read_semaphore(target.pid, addr) == 1
        ours = prog_ids("usdt_hit", of=agent.pid)
        assert len(ours) == 1
        agent.kill()
        agent.wait(10)
        wait_gone(ours)
        assert read_semaphore(target.pid, addr) == 0
        assert not uprobe_events_mentioning(path)
        assert target.poll() is None
    finally:
        for proc in (agent, target):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


# -- (b) ring buffer overflow ------------------------------------------------------------------


def _ring_obj(ring_size: int):
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path

    obj = BpfObject(object_path("test_ringbuf"))
    obj.globals["target_tgid"] = os.getpid()
    obj.maps["events"].max_entries = ring_size
    obj.load()
    obj.attach()
    return obj


def test_overflow_is_counted_and_consumption_continues():
    """A one-page ring (about 70 events) fed 20,000 events in bursts, with a
    consumer thread: every event is either consumed or counted as lost, the
    consumer gets events after every burst (never stalls on a full ring), and
    sequence numbers only go up."""
    from pycore.native.ringbuf import RingBuffer

    obj = _ring_obj(4096)
    rb = RingBuffer(obj, "events")
    seqs: list[int] = []
    per_burst: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            for ev in rb.events(timeout=0.05):
                seqs.append(ev.seq)

    t = threading.Thread(target=consume)
    t.start()
    try:
        bursts, size = 20, 1000
        for _ in range(bursts):
            n0 = len(seqs)
            for _ in range(size):
                os.getpid()
            deadline = time.monotonic() + 5
            while len(seqs) == n0 and time.monotonic() < deadline:
                time.sleep(0.005)
            per_burst.append(len(seqs) - n0)
        time.sleep(0.2)
    finally:
        stop.set()
        t.join(10)
    produced = int(obj.globals["test_seq"])
    lost = rb.lost
    try:
        assert not t.is_alive()
        assert produced == bursts * size
        assert lost > 0, "a one-page ring fed 1000 events at once must overflow"
        assert len(seqs) + lost == produced
        assert all(n > 0 for n in per_burst), per_burst
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        # after the storm the ring works as before: nothing more lost
        for _ in range(10):
            os.getpid()
        more = [ev.seq for ev in rb.events(timeout=0.5)]
        assert more == list(range(produced, produced + 10))
        assert rb.lost == lost
    finally:
        rb.close()
        obj.close()


# -- (c) several tracers on one probe point ----------------------------------------------------

WORKLOAD = """
    import json, os, sys
    d, token, n, keep = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.stdin.readline()   # go
    fds = [os.open(os.path.join(d, f"{token}-{i}.dat"), os.O_CREAT | os.O_RDWR, 0o644) for i in range(n)]
    for fd in fds[keep:]:
        os.close(fd)
    print(json.dumps(fds[:keep]), flush=True)
    sys.stdin.readline()   # exit
"""


def test_two_tools_and_an_embedded_agent_on_sys_exit(tmp_path_factory):
    """fget-crack (tp_btf/sys_exit fallback) and fd-leak (tp_btf sys_exit +
    sys_enter) as ``pycore run``, plus a BpfObject + RingBuffer in this
    process, on the same tracepoint at once: each sees every event."""
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path
    from pycore.native.ringbuf import RingBuffer

    d = tmp_path_factory.mktemp("multi")
    token, n, keep = f"pyrob{os.getpid()}", 300, 40
    wl_py = d / "wl.py"
    wl_py.write_text(textwrap.dedent(WORKLOAD))
    wl = subprocess.Popen([sys.executable, str(wl_py), str(d), token, str(n), str(keep)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs: list[subprocess.Popen] = []
    obj = rb = None
    try:
        pid = str(wl.pid)
        fget = subprocess.Popen([*PYCORE, "run", "fget-crack", "-p", pid, "--pattern", token, "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(fget)
        leak = subprocess.Popen([*PYCORE, "run", "fd-leak", "-p", pid, "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(leak)

        obj = BpfObject(object_path("fget_crack"))
        for prog in obj.programs.values():
            prog.autoload = prog.name == "sys_exit_fd"
        obj.globals["targ_tgid"] = wl.pid
        obj.globals["pattern"] = token
        obj.globals["pattern_len"] = len(token)
        obj.load()
        obj.programs["sys_exit_fd"].attach()
        rb = RingBuffer(obj, "events", event="fget_event")

        assert "fallback" in fget.stderr.readline()
        # fget-crack's sys_exit_fd, fd-leak's fd_opened and fd_closed, this process's sys_exit_fd
        wait_new(("sys_exit_fd", "fd_opened", "fd_closed"), [fget.pid, leak.pid, os.getpid()], 4)

        wl.stdin.write("go\n")
        wl.stdin.flush()
        kept = json.loads(wl.stdout.readline())
        embedded = [ev for ev in rb.events(timeout=0.5)]
        time.sleep(0.3)
        for p in procs:
            p.send_signal(signal.SIGINT)
        outs = [p.communicate(timeout=30) for p in procs]
    finally:
        for p in [*procs, wl]:
            if p.poll() is None:
                p.kill()
                p.wait()
        if rb is not None:
            rb.close()
        if obj is not None:
            obj.close()
    names = {f"{token}-{i}.dat" for i in range(n)}
    assert fget.returncode == 0 and leak.returncode == 0, [e for _, e in outs]
    cli = [json.loads(line) for line in outs[0][0].splitlines()]
    assert sorted(e["name"] for e in cli) == sorted(names)
    assert sorted(e.name for e in embedded) == sorted(names)
    assert {e.pid for e in embedded} == {wl.pid}
    leaked = json.loads(outs[1][0].splitlines()[-1])["leaked"]
    ours = {r["fd"]: r["name"] for r in leaked if r["name"].startswith(token)}
    assert sorted(ours) == sorted(kept)
    assert set(ours.values()) == {f"{token}-{i}.dat" for i in range(keep)}


# -- (d) without privileges --------------------------------------------------------------------

def _as(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(for_everyone([*prefix, *PYCORE, *args]), capture_output=True, text=True, timeout=60,
                          cwd="/")


@pytest.mark.parametrize("args", [("run", "fget-crack", "-d", "0"), ("run", "usdt-passwd"),
                                  ("run", "lock-contention", "-d", "1"), ("features",)])
def test_nobody_gets_one_line_and_exit_2(args):
    r = _as(NOBODY, *args)
    assert r.returncode == 2, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "missing CAP_BPF, CAP_PERFMON" in lines[0] and "this process has none of them" in lines[0]
    assert "Traceback" not in r.stderr


def test_root_without_cap_perfmon_is_told_which_is_missing():
    r = _as(["setpriv", "--bounding-set=-perfmon,-sys_admin"], "run", "fget-crack", "-d", "0")
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1
    assert "missing CAP_PERFMON; this process has CAP_BPF" in r.stderr


def test_nobody_list():
    """Listing needs no BPF: it works from BTF; what it cannot read is one line, exit 2."""
    r = _as(NOBODY, "list", "kfunc:vfs_read")
    assert r.returncode == 0 and "vfs_read" in r.stdout and "Traceback" not in r.stderr
    r = _as(NOBODY, "list", "-p", "1", "usdt")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Permission denied" in r.stderr
    assert "Traceback" not in r.stderr


# -- (e) no growth, close from another thread ----------------------------------------------------


def _cycle() -> None:
    from pycore.native.ringbuf import RingBuffer

    obj = _ring_obj(4096)
    with RingBuffer(obj, "events") as rb:
        os.getpid()
        assert rb.wait(1.0)
        assert [ev.seq for ev in rb.consume()] == [0]
    obj.close()


def test_no_fd_or_memory_growth_over_200_cycles():
    for _ in range(20):  # warm-up: imports, caches, the allocator's arenas
        _cycle()
    gc.collect()
    fds, rss = fd_count(), rss_kb()
    for _ in range(200):
        _cycle()
    gc.collect()
    grown_kb = rss_kb() - rss
    print(f"200 cycles: fds {fds} -> {fd_count()}, VmRSS +{grown_kb} kB")
    assert fd_count() == fds
    assert grown_kb < 5 * 1024


@pytest.mark.parametrize("which", ["ringbuf", "object+ringbuf"])
def test_close_from_another_thread_ends_a_blocked_consumer(which):
    from pycore.native.ringbuf import RingBuffer

    obj = _ring_obj(64 * 1024)
    rb = RingBuffer(obj, "events")
    result: list = []

    def consume() -> None:
        try:
            result.append(sum(1 for _ in rb.events(timeout=30)))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            result.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    for _ in range(5):
        os.getpid()
    time.sleep(0.3)  # the consumer has taken the 5 and blocks in epoll
    t0 = time.monotonic()
    if which == "object+ringbuf":
        obj.close()
    rb.close()
    t.join(5)
    took = time.monotonic() - t0
    obj.close()
    assert not t.is_alive()
    assert result == [5]
    assert took < 1.0
    assert rb.closed


# -- (e) the traced process: gone, exiting, or impossible to start -------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid  # reaped: nobody has this pid now (until the kernel wraps around)


def test_pid_that_does_not_exist_is_an_error():
    pid = _dead_pid()
    t0 = time.monotonic()
    r = subprocess.run([*PYCORE, "run", "fget-crack", "-p", str(pid)], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - t0 < 10  # not a wait for a process that will never come
    assert r.returncode == 2, r
    assert r.stderr.splitlines() == [f"pycore run: process {pid} does not exist"]


def test_tracing_ends_when_the_traced_process_exits():
    target = subprocess.Popen(["sleep", "1.5"])
    try:
        t0 = time.monotonic()
        r = subprocess.run([*PYCORE, "run", "fget-crack", "-p", str(target.pid)],
                           capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 0, r
    assert took < 8, took  # ended with the process, not at the timeout


@pytest.mark.parametrize("cmd,why", [("/nonexistent", "no such file"), ("no-such-command-xyz", "not found on PATH"),
                                     ("/etc", "not an executable file"), ("'unclosed", "No closing quotation")])
def test_command_that_cannot_start_is_an_error(cmd, why):
    r = subprocess.run([*PYCORE, "run", "fget-crack", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pycore run: -c: ") and why in lines[0], r.stderr


def test_open_tool_with_a_pid_that_does_not_exist():
    import pycore
    from pycore.kernel.process import TargetError

    pid = _dead_pid()
    with pytest.raises(TargetError, match=f"process {pid} does not exist"):
        pycore.open_tool("fget-crack", pid=pid)
