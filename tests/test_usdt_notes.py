"""USDT notes and argument specs: against readelf -n on real binaries, by hand, and fuzzed."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from pycore.cli import main
from pycore.elf.stapsdt import UsdtError, parse_arg, parse_notes
from pycore.elf.usdt import UsdtFile

POSTGRES = "/usr/lib/postgresql/15/bin/postgres"
PYTHON311 = "/usr/bin/python3.11"
TARGETS = [p for p in (POSTGRES, PYTHON311) if os.path.exists(p)]


def readelf_notes(path: str) -> list[tuple[str, str, int, int, int, str]]:
    out = subprocess.run(["readelf", "-n", "--wide", path], capture_output=True, text=True, check=True).stdout
    rx = re.compile(r"Provider: (\S+)\n\s+Name: (\S+)\n\s+Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), "
                    r"Semaphore: (0x[0-9a-f]+)\n\s+Arguments: ?([^\n]*)")
    return [(p, n, int(l, 16), int(b, 16), int(s, 16), a.strip()) for p, n, l, b, s, a in rx.findall(out)]


@pytest.mark.skipif(not shutil.which("readelf") or not TARGETS, reason="readelf or targets missing")
@pytest.mark.parametrize("path", TARGETS)
def test_notes_match_readelf(path):
    want = readelf_notes(path)
    with UsdtFile(path) as f:
        got = [(p.provider, p.name, loc.address, p.semaphore, loc.args_text)
               for p in f.probes() for loc in p.locations]
    # readelf prints link-time addresses; no prelink here, so base == .stapsdt.base
    assert sorted(got) == sorted((p, n, l, s, a) for p, n, l, b, s, a in want)
    if path == POSTGRES:
        assert len(got) == 71


@pytest.mark.skipif(not TARGETS, reason="targets missing")
def test_list_vv_matches_readelf(capsys):
    path = TARGETS[0]
    assert main(["list", "-vv", f"usdt:{path}"]) == 0
    out = capsys.readouterr().out
    for p, n, loc, _base, sema, args in readelf_notes(path):
        assert f"usdt:{path}:{p}:{n}\n" in out
        assert f"location" in out and f"{loc:#x} " in out
        assert f"args: {args}" in out
        if sema:
            assert f"semaphore: {sema:#x}" in out


def test_list_provider_glob_and_errors(tmp_path, capsys):
    if TARGETS:
        assert main(["list", f"usdt:{TARGETS[0]}:nosuchprovider:*"]) == 1
    notelf = tmp_path / "x"
    notelf.write_text("hello")
    assert main(["list", f"usdt:{notelf}"]) == 2
    assert "not an ELF" in capsys.readouterr().err
    assert main(["list", "usdt:/nonexistent/bin"]) == 2
    assert main(["list", "-p", "999999999", "usdt"]) == 2
    assert "does not exist" in capsys.readouterr().err
    # an ELF without notes matches nothing (exit 1), and says why
    assert main(["list", "usdt:/bin/true"]) == 1
    assert "no USDT probes" in capsys.readouterr().err


def test_list_pid(capsys):
    if not os.path.exists(PYTHON311):
        pytest.skip("no python3.11")
    p = subprocess.Popen([PYTHON311, "-c", "import time; time.sleep(30)"])
    try:
        import time
        time.sleep(0.3)
        assert main(["list", "-p", str(p.pid), "usdt"]) == 0
        # named as the process sees the file, as bpftrace -l -p names it
        assert f"usdt:/proc/{p.pid}/root{PYTHON311}:python:function__entry" in capsys.readouterr().out
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("spec,want", [
    ("8@%rax", dict(kind="reg", reg="rax", size=8, signed=False)),
    ("-4@%eax", dict(kind="reg", reg="rax", size=4, signed=True)),
    ("2@%ax", dict(kind="reg", reg="rax")),
    ("1@%al", dict(kind="reg", reg="rax", shift=0)),
    ("1@%ah", dict(kind="reg", reg="rax", shift=1)),
    ("-1@%r9b", dict(kind="reg", reg="r9")),
    ("4@%r15d", dict(kind="reg", reg="r15")),
    ("2@%r10w", dict(kind="reg", reg="r10")),
    ("8@%sil", dict(kind="reg", reg="rsi")),
    ("-4@-140(%rbp)", dict(kind="mem", reg="rbp", offset=-140)),
    ("8@(%rdi)", dict(kind="mem", reg="rdi", offset=0)),
    ("8@0x10(%rsp)", dict(kind="mem", reg="rsp", offset=16)),
    ("-4@$1", dict(kind="const", value=1)),
    ("-4@$-5", dict(kind="const", value=-5)),
    ("8@(%rax,%rdx,8)", dict(kind="sib", reg="rax", index="rdx", scale=8, offset=0)),
    ("4@-8(%rbx,%rcx,4)", dict(kind="sib", reg="rbx", index="rcx", scale=4, offset=-8)),
    ("4@(,%rcx,2)", dict(kind="sib", reg="", index="rcx", scale=2)),
    ("-4@NBuffers(%rip)", dict(kind="rip", symbol="NBuffers", offset=0, signed=True)),
    ("4@52+CheckpointStats(%rip)", dict(kind="rip", symbol="CheckpointStats", offset=52)),
    ("8@sym+16(%rip)", dict(kind="rip", symbol="sym", offset=16)),
    ("8@sym-16(%rip)", dict(kind="rip", symbol="sym", offset=-16)),
])
def test_parse_arg(spec, want):
    a = parse_arg(spec)
    for k, v in want.items():
        assert getattr(a, k) == v, (spec, k)


@pytest.mark.parametrize("spec", ["", "8@", "3@%rax", "8@%xyz", "8@(%rax,%rdx,3)", "8@%rip", "hello@world",
                                  "8@(%rax", "8@$", "1@(%ah)"])
def test_parse_arg_errors(spec):
    with pytest.raises(UsdtError):
        parse_arg(spec)


def _note(provider: bytes, name: bytes, args: bytes, loc=0x1000, base=0x2000, sema=0) -> bytes:
    desc = struct.pack("<QQQ", loc, base, sema) + provider + b"\0" + name + b"\0" + args + b"\0"
    owner = b"stapsdt\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(owner), len(desc), 3) + pad(owner) + pad(desc)


def test_parse_notes_by_hand():
    data = _note(b"p", b"n", b"8@%rax -4@$3") + _note(b"p", b"m", b"", sema=0x3000)
    notes = parse_notes(data)
    assert [(n.provider, n.name, n.args_text, n.semaphore) for n in notes] == \
        [("p", "n", "8@%rax -4@$3", 0), ("p", "m", "", 0x3000)]
    for cut in range(1, len(data)):
        try:
            parse_notes(data[:cut])
        except UsdtError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_notes(data):
    try:
        parse_notes(data)
    except UsdtError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200).map(lambda b: _note(b"p", b"n", b"8@%rax") + b))
def test_fuzz_notes_prefixed(data):
    try:
        parse_notes(data)
    except UsdtError:
        pass


_alphabet = st.sampled_from(list("-0123456789@%$(),+xabcdeilprsw_N") + ["%rax", "%rip", "(%rbp)", "8@"])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(_alphabet, max_size=12).map("".join)))
def test_fuzz_arg(spec):
    try:
        parse_arg(spec)
    except UsdtError:
        pass
