"""The reader against real BTF: this machine's vmlinux and a .bpf.o that
clang builds here, compared with bpftool's raw dump byte for byte.

bpftool and clang are required: without them these tests fail (they are the
reference), they do not skip.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from btf import Kind, Spec
from btf.raw import dump_raw

VMLINUX = "/sys/kernel/btf/vmlinux"

# Every kind clang 14 emits for BPF (it has no ENUM64: vmlinux and the
# hand-built blobs of test_btf_kinds.py cover that one).
BPF_SRC = r"""
typedef unsigned long long __u64;
#define SEC(n) __attribute__((section(n), used))
#define __tag(x) __attribute__((btf_decl_tag(x)))
#define __user __attribute__((btf_type_tag("user")))

enum small { SMALL_A = -1, SMALL_B = 2 };
enum big { BIG_A = 0x100000000ULL, BIG_B = 0xffffffffffffffffULL };
struct fwd_only;
union fwd_union;
struct bits {
	unsigned int a: 3;
	unsigned int b: 5;
	int c __tag("member_tag");
	volatile long v;
	char *restrict r;
	union { int x; float f; } u;
	struct fwd_only *fo;
	union fwd_union *fu;
	enum small s;
	enum big bg;
	double d;
	_Bool flag;
	int arr[4][2];
	int (*cb)(void *, int);
	int (*vf)(int n, ...);
} __tag("struct_tag");
struct packed { char c; int i; } __attribute__((packed));

struct bits g_data = { .c = 1 };
struct packed g_bss;
typedef struct bits bits_t;
bits_t *g_bits_ptr;
const volatile int g_ro = 7;
const char __user *g_uptr;
static int s_var SEC(".data.custom") = 3;
extern int ext_var __attribute__((weak));
extern int ext_fn(int a) __attribute__((weak));

int helper(int x, const char __user *buf) __tag("func_tag");
__attribute__((noinline)) int helper(int x __tag("param_tag"), const char __user *buf)
{
	return x + (buf ? 1 : 0) + s_var;
}

SEC("tp/syscalls/sys_enter_write")
int prog(void *ctx)
{
	g_bss.i++;
	return helper(g_data.c + g_ro, g_uptr) + ext_var + ext_fn(2) + (int)sizeof(g_data.d);
}
char LICENSE[] SEC("license") = "GPL";
"""


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} is not installed: it is the reference these tests compare with")
    return exe


def bpftool_raw(path: str | Path) -> str:
    return subprocess.run([_tool("bpftool"), "btf", "dump", "file", str(path), "format", "raw"],
                          check=True, capture_output=True, text=True).stdout


def raw_records(text: str) -> dict[int, list[str]]:
    """bpftool's raw dump as id -> the record's lines (tab lines included)."""
    records: dict[int, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("["):
            current = [line]
            records[int(line[1:line.index("]")])] = current
        else:
            current.append(line)
    return records


def _first_diff(a: str, b: str) -> str:
    for n, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return f"line {n}:\n  ours:    {x!r}\n  bpftool: {y!r}"
    return f"lengths differ: {len(a)} vs {len(b)} characters"


def _assert_same(ours: str, theirs: str) -> None:
    if ours != theirs:
        pytest.fail("raw dump differs from bpftool's, first difference at " + _first_diff(ours, theirs))


# -- vmlinux -------------------------------------------------------------


@pytest.fixture(scope="module")
def vmlinux() -> Spec:
    if not os.path.exists(VMLINUX):
        pytest.fail(f"{VMLINUX} is missing: this kernel has no BTF")
    return Spec.from_file(VMLINUX)


@pytest.fixture(scope="module")
def vmlinux_raw() -> str:
    return bpftool_raw(VMLINUX)


def test_vmlinux_every_type_decodes(vmlinux):
    kinds = set()
    n = 0
    for t in vmlinux:
        kinds.add(t.kind)
        n += 1
    assert n == len(vmlinux) - 1 > 10_000
    assert {Kind.INT, Kind.STRUCT, Kind.FUNC, Kind.FUNC_PROTO, Kind.DATASEC} <= kinds


def test_vmlinux_raw_dump_is_bpftools(vmlinux, vmlinux_raw):
    out = io.StringIO()
    dump_raw(vmlinux, out)
    _assert_same(out.getvalue(), vmlinux_raw)


def test_vmlinux_func_params(vmlinux, vmlinux_raw):
    """Parameter names and type ids of ~2000 FUNCs spread over the id range,
    and of every vfs_* function, as bpftool prints them."""
    records = raw_records(vmlinux_raw)
    funcs = vmlinux.ids_of_kind(Kind.FUNC)
    assert funcs
    sample = set(funcs[:: max(1, len(funcs) // 2000)])
    vfs = set(vmlinux.ids_matching(rb"vfs_[^\x00]*", [Kind.FUNC]))
    assert vfs, "no vfs_* functions in vmlinux BTF?"
    sample |= vfs
    assert len(sample) > min(len(funcs), 1500)
    for func_id in sorted(sample):
        head = records[func_id][0]
        m = re.fullmatch(r"\[\d+\] FUNC '([^']*)' type_id=(\d+) linkage=\w+", head)
        assert m, head
        func = vmlinux.type(func_id)
        assert func.name == m.group(1)
        assert func.type_id == int(m.group(2))
        proto_lines = records[func.type_id]
        ours = [(p.name or "(anon)", p.type_id) for p in func.type.params]
        theirs = [(q[0], int(q[1])) for q in
                  (re.fullmatch(r"\t'([^']*)' type_id=(\d+)", line).groups() for line in proto_lines[1:])]
        assert ours == theirs, f"{func.name}: {ours} != {theirs}"
        assert f"ret_type_id={func.type.return_type_id} " in proto_lines[0]


def test_vmlinux_name_lookups(vmlinux, vmlinux_raw):
    records = raw_records(vmlinux_raw)
    for name, kind in (("task_struct", Kind.STRUCT), ("vfs_read", Kind.FUNC), ("pid_t", Kind.TYPEDEF)):
        ids = vmlinux.ids_named(name, [kind])
        assert ids, name
        for i in ids:
            assert records[i][0].startswith(f"[{i}] {kind.name} '{name}'")


# -- an ELF object built here --------------------------------------------


@pytest.fixture(scope="module")
def bpf_object(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bpfobj")
    src = d / "prog.bpf.c"
    src.write_text(BPF_SRC)
    obj = d / "prog.bpf.o"
    subprocess.run([_tool("clang"), "-target", "bpf", "-O2", "-g", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    return obj


def test_bpf_object_raw_dump_is_bpftools(bpf_object):
    spec = Spec.from_file(bpf_object, cache=False)
    out = io.StringIO()
    dump_raw(spec, out)
    _assert_same(out.getvalue(), bpftool_raw(bpf_object))


def test_bpf_object_has_every_kind_clang_emits(bpf_object):
    spec = Spec.from_file(bpf_object, cache=False)
    kinds = {t.kind for t in spec}
    assert kinds == set(Kind) - {Kind.UNKN, Kind.ENUM64}
    tags = {t.name: t.component_idx for t in spec if t.kind == Kind.DECL_TAG}
    assert tags == {"func_tag": -1, "param_tag": 0, "struct_tag": -1, "member_tag": 2}
    secs = {t.name: [v.type.name for v in t.vars] for t in spec if t.kind == Kind.DATASEC}
    assert secs[".data"] == ["g_data"] and secs[".rodata"] == ["g_ro"] and secs[".data.custom"] == ["s_var"]
    assert set(secs[".bss"]) == {"g_bss", "g_uptr", "g_bits_ptr"}
    linkages = {t.name: t.linkage for t in spec if t.kind in (Kind.FUNC, Kind.VAR)}
    assert linkages["ext_fn"] == 2 and linkages["ext_var"] == 2 and linkages["s_var"] == 0


def test_vmlinux_read_mapped_or_read_is_the_same():
    """Kernels since 6.16 let sysfs BTF be mapped (the reader copies it out
    of a private mapping); older ones refuse, and it is read page by page.
    Either way the bytes are the file's."""
    from btf.spec import _map_sysfs, read_file

    fd = os.open(VMLINUX, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        mapping = _map_sysfs(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    mapped = None
    if mapping is not None:
        with mapping:
            mapped = mapping[:]
    plain = b"".join(chunks)
    assert read_file(VMLINUX) == plain
    # and the spec parsed in place from the mapping is the one parsed from bytes
    from btf.spec import Spec
    in_place, copied = Spec.from_file(VMLINUX, cache=False), Spec(plain, cache=False)
    assert in_place.offsets == copied.offsets
    assert in_place.strings.data == copied.strings.data
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release >= (6, 16):
        assert mapped == plain  # this kernel maps it: the fast path is the one taken
    else:
        assert mapped is None or mapped == plain
    # where a mapping is refused (procfs never offers one), the caller reads instead
    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        assert _map_sysfs(fd, 4096) is None
    finally:
        os.close(fd)
