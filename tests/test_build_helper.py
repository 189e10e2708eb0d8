"""`pycore build` and `pycore_add_bpf_object`: an agent's own BPF C compiled the way pycore builds its own,
then loaded and attached for real; its errors, one line each; and that run time never imports it."""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile

from tests.conftest import require_root

ROOT = pathlib.Path(__file__).resolve().parent.parent

# A program like an agent's: a .rodata setting, a .bss counter, a hash map, pycore.bpf.h.
COUNTER_C = r"""
#include "pycore.bpf.h"

const volatile __u32 target_tgid = 0;
__u64 calls SEC(".bss");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} per_tid SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_getppid(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), one = 1, *n;
	__u32 tid = (__u32)id;

	if ((id >> 32) != target_tgid)
		return 0;
	__sync_fetch_and_add(&calls, 1);
	n = bpf_map_lookup_elem(&per_tid, &tid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&per_tid, &tid, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
"""

# A second source for the same object: programs linked in by bpftool, sharing .bss.
SECOND_C = r"""
#include "pycore.bpf.h"

extern const volatile __u32 target_tgid;
extern __u64 calls;

SEC("tracepoint/syscalls/sys_enter_getpgid")
int on_getpgid(void *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) == target_tgid)
		__sync_fetch_and_add(&calls, 100);
	return 0;
}
"""

BROKEN_C = """#include "pycore.bpf.h"

SEC("tracepoint/syscalls/sys_enter_getppid")
int broken(void *ctx)
{
	return no_such_variable +
}
"""


def pycore(*args: str, cwd: pathlib.Path | None = None, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pycore", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    """The run failed with exit 2 and a single-line message, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pycore: error: "), lines
    return lines[0]


@pytest.fixture
def src(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "counter.bpf.c"
    p.write_text(COUNTER_C)
    return p


def count_getppid(obj_path: pathlib.Path, calls: int) -> tuple[int, dict[int, int]]:
    """Load ``obj_path``, count our own getppid() calls in BPF, and return (.bss counter, per-thread map)."""
    from pycore import BpfObject

    with BpfObject(obj_path) as obj:
        obj.globals["target_tgid"] = os.getpid()
        obj.load()
        obj.attach()
        for _ in range(calls):
            os.getppid()
            if "on_getpgid" in obj.programs:
                os.getpgid(0)
        return obj.globals["calls"], dict(obj.maps["per_tid"].items())


def test_build_load_attach(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    require_root()
    out = tmp_path / "out" / "counter.bpf.o"
    depfile = tmp_path / "out" / "counter.d"
    r = pycore("build", str(src), "-o", str(out), "--depfile", str(depfile))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout == ""
    with out.open("rb") as f:
        elf = ELFFile(f)
        assert elf.header["e_machine"] == "EM_BPF"
        sections = {s.name for s in elf.iter_sections()}
    assert {".BTF", ".BTF.ext", ".rodata", ".bss", ".maps"} <= sections
    assert not any(s.startswith(".debug_") for s in sections), "llvm-strip -g left DWARF in"
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".pycore-build-")]
    deps = depfile.read_text()
    assert deps.startswith(f"{out}:")
    assert "pycore.bpf.h" in deps and "vmlinux.h" in deps and "bpf/bpf_helpers.h" in deps

    calls, per_tid = count_getppid(out, 7)
    assert calls == 7
    assert per_tid == {__import__("threading").get_native_id(): 7}


def test_default_output_and_keep_debug(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    r = pycore("build", str(src), "--keep-debug", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with (tmp_path / "counter.bpf.o").open("rb") as f:
        assert ELFFile(f).get_section_by_name(".debug_info") is not None


def test_several_sources_link_into_one_object(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    require_root()
    second = tmp_path / "second.bpf.c"
    second.write_text(SECOND_C)
    out = tmp_path / "linked.bpf.o"
    r = pycore("build", str(src), str(second), "-o", str(out))
    assert r.returncode == 0, r.stderr
    calls, _ = count_getppid(out, 3)
    assert calls == 3 + 300  # both programs, one .bss
    one_error_line(r := pycore("build", str(src), str(second)))
    assert "several sources need -o" in r.stderr


def test_given_btf_file_is_cached_by_content(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    btf = tmp_path / "vmlinux.btf"
    shutil.copyfile("/sys/kernel/btf/vmlinux", btf)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = pycore("build", str(src), "-o", str(tmp_path / "a.bpf.o"), "--btf", str(btf), env=env)
    assert r.returncode == 0, r.stderr
    headers = list((tmp_path / "cache" / "pycore" / "vmlinux").glob("*/vmlinux.h"))
    assert len(headers) == 1 and "struct task_struct {" in headers[0].read_text()
    written = headers[0].stat().st_mtime_ns
    r = pycore("build", str(src), "-o", str(tmp_path / "b.bpf.o"), "--btf", str(btf), env=env)
    assert r.returncode == 0, r.stderr
    assert headers[0].stat().st_mtime_ns == written, "the cached vmlinux.h was written again"
    assert (tmp_path / "a.bpf.o").read_bytes() == (tmp_path / "b.bpf.o").read_bytes()


def test_check_names_the_toolchain(tmp_path: pathlib.Path) -> None:
    r = pycore("build", "--check")
    assert r.returncode == 0, r.stderr
    found = dict(line.split(":", 1) for line in r.stdout.splitlines())
    assert set(found) == {"clang", "llvm-strip", "target", "pycore headers", "libbpf headers", "vmlinux.h"}
    assert os.access(found["clang"].strip(), os.X_OK)
    assert (pathlib.Path(found["pycore headers"].strip()) / "pycore.bpf.h").is_file()


def test_compile_error_shows_clang_then_one_line(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "broken.bpf.c"
    bad.write_text(BROKEN_C)
    out = tmp_path / "broken.bpf.o"
    r = pycore("build", str(bad), "-o", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert f"{bad}:6:9: error: use of undeclared identifier 'no_such_variable'" in r.stderr
    assert lines[-1] == f"pycore: error: {bad}: clang failed (2 errors, shown above); {out} not written"
    assert not [p for p in tmp_path.iterdir() if p.name != bad.name], "a partial output or scratch was left"


def test_missing_clang_is_one_line(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    line = one_error_line(pycore("build", str(src), env={**os.environ, "PATH": str(empty)}))
    assert line == ("pycore: error: clang not found on PATH: it compiles BPF C "
                    "(apt-get install clang llvm libbpf-dev)")
    line = one_error_line(pycore("build", str(src), "--clang", str(tmp_path / "clang-99")))
    assert "not found or not executable" in line


@pytest.mark.parametrize("content, says", [
    (b"this is a text file, longer than a BTF header\n", "not BTF (bad BTF magic"),
    (b"\x7fELF" + b"\0" * 60, "not BTF ("),
    (None, "BTF without the kernel's types (no struct task_struct)"),  # a .bpf.o: BTF, but not a kernel's
])
def test_btf_that_is_not_kernel_btf(src: pathlib.Path, tmp_path: pathlib.Path, content: bytes | None,
                                    says: str) -> None:
    btf = tmp_path / "given.btf"
    if content is None:
        assert pycore("build", str(src), "-o", str(btf), "--keep-debug").returncode == 0
    else:
        btf.write_bytes(content)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    line = one_error_line(pycore("build", str(src), "-o", str(tmp_path / "x.bpf.o"), "--btf", str(btf), env=env))
    assert line.startswith(f"pycore: error: --btf {btf}: ") and says in line, line
    assert not (tmp_path / "x.bpf.o").exists()
    assert not list((tmp_path / "cache").rglob("vmlinux.h"))


@pytest.mark.parametrize("args, says", [
    (["no_such.bpf.c"], "no_such.bpf.c: no such file"),
    (["{src}", "--btf", "/no/such/btf"], "--btf /no/such/btf: no such file"),
    (["{src}", "--vmlinux-h", "/no/such/vmlinux.h"], "--vmlinux-h /no/such/vmlinux.h: no such file"),
    (["{src}", "-I", "/no/such/dir"], "-I /no/such/dir: no such directory"),
    (["{src}", "--arch", "vax"], "--arch: unknown BPF target architecture 'vax'; one of x86, arm64"),
    ([], "no source given"),
])
def test_bad_arguments_are_one_line(src: pathlib.Path, tmp_path: pathlib.Path, args: list[str], says: str) -> None:
    line = one_error_line(pycore("build", *[a.format(src=src) for a in args], cwd=tmp_path))
    assert says in line, line


def test_no_kernel_btf_says_what_to_do(src: pathlib.Path, tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without /sys/kernel/btf/vmlinux (no CONFIG_DEBUG_INFO_BTF): the path is the only thing changed."""
    from pycore.build import compile, errors, vmlinux

    monkeypatch.setattr(vmlinux, "KERNEL_BTF", str(tmp_path / "no-btf"))
    with pytest.raises(errors.BuildError, match=r"no BTF for the running kernel .* give --btf FILE"):
        compile.build(compile.BuildOptions(sources=[str(src)], output=str(tmp_path / "x.bpf.o")))


def test_arch_names() -> None:
    from pycore.build.toolchain import target_arch

    assert [target_arch(a) for a in ("x86_64", "aarch64", "arm64", "s390x", "ppc64le", "riscv64")] == \
        ["x86", "arm64", "arm64", "s390", "powerpc", "riscv"]


def test_run_time_never_imports_the_build_helper() -> None:
    """Only the build commands import pycore.build: an agent's run time needs no clang, headers or vmlinux.h."""
    allowed = {"pycore.commands.build", "pycore.commands.cmake_dir"}
    wrong = []
    for path in (ROOT / "pycore").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if module.startswith("pycore.build") or module in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            wrong += [f"{module} imports {n}" for n in names if n == "pycore.build" or n.startswith("pycore.build.")]
    assert not wrong, wrong


def test_cmake_dir() -> None:
    r = pycore("cmake-dir")
    assert r.returncode == 0, r.stderr
    d = pathlib.Path(r.stdout.strip())
    assert (d / "pycoreConfig.cmake").is_file() and (d / "PycoreBpf.cmake").is_file()
    r = pycore("cmake-dir", "--include")
    assert (pathlib.Path(r.stdout.strip()) / "pycore.bpf.h").is_file()


CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.15)
project(agent NONE)
execute_process(COMMAND "${{Python_EXECUTABLE}}" -m pycore cmake-dir
                OUTPUT_VARIABLE pycore_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
find_package(pycore 0.1 CONFIG REQUIRED)
pycore_add_bpf_object(counter SOURCES counter.bpf.c {extra})
"""


def cmake(project: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build"),
                           f"-DPython_EXECUTABLE={sys.executable}", *args], capture_output=True, text=True,
                          timeout=120)


def test_cmake_function_builds_and_rebuilds_on_header_change(src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    require_root()
    project = src.parent
    (project / "include").mkdir()
    (project / "include" / "settings.h").write_text("#define STEP 1\n")
    src.write_text(src.read_text().replace('#include "pycore.bpf.h"', '#include "pycore.bpf.h"\n#include "settings.h"')
                   .replace("__sync_fetch_and_add(&calls, 1)", "__sync_fetch_and_add(&calls, STEP)"))
    (project / "CMakeLists.txt").write_text(CMAKE_PROJECT.format(extra="INCLUDE_DIRS include"))
    r = cmake(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pycore build toolchain:" in r.stdout
    build = subprocess.run(["cmake", "--build", str(project / "build")], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stdout + build.stderr
    obj = project / "build" / "counter.bpf.o"
    assert count_getppid(obj, 4)[0] == 4
    (project / "include" / "settings.h").write_text("#define STEP 10\n")  # the depfile names it
    build = subprocess.run(["cmake", "--build", str(project / "build")], capture_output=True, text=True, timeout=120)
    assert "BPF counter.bpf.o" in build.stdout, build.stdout
    assert count_getppid(obj, 4)[0] == 40


def test_cmake_configure_fails_in_one_line_without_clang(src: pathlib.Path) -> None:
    project = src.parent
    (project / "CMakeLists.txt").write_text(CMAKE_PROJECT.format(extra=""))
    r = cmake(project, "-DPYCORE_BPF_CLANG=/no/such/clang")
    assert r.returncode != 0
    said = " ".join(r.stderr.split())  # CMake wraps its messages
    assert "pycore_add_bpf_object(counter): clang '/no/such/clang' not found or not executable" in said, r.stderr
    assert "Traceback" not in r.stderr
