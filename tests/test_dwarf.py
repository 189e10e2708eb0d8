"""A binary's DWARF as BTF (pycore/elf/dwarf.py) against what gcc compiled, and
``pycore list -v`` of uprobe parameters side by side with ``bpftrace -lv``.

The C and C++ programs are built here with gcc/g++ in DWARF 5 (gcc 12's
default: bitfields as DW_AT_data_bit_offset), DWARF 4 (DW_AT_bit_offset) and
DWARF 2 (member locations as DW_OP_plus_uconst blocks); each prints its own
sizeof/offsetof and the bytes of a struct with bitfields set, which the BTF
must reproduce."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from btf.cformat import CFormatter
from btf.kinds import Kind
from btf.layout import sizeof
from btf.spec import load_kernel_spec
from pycore.cli import main
from pycore.elf.dwarf import DebugInfo, cache_path, dwarf_errors
from pycore.errors import ElfError

BPFTRACE = shutil.which("bpftrace")
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

C_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct Inner { short s; char tag[3]; };
struct Opaque;
enum Color { RED = -1, GREEN = 7 };
enum Big { SMALL = 1, HUGE = 0x1234567890LL };
struct Req {
    int id;
    char path[32];
    unsigned int flags:4, prio:3;
    signed int delta:5;
    unsigned long long wide:40;
    struct Inner inner;
    struct Inner *next;
    struct Req **pp;
    int grid[2][3][4];
    union { int as_int; float as_float; };
    struct { char a; long b; } anon_s;
    struct { int x1; int y1; };
    enum Color color;
    enum Big big;
    const volatile int *cvp;
    int (*cb)(struct Req *, int);
    struct Opaque *opaque;
    _Bool ok;
    double d;
    long double ld;
    uint8_t u8;
    int16_t i16;
};
typedef struct Req req_t;
typedef req_t *req_ptr;
union Num { int i; double d; char bytes[8]; };

int handle(req_t *r, union Num n, req_ptr *rpp, const char *restrict name, enum Color c, ...)
{ return r->id + n.i + (rpp != 0) + name[0] + c; }

#define M(f) printf("member %s %zu %zu\n", #f, offsetof(struct Req, f), sizeof(((struct Req *)0)->f))
int main(void)
{
    struct Req r;
    memset(&r, 0, sizeof r);
    r.flags = 0xB; r.prio = 5; r.delta = -3; r.wide = 0x123456789AULL;
    printf("sizeof Req %zu\nsizeof Inner %zu\nsizeof Num %zu\n", sizeof(struct Req), sizeof(struct Inner),
           sizeof(union Num));
    M(id); M(path); M(inner); M(next); M(pp); M(grid); M(as_int); M(as_float); M(anon_s); M(x1); M(y1);
    M(color); M(big); M(cvp); M(cb); M(opaque); M(ok); M(d); M(ld); M(u8); M(i16);
    printf("bytes ");
    for (size_t i = 0; i < sizeof r; i++) printf("%02x", ((unsigned char *)&r)[i]);
    printf("\n");
    return handle(&r, (union Num){0}, 0, "x", RED) == 12345;
}
"""

CXX_SOURCE = r"""
#include <cstdio>
namespace ns { struct P { int x; double y; }; int nsfunc(P *p, int n) { return p->x + n; } }
class Shape { public: int w, h; virtual ~Shape() {} int area(int scale) const { return w * h * scale; }
              static int count; };
int Shape::count = 0;
class Square : public Shape { public: long side; char tag; };
extern "C" int cfunc(Shape *s, int &r, const char *msg) { return s->area(r) + msg[0]; }
int over(double d, Shape &s) { return (int)d + s.w; }
int main() {
    Square q; int r = 1; ns::P p{1, 2};
    std::printf("sizeof Shape %zu\nsizeof Square %zu\n", sizeof(Shape), sizeof(Square));
    std::printf("member w %zu\nmember h %zu\n", (size_t)((char *)&q.w - (char *)&q), (size_t)((char *)&q.h - (char *)&q));
    std::printf("member side %zu\nmember tag %zu\n", (size_t)((char *)&q.side - (char *)&q),
                (size_t)((char *)&q.tag - (char *)&q));
    return cfunc(&q, r, "x") + over(2.0, q) + ns::nsfunc(&p, 2) == 12345;
}
"""


@pytest.fixture(scope="module")
def base():
    return load_kernel_spec()


def _build(tmp_path, source: str, flags: list[str], name: str = "prog", cxx: bool = False) -> tuple[str, list[str]]:
    src = tmp_path / (name + (".cc" if cxx else ".c"))
    src.write_text(source)
    exe = str(tmp_path / name)
    subprocess.run(["g++" if cxx else "gcc", *flags, "-O0", "-o", exe, str(src)], check=True, capture_output=True)
    out = subprocess.run([exe], capture_output=True, text=True).stdout.splitlines()
    return exe, out


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCORE_CACHE_DIR", str(tmp_path / "cache"))


def _member(t, name: str, at: int = 0):
    """(member, bit offset from the top) of ``name``, through anonymous members as C reaches them."""
    for m in t.members:
        if m.name == name:
            return m, at + m.bit_offset
        if not m.name:
            inner = m.type
            while inner.kind == Kind.TYPEDEF:
                inner = inner.type
            found = _member(inner, name, at + m.bit_offset)
            if found:
                return found
    return None


def _facts(lines: list[str]) -> tuple[dict[str, int], dict[str, tuple[int, int]], bytes]:
    sizes, members, raw = {}, {}, b""
    for line in lines:
        word = line.split()
        if word[0] == "sizeof":
            sizes[word[1]] = int(word[2])
        elif word[0] == "member":
            members[word[1]] = (int(word[2]), int(word[3]) if len(word) > 3 else -1)
        elif word[0] == "bytes":
            raw = bytes.fromhex(word[1])
    return sizes, members, raw


def _bits(raw: bytes, bit_offset: int, bits: int, signed: bool) -> int:
    v = (int.from_bytes(raw, "little") >> bit_offset) & ((1 << bits) - 1)
    return v - (1 << bits) if signed and v >> (bits - 1) else v


@pytest.mark.parametrize("flags", [["-g"], ["-gdwarf-4"], ["-gdwarf-2"], ["-g", "-fdebug-types-section"]],
                         ids=["dwarf5", "dwarf4", "dwarf2", "dwarf5-type-units"])
def test_c_types_as_gcc_laid_them_out(tmp_path, base, flags):
    exe, out = _build(tmp_path, C_SOURCE, flags)
    sizes, members, raw = _facts(out)
    with DebugInfo.open(exe, base) as dbg:
        req = dbg.named("struct", "Req")
        inner, num = dbg.named("struct", "Inner"), dbg.named("union", "Num")
        spec = dbg.spec
        t = spec.type(req)
        assert (sizeof(t), sizeof(spec.type(inner)), sizeof(spec.type(num))) == \
            (sizes["Req"], sizes["Inner"], sizes["Num"])
        for name, (off, size) in members.items():
            m, bit = _member(t, name)
            assert (name, bit, sizeof(m.type)) == (name, 8 * off, size)
        # the bitfields' values, read from the bytes of the program's struct where BTF says they are
        got = {}
        for name in ("flags", "prio", "delta", "wide"):
            m, bit = _member(t, name)
            assert m.bitfield_size
            got[name] = _bits(raw, bit, m.bitfield_size, m.type.signed)
        assert got == {"flags": 0xB, "prio": 5, "delta": -3, "wide": 0x123456789A}
        kinds = {m.name: m.type for m in t.members}
        grid = kinds["grid"]
        dims = []
        while grid.kind == Kind.ARRAY:
            dims.append(grid.nelems)
            grid = grid.type
        assert dims == [2, 3, 4] and grid.name == "int"
        assert kinds["pp"].kind == Kind.PTR and kinds["pp"].type.kind == Kind.PTR and kinds["pp"].type.type.id == req
        assert kinds["opaque"].type.kind == Kind.FWD and kinds["opaque"].type.name == "Opaque"
        assert kinds["cb"].type.kind == Kind.FUNC_PROTO
        assert kinds["big"].kind == Kind.ENUM64 and dict((v.name, v.value) for v in kinds["big"].values) == \
            {"SMALL": 1, "HUGE": 0x1234567890}
        assert dict((v.name, v.value) for v in kinds["color"].values) == {"RED": -1, "GREEN": 7}
        i16 = kinds["i16"]
        while i16.kind == Kind.TYPEDEF:                          # int16_t -> __int16_t -> short int
            i16 = i16.type
        assert kinds["ok"].is_bool and kinds["d"].kind == Kind.FLOAT and i16.signed and i16.size == 2
        fmt = CFormatter()
        assert fmt.declaration(kinds["cvp"], "cvp") == "const volatile int *cvp"
        assert fmt.declaration(kinds["cb"], "cb") == "int (*cb)(struct Req *, int)"
        assert fmt.definition(spec.type(num)) == "union Num {\n\tint i;\n\tdouble d;\n\tchar bytes[8];\n}"
        assert spec.type(dbg.named("typedef", "req_t")).type.id == req   # one spec, brought up to date
        assert dbg.spec is spec
        assert dbg.spec.type(dbg.named("enum", "Color")).name == "Color"
        assert dbg.named("struct", "Opaque") is not None and dbg.named("struct", "NoSuch") is None

        fn = dbg.function("handle")
        spec = fn.spec
        assert [(n, fmt.declaration(spec.type(i), n)) for n, i in fn.params] == [
            ("r", "req_t *r"), ("n", "union Num n"), ("rpp", "req_ptr *rpp"),
            ("name", "const char *name" if flags == ["-gdwarf-2"] else "const char * restrict name"),  # DWARF 3+
            ("c", "enum Color c")]
        assert fn.variadic and spec.type(fn.ret).name == "int"
        assert dbg.function("no_such_function") is None


def test_cxx_classes(tmp_path, base):
    exe, out = _build(tmp_path, CXX_SOURCE, ["-g"], "cxx", cxx=True)
    sizes, members, _ = _facts(out)
    with DebugInfo.open(exe, base) as dbg:
        square = dbg.spec.type(dbg.named("class", "Square"))
        shape = dbg.spec.type(dbg.named("struct", "Shape"))
        assert (square.kind, sizeof(square), sizeof(shape)) == (Kind.STRUCT, sizes["Square"], sizes["Shape"])
        for name, (off, _) in members.items():
            assert _member(square, name)[1] == 8 * off
        assert [m.name for m in shape.members] == ["w", "h"]      # no vtable pointer, no static member
        fn = dbg.function("cfunc")
        fmt = CFormatter()
        assert [fmt.declaration(fn.spec.type(i), n) for n, i in fn.params] == \
            ["struct Shape *s", "int *r", "const char *msg"]   # a reference is a pointer
        over = dbg.function("_Z4overdR5Shape")                  # C++ by mangled name
        assert [n for n, _ in over.params] == ["d", "s"]
        assert [n for n, _ in dbg.function("_ZN2ns6nsfuncEPNS_1PEi").params] == ["p", "n"]


def test_no_dwarf_and_separate_debug_files(tmp_path, base):
    exe, _ = _build(tmp_path, C_SOURCE, ["-g"])
    plain = str(tmp_path / "plain")
    subprocess.run(["strip", "-g", "-o", plain, exe], check=True)
    assert DebugInfo.open(plain) is None
    # .gnu_debuglink: the DWARF moved into prog.debug beside the stripped binary
    debug = str(tmp_path / "prog.debug")
    subprocess.run(["objcopy", "--only-keep-debug", exe, debug], check=True)
    linked = str(tmp_path / "linked")
    subprocess.run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={debug}", exe, linked], check=True)
    with DebugInfo.open(linked, base) as dbg:
        assert dbg.dwarf_path == debug
        assert dbg.params_text("handle") == ["req_t* r", "union Num n", "req_ptr* rpp", "<unknown type> name",
                                             "enum Color c"]
    with open(debug, "ab") as f:                 # the CRC no longer matches: not that binary's
        f.write(b"x")
    assert DebugInfo.open(linked) is None
    with pytest.raises(ElfError):
        DebugInfo.open(str(tmp_path / "missing"))


def test_index_cache(tmp_path, base, monkeypatch):
    exe, _ = _build(tmp_path, C_SOURCE, ["-g"])
    with DebugInfo.open(exe, base) as dbg:
        assert dbg.named("union", "Num") is not None
        key = dbg._key
    path = cache_path(key)
    assert path.startswith(str(tmp_path / "cache")) and os.path.exists(path)
    with DebugInfo.open(exe, base) as dbg:       # read back, not rebuilt: the file's own index
        dbg._build_index = None
        assert dbg.spec.type(dbg.named("union", "Num")).name == "Num"
    with open(path, "w") as f:
        f.write("{not json")
    with DebugInfo.open(exe, base) as dbg:       # a damaged cache is rebuilt
        assert dbg.named("union", "Num") is not None
    monkeypatch.setenv("PYCORE_CACHE_DIR", "/proc/version/cache")   # cannot be written
    with DebugInfo.open(exe, base) as dbg:
        assert dbg.named("struct", "Req") is not None
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    with DebugInfo.open(exe, base) as dbg:
        assert dbg.named("struct", "Req") is not None


def _functions_seen(dbg) -> tuple[list, int]:  # noqa: ANN001
    fmt, out = CFormatter(), []
    for name in ("handle", "f2", "f1", "main", "no_such"):
        fn = dbg.function(name)
        out.append(None if fn is None else (
            [(n, i, fmt.declaration(fn.spec.type(i), n)) for n, i in fn.params], fn.ret, fn.variadic))
    return out, len(dbg.spec)


@pytest.mark.parametrize("flags", [["-g"], ["-gdwarf-4"], ["-gdwarf-2"], ["-g", "-fdebug-types-section"],
                                   ["-gdwarf-4", "-fdebug-types-section"], ["-g", "-gz"], ["-g", "-O2"]],
                         ids=["dwarf5", "dwarf4", "dwarf2", "dwarf5-type-units", "dwarf4-debug-types", "zlib", "O2"])
def test_function_read_without_pyelftools_as_with(tmp_path, base, monkeypatch, flags):
    """A function's DIE found and converted by pycore.elf.dwarfraw and dwarfscan gives the types,
    ids and spec that pyelftools' reading gives (what the lookup did before)."""
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    exe, _ = _build(tmp_path, BPFTRACE_C, flags)
    got = {}
    for pyelftools in (True, False):
        with DebugInfo.open(exe, base) as dbg:
            if pyelftools:
                dbg._rawdwarf = None
            got[pyelftools] = _functions_seen(dbg)
            # DWARF 4's type units are in .debug_types, which pyelftools reads
            assert (dbg._rawdwarf is None) == (pyelftools or flags == ["-gdwarf-4", "-fdebug-types-section"])
    assert got[False] == got[True]
    assert got[True][0][0][0][0][2] == "req_t *r"


def test_function_across_units_of_a_compressed_debug_info(tmp_path, base, monkeypatch):
    """gcc -flto's function DIE takes its parameters from another unit (DW_FORM_ref_addr): read
    past the part of a compressed .debug_info inflated for the function's unit, the lookup is
    made again with all of it, and gives what pyelftools' reading gives."""
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    (tmp_path / "a.c").write_text("struct S { int x; struct S *next; };\nint use(struct S *s, int k);\n"
                                  "int main(void) { struct S s = {1, 0}; return use(&s, 2); }\n")
    (tmp_path / "b.c").write_text("struct S { int x; struct S *next; };\n"
                                  "__attribute__((noinline)) int use(struct S *s, int k) { return s->x + k; }\n")
    exe = str(tmp_path / "lto")
    subprocess.run(["gcc", "-g", "-O2", "-flto", "-gz", "-o", exe, str(tmp_path / "a.c"), str(tmp_path / "b.c")],
                   check=True)
    got = []
    for pyelftools in (True, False):
        with DebugInfo.open(exe, base) as dbg:
            if pyelftools:
                dbg._rawdwarf = None
            fn = dbg.function("use")
            got.append(sorted((n, CFormatter().declaration(fn.spec.type(i), n)) for n, i in fn.params))
            if not pyelftools:
                assert dbg._rawdwarf is not None and not dbg._rawdwarf.partial
    assert got[0] == got[1] == [("k", "int k"), ("s", "struct S *s")]


def test_function_cache(tmp_path, base, monkeypatch):
    """A function's parameters are kept by build id: a later run reads them back without opening
    the DWARF, and writes the same types with the same ids as a run that read it."""
    exe, _ = _build(tmp_path, BPFTRACE_C, ["-g"])
    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    with DebugInfo.open(exe, base) as dbg:
        want = _functions_seen(dbg)
    assert want[0][0][0][0][2] == "req_t *r" and want[0][4] is None
    monkeypatch.setenv("PYCORE_CACHE_DIR", str(tmp_path / "cache"))
    with DebugInfo.open(exe, base) as dbg:
        assert _functions_seen(dbg) == want
        fn_dir = cache_path(dbg._key + ".fn").removesuffix(".json")
    entries = sorted(os.listdir(fn_dir))
    assert len(entries) == 5
    with DebugInfo.open(exe, base) as dbg:
        dbg._function_die = None                  # read back, not looked up
        assert _functions_seen(dbg) == want
        assert dbg._dwarf is None and dbg._files is None
    with DebugInfo.open(exe, base) as dbg:       # a type the cached entries wrote is not written again
        dbg.function("handle")
        n = len(dbg.spec)
        assert dbg.spec.type(dbg.named("struct", "Req")).name == "Req" and len(dbg.spec) == n
    import json

    for i, name in enumerate(entries):            # damaged entries are recomputed
        path = os.path.join(fn_dir, name)
        if i % 2:
            with open(path, "w") as f:
                f.write("{not json")
            continue
        with open(path) as f:
            data = json.load(f)
        data["entry"] = {"names": ["x"], "variadic": False,
                         "types": {"ids": [7, 9], "records": [["ptr", [3]]], "memo": [], "index": 0}}
        with open(path, "w") as f:
            json.dump(data, f)
    with DebugInfo.open(exe, base) as dbg:
        assert _functions_seen(dbg) == want
    with DebugInfo.open(exe, base) as dbg:
        dbg._function_die = None                  # and kept again
        assert _functions_seen(dbg) == want
    monkeypatch.setenv("PYCORE_CACHE_DIR", "/proc/version/cache")   # cannot be written
    with DebugInfo.open(exe, base) as dbg:
        assert _functions_seen(dbg) == want


def _bpftrace_lv(pattern: str) -> list[str]:
    out = subprocess.run([BPFTRACE, "-lv", pattern], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _ours(capsys, pattern: str) -> list[str]:
    assert main(["list", "-v", pattern]) == 0
    return capsys.readouterr().out.splitlines()


BPFTRACE_C = C_SOURCE.replace("const char *restrict name", "const char *name") + r"""
int f1(const void *p, volatile int v, const char *restrict s, int (*fp)(int, ...), int n, ...) { return v; }
int f2(const struct Req *const cs, char **const pp, unsigned char uc, long double ld, __int128 big) { return 0; }
void f3(void) {}
"""


@pytest.mark.skipif(BPFTRACE is None, reason="bpftrace not installed")
@pytest.mark.parametrize("flags", [["-g"], ["-gdwarf-4"]], ids=["dwarf5", "dwarf4"])
def test_list_v_as_bpftrace(tmp_path, capsys, monkeypatch, flags):
    exe, _ = _build(tmp_path, BPFTRACE_C, flags)
    monkeypatch.chdir(tmp_path)
    for pattern in ("uprobe:./prog:*", f"uprobe:{exe}:handle", "uprobe:./prog:f*"):
        assert _ours(capsys, pattern) == _bpftrace_lv(pattern)
    plain = str(tmp_path / "plain")
    subprocess.run(["strip", "-g", "-o", plain, exe], check=True)
    ours = _ours(capsys, f"uprobe:{plain}:handle")       # no DWARF: addresses, as before
    assert ours[0] == f"uprobe:{plain}:handle" and ours[1].startswith("    address: 0x")


@pytest.mark.skipif(BPFTRACE is None, reason="bpftrace not installed")
def test_list_v_cxx(tmp_path, capsys, monkeypatch):
    """bpftrace 0.17 lists C++ functions mangled, without parameters; an extern "C" one's are equal."""
    exe, _ = _build(tmp_path, CXX_SOURCE, ["-g"], "cxx", cxx=True)
    pattern = f"uprobe:{exe}:cfunc"
    assert _ours(capsys, pattern) == _bpftrace_lv(pattern) == [
        pattern, "    <unknown type>* s", "    <unknown type> r", "    const char* msg"]
    ours = _ours(capsys, f"uprobe:{exe}:over*")
    assert ours == [f"uprobe:{exe}:over(double, Shape&)", "    double d", "    <unknown type> s"]


def _libc_debug() -> bool:
    try:
        dbg = DebugInfo.open(LIBC)
    except ElfError:
        return False
    if dbg is None:
        return False
    dbg.close()
    return True


@pytest.mark.skipif(BPFTRACE is None or not os.path.exists(LIBC) or not _libc_debug(),
                    reason="bpftrace, libc or libc6-dbg missing")
def test_list_v_libc_as_bpftrace(capsys):
    pattern = f"uprobe:{LIBC}:getaddrinfo"
    assert _ours(capsys, pattern) == _bpftrace_lv(pattern) == [
        pattern, "    const char* name", "    const char* service", "    const struct addrinfo* hints",
        "    struct addrinfo** pai"]
    # bpftrace also lists symbol versions (getaddrinfo_a@@GLIBC_2.34), which pycore does not
    theirs = [line for line in _bpftrace_lv("uprobe:libc:getaddr*") if "@" not in line]
    assert _ours(capsys, "uprobe:libc:getaddr*") == theirs


@pytest.mark.skipif(not os.path.exists(LIBC) or not _libc_debug(), reason="libc6-dbg missing")
def test_libc_types(base):
    with DebugInfo.open(LIBC, base) as dbg:
        assert dbg.dwarf_path.startswith("/usr/lib/debug/")
        fn = dbg.function("getaddrinfo")
        fmt = CFormatter()
        assert [fmt.declaration(fn.spec.type(i), n) for n, i in fn.params] == [
            "const char *name", "const char *service", "const struct addrinfo *hints", "struct addrinfo **pai"]
        ai = fn.spec.type(fn.params[2][1]).type.type
        assert [m.name for m in ai.members] == ["ai_flags", "ai_family", "ai_socktype", "ai_protocol",
                                                "ai_addrlen", "ai_addr", "ai_canonname", "ai_next"]
        assert sizeof(ai) == 48 and ai.members[-1].type.type.id == ai.id
        assert dbg.named("struct", "addrinfo", near="getaddrinfo") == ai.id
        assert dbg._index is None             # found in getaddrinfo's unit, no whole-file index
        assert dbg.named("struct", "sockaddr_in6") is not None and dbg._index is not None


def _same_dies(path: str, max_units: int) -> int:
    """Every DIE of the first ``max_units`` units as pycore's fast reader decodes it and as
    pyelftools does: tag, children, and each attribute's form and value."""
    from pycore.elf.dwarfscan import Scanner

    with DebugInfo.open(path) as dbg:
        dw = dbg._dw
        scanner = Scanner(dw)
        seen = 0
        for n, (unit, cu) in enumerate(zip(scanner.units(), dw.iter_CUs())):
            if n == max_units:
                break
            assert unit.offset == cu.cu_offset
            for die in cu.iter_DIEs():
                mine = unit.die_at(die.offset)
                if die.is_null():
                    assert mine is None
                    continue
                assert (mine.tag, mine.has_children, mine.end - mine.offset) == (die.tag, die.has_children, die.size)
                theirs = {k: (a.form, list(a.value) if isinstance(a.value, list) else a.value)
                          for k, a in die.attributes.items()}
                ours = {k: (a.form, list(a.value) if isinstance(a.value, bytes) and a.form not in (
                    "DW_FORM_strp", "DW_FORM_line_strp", "DW_FORM_string") and not a.form.startswith("DW_FORM_strx")
                    else a.value) for k, a in mine.attributes.items()}
                assert ours == theirs, die.offset
                seen += 1
            unit.release()
    return seen


@pytest.mark.parametrize("flags", [["-g"], ["-gdwarf-4"], ["-gdwarf-2"]], ids=["dwarf5", "dwarf4", "dwarf2"])
def test_fast_reader_equals_pyelftools(tmp_path, flags):
    exe, _ = _build(tmp_path, C_SOURCE, flags)
    assert _same_dies(exe, 1000) > 100
    cxx, _ = _build(tmp_path, CXX_SOURCE, flags, "cxx", cxx=True)
    assert _same_dies(cxx, 1000) > 100


@pytest.mark.skipif(not os.path.exists(LIBC) or not _libc_debug(), reason="libc6-dbg missing")
def test_fast_reader_equals_pyelftools_on_libc():
    assert _same_dies(LIBC, 40) > 5000


def test_on_a_split_base(tmp_path, base):
    """The DWARF's BTF on top of a spec that is itself split (a script's declarations on vmlinux)."""
    from btf.writer import Writer

    w = Writer.split(base)
    declared = w.struct("Declared", 4, [("x", w.int("int", 4, signed=True), 0)])
    middle = w.spec(base)
    exe, _ = _build(tmp_path, C_SOURCE, ["-g"])
    with DebugInfo.open(exe, middle) as dbg:
        fn = dbg.function("handle")
        spec = dbg.spec
        assert spec.type(declared).name == "Declared" and spec.type(1).kind == base.type(1).kind
        assert CFormatter().declaration(spec.type(fn.params[0][1]), "r") == "req_t *r"
        assert min(i for _, i in fn.params) >= len(middle)
    with DebugInfo.open(exe) as dbg:              # no base: a BTF of its own (what pycore trace reads)
        fn = dbg.function("handle")
        spec = dbg.spec
        assert spec.base is None and spec.first_id == 1 and fn.spec is spec
        assert CFormatter().declaration(spec.type(fn.params[0][1]), "r") == "req_t *r"
        assert max(i for _, i in fn.params) < len(spec) < len(base)


LOCAL_C = r"""
#include <stdio.h>
struct Req { int id; char path[16]; };
static __attribute__((noinline)) int local_handle(struct Req *r, int n) { return r->id + n; }
int main(void) { struct Req r = { 7, "/x" }; int s = 0; for (int i = 0; i < 3; i++) s += local_handle(&r, i);
                 printf("%d\n", s); return 0; }
"""


def _symtab_address(path: str, name: str) -> int | None:
    from pycore.elf.file import ElfFile

    with ElfFile(path) as f:
        return next((value for sym, value, *_ in f.raw_symbols(".symtab") if sym == name), None)


def test_local_functions_from_the_debug_files_symtab(tmp_path, capsys):
    """A stripped binary names its static functions only in its debug file's .symtab (issue 30):
    listed from there, at the binary's addresses, with their parameters, as bpftrace lists them;
    not listed without the debug file."""
    from pycore.elf.symbols import find_function, functions

    exe, _ = _build(tmp_path, LOCAL_C, ["-g"])
    debug = str(tmp_path / "prog.debug")
    subprocess.run(["objcopy", "--only-keep-debug", exe, debug], check=True)
    stripped = str(tmp_path / "stripped")
    subprocess.run(["objcopy", "--strip-all", f"--add-gnu-debuglink={debug}", exe, stripped], check=True)
    plain = str(tmp_path / "plain")
    subprocess.run(["objcopy", "--strip-all", exe, plain], check=True)
    assert _symtab_address(stripped, "local_handle") is None            # no .symtab left
    where = _symtab_address(exe, "local_handle")
    assert where
    fn = find_function(stripped, "local_handle")
    assert (fn.name, fn.address) == ("local_handle", where)
    assert [f.address for f in functions(stripped) if f.name == "local_handle"] == [where]
    assert "local_handle" not in {f.name for f in functions(plain)}
    expected = [f"uprobe:{stripped}:local_handle", "    struct Req* r", "    int n"]
    assert _ours(capsys, f"uprobe:{stripped}:local_*") == expected
    if BPFTRACE:
        assert _bpftrace_lv(f"uprobe:{stripped}:local_*") == expected
    assert main(["list", f"uprobe:{plain}:local_*"]) == 1


@pytest.mark.skipif(BPFTRACE is None or not os.path.exists(LIBC) or not _libc_debug(),
                    reason="bpftrace, libc or libc6-dbg missing")
def test_list_v_libc_local_functions_as_bpftrace(capsys):
    """libc's static functions (fopencookie's _IO_cookie_*), named only in libc6-dbg's .symtab: listed
    with their parameters as bpftrace lists them. Before issue 30 pycore left them out (9 of 40 libc
    functions bpftrace lists with parameters)."""
    from pycore.elf.file import ElfFile

    with ElfFile(LIBC) as f:
        assert not [s for s in f.raw_symbols(".dynsym") if s[0].startswith("_IO_cookie_")]
    pattern = f"uprobe:{LIBC}:_IO_cookie_*"
    ours = _ours(capsys, pattern)
    assert ours == _bpftrace_lv(pattern)
    assert ours[ours.index(f"uprobe:{LIBC}:_IO_cookie_write"):][:4] == [
        f"uprobe:{LIBC}:_IO_cookie_write", "    FILE* fp", "    const <unknown type>* buf", "    ssize_t size"]


def test_list_vv_adds_addresses(tmp_path, capsys):
    """-vv: the parameters, then pycore's address and size line."""
    exe, _ = _build(tmp_path, C_SOURCE, ["-g"])
    assert main(["list", "-vv", f"uprobe:{exe}:handle"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:6] == ["    req_t* r", "    union Num n", "    req_ptr* rpp", "    <unknown type> name",
                          "    enum Color c"] and lines[6].startswith("    address: 0x") and len(lines) == 7


@pytest.mark.skipif(not os.path.exists(LIBC) or not _libc_debug(), reason="libc6-dbg missing")
def test_libc_functions_convert(base):
    """Every 100th function of libc's DWARF: converted, each written type decodes, and its
    parameters and structs format as C (real-world DWARF: glibc's own types)."""
    fmt = CFormatter()
    with DebugInfo.open(LIBC, base) as dbg:
        names = sorted(dbg._get_index()["functions"])[::100]
        found = [fn for fn in map(dbg.function, names) if fn is not None]
        assert len(found) > 40
        spec = dbg.spec
        for fn in found:
            assert len(fn.params) == len(dbg.params_text(fn.name))
            for name, tid in fn.params:
                assert fmt.declaration(spec.type(tid), name)
        for tid in range(spec.first_id, len(spec)):
            t = spec.type(tid)
            if t.kind in (Kind.STRUCT, Kind.UNION) and t.name:
                assert fmt.definition(t).startswith(("struct", "union"))


def test_dwarf_names_are_pyelftools():
    """pycore.elf.dwarfnames (what the fast reader names tags, attributes and forms by, without
    importing pyelftools) holds pyelftools' own tables, inverted as the reader inverted them."""
    from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_TAG

    from pycore.elf.dwarfnames import ATTRIBUTES, FORMS, TAGS

    for mine, theirs in ((TAGS, ENUM_DW_TAG), (ATTRIBUTES, ENUM_DW_AT), (FORMS, ENUM_DW_FORM)):
        assert mine == {v: k for k, v in theirs.items() if k != "_default_"}


def _symbols_by_walk(f, secname: str, name: str) -> list:
    return [s for s in f.raw_symbols(secname) if s[0] == name or s[0].startswith(name + "@")]


@pytest.mark.parametrize("where", ["built", "libc"])
def test_named_symbols_as_the_walk(tmp_path, where):
    """ElfFile.named_symbols (one function's address for its DWARF, found through the string
    table) gives the entries a walk of the whole table gives, in order: versioned names
    (name@VER, name@@VER), names that end others' (open, fopen), several of one name, none."""
    from pycore.elf.file import ElfFile

    if where == "libc":
        if not os.path.exists(LIBC) or not _libc_debug():
            pytest.skip("libc6-dbg missing")
        with DebugInfo.open(LIBC) as dbg:
            paths = [LIBC, dbg.dwarf_path]
    else:
        paths = [_build(tmp_path, C_SOURCE, ["-g"])[0]]
    for path in paths:
        with ElfFile(path) as f:
            for secname in (".dynsym", ".symtab"):
                names = sorted({s[0].split("@", 1)[0] for s in f.raw_symbols(secname)} - {""})
                if where == "libc":
                    names = names[::25] + ["open", "memcpy", "pthread_kill", "__PRETTY_FUNCTION__.0"]
                for name in names + ["no_such_symbol", "main@"]:
                    assert f.named_symbols(secname, name) == _symbols_by_walk(f, secname, name), (path, name)


@pytest.mark.skipif(not os.path.exists(LIBC) or not _libc_debug(), reason="libc6-dbg missing")
def test_inflating_thread_and_a_damaged_end(tmp_path, monkeypatch):
    """libc's debug file with the end of its compressed .debug_info damaged (the zlib check
    value): a function whose unit comes before it is read as from the sound file, whatever the
    thread that inflates the section ahead of the reader met past it; reading all of it is an
    ElfError, as it was when the reader inflated it itself."""
    from pycore.elf.sections import Sections

    monkeypatch.setenv("PYCORE_CACHE_DIR", "off")
    with DebugInfo.open(LIBC) as dbg:
        sound = dbg.dwarf_path
    damaged = str(tmp_path / "libc.debug")
    shutil.copy(sound, damaged)
    with Sections(damaged) as secs:
        sec = secs.get_section_by_name(".debug_info")
        end = sec["sh_offset"] + sec["sh_size"]
    with open(damaged, "r+b") as f:
        f.seek(end - 4)
        check = f.read(4)
        f.seek(end - 4)
        f.write(bytes(b ^ 0xFF for b in check))
    got = []
    for path in (sound, damaged):
        with DebugInfo.open(path) as dbg:
            dbg.prefetch("open_by_handle_at")
            info = dbg._rawdwarf._info
            with info._cond:                      # the thread has been to the end (and met the damage)
                info._cond.wait_for(lambda: not info._running)  # noqa: B023 - called here
            assert (info._error is not None) == (path == damaged)
            fn = dbg.function("open_by_handle_at")
            got.append([(n, CFormatter().declaration(fn.spec.type(i), n)) for n, i in fn.params])
            if path == damaged:
                with pytest.raises(ElfError, match="malformed DWARF"):
                    with dwarf_errors(path):
                        dbg._rawdwarf.complete()
    assert got[0] == got[1] == [("mount_fd", "int mount_fd"), ("handle", "struct file_handle *handle"),
                                ("flags", "int flags")]
