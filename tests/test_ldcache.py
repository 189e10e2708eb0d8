"""pycore.elf.ldcache: libraries by name from /etc/ld.so.cache, as bpftrace's uprobe:libc:... finds them.

Checked against the real cache and glibc's own reader of it (``ldconfig -p``), against
bpftrace 0.17's choice of library, and fuzzed: a damaged cache gives CacheError (and
find_library None), never another exception.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.elf.ldcache import LD_SO_CACHE, CacheError, entries, find_library
from pycore.elf.usdt import resolve_path
from pycore.errors import PycoreError

FUZZ = settings(max_examples=300, deadline=5000, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
REAL = open(LD_SO_CACHE, "rb").read() if os.path.exists(LD_SO_CACHE) else b""


def test_entries_are_ldconfigs():
    """Every (name, path) ldconfig -p prints, in its order, for this machine's libc6 libraries."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    theirs = re.findall(r"^\t(\S+) \(([^)]*)\)(?: OS ABI: [^=]*)? => (\S+)$", out, re.M)
    assert len(theirs) > 50
    ours = entries(REAL)
    assert [(name, path) for _, name, path in ours] == [(name, path) for name, _, path in theirs]


@pytest.mark.parametrize("name,soname", [("libc", "libc.so.6"), ("libssl", "libssl.so.3"), ("libm", "libm.so.6"),
                                         ("libc.so.6", "libc.so.6"), ("libz", "libz.so.1")])
def test_find_library(name, soname):
    path = find_library(name)
    assert path is not None and os.path.basename(path) == soname and os.path.exists(path)


def test_same_library_as_bpftrace():
    bpftrace = shutil.which("bpftrace")
    assert bpftrace, "bpftrace is installed by ./dev.sh"
    for name, func in (("libc", "getaddrinfo"), ("libssl", "SSL_read"), ("libm", "cos")):
        out = subprocess.run([bpftrace, "-l", f"uprobe:{name}:{func}"], capture_output=True, text=True).stdout
        assert out.strip() == f"uprobe:{find_library(name)}:{func}"


def test_not_found():
    assert find_library("c") is None            # bpftrace: "lib" is part of the name
    assert find_library("libno-such-library") is None
    with pytest.raises(PycoreError, match="no-such-thing: not found on PATH nor in the dynamic linker's cache"):
        resolve_path("no-such-thing")


def test_a_cache_that_is_not_one(tmp_path):
    bad = tmp_path / "ld.so.cache"
    bad.write_bytes(b"ld.so-1.7.0\0" + b"\xff" * 64)
    assert find_library("libc", str(bad)) is None
    with pytest.raises(CacheError, match="not a glibc ld.so.cache"):
        entries(bad.read_bytes())
    with pytest.raises(CacheError, match="cut short"):
        entries(REAL[:REAL.find(b"glibc-ld.so.cache1.1") + 60])


@FUZZ
@given(st.data())
def test_fuzz_damaged_cache(data):
    blob = bytearray(REAL)
    for _ in range(data.draw(st.integers(1, 16))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    try:
        for flags, name, path in entries(bytes(blob[:cut])):
            assert isinstance(flags, int) and isinstance(name, str) and isinstance(path, str)
    except CacheError as e:
        assert "\n" not in str(e)


@FUZZ
@given(st.binary(max_size=512))
def test_fuzz_any_bytes(blob):
    try:
        entries(b"glibc-ld.so.cache1.1" + blob)
    except CacheError:
        pass
