"""Every BTF kind, decoded from hand-built blobs, field by field; C rendering
of the declarator shapes that are easy to get wrong; header, split and
big-endian variants.  Expected C strings were checked against
``bpftool btf dump file ... format c`` (libbpf 1.1)."""

from __future__ import annotations

import io
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from btf import BtfError, Kind, Spec
from btf import types as T
from btf.cformat import CFormatter
from btf.layout import alignof, is_packed, sizeof
from btf.raw import dump_raw
from btfbuild import Builder


def all_kinds(b: Builder) -> SimpleNamespace:
    """One or more records of every kind; returns their ids by role."""
    n = SimpleNamespace()
    n.int = b.int("int", 4, signed=True)
    n.uint = b.int("unsigned int", 4)
    n.char = b.int("char", 1, signed=True, char=True)
    n.bool = b.int("_Bool", 1, bool_=True)
    n.bits = b.int("u3", 1, bits=3, offset=2)
    n.void_ptr = b.ptr(0)
    n.arr = b.array(n.int, n.uint, 16)
    n.s = b.struct("s", 16, [("a", n.int, 0), ("p", n.void_ptr, 64)])
    n.bf = b.struct("bf", 4, [("x", n.uint, 0, 3), ("y", n.uint, 3, 29)])
    n.u = b.union("u", 4, [("i", n.int, 0), ("c", n.char, 0)])
    n.e = b.enum("e", [("E_NEG", -1), ("E_POS", 7)], signed=True)
    n.ue = b.enum("ue", [("U_BIG", 0xFFFFFFFF)])
    n.e64 = b.enum64("e64", [("BIG", 1 << 40), ("NEG", -5)], signed=True)
    n.ue64 = b.enum64("ue64", [("MAX", (1 << 64) - 1)])
    n.fwd_s = b.fwd("fs")
    n.fwd_u = b.fwd("fu", union=True)
    n.typedef = b.typedef("myint", n.int)
    n.volatile = b.volatile(n.int)
    n.const = b.const(n.char)
    n.restrict = b.restrict(n.void_ptr)
    n.proto = b.func_proto(n.int, [("a", n.int), ("b", n.void_ptr)])
    n.vproto = b.func_proto(n.int, [("fmt", n.void_ptr)], varargs=True)
    n.func_static = b.func("fs_", n.proto, linkage=0)
    n.func_global = b.func("fg", n.proto, linkage=1)
    n.func_extern = b.func("fe", n.vproto, linkage=2)
    n.var = b.var("v", n.int, linkage=1)
    n.var_static = b.var("vs", n.s, linkage=0)
    n.datasec = b.datasec(".data", 20, [(n.var, 0, 4), (n.var_static, 4, 16)])
    n.float = b.float("double", 8)
    n.tag_whole = b.decl_tag("whole", n.s, -1)
    n.tag_member = b.decl_tag("member", n.s, 1)
    n.tag_param = b.decl_tag("param", n.func_global, 0)
    n.type_tag = b.type_tag("user", n.const)
    return n


@pytest.fixture(scope="module")
def kinds() -> tuple[Spec, SimpleNamespace]:
    b = Builder()
    n = all_kinds(b)
    return Spec(b.build()), n


def test_counts(kinds):
    spec, n = kinds
    assert len(spec) == n.type_tag + 1
    assert spec.first_id == 1
    assert spec.type(0).kind == Kind.UNKN
    with pytest.raises(BtfError):
        spec.type(len(spec))


def test_int(kinds):
    spec, n = kinds
    t = spec.type(n.int)
    assert isinstance(t, T.Int)
    assert (t.name, t.size, t.bits, t.bit_offset, t.signed, t.is_char, t.is_bool) == ("int", 4, 32, 0, True, False, False)
    c = spec.type(n.char)
    assert (c.size, c.bits, c.signed, c.is_char, c.is_bool) == (1, 8, True, True, False)
    bo = spec.type(n.bool)
    assert (bo.is_bool, bo.signed, bo.encoding) == (True, False, 4)
    bits = spec.type(n.bits)
    assert (bits.bits, bits.bit_offset, bits.encoding) == (3, 2, 0)
    assert spec.type(n.uint).signed is False


def test_ptr_array(kinds):
    spec, n = kinds
    p = spec.type(n.void_ptr)
    assert p.kind == Kind.PTR and p.type_id == 0 and p.type.kind == Kind.UNKN
    a = spec.type(n.arr)
    assert (a.kind, a.type_id, a.index_type_id, a.nelems, a.name) == (Kind.ARRAY, n.int, n.uint, 16, "")
    assert sizeof(a) == 64 and alignof(a) == 4


def test_struct_union(kinds):
    spec, n = kinds
    s = spec.type(n.s)
    assert (s.kind, s.name, s.size) == (Kind.STRUCT, "s", 16)
    assert [(m.name, m.type_id, m.bit_offset, m.bitfield_size) for m in s.members] == [
        ("a", n.int, 0, 0), ("p", n.void_ptr, 64, 0)]
    assert sizeof(s) == 16 and alignof(s) == 8 and not is_packed(s)
    bf = spec.type(n.bf)
    assert [(m.name, m.bit_offset, m.bitfield_size) for m in bf.members] == [("x", 0, 3), ("y", 3, 29)]
    u = spec.type(n.u)
    assert (u.kind, u.size) == (Kind.UNION, 4)
    assert [m.name for m in u] == ["i", "c"]


def test_struct_without_kflag_keeps_large_offsets():
    """Without kind_flag the whole 32 bits are the offset: no bitfield size."""
    b = Builder()
    i = b.int("int", 4, signed=True)
    s = b.struct("big", 1 << 22, [("far", i, (1 << 25) + 32)], kflag=False)
    m = Spec(b.build()).type(s).members[0]
    assert (m.bit_offset, m.bitfield_size) == ((1 << 25) + 32, 0)


def test_enums(kinds):
    spec, n = kinds
    e = spec.type(n.e)
    assert (e.kind, e.size, e.signed) == (Kind.ENUM, 4, True)
    assert [(v.name, v.value) for v in e.values] == [("E_NEG", -1), ("E_POS", 7)]
    ue = spec.type(n.ue)
    assert ue.signed is False and ue.values[0].value == 0xFFFFFFFF
    e64 = spec.type(n.e64)
    assert (e64.kind, e64.size, e64.signed) == (Kind.ENUM64, 8, True)
    assert [(v.name, v.value) for v in e64.values] == [("BIG", 1 << 40), ("NEG", -5)]
    assert spec.type(n.ue64).values[0].value == (1 << 64) - 1


def test_fwd_typedef_modifiers(kinds):
    spec, n = kinds
    assert (spec.type(n.fwd_s).is_union, spec.type(n.fwd_u).is_union) == (False, True)
    assert spec.type(n.fwd_u).name == "fu"
    td = spec.type(n.typedef)
    assert (td.kind, td.name, td.type_id) == (Kind.TYPEDEF, "myint", n.int)
    for attr, kind in (("volatile", Kind.VOLATILE), ("const", Kind.CONST), ("restrict", Kind.RESTRICT)):
        t = spec.type(getattr(n, attr))
        assert t.kind == kind and t.name == ""
    assert spec.type(n.const).type_id == n.char
    tt = spec.type(n.type_tag)
    assert (tt.kind, tt.name, tt.type_id) == (Kind.TYPE_TAG, "user", n.const)


def test_funcs(kinds):
    spec, n = kinds
    p = spec.type(n.proto)
    assert (p.kind, p.return_type_id, p.variadic) == (Kind.FUNC_PROTO, n.int, False)
    assert [(q.name, q.type_id) for q in p.params] == [("a", n.int), ("b", n.void_ptr)]
    vp = spec.type(n.vproto)
    assert vp.variadic and [(q.name, q.type_id) for q in vp.params] == [("fmt", n.void_ptr), ("", 0)]
    for attr, linkage in (("func_static", 0), ("func_global", 1), ("func_extern", 2)):
        f = spec.type(getattr(n, attr))
        assert f.kind == Kind.FUNC and f.linkage == linkage
    assert spec.type(n.func_global).type.id == n.proto


def test_var_datasec(kinds):
    spec, n = kinds
    v = spec.type(n.var)
    assert (v.kind, v.name, v.type_id, v.linkage) == (Kind.VAR, "v", n.int, 1)
    assert spec.type(n.var_static).linkage == 0
    d = spec.type(n.datasec)
    assert (d.kind, d.name, d.size) == (Kind.DATASEC, ".data", 20)
    assert [(x.type_id, x.offset, x.size) for x in d.vars] == [(n.var, 0, 4), (n.var_static, 4, 16)]
    assert d.vars[1].type.name == "vs"


def test_float_decl_tag(kinds):
    spec, n = kinds
    f = spec.type(n.float)
    assert (f.kind, f.name, f.size) == (Kind.FLOAT, "double", 8)
    assert sizeof(f) == 8 and alignof(f) == 8
    whole, member, param = (spec.type(i) for i in (n.tag_whole, n.tag_member, n.tag_param))
    assert (whole.kind, whole.name, whole.type_id, whole.component_idx) == (Kind.DECL_TAG, "whole", n.s, -1)
    assert (member.component_idx, param.component_idx, param.type_id) == (1, 0, n.func_global)


def test_search_columns(kinds):
    spec, n = kinds
    assert spec.kind(n.e64) == Kind.ENUM64
    assert spec.name(n.typedef) == "myint"
    assert spec.ids_named("s") == [n.s]
    assert spec.ids_named("int", [Kind.INT]) == [n.int]
    assert set(spec.ids_of_kind(Kind.FUNC)) == {n.func_static, n.func_global, n.func_extern}


def test_public_columns(kinds):
    """The columns readers of every record use (btf.cdump): each own type's
    record starts at ``offsets[id - first_id]`` in ``words``, and the name,
    info and size-or-type columns are its first three words."""
    spec, n = kinds
    words, offsets = spec.words, spec.offsets
    assert len(offsets) == len(spec) - spec.first_id
    names, infos, sizes = spec.name_column(), spec.info_column(), spec.size_column()
    for i, off in enumerate(offsets):
        assert (names[i], infos[i], sizes[i]) == tuple(words[off:off + 3])
        type_id = spec.first_id + i
        assert (infos[i] >> 24) & 0x1F == spec.kind(type_id)
        assert spec.strings.get(names[i]) == spec.name(type_id)
    assert sizes[n.s - 1] == 16 and sizes[n.typedef - 1] == n.int
    table = spec.strings
    assert table.start == 0 and len(table) == len(table.data)


def test_raw_dump_of_every_kind(kinds):
    spec, n = kinds
    out = io.StringIO()
    dump_raw(spec, out)
    text = out.getvalue()
    assert f"[{n.char}] INT 'char' size=1 bits_offset=0 nr_bits=8 encoding=UNKN\n" in text
    assert f"[{n.bits}] INT 'u3' size=1 bits_offset=2 nr_bits=3 encoding=(none)\n" in text
    assert f"[{n.e}] ENUM 'e' encoding=SIGNED size=4 vlen=2\n\t'E_NEG' val=-1\n" in text
    assert f"[{n.e64}] ENUM64 'e64' encoding=SIGNED size=8 vlen=2\n\t'BIG' val=1099511627776LL\n\t'NEG' val=-5LL\n" in text
    assert f"\t'MAX' val=18446744073709551615ULL\n" in text
    assert f"[{n.bf}] STRUCT 'bf' size=4 vlen=2\n\t'x' type_id={n.uint} bits_offset=0 bitfield_size=3\n" in text
    assert f"[{n.fwd_u}] FWD 'fu' fwd_kind=union\n" in text
    assert f"[{n.func_extern}] FUNC 'fe' type_id={n.vproto} linkage=extern\n" in text
    assert f"\t'fmt' type_id={n.void_ptr}\n\t'(anon)' type_id=0\n" in text
    assert f"[{n.var_static}] VAR 'vs' type_id={n.s}, linkage=static\n" in text
    assert f"\ttype_id={n.var_static} offset=4 size=16 (VAR 'vs')\n" in text
    assert f"[{n.tag_member}] DECL_TAG 'member' type_id={n.s} component_idx=1\n" in text
    assert f"[{n.type_tag}] TYPE_TAG 'user' type_id={n.const}\n" in text
    assert text.count("\n[") + 1 == len(spec) - 1


def _bpftool(*args: str) -> str:
    exe = shutil.which("bpftool")
    assert exe, "bpftool is not installed: cannot compare with it"
    return subprocess.run([exe, *args], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("byteorder", ["little", "big"])
@pytest.mark.parametrize("hdr_len", [24, 32])
def test_raw_dump_matches_bpftool(tmp_path, byteorder, hdr_len):
    b = Builder(byteorder=byteorder)
    all_kinds(b)
    path = tmp_path / "blob.btf"
    path.write_bytes(b.build(hdr_len=hdr_len))
    out = io.StringIO()
    dump_raw(Spec.from_file(path), out)
    if byteorder == "big" and hdr_len != 24:
        # libbpf refuses non-native BTF with a longer header; we read it,
        # and it must say what the little-endian blob says.
        little = Builder()
        all_kinds(little)
        path.write_bytes(little.build())
    assert out.getvalue() == _bpftool("btf", "dump", "file", str(path), "format", "raw")


# -- header, layout of sections, byte order, split BTF -----------------


def test_long_header_and_section_order():
    b = Builder()
    n = all_kinds(b)
    ref = Spec(b.build())
    for blob in (b.build(hdr_len=32), b.build(hdr_len=40, strings_first=True, gap=12), b.build(gap=7)):
        spec = Spec(blob)
        assert len(spec) == len(ref)
        assert [(m.name, m.type_id) for m in spec.type(n.s).members] == [("a", n.int), ("p", n.void_ptr)]
        assert spec.type(n.e64).values[1].value == -5
    assert Spec(b.build(hdr_len=32)).header_len == 32


def test_bad_headers():
    b = Builder()
    b.int("int", 4)
    good = b.build()
    with pytest.raises(BtfError, match="header length"):
        Spec(b.build(hdr_len=20))
    with pytest.raises(BtfError, match="version"):
        Spec(b.build(version=2))
    with pytest.raises(BtfError, match="magic"):
        Spec(b"\0\0" + good[2:])
    with pytest.raises(BtfError, match="shorter"):
        Spec(good[:23])


def test_big_endian():
    little, big = Builder(), Builder(byteorder="big")
    nl, nb = all_kinds(little), all_kinds(big)
    sl, sb = Spec(little.build()), Spec(big.build(hdr_len=28))
    assert sb.byteorder == "big" and sl.byteorder == "little"
    assert nl == nb and len(sl) == len(sb)
    ra, rb = io.StringIO(), io.StringIO()
    dump_raw(sl, ra)
    dump_raw(sb, rb)
    assert ra.getvalue() == rb.getvalue()   # every field of every record
    assert sb.type(nb.e64).values[0].value == 1 << 40
    assert sb.type(nb.bf).members[1].bitfield_size == 29


def test_split_btf(tmp_path):
    base = Builder()
    bn = all_kinds(base)
    split = Builder(base=base)
    first = split.next_id
    assert first == bn.type_tag + 1
    sid = split.struct("mod_s", 24, [("s", bn.s, 0), ("n", bn.int, 128)])
    pid = split.ptr(sid)
    tid = split.typedef("myint", bn.int)   # a name the base already has: same offset
    eid = split.enum("mod_e", [("MOD_A", 1)])
    base_spec = Spec(base.build())
    spec = Spec(split.build(), base=base_spec)
    assert spec.first_id == first and len(spec) == first + 4
    assert [t.id for t in spec] == [sid, pid, tid, eid]
    assert spec.type(bn.s) is base_spec.type(bn.s)
    s = spec.type(sid)
    assert s.name == "mod_s" and s.members[0].type.name == "s" and s.members[1].type.name == "int"
    assert spec.type(pid).type is s
    assert spec.type(eid).values[0].name == "MOD_A"
    assert spec.ids_named("myint") == [bn.typedef, tid]
    assert spec.kind(bn.e64) == Kind.ENUM64 and spec.name(bn.s) == "s"
    # String offsets in the split blob start after the base's table.
    assert split.string("mod_s") >= base.strings_len()
    out = io.StringIO()
    dump_raw(spec, out)
    assert out.getvalue().startswith(f"[{sid}] STRUCT 'mod_s' size=24 vlen=2\n")
    (tmp_path / "base").write_bytes(base.build())
    (tmp_path / "split").write_bytes(split.build())
    assert out.getvalue() == _bpftool("-B", str(tmp_path / "base"), "btf", "dump", "file",
                                      str(tmp_path / "split"), "format", "raw")


# -- C rendering -------------------------------------------------------


def _cblob() -> tuple[bytes, SimpleNamespace]:
    b = Builder()
    n = SimpleNamespace()
    n.int = b.int("int", 4, signed=True)
    n.uint = b.int("unsigned int", 4)
    n.char = b.int("char", 1, signed=True, char=True)
    n.long = b.int("long", 8, signed=True)
    n.const_char = b.const(n.char)
    n.user = b.type_tag("user", n.const_char)
    n.user_ptr = b.ptr(n.user)
    n.void_ptr = b.ptr(0)
    n.cb_proto = b.func_proto(n.int, [("", n.void_ptr), ("", n.int)])
    n.cb = b.ptr(n.cb_proto)
    n.char_ptr = b.ptr(n.char)
    n.argv = b.array(n.char_ptr, n.uint, 4)
    n.int8 = b.array(n.int, n.uint, 8)
    n.int8_ptr = b.ptr(n.int8)
    n.matrix = b.array(n.int8, n.uint, 2)
    n.const_ptr = b.const(n.char_ptr)          # char * const
    n.volatile_int = b.volatile(n.int)
    n.restrict_ptr = b.restrict(n.char_ptr)
    n.anon_u = b.union("", 4, [("x", n.int, 0), ("y", n.uint, 0)])
    n.anon_s = b.struct("", 8, [("lo", n.int, 0), ("hi", n.int, 32)])
    n.s = b.struct("s", 40, [("a", n.uint, 0, 3), ("b", n.uint, 3, 5), ("c", n.char, 32),
                             ("", n.anon_u, 64), ("", n.anon_s, 128), ("cb", n.cb, 256)])
    n.packed = b.struct("pk", 5, [("c", n.char, 0), ("i", n.int, 8)])
    n.pad = b.struct("pad", 16, [("c", n.char, 0), ("l", n.int, 64)])
    n.tail = b.struct("tail", 16, [("l", n.long, 0), ("c", n.char, 64)])
    n.fwd = b.fwd("opaque")
    n.fwd_ptr = b.ptr(n.fwd)
    n.vproto = b.func_proto(n.int, [("fmt", n.char_ptr)], varargs=True)
    n.printk = b.func("printk", n.vproto)
    n.noargs = b.func_proto(n.int, [])
    n.getpid = b.func("getpid", n.noargs)
    n.e = b.enum("e", [("A", -1), ("B", 2)], signed=True)
    n.e64 = b.enum64("e64", [("X", 1 << 40), ("Y", 1)])
    n.td = b.typedef("handler_t", n.cb)
    n.ret_fp_proto = b.func_proto(n.cb, [("n", n.int)])   # returns a function pointer
    n.ret_fp = b.ptr(n.ret_fp_proto)
    n.float = b.float("float", 4)
    return b.build(), n


@pytest.fixture(scope="module")
def cspec() -> tuple[Spec, SimpleNamespace]:
    blob, n = _cblob()
    return Spec(blob), n


def _decl(spec: Spec, type_id: int, name: str = "") -> str:
    return CFormatter().declaration(spec.type(type_id), name)


def _defn(spec: Spec, type_id: int) -> str:
    return CFormatter().definition(spec.type(type_id))


def test_c_declarators(cspec):
    spec, n = cspec
    assert _decl(spec, n.user_ptr, "buf") == 'const char __attribute__((btf_type_tag("user"))) *buf'
    assert CFormatter(type_tags=False).declaration(spec.type(n.user_ptr), "buf") == "const char *buf"
    assert _decl(spec, n.cb, "cb") == "int (*cb)(void *, int)"
    assert _decl(spec, n.argv, "argv") == "char *argv[4]"
    assert _decl(spec, n.int8_ptr, "p") == "int (*p)[8]"
    assert _decl(spec, n.matrix, "m") == "int m[2][8]"
    assert _decl(spec, n.const_ptr, "p") == "char * const p"
    assert _decl(spec, n.volatile_int, "v") == "volatile int v"
    assert _decl(spec, n.restrict_ptr, "r") == "char * restrict r"
    assert _decl(spec, n.fwd_ptr, "o") == "struct opaque *o"
    assert _decl(spec, n.void_ptr) == "void *"
    assert _decl(spec, n.char_ptr) == "char *"
    assert _decl(spec, n.int8_ptr) == "int(*)[8]"  # libbpf's spelling, no space
    assert _decl(spec, n.ret_fp, "f") == "int (* (*f)(int n))(void *, int)"  # as libbpf
    assert _decl(spec, n.float, "x") == "float x"
    assert _decl(spec, n.td, "h") == "handler_t h"


def test_c_functions_and_typedefs(cspec):
    spec, n = cspec
    assert _defn(spec, n.printk) == "int printk(char *fmt, ...)"
    assert _defn(spec, n.getpid) == "int getpid(void)"
    assert _defn(spec, n.td) == "typedef int (*handler_t)(void *, int)"
    assert _defn(spec, n.fwd) == "struct opaque"


def test_c_struct_bitfields_anonymous_members(cspec):
    spec, n = cspec
    assert _defn(spec, n.s) == (
        "struct s {\n"
        "\tunsigned int a: 3;\n"
        "\tunsigned int b: 5;\n"
        "\tint: 0;\n"
        "\tchar c;\n"
        "\tunion {\n"
        "\t\tint x;\n"
        "\t\tunsigned int y;\n"
        "\t};\n"
        "\tlong: 0;\n"
        "\tstruct {\n"
        "\t\tint lo;\n"
        "\t\tint hi;\n"
        "\t};\n"
        "\tlong: 64;\n"
        "\tint (*cb)(void *, int);\n"
        "}")


def test_c_packed_and_padding(cspec):
    spec, n = cspec
    assert is_packed(spec.type(n.packed)) and alignof(spec.type(n.packed)) == 1
    assert _defn(spec, n.packed) == "struct pk {\n\tchar c;\n\tint i;\n} __attribute__((packed))"
    assert _defn(spec, n.pad) == "struct pad {\n\tchar c;\n\tlong: 0;\n\tint l;\n\tlong: 0;\n}"
    # Tail padding that C's alignment already gives is not printed.
    assert _defn(spec, n.tail) == "struct tail {\n\tlong l;\n\tchar c;\n}"


def test_c_enums(cspec):
    spec, n = cspec
    assert _defn(spec, n.e) == "enum e {\n\tA = -1,\n\tB = 2,\n}"
    assert _defn(spec, n.e64) == "enum e64 {\n\tX = 1099511627776ULL,\n\tY = 1ULL,\n}"


def test_c_matches_bpftool(cspec, tmp_path):
    """Our bodies appear verbatim in bpftool's C dump of the same blob."""
    spec, n = cspec
    path = tmp_path / "c.btf"
    path.write_bytes(_cblob()[0])
    c = _bpftool("btf", "dump", "file", str(path), "format", "c")
    for type_id in (n.s, n.packed, n.pad, n.tail, n.e, n.e64, n.td):
        assert _defn(spec, type_id) + ";\n" in c


def test_read_file_grows_for_files_without_a_size(tmp_path):
    """procfs and tracefs report st_size 0: read_file must grow its buffer."""
    from btf.spec import read_file

    with open("/proc/self/maps", "rb") as f:
        expected_start = f.read(64)
    data = read_file("/proc/kallsyms")
    assert len(data) > 1 << 17 and data.count(b"\n") > 1000   # far past the first 64 KiB
    assert read_file("/proc/self/maps")[:16] == expected_start[:16]
    big = tmp_path / "big"
    big.write_bytes(bytes(range(256)) * 4000)
    assert read_file(big) == bytes(range(256)) * 4000


def test_split_writer_on_kernel_spec_shadows_names():
    """btf.writer.Writer.split: declared types on top of a parsed spec; with shadows a
    declared name hides the base's (a script's 'struct task_struct { int x; }')."""
    from btf.kinds import Kind
    from btf.layout import sizeof
    from btf.spec import Spec
    from btf.writer import Writer

    b = Builder()
    i = b.int("int", 4, signed=True)
    b.struct("task_struct", 64, [("pid", i, 0)])
    b.enum("E", [("ONE", 1)])
    base = Spec(b.build())
    w = Writer.split(base)
    j = w.int("int", 4, signed=True)
    mine = w.struct("task_struct", 4, [("x", j, 0)])
    w.struct("Req", 16, [("t", w.ptr(2), 0), ("id", j, 64)])
    w.enum("E2", [("ONE", 7)])
    shadowing = w.spec(base)
    assert shadowing.ids_named("task_struct", (Kind.STRUCT,)) == [mine, 2]
    assert sizeof(shadowing.type(mine)) == 4
    req = shadowing.type(shadowing.ids_named("Req")[0])
    assert req.members[0].type.type.name == "task_struct" and req.members[0].type.type.id == 2
    assert shadowing.enumerator("ONE")[1] == 7
    plain = w.spec(base, shadows=False)
    assert plain.ids_named("task_struct", (Kind.STRUCT,)) == [2, mine]
    assert plain.enumerator("ONE")[1] == 1
