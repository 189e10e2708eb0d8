"""State across upgrades: opt-in pinning, reuse of matching maps, refusal of the others, `pycore pins`.

The upgrade test runs a real agent process (tests/pin_agent.py) on the
host's tracepoints: version 1 counts a workload's getpid() calls, is killed
with SIGKILL, version 2 (a newer build: same map layouts, new logic, one
new map) continues the counts, version 3 (a struct that gained a field) is
refused, ``pycore pins`` lists what is pinned and ``--remove`` frees it all.
Counts are exact: the workload makes system calls only when told to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from btf import Spec
from pycore import BpfObject, object_path
from pycore.errors import PinError, PinMismatch
from pycore.native import bpffs
from pycore.native.maplayout import differences
from tests.btfbuild import Builder
from tests.conftest import BPFFS, as_nobody, bpftool_show, ensure_bpffs, require_root, running

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = os.path.join(ROOT, "tests", "pin_agent.py")
PYCORE = [sys.executable, "-m", "pycore"]

WORKLOAD = r"""
import os, sys
calls = {"getpid": os.getpid, "getppid": os.getppid}
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    name, n = line.split()
    f = calls[name]
    for _ in range(int(n)):
        f()
    sys.stdout.write("done\n"); sys.stdout.flush()
"""


@pytest.fixture
def pin_dir(request):
    require_root()
    ensure_bpffs()
    d = f"{BPFFS}/pycore_test_{os.getpid()}_{request.node.name[:40]}"
    yield d
    if os.path.lexists(d):
        bpffs.remove(d)


def work(wl: subprocess.Popen, call: str, n: int) -> None:
    wl.stdin.write(f"{call} {n}\n")
    wl.stdin.flush()
    assert wl.stdout.readline().strip() == "done"


class Agent:
    def __init__(self, obj: str, pin_dir: str, tgid: int, *extra: str) -> None:
        self.p = subprocess.Popen([sys.executable, AGENT, obj, pin_dir, str(tgid), *extra], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"agent {obj} ended: exit {self.p.wait()}: {self.p.stderr.read()}")
        self.hello = json.loads(line)

    def read(self) -> dict:
        self.p.stdin.write("read\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            f.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.p.poll() is None:
            self.kill()


def wait_gone(kind: str, ids: set[int], timeout: float = 10.0) -> None:
    """The kernel frees a released link or map from a work queue: poll until it has."""
    deadline = time.monotonic() + timeout
    while True:
        left = ids & {o["id"] for o in bpftool_show(kind)}
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{kind}s {sorted(left)} still in the kernel")
        time.sleep(0.05)


def progs_of(link_ids: set[int]) -> set[int]:
    """The programs of these links: a link's id leaves the kernel's table before its program is taken
    off the hook (bpf_link_free: the id, then release, then the program put), so waiting for the
    programs to be gone is waiting for the links to be detached."""
    got = {o["id"]: o["prog_id"] for o in bpftool_show("link") if o["id"] in link_ids}
    assert set(got) == link_ids, f"links {sorted(link_ids - set(got))} not in the kernel"
    return set(got.values())


def pins(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCORE, "pins", *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def calls(snapshot: dict, index: int = 0) -> int:
    return snapshot["stats"][index]["calls"]


# -- the upgrade ---------------------------------------------------------------------------


def test_agent_killed_and_upgraded_continues_its_counters(pin_dir):
    with running([sys.executable, "-c", WORKLOAD], stdin=subprocess.PIPE) as wl:
        assert wl.stdout.readline().strip() == "ready"

        # version 1: `stats` is declared LIBBPF_PIN_BY_NAME, by_tid is asked for
        with Agent("test_pin_v1", pin_dir, wl.pid, "--pin-maps", "by_tid") as v1:
            assert v1.hello["reused"] == []
            assert v1.hello["pinned"] == {"stats": f"{pin_dir}/stats", "by_tid": f"{pin_dir}/by_tid"}
            assert [link["pin"] for link in v1.hello["links"]] == [None]
            work(wl, "getpid", 1000)
            first = v1.read()
            assert calls(first) == 1000 and calls(first, 1) == 0
            assert sum(first["by_tid"].values()) == 1000
            v1_progs = progs_of({link["id"] for link in v1.hello["links"]})
            v1.kill()
        # killed: its (unpinned) link goes; calls now are not counted, the maps stay
        wait_gone("link", {link["id"] for link in v1.hello["links"]})
        wait_gone("prog", v1_progs)
        work(wl, "getpid", 300)

        # version 2, a newer build: same layouts, new logic, a new map; pins its links
        with Agent("test_pin_v2", pin_dir, wl.pid, "--pin-maps", "by_tid", "--pin-links") as v2:
            assert v2.hello["reused"] == ["by_tid", "stats"]
            assert set(v2.hello["pinned"]) == {"stats", "by_tid", "seen"}
            assert sorted(link["pin"] for link in v2.hello["links"]) == [
                f"{pin_dir}/links/count_getpid", f"{pin_dir}/links/count_getppid"]
            again = v2.read()
            assert again["stats"] == first["stats"] and again["by_tid"] == first["by_tid"]  # continued
            work(wl, "getpid", 500)
            work(wl, "getppid", 7)
            second = v2.read()
            assert calls(second) == 1000 + 500                     # from where it was, plus the new calls
            assert second["stats"][0]["last_ns"] > 0                # version 2's logic ran on the old map
            assert first["stats"][0]["last_ns"] == 0
            assert calls(second, 1) == 7                            # version 2's new program
            assert sum(second["by_tid"].values()) == 1500
            assert second["seen"] == {"0": 500, "1": 7}             # the new map
            v2_links = {link["id"] for link in v2.hello["links"]}
            v2_progs = progs_of(v2_links)
            v2.kill()
        # its links are pinned: they keep counting while the agent is down
        work(wl, "getpid", 200)
        assert v2_links <= {o["id"] for o in bpftool_show("link")}

        # version 3: struct pin_stats gained a field: refused before anything loads
        r = subprocess.run([sys.executable, AGENT, "test_pin_v3", pin_dir, str(wl.pid)],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 2, r
        lines = r.stderr.splitlines()
        assert len(lines) == 1, r.stderr
        msg = lines[0]
        assert f"map 'stats' pinned at {pin_dir}/stats" in msg
        assert "value size 16 != 24: struct pin_stats gained field 'bytes'" in msg
        assert f"'pycore pins {pin_dir} --remove'" in msg and "new pin_dir" in msg

        # pycore pins lists maps (with their BTF types) and links
        listed = pins(pin_dir, "--json")
        assert listed.returncode == 0, listed.stderr
        entries = {os.path.relpath(e["path"], pin_dir): e for e in json.loads(listed.stdout)}
        assert set(entries) == {"stats", "by_tid", "seen", "links/count_getpid", "links/count_getppid"}
        stats = entries["stats"]
        assert (stats["kind"], stats["type"], stats["key_size"], stats["value_size"], stats["max_entries"],
                stats["value_type"]) == ("map", "array", 4, 16, 4, "struct pin_stats")  # v3 changed nothing
        link = entries["links/count_getpid"]
        assert link["kind"] == "link" and link["prog_name"] == "count_getpid" and link["id"] in v2_links
        text = pins(pin_dir)
        assert text.returncode == 0 and f"{pin_dir}/stats" in text.stdout and "struct pin_stats" in text.stdout

        # version 2 again: reuses everything, and its links take over from the pinned ones
        with Agent("test_pin_v2", pin_dir, wl.pid, "--pin-maps", "by_tid", "--pin-links") as again:
            assert again.hello["reused"] == ["by_tid", "seen", "stats"]
            wait_gone("link", v2_links)  # the old links are detached, not running beside the new
            wait_gone("prog", v2_progs)
            assert calls(again.read()) == 1500 + 200
            work(wl, "getpid", 100)
            assert calls(again.read()) == 1500 + 200 + 100
            again.kill()
        map_ids = {e["id"] for e in entries.values() if e["kind"] == "map"}
        link_ids = {link["id"] for link in again.hello["links"]}

    # --remove unpins it all: nothing left on bpffs or in the kernel
    removed = pins(pin_dir, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.count("unpinned ") == 5
    assert not os.path.exists(pin_dir)
    wait_gone("link", link_ids)
    wait_gone("map", map_ids)
    assert pins(pin_dir).returncode == 2


# -- the API, in process ----------------------------------------------------------------------


def test_default_pins_nothing():
    """Without pin_dir, not even a map declared LIBBPF_PIN_BY_NAME is pinned (libbpf would, in /sys/fs/bpf)."""
    require_root()
    ensure_bpffs()
    before = set(os.listdir(BPFFS))
    with BpfObject(object_path("test_pin_v1")) as obj:
        assert obj.pin_dir is None and obj.maps["stats"].pin_path is None
        obj.load()
        obj.attach()
        assert not obj.maps["stats"].reused
        assert set(os.listdir(BPFFS)) == before
    with pytest.raises(ValueError, match="need pin_dir"):
        BpfObject(object_path("test_pin_v1"), pin_maps=True)
    with pytest.raises(ValueError, match="need pin_dir"):
        BpfObject(object_path("test_pin_v1"), pin_links=True)


def test_pin_dir_must_be_on_bpffs(tmp_path):
    require_root()
    with pytest.raises(PinError, match="is not on a BPF filesystem"):
        BpfObject(object_path("test_pin_v1"), pin_dir=tmp_path / "pins")


def test_pin_maps_choices(pin_dir):
    path = object_path("test_pin_v2")
    assert set(BpfObject(path, pin_dir=pin_dir)._pinning.maps) == {"stats", "seen"}   # declared
    assert set(BpfObject(path, pin_dir=pin_dir, pin_maps=True)._pinning.maps) == {"stats", "seen", "by_tid"}
    assert set(BpfObject(path, pin_dir=pin_dir, pin_maps=False)._pinning.maps) == set()
    assert set(BpfObject(path, pin_dir=pin_dir, pin_maps=["by_tid"])._pinning.maps) == {"stats", "seen", "by_tid"}
    with pytest.raises(KeyError, match="no map 'nope'"):
        BpfObject(path, pin_dir=pin_dir, pin_maps=["nope"])
    with pytest.raises(ValueError, match="globals"):
        BpfObject(path, pin_dir=pin_dir, pin_maps=["test_pin.bss"])
    assert not os.path.exists(pin_dir)  # nothing is created before load


def test_resized_map_refused_then_reused_and_unpinned(pin_dir):
    with BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir) as first:
        first.load()
        first.maps["stats"][2] = {"calls": 42, "last_ns": 7}
    assert os.listdir(pin_dir) == ["stats"]  # outlives close()

    bigger = BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir)
    bigger.maps["stats"].max_entries = 8
    with pytest.raises(PinMismatch, match=r"max_entries 4 != 8") as exc:
        bigger.load()
    assert exc.value.map == "stats" and exc.value.path == f"{pin_dir}/stats"
    assert exc.value.differences == ["max_entries 4 != 8"] and not bigger.loaded
    bigger.close()

    with BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir) as again:
        again.load()
        assert again.maps["stats"].reused and again.maps["stats"][2].calls == 42
        assert again.unpin() == [f"{pin_dir}/stats"]
        assert again.maps["stats"][2].calls == 42  # ours until close
    assert not os.path.exists(pin_dir)


def test_pinned_program_or_link_where_a_map_goes_is_refused(pin_dir):
    with BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir, pin_maps=False) as obj:
        obj.load()
        obj.programs["count_getpid"].attach().pin(f"{pin_dir}/stats")
        with BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir) as other:
            with pytest.raises(PinMismatch, match="holds a link, not a map"):
                other.load()


# -- pycore pins: errors ------------------------------------------------------------------------


@pytest.mark.parametrize("args, why", [
    (("/nonexistent-pycore-pins",), "/nonexistent-pycore-pins: no such file or directory"),
    (("/tmp",), "/tmp is not on a BPF filesystem"),
    (("--remove",), "--remove needs a DIR"),
    ((BPFFS, "--remove"), "is the root of a BPF filesystem"),
])
def test_pins_errors_are_one_line(args, why):
    require_root()
    ensure_bpffs()
    r = pins(*args)
    assert r.returncode == 2, r
    assert r.stdout == "" and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


def test_pins_without_privileges(pin_dir):
    with BpfObject(object_path("test_pin_v1"), pin_dir=pin_dir) as obj:
        obj.load()
    r = subprocess.run(as_nobody([*PYCORE, "pins", pin_dir]),
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r
    assert "permission denied; needs root" in r.stderr


def test_pins_empty_dir_is_exit_1(pin_dir):
    os.makedirs(pin_dir)
    r = pins(pin_dir)
    assert r.returncode == 1 and r.stdout == "" and "nothing pinned" in r.stderr


# -- layouts, on hand-built BTF ---------------------------------------------------------------


def _stats(fields: list[tuple[str, str, int]], name: str = "stats", size: int | None = None) -> tuple[Spec, int]:
    b = Builder()
    types = {"u64": b.int("long long unsigned int", 8), "u32": b.int("unsigned int", 4),
             "s32": b.int("int", 4)}
    types["__u64"] = b.typedef("__u64", types["u64"])
    members = [(n, types[t], off * 8) for n, t, off in fields]
    sid = b.struct(name, size if size is not None else max(off + 8 for _, _, off in fields), members)
    return Spec(b.build()), sid


def test_layout_differences_are_named():
    old = _stats([("calls", "u64", 0), ("last_ns", "u64", 8)])
    assert differences(*old, *_stats([("calls", "__u64", 0), ("last_ns", "u64", 8)])) == []  # typedef: same layout
    assert differences(*old, *_stats([("calls", "u64", 0), ("last_ns", "u64", 8), ("bytes", "u64", 16)])) == [
        "struct stats gained field 'bytes'"]
    assert differences(*old, *_stats([("last_ns", "u64", 0), ("calls", "u64", 8)])) == [
        "field 'last_ns' moved from offset 8 to 0", "field 'calls' moved from offset 0 to 8"]
    assert differences(*old, *_stats([("calls", "u64", 0), ("last", "u64", 8)])) == [
        "struct stats gained field 'last'", "struct stats lost field 'last_ns'"]
    assert differences(*old, *_stats([("calls", "s32", 0), ("last_ns", "u64", 8)])) == [
        "field 'calls' changed type from long long unsigned int to int"]
    assert differences(*old, *_stats([("calls", "u64", 0), ("last_ns", "u64", 8)], name="totals")) == [
        "struct stats became struct totals"]
