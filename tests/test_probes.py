"""Probe pattern parsing (pycore.listing.patterns): accepted forms, rejections, fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pycore.listing.patterns import (
    PROBE_KINDS, PatternError, ProbePattern, all_patterns, glob_to_regex, parse_pattern,
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
