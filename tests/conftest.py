"""Shared test helpers.

Markers (registered in pyproject.toml): ``kernel`` for tests that need
fentry/fexit/kprobes (run in the QEMU kernel VM, deselect on the host with
``-m "not kernel"``) and ``slow``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import pytest

from tests import reach

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


_CACHE: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """The run's caches in a directory of its own, removed at its end: $XDG_CACHE_HOME (pycore's
    parsed scripts, vmlinux.h, BTF and DWARF indexes) and $PYCORE_EXAMPLE_BUILD (the skeleton example's
    build), inherited by every process a test starts. What an earlier run, or a clone at another
    version, left in ~/.cache/pycore (kept by build id or key, not by pycore's version) cannot decide
    what this run sees, nor this run leave anything there; tests of the caches set their own."""
    global _CACHE
    _CACHE = tempfile.mkdtemp(prefix="pycore-test-cache-")
    os.environ["XDG_CACHE_HOME"] = _CACHE
    os.environ["PYCORE_EXAMPLE_BUILD"] = os.path.join(_CACHE, "pycore", "examples")
    os.environ.pop("PYCORE_CACHE_DIR", None)    # the DWARF indexes: under $XDG_CACHE_HOME/pycore too
    # SIGTERM ends the run as Ctrl-C does, fixtures and all: ./dev.sh test stops an interrupted run
    # so (its pytest is a background job, which ignores SIGINT), and so does a CI timeout
    global _PYTEST_PID
    _PYTEST_PID = os.getpid()
    signal.signal(signal.SIGTERM, _interrupted)


_PYTEST_PID = 0


def _interrupted(signum: int, frame: object) -> None:
    if os.getpid() != _PYTEST_PID:      # a fork of the run (pyroute2's netns helper): die, as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CACHE is not None:
        shutil.rmtree(_CACHE, ignore_errors=True)


# Under CI (CI=true, as .ci/run's clean clone has it) a test may skip only for what the kernel it runs
# on cannot do (the other kernels' runs cover it): a tool ./dev.sh installs, missing, fails the test
# rather than skip it silently.
_KERNEL_SKIPS = ("this kernel", "the host's list")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if not reason.startswith(_KERNEL_SKIPS):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI: {reason} (./dev.sh installs what the tests need)"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a kernel VM given PYCORE_VM_QUEUE (tests/vm/queue.py: the kernel's VMs pull from one queue),
    order the tests as the queue's units, longest first by the times recorded on this kernel
    (PYCORE_VM_SERIES); pytest_runtestloop below runs those this VM takes."""
    if not os.environ.get("PYCORE_VM_QUEUE"):
        return
    from tests.vm import durations, queue

    whole = {item.nodeid.split("::", 1)[0] for item in items if getattr(getattr(item, "module", None), "VM_QUEUE", "") == "module"}
    plan = queue.units([item.nodeid for item in items],
                       durations.load().get(os.environ.get("PYCORE_VM_SERIES", ""), {}), whole)
    by_id = {item.nodeid: item for item in items}
    items[:] = [by_id[nodeid] for unit in plan for nodeid in unit.nodeids]
    config.stash[_UNITS] = plan


_UNITS = pytest.StashKey[list]()


class _Next:
    """The test after a unit's last, found only when pytest asks for it: at the end of that test's
    teardown, which calls ``listchain()`` on it to know which fixtures the next test keeps. So a VM
    takes its next unit when it is done with the current one, and not before, while a sibling VM
    could have taken it."""

    def __init__(self, take: Callable[[], list[pytest.Item]]):
        self.take = take
        self.items: list[pytest.Item] | None = None

    def listchain(self) -> list[pytest.Node]:
        if self.items is None:
            self.items = self.take()
        return self.items[0].listchain() if self.items else []


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """In a kernel VM given PYCORE_VM_QUEUE: run the units this VM takes from the queue, in order, and
    leave the others to the kernel's other VMs (they appear in no report here)."""
    plan = session.config.stash.get(_UNITS, None)
    if plan is None or session.testsfailed or session.config.option.collectonly:
        return None                         # pytest's own loop (which stops on collection errors)
    from pathlib import Path

    from tests.vm import queue

    where, who = Path(os.environ["PYCORE_VM_QUEUE"]), os.environ.get("PYCORE_VM_NAME", str(os.getpid()))
    by_id = {item.nodeid: item for item in session.items}
    units = iter(plan)

    def take() -> list[pytest.Item]:
        return next(([by_id[n] for n in unit.nodeids] for unit in units if queue.claim(where, unit, who)), [])

    current = take()
    while current:
        after = _Next(take)
        for i, item in enumerate(current):
            nextitem = current[i + 1] if i + 1 < len(current) else after
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        current = after.items if after.items is not None else take()    # None: pytest tore all down
    return True


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    """In a kernel VM (tests/vm sets PYCORE_VM_KMSG), name each test in the kernel's log as it starts,
    so that an oops in the console is preceded by the test that was running (harness.oopses); and in
    PYCORE_VM_CURRENT, which the host watches: a VM that starts no test for long has hung."""
    if os.environ.get("PYCORE_VM_KMSG"):
        try:
            with open("/dev/kmsg", "w") as kmsg:
                kmsg.write(f"pycore-test: {nodeid}\n")
        except OSError:
            pass
    if current := os.environ.get("PYCORE_VM_CURRENT"):
        try:
            with open(current, "w") as f:
                f.write(nodeid + "\n")
        except OSError:
            pass


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In a kernel VM (tests/vm sets PYCORE_VM_FAILURES), write each failure's report as it happens: a
    guest run that hits the harness's timeout never prints pytest's summary, and its failures would
    say nothing of why (harness.explain prints this file)."""
    path = os.environ.get("PYCORE_VM_FAILURES")
    if path and report.failed:
        try:
            with open(path, "a") as f:
                f.write(f"=== {report.nodeid} ({report.when}) ===\n{report.longreprtext}\n")
        except OSError:
            pass


def is_root() -> bool:
    return os.geteuid() == 0


def require_root() -> None:
    """Skip the calling test unless running as root (BPF loading needs it)."""
    if not is_root():
        pytest.skip("needs root (CAP_BPF/CAP_PERFMON)")


def for_everyone(argv: list[str]) -> list[str]:
    """``argv`` (run as root, dropping to another user itself) where that user can reach this clone
    and its venv: a clone lying where others cannot enter (under /root, mode 0700) is bound back, at
    its own name, in a mount namespace of argv's own (tests/reach.py); elsewhere ``argv`` as it is."""
    return reach.for_everyone([ROOT, sys.prefix], argv)


def as_nobody(argv: list[str]) -> list[str]:
    """``argv`` run as nobody (uid and gid 65534, no groups, no capabilities), wherever the clone lies."""
    return for_everyone([*NOBODY, *argv])


@contextmanager
def running(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """A process with text pipes for stdout and stderr, killed and reaped on
    the way out if the test left it running (a failed assertion, say)."""
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    p = subprocess.Popen(argv, **popen)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_ready(p: subprocess.Popen, marker: bytes = b"R", timeout: float = 30) -> None:
    """Until child ``p`` has written ``marker`` to its stdout pipe, or fail saying why.

    A child whose events a test counts must not be traced while it still loads: ``Popen`` returns at
    the exec, and the dynamic loader's opens (ld.so.cache, libc), or whatever else the start-up does,
    can come after the trace is attached on a loaded machine.  So such a child writes ``marker`` once
    its main() runs, just before it blocks for the test's go (a byte on stdin, a signal), and the test
    attaches only after this returns.  The pipe is read byte by byte, unbuffered: what the child writes
    after the marker is left for ``p.stdout``, text or binary."""
    assert p.stdout is not None, "wait_ready needs the child's stdout as a pipe"
    fd = p.stdout.fileno()
    got = b""
    deadline = time.monotonic() + timeout
    while got != marker:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            pytest.fail(f"child {p.args!r} not ready within {timeout} s (it wrote {got!r}, expected {marker!r})")
        byte = os.read(fd, 1)
        if not byte:
            try:
                status = f"exited ({p.wait(5)})"
            except subprocess.TimeoutExpired:
                status = "closed its stdout"
            pytest.fail(f"child {p.args!r} {status} before it was ready (it wrote {got!r})")
        got += byte
        if not marker.startswith(got):
            pytest.fail(f"child {p.args!r} wrote {got!r} before it was ready, expected {marker!r}")


def stop(p: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 30, again: float = 5,
         communicate: bool = True) -> tuple[str, str]:
    """Send ``sig`` and collect what the process wrote until it exits; ``sig`` again every ``again``
    seconds until then: bpftrace 0.17 now and then loses a SIGINT that comes just after it attached
    and waits in epoll_wait for good (seen in the bench and, under load, in a test).
    ``communicate=False``: the caller reads the pipes itself; only wait, and return ("", "")."""
    deadline = time.monotonic() + timeout
    while True:
        if p.poll() is None:
            p.send_signal(sig)
        try:
            wait = min(again, max(0.0, deadline - time.monotonic()))
            if not communicate:
                p.wait(wait)
                return "", ""
            return p.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise


BPFFS = "/sys/fs/bpf"


def ensure_bpffs() -> None:
    """Mount bpffs on /sys/fs/bpf unless it is there: systemd mounts it at boot, this machine's init
    does not, and a test that pins must not depend on an earlier test having mounted it."""
    with open("/proc/mounts") as f:
        if any(line.split()[1:3] == [BPFFS, "bpf"] for line in f):
            return
    subprocess.run(["mount", "-t", "bpf", "bpf", BPFFS], check=True)


def prog_ids_of(pid: int) -> set[int]:
    """The ids of the BPF programs process ``pid`` holds a descriptor of (the prog_id lines of its
    /proc/PID/fdinfo). A test finds its tool's programs so, not by name: a suite run beside this one
    (from another clone) loads programs of the same names."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids |= {int(line.split()[1]) for line in f if line.startswith("prog_id:")}
        except OSError:   # closed meanwhile
            pass
    return ids


def wait_attached(p: subprocess.Popen, links: int = 1, timeout: float = 30) -> None:
    """Until process ``p`` holds ``links`` BPF links (link_type lines in its /proc/PID/fdinfo: a
    probe is attached once its link exists), or fail saying why. The sign that a tool that prints
    nothing at its start (--json, --no-events) is attached: a fixed sleep is too short under load."""
    deadline = time.monotonic() + timeout
    while True:
        held = 0
        try:
            fds = os.listdir(f"/proc/{p.pid}/fdinfo")
        except OSError:
            fds = []
        for fd in fds:
            try:
                with open(f"/proc/{p.pid}/fdinfo/{fd}") as f:
                    held += any(line.startswith("link_type:") for line in f)
            except OSError:   # closed meanwhile
                pass
        if held >= links:
            return
        if p.poll() is not None:
            pytest.fail(f"{p.args!r} exited ({p.returncode}) before it attached {links} link(s)")
        if time.monotonic() > deadline:
            pytest.fail(f"{p.args!r} not attached within {timeout} s ({held} of {links} links)")
        time.sleep(0.02)


def programs(ids: set[int]) -> set[str]:
    """The names of the loaded programs among ``ids`` (a test finds its own programs by the ids its
    process holds, :func:`prog_ids_of`, not by name: a suite run beside this one loads the same)."""
    return {p["name"] for p in bpftool_show("prog") if p["id"] in ids}


def gone(ids: set[int]) -> bool:
    """None of ``ids`` loaded, within 3 s: the kernel frees a tracing program after its link's close,
    from a work queue, a moment later."""
    end = time.monotonic() + 3
    while programs(ids):
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def bpftool_show(kind: str, tries: int = 5) -> list[dict]:
    """``bpftool -j KIND show`` as JSON.  bpftool lists ids, then queries
    each one; an object the kernel frees in between (right after a tool was
    killed, which is when tests poll) can fail the whole run, so a failed
    run is tried again, and the last failure is reported."""
    for _ in range(tries):
        got = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True)
        if got.returncode == 0:
            return json.loads(got.stdout or "[]")
        time.sleep(0.05)
    raise AssertionError(f"bpftool -j {kind} show failed {tries} times (exit {got.returncode}): "
                         f"{(got.stdout + got.stderr).strip()}")


# -- bpftrace 0.17's output in bpftrace 0.23.2's forms -------------------------------------------------

import re as _re

_HIST_HEAD = _re.compile(r"(?m)^(@[^\n]*:) $(?=\n[\[(])")      # a bucket line follows
_KEY_STACK = _re.compile(r"(?m)^(@[^\n]*\n)((?:    \S[^\n]*\n)+)(?=[\],])")
_JSON_STR = _re.compile(r'"((?:[^"\\]|\\.)*)"')


def _compact_records(text: str, *, json: bool) -> str:
    """0.17's compact struct keys, ``{.a=1,.b={.c=2}}``, as 0.23.2 prints them: ``{ .a = 1, .b = { .c = 2 } }``
    in text, ``{ "a": 1, "b": { "c": 2 } }`` in a json key."""
    out, i, depth = [], 0, 0
    while i < len(text):
        if text.startswith("{.", i):
            depth += 1
            m = _re.match(r"\{\.(\w+)=", text[i:])
            out.append(f'{{ "{m.group(1)}": ' if json else f"{{ .{m.group(1)} = ")
            i += m.end()
        elif depth and text.startswith(",.", i) and _re.match(r",\.\w+=", text[i:]):
            m = _re.match(r",\.(\w+)=", text[i:])
            out.append(f', "{m.group(1)}": ' if json else f", .{m.group(1)} = ")
            i += m.end()
        elif depth and text[i] == "}":
            depth -= 1
            out.append(" }")
            i += 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def as_023(text: str, pointers: Iterable[int] = ()) -> str:
    """bpftrace 0.17's output as bpftrace 0.23.2 prints the same values, where pycore prints 0.23.2's
    form (issue 30; docs/trace.md).  Only these known differences are rewritten:

    - a hist/lhist header: ``@h: `` (0.17) is ``@h:`` (no space after the colon);
    - a stack in a map key: its frames indented by 8 as everywhere (0.17: by 4);
    - a struct in a map key: ``{ .a = 1, .b = 2 }`` as its value prints (0.17: ``{.a=1,.b=2}``);
    - ``-f json`` map keys: escaped twice (0.23.2 escapes a string, stack, symbol or buffer element,
      then the whole key as a JSON string: ``"a\\\\nb"``), a struct in one as a JSON object.

    - ``pointers``: these pointer values, which ``-f json`` writes as signed numbers in 0.17 and
      unsigned in 0.23.2 (a test knows which numbers are pointers; this function cannot guess).

    Everything else must already be equal, so a test comparing ``as_023(bpftrace_017_output)`` with
    pycore's output still fails on any other difference.
    """
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith('{"type": "map"') or line.startswith('{"type": "hist"') \
                or line.startswith('{"type": "stats"'):
            out.append(_json_keys_023(line))
        else:
            out.append(line)
    text = pointers_023("".join(out), pointers)
    text = _HIST_HEAD.sub(r"\1", text)
    text = _KEY_STACK.sub(lambda m: m.group(1) + _re.sub(r"(?m)^    ", "        ", m.group(2)), text)
    return _re.sub(r"(?m)^@[^\n]*\[[^\n]*", lambda m: _compact_records(m.group(0), json=False), text)


def pointers_023(text: str, pointers: Iterable[int]) -> str:
    """``-f json`` text with these pointer values as 0.23.2 writes them, unsigned (0.17: signed; in a
    json map key 0.17 wrote hex); part of :func:`as_023`, alone for a test that learns its pointers
    from the output itself."""
    for p in pointers:
        p &= (1 << 64) - 1
        if p >> 63:
            text = _re.sub(rf"(?<![\d-]){p - (1 << 64)}(?!\d)", str(p), text)
        text = _re.sub(rf'(?m)(^{{"type": "(?:map|hist|stats)".*[",])0x{p:x}(?=[",])', rf"\g<1>{p}", text)
    return text


def _json_keys_023(line: str) -> str:
    def key(m: _re.Match) -> str:
        enc = m.group(1)
        if line[m.end():m.end() + 2] != ": ":
            return m.group(0)                     # a value, not a key
        enc = _re.sub(r"\\n    (?=\S)", r"\\n        ", enc)         # a stack's frames by 8
        enc = _compact_records(enc, json=True) if "{." in enc else enc
        return '"' + enc.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return _JSON_STR.sub(key, line)
