"""C declarations in a script (pycore.lang.cdecl): layouts equal gcc's, side by side with bpftrace 0.17,
errors as one line, and random text never a traceback.

The layouts are compared with a program gcc builds from the same declarations: for every struct it
prints sizeof, the offset of each member (bits), and each bitfield's first bit and width, found by
setting the field to all ones in a zeroed struct; and the offset of the struct inside a wrapper that
starts with a char, which is its alignment.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from btf.kinds import Kind
from btf.layout import sizeof, skip
from pycore.lang.cdecl import DeclError, declare
from pycore.lang.checker import Checker
from pycore.lang.errors import ScriptError
from pycore.lang.macros import Macros
from pycore.lang.parser import parse
from tests.test_trace import bpftrace, pycore, side_by_side

FIXED = r"""
#include <stdint.h>
#include <stddef.h>
struct Req { int id; char path[32]; unsigned int flags:4, prio:3; };
struct straddle { char c; unsigned int a:7; unsigned int b:30; unsigned long long c2:40, d:30; short s:9; };
struct zero { char a:3; int :0; char b:2; long :0; char c; unsigned :0; };
struct unnamed { char a; int :5; long long :3; char b; };
struct boolbits { _Bool x:1; _Bool y; unsigned char u:7, v:2; };
union U { int i; char c[5]; long long l; unsigned int bits:12; };
struct anon { int a; union { int b; float f; }; struct { char c; double d; }; short e; };
struct nested { struct Req r; union U u[3]; struct anon an; char tail; };
struct multi { char m[2][3][5]; int n[4][2]; long double ld[2]; char last; };
struct ptrs { char **pp; struct ptrs *self; void (*cb)(int, char *); const volatile int *cv; int ***ppp; };
enum small { S1, S2 = 3 };
enum neg { N1 = -5, N2 = 7 };
enum big { B1 = 0x100000000 };
enum ubig { UB = 0xffffffff };
enum negbig { NB1 = -1, NB2 = 0x80000000 };
struct enums { enum small a; char c; enum neg b; enum big d; enum ubig e; enum negbig f; enum small g:3; };
typedef struct { int x; char y; } pair_t;
typedef pair_t pairs_t[3];
typedef unsigned long ulong_t;
struct typed { pair_t p; pairs_t ps; ulong_t u; uint8_t b; uint16_t w; int64_t q; size_t n; };
struct __attribute__((packed)) packed1 { char c; int x; short s; long long l; };
struct packed2 { char c; int x; unsigned a:3, b:30; } __attribute__((packed));
struct aligned1 { char c; int x __attribute__((aligned(16))); char d; };
struct aligned2 { char c; } __attribute__((aligned(8)));
struct mixpack { char c; int x __attribute__((packed)); struct aligned2 a2; };
struct flex { int n; char data[]; };
struct widths { unsigned long long a:1, b:63; signed char sc:1; int i:31, j:2; };
struct big_and_small { long double ld; char c; __int128 i; unsigned __int128 u; };
#define N 7
struct macro_sized { char buf[N * 2]; int arr[sizeof(int) + 1]; };
"""

FIXED_STRUCTS = ["Req", "straddle", "zero", "unnamed", "boolbits", "anon", "nested", "multi", "ptrs", "enums",
                 "typed", "packed1", "packed2", "aligned1", "aligned2", "mixpack", "flex", "widths", "big_and_small",
                 "macro_sized"]
FIXED_UNIONS = ["U"]


def _kernel():
    from btf.spec import load_kernel_spec

    return load_kernel_spec()


def _ours(text: str):
    return declare(Macros(text, "<script>").text(), _kernel())


def _fields(spec, type_id: int, base: int, prefix: str, out: list) -> None:
    """(C access path, bit offset, bits, is bitfield) of every named member, through anonymous ones."""
    for m in spec.type(type_id).members:
        t = skip(m.type)
        if not m.name:
            _fields(spec, t.id, base + m.bit_offset, prefix, out)
            continue
        bits = m.bitfield_size or sizeof(m.type) * 8
        out.append((prefix + m.name, base + m.bit_offset, bits, bool(m.bitfield_size)))


def _compare_with_gcc(tmp_path, decls: str, structs: list[tuple[str, str]]) -> int:
    """Compile one program over ``decls`` printing gcc's layout of each (kind, name); assert ours equal.
    Returns how many members were compared."""
    # ours: the same text, and a wrapper of each starting with a char (where it lands is its alignment)
    wrappers = "".join(f"struct w_{name} {{ char c; {kind} {name} s; }};\n" for kind, name in structs)
    spec, skipped = _ours(decls + wrappers)
    assert skipped == []
    ours: list[str] = []
    body: list[str] = []
    for kind, name in structs:
        ids = spec.ids_named(name, (Kind.UNION if kind == "union" else Kind.STRUCT,))
        rec = spec.type(ids[0])
        fields: list = []
        _fields(spec, rec.id, 0, "", fields)
        ctype = f"{kind} {name}"
        wrap = f"w_{name}"
        body.append(f"{{ struct {wrap} {{ char c; {ctype} s; }}; printf(\"{name} %zu %zu\\n\", sizeof({ctype}), "
                    f"offsetof(struct {wrap}, s)); }}")
        wrapped = spec.type(spec.ids_named(wrap, (Kind.STRUCT,))[0])
        ours.append(f"{name} {rec.size} {wrapped.members[1].bit_offset // 8}")
        for path, off, bits, bitfield in fields:
            if bitfield:
                body.append(f"{{ union {{ {ctype} s; unsigned char b[sizeof({ctype})]; }} u; memset(&u, 0, sizeof u);"
                            f" u.s.{path} = -1; bits(\"{name}.{path}\", u.b, sizeof u.b); }}")
            else:     # (a flexible array has no size in C: its offset alone is compared)
                size = f"sizeof((({ctype} *)0)->{path}) * 8" if bits else "(size_t)0"
                body.append(f"printf(\"{name}.{path} %zu %zu\\n\", offsetof({ctype}, {path}) * 8, {size});")
            ours.append(f"{name}.{path} {off} {bits}")
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n" + decls + r"""
static void bits(const char *name, const unsigned char *b, size_t n) {
    long first = -1, count = 0;
    for (size_t i = 0; i < n * 8; i++)
        if (b[i / 8] >> (i % 8) & 1) { if (first < 0) first = (long)i; count++; }
    printf("%s %ld %ld\n", name, first, count);
}
int main(void) {
""" + "\n".join(body) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-w", "-o", str(exe), str(src)], check=True)
    theirs = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert ours == theirs
    return len(ours)


def test_fixed_declarations_laid_out_as_gcc(tmp_path):
    """Every feature: bitfields (straddling, zero-width, unnamed, bool, 64-bit), unions, anonymous members,
    nesting, arrays of several dimensions, pointers to pointers and functions, enums of each size and sign,
    typedefs, <stdint.h>'s types, packed and aligned(N), flexible arrays, __int128, macros in sizes."""
    structs = [("struct", n) for n in FIXED_STRUCTS] + [("union", n) for n in FIXED_UNIONS]
    assert _compare_with_gcc(tmp_path, FIXED, structs) > 100


def test_kernel_names_in_declarations():
    """Names the script does not define are the kernel's, by id: its typedefs (u8, u64, several at once,
    found in one retry), a kernel struct by value (laid out by its BTF size) and by pointer; a typedef
    of the script's own wins over the kernel's of that name."""
    kernel = _kernel()
    path = kernel.find("path", Kind.STRUCT)
    spec, _ = _ours("struct K { u8 a; u64 b; struct path p; char c; struct task_struct *t; s16 d; };\n")
    k = spec.type(spec.ids_named("K", (Kind.STRUCT,))[0])
    offsets = {m.name: m.bit_offset // 8 for m in k.members}
    after_path = 16 + path.size
    assert offsets == {"a": 0, "b": 8, "p": 16, "c": after_path, "t": after_path + 8, "d": after_path + 16}
    assert {m.name: m.type_id for m in k.members}["p"] == path.id          # the kernel's own record
    assert spec.type({m.name: m.type_id for m in k.members}["t"]).type_id == kernel.find("task_struct", Kind.STRUCT).id
    spec, _ = _ours("typedef unsigned char u64;\nstruct B { u64 a; u64 b; u32 c; };\n")
    assert spec.type(spec.ids_named("B", (Kind.STRUCT,))[0]).size == 8


_SCALARS = ["char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
            "unsigned long", "long long", "unsigned long long", "_Bool", "float", "double", "long double",
            "void *", "char *"]
_BITFIELD_TYPES = {"char": 8, "unsigned char": 8, "short": 16, "unsigned short": 16, "int": 32, "unsigned int": 32,
                   "long": 64, "unsigned long": 64, "long long": 64, "unsigned long long": 64}


@st.composite
def _member(draw, name: str, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["scalar", "scalar", "array", "bitfield", "bitfield", "bitfield", "nested"]
                                if depth < 2 else ["scalar", "bitfield"]))
    if kind == "scalar":
        t = draw(st.sampled_from(_SCALARS))
        attr = draw(st.sampled_from(["", "", "", " __attribute__((aligned(2)))", " __attribute__((aligned(16)))",
                                     " __attribute__((packed))"]))
        return f"{t} {name}{attr};"
    if kind == "array":
        t = draw(st.sampled_from(_SCALARS))
        dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        return f"{t} {name}{''.join(f'[{d}]' for d in dims)};"
    if kind == "bitfield":
        t = draw(st.sampled_from(sorted(_BITFIELD_TYPES)))
        width = draw(st.integers(0, _BITFIELD_TYPES[t]))
        named = width > 0 and draw(st.booleans() | st.just(True))
        return f"{t} {name if named else ''}:{width};"
    inner = draw(st.lists(st.integers(0, 10**6).map(lambda k: k), min_size=1, max_size=4))
    members = " ".join(draw(_member(f"{name}_{j}", depth + 1)) for j in range(len(inner)))
    word = draw(st.sampled_from(["struct", "union"]))
    return f"{word} {{ {members} }}{'' if draw(st.booleans()) else ' ' + name};"


@st.composite
def _structs(draw) -> list[tuple[str, str, str]]:
    out = []
    for k in range(draw(st.integers(10, 25))):
        word = draw(st.sampled_from(["struct", "struct", "union"]))
        n = draw(st.integers(1, 8))
        members = [draw(_member(f"m{i}")) for i in range(n)]
        if out and draw(st.booleans()):
            prev = draw(st.sampled_from(out))
            members.append(f"{prev[0]} {prev[1]} inner_{k}[{draw(st.integers(1, 2))}];")
        if not any(":" not in m or m.split(":")[0].split()[-1].startswith("m") for m in members):
            members.append("int named_last;")
        attr = draw(st.sampled_from(["", "", "", " __attribute__((packed))", " __attribute__((aligned(32)))"]))
        out.append((word, f"r{k}", f"{word} r{k} {{ {' '.join(members)} }}{attr};"))
    return out


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])    # no shrinking: a failure prints its declarations
@given(_structs())
def test_random_structs_laid_out_as_gcc(tmp_path_factory, structs):
    """Random structs and unions (members of every scalar type, arrays, bitfields of each width and type,
    named and anonymous nested records, packed, aligned): gcc's layout, one program per example."""
    decls = "\n".join(s[2] for s in structs) + "\n"
    try:
        _compare_with_gcc(tmp_path_factory.mktemp("rand"), decls, [(w, n) for w, n, _ in structs])
    except AssertionError:
        print(decls)
        raise


# -- side by side with bpftrace 0.17 --------------------------------------------------------------

SERVER = r"""
#include <stdio.h>
#include <string.h>
struct Req { int id; char path[32]; unsigned int flags:4, prio:3; struct Req *next; long long big; };
__attribute__((noinline)) int handle(struct Req *r) { asm volatile(""); return r->id; }
int main(void) {
    struct Req second = { 7, "/second", 15, 0, 0, -5 };
    struct Req r = { 42, "/index.html", 9, 5, &second, 1LL << 40 };
    for (int i = 0; i < 3; i++) { r.id = 42 + i; handle(&r); }
    handle(&second);
    return 0;
}
"""

DECL = "struct Req { int id; char path[32]; unsigned int flags:4, prio:3; struct Req *next; long long big; };\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("cdecl")
    (d / "server.c").write_text(SERVER)
    exe = d / "server"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(d / "server.c")], check=True)   # (-O1: gcc drops the fields handle() does not read)
    return str(exe)


def test_uprobe_struct_declared_in_the_script(server):
    """The issue's example: fields, bitfields, str() of a char array, a pointer to the same struct,
    sizeof, as bpftrace 0.17 reads them, in text and json."""
    program = DECL + (f'uprobe:{server}:handle {{ $r = (struct Req *)arg0; '
                      'printf("%d %s %d %d %lld %d\\n", $r->id, $r->path, $r->flags, $r->prio, $r->big, '
                      'sizeof(struct Req)); @[$r->path] = count(); '
                      'if ($r->next != 0) { @next[$r->next->id] = count(); } }')
    for fmt in ("text", "json"):
        ours, theirs = side_by_side(program, "-f", fmt, "-c", server)
        assert ours == theirs, fmt
    assert '"data": "42 /index.html 9 5 1099511627776 56\\n"' in ours and '"data": "7 /second 15 0 -5 56\\n"' in ours


def test_print_of_a_declared_struct(server):
    """print(*$r): every field, bitfields masked and pointers in hex. bpftrace 0.17 prints both
    bitfields as their whole byte (.flags = 89, .prio = 89) and the pointer in decimal."""
    program = DECL + f"uprobe:{server}:handle {{ print(*(struct Req *)arg0); }}"
    r = pycore("-c", server, "-e", program)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 4
    assert re.fullmatch(r"\{ \.id = 42, \.path = /index\.html, \.flags = 9, \.prio = 5, \.next = 0x[0-9a-f]+, "
                        r"\.big = 1099511627776 \}", lines[0]), lines[0]
    assert lines[3] == "{ .id = 7, .path = /second, .flags = 15, .prio = 0, .next = 0x0, .big = -5 }"
    theirs = bpftrace("-c", server, "-e", program).stdout
    assert ".flags = 89, .prio = 89" in theirs      # (9 | 5 << 4: the byte both share)


def test_cast_of_ctx_to_a_declared_struct(server):
    """ctx (the probe's pt_regs, in kernel memory) cast to a declared struct: its di is arg0."""
    program = ("struct regs { unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di; };\n"
               f'uprobe:{server}:handle {{ $r = (struct regs *)ctx; printf("%d\\n", $r->di == arg0); }}')
    ours, theirs = side_by_side(program, "-c", server)
    assert ours == theirs and ours.count("1\n") == 4


def test_tools_headers_in_the_btf_branch_load_no_c_parser():
    """bpftrace's tools #include their headers under #ifndef BPFTRACE_HAVE_BTF: on a kernel with BTF
    they declare nothing, so neither the preprocessor nor pycparser is loaded for their casts."""
    import sys

    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pycore", "trace", "--dry-run",
                        "/usr/sbin/naptime.bt"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    imported = [ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")]
    assert "pycore.lang.checker" in imported
    assert not [m for m in imported if m.startswith(("pcpp", "pycparser"))]


def test_declarations_without_semicolons_as_bpftrace():
    """bpftrace (clang) takes 'struct R { int a }' with no ';' after the last member or the '}'."""
    ours, theirs = side_by_side("struct R { int a; char b }\nstruct Q { struct R r; int z }\n"
                                'BEGIN { printf("%d %d\\n", sizeof(struct R), sizeof(struct Q)); exit(); }')
    assert ours == theirs == "8 12\n\n\n"


def test_sizeof_of_declared_types_and_values_as_bpftrace():
    """sizeof of a declared struct, of *p, of a 2-D array member and of a nested struct member; a cast to
    a pointer to a pointer of a declared struct."""
    ours, theirs = side_by_side(
        "struct Req { int id; char path[32]; union { int a; long b; }; struct { char c; } nested; int grid[2][3]; };\n"
        'BEGIN { $pp = (struct Req **)0; $p = (struct Req *)0; printf("%d %d %d %d\\n", sizeof(struct Req), '
        "sizeof(*$p), sizeof($p->grid), sizeof($p->nested)); exit(); }")
    assert ours == theirs == "80 80 24 1\n\n\n"


def test_declared_type_in_begin_and_shadowing():
    """sizeof and enums of declarations in BEGIN; a declared task_struct hides the kernel's: its pid
    field, declared at the kernel's offset, is the task's pid, in both tracers."""
    from btf.spec import load_kernel_spec

    task = load_kernel_spec().find("task_struct", Kind.STRUCT)
    pid = next(m for m in task.members if m.name == "pid").bit_offset // 8
    program = (f"struct task_struct {{ char pad[{pid}]; int pid; }};\nenum Color {{ RED = 5, GREEN }};\n"
               "struct ts { long sec; long nsec; };\n"
               'BEGIN { printf("%d %d %d\\n", sizeof(struct ts), GREEN, curtask->pid == pid); exit(); }')
    ours, theirs = side_by_side(program)
    assert ours == theirs == "16 6 1\n\n\n"
    # bpftrace 0.17 takes sizeof of a shadowed struct from the kernel's BTF (3264 here) while reading
    # its fields from the declaration; pycore's declaration is the whole type
    r = pycore("-e", program.replace("sizeof(struct ts)", "sizeof(struct task_struct)"))
    assert r.stdout.startswith(f"{pid + 4} 6 1\n")


def test_declared_struct_in_a_tracepoint(tmp_path):
    """A syscall's user pointer cast to a declared struct (clock_nanosleep's timespec)."""
    program = ("struct myts { long sec; long nsec; };\n"
               "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { $t = (struct myts *)args->rqtp; "
               'printf("%d %d\\n", $t->sec, $t->nsec); }')
    ours, theirs = side_by_side(program, "-c", "/usr/bin/sleep 0.01")
    assert ours == theirs and "0 10000000\n" in ours


@pytest.mark.kernel
def test_kprobe_and_kfunc_casts_to_declared_structs():
    """In the VMs: a kprobe's argument and a kfunc's typed argument cast to a declared struct laid over
    the kernel's struct path read the same pointer as the kernel's own type, as in bpftrace."""
    check = "@[(uint64)$p->dentry == (uint64)((struct path *){arg})->dentry] = count();"
    for probe, arg in (("kfunc:vfs_open", "args->path"), ("kprobe:vfs_open", "arg0")):
        program = ("struct mypath { void *mnt; void *dentry; };\n"
                   f'{probe} /comm == "cat"/ {{ $p = (struct mypath *){arg}; {check.format(arg=arg)} }}')
        ours, theirs = side_by_side(program, "-c", "/usr/bin/cat /etc/hostname")
        assert re.search(r"(?m)^@\[1\]: [1-9]", ours) and "@[0]" not in ours, ours
        assert [ln for ln in ours.splitlines() if ln.startswith("@")] == \
            [ln for ln in theirs.splitlines() if ln.startswith("@")]


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("decl, message", [
    ("struct Req { int id; char path[32] foo; };", "1:36: error: C declaration: syntax error before foo"),
    ("struct Req { int id; blah_t y; };", "1:22: error: C declaration: unknown type name 'blah_t'"),
    ("struct Req { int id:40; };", "1:18: error: bitfield 'id' has an invalid width 40"),
    ("struct A { struct C c; };", "1:21: error: member 'c' has incomplete type 'struct C'"),
])
def test_bad_declaration_one_line_exit_2(decl, message):
    r = pycore("-e", decl + "\nBEGIN { exit(); }")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("stdin:" + message), r.stderr
    assert r.stderr.splitlines()[1] == decl and r.stderr.splitlines()[2].strip() == "^"


def test_unknown_type_says_where_it_looked():
    r = pycore("-e", "struct A { int x; };\nBEGIN { $p = (struct Nope *)0; exit(); }")
    assert r.returncode == 2
    assert "unknown type 'struct Nope': not in the script's C declarations, nor in this kernel's BTF" in r.stderr
    r = pycore("-e", "BEGIN { $p = (struct Nope *)0; exit(); }")
    assert "unknown type 'struct Nope': not in this kernel's BTF" in r.stderr


def test_top_level_typedef_refused_as_bpftrace_does():
    """bpftrace 0.17's grammar takes struct, union and enum definitions only: a typedef line is a
    syntax error in both (typedefs work in #include'd headers)."""
    program = "struct A { int x; };\ntypedef unsigned int myint;\nBEGIN { exit(); }"
    r = pycore("-e", program)
    assert r.returncode == 2
    assert r.stderr.startswith("stdin:2:1: error: a typedef line is not taken before the probes (nor by bpftrace")
    assert bpftrace("-e", program).returncode != 0


def test_header_declarations_and_unreadable_headers(tmp_path):
    """A type of an #include'd header (typedefs too); a header pycparser cannot read is passed over."""
    (tmp_path / "req.h").write_text("typedef struct req { int id; char path[16]; } req_t;\n"
                                    "enum mode { M_A = 3, M_B };\n")
    (tmp_path / "bad.h").write_text("int x = __builtin_choose_expr(1, 2, 3) @@@ ;\n")
    program = (f'#include "{tmp_path}/bad.h"\n#include "{tmp_path}/req.h"\n'
               'BEGIN { $r = (req_t *)0; printf("%d %d %d\\n", sizeof(req_t), M_B, sizeof(struct req)); exit(); }')
    r = pycore("-e", program)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("20 4 20\n")
    r = pycore("-e", program.replace("sizeof(struct req))", "sizeof(struct nope))"))
    assert r.returncode == 2
    assert (f"unknown type 'struct nope': not in the script's C declarations; pycore's C parser could not read "
            f"{tmp_path}/bad.h:1: ") in r.stderr, r.stderr


def test_system_header_types_and_enum_constants_as_bpftrace():
    """<sys/socket.h> read as bpftrace's clang reads it: glibc's struct msghdr (56 bytes) hides the kernel's,
    and its enum constants are names, those behind '#define MSG_PEEK MSG_PEEK' too."""
    ours, theirs = side_by_side('#include <sys/socket.h>\nBEGIN { printf("%d %d %d %d\\n", sizeof(struct msghdr), '
                                "sizeof(struct sockaddr), SHUT_WR, MSG_PEEK); exit(); }")
    assert ours == theirs == "56 16 1 2\n\n\n"


def test_missing_user_header_is_an_error(tmp_path):
    """A user's "header" that is not there is an error at its line, as clang's in bpftrace (a struct of that
    name must not silently become the kernel's: struct req is one); a system <header> is passed over
    (the kernel's BTF has the types bpftrace's old tools include <linux/...> for)."""
    program = '#include "no-such-req.h"\nBEGIN { printf("%d\\n", sizeof(struct req)); exit(); }'
    r = pycore("-e", program)
    assert r.returncode == 2 and r.stderr.startswith('stdin:1:1: error: #include "no-such-req.h": no such file')
    assert bpftrace("-e", program).returncode != 0
    r = pycore("-e", '#include <no/such/header.h>\nBEGIN { printf("%d\\n", sizeof(struct path)); exit(); }')
    assert r.returncode == 0 and r.stdout.startswith("16\n"), r.stderr


# -- fuzz: random text where a declaration goes ------------------------------------------------------

_TOKENS = ["struct", "union", "enum", "typedef", "int", "char", "unsigned", "long", "{", "}", ";", ":", ",", "*",
           "(", ")", "[", "]", "=", "0", "1", "-1", "4294967296", "x", "y", "u64", "size_t", "struct task_struct",
           "__attribute__((packed))", "__attribute__((aligned(3)))", "aligned", "sizeof", "<<", "/", "'a'", "0x10",
           "void", "_Bool", "const", "__int128", "float", "#define Q 1\n", "\n", "Q", "[[x]]", "...", "struct X"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(_TOKENS), max_size=30), st.text(max_size=20))
def test_random_declarations_never_a_traceback(tokens, noise):
    body = " ".join(tokens) + " " + noise.replace("}", "")
    src = f"struct F {{ {body} }};\nBEGIN {{ exit(); }}"
    try:
        program = parse(src)
    except ScriptError:
        return
    checker = Checker(_kernel, program=program, source=src)
    try:
        checker.declared()
    except ScriptError as e:
        assert "\n" not in str(e)
    try:
        _ours(" ".join(tokens) + noise)
    except DeclError as e:
        assert "\n" not in str(e)
    except Exception as e:  # noqa: BLE001 - pcpp's own failures are MacroErrors, reported as one line too
        assert type(e).__name__ == "MacroError", repr(e)
