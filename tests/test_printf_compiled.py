"""compile_printf: printf's format compiled once (pycore trace's fast path) prints what format_printf prints.

format_printf reads bpftrace 0.17's rules off each call (tests/test_trace_output.py checks it against
bpftrace); the compiled form must give the same text for every format it accepts, on any value.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pycore.lang.output.cformat import compile_printf, format_printf

SPECS = st.builds(
    lambda left, width, prec, length, conv: f"%{left}{width}{prec}{length}{conv}",
    st.sampled_from(["", "-"]),
    st.sampled_from(["", "0", "5", "05", "12", "020"]),
    st.sampled_from(["", ".", ".0", ".3", ".10"]),
    st.sampled_from(["", "hh", "h", "l", "ll", "j", "z", "t"]),
    st.sampled_from(["d", "u", "x", "X", "o", "p", "s", "c", "r", "rx", "i"]),
)
TEXT = st.text(st.sampled_from(list("ab %\\n\t\0é-.0123456789dslx")), max_size=6)
VALUES = st.one_of(
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.sampled_from([0, 1, -1, 255, 256, 1 << 31, -(1 << 31), (1 << 32) - 1, 1 << 63]),
    st.text(max_size=12),
    st.text(st.characters(max_codepoint=127), max_size=20),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.tuples(TEXT, SPECS), max_size=4), TEXT, st.lists(VALUES, max_size=5))
def test_compiled_equals_format_printf(pieces, tail, values):
    fmt = "".join(a + b for a, b in pieces) + tail
    compiled = compile_printf(fmt)
    if compiled is not None:
        assert compiled(values) == format_printf(fmt, values), fmt


def test_common_formats_compile():
    """The formats of the lab's scripts and bpftrace's tools take the fast path (else a flood of
    printf is ~10x slower and Ctrl-C waits for it)."""
    for fmt in ("%d %s\n", "contended time: %lld\n", "%-16s %-6d %s\n", "%-8d %-16s %4d %3d %s\n",
                "%s lock %p blocked %lld ns (flags 0x%x)\n", "%5.2d%% of %lu\n", "%llx %lX %o %hhu %hd\n"):
        assert compile_printf(fmt) is not None, fmt


def test_general_path_formats():
    """What the compiled form leaves to format_printf, always: %c (a NUL ends the piece), buffers,
    a precision of 0 on an integer (C prints no digit for 0), a '%' snprintf would read."""
    for fmt in ("%c\n", "%r\n", "%rx\n", "%.0d\n", "%5.0x\n", "50% of %d\n", "%5.3p\n", "%05p\n", "a\0b%d\n"):
        assert compile_printf(fmt) is None, fmt
