"""Probe pattern parsing (pycore.listing.patterns): accepted forms, rejections, fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pycore.listing.patterns import (
    PROBE_KINDS, PROCESS_EXE, PatternError, ProbePattern, all_patterns, glob_to_regex, parse_pattern,
    process_patterns,
)


@pytest.mark.parametrize("text, expected", [
    ("kfunc:vfs_*", [ProbePattern("kfunc", "vfs_*")]),
    ("fentry:vfs_read", [ProbePattern("kfunc", "vfs_read")]),
    ("f:vfs_read", [ProbePattern("kfunc", "vfs_read")]),
    ("kfunc:vmlinux:vfs_*", [ProbePattern("kfunc", "vfs_*", "vmlinux")]),
    ("kretfunc:fget", [ProbePattern("kretfunc", "fget")]),
    ("fexit:ext4:ext4_*", [ProbePattern("kretfunc", "ext4_*", "ext4")]),
    ("tracepoint:sched:sched_switch", [ProbePattern("tracepoint", "sched:sched_switch")]),
    ("t:syscalls:sys_enter_*", [ProbePattern("tracepoint", "syscalls:sys_enter_*")]),
    ("tracepoint:sched*", [ProbePattern("tracepoint", "sched*")]),
    ("tracepoint:*:sched_switch", [ProbePattern("tracepoint", "*:sched_switch")]),
    ("rawtracepoint:sched_switch", [ProbePattern("rawtracepoint", "sched_switch")]),
    ("tp_btf:sched_switch", [ProbePattern("rawtracepoint", "sched_switch")]),
    ("rawtracepoint:vmlinux:sched_*", [ProbePattern("rawtracepoint", "sched_*", "vmlinux")]),
    ("kprobe:do_sys_open?", [ProbePattern("kprobe", "do_sys_open?")]),
    ("kretprobe:mod:fn", [ProbePattern("kretprobe", "fn", "mod")]),
    ("struct dentry", [ProbePattern("struct", "dentry")]),
    ("  union   *qstr*  ", [ProbePattern("union", "*qstr*")]),
    ("enum pid_type", [ProbePattern("enum", "pid_type")]),
    ("typedef u32", [ProbePattern("typedef", "u32")]),
    ("kfunc:foo.isra.0", [ProbePattern("kfunc", "foo.isra.0")]),
    ("uprobe:*", [ProbePattern("uprobe", "*", PROCESS_EXE)]),        # -p PID: its executable
    ("uretprobe:*", [ProbePattern("uretprobe", "*", PROCESS_EXE)]),
    ("uprobe:*:malloc", [ProbePattern("uprobe", "malloc", "")]),     # -p PID: every mapped object
    ("uprobe:/bin/bash:read*", [ProbePattern("uprobe", "read*", "/bin/bash")]),
    ("usdt:*", [ProbePattern("usdt", "*:*", "")]),
])
def test_accepted(text: str, expected: list[ProbePattern]) -> None:
    assert parse_pattern(text) == expected


def test_wildcard_probe_type_expands() -> None:
    kinds = [p.kind for p in parse_pattern("k*:vfs_read")]
    assert kinds == ["kfunc", "kretfunc", "kprobe", "kretprobe"]
    # A shape that only some types take keeps those types.
    assert [p.kind for p in parse_pattern("*:sched:sched_switch")] == [
        "kfunc", "kretfunc", "kprobe", "kretprobe", "rawtracepoint", "tracepoint"]
    assert [p.kind for p in parse_pattern("*:a:b")][-1] == "tracepoint"


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("   ", "empty"),
    ("vfs_read", "no probe type"),
    ("foo:bar", "unknown probe type"),
    ("kfunc:", "empty"),
    ("kfunc:a:b:c", "kfunc:MODULE:NAME"),
    ("tracepoint:sched_switch", "CATEGORY:NAME"),
    ("tracepoint:a:b:c", "CATEGORY:NAME"),
    ("kfunc:vfs read", "spaces"),
    ("kfunc:vfs/read", "bad character"),
    ("kfunc:vfs_{read,write}", "bad character"),
    ("struct", "struct NAME"),
    ("struct a b", "struct NAME"),
    ("struct a-b", "not a C identifier"),
    ("struct foo;rm", "bad character"),
    ("zz*:x", "no probe type matches"),
    ("kfunc:\x00", "bad character"),
    ("kfunc:" + "a" * 5000, "at most"),
])
def test_rejected(text: str, message: str) -> None:
    with pytest.raises(PatternError, match=re.escape(message)):
        parse_pattern(text)


def test_process_patterns_are_bpftraces_order() -> None:
    """bpftrace -l -p PID: the executable's functions, then every mapped object's USDT probes."""
    assert process_patterns() == [ProbePattern("uprobe", "*", PROCESS_EXE), ProbePattern("usdt", "*:*", "")]


@pytest.mark.parametrize("text, path, func", [
    ("/usr/bin/python3.11", "/usr/bin/python3.11", "*"),
    ("./server", "./server", "*"),
    ("./server:handle", "./server", "handle"),
    ("lib/libfoo.so", "lib/libfoo.so", "*"),
])
def test_a_file_suggests_usdt_and_uprobe(text: str, path: str, func: str) -> None:
    with pytest.raises(PatternError) as e:
        parse_pattern(text, available=lambda: {"tracepoint"})
    assert f"usdt:{path} " in str(e.value) and f"uprobe:{path}:{func} " in str(e.value)
    assert "kfunc" not in str(e.value) and "tracepoint" not in str(e.value)


def _never() -> set[str]:
    raise AssertionError("available() asked for a pattern that parses (it loads trial programs)")


@pytest.mark.parametrize("have, suggested, not_suggested", [
    ({"tracepoint", "rawtracepoint"}, ["tracepoint:*:vfs_read", "rawtracepoint:vfs_read"], ["kfunc:", "kprobe:"]),
    ({"tracepoint", "kprobe", "rawtracepoint"}, ["kprobe:vfs_read", "tracepoint:*:vfs_read"], ["kfunc:"]),
    ({"kfunc", "kprobe", "tracepoint"}, ["kfunc:vfs_read", "kprobe:vfs_read"], ["rawtracepoint:"]),
])
def test_refusals_suggest_what_the_kernel_has(have: set[str], suggested: list[str], not_suggested: list[str]) -> None:
    with pytest.raises(PatternError) as e:
        parse_pattern("vfs_read", available=lambda: have)
    assert all(s in str(e.value) for s in suggested) and not any(s in str(e.value) for s in not_suggested)
    with pytest.raises(PatternError, match="unknown probe type") as e:
        parse_pattern("bogus:x", available=lambda: have)
    listed = str(e.value).rpartition(": ")[2].rstrip(")").split(", ")
    assert [k for k in listed if k in PROBE_KINDS] == [k for k in PROBE_KINDS if k in have]
    assert parse_pattern("kfunc:vfs_read", available=_never)  # asked only to word a refusal


def test_pattern_error_is_a_value_error() -> None:
    assert issubclass(PatternError, ValueError)


def test_non_string_is_a_pattern_error() -> None:
    with pytest.raises(PatternError):
        parse_pattern(None)  # type: ignore[arg-type]


def test_all_patterns_cover_every_probe_type() -> None:
    assert [p.kind for p in all_patterns()] == list(PROBE_KINDS)
    assert all(p.target == "*" and p.module is None for p in all_patterns())


def test_matching() -> None:
    p = parse_pattern("tracepoint:sched*")[0]
    assert p.matches("sched:sched_switch") and not p.matches("irq:sched_x")
    k = parse_pattern("kfunc:vmlinux:vfs_?ead")[0]
    assert k.matches("vfs_read") and not k.matches("vfs_write")
    assert k.matches_module("vmlinux") and not k.matches_module("ext4")
    assert parse_pattern("kfunc:x")[0].matches_module("anything")


def test_glob_to_regex_stays_inside_one_string() -> None:
    rx = re.compile(b"(?<![^\x00])" + glob_to_regex("vfs_*") + b"(?=\x00)")
    table = b"\x00vfs_read\x00other\x00vfs_write\x00"
    assert [m.group() for m in rx.finditer(table)] == [b"vfs_read", b"vfs_write"]
    assert re.fullmatch(glob_to_regex("a.b?"), b"a.bc")
    assert not re.fullmatch(glob_to_regex("a.b"), b"axb")  # '.' is literal


@settings(max_examples=3000, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_only_pattern_error(text: str) -> None:
    try:
        patterns = parse_pattern(text)
    except PatternError:
        return
    assert patterns
    for p in patterns:
        assert isinstance(p, ProbePattern)
        re.compile(p.name_regex())
        p.matches("x")


_ALPHABET = "abc_*?:.- \tkfunctracepoint"


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40))
def test_fuzz_pattern_like_text(text: str) -> None:
    try:
        patterns = parse_pattern(text)
    except PatternError:
        return
    for p in patterns:
        re.compile(p.name_regex())
