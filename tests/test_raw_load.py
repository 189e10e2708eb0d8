"""Programs built with pycore.asm, loaded by pycore.native.program and attached by pycore.link, on a real kernel.

No object file and no compiler at run time: each test assembles a small
program (count a hit in an ARRAY map, or emit a ring-buffer record), loads
it, attaches it, makes the event happen a known number of times and reads
the count back.  Host tests cover what this kernel can do (tracepoint,
raw_tracepoint, tp_btf, uprobe, perf events, ring buffers); ``kernel``-marked
ones (kprobe/kretprobe, fentry/fexit) run in the QEMU VMs (tests/vm).
"""

from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

from conftest import bpftool_show, require_root
from pycore.asm import builders as b
from pycore.asm.assembler import Assembler
from pycore.asm.helpers import Helper
from pycore.asm.opcodes import R0, R1, R2, R3, R4, R6, R10
from pycore.errors import BpfError, FeatureMissing
from pycore.native.libbpf import AttachType, MapType, ProgType
from pycore.native.program import RawMap, create_map, load_program

N = 37
HAS_KPROBES = os.path.exists("/sys/bus/event_source/devices/kprobe")


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


@pytest.fixture
def tracefs() -> str:
    from pycore.kernel.tracefs import find_tracefs

    fs, why = find_tracefs(mount=True)
    if fs is None:
        pytest.skip(why)
    return fs.root


def _count_insns(counts: RawMap, tgid: int | None) -> list:
    """counts[0] += 1 (atomically), only for process ``tgid`` when given; returns 0."""
    a = Assembler()
    out = a.label("out")
    if tgid is not None:
        a(b.call(Helper.get_current_pid_tgid), b.rsh64_imm(R0, 32), b.jne_imm(R0, tgid, out))
    a(b.st(4, R10, -4, 0), b.mov64_reg(R2, R10), b.add64_imm(R2, -4), b.ld_map_fd(R1, counts.fd),
      b.call(Helper.map_lookup_elem), b.jeq_imm(R0, 0, out), b.mov64_imm(R1, 1), b.atomic_add(8, R0, R1, 0))
    a.place(out)
    a(b.mov64_imm(R0, 0), b.exit())
    return a.assemble()


def _counter(prog_type: int, tgid: int | None = None, name: str = "count", **load):  # noqa: ANN202
    counts = create_map(MapType.ARRAY, 4, 8, 1, name="counts")
    prog = load_program(_count_insns(counts, tgid), prog_type, name=name, **load)
    return counts, prog


def _read(counts: RawMap) -> int:
    return struct.unpack("<Q", counts.lookup(0))[0]


# -- tracepoints, raw tracepoints, tp_btf ----------------------------------------------------------------


def test_tracepoint_counts_getpid(tracefs) -> None:
    from pycore.link.tracepoint import attach_tracepoint

    counts, prog = _counter(ProgType.TRACEPOINT, os.getpid(), "count_getpid")
    with counts, prog, attach_tracepoint(prog, "syscalls", "sys_enter_getpid") as link:
        assert link.kind == "tracepoint" and len(link.fds) >= 1
        for _ in range(N):
            os.getpid()
        assert _read(counts) == N
    assert link.closed and prog.closed and counts.closed


def test_ringbuf_output_read_through_the_raw_fd(tracefs) -> None:
    """bpf_ringbuf_output of {pid_tgid, ktime} per getpid(), read with RingBuffer.from_fd and a decoder."""
    from pycore.link.tracepoint import attach_tracepoint
    from pycore.native.ringbuf import RingBuffer

    ring = create_map(MapType.RINGBUF, 0, 0, 64 * 1024, name="ring")
    a = Assembler()
    out = a.label("out")
    a(b.call(Helper.get_current_pid_tgid), b.mov64_reg(R6, R0), b.rsh64_imm(R0, 32),
      b.jne_imm(R0, os.getpid(), out),
      b.stx(8, R10, R6, -16), b.call(Helper.ktime_get_ns), b.stx(8, R10, R0, -8),
      b.ld_map_fd(R1, ring.fd), b.mov64_reg(R2, R10), b.add64_imm(R2, -16), b.mov64_imm(R3, 16),
      b.mov64_imm(R4, 0), b.call(Helper.ringbuf_output))
    a.place(out)
    a(b.mov64_imm(R0, 0), b.exit())
    prog = load_program(a.assemble(), ProgType.TRACEPOINT, name="ring_getpid")
    with ring, prog, RingBuffer.from_fd(ring, decode=lambda raw: struct.unpack("<QQ", raw),
                                        lost=lambda: 0) as rb, \
            attach_tracepoint(prog, "syscalls", "sys_enter_getpid"):
        before = time.monotonic_ns()
        for _ in range(N):
            os.getpid()
        events = list(rb.events(timeout=0.5))
        assert rb.lost == 0
    assert len(events) == N
    assert all(pid_tgid >> 32 == os.getpid() for pid_tgid, _ in events)
    stamps = [t for _, t in events]
    assert stamps == sorted(stamps) and stamps[0] >= before


def test_ringbuf_from_fd_bytes_and_size_from_the_kernel() -> None:
    from pycore.native.ringbuf import RingBuffer

    with create_map(MapType.RINGBUF, 0, 0, 4096 * 4, name="r") as ring:
        with RingBuffer.from_fd(ring.fd, decode=bytes) as rb:
            assert rb.size == 4096 * 4 and rb.lost is None and rb.consume() == []
    with create_map(MapType.HASH, 4, 4, 4, name="h") as h, pytest.raises(ValueError, match="not a ring buffer"):
        RingBuffer.from_fd(h.fd)


def test_raw_tracepoint_sys_enter(tracefs) -> None:
    from pycore.link.raw_tracepoint import attach_raw_tracepoint

    counts, prog = _counter(ProgType.RAW_TRACEPOINT, os.getpid(), "raw_sys_enter")
    with counts, prog, attach_raw_tracepoint(prog, "sys_enter") as link:
        for _ in range(N):
            os.getpid()
        assert _read(counts) >= N
        assert link.link_ids()
    counts, prog = _counter(ProgType.RAW_TRACEPOINT)
    with counts, prog, pytest.raises(BpfError, match=r"raw tracepoint no_such_tp .*ENOENT.*no tracepoint"):
        attach_raw_tracepoint(prog, "no_such_tp")


def test_tp_btf_sched_switch() -> None:
    from pycore.link.tracing import attach_tracing, btf_id

    tid = btf_id("sched_switch", AttachType.TRACE_RAW_TP)
    counts, prog = _counter(ProgType.TRACING, None, "tp_btf_switch", expected_attach_type=AttachType.TRACE_RAW_TP,
                            attach_btf_id=tid)
    with counts, prog, attach_tracing(prog, target="sched_switch") as link:
        for _ in range(5):
            time.sleep(0.002)
        assert _read(counts) >= 5
        assert "sched_switch" in link.describe()


def test_begin_style_test_run() -> None:
    """A raw_tracepoint program run once by BPF_PROG_TEST_RUN (how pycore trace runs BEGIN/END)."""
    counts, prog = _counter(ProgType.RAW_TRACEPOINT, None, "begin")
    with counts, prog:
        assert prog.test_run() == 0
        assert prog.test_run() == 0
        assert _read(counts) == 2


# -- uprobes ---------------------------------------------------------------------------------------------

TARGET_C = r"""
#include <stdlib.h>
__attribute__((noinline)) int pycore_target(int x) { __asm__ volatile(""); return x + 1; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1, s = 0;
    for (int i = 0; i < n; i++) s += pycore_target(i);
    return s == -1;
}
"""


@pytest.fixture(scope="module")
def target_binary(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("uprobe")
    (d / "t.c").write_text(TARGET_C)
    out = str(d / "target")
    subprocess.run(["gcc", "-O1", "-o", out, str(d / "t.c")], check=True)
    return out


@pytest.mark.parametrize("retprobe", [False, True])
def test_uprobe_counts_calls(target_binary, retprobe) -> None:
    from pycore.elf.symbols import file_offset, find_function
    from pycore.link.uprobe import attach_uprobe

    off = file_offset(target_binary, find_function(target_binary, "pycore_target").address)
    counts, prog = _counter(ProgType.KPROBE, None, "uprobe_count")
    with counts, prog, attach_uprobe(prog, target_binary, off, retprobe=retprobe) as link:
        subprocess.run([target_binary, str(N)], check=True)
        assert _read(counts) == N
        assert link.kind == ("uretprobe" if retprobe else "uprobe")


def test_uprobe_pid_filter(target_binary) -> None:
    from pycore.elf.symbols import file_offset, find_function
    from pycore.link.uprobe import attach_uprobe

    off = file_offset(target_binary, find_function(target_binary, "pycore_target").address)
    counts, prog = _counter(ProgType.KPROBE, None, "uprobe_pid")
    with counts, prog, attach_uprobe(prog, target_binary, off, pid=os.getpid()):
        subprocess.run([target_binary, str(N)], check=True)   # another process: not counted
        assert _read(counts) == 0


def test_uprobe_missing_file_is_one_line(tmp_path) -> None:
    from pycore.link.uprobe import attach_uprobe

    counts, prog = _counter(ProgType.KPROBE)
    with counts, prog, pytest.raises(BpfError) as exc:
        attach_uprobe(prog, str(tmp_path / "nope"), 0x1000)
    assert "does not exist" in str(exc.value) and "\n" not in str(exc.value)


# -- perf events -----------------------------------------------------------------------------------------


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_profile_samples_cpu_clock() -> None:
    from pycore.link.base import online_cpus
    from pycore.link.perf import attach_profile

    counts, prog = _counter(ProgType.PERF_EVENT, None, "profile")
    with counts, prog, attach_profile(prog, 997, "hz") as link:
        assert len(link.perf_fds) == len(online_cpus())
        _spin(0.3)
        assert _read(counts) > 10


def test_interval_fires_on_one_cpu() -> None:
    from pycore.link.perf import attach_interval

    counts, prog = _counter(ProgType.PERF_EVENT, None, "interval")
    with counts, prog, attach_interval(prog, 10_000_000) as link:   # every 10 ms
        assert len(link.perf_fds) == 1
        time.sleep(0.35)
        got = _read(counts)
    assert 10 <= got <= 60


def test_ioctl_attachment_of_kernels_before_perf_links(tracefs, monkeypatch) -> None:
    """Kernels before 5.15 have no BPF_PERF_EVENT links: PERF_EVENT_IOC_SET_BPF, detached by closing the event."""
    from pycore.link import perf_event
    from pycore.link.tracepoint import attach_tracepoint

    monkeypatch.setattr(perf_event, "_perf_link", False)
    counts, prog = _counter(ProgType.TRACEPOINT, os.getpid(), "ioctl_attach")
    with counts, prog:
        link = attach_tracepoint(prog, "syscalls", "sys_enter_getpid")
        assert link.link_fds == () and len(link.perf_fds) == 1
        for _ in range(N):
            os.getpid()
        link.close()
        os.getpid()
        assert _read(counts) == N


def test_attach_target_dispatches_the_resolvers_specs(tracefs) -> None:
    """pycore.link.attach_target reads pycore.lang's Target.attach tuples."""
    from types import SimpleNamespace

    from pycore.link import attach_target

    counts, prog = _counter(ProgType.TRACEPOINT, os.getpid(), "tgt")
    with counts, prog:
        links = attach_target(prog, SimpleNamespace(attach=("tracepoint", "syscalls", "sys_enter_getpid")))
        os.getpid()
        for link in links:
            link.close()
        assert _read(counts) == 1
        assert attach_target(prog, SimpleNamespace(attach=("begin",))) == []


# -- failures ------------------------------------------------------------------------------------------


def test_verifier_rejection_quotes_the_verifier() -> None:
    insns = [b.mov64_reg(R0, R2), b.exit()]   # r2 was never written
    with pytest.raises(BpfError) as exc:
        load_program(insns, ProgType.TRACEPOINT, name="bad")
    err = exc.value
    assert err.errno == 13  # EACCES
    assert "R2 !read_ok" in err.verifier_tail()
    assert "\n" not in str(err) and "R2 !read_ok" in str(err) and "program bad" in str(err)


def test_tracepoint_errors_are_one_line(tracefs) -> None:
    from pycore.link.tracepoint import attach_tracepoint

    counts, prog = _counter(ProgType.TRACEPOINT)
    with counts, prog:
        with pytest.raises(BpfError, match="category syscalls has no tracepoint 'sys_enter_nope'"):
            attach_tracepoint(prog, "syscalls", "sys_enter_nope")
        with pytest.raises(BpfError, match="no tracepoint category 'nocat'"):
            attach_tracepoint(prog, "nocat", "x")
        with pytest.raises(BpfError, match="tracefs is not mounted"):
            attach_tracepoint(prog, "syscalls", "sys_enter_getpid", tracefs="/nonexistent")


@pytest.mark.skipif(HAS_KPROBES, reason="this kernel has kprobes (the VM tests cover them)")
def test_kprobe_without_the_pmu_is_feature_missing() -> None:
    from pycore.link.kprobe import attach_kprobe

    counts, prog = _counter(ProgType.KPROBE)
    with counts, prog, pytest.raises(FeatureMissing) as exc:
        attach_kprobe(prog, "do_sys_openat2")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("this kernel cannot attach kprobes: there is no kprobe PMU")


def test_fentry_here_is_refused_with_eperm() -> None:
    from pycore.link.tracing import btf_id

    if _fentry_allowed():
        pytest.skip("this kernel allows fentry (the VM tests cover it)")
    with pytest.raises(BpfError) as exc:
        _counter(ProgType.TRACING, None, "fentry", expected_attach_type=AttachType.TRACE_FENTRY,
                 attach_btf_id=btf_id("vfs_read", AttachType.TRACE_FENTRY))
    assert exc.value.errno == 1 and "EPERM" in str(exc.value) and "\n" not in str(exc.value)


def _fentry_allowed() -> bool:
    return HAS_KPROBES  # the sandbox that refuses trampolines also lacks kprobes; the VMs have both


# -- lifetimes -----------------------------------------------------------------------------------------


def _ids(kind: str) -> set[int]:
    return {entry["id"] for entry in bpftool_show(kind)}


def test_close_releases_programs_and_links(tracefs) -> None:
    from pycore.link.tracepoint import attach_tracepoint

    counts, prog = _counter(ProgType.TRACEPOINT, os.getpid(), "release_me")
    link = attach_tracepoint(prog, "syscalls", "sys_enter_getpid")
    prog_id, link_ids = prog.id, link.link_ids()
    assert prog_id in _ids("prog") and set(link_ids) <= _ids("link")
    prog.close()            # the link still holds the program
    assert prog_id in _ids("prog")
    link.close()
    link.close()            # idempotent
    assert not set(link_ids) & _ids("link")
    assert prog_id not in _ids("prog")
    counts.close()
    with pytest.raises(ValueError, match="closed"):
        prog.fd  # noqa: B018


def test_garbage_collection_releases_too(tracefs) -> None:
    import gc

    from pycore.link.tracepoint import attach_tracepoint

    counts, prog = _counter(ProgType.TRACEPOINT, os.getpid(), "gc_me")
    link = attach_tracepoint(prog, "syscalls", "sys_enter_getpid")
    prog_id, link_ids = prog.id, link.link_ids()
    del prog, link, counts
    gc.collect()
    assert prog_id not in _ids("prog") and not set(link_ids) & _ids("link")


# -- raw maps ------------------------------------------------------------------------------------------


def test_raw_hash_map() -> None:
    with create_map(MapType.HASH, 4, 8, 16, name="h") as m:
        for i in range(5):
            m.update(i, struct.pack("<Q", i * 10))
        assert sorted(m.keys()) == [struct.pack("<I", i) for i in range(5)]
        assert dict(m.items())[struct.pack("<I", 3)] == struct.pack("<Q", 30)
        assert m.lookup(9) is None
        assert m.delete(1) and not m.delete(1)
        assert m.lookup_and_delete(2) == struct.pack("<Q", 20) and m.lookup(2) is None
        with pytest.raises(BpfError, match="map h .hash.: update: EEXIST"):
            m.update(0, bytes(8), flags=1)   # BPF_NOEXIST
        m.clear()
        assert list(m.keys()) == [] and m.items() == []
        with pytest.raises(ValueError, match="key is 2 bytes"):
            m.lookup(b"ab")


def test_raw_percpu_map_values_are_per_cpu() -> None:
    with create_map(MapType.PERCPU_ARRAY, 4, 4, 2, name="pc") as m:
        n = m.ncpus
        assert n >= 1 and m.percpu and m.stride == 8
        m.update(1, [struct.pack("<I", c) for c in range(n)])
        assert m.lookup_percpu(1) == [struct.pack("<I", c) for c in range(n)]
        m.update(0, struct.pack("<I", 7))   # one value for every CPU
        assert m.lookup(0) == [struct.pack("<I", 7)] * n
        items = dict(m.items())
        assert items[struct.pack("<I", 1)][n - 1] == struct.pack("<I", n - 1)
        m.clear()
        assert m.lookup(1) == [bytes(4)] * n


@pytest.mark.parametrize("map_type", [MapType.HASH, MapType.PERCPU_HASH])
def test_raw_items_packed_by_batch_and_key_by_key(map_type: int) -> None:
    """items_packed(): n, the keys back to back, their value buffers in the same order; the same
    entries read by BPF_MAP_LOOKUP_BATCH (in chunks: 3,000 values of 1 kB are more than one) as by
    the get_next_key walk of kernels and maps without batch ops; items() splits it."""
    n, vsize = 3000, 1024
    with create_map(map_type, 8, vsize, n, name="packed") as m:
        want = {}
        for i in range(n):
            key = struct.pack("<Q", i * 7919)
            per_cpu = [bytes([i % 251, c]) * (vsize // 2) for c in range(m.ncpus)]
            m.update(key, per_cpu if m.percpu else per_cpu[0])
            want[key] = b"".join(v + bytes(m.stride - vsize) for v in per_cpu) if m.percpu else per_cpu[0]
        slot = len(next(iter(want.values())))
        for batch in (True, False):
            m.batch_used = None if batch else False
            count, keys, values = m.items_packed()
            assert m.batch_used is batch
            assert count == n and len(keys) == 8 * n and len(values) == slot * n
            assert {keys[i * 8:i * 8 + 8]: values[i * slot:(i + 1) * slot] for i in range(n)} == want
        m.batch_used = None
        items = dict(m.items())
        assert items == {k: [v[c * m.stride:c * m.stride + vsize] for c in range(m.ncpus)] if m.percpu else v
                         for k, v in want.items()}
        m.clear()
        assert m.items_packed() == (0, b"", b"")


def test_create_map_errors_say_why() -> None:
    with pytest.raises(BpfError, match=r"create ringbuf map r .*EINVAL.*power-of-2"):
        create_map(MapType.RINGBUF, 0, 0, 1000, name="r")


def test_type_numbers_match_the_kernel() -> None:
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("no kernel BTF")
    from btf import Kind, load_kernel_spec

    spec = load_kernel_spec()
    for enum, cname, prefix in ((MapType, "bpf_map_type", "BPF_MAP_TYPE_"), (ProgType, "bpf_prog_type", "BPF_PROG_TYPE_"),
                                (AttachType, "bpf_attach_type", "BPF_")):
        kernel = {v.name.removeprefix(prefix): v.value for v in spec.find(cname, Kind.ENUM).values}
        for member in enum:
            assert kernel.get(member.name) == member.value, member


def test_load_kept_log_and_xlated() -> None:
    counts = create_map(MapType.ARRAY, 4, 8, 1, name="c")
    with counts, load_program(_count_insns(counts, None), ProgType.RAW_TRACEPOINT, name="verbose-name!",
                              log_level=2) as prog:
        assert "processed" in prog.log
        assert prog.name == "verbose-name!" and prog.insn_count == 11
        assert len(prog.xlated()) >= 10
        assert any(p["id"] == prog.id and p.get("name") == "verbose_name_" for p in bpftool_show("prog"))


# -- the kernel VMs: kprobes and trampolines --------------------------------------------------------------


@pytest.mark.kernel
@pytest.mark.parametrize("retprobe", [False, True])
def test_kprobe_counts_openat(tmp_path, retprobe) -> None:
    from pycore.link.kprobe import attach_kprobe

    path = tmp_path / "f"
    path.write_text("x")
    counts, prog = _counter(ProgType.KPROBE, os.getpid(), "kprobe_open")
    with counts, prog, attach_kprobe(prog, "do_sys_openat2", retprobe=retprobe) as link:
        for _ in range(N):
            os.close(os.open(path, os.O_RDONLY))
        assert _read(counts) >= N
        assert link.kind == ("kretprobe" if retprobe else "kprobe")
    with pytest.raises(BpfError, match="no kernel function 'no_such_function_xyz'"):
        with _counter(ProgType.KPROBE)[1] as p:
            attach_kprobe(p, "no_such_function_xyz")


@pytest.mark.kernel
@pytest.mark.parametrize("attach_type", [AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT])
def test_fentry_fexit_count_vfs_read(tmp_path, attach_type) -> None:
    from pycore.link.tracing import attach_tracing, btf_id

    path = tmp_path / "f"
    path.write_text("x")
    counts, prog = _counter(ProgType.TRACING, os.getpid(), "trampoline", expected_attach_type=attach_type,
                            attach_btf_id=btf_id("vfs_read", attach_type))
    with counts, prog, attach_tracing(prog, target="vfs_read") as link:
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(N):
                os.pread(fd, 1, 0)
        finally:
            os.close(fd)
        assert _read(counts) >= N
        assert link.link_ids()
