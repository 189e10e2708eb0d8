"""uprobe: listing from .symtab/.dynsym with demangling (C++, Rust legacy and
v0 on binaries built here by Debian's rustc), attaching by mangled name, and
symbol+offset checks against objdump's instruction boundaries."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from usdt_targets import build_rust_target, objdump_offsets  # noqa: E402

from pycore.cli import main  # noqa: E402
from pycore.elf.symbols import attach_uprobe, demangle, functions, parse_spec, resolve  # noqa: E402
from pycore.errors import ElfError  # noqa: E402

LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def test_list_bash_readline(capsys):
    assert main(["list", "uprobe:/bin/bash:*readline*"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "uprobe:/bin/bash:readline" in out


def test_demangle():
    assert demangle("_ZSt9terminatev") == "std::terminate()"
    assert demangle("_ZN4core3fmt5write17h0123456789abcdefE") == "core::fmt::write"
    assert demangle("_RNvMCs6Bq21TOhnQv_1tNtB2_7Counter4bump") == "<t::Counter>::bump"
    assert demangle("_RINvCs6Bq21TOhnQv_1t11generic_summEB2_") == "t::generic_sum::<u32>"
    assert demangle("_Rnot_v0") == "_Rnot_v0"
    assert demangle("main") == "main"
    assert demangle("_Znotvalid") == "_Znotvalid"


def test_cxx_functions_keep_mangled_name():
    fs = [f for f in functions(LIBSTDCXX) if f.demangled == "std::terminate()"]
    assert fs and fs[0].name == "_ZSt9terminatev"


def test_resolve_offsets():
    starts = objdump_offsets("/bin/bash", "readline")
    assert resolve("/bin/bash", "readline") == ("readline", 0)
    for off in starts[1:8]:
        assert resolve("/bin/bash", f"readline+{off}") == ("readline", off)
    inside = [off for off in range(1, starts[8]) if off not in starts]
    assert inside
    for off in inside:
        before = max(s for s in starts if s < off)
        after = min(s for s in starts if s > off)
        with pytest.raises(ElfError, match=rf"^{off:#x} is not on an instruction boundary of readline "
                                            rf"\(nearest: \+{before:#x}, \+{after:#x}\)$"):
            resolve("/bin/bash", f"readline+{off}")
    assert resolve("/bin/bash", "0x1234") == ("", 0x1234)
    with pytest.raises(ElfError, match="is outside readline"):
        resolve("/bin/bash", "readline+100000")
    with pytest.raises(ElfError, match="bad offset"):
        resolve("/bin/bash", "readline+0x1g")
    with pytest.raises(ElfError):
        resolve("/bin/bash", "no_such_function_xyz")


def test_without_capstone_only_the_size_is_checked():
    """capstone is an optional extra: with its import failing for real, an offset
    inside the function passes and says so, and one outside still fails."""
    size = next(f.size for f in functions("/bin/bash") if f.name == "readline")
    code = ("import sys; sys.modules['capstone'] = None\n"
            "from pycore.elf.symbols import resolve, check_offset, find_function\n"
            "from pycore.errors import ElfError\n"
            "f = find_function('/bin/bash', 'readline')\n"
            "print(resolve('/bin/bash', 'readline+1'))\n"
            "print(check_offset('/bin/bash', f, 1))\n"
            "try:\n    resolve('/bin/bash', 'readline+100000')\nexcept ElfError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "('readline', 1)",
        "inside the function's size only (install capstone, pip install 'pycore-bpf[disasm]', "
        "to check instruction boundaries)",
        f"offset 0x186a0 is outside readline ({size} bytes) "
        "(capstone not installed: offsets are checked against the size only)",
    ]


def test_parse_spec():
    assert parse_spec("readline") == ("readline", None)
    assert parse_spec("readline+0x10") == ("readline", 16)
    assert parse_spec("0x1234") == ("", 0x1234)
    assert parse_spec("010") == ("", 10)
    assert parse_spec("f+010") == ("f", 10)
    assert parse_spec("operator+") == ("operator+", None)
    assert parse_spec("A::operator+(int)+4") == ("A::operator+(int)", 4)
    with pytest.raises(ElfError, match="bad offset '4x'"):
        parse_spec("f+4x")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("abx0123456789+:_<>()*- "), max_size=30) | st.text(max_size=30))
def test_fuzz_parse_spec(spec):
    try:
        name, off = parse_spec(spec)
    except ElfError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(name, str) and (off is None or off >= 0)


def test_cli_offset_errors_are_one_line():
    starts = objdump_offsets("/bin/bash", "readline")
    size = next(f.size for f in functions("/bin/bash") if f.name == "readline")
    bad = next(off for off in range(1, starts[-1]) if off not in starts)
    before, after = max(s for s in starts if s < bad), min(s for s in starts if s > bad)
    for spec, msg in ((f"readline+{bad}", f"{bad:#x} is not on an instruction boundary "
                       f"of readline (nearest: +{before:#x}, +{after:#x})"),
                      ("readline+0x1g", "'readline+0x1g': bad offset '0x1g'"),
                      ("readline+100000", f"offset 0x186a0 is outside readline ({size} bytes)")):
        r = subprocess.run([sys.executable, "-m", "pycore", "list", f"uprobe:/bin/bash:{spec}"],
                           capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"pycore: error: {msg}\n")


# -- Rust ------------------------------------------------------------------

@pytest.fixture(scope="module")
def rust_bins(tmp_path_factory) -> dict[str, str]:
    d = str(tmp_path_factory.mktemp("rust"))
    return {m: build_rust_target(d, m) for m in ("v0", "legacy")}


def test_rust_names_listed_demangled(rust_bins, capsys):
    v0, legacy = rust_bins["v0"], rust_bins["legacy"]
    assert main(["list", f"uprobe:{v0}:*Counter*"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"uprobe:{v0}:<counter::Counter>::bump"]
    assert main(["list", "-vv", f"uprobe:{v0}:*Counter*"]) == 0   # -v: DWARF's parameters (std's only here)
    detail = capsys.readouterr().out.splitlines()[1]
    assert re.fullmatch(r"    address: 0x[0-9a-f]+  size: \d+  mangled: _RNvMCs\w+_7counterNtB\w+_7Counter4bump",
                        detail), detail
    assert main(["list", "-vv", f"uprobe:{legacy}:*Counter*"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"uprobe:{legacy}:counter::Counter::bump"
    assert re.search(r"mangled: _ZN7counter7Counter4bump17h[0-9a-f]{16}E$", out[1])
    # every v0 symbol of the binary is shown demangled (std is legacy-mangled in Debian's rustc)
    assert main(["list", f"uprobe:{v0}:*"]) == 0
    names = [line.split(":", 2)[2] for line in capsys.readouterr().out.splitlines()]
    assert sum(1 for f in functions(v0) if f.name.startswith("_R")) >= 5
    assert not [n for n in names if n.startswith(("_R", "_ZN"))]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("mangling", ["v0", "legacy"])
def test_rust_attach_by_mangled_name(rust_bins, mangling):
    from pycore.native.object import BpfObject
    from pycore.native.shipped import object_path
    from pycore.native.ringbuf import RingBuffer

    path = rust_bins[mangling]
    (bump,) = [f for f in functions(path) if f.demangled.endswith("Counter::bump") or
               f.demangled == "<counter::Counter>::bump"]
    assert bump.name != bump.demangled
    assert resolve(path, bump.demangled) == (bump.name, 0)   # the shown name attaches too
    n = 13
    with BpfObject(object_path("test_uprobe_args")) as obj:
        obj.load()
        attach_uprobe(obj.programs["uprobe_args"], path, bump.name)
        proc = subprocess.Popen([path, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate("g", timeout=30)
        events = [(e.arg1) for e in RingBuffer(obj, "events", event="uprobe_args_event").consume()
                  if e.pid == proc.pid]
    assert proc.returncode == 0 and out.split()[0] == str(sum(range(n)))
    # bump(&mut self, by): one hit per call, `by` in the second argument register
    assert events == list(range(n))


LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@pytest.mark.skipif(not os.path.exists(LIBC), reason="no libc at Debian's path")
def test_one_line_a_name_as_bpftrace(capsys):
    """A name at two addresses (libc's glob: glob@GLIBC_2.2.5 and glob@@GLIBC_2.27; with libc6-dbg,
    static functions of one name in several units) is one line, as in bpftrace's listing; -vv shows
    each address."""
    assert main(["list", f"uprobe:{LIBC}:glob"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"uprobe:{LIBC}:glob"]
    assert len([f for f in functions(LIBC) if f.name == "glob"]) == 2
    assert main(["list", "-vv", f"uprobe:{LIBC}:glob"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"uprobe:{LIBC}:glob\n") == 2 and out.count("address: 0x") == 2
