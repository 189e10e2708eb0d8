"""Loading and attaching real programs (bpf_src/test_attach.bpf.c) on this kernel.

Each program counts hits per tgid in the `counts` map, so the tests trigger
events from their own process (getpid) or from a small C program they
compile, and compare exact numbers.  fentry/fexit/kprobe success paths are
marked `kernel`: the sandboxed host refuses them (KERNEL-LAB.md) and they run
in the QEMU VM; on the host their failures are tested instead.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BPFFS, bpftool_show, ensure_bpffs, require_root
from pycore.native import libbpf as L
from pycore.errors import BpfError
from pycore.kernel.features import Features
from pycore.native.object import BpfObject
from pycore.native.shipped import object_path

SRC_TP_BTF, SRC_TRACEPOINT, SRC_RAW_TP, SRC_UPROBE, SRC_URETPROBE, SRC_URETPROBE_SUM, \
    SRC_FENTRY, SRC_FEXIT, SRC_KPROBE = range(1, 10)
N = 50
PID = os.getpid()  # once: every getpid(2) of ours is counted

TARGET_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline, used)) int pycore_target(int x)
{
    __asm__ volatile("" ::: "memory");
    return 2 * x;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    char go;
    long sum = 0;

    if (argc > 2 && read(0, &go, 1) != 1)   /* wait until the probes are attached */
        return 1;
    for (int i = 0; i < n; i++)
        sum += pycore_target(i);
    printf("%ld\n", sum);
    return 0;
}
"""


@pytest.fixture(scope="module")
def features() -> Features:
    require_root()
    return Features()


@pytest.fixture
def obj():
    require_root()
    o = BpfObject(object_path("test_attach"))
    yield o
    o.close()


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> str:
    """A small C program calling pycore_target(i) for i < argv[1]."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        pytest.skip("needs gcc to build the uprobe target")
    d = tmp_path_factory.mktemp("uprobe")
    (d / "target.c").write_text(TARGET_C)
    subprocess.run([gcc, "-O2", "-o", str(d / "target"), str(d / "target.c")], check=True)
    return str(d / "target")


def count(o: BpfObject, source: int, tgid: int | None = None) -> int:
    key = L.ffi.new("__u32[2]", [PID if tgid is None else tgid, source])
    value = L.ffi.new("__u64 *")
    if L.lib.bpf_map_lookup_elem(o.maps["counts"].fd, key, value) != 0:
        return 0
    return int(value[0])


def only(o: BpfObject, *names: str) -> None:
    """Autoload just these programs."""
    for p in o.programs.values():
        p.autoload = p.name in names


def getpids(n: int = N) -> None:
    for _ in range(n):
        os.getpid()  # a real getpid(2) every time (glibc does not cache it)


def read_files(n: int = N) -> None:
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    try:
        for _ in range(n):
            os.pread(fd, 256, 0)
    finally:
        os.close(fd)


def obj_id(fd: int) -> int:
    """The kernel id of a program or link fd (bpf_{prog,link}_info start with type, id)."""
    info = L.ffi.new("__u32[2]")
    size = L.ffi.new("__u32 *", 8)
    assert L.lib.bpf_obj_get_info_by_fd(fd, info, size) == 0
    return int(info[1])


def bpftool_ids(kind: str) -> set[int]:
    return {entry["id"] for entry in bpftool_show(kind)}


def wait_gone(kind: str, ids: set[int], timeout: float = 3.0) -> set[int]:
    """Ids still listed by bpftool after up to ``timeout`` s (release may be deferred)."""
    deadline = time.monotonic() + timeout
    while (left := ids & bpftool_ids(kind)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_target(target: str, n: int = N, wait: bool = False) -> subprocess.Popen:
    argv = [target, str(n)] + (["wait"] if wait else [])
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> int:
    out, _ = proc.communicate("g", timeout=30)
    assert proc.returncode == 0
    return int(out)


# -- success paths that work on the host ------------------------------------

def test_tracing_programs_count_own_getpid_calls(obj):
    obj.load()
    assert obj.programs["pat_tp_btf"].type == "tracing"
    links = [obj.programs["pat_tp_btf"].attach(),
             obj.programs["pat_tracepoint"].attach(),
             obj.programs["pat_raw_tp"].attach_raw_tracepoint("sys_enter")]
    assert all(link.attached and link.fd >= 0 for link in links)
    before = {source: count(obj, source) for source in (SRC_TP_BTF, SRC_TRACEPOINT, SRC_RAW_TP)}
    getpids()
    for source, n in before.items():
        assert count(obj, source) - n == N, source
    obj.detach()
    assert not obj.links and not any(link.attached for link in links)
    n = count(obj, SRC_TP_BTF)
    getpids()
    assert count(obj, SRC_TP_BTF) == n  # detached: no more events


def test_tracepoint_attach_by_name(obj):
    obj.load()
    obj.programs["pat_tracepoint"].attach_tracepoint("syscalls", "sys_enter_getpid", cookie=7)
    n = count(obj, SRC_TRACEPOINT)
    getpids()
    assert count(obj, SRC_TRACEPOINT) - n == N


def test_uprobe_and_uretprobe_by_symbol(obj, target):
    obj.load()
    obj.programs["pat_uprobe"].attach_uprobe(target, symbol="pycore_target")
    obj.programs["pat_uretprobe"].attach_uprobe(target, symbol="pycore_target", retprobe=True)
    proc = run_target(target)
    total = finish(proc)
    assert count(obj, SRC_UPROBE, proc.pid) == N
    assert count(obj, SRC_URETPROBE, proc.pid) == N
    assert count(obj, SRC_URETPROBE_SUM, proc.pid) == total == sum(2 * i for i in range(N))


def symbol_file_offset(path: str, symbol: str) -> int:
    """File offset of ``symbol``'s code (what libbpf expects without a func_name)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        (sym,) = elf.get_section_by_name(".symtab").get_symbol_by_name(symbol)
        addr = sym["st_value"]
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= addr < seg["p_vaddr"] + seg["p_memsz"]:
                return addr - seg["p_vaddr"] + seg["p_offset"]
    raise AssertionError(f"{symbol} not in a PT_LOAD segment")


def test_uprobe_by_offset(obj, target):
    obj.load()
    obj.programs["pat_uprobe"].attach_uprobe(target, offset=symbol_file_offset(target, "pycore_target"))
    proc = run_target(target)
    finish(proc)
    assert count(obj, SRC_UPROBE, proc.pid) == N


def test_uprobe_pid_filter(obj, target):
    obj.load()
    traced, other = run_target(target, wait=True), run_target(target, wait=True)
    try:
        obj.programs["pat_uprobe"].attach_uprobe(target, symbol="pycore_target", pid=traced.pid)
        obj.programs["pat_uretprobe"].attach_uprobe(target, symbol="pycore_target", pid=traced.pid,
                                                    retprobe=True)
    finally:
        finish(traced)
        finish(other)
    assert count(obj, SRC_UPROBE, traced.pid) == N
    assert count(obj, SRC_URETPROBE, traced.pid) == N
    assert count(obj, SRC_UPROBE, other.pid) == 0
    assert count(obj, SRC_URETPROBE, other.pid) == 0


def test_link_pin_and_unpin(obj):
    ensure_bpffs()
    obj.load()
    link = obj.programs["pat_tp_btf"].attach()
    path = f"{BPFFS}/pycore_test_{PID}_link"
    try:
        link.pin(path)
        assert os.path.exists(path)
        shown = subprocess.run(["bpftool", "-j", "link", "show", "pinned", path],
                               capture_output=True, text=True, check=True)
        assert json.loads(shown.stdout)["id"] == obj_id(link.fd)
        link.unpin()
        assert not os.path.exists(path)
        n = count(obj, SRC_TP_BTF)
        getpids()
        assert count(obj, SRC_TP_BTF) - n == N  # still attached after unpin
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_pinned_link_outlives_close_until_unlinked():
    require_root()
    ensure_bpffs()
    path = f"{BPFFS}/pycore_test_{PID}_kept"
    o = BpfObject(object_path("test_attach"))
    try:
        o.load()
        link = o.programs["pat_tp_btf"].attach()
        link_id = obj_id(link.fd)
        link.pin(path)
        o.close()
        assert link_id in bpftool_ids("link")  # the pin holds it
    finally:
        o.close()
        if os.path.exists(path):
            os.unlink(path)
    assert not wait_gone("link", {link_id})


def test_close_leaves_no_program_or_link(target):
    require_root()
    o = BpfObject(object_path("test_attach"))
    o.load()
    links = [o.programs["pat_tp_btf"].attach(), o.programs["pat_tracepoint"].attach(),
             o.programs["pat_raw_tp"].attach_raw_tracepoint("sys_enter"),
             o.programs["pat_uprobe"].attach_uprobe(target, symbol="pycore_target"),
             o.programs["pat_uretprobe"].attach_uprobe(target, symbol="pycore_target", retprobe=True)]
    prog_ids = {obj_id(p.fd) for p in o.programs.values() if p.autoload}
    link_ids = {obj_id(link.fd) for link in links}
    assert len(prog_ids) == 5 and len(link_ids) == 5
    assert prog_ids <= bpftool_ids("prog") and link_ids <= bpftool_ids("link")
    o.close()
    assert o.closed and not o.links and not any(link.attached for link in links)
    assert not wait_gone("link", link_ids)
    assert not wait_gone("prog", prog_ids)
    o.close()  # twice is fine


# -- errors -------------------------------------------------------------------

def test_bad_object_bytes():
    with pytest.raises(BpfError) as e:
        BpfObject(b"\x7fELF" + b"\x00" * 60 + b"not a BPF object" * 8, name="junk")
    assert e.value.errno == 4001  # LIBBPF_ERRNO__FORMAT
    assert "LIBBPF_ERRNO__FORMAT" in str(e.value) and "junk" in str(e.value)
    with pytest.raises(BpfError) as e:
        BpfObject(b"hello", name="junk")
    assert e.value.errno == 4001


def test_verifier_rejection_names_program_and_quotes_verifier(obj):
    only(obj, "pat_oob")
    with pytest.raises(BpfError) as e:
        obj.load()
    msg = str(e.value)
    assert "pat_oob" in msg and "tp_btf/sys_enter" in msg
    assert e.value.errno == errno.EACCES
    tail = e.value.verifier_tail()
    assert "invalid access to map value" in tail and "off=64" in tail
    assert not obj.loaded


def test_fentry_on_missing_function_from_section(obj):
    only(obj, "pat_fentry_missing")
    with pytest.raises(BpfError) as e:
        obj.load()
    msg = str(e.value)
    assert "pat_fentry_missing" in msg and "fentry/pycore_no_such_function" in msg
    assert e.value.errno == errno.ESRCH and "does not exist in this kernel's BTF" in msg


def test_fentry_retargeted_to_missing_function(obj):
    with pytest.raises(BpfError) as e:
        obj.programs["pat_fentry"].set_attach_target("pycore_no_such_function")
    msg = str(e.value)
    assert "pat_fentry" in msg and "pycore_no_such_function" in msg
    assert e.value.errno == errno.ESRCH and "does not exist in this kernel's BTF" in msg


def test_fexit_load_refused_on_host(obj, features):
    if features.fexit:
        pytest.skip("this kernel allows fexit")
    only(obj, "pat_fexit")
    with pytest.raises(BpfError) as e:
        obj.load()
    assert e.value.errno == errno.EPERM
    assert "pat_fexit" in str(e.value) and "refuses fentry/fexit" in str(e.value)


def test_kprobe_attach_without_kprobes(obj, features):
    if features.kprobes:
        pytest.skip("this kernel has kprobes")
    only(obj, "pat_kprobe")
    obj.load()  # the program type exists (uprobes use it); attaching is what fails
    with pytest.raises(BpfError) as e:
        obj.programs["pat_kprobe"].attach_kprobe("vfs_read")
    assert "CONFIG_KPROBES" in str(e.value) and "pat_kprobe" in str(e.value)


def test_attach_before_load_is_a_value_error(obj):
    with pytest.raises(ValueError, match="before load"):
        obj.programs["pat_tp_btf"].attach()
    with pytest.raises(ValueError, match="before load"):
        obj.programs["pat_uprobe"].attach_uprobe("/bin/true", symbol="main")


def test_configure_after_load_is_a_value_error(obj):
    obj.load()
    with pytest.raises(ValueError, match="after load"):
        obj.programs["pat_fentry"].autoload = True


# -- success paths that need a full kernel (QEMU VM) ---------------------------

@pytest.mark.kernel
def test_fentry_fexit_count_reads(obj):
    only(obj, "pat_fentry", "pat_fexit")
    obj.load()
    obj.programs["pat_fentry"].attach()
    obj.programs["pat_fexit"].attach_trace()
    read_files()
    assert count(obj, SRC_FENTRY) >= N
    assert count(obj, SRC_FEXIT) >= N


@pytest.mark.kernel
def test_fexit_retargeted(obj):
    only(obj, "pat_fexit")
    obj.programs["pat_fexit"].set_attach_target("vfs_read")
    obj.load()
    obj.programs["pat_fexit"].attach()
    read_files()
    assert count(obj, SRC_FEXIT) >= N


@pytest.mark.kernel
def test_kprobe_counts_reads(obj):
    only(obj, "pat_kprobe")
    obj.load()
    obj.programs["pat_kprobe"].attach_kprobe("vfs_read")
    read_files()
    assert count(obj, SRC_KPROBE) >= N


@pytest.mark.kernel
def test_fmod_ret_replaces_return_value():
    """fmod_ret on a security hook (the verifier allows every security_* one):
    getsid() of this process fails with the errno the program returns; once
    detached, it works again."""
    me = os.getpid()  # getsid(0) returns early, before the hook; a pid goes through it
    sid = os.getsid(me)
    with BpfObject(object_path("test_fmod_ret")) as obj:
        obj.globals["target_tgid"] = os.getpid()
        obj.globals["forced"] = -errno.EACCES
        obj.load()
        link = obj.programs["force_getsid"].attach_trace()
        with pytest.raises(PermissionError) as err:
            os.getsid(me)
        assert err.value.errno == errno.EACCES
        link.destroy()
        assert os.getsid(me) == sid


def test_btf_custom_path(tmp_path):
    """CO-RE against a BTF file given by path (BTFHub-style, for kernels
    without /sys/kernel/btf): a copy of this kernel's works, a bad one is a
    clear error naming the object."""
    good = tmp_path / "vmlinux.btf"
    good.write_bytes(Path("/sys/kernel/btf/vmlinux").read_bytes())
    with BpfObject(object_path("test_attach"), btf_custom_path=str(good)) as obj:
        for p in obj.programs.values():
            p.autoload = p.name == "pat_tp_btf"
        obj.load()
        assert obj.loaded
    bad = tmp_path / "bad.btf"
    bad.write_bytes(b"not btf at all")
    with BpfObject(object_path("test_attach"), btf_custom_path=str(bad)) as obj:
        for p in obj.programs.values():
            p.autoload = p.name == "pat_tp_btf"
        with pytest.raises(BpfError) as err:
            obj.load()
    assert "test_attach" in str(err.value)
