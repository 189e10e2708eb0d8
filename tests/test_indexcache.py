"""The on-disk cache of pass one (btf/indexcache.py): used when sound,
ignored when damaged or from another format, never changes an answer."""

from __future__ import annotations

import os

import pytest

from btf import indexcache
from btf.spec import Spec

VMLINUX = "/sys/kernel/btf/vmlinux"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    if not os.path.exists(VMLINUX):
        pytest.fail(f"{VMLINUX} is missing (kernel without CONFIG_DEBUG_INFO_BTF?)")
    monkeypatch.setenv("PYCORE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _columns(spec: Spec) -> tuple:
    return (list(spec.offsets), list(spec.name_column()), list(spec.info_column()),
            list(spec.size_column()))


def test_cache_is_written_then_read_and_agrees(cache_dir):
    fresh = _columns(Spec.from_file(VMLINUX, cache=False))
    assert not list(cache_dir.iterdir())
    first = Spec.from_file(VMLINUX)
    files = list(cache_dir.iterdir())
    assert len(files) == 1 and files[0].read_bytes().startswith(indexcache.MAGIC)
    second = Spec.from_file(VMLINUX)
    assert second._sizes is not None  # noqa: SLF001 - loaded, not gathered
    assert _columns(first) == _columns(second) == fresh


@pytest.mark.parametrize("damage", ["flip", "truncate", "old-format"])
def test_damaged_cache_is_ignored(cache_dir, damage):
    fresh = _columns(Spec.from_file(VMLINUX, cache=False))
    Spec.from_file(VMLINUX)
    (path,) = cache_dir.iterdir()
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        for at in range(12, len(raw), len(raw) // 700):  # hit the spot checks
            raw[at] ^= 0x5A
    elif damage == "truncate":
        raw = raw[:len(raw) // 2]
    else:
        raw[:8] = b"PYBTFIX1"
    path.write_bytes(bytes(raw))
    assert _columns(Spec.from_file(VMLINUX)) == fresh


def test_off_means_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    Spec.from_file(VMLINUX)
    assert not any(tmp_path.rglob("*.idx"))
