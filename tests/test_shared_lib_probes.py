"""Probes in shared libraries on the host kernel: Debian's libstdc++ USDT
probes (libstdcxx:throw/catch) for every process or one PID, a library built
here whose USDT arguments are a SIB operand and %ah, and uprobes/uretprobes
on a library function by symbol and by symbol+offset, with exact values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from usdt_targets import build_shared_lib_target, objdump_offsets  # noqa: E402

from pycore.elf.symbols import attach_uprobe, functions  # noqa: E402
from pycore.native.object import BpfObject  # noqa: E402
from pycore.native.shipped import object_path  # noqa: E402
from pycore.native.ringbuf import RingBuffer  # noqa: E402
from pycore.errors import ElfError  # noqa: E402
from pycore.elf.usdt import UsdtAttacher, UsdtFile  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

LIBSTDCXX = os.path.realpath("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
PC_TABLE = [11, 22, 33, 44, 55, 66, 77, 88]   # libpc.so's pc_table (tests/usdt_targets.py)
UPROBE_ENTRY, UPROBE_RETURN = 1, 2            # bpf_src/test_uprobe_args.bpf.c


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[str, str]:
    return build_shared_lib_target(str(tmp_path_factory.mktemp("shlib")))


def start(target: str, n: int) -> subprocess.Popen:
    """pc_target, loaded and waiting on stdin for the go."""
    proc = subprocess.Popen([target, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not any("libpc.so" in line for line in open(f"/proc/{proc.pid}/maps")):
        assert time.monotonic() < deadline, "pc_target did not map libpc.so"
        time.sleep(0.01)
    return proc


def finish(proc: subprocess.Popen, n: int) -> None:
    out, _ = proc.communicate("g", timeout=30)
    assert proc.returncode == 0
    assert out.split() == [str(n), str(sum(3 * i + 1 for i in range(n)))]


def load_base(pid: int, path: str) -> int:
    """Where ``path`` (a PIE or shared library, first PT_LOAD at vaddr 0) is mapped in ``pid``."""
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        if len(parts) == 6 and os.path.realpath(parts[5]) == path and int(parts[2], 16) == 0:
            return int(parts[0].split("-")[0], 16)
    raise AssertionError(f"{path} not mapped by {pid}")


def typeinfo(path: str, mangled: str) -> int:
    with UsdtFile(path) as f:
        return f.symbol_address(mangled)


def usdt_events(obj: BpfObject, att: UsdtAttacher) -> list[tuple[int, str, list[int]]]:
    rb = RingBuffer(obj, "events", event="usdt_hit_event")
    out = []
    for e in rb.consume():
        assert e.err == 0
        out.append((e.pid, att.where[e.cookie][0].name, list(e.args[:e.cnt])))
    return out


def test_libstdcxx_throw_catch_every_process(built):
    lib, target = built
    with BpfObject(object_path("test_usdt")) as obj:
        obj.load()
        att = UsdtAttacher(obj)
        # the binary path is the library: every process that maps it
        att.attach("usdt_hit", LIBSTDCXX, "libstdcxx", "throw")
        att.attach("usdt_hit", LIBSTDCXX, "libstdcxx", "catch")
        a, b = start(target, 7), start(target, 5)
        # std::runtime_error's typeinfo: the PIE's copy (R_X86_64_COPY), which the library uses
        type_a = load_base(a.pid, target) + typeinfo(target, "_ZTISt13runtime_error")
        type_b = load_base(b.pid, target) + typeinfo(target, "_ZTISt13runtime_error")
        finish(a, 7)
        finish(b, 5)
        events = usdt_events(obj, att)
    for proc, n, tinfo in ((a, 7, type_a), (b, 5, type_b)):
        throws = [args for pid, name, args in events if pid == proc.pid and name == "throw"]
        catches = [args for pid, name, args in events if pid == proc.pid and name == "catch"]
        assert len(throws) == n and len(catches) == n
        # throw's arg1 is the thrown type's typeinfo, at this process's load address
        assert all(args[1] == tinfo for args in throws)


def test_libstdcxx_throw_one_pid(built):
    lib, target = built
    with BpfObject(object_path("test_usdt")) as obj:
        obj.load()
        att = UsdtAttacher(obj)
        a, b = start(target, 6), start(target, 4)
        try:
            att.attach("usdt_hit", LIBSTDCXX, "libstdcxx", "throw", pid=a.pid)
        finally:
            finish(b, 4)   # b throws first, then a, while both are attached
            finish(a, 6)
        events = usdt_events(obj, att)
    assert [pid for pid, name, _ in events if name == "throw"] == [a.pid] * 6


def test_list_pid_shows_library_probes(built):
    lib, target = built
    proc = start(target, 1)
    try:
        def pycore_list(*a: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "pycore", "list", *a], capture_output=True,
                                  text=True, timeout=60)
        every = pycore_list("-p", str(proc.pid), "usdt")
        by_name = pycore_list("-v", "-p", str(proc.pid), "usdt:libstdc++.so.6:libstdcxx:throw")
    finally:
        finish(proc, 1)
    assert every.returncode == 0, every.stderr
    lines = set(every.stdout.splitlines())
    root = f"/proc/{proc.pid}/root"  # files as the process sees them, as bpftrace -l -p names them
    for name in ("throw", "catch", "rethrow"):
        assert f"usdt:{root}{LIBSTDCXX}:libstdcxx:{name}" in lines
    assert f"usdt:{root}{lib}:pc:sib" in lines and f"usdt:{root}{lib}:pc:ah" in lines
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.splitlines()[0] == f"usdt:{root}{LIBSTDCXX}:libstdcxx:throw"
    assert "args: 2  semaphore: none  locations: 1" in by_name.stdout


def test_sib_and_ah_arguments_decode(built):
    lib, target = built
    with UsdtFile(lib) as f:
        # what this test exists for: gcc's SIB operand and the %ah high byte
        assert f.probe("pc", "sib").locations[0].args_text == "-8@(%rax,%rdx,8) -4@%edi"
        assert f.probe("pc", "ah").locations[0].args_text == "-1@%ah 1@%ah 8@%rdi"
    n = 20
    with BpfObject(object_path("test_usdt")) as obj:
        obj.load()
        att = UsdtAttacher(obj)
        proc = start(target, n)
        try:
            att.attach("usdt_hit", lib, "pc", "sib", pid=proc.pid)
            att.attach("usdt_hit", lib, "pc", "ah", pid=proc.pid)
        finally:
            finish(proc, n)
        events = usdt_events(obj, att)
    assert [args for _, name, args in events if name == "sib"] == \
        [[PC_TABLE[i % 8], i % 8] for i in range(n)]
    c = [0xF0 + i % 16 for i in range(n)]
    assert [args for _, name, args in events if name == "ah"] == \
        [[c[i] - 256, c[i], 1000 + i] for i in range(n)]


def uprobe_events(obj: BpfObject) -> list[tuple[int, int, int, int]]:
    rb = RingBuffer(obj, "events", event="uprobe_args_event")
    return [(e.pid, e.kind, e.arg0, e.arg1) for e in rb.consume()]


def test_uprobe_uretprobe_library_function_by_symbol(built):
    lib, target = built
    n = 9
    with BpfObject(object_path("test_uprobe_args")) as obj:
        obj.load()
        attach_uprobe(obj.programs["uprobe_args"], lib, "pc_add")
        attach_uprobe(obj.programs["uretprobe_value"], lib, "pc_add", retprobe=True)
        proc = start(target, n)
        finish(proc, n)
        events = [e[1:] for e in uprobe_events(obj) if e[0] == proc.pid]
    want = []
    for i in range(n):
        want += [(UPROBE_ENTRY, i, 1), (UPROBE_RETURN, 3 * i + 1, 0)]
    assert events == want


def test_uprobe_library_function_plus_offset(built):
    lib, target = built
    offsets = objdump_offsets(lib, "pc_add")
    assert len(offsets) >= 3, offsets
    aligned = offsets[1]                       # after `lea (%rdi,%rdi,2),%eax`: args still in place
    misaligned = offsets[1] - 1 if offsets[1] - 1 > offsets[0] else offsets[1] + 1
    n = 5
    with BpfObject(object_path("test_uprobe_args")) as obj:
        obj.load()
        with pytest.raises(ElfError, match=rf"^{misaligned:#x} is not on an instruction boundary of pc_add "
                                            rf"\(nearest: \+{offsets[0]:#x}, \+{offsets[1]:#x}\)$"):
            attach_uprobe(obj.programs["uprobe_args"], lib, f"pc_add+{misaligned}")
        with pytest.raises(ElfError, match=r"a uretprobe takes a function, not function\+offset"):
            attach_uprobe(obj.programs["uretprobe_value"], lib, f"pc_add+{aligned}", retprobe=True)
        assert not obj.links
        attach_uprobe(obj.programs["uprobe_args"], lib, f"pc_add+{aligned:#x}")
        proc = start(target, n)
        finish(proc, n)
        events = [e[1:] for e in uprobe_events(obj) if e[0] == proc.pid]
    assert events == [(UPROBE_ENTRY, i, 1) for i in range(n)]


def test_cli_symbol_offset_check(built):
    lib, _ = built
    offsets = objdump_offsets(lib, "pc_add")

    def pycore_list(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pycore", "list", *a], capture_output=True, text=True,
                              timeout=60)
    ok = pycore_list("-v", f"uprobe:{lib}:pc_add+{offsets[1]}")
    assert ok.returncode == 0, ok.stderr
    f = next(f for f in functions(lib) if f.name == "pc_add")
    assert ok.stdout.splitlines() == [
        f"uprobe:{lib}:pc_add+{offsets[1]:#x}",
        f"    address: {f.address + offsets[1]:#x} (file offset {f.address + offsets[1]:#x})  size: {f.size}",
        "    checked: instruction boundary",
    ]
    bad = pycore_list(f"uprobe:{lib}:pc_add+{offsets[1] + 1}")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (f"pycore: error: {offsets[1] + 1:#x} is not on an instruction boundary of pc_add "
                          f"(nearest: +{offsets[1]:#x}, +{offsets[2]:#x})\n")
    outside = pycore_list(f"uprobe:{lib}:pc_add+{f.size}")
    assert outside.returncode == 2 and f"is outside pc_add ({f.size} bytes)" in outside.stderr
    assert "Traceback" not in outside.stderr
