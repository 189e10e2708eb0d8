"""Fuzzing the DWARF reader (pycore/elf/dwarf.py): a small ``gcc -g`` program
(DWARF 5, with and without type units, compressed, and 4) with bytes of its ``.debug_*`` sections flipped, or a section
cut short, must give :class:`ElfError` or a result from every call a listing
or a trace makes, never another exception or a hang."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.errors import ElfError
from tests.test_btf_fuzz import time_limit

FUZZ = settings(max_examples=300, deadline=10000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SOURCE = r"""
struct Opaque;
enum Mode { OFF, ON = 9 };
struct Node { struct Node *next; unsigned flags:3, kind:5; int grid[2][3]; union { int i; float f; };
              enum Mode mode; struct Opaque *o; int (*cb)(struct Node *, ...); const char *name; };
typedef struct Node node_t;
int visit(node_t *n, const char **argv, enum Mode m, ...) { return n->flags + m + (argv != 0); }
int main(void) { node_t n = {0}; return visit(&n, 0, ON); }
"""
SECTIONS = (".debug_info", ".debug_abbrev", ".debug_str", ".debug_aranges", ".debug_line_str")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("dwarfseeds")
    (d / "n.c").write_text(SOURCE)
    out = {}
    for flag in ("-g", "-gdwarf-4", "-g -fdebug-types-section", "-g -gz"):   # -gz: zlib, inflated in part
        subprocess.run([shutil.which("gcc") or "gcc", *flag.split(), "-O0", "-o", str(d / "n"), str(d / "n.c")],
                       check=True)
        out[flag] = (d / "n").read_bytes()
    return out


@pytest.fixture(scope="module")
def base():
    from btf.spec import load_kernel_spec

    return load_kernel_spec()


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")   # an index kept by build id would hide the damage


def _sections(blob: bytes) -> dict[str, tuple[int, int, int]]:
    """name -> (file offset, size, offset of the sh_size field)."""
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(blob))
    shoff, entsize = elf["e_shoff"], elf["e_shentsize"]
    return {s.name: (s["sh_offset"], s["sh_size"], shoff + i * entsize + 0x20)
            for i, s in enumerate(elf.iter_sections()) if s.name in SECTIONS}


def exercise(path: str, base) -> None:  # noqa: ANN001
    from pycore.elf.dwarf import DebugInfo

    with time_limit():
        try:
            dbg = DebugInfo.open(path, base)
        except ElfError:
            return
        if dbg is None:
            return
        with dbg:
            for call in (lambda: dbg.function("visit"), lambda: dbg.params_text("visit"),
                         lambda: dbg.named("struct", "Node"), lambda: dbg.named("typedef", "node_t"),
                         lambda: dbg.describe([f"f{i}" for i in range(30)] + ["visit", "main"])):
                try:
                    call()
                except ElfError:
                    pass
            for tid in range(dbg.spec.first_id, len(dbg.spec)):   # what was written is BTF the reader takes
                dbg.spec.type(tid)


def test_seeds_are_read(seeds, base, tmp_path):
    from pycore.elf.dwarf import DebugInfo

    for flag, blob in seeds.items():
        path = tmp_path / flag
        path.write_bytes(blob)
        with DebugInfo.open(str(path), base) as dbg:
            assert [n for n, _ in dbg.function("visit").params] == ["n", "argv", "m"]
            assert dbg.params_text("visit") == ["node_t* n", "const char** argv", "enum Mode m"]
            assert dbg.named("struct", "Node") is not None


@FUZZ
@given(st.data())
def test_byte_flips(seeds, base, tmp_path, data):
    blob = bytearray(seeds[data.draw(st.sampled_from(sorted(seeds)))])
    sections = _sections(bytes(blob))
    for _ in range(data.draw(st.integers(1, 6))):
        off, size, _ = sections[data.draw(st.sampled_from(sorted(sections)))]
        pos = off + data.draw(st.integers(0, size - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    path = tmp_path / "f"
    path.write_bytes(bytes(blob))
    exercise(str(path), base)


@pytest.mark.parametrize("flag", ["-g", "-gdwarf-4", "-g -fdebug-types-section", "-g -gz"])
def test_sections_cut_short(seeds, base, tmp_path, flag):
    """Each section the build wrote (DWARF 4 has no .debug_line_str, ...) made smaller, step by step,
    and the file cut at its end."""
    good = seeds[flag]
    present = [name for name in SECTIONS if name in _sections(good)]
    assert ".debug_info" in present and ".debug_abbrev" in present, present
    for name in present:
        _cut_short(good, name, tmp_path, base)


def _cut_short(good: bytes, name: str, tmp_path, base) -> None:  # noqa: ANN001
    off, size, size_field = _sections(good)[name]
    for keep in sorted({0, 1, 4, 11, size // 3, size // 2, size - 1}):
        blob = bytearray(good)
        blob[size_field:size_field + 8] = keep.to_bytes(8, "little")
        path = tmp_path / "cut"
        path.write_bytes(bytes(blob))
        exercise(str(path), base)
        path.write_bytes(good[:off + keep])
        exercise(str(path), base)
