"""vmlinux.h generation: equal to bpftool's, compilable, and right on small cases.

The kernel tests need /sys/kernel/btf/vmlinux, bpftool and clang; a missing
tool is a failure (this machine is supposed to have them), not a skip.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest

from btf.cdump import HEADER_EPILOGUE, HEADER_PROLOGUE, HeaderWriter, header
from btf.errors import BtfError
from btf.kinds import Kind
from btf.spec import Spec

VMLINUX = "/sys/kernel/btf/vmlinux"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- a tiny BTF assembler -------------------------------------------------

class Blob:
    """Just enough of a BTF writer for hand-checked cases."""

    def __init__(self, first_id: int = 1, first_str: int = 0) -> None:
        """``first_id`` and ``first_str`` for split BTF: where the base's
        ids and string offsets end (its table keeps the empty string)."""
        self.records: list[bytes] = []
        self.first_id = first_id
        self.first_str = first_str
        self.strings = bytearray(b"" if first_str else b"\0")

    @property
    def next_id(self) -> int:
        return self.first_id + len(self.records)

    def _str(self, s: str) -> int:
        if not s:
            return 0
        off = self.first_str + len(self.strings)
        self.strings += s.encode() + b"\0"
        return off

    def _add(self, kind: int, name: str, vlen: int, size_or_type: int, extra=(), kflag: int = 0) -> int:
        info = (kflag << 31) | (kind << 24) | vlen
        self.records.append(struct.pack(f"<{3 + len(extra)}I", self._str(name), info, size_or_type, *extra))
        return self.next_id - 1

    def int(self, name: str, size: int = 4, signed: bool = True) -> int:
        return self._add(Kind.INT, name, 0, size, [((1 if signed else 0) << 24) | size * 8])

    def ptr(self, to: int) -> int:
        return self._add(Kind.PTR, "", 0, to)

    def typedef(self, name: str, to: int) -> int:
        return self._add(Kind.TYPEDEF, name, 0, to)

    def struct(self, name: str, size: int, members, union: bool = False) -> int:
        """``members``: (name, type, bit offset), or with a bitfield size
        after it (the record gets kflag then)."""
        members = [m if len(m) == 4 else (*m, 0) for m in members]
        kflag = int(any(m[3] for m in members))
        extra: list[int] = []
        for mname, mtype, bit_off, bits in members:
            extra += [self._str(mname), mtype, (bits << 24) | bit_off if kflag else bit_off]
        return self._add(Kind.UNION if union else Kind.STRUCT, name, len(members), size, extra, kflag)

    def enum(self, name: str, values, size: int = 4) -> int:
        extra: list[int] = []
        for vname, v in values:
            extra += [self._str(vname), v & 0xFFFFFFFF]
        return self._add(Kind.ENUM, name, len(values), size, extra)

    def blob(self) -> bytes:
        types = b"".join(self.records)
        hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(self.strings))
        return hdr + types + bytes(self.strings)

    def spec(self) -> Spec:
        return Spec(self.blob())


def body(spec: Spec) -> str:
    """The header without its fixed start and end."""
    text = header(spec)
    assert text.startswith(HEADER_PROLOGUE) and text.endswith(HEADER_EPILOGUE)
    return text[len(HEADER_PROLOGUE):-len(HEADER_EPILOGUE)]


# -- hand-checked cases ---------------------------------------------------

def test_pointer_cycle_gets_a_forward_declaration():
    b = Blob()
    i = b.int("int")
    # struct A { struct B *b; int x; };  struct B { struct A *a; };
    a = b.struct("A", 16, [("b", i + 2, 0), ("x", i, 64)])
    pb = b.ptr(a + 2)
    sb = b.struct("B", 8, [("a", pb + 2, 0)])
    b.ptr(a)
    assert sb == a + 2
    assert body(b.spec()) == (
        "struct B;\n\n"
        "struct A {\n\tstruct B *b;\n\tint x;\n};\n\n"
        "struct B {\n\tstruct A *a;\n};\n\n"
    )


def test_embedded_struct_is_defined_before_its_user():
    b = Blob()
    i = b.int("int")
    b.struct("outer", 8, [("in", i + 2, 0), ("y", i, 32)])
    b.struct("inner", 4, [("x", i, 0)])
    assert body(b.spec()) == (
        "struct inner {\n\tint x;\n};\n\n"
        "struct outer {\n\tstruct inner in;\n\tint y;\n};\n\n"
    )


def test_duplicate_names_get_suffixes_per_namespace():
    b = Blob()
    i = b.int("int")
    b.struct("dup", 4, [("a", i, 0)])
    b.struct("dup", 4, [("b", i, 0)])
    b.typedef("dup", i)          # a typedef lives in the other namespace
    b.typedef("dup", i)
    assert body(b.spec()) == (
        "struct dup {\n\tint a;\n};\n\n"
        "struct dup___2 {\n\tint b;\n};\n\n"
        "typedef int dup;\n\n"
        "typedef int dup___2;\n\n"
    )


def test_top_level_anonymous_enum_is_emitted_inline_one_is_not():
    b = Blob()
    i = b.int("int")
    b.enum("", [("TOP_A", 1), ("TOP_B", 2)])
    inline = b.enum("", [("IN_A", 0)])
    b.struct("s", 4, [("e", inline, 0)])
    assert i == 1
    assert body(b.spec()) == (
        "enum {\n\tTOP_A = 1,\n\tTOP_B = 2,\n};\n\n"
        "struct s {\n\tenum {\n\t\tIN_A = 0,\n\t} e;\n};\n\n"
    )


def test_enumerators_share_the_typedef_namespace():
    b = Blob()
    i = b.int("int")
    b.typedef("FOO", i)
    b.enum("e", [("FOO", 1)])
    assert body(b.spec()).endswith("enum e {\n\tFOO___2 = 1,\n};\n\n")


def test_names_fixed_in_text_order_equal_bpftool(tmp_path):
    """Names whose suffix depends on the order of the text: two typedefs
    ``u8``, the second one used (through a pointer) before its definition;
    an anonymous enum printed at each of its two uses; a typedef named like
    its own enum constant (libbpf names the typedef first); two structs
    ``s``; two nameless enum constants.  bpftool prints this blob; ours
    must match."""
    bpftool = _require("bpftool")
    b = Blob()
    i = b.int("int")
    uchar = b.int("unsigned char", 1, signed=False)
    u8a = b.typedef("u8", uchar)
    u8b = b.typedef("u8", i)
    anon = b.enum("", [("SHARED_A", 0), ("SHARED_B", 1)])
    b.struct("s", 8, [("p", b.ptr(u8b), 0)])
    b.struct("s", 8, [("x", u8a, 0), ("e", anon, 32)])
    b.struct("t", 4, [("e", anon, 0)])
    self_named = b.enum("", [("FOO", 1)])
    b.typedef("FOO", self_named)
    b.enum("named", [("u8", 3), ("SHARED_A", 2)])
    b.enum("nameless", [("", 0), ("", 1)])  # libbpf counts nameless constants too
    spec = b.spec()
    path = tmp_path / "names.btf"
    path.write_bytes(b.blob())
    ref = subprocess.run([bpftool, "btf", "dump", "file", str(path), "format", "c"],
                         capture_output=True, text=True, check=True).stdout
    assert "___2" in ref and "___3" in ref and "\n\t___2 = 1," in ref
    assert header(spec) == ref


def test_packing_found_by_the_body_equals_bpftool(tmp_path):
    """A struct not laid out before its body is laid out by the body's own
    loop and made again if packed: packing found only at the last member,
    in a bitfield record, through an inner record met by value after its
    own body, trailing padding of a struct that is not packed, a union, and
    a member with no alignment (void)."""
    bpftool = _require("bpftool")
    b = Blob()
    i = b.int("int")
    c = b.int("char", 1)
    lng = b.int("long", 8)
    b.struct("late_packed", 9, [("a", i, 0), ("b", c, 32), ("c", i, 40)])
    b.struct("tail", 16, [("a", lng, 0), ("b", c, 64)])
    inner = b.struct("inner", 8, [("x", lng, 0)])
    b.struct("outer", 12, [("c", c, 0), ("in", inner, 32)])
    b.struct("bits", 6, [("a", i, 0, 3), ("b", i, 3, 5), ("c", c, 8), ("d", i, 16)])
    b.struct("u", 8, [("a", i, 0), ("b", lng, 0)], union=True)
    b.struct("holes", 24, [("a", c, 0), ("b", lng, 64), ("c", i, 128)])
    spec = b.spec()
    path = tmp_path / "packing.btf"
    path.write_bytes(b.blob())
    ref = subprocess.run([bpftool, "btf", "dump", "file", str(path), "format", "c"],
                         capture_output=True, text=True, check=True).stdout
    assert ref.count("__attribute__((packed))") >= 3, ref
    assert header(spec) == ref
    # A member with no alignment: printed as it is, unless padding has to
    # be worked out from that alignment, where libbpf divides by zero
    # (bpftool dies of SIGFPE) and ours says why it cannot
    b.struct("novoid", 4, [("a", i, 0), ("v", 0, 32)])
    assert "struct novoid {\n\tint a;\n\tvoid v;\n}" in body(b.spec())
    b.struct("padvoid", 8, [("a", i, 0), ("v", 0, 32)])
    with pytest.raises(BtfError, match="no alignment"):
        header(b.spec())


def test_anonymous_enums_printed_alone_equal_bpftool(tmp_path):
    """Which anonymous enums libbpf prints on their own (no type refers to
    them; a function's return type does not count), wherever the plan meets
    them first: at the top level or as a return type, before or after the
    types that refer to them, or only from kinds the header leaves out (a
    variable, a function, an array's index type)."""
    bpftool = _require("bpftool")
    b = Blob()
    i = b.int("int")
    n = len(b.records)

    def proto(ret: int, *params: int) -> int:
        extra: list[int] = []
        for p in params:
            extra += [0, p]
        return b._add(Kind.FUNC_PROTO, "", len(params), ret, extra)

    def enum(tag: str) -> int:
        return b.enum("", [(f"{tag}_A", 0), (f"{tag}_B", 1)])

    ids = {}
    # met at the top level, then a later struct refers to it: inline only
    ids["late"] = enum("LATE")
    b.struct("uses_late", 4, [("e", ids["late"], 0)])
    # a return type only, met at the top level first: alone and inline
    ids["ret_top"] = enum("RET_TOP")
    b.typedef("ret_top_fn", b.ptr(proto(ids["ret_top"], i)))
    # a return type met first through the prototype, nothing else: alone,
    # where the prototype's walk met it
    fn = proto(len(b.records) + 4)  # the enum after this, its pointer and typedef
    b.typedef("ret_first_fn", b.ptr(fn))
    ids["ret_first"] = enum("RET_FIRST")
    # met first as a return type, then a struct member: inline only
    fn = proto(len(b.records) + 4)  # the enum after this, its pointer and typedef
    b.typedef("ret_then_member_fn", b.ptr(fn))
    ids["ret_member"] = enum("RET_MEMBER")
    b.struct("uses_ret_member", 4, [("e", ids["ret_member"], 0)])
    # a parameter, met at the top level first: inline only
    ids["param"] = enum("PARAM")
    b.typedef("param_fn", b.ptr(proto(i, ids["param"])))
    # only a variable's, a function's and an array index's: never alone
    ids["var"] = enum("VAR")
    b._add(Kind.VAR, "a_var", 0, ids["var"], [1])
    ids["func"] = enum("FUNC")
    b._add(Kind.FUNC, "a_func", 1, proto(ids["func"]))
    ids["index"] = enum("INDEX")
    b.struct("has_array", 8, [("a", b._add(Kind.ARRAY, "", 0, 0, [i, ids["index"], 2]), 0)])
    # nobody's: alone
    ids["alone"] = enum("ALONE")
    assert n == 1
    path = tmp_path / "anon.btf"
    path.write_bytes(b.blob())
    ref = subprocess.run([bpftool, "btf", "dump", "file", str(path), "format", "c"],
                         capture_output=True, text=True, check=True).stdout
    alone = {tag for tag in ("LATE", "RET_TOP", "RET_FIRST", "RET_MEMBER", "PARAM", "VAR", "FUNC",
                             "INDEX", "ALONE") if f"\nenum {{\n\t{tag}_A = 0," in ref}
    assert alone == {"RET_TOP", "RET_FIRST", "FUNC", "ALONE"}, ref
    spec = b.spec()
    assert header(spec) == ref


def test_split_btf_equals_bpftool(tmp_path):
    """A module's split BTF: ids and string offsets continue the base's, and
    names come from both tables (the base's read through its own lookups)."""
    bpftool = _require("bpftool")
    base = Blob()
    i = base.int("int")
    base.struct("base_only", 4, [("x", i, 0)])
    base.typedef("shared_t", i)
    split = Blob(first_id=len(base.records) + 1, first_str=len(base.strings))
    s = split.struct("module_s", 16, [("x", i, 0), ("t", 3, 32), ("next", split.next_id + 1, 64)])
    split.ptr(s)
    split.typedef("shared_t", i)      # a second typedef of the base's name: ___2
    split.enum("", [("MOD_A", 1)])
    split.struct("base_only", 4, [("y", i, 0)])
    (tmp_path / "base.btf").write_bytes(base.blob())
    (tmp_path / "split.btf").write_bytes(split.blob())
    ref = subprocess.run([bpftool, "-B", str(tmp_path / "base.btf"), "btf", "dump", "file",
                          str(tmp_path / "split.btf"), "format", "c"],
                         capture_output=True, text=True, check=True).stdout
    assert "shared_t___2" in ref and "base_only___2" in ref and "MOD_A" in ref
    spec = Spec(split.blob(), base.spec())
    assert header(spec) == ref


# -- the running kernel ---------------------------------------------------

def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: this test compares with it")
    return path


@pytest.fixture(scope="module")
def kernel_spec() -> Spec:
    if not os.path.exists(VMLINUX):
        pytest.fail(f"{VMLINUX} is missing (kernel without CONFIG_DEBUG_INFO_BTF?)")
    return Spec.from_file(VMLINUX)


@pytest.fixture(scope="module")
def kernel_header(kernel_spec: Spec) -> tuple[str, HeaderWriter]:
    import gc

    gc.disable()
    try:
        writer = HeaderWriter(kernel_spec)
        text = "".join(writer.run())
    finally:
        gc.enable()
    return text, writer


def test_header_equals_bpftool(kernel_header):
    bpftool = _require("bpftool")
    ref = subprocess.run([bpftool, "btf", "dump", "file", VMLINUX, "format", "c"],
                         capture_output=True, text=True, check=True).stdout
    ours = kernel_header[0]
    if ours != ref:
        ours_lines, ref_lines = ours.splitlines(), ref.splitlines()
        for n, (a, b) in enumerate(zip(ours_lines, ref_lines), 1):
            if a != b:
                pytest.fail(f"first difference at line {n}: ours {a!r}, bpftool {b!r}")
        pytest.fail(f"length differs: ours {len(ours_lines)} lines, bpftool {len(ref_lines)}")


def test_cli_dump_c_equals_library(kernel_header, tmp_path):
    out = tmp_path / "vmlinux.h"
    subprocess.run([sys.executable, "-m", "btf", "dump", VMLINUX, "--format", "c", "-o", str(out)],
                   check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.read_text() == kernel_header[0]


def _unreliable(writer: HeaderWriter) -> set[int]:
    """Records whose layout bpftool 7.1's header cannot reproduce, so ours
    (being equal to it) cannot either: they embed, by value,

    * an enum whose size is not 4 (``enum x : u8``): libbpf 1.1 prints no
      ``mode(byte)`` attribute (newer libbpf does), or
    * ``__builtin_va_list``, the compiler's own type, whose size for
      ``-target bpf`` differs from the kernel's x86 one.
    """
    cols = writer.columns
    kinds, st, words, offsets = cols.kinds, cols.st, cols.words, cols.offsets
    memo: dict[int, bool] = {}

    def bad(t: int) -> bool:
        if t in memo:
            return memo[t]
        memo[t] = False
        k = kinds[t]
        if k == Kind.ENUM:
            got = st[t] != 4
        elif k == Kind.ENUM64:
            p = offsets[t] + 3
            got = not any(words[p + 2:p + 3 * cols.vlen(t):3])
        elif k == Kind.TYPEDEF:
            got = cols.name_of(t) == "__builtin_va_list" or bad(st[t])
        elif k in (Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG):
            got = bad(st[t])
        elif k == Kind.ARRAY:
            got = bad(cols.array_elem(t))
        elif k in (Kind.STRUCT, Kind.UNION):
            got = any(bad(m) for m in cols.member_types(t))
        else:
            got = False
        memo[t] = got
        return got

    return {t for t in range(1, cols.n) if kinds[t] in (Kind.STRUCT, Kind.UNION) and bad(t)}


def _layout_checks(writer: HeaderWriter) -> list[str]:
    """Static asserts of every named struct/union's size, and of member
    offsets in every 7th one: the compiler must agree with BTF on layout.
    Records bpftool's header cannot lay out (see _unreliable) are left out."""
    checks = []
    cols = writer.columns
    kinds, names = cols.kinds, cols.names_off
    strings = cols.strings
    skip = _unreliable(writer)
    assert len(skip) < 100, f"{len(skip)} records with layouts bpftool's header cannot express"
    for type_id in range(1, cols.n):
        k = kinds[type_id]
        if k not in (Kind.STRUCT, Kind.UNION) or not names[type_id] or type_id in skip:
            continue
        keyword = "struct" if k == Kind.STRUCT else "union"
        cname = f"{keyword} {writer.namer.type_name(type_id)}"
        checks.append(f'_Static_assert(sizeof({cname}) == {cols.st[type_id]}, "{cname}");')
        if type_id % 7:
            continue
        for name_off, _, bit_off, bits in cols.members(type_id)[:6]:
            if name_off and not bits:
                m = strings[name_off]
                checks.append(f'_Static_assert(__builtin_offsetof({cname}, {m}) == {bit_off // 8}, '
                              f'"{cname}.{m}");')
    return checks


def test_header_compiles_with_btf_layout(kernel_header, tmp_path):
    clang = _require("clang")
    text, writer = kernel_header
    (tmp_path / "vmlinux.h").write_text(text)
    checks = _layout_checks(writer)
    assert len(checks) > 10000
    src = tmp_path / "layout.bpf.c"
    src.write_text('#include "vmlinux.h"\n\n' + "\n".join(checks) + "\n")
    res = subprocess.run([clang, "-target", "bpf", "-O2", "-g", "-c", str(src), "-o", str(tmp_path / "l.o")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]


# -- the command line -----------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "btf", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def test_cli_help():
    res = _cli("--help")
    assert res.returncode == 0 and "dump" in res.stdout and "show" in res.stdout


@pytest.mark.parametrize("content", [None, b"", b"\x9f\xeb\x01\x00garbage", b"\x7fELF\x02\x01\x01" + b"\0" * 9])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, content):
    path = tmp_path / "bad.btf"
    if content is not None:
        path.write_bytes(content)
    for fmt in ("c", "raw"):
        res = _cli("dump", str(path), "--format", fmt)
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
        assert "Traceback" not in res.stderr


def test_cli_show(tmp_path):
    b = Blob()
    i = b.int("int")
    b.struct("pair", 8, [("a", i, 0), ("b", i, 32)])
    types = b"".join(b.records)
    path = tmp_path / "tiny.btf"
    path.write_bytes(struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(b.strings))
                     + types + bytes(b.strings))
    res = _cli("show", str(path), "struct pair")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "struct pair {\n\tint a;\n\tint b;\n};\n"


def test_reference_past_the_last_type_is_named(tmp_path):
    """The walk meets the bad id first; the error names it, from the
    library and from the command line in one line."""
    b = Blob()
    i = b.int("int")
    b.struct("s", 8, [("ok", i, 0), ("bad", 99, 32)])
    with pytest.raises(BtfError, match=r"refers to type id 99, past the last type \(2\)"):
        header(b.spec())
    path = tmp_path / "bad.btf"
    path.write_bytes(b.blob())
    res = _cli("dump", str(path), "--format", "c")
    assert res.returncode == 2
    assert res.stderr == "error: a type refers to type id 99, past the last type (2)\n"


@pytest.mark.parametrize("argv", [
    ["dump", "f"], ["dump", "f", "--format", "c"], ["dump", "--format", "raw", "f"],
    ["dump", "f", "--base", "b", "-o", "out", "--format", "c"], ["dump", "f", "--output", "o"],
    ["dump", "f", "--format", "c", "--format", "raw"], ["show", "f", "struct dentry"],
    ["show", "--base", "b", "f", "n"],
])
def test_cli_plain_forms_read_as_argparse_reads_them(argv):
    """The command line's own reading of the usual forms (argparse costs 6 ms
    to import) gives what argparse gives."""
    from btf.__main__ import _parser, _plain_args

    assert vars(_plain_args(argv)) == vars(_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["dump", "-h"], ["dump"], ["dump", "f", "g"], ["dump", "f", "--format"],
    ["dump", "f", "--format", "xml"], ["dump", "f", "--format=c"], ["dump", "f", "--base", "-o"],
    ["show", "f"], ["show", "f", "n", "--format", "c"], ["list", "f"], ["dump", "f", "--", "g"],
])
def test_cli_other_forms_go_to_argparse(argv):
    from btf.__main__ import _plain_args

    assert _plain_args(argv) is None
