"""pycore trace on user space's types from DWARF: a uprobe's args and a uretprobe's retval typed from
the probed binary's debug info, casts to its structs, print() of them, as bpftrace 0.17 does where it
can (its libdw reading types scalars only here: a struct pointer argument's fields are refused, a
typedef'd struct is 'struct req_t' with no fields, retval stays an integer, print(args) is refused
and getaddrinfo's args abort it) and side by side with it there; the rest against the program's own
values (it prints what gcc laid out).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import require_root

PYCORE = [sys.executable, "-m", "pycore", "trace"]
BPFTRACE = shutil.which("bpftrace")

C_SOURCE = r"""
#include <stddef.h>
#include <stdio.h>
#include <string.h>
struct Req { int id; char path[32]; unsigned int flags:4, prio:3; struct Req *next; long m[2][3]; };
typedef struct Req req_t;
enum Color { RED, GREEN = 5 };
union U { int i; char c[4]; };
struct Outer { struct { int a; int b; }; union U u; struct Req **pp; req_t t; };
__attribute__((noinline)) int handle(struct Req *req, int n, enum Color c, const char *name) {
    return req->id + n + c + (int)strlen(name); }
__attribute__((noinline)) struct Req *mk(int id) {
    static struct Req r; r.id = id; strcpy(r.path, "/a/b"); r.flags = 9; r.prio = 5; r.m[1][2] = 42; return &r; }
__attribute__((noinline)) int deep(struct Outer *o) { return o->a + o->u.i + (*o->pp)->id; }
int main(int argc, char **argv) {
    int s = 0;
    for (int i = 0; i < 3; i++) { struct Req *r = mk(i); s += handle(r, i * 10, GREEN, argv[0]); }
    struct Req *p = mk(7); struct Outer o; memset(&o, 0, sizeof o); o.a = 3; o.b = 4; o.u.i = 0x41424344;
    o.pp = &p; o.t.id = 99;
    s += deep(&o);
    fprintf(stderr, "%zu %zu %zu\n", sizeof(struct Req), sizeof(struct Outer), offsetof(struct Outer, t));
    return s == 12345;
}
"""

CXX_SOURCE = r"""
#include <cstdio>
#include <cstring>
class Conn {
  public:
    int fd;
    char name[16];
    long bytes;
    Conn(int f) : fd(f), bytes(100L * f) { std::strcpy(name, "conn"); }
    virtual ~Conn() {}
};
__attribute__((noinline)) long serve(Conn *c, int n) { return c->bytes + n + c->fd + (long)std::strlen(c->name); }
int main() { long s = 0; for (int i = 1; i <= 2; i++) { Conn c(i); s += serve(&c, i); } std::printf("%ld\n", s); return 0; }
"""

REQ_DECL = ("struct Req { int id; char path[32]; unsigned int flags:4, prio:3; struct Req *next; long m[2][3]; };")


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("dwarf")
    (d / "srv.c").write_text(C_SOURCE)
    subprocess.run(["gcc", "-g", "-O1", "-o", str(d / "srv"), str(d / "srv.c")], check=True)
    return str(d / "srv")


def trace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCORE, *args], capture_output=True, text=True, timeout=120)


def bpftrace(*args: str) -> str:
    assert BPFTRACE, "bpftrace is installed by ./dev.sh"
    r = subprocess.run([BPFTRACE, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return "".join(line for line in r.stdout.splitlines(True) if not line.startswith("Attaching "))


def test_scalar_args_and_declared_struct_fields_side_by_side(prog):
    """args->n, args->c and the fields of args->req through a declared struct, bitfields and a
    two-dimensional array among them, as bpftrace 0.17 prints them, text and json."""
    program = (REQ_DECL + f' uprobe:{prog}:handle {{ printf("%d %d %d %s %d %d %d\\n", args->n, args->c, '
               'args->req->id, args->req->path, args->req->flags, args->req->prio, args->req->m[1][2]); '
               '@n[args->c] = sum(args->n); }')
    for fmt in ("text", "json"):
        ours = trace("-f", fmt, "-e", program, "-c", prog)
        assert ours.returncode == 0, ours.stderr
        theirs = bpftrace("-f", fmt, "-e", program, "-c", prog)
        if fmt == "text":   # an enum-typed key is named, as bpftrace 0.21+ names it (0.17: its number)
            assert "@n[5]: 30\n" in theirs and "@n[GREEN]: 30\n" in ours.stdout
            theirs = theirs.replace("@n[5]: 30\n", "@n[GREEN]: 30\n")
        assert ours.stdout == theirs
    assert ours.stdout.count('"printf"') == 3 and '"10 5 1 /a/b 9 5 42\\n"' in ours.stdout


def test_struct_args_retval_casts_and_print_without_declarations(prog):
    """What bpftrace 0.17 refuses here, from DWARF alone: a struct pointer argument's fields, print()
    of the struct (bitfields as their own bits, pointers in hex), print(args), a typed retval in a
    uretprobe, casts and sizeof of the binary's structs, unions, anonymous members, a pointer to a
    pointer, a typedef'd member."""
    program = (f'uprobe:{prog}:handle /args->n == 10/ {{ printf("%d %s %d %d %d\\n", args->req->id, args->req->path, '
               'args->req->flags, args->req->prio, args->req->m[1][2]); print(*args->req); print(args); '
               '$r = *args->req; printf("copy %d %d\\n", $r.prio, $r.m[1][2]); } '
               f'uretprobe:{prog}:mk {{ printf("ret %d %s\\n", retval->id, retval->path); }} '
               f'uprobe:{prog}:deep {{ $o = (struct Outer *)arg0; printf("deep %d %d %x %d %d %d %d %d\\n", $o->a, $o->b, '
               '$o->u.i, (*$o->pp)->id, $o->pp[0]->m[1][2], $o->t.id, sizeof(struct Req), sizeof(struct Outer)); '
               'print(*$o); }')
    r = trace("-e", program, "-c", prog)
    assert r.returncode == 0, r.stderr
    # the program's own line on stderr: sizeof(struct Req), sizeof(struct Outer), offsetof(struct Outer, t)
    req_size, outer_size, _ = re.search(r"^(\d+) (\d+) (\d+)$", r.stderr, re.M).groups()
    out = r.stdout
    assert "1 /a/b 9 5 42\n" in out
    assert "{ .id = 1, .path = /a/b, .flags = 9, .prio = 5, .next = 0x0, .m = [[0,0,0],[0,0,42]] }\n" in out
    # an enum-typed member is named (bpftrace 0.21+)
    assert re.search(r"^\{ \.req = 0x[0-9a-f]+, \.n = 10, \.c = GREEN, \.name = 0x[0-9a-f]+ \}$", out, re.M)
    assert "copy 5 42\n" in out
    assert [line for line in out.splitlines() if line.startswith("ret ")] == [f"ret {i} /a/b" for i in (0, 1, 2, 7)]
    assert f"deep 3 4 41424344 7 42 99 {req_size} {outer_size}\n" in out
    assert re.search(r"^\{ \.a = 3, \.b = 4, \.u = \{ \.i = 1094861636, \.c = DCBA \}, \.pp = 0x[0-9a-f]+, "
                     r"\.t = \{ \.id = 99, \.path = , \.flags = 0, \.prio = 0, \.next = 0x0, \.m = \[\[0,0,0\],\[0,0,0\]\] \} \}$",
                     out, re.M), out


def test_cxx_class_data_members(tmp_path):
    """A C++ class's data members (behind its vtable pointer) from DWARF, by the demangled name."""
    (tmp_path / "conn.cc").write_text(CXX_SOURCE)
    exe = str(tmp_path / "conn")
    subprocess.run(["g++", "-g", "-O1", "-o", exe, str(tmp_path / "conn.cc")], check=True)
    r = trace("-e", f'uprobe:{exe}:"serve(Conn*, int)" {{ printf("%d %s %d %d\\n", args->c->fd, args->c->name, '
                    'args->c->bytes, args->n); }', "-c", exe)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if "conn" in line] == ["1 conn 100 1", "2 conn 200 2"], r.stdout


def _libc_debug() -> str | None:
    from pycore.elf.dwarf import DebugInfo
    from pycore.elf.ldcache import find_library

    libc = find_library("libc")
    return libc if libc and DebugInfo.open(libc) is not None else None


def test_libc_getaddrinfo_args_with_libc6_dbg(tmp_path):
    """The issue's example on a real library with separate debug info (libc6-dbg, installed by
    ./dev.sh): uprobe:libc:getaddrinfo's args by name (bpftrace 0.17 aborts on this script)."""
    assert _libc_debug(), "libc6-dbg is installed by ./dev.sh"
    (tmp_path / "gai.c").write_text(
        '#include <netdb.h>\n#include <stdio.h>\n#include <string.h>\n'
        'int main(int argc, char **argv) { char port[8]; strcpy(port, "80"); struct addrinfo *res, hints;'
        ' memset(&hints, 0, sizeof hints); hints.ai_flags = AI_CANONNAME; hints.ai_socktype = SOCK_STREAM;'
        ' int rc = getaddrinfo(argv[1], port, &hints, &res); if (rc == 0) freeaddrinfo(res); return 0; }\n')
    exe = str(tmp_path / "gai")
    subprocess.run(["gcc", "-o", exe, str(tmp_path / "gai.c")], check=True)
    r = trace("-f", "json", "-e", 'uprobe:libc:getaddrinfo { printf("%s %s %d %d %d\\n", str(args.name), '
                                  'str(args.service), args.hints->ai_flags, args.hints->ai_socktype, '
                                  '((struct addrinfo *)arg2)->ai_flags); }', "-c", f"{exe} localhost")
    assert r.returncode == 0, r.stderr
    # AI_CANONNAME is 2, SOCK_STREAM 1; the cast finds struct addrinfo in getaddrinfo's own unit of libc's DWARF
    assert [json.loads(x)["data"] for x in r.stdout.splitlines() if '"printf"' in x] == ["localhost 80 2 1 2\n"]


COOKIE_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/types.h>
static ssize_t wr(void *c, const char *buf, size_t size) { return size; }
int main(void) {
    cookie_io_functions_t io = { .write = wr };
    FILE *f = fopencookie(NULL, "w", io);
    setvbuf(f, NULL, _IONBF, 0);   /* unbuffered: each fwrite is one _IO_cookie_write of its size */
    fwrite("hello, cookie", 1, 7, f);
    fwrite("0123456789012345678901234567890123456789", 1, 33, f);
    fclose(f);
    return 0;
}
"""


def test_libc_static_function_from_libc6_dbg_side_by_side(tmp_path):
    """A libc function named only in libc6-dbg's .symtab (static _IO_cookie_write, fopencookie's
    writer) attaches, with its args from the DWARF, as in bpftrace (issue 30: pycore said there was
    no such function). bpftrace 0.17 names the probe's address in func: not compared."""
    libc = _libc_debug()
    assert libc, "libc6-dbg is installed by ./dev.sh"
    (tmp_path / "cookie.c").write_text(COOKIE_C)
    exe = str(tmp_path / "cookie")
    subprocess.run(["gcc", "-O2", "-o", exe, str(tmp_path / "cookie.c")], check=True)
    program = (f'uprobe:{libc}:_IO_cookie_write /pid == cpid/ {{ printf("%d %s\\n", args->size, '
               'str(args->buf, args->size)); }')
    r = trace("-e", program, "-c", exe)
    assert r.returncode == 0, r.stderr
    # str(buf, n) is n bytes with the NUL, n - 1 characters, as bpftrace 0.23.2 (0.17: n characters)
    assert r.stdout == "7 hello,\n33 01234567890123456789012345678901\n\n\n"
    if BPFTRACE:
        old = bpftrace("-e", program, "-c", exe)
        assert old == "7 hello, \n33 012345678901234567890123456789012\n\n\n"
        assert [ln[:-1] if ln else ln for ln in old.split("\n")] == r.stdout.split("\n")
    r = trace("-e", f'uprobe:{libc}:_IO_cookie_write /pid == cpid/ {{ printf("%s\\n", func); }}', "-c", exe)
    assert r.stdout.split() == ["_IO_cookie_write"] * 2, r.stderr


def test_static_function_of_a_stripped_binary_through_its_debuglink(tmp_path):
    """A static function of a binary stripped of its .symtab, named in the debug file beside it
    (.gnu_debuglink): attached where the debug file's symbol says, args typed from its DWARF."""
    (tmp_path / "local.c").write_text(
        "#include <stdio.h>\nstruct Req { int id; char path[16]; };\n"
        "static __attribute__((noinline)) int local_handle(struct Req *r, int n) { return r->id + n; }\n"
        'int main(void) { struct Req r = { 7, "/x" }; int s = 0;'
        " for (int i = 0; i < 3; i++) s += local_handle(&r, i); printf(\"%d\\n\", s); return 0; }\n")
    built = str(tmp_path / "built")
    subprocess.run(["gcc", "-g", "-O0", "-o", built, str(tmp_path / "local.c")], check=True)
    debug = str(tmp_path / "local.debug")
    subprocess.run(["objcopy", "--only-keep-debug", built, debug], check=True)
    exe = str(tmp_path / "local")
    subprocess.run(["objcopy", "--strip-all", f"--add-gnu-debuglink={debug}", built, exe], check=True)
    r = trace("-e", f'uprobe:{exe}:local_handle {{ printf("%s %d %d %s\\n", func, args->n, args->r->id, '
                    'args->r->path); }', "-c", exe)
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("local_handle")] == [
        f"local_handle {i} 7 /x" for i in range(3)], r.stdout


def test_no_dwarf_says_so_and_where_types_were_looked_for(prog, tmp_path):
    """A binary without DWARF asked for args says so (and which debug package to install when dpkg
    knows the file); a type in neither the binary's DWARF nor the kernel's BTF says where it looked."""
    bare = str(tmp_path / "bare")
    shutil.copy(prog, bare)
    subprocess.run(["strip", "--strip-debug", bare], check=True)
    r = trace("-e", f'uprobe:{bare}:handle {{ printf("%d\\n", args->n); }}')
    assert r.returncode == 2 and f"{bare} has no DWARF debug info" in r.stderr and "Traceback" not in r.stderr
    r = trace("-e", 'uprobe:/bin/bash:readline { printf("%d\\n", args->n); }')
    assert r.returncode == 2 and "bash-dbgsym" in r.stderr
    r = trace("-e", f"uprobe:{prog}:handle {{ $x = (struct Nope *)arg0; }}")
    assert r.returncode == 2 and f"not in {prog}'s DWARF, nor in this kernel's BTF" in r.stderr
