"""Pass one in two processes (btf/splitwalk.py): whatever the guessed start,
the records and columns are the one-process walk's, bad BTF gets the same
error, and the helper process is always reaped."""

from __future__ import annotations

import os

import pytest

from btf import BtfError, splitwalk
from btf.spec import Spec, read_file

VMLINUX = "/sys/kernel/btf/vmlinux"


@pytest.fixture(scope="module")
def vmlinux() -> bytes:
    if not os.path.exists(VMLINUX):
        pytest.fail(f"{VMLINUX} is missing (kernel without CONFIG_DEBUG_INFO_BTF?)")
    return read_file(VMLINUX)


@pytest.fixture(scope="module")
def serial(vmlinux) -> Spec:
    return Spec(vmlinux, cache=False)


def _columns(spec: Spec) -> tuple:
    return (spec._offsets, spec._names_column(), spec._kinds_column(), spec._sizes_column())  # noqa: SLF001


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            found.append(int(pid))
    return found


def test_two_processes_give_the_one_process_index(vmlinux, serial):
    words = serial._words  # noqa: SLF001
    middle = splitwalk.guess_start(words, len(serial.strings._data))  # noqa: SLF001
    # the guess is a real record start, so the helper's half is the one used
    assert middle is not None and middle in serial._offsets  # noqa: SLF001
    assert _columns(Spec(vmlinux, cache=False, jobs=2)) == _columns(serial)
    assert _children() == []


def test_any_start_gives_the_same_records(serial):
    words, offsets = serial._words, serial._offsets  # noqa: SLF001
    want = ((offsets, *serial._gather(0, 1, 2)), len(words))  # noqa: SLF001
    record = offsets[len(offsets) // 2]
    # a record start, the words inside one, the last record, and past it
    for middle in (record, record + 1, record + 2, offsets[-1], len(words) - 1):
        got = splitwalk.walk_in_two(words, middle, Spec._walk, Spec._gather_at)  # noqa: SLF001
        assert got == want, middle
    assert _children() == []


@pytest.mark.parametrize("where", [0.3, 0.9])
def test_bad_btf_gets_the_one_process_error(vmlinux, serial, where):
    """An invalid kind before the split point, or in the helper's half."""
    at = serial._offsets[int(len(serial._offsets) * where)]  # noqa: SLF001
    info = serial._type_start + 4 * at + 4  # noqa: SLF001
    bad = bytearray(vmlinux)
    bad[info + 3] = 0x1F  # kind 31
    errors = []
    for jobs in (1, 2):
        with pytest.raises(BtfError) as e:
            Spec(bytes(bad), cache=False, jobs=jobs)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "unknown kind 31" in errors[0]
    assert _children() == []


def test_no_plausible_start_means_no_guess():
    from array import array

    assert splitwalk.guess_start(array("I", bytes(4 * 9000)), 100) is None  # kind 0 everywhere


def test_no_process_to_fork_means_one_walk(vmlinux, serial, monkeypatch):
    """fork failing (EAGAIN under a process limit) is not an error: the
    walk is made here, whole."""
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert _columns(Spec(vmlinux, cache=False, jobs=2)) == _columns(serial)
