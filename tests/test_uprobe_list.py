"""uprobe: listing from .symtab/.dynsym with demangling, and symbol+offset checks."""

from __future__ import annotations

import pytest

from pycore.cli import main
from pycore.elfsyms import demangle, functions, resolve
from pycore.stapsdt import UsdtError

LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def test_list_bash_readline(capsys):
    assert main(["list", "uprobe:/bin/bash:*readline*"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "uprobe:/bin/bash:readline" in out


def test_demangle():
    assert demangle("_ZSt9terminatev") == "std::terminate()"
    assert demangle("_ZN4core3fmt5write17h0123456789abcdefE") == "core::fmt::write"
    assert demangle("main") == "main"
    assert demangle("_Znotvalid") == "_Znotvalid"


def test_cxx_functions_keep_mangled_name():
    fs = [f for f in functions(LIBSTDCXX) if f.demangled == "std::terminate()"]
    assert fs and fs[0].name == "_ZSt9terminatev"


def test_resolve_offsets():
    assert resolve("/bin/bash", "readline") == ("readline", 0)
    assert resolve("/bin/bash", "readline+4") == ("readline", 4)
    assert resolve("/bin/bash", "0x1234") == ("", 0x1234)
    with pytest.raises(UsdtError):
        resolve("/bin/bash", "readline+100000")
    with pytest.raises(UsdtError):
        resolve("/bin/bash", "no_such_function_xyz")
