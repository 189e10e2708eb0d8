"""pycore.lang.macros: integer macros of a script's # lines, through pcpp and the system's headers.

The values are checked against the C compiler's own preprocessor (gcc -E -dM on the same
lines), and the reader is fuzzed: a script's head is the user's text, so whatever it holds
gives a value, None or MacroError, never another exception.
"""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.lang.macros import MacroError, Macros, head_of, include_dirs
from pycore.lang.parser import parse

FUZZ = settings(max_examples=200, deadline=10000, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

HEAD = """\
#include <sys/socket.h>
#include <fcntl.h>
#include <linux/sched.h>
#define BIT(n) (1UL << (n))
#define MASK (0x0fULL | 0x30)
"""
NAMES = ["AF_INET", "AF_INET6", "AF_UNIX", "PF_PACKET", "SOMAXCONN", "O_CREAT", "O_NONBLOCK", "O_CLOEXEC",
         "CLONE_VM", "CLONE_THREAD", "SCHED_FIFO", "MASK"]


def test_values_are_the_c_compilers(tmp_path):
    """Each value as a C program built by gcc from the same lines prints it."""
    src = tmp_path / "values.c"
    src.write_text("#define BPFTRACE_HAVE_BTF 1\n" + HEAD + "#include <stdio.h>\nint main(void) {\n"
                   + "".join(f'    printf("%lld\\n", (long long)({n}));\n' for n in NAMES) + "    return 0;\n}\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "values"), str(src)], check=True)
    theirs = subprocess.run([str(tmp_path / "values")], capture_output=True, text=True, check=True).stdout.split()
    ours = Macros(HEAD)
    assert [ours.value(n) for n in NAMES] == [int(v) for v in theirs]
    assert ours.missing == []


def test_bpftrace_have_btf_is_defined():
    head = "#ifndef BPFTRACE_HAVE_BTF\n#define V 2\n#include <no/such.h>\n#else\n#define V 1\n#endif\n"
    m = Macros(head)
    assert m.value("V") == 1
    assert m.missing == []          # the other branch's include is not read


def test_devices_are_not_headers():
    """#include of a device or a huge file is passed over (listed as missing), not read forever."""
    m = Macros('#include "/dev/zero"\n#include </dev/stdin>\n#define A 1\n')
    assert m.value("A") == 1
    assert m.missing == ["/dev/zero", "/dev/stdin"]


def test_not_defined_and_not_integers():
    m = Macros('#define S "x"\n#define F(x) (x)\n#define E\n#define Z (1/0)\n#define SELF SELF\n')
    assert m.value("UNDEFINED") is None
    for name, why in (("S", "not an integer constant"), ("F", "not an integer constant"), ("E", "expands to ''"),
                      ("Z", "does not evaluate to an integer"), ("SELF", "not an integer constant")):
        with pytest.raises(MacroError, match=why):
            m.value(name)


def test_head_of_keeps_order():
    program = parse('#!/usr/bin/env bpftrace\n#include <a.h>\n#define X 1\n#include "b.h"\nBEGIN { }')
    assert head_of(program) == '#!/usr/bin/env bpftrace\n#include <a.h>\n#define X 1\n#include "b.h"\n'
    assert head_of(parse("BEGIN { }")) == ""


def test_include_dirs_are_gccs():
    out = subprocess.run(["gcc", "-E", "-v", "-x", "c", "/dev/null"], capture_output=True, text=True).stderr
    listed = out.split("#include <...> search starts here:")[1].split("End of search list.")[0].split()
    assert include_dirs() == [d for d in listed if not d.endswith("include-fixed")][:len(include_dirs())]


LINE = st.one_of(
    st.sampled_from(["#define A 1", "#define B (A << 3)", "#if A", "#ifdef B", "#else", "#endif", "#elif 0",
                     "#include <sys/socket.h>", "#include <nope.h>", '#include "x"', "#undef A", "#define C(x) x",
                     "#define D (1/0)", "#define E 0x", "#pragma once", "#error boom", "#", "#if (", "#define"]),
    st.text(alphabet="#defin ABC()<>/*-+0123456789\"'\\x", max_size=30),
)


@FUZZ
@given(st.lists(LINE, max_size=8), st.sampled_from(["A", "B", "C", "D", "E", "AF_INET", "Z"]))
def test_fuzz_heads(lines, name):
    try:
        v = Macros("\n".join(lines) + "\n").value(name)
    except MacroError as e:
        assert "\n" not in str(e)
    else:
        assert v is None or isinstance(v, int)
