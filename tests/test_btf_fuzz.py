"""Bad BTF must fail with BtfError and nothing else, and never hang.

Every blob goes through the whole reader: parse, decode every type, search,
render each type's C declaration and definition, sizeof/alignof, the raw
dump and the vmlinux.h writer.  Any exception but BtfError fails the test, and so does an example
that takes longer than HANG_SECONDS of CPU time (an ITIMER_PROF timer: a
hypothesis deadline cannot interrupt a loop, and CPU time does not count
the waits of a loaded CI machine).
"""

from __future__ import annotations

import io
import shutil
import signal
import struct
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from btf import BtfError, Kind, Spec
from btf.cdump import write_header
from btf.cformat import CFormatter
from btf.layout import alignof, is_packed, sizeof, skip
from btf.raw import dump_raw, format_type
from btfbuild import Builder
from test_btf_kinds import all_kinds

HANG_SECONDS = 2.0
# derandomize: the same examples on every run, so CI failures reproduce.
# The deadline is wall time and generous; time_limit() is the real bound.
FUZZ = settings(max_examples=300, deadline=5000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MORE = settings(FUZZ, max_examples=1000)


class Hang(Exception):
    """Not a BtfError: an example that runs too long fails the test."""


@contextmanager
def time_limit(seconds: float = HANG_SECONDS):
    def alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def _only_btf_error(fn, *args):
    try:
        return fn(*args)
    except BtfError:
        return None


def exercise_spec(spec: Spec) -> None:
    """Touch everything a caller can reach from a parsed spec."""
    fmt = CFormatter()
    for type_id in range(len(spec) + 2):
        _only_btf_error(spec.kind, type_id) if type_id < len(spec) else None
        _only_btf_error(spec.name, type_id) if type_id < len(spec) else None
        t = _only_btf_error(spec.type, type_id)
        if t is None:
            continue
        repr(t)
        _only_btf_error(fmt.declaration, t, "x")
        _only_btf_error(fmt.definition, t)
        _only_btf_error(sizeof, t)
        _only_btf_error(alignof, t)
        _only_btf_error(skip, t)
        _only_btf_error(format_type, spec, t)
        if t.kind in (Kind.STRUCT, Kind.UNION):
            _only_btf_error(is_packed, t)
            for m in t.members:
                _only_btf_error(lambda: m.type)
        for ref in ("type", "return_type"):
            _only_btf_error(lambda: getattr(t, ref, None))
    _only_btf_error(spec.ids_named, "int")
    _only_btf_error(spec.ids_matching, rb"[a-z_]+", [Kind.STRUCT, Kind.INT])
    _only_btf_error(dump_raw, spec, io.StringIO())
    _only_btf_error(write_header, spec, io.StringIO())


def exercise(blob: bytes, base: Spec | None = None, seconds: float = HANG_SECONDS) -> None:
    with time_limit(seconds):
        spec = _only_btf_error(Spec, blob, base)
        if spec is not None:
            exercise_spec(spec)


def _all_kinds_blob(byteorder: str = "little", **build) -> bytes:
    b = Builder(byteorder=byteorder)
    all_kinds(b)
    return b.build(**build)


GOOD = _all_kinds_blob()
GOOD_BE = _all_kinds_blob("big", hdr_len=32)


def _patch_header(blob: bytes, **fields: int) -> bytes:
    names = ("hdr_len", "type_off", "type_len", "str_off", "str_len")
    values = dict(zip(names, struct.unpack_from("<5I", blob, 4)))
    values.update(fields)
    return blob[:4] + struct.pack("<5I", *(values[n] for n in names)) + blob[24:]


# -- deterministic sweeps ----------------------------------------------


@pytest.mark.parametrize("blob", [GOOD, GOOD_BE], ids=["little", "big"])
def test_every_truncation(blob):
    for n in range(len(blob)):
        exercise(blob[:n])


def test_type_section_cut_at_every_word():
    """Shorten type_len word by word: records cut in the middle, and
    references to ids that no longer exist."""
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", GOOD, 4)
    for cut in range(0, type_len + 1, 4):
        exercise(_patch_header(GOOD, type_len=cut))
    for cut in range(0, str_len + 1):
        exercise(_patch_header(GOOD, str_len=cut))


def test_string_section_without_nuls():
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", GOOD, 4)
    s = hdr_len + str_off
    exercise(GOOD[:s] + b"\xff" * str_len)
    exercise(GOOD[:s] + b"\0" + b"\xff\xfe" * (str_len // 2))


def test_cycles_and_long_chains():
    """Reference cycles C cannot express, and chains deeper than any kernel's."""
    b = Builder()
    i = b.int("int", 4, signed=True)
    u = b.int("unsigned int", 4)
    n = b.next_id
    b.typedef("loop", n)                     # typedef to itself
    n = b.next_id
    b.const(n + 1), b.volatile(n + 2), b.typedef("t", n)  # const -> volatile -> typedef -> const
    n = b.next_id
    b.struct("self", 8, [("me", n, 0), ("me2", n, 32)])   # struct containing itself by value
    n = b.next_id
    b.struct("", 8, [("a", n, 0), ("b", n, 0)])            # anonymous, by value, twice
    n = b.next_id
    b.array(n, u, 4)                                        # array of itself
    n = b.next_id
    b.func_proto(i, [("f", n + 1), ("g", n + 1)]), b.ptr(n)  # proto taking a pointer to itself
    n = b.next_id
    b.func_proto(n + 1, []), b.ptr(n)                       # returning a pointer to itself
    n = b.next_id
    b.struct("", 8, [("fn", n + 1, 0)]), b.ptr(n + 2), b.func_proto(i, [("s", n)])  # anon struct <-> proto
    n = b.next_id
    b.var("v", n), b.decl_tag("tag", n + 1, 0), b.type_tag("tt", n + 2)
    n = b.next_id
    b.func("f", n), b.datasec(".d", 4, [(n + 1, 0, 4)])
    n = b.next_id
    b.record(Kind.DATASEC, ".e", 1, size_or_type=4, extra=[n, 0, 4])
    # Long chains: 2000 consts, 2000 pointers, 500 nested arrays.
    prev = i
    for _ in range(2000):
        prev = b.const(prev)
    for _ in range(2000):
        prev = b.ptr(prev)
    for _ in range(500):
        prev = b.array(prev, u, 2)
    b.typedef("deep", prev)
    exercise(b.build(), seconds=10)
    exercise(_rebuilt_big(b), seconds=10)


def test_dag_of_anonymous_structs():
    """Each anonymous struct holds the next one twice: printed inline, the
    body doubles at every level (2**24 members), so the formatter must give up."""
    b = Builder()
    i = b.int("int", 4, signed=True)
    first = b.next_id
    for k in range(24):
        b.struct("", 8, [("l", first + k + 1, 0), ("r", first + k + 1, 0)])
    b.struct("", 4, [("leaf", i, 0)])
    b.struct("top", 8, [("dag", first, 0)])
    # ~12 types each stop at CFormatter's MAX_WORK, twice (declaration, definition).
    exercise(b.build(), seconds=10)
    with pytest.raises(BtfError, match="members and parameters"):
        CFormatter().definition(Spec(b.build()).type(first))


def _rebuilt_big(b: Builder) -> bytes:
    """The same records big-endian: swap every word of the type section."""
    blob = b.build()
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", blob, 4)
    words = struct.unpack_from(f"<{type_len // 4}I", blob, hdr_len)
    header = struct.pack(">HBBIIIII", 0xEB9F, 1, 0, hdr_len, type_off, type_len, str_off, str_len)
    return header + struct.pack(f">{len(words)}I", *words) + blob[hdr_len + type_len:]


def test_split_on_bad_base_references():
    base_b = Builder()
    all_kinds(base_b)
    base = Spec(base_b.build())
    split = Builder(base=base_b)
    split.struct("m", 8, [("x", 10_000, 0), ("y", 1, 32)])
    split.record(Kind.TYPEDEF, name=1 << 30, size_or_type=1)   # name past both tables
    split.ptr(split.next_id + 5)
    exercise(split.build(), base)


# -- hypothesis ----------------------------------------------------------


def _split_pair() -> tuple[Spec, bytes]:
    base_b = Builder()
    n = all_kinds(base_b)
    split = Builder(base=base_b)
    sid = split.struct("m", 24, [("s", n.s, 0), ("e", n.e64, 128)])
    split.func_proto(sid, [("p", split.next_id + 1)])
    split.ptr(sid)
    split.typedef("myint", n.int)
    return Spec(base_b.build()), split.build()


SPLIT_BASE, SPLIT = _split_pair()


@FUZZ
@given(st.data())
def test_split_byte_flips(data):
    blob = bytearray(SPLIT)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    exercise(bytes(blob), SPLIT_BASE)


@MORE
@given(st.data())
def test_byte_flips(data):
    blob = bytearray(data.draw(st.sampled_from([GOOD, GOOD_BE])))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    exercise(bytes(blob))


@MORE
@given(st.binary(max_size=400), st.sampled_from([b"\x9f\xeb\x01\x00", b"\xeb\x9f\x01\x00", b""]))
def test_random_blobs(body, magic):
    exercise(magic + body)


@MORE
@given(hdr_len=st.integers(0, 80) | st.integers(0, 2**32 - 1),
       type_off=st.integers(0, 600) | st.integers(0, 2**32 - 1),
       type_len=st.integers(0, 600) | st.integers(0, 2**32 - 1),
       str_off=st.integers(0, 600) | st.integers(0, 2**32 - 1),
       str_len=st.integers(0, 600) | st.integers(0, 2**32 - 1))
def test_random_header(hdr_len, type_off, type_len, str_off, str_len):
    exercise(_patch_header(GOOD + b"\0" * 64, hdr_len=hdr_len, type_off=type_off, type_len=type_len,
                           str_off=str_off, str_len=str_len))


_word = st.integers(0, 12) | st.integers(0, 2**32 - 1)
_record = st.tuples(
    st.integers(0, 31),                     # kind, invalid ones included
    st.integers(0, 40) | _word,             # name offset
    st.integers(0, 4) | st.integers(0, 0xFFFF),  # vlen
    st.integers(0, 1),                      # kind_flag
    _word,                                  # size or type
    st.lists(_word, max_size=16),           # whatever follows
)


@settings(FUZZ, max_examples=400)
@given(st.lists(_record, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_random_records(records, exact, big):
    """Records of random kinds and vlens; with ``exact``, each gets just the
    words its kind needs so parsing succeeds and decoding/rendering is hit."""
    from btf.kinds import FIXED_WORDS, VLEN_WORDS

    b = Builder(byteorder="big" if big else "little")
    for name in ("int", "x", "struct", "a\xff"):
        b.string(name)
    for kind, name, vlen, kflag, sot, extra in records:
        if exact:
            kind = kind % 19 + 1
            need = FIXED_WORDS[kind] + (vlen & 0xFFFF) * VLEN_WORDS[kind]
            if need > 64:
                vlen, need = 2, FIXED_WORDS[kind] + 2 * VLEN_WORDS[kind]
            extra = (extra * (need // max(len(extra), 1) + 1) or [0] * need)[:need]
            extra += [0] * (need - len(extra))
        b.record(kind, name, vlen, kflag, sot, extra)
    exercise(b.build())


# -- ELF input -----------------------------------------------------------

BPF_SRC = """
struct s { int a: 3; int b; } g_s;
int f(int x) { return x + g_s.b; }
"""


@pytest.fixture(scope="module")
def bpf_objects(tmp_path_factory) -> tuple[bytes, bytes]:
    """A small .bpf.o with BTF, and one built without -g (no .BTF)."""
    clang = shutil.which("clang")
    assert clang, "clang is not installed: cannot build a .bpf.o"
    d = tmp_path_factory.mktemp("elf")
    (d / "p.c").write_text(BPF_SRC)
    subprocess.run([clang, "-target", "bpf", "-O2", "-g", "-c", str(d / "p.c"), "-o", str(d / "g.o")], check=True)
    subprocess.run([clang, "-target", "bpf", "-O2", "-c", str(d / "p.c"), "-o", str(d / "n.o")], check=True)
    return (d / "g.o").read_bytes(), (d / "n.o").read_bytes()


def _from_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.o"
    path.write_bytes(data)
    with time_limit():
        spec = _only_btf_error(Spec.from_file, path, None, False)
        if spec is not None:
            exercise_spec(spec)


def test_elf_without_btf(bpf_objects, tmp_path):
    with pytest.raises(BtfError, match=r"no \.BTF"):
        Spec.from_file(_write(tmp_path, bpf_objects[1]), cache=False)


def test_elf_truncated(bpf_objects, tmp_path):
    good = bpf_objects[0]
    assert len(Spec.from_file(_write(tmp_path, good), cache=False)) > 3
    step = max(1, len(good) // 300)
    for n in list(range(0, len(good), step)) + [4, 16, 52, 63, 64, 65, len(good) - 1]:
        _from_file(tmp_path, good[:n])


@settings(max_examples=300, deadline=5000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_elf_byte_flips(bpf_objects, tmp_path, data):
    blob = bytearray(bpf_objects[0])
    for _ in range(data.draw(st.integers(1, 6))):
        # Half the flips land in the ELF header and section headers.
        pos = data.draw(st.integers(0, 63) | st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    _from_file(tmp_path, bytes(blob))


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "y.o"
    path.write_bytes(data)
    return path
