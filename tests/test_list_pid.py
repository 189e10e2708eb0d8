"""``pycore list -p PID``: the USDT lab's discovery step (``bpftrace -l -p PID | grep usdt``),
side by side with bpftrace 0.17 on python3.11, PostgreSQL and a C++ program built here with a
USDT library of its own; ``uprobe:*`` with -p; bare file paths; files without USDT notes; and
refusals that suggest only the probe types this kernel has."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from elftools.elf.elffile import ELFFile

from pycore.kernel.features import Features

sys.path.insert(0, os.path.dirname(__file__))
from test_list import pycore, tool  # noqa: E402
from usdt_targets import build_shared_lib_target, pg_available, pg_server, postmaster_pid  # noqa: E402

PYTHON311 = "/usr/bin/python3.11"


def bpftrace_list(*args: str) -> list[str]:
    proc = subprocess.run([tool("bpftrace"), "-l", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def plt_only_functions(path: str) -> set[str]:
    """Functions a non-PIE executable imports but gives an address (its PLT stub, the canonical
    address of an address-taken import): bpftrace 0.17 lists them as the executable's; pycore
    lists the functions a file defines (an undefined symbol is not code of this file)."""
    with open(path, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        return {s.name.split("@")[0] for s in dynsym.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] == "SHN_UNDEF" and s["st_value"]}


def exe_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/exe")


def assert_as_bpftrace(pid: int) -> list[str]:
    """``pycore list -p PID`` line for line as ``bpftrace -l -p PID``: its uprobe lines (the
    executable's functions, less plt_only_functions), then its usdt lines (every mapped object's),
    in bpftrace's order; returns pycore's lines."""
    ours = pycore("list", "-p", str(pid)).stdout.splitlines()
    theirs = bpftrace_list("-p", str(pid))
    skip = {f"uprobe:/proc/{pid}/root{exe_of(pid)}:{name}" for name in plt_only_functions(exe_of(pid))}
    assert [line for line in ours if line.startswith("usdt:")] == \
        [line for line in theirs if line.startswith("usdt:")]
    assert ours == [line for line in theirs if line not in skip]
    assert not {line.split(":", 1)[0] for line in ours} - {"uprobe", "usdt"}  # no kernel probes
    return ours


@pytest.fixture(scope="module")
def python_pid() -> Iterator[int]:
    if not os.path.exists(PYTHON311):
        pytest.fail(f"{PYTHON311} (Debian's, with USDT probes) is part of the test environment")
    p = subprocess.Popen([PYTHON311, "-c", "import time; print('ready', flush=True); time.sleep(120)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_python_as_bpftrace(python_pid: int) -> None:
    lines = assert_as_bpftrace(python_pid)
    root = f"/proc/{python_pid}/root{PYTHON311}"
    assert f"usdt:{root}:python:function__entry" in lines  # the lab's first probe
    assert f"uprobe:{root}:PyEval_EvalCode" in lines


@pytest.mark.skipif(not pg_available(), reason="PostgreSQL 15 is installed by ./dev.sh")
def test_postgres_as_bpftrace() -> None:
    with pg_server() as server:
        lines = assert_as_bpftrace(postmaster_pid(server))
    assert sum(line.startswith("usdt:") and ":postgresql:" in line for line in lines) > 50


def test_a_process_with_usdt_libraries_as_bpftrace(tmp_path) -> None:
    """A C++ program and its own USDT library: every mapped object's probes (libpc.so's and
    libstdc++'s), sorted across files as bpftrace sorts them."""
    lib, target = build_shared_lib_target(str(tmp_path))
    p = subprocess.Popen([target, "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):  # every library is mapped once main waits in read(2) on stdin
            if open(f"/proc/{p.pid}/syscall").read().startswith("0 0x0 "):
                break
            time.sleep(0.05)
        lines = assert_as_bpftrace(p.pid)
    finally:
        p.kill()
        p.wait()
    usdt = [line for line in lines if line.startswith("usdt:")]
    assert f"usdt:/proc/{p.pid}/root{lib}:pc:sib" in usdt
    assert any(":libstdcxx:throw" in line for line in usdt)


@pytest.mark.parametrize("kind", ["uprobe", "uretprobe"])
def test_uprobe_star_is_the_executables_functions(python_pid: int, kind: str) -> None:
    ours = pycore("list", "-p", str(python_pid), f"{kind}:*").stdout.splitlines()
    skip = {f"{kind}:/proc/{python_pid}/root{PYTHON311}:{name}" for name in plt_only_functions(PYTHON311)}
    assert ours == [line for line in bpftrace_list("-p", str(python_pid), f"{kind}:*") if line not in skip]
    everything = pycore("list", "-p", str(python_pid)).stdout.splitlines()
    assert ours == [line.replace("uprobe:", f"{kind}:", 1) for line in everything if line.startswith("uprobe:")]


def test_uprobe_star_without_a_process_is_one_line() -> None:
    proc = pycore("list", "uprobe:*", check_rc=2)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and "-p PID" in proc.stderr


@pytest.mark.parametrize("text", [PYTHON311, f"{PYTHON311}:Py_Main", "./server"])
def test_a_bare_file_suggests_user_probes(text: str) -> None:
    proc = pycore("list", text, check_rc=2)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    path, _, func = text.partition(":")
    assert f"usdt:{path} " in proc.stderr and f"uprobe:{path}:{func or '*'} " in proc.stderr
    assert "kfunc" not in proc.stderr and "tracepoint" not in proc.stderr
    if path == PYTHON311:  # and what it suggests lists
        assert pycore("list", f"usdt:{path}").stdout
        assert pycore("list", f"uprobe:{path}:{func or '*'}").stdout


def test_a_file_without_usdt_notes_matches_nothing(tmp_path, python_pid: int) -> None:
    src, exe = tmp_path / "plain.c", tmp_path / "plain"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    proc = pycore("list", f"usdt:{exe}", check_rc=1)
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"pycore: {exe} has no USDT probes (no .note.stapsdt section)",
                                        f"pycore list: nothing matches 'usdt:{exe}'"]
    # with -p, a file named is read as the process sees it
    proc = pycore("list", "-p", str(python_pid), f"usdt:{exe}", check_rc=1)
    assert f"/proc/{python_pid}/root{exe} has no USDT probes" in proc.stderr
    # not an ELF file at all stays an error
    bad = tmp_path / "text"
    bad.write_text("hello")
    assert "not an ELF" in pycore("list", f"usdt:{bad}", check_rc=2).stderr


@pytest.fixture(scope="module")
def features() -> Features:
    return Features(mount=False)


def test_refusals_suggest_only_this_kernels_probe_types(features: Features) -> None:
    hint = pycore("list", "vfs_read", check_rc=2).stderr
    assert ("kfunc:vfs_read" in hint) == bool(features.fentry), hint
    assert "kprobe:" not in hint or features.kprobes, hint
    assert "tracepoint:*:vfs_read" in hint
    known = pycore("list", "bogus:x", check_rc=2).stderr
    listed = set(known.rpartition(": ")[2].rstrip(")\n").split(", "))
    assert {"tracepoint", "usdt", "uprobe", "uretprobe", "struct"} <= listed
    assert ("kfunc" in listed) == bool(features.fentry) and ("kretfunc" in listed) == bool(features.fexit)
    assert ("kprobe" in listed) == bool(features.kprobes) and ("rawtracepoint" in listed) == bool(features.tp_btf)


def test_a_process_that_is_gone_is_one_line() -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    for args in (["-p", str(p.pid)], ["-p", str(p.pid), "uprobe:*"]):
        proc = pycore("list", *args, check_rc=2)
        assert proc.stderr.splitlines() == [f"pycore: error: process {p.pid} does not exist (gone?)"]
