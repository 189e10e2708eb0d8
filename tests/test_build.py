"""The installed package ships the compiled BPF objects, and metadata agrees."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import pathlib
import re
import tomllib

import pytest
from elftools.elf.elffile import ELFFile

import pycore
from pycore.native import shipped as objects

REPO = pathlib.Path(__file__).resolve().parent.parent

SELFTEST_PROGRAMS = {
    "tp_btf/sys_enter",
    "tracepoint/syscalls/sys_enter_getpid",
    "uprobe",
    "fexit/fget",
}


@pytest.fixture(scope="module")
def selftest_elf():
    with objects.object_path("selftest").open("rb") as f:
        yield ELFFile(f)


def test_selftest_object_is_shipped_as_package_data():
    res = importlib.resources.files("pycore") / "bpf" / "selftest.bpf.o"
    assert res.is_file(), "pycore/bpf/selftest.bpf.o missing: reinstall (./dev.sh)"
    path = objects.object_path("selftest")
    assert path.is_file() and path.name == "selftest.bpf.o"
    assert path.parent.name == "bpf" and path.parent.parent.name == "pycore"
    assert path.read_bytes() == res.read_bytes()
    assert objects.object_path("selftest.bpf.o") == path


def test_every_bpf_source_is_shipped():
    sources = sorted(p.name.removesuffix(".bpf.c") for p in (REPO / "bpf_src").rglob("*.bpf.c"))
    assert sources, "no bpf_src/*.bpf.c"
    assert set(sources) <= set(objects.available_objects())


def test_missing_object_names_the_build_step():
    with pytest.raises(FileNotFoundError, match=r"no_such_prog\.bpf\.o.*dev\.sh"):
        objects.object_path("no_such_prog")
    with pytest.raises(ValueError):
        objects.object_path("../selftest")


def test_selftest_is_a_bpf_elf_with_btf(selftest_elf):
    elf = selftest_elf
    assert elf.header["e_machine"] == "EM_BPF"
    assert elf.header["e_type"] == "ET_REL"
    assert elf.elfclass == 64 and elf.little_endian
    names = {s.name for s in elf.iter_sections()}
    assert ".BTF" in names and ".BTF.ext" in names
    assert elf.get_section_by_name(".BTF").data_size > 0
    # DWARF is stripped when llvm-strip is available; BTF must survive it.
    assert "license" in names and ".maps" in names


def test_selftest_program_sections(selftest_elf):
    elf = selftest_elf
    names = {s.name for s in elf.iter_sections()}
    assert SELFTEST_PROGRAMS <= names
    for sec in SELFTEST_PROGRAMS:
        s = elf.get_section_by_name(sec)
        assert s["sh_type"] == "SHT_PROGBITS" and s["sh_flags"] & 0x4  # SHF_EXECINSTR
        assert s.data_size > 0 and s.data_size % 8 == 0  # whole BPF instructions
    assert elf.get_section_by_name("license").data().rstrip(b"\0") == b"GPL"


def test_selftest_symbols(selftest_elf):
    elf = selftest_elf
    symtab = elf.get_section_by_name(".symtab")
    by_name = {}
    for sym in symtab.iter_symbols():
        idx = sym["st_shndx"]
        sec = elf.get_section(idx).name if isinstance(idx, int) else idx
        by_name[sym.name] = sec
    assert by_name["events"] == ".maps"
    assert by_name["syscall_counts"] == ".maps"
    assert by_name["target_tgid"] == ".rodata"
    assert by_name["pycore_dropped"] == ".bss"  # lost-event counter, pycore.bpf.h
    assert by_name["selftest_sys_enter"] == "tp_btf/sys_enter"
    assert by_name["selftest_fexit_fget"] == "fexit/fget"


def test_version_single_source():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    if "version" in project:
        assert project["version"] == pycore.__version__
    else:
        assert "version" in project["dynamic"]
        meta = pyproject["tool"]["scikit-build"]["metadata"]["version"]
        assert meta["input"] == "pycore/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pycore.__version__)
    assert importlib.metadata.version(project["name"]) == pycore.__version__  # the distribution: pycore-bpf


def test_packages_are_typed():
    for pkg in ("pycore", "btf"):
        assert (importlib.resources.files(pkg) / "py.typed").is_file()
