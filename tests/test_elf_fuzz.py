"""Fuzzing the readers of whole ELF files that users point pycore at:
USDT notes (pycore.elf.usdt.UsdtFile), function symbols and ``symbol+offset``
(pycore.elf.symbols), and the CPython version/symbols py-calls reads
(pycore.elf.cpython.PythonBinary).

A corrupted executable or library must give :class:`ElfError` (one line
for the CLI) or a result, never another exception or a hang.  The seeds
are real binaries built here: the usdt-passwd demo (notes, semaphores,
several locations) and a small PIE that exports a function and a
``Py_Version``-like constant.  Note payloads and argument specs alone are
fuzzed in tests/test_usdt_notes.py; BTF in ELF in tests/test_btf_fuzz.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.errors import ElfError
from tests.test_btf_fuzz import time_limit

FUZZ = settings(max_examples=300, deadline=5000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SMALL_C = r"""
#include <stdio.h>
const unsigned int Py_Version = 0x030b02f0;   /* read like CPython's */
int _PyRuntime[64];
__attribute__((noinline)) int work(int x) { return x * 3 + _PyRuntime[x & 63]; }
int main(int argc, char **argv) { printf("%d\n", work(argc)); return 0; }
"""


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
    from pycore.tools.usdt_passwd import demo_binary

    d = tmp_path_factory.mktemp("elfseeds")
    gcc = shutil.which("gcc")
    assert gcc, "gcc is needed to build the fuzz seed"
    (d / "small.c").write_text(SMALL_C)
    subprocess.run([gcc, "-O2", "-g0", "-pie", "-fPIE", "-rdynamic", str(d / "small.c"), "-o", str(d / "small")],
                   check=True)
    return {"usdt-passwd": Path(demo_binary()).read_bytes(), "small": (d / "small").read_bytes()}


def exercise(path: Path) -> None:
    """Everything a listing or an attach reads from the file."""
    from pycore.elf import symbols as elfsyms
    from pycore.elf.cpython import PythonBinary, layout_for
    from pycore.elf.debugfile import build_id, debug_file
    from pycore.elf.sections import Sections
    from pycore.elf.usdt import UsdtFile

    with time_limit():
        try:
            with UsdtFile(str(path)) as f:
                for p in f.probes():
                    for loc in p.locations:
                        for a in loc.args:
                            if a.symbol:
                                f.symbol_address(a.symbol)
        except ElfError:
            pass
        try:
            funcs = elfsyms.functions(str(path))
            for fn in funcs[:20]:
                elfsyms.check_offset(str(path), fn, min(4, max(fn.size - 1, 0)))
            for spec in ("main", "work+4", "0x1000"):
                try:
                    elfsyms.resolve(str(path), spec)
                except ElfError:
                    pass
        except ElfError:
            pass
        try:
            layout_for(PythonBinary(str(path)))
        except ElfError:
            pass
        try:                                    # the struct reader of section headers (pycore.elf.dwarf's open)
            with Sections(str(path)) as s:
                build_id(s)
                debug_file(s, str(path), debug_dir=str(path.parent / "no-debug-dir"))
                for name in (".symtab", ".debug_info", ".gnu_debuglink", ".note.gnu.build-id"):
                    sec = s.get_section_by_name(name)
                    if sec is not None:
                        sec.data()
        except ElfError:
            pass


def test_seeds_are_read(seeds, tmp_path):
    """The unmutated seeds parse, so the mutations start from something real."""
    from pycore.elf import symbols as elfsyms
    from pycore.elf.cpython import PythonBinary
    from pycore.elf.usdt import UsdtFile

    (tmp_path / "a").write_bytes(seeds["usdt-passwd"])
    with UsdtFile(str(tmp_path / "a")) as f:
        assert len(f.probes()) >= 2 and any(len(p.locations) > 1 for p in f.probes())
    (tmp_path / "b").write_bytes(seeds["small"])
    assert "work" in {fn.name for fn in elfsyms.functions(str(tmp_path / "b"))}
    assert PythonBinary(str(tmp_path / "b")).version == (3, 11, 2)
    from pycore.elf.sections import Sections

    with Sections(str(tmp_path / "b")) as s:
        assert s.get_section_by_name(".symtab")["sh_type"] == "SHT_SYMTAB" and s.get_section_by_name(".symtab").data()


@pytest.mark.parametrize("seed", ["usdt-passwd", "small"])
def test_truncated(seeds, tmp_path, seed):
    good = seeds[seed]
    step = max(1, len(good) // 200)
    for n in [*range(0, len(good), step), 4, 16, 52, 63, 64, 65, len(good) - 1]:
        path = tmp_path / "t"
        path.write_bytes(good[:n])
        exercise(path)


@FUZZ
@given(st.data())
def test_byte_flips(seeds, tmp_path, data):
    blob = bytearray(seeds[data.draw(st.sampled_from(["usdt-passwd", "small"]))])
    shoff = int.from_bytes(blob[0x28:0x30], "little")
    phoff = int.from_bytes(blob[0x20:0x28], "little")
    for _ in range(data.draw(st.integers(1, 6))):
        # Most flips land where parsers trust the file: the ELF header, the
        # program and section header tables; the rest anywhere (notes, symbols).
        pos = data.draw(st.integers(0, 63) | st.integers(phoff, min(phoff + 56 * 13, len(blob) - 1))
                        | st.integers(shoff, len(blob) - 1) | st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    path = tmp_path / "f"
    path.write_bytes(bytes(blob))
    exercise(path)


def _section_index(data: bytes, name: str) -> int:
    import io

    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    return next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)


def _corrupt(seeds, tmp_path, how: str) -> str:
    """The demo, with one field of its headers made impossible."""
    blob = bytearray(seeds["usdt-passwd"])
    shoff = int.from_bytes(blob[0x28:0x30], "little")
    if how == "note-size":          # .note.stapsdt claims more bytes than the file has
        at = shoff + 64 * _section_index(bytes(blob), ".note.stapsdt") + 0x20   # sh_size
        blob[at:at + 8] = (1 << 40).to_bytes(8, "little")
    else:                           # the section header table starts past the end
        blob[0x28:0x30] = (len(blob) + 4096).to_bytes(8, "little")
    path = tmp_path / f"corrupt-{how}"
    path.write_bytes(bytes(blob))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("how", ["note-size", "shoff"])
def test_cli_says_malformed_in_one_line(seeds, tmp_path, how):
    """What a user sees for a corrupt binary: one line naming the file, exit 2."""
    path = _corrupt(seeds, tmp_path, how)
    commands = [["list", f"usdt:{path}"], ["run", "py-calls", "--binary", path, "-d", "0"]]
    if how == "shoff":              # function listings read the section table, not the notes
        commands.append(["list", f"uprobe:{path}:*"])
    for args in commands:
        r = subprocess.run([sys.executable, "-m", "pycore", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and path in lines[0] and "malformed ELF" in lines[0], (args, r.stderr)
        assert "Traceback" not in r.stderr
