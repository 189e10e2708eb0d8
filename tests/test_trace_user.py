"""pycore trace in user space, side by side with bpftrace 0.17 on real binaries and deterministic workloads.

The issue's acceptance for USDT and uprobes: PostgreSQL's query__start with
str(arg0), python3.11's function__entry (with -c and with -p), a uretprobe
on bash's readline driven through a real pseudo-terminal, C++ functions by
their demangled names and by wildcards; and the functions that name user
addresses (usym, ustack in both of bpftrace's modes, func, reg) or format
values (ntop, strcontains, kaddr), each compared with bpftrace's output.

Both tools run the same program on the same workload; their stdout is
compared as text once bpftrace's 'Attaching N probes...' line (stdout for
it, stderr for us) is set aside. Where bpftrace prints map entries of equal
value in hash order, workloads give every key its own count so that the
order is decided.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import as_023, require_root, stop, wait_ready
from tests.test_trace import BPFTRACE, PYCORE, bpftrace, pycore, side_by_side

sys.path.insert(0, os.path.dirname(__file__))
from usdt_targets import POSTGRES, pg_available, pg_server, postmaster_pid  # noqa: E402

PYTHON311 = "/usr/bin/python3.11"
TOOLS = ("pycore", "bpftrace")


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()
    if not BPFTRACE:
        pytest.fail("bpftrace is installed by ./dev.sh")


def _argv(tool: str) -> list[str]:
    return [*PYCORE] if tool == "pycore" else [BPFTRACE]


READY = ("ready\n", '{"type": "printf", "data": "ready\\n"}\n')


def _clean(out: str) -> str:
    """stdout without the 'Attaching' line (bpftrace's, and json's for both) and BEGIN's 'ready' line."""
    return "".join(ln for ln in out.splitlines(True)
                   if not ln.startswith(("Attaching ", '{"type": "attached_probes"')) and ln not in READY)


class Live:
    """A tracer started in the background; ``ready()`` returns once BEGIN has run (everything is attached)."""

    def __init__(self, tool: str, program: str, *options: str, params: tuple[str, ...] = ()) -> None:
        self.tool = tool
        self.rest = ""
        self.proc = subprocess.Popen([*_argv(tool), *options, "-e", 'BEGIN { printf("ready\\n"); } ' + program,
                                      *params], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ready(self, timeout: float = 60) -> None:
        """Read stdout (raw, not through the pipe's buffer, so that select() sees what is left) up to 'ready'."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        seen = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.5)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            seen += chunk
            for ready in READY:
                at = seen.find(ready.encode())
                if at >= 0 and (at == 0 or seen[at - 1:at] == b"\n"):
                    self.rest = seen[at + len(ready):].decode()
                    return
        self.proc.kill()
        raise AssertionError(f"{self.tool} never got ready: {seen!r} {self.proc.stderr.read()!r}")

    def stop(self, settle: float = 0.5, expect: str = "", times: int = 1) -> tuple[str, str]:
        """SIGINT once ``expect`` has been printed ``times`` times (printf lines still in flight when a
        tracer is interrupted may never be read: bpftrace drops them) and ``settle`` seconds passed."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + 30
        while expect and self.rest.count(expect) < times and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self.rest += chunk.decode()
        time.sleep(settle)
        out, err = stop(self.proc, timeout=60)
        out = _clean(self.rest + out)
        return (as_023(out) if self.tool == "bpftrace" else out), err    # 0.17's output in 0.23.2's forms


# -- C++ and a uprobe wildcard -----------------------------------------------------------------

CXX_SOURCE = r"""
#include <cstdio>
#include <unistd.h>
namespace shapes {
struct Circle {
    double r;
    double area(int scale) const { return 3.0 * r * r * scale; }
};
long count_sides(long n) { return n + 1; }
long count_sides(const char *s) { return s[0]; }
long leaf(long n) { return n * 2; }
}
static long one() { return shapes::leaf(1); }
static long two() { long s = 0; for (int i = 0; i < 2; i++) s += shapes::leaf(i); return s; }
static long three() { long s = 0; for (int i = 0; i < 3; i++) s += shapes::leaf(i); return s; }

int main() {
    char go;
    printf("waiting\n");
    fflush(stdout);
    if (read(0, &go, 1) != 1)                /* the tracer attaches while we wait */
        return 1;
    double t = 0;
    long s = 0;
    for (int i = 0; i < 5; i++) { shapes::Circle c{(double)i}; t += c.area(2); }
    for (int i = 0; i < 3; i++) s += shapes::count_sides((long)i);
    s += shapes::count_sides("x");
    s += one() + two() + three();
    printf("%.1f %ld\n", t, s);
    fflush(stdout);
    if (read(0, &go, 1) != 1)                /* alive until the tracer has printed its maps */
        return 1;
    return 0;
}
"""


@pytest.fixture(scope="module")
def cxx_target(tmp_path_factory) -> str:
    """A C++ program at -O0 (frame pointers, every call site its own), run with ASLR off (setarch -R)."""
    d = tmp_path_factory.mktemp("cxx")
    (d / "shapes.cc").write_text(CXX_SOURCE)
    exe = str(d / "shapes")
    subprocess.run(["g++", "-O0", "-fno-omit-frame-pointer", "-o", exe, str(d / "shapes.cc")], check=True)
    return exe


def run_with_target(tool: str, program: str, target: list[str], *options: str, expect: str = "",
                    times: int = 1) -> tuple[str, str]:
    """Start ``target`` (it prints 'waiting' and reads a byte), trace it, let it run, print the maps
    while it is still alive (as bpftrace names user addresses only in a live process), then let it end."""
    proc = subprocess.Popen(target, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "waiting\n"
        tracer = Live(tool, program, "-p", str(proc.pid), *options)
        tracer.ready()
        proc.stdin.write("g")
        proc.stdin.flush()
        assert proc.stdout.readline()          # its work is done
        out = tracer.stop(expect=expect, times=times)
    finally:
        if proc.poll() is None:
            proc.stdin.write("q")
            proc.stdin.close()
        proc.wait(timeout=30)
    return out


def both_with_target(program: str, target: list[str], *options: str, **expect) -> tuple[str, str]:
    ours, err = run_with_target("pycore", program, target, *options, **expect)
    assert "error" not in err.lower(), err
    theirs, _ = run_with_target("bpftrace", program, target, *options, **expect)
    return ours, theirs


CXX_LEAF = ('uprobe:{exe}:"shapes::leaf(long)" {{ printf("%s|%s|%s\\n", probe, func, usym(reg("ip"))); '
            'print(ustack(4)); print(ustack(perf, 3)); print(usym(reg("ip"))); @[ustack(3)] = count(); '
            '@f[func] = count(); @u[usym(reg("ip")), ustack(perf, 2)] = count(); @v = usym(reg("ip")); }}')


# The last output of each hit of CXX_LEAF, its print(usym(reg("ip"))) (a line of its own in text; in json
# its value): SIGINT only once a tracer has printed it for every hit. Waiting for the printf that comes
# first, bpftrace under load had not read the last hit's stacks yet and dropped them at SIGINT (pycore
# prints what the ring holds): one stack more in ours.
CXX_LEAF_LAST = {"text": "\nshapes::leaf(long)\n", "json": '{"type": "value", "data": "shapes::leaf(long)"}\n'}


def test_cxx_uprobe_by_demangled_name_usym_ustack_func_reg(cxx_target):
    """A C++ function named as c++filt prints it; probe, func, usym(reg("ip")), ustack in both modes, as bpftrace."""
    ours, theirs = both_with_target(CXX_LEAF.format(exe=cxx_target), ["setarch", "-R", cxx_target],
                                    expect=CXX_LEAF_LAST["text"], times=6)
    assert f"uprobe:{cxx_target}:_ZN6shapes4leafEl|shapes::leaf(long)|shapes::leaf(long)\n" in ours
    assert "\n        shapes::leaf(long)+0\n        two()+" in ours
    assert re.search(r"\n\t[0-9a-f]+ shapes::leaf\(long\)\+0 \(" + re.escape(cxx_target) + r"\)\n", ours)
    assert "@f[shapes::leaf(long)]: 6\n" in ours and "@v: shapes::leaf(long)\n" in ours
    assert ours == theirs


def test_cxx_user_symbols_in_json(cxx_target):
    ours, theirs = both_with_target(CXX_LEAF.format(exe=cxx_target), ["setarch", "-R", cxx_target], "-f", "json",
                                    expect=CXX_LEAF_LAST["json"], times=6)
    assert '{"type": "value", "data": "shapes::leaf(long)"}\n' in ours
    assert ours == theirs


def test_cxx_uprobe_wildcards_mangled_and_demangled(cxx_target):
    """A wildcard matches mangled names, a quoted one demangled names; probe prints the symbol as the file has it."""
    for pattern in ("*count_sides*", '"shapes::*"'):
        program = f"uprobe:{cxx_target}:{pattern} {{ @[probe] = count(); @f[func] = count(); }}"
        ours, theirs = both_with_target(program, ["setarch", "-R", cxx_target])
        assert f"@[uprobe:{cxx_target}:_ZN6shapes11count_sidesEl]: 3\n" in ours
        assert f"@[uprobe:{cxx_target}:_ZN6shapes11count_sidesEPKc]: 1\n" in ours
        assert "@f[shapes::count_sides(long)]: 3\n" in ours
        assert ours == theirs, pattern
    assert f"@[uprobe:{cxx_target}:_ZNK6shapes6Circle4areaEi]: 5\n" in ours


def test_cxx_uprobe_attaching_count_and_dry_run(cxx_target):
    r = pycore("--dry-run", "-e", f'uprobe:{cxx_target}:"shapes::*" {{ @ = count(); }}')
    assert r.returncode == 0, r.stderr
    assert f"uprobe:{cxx_target}:_ZNK6shapes6Circle4areaEi  (uprobe PMU)" in r.stdout
    assert r.stdout.count("(uprobe PMU)") == 4     # area, both count_sides, leaf
    r = pycore("-e", f'uprobe:{cxx_target}:"shapes::leaf(int)" {{ }}')
    assert r.returncode == 2 and "did you mean 'shapes::leaf(long)'" in r.stderr, r.stderr


def test_rust_uprobe_wildcard(tmp_path):
    """A Rust method (legacy mangling, tests/usdt_targets.py's target) by a wildcard over its mangled name."""
    from usdt_targets import build_rust_target

    exe = build_rust_target(str(tmp_path), "legacy")
    program = f"uprobe:{exe}:*Counter*bump* {{ @[probe] = count(); }}"
    outs = []
    for argv in ([*PYCORE], [BPFTRACE]):
        r = subprocess.run([*argv, "-c", f"{exe} 7", "-e", program], input="g", capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(_clean(r.stdout) if argv[0] != BPFTRACE else as_023(_clean(r.stdout)))
    assert re.search(rf"(?m)^@\[uprobe:{re.escape(exe)}:_ZN7counter7Counter4bump17h[0-9a-f]{{16}}E\]: 7$", outs[0]), outs
    assert outs[0] == outs[1]


def test_symbols_of_an_exited_process_stay_named(cxx_target):
    """A user address is named at the end too when its process was seen alive (bpftrace prints hex there)."""
    program = (f'uprobe:{cxx_target}:"shapes::leaf(long)" {{ @[ustack(2)] = count(); @u[usym(reg("ip"))] = count(); '
               'printf("%s\\n", usym(reg("ip"))); }')
    proc = subprocess.Popen([*PYCORE, "-c", cxx_target, "-e", program], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "waiting\n"          # the -c command shares our pipes
    proc.stdin.write("g")
    proc.stdin.flush()
    assert proc.stdout.readline() == "180.0 136\n"
    assert proc.stdout.readline() == "shapes::leaf(long)\n"  # named while the process runs
    out, err = proc.communicate("q", timeout=60)             # now it ends, and the run with it
    assert proc.returncode == 0, err
    assert "@u[shapes::leaf(long)]: 6\n" in out, out
    assert re.search(r"@\[\n        shapes::leaf\(long\)\+0\n        three\(\)\+\d+\n\]: 3\n", out), out


JIT_SOURCE = r"""
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
/* A JIT in miniature: getpid(2) from code written at run time into anonymous memory, named in
   /tmp/perf-PID.map as perf's JIT interface asks (START SIZE NAME, hex; the name may hold spaces). */
int main(void) {
    static const unsigned char code[] = {0xb8, 0x27, 0, 0, 0, 0x0f, 0x05, 0xc3};  /* mov eax,39; syscall; ret */
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char path[64];
    FILE *f;
    if (page == MAP_FAILED) return 1;
    memcpy(page + 16, code, sizeof code);
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    if (!(f = fopen(path, "w"))) return 1;
    fprintf(f, "%lx %zx jitted::answer [JIT] tier1\n", (unsigned long)(page + 16), sizeof code);
    fclose(f);
    long (*fn)(void) = (long (*)(void))(page + 16);
    puts("ready");                        /* its own getpid() above done: only fn()'s are traced */
    fflush(stdout);
    if (getchar() != 'g') return 1;       /* the tracers are attached */
    for (int i = 0; i < 3; i++) fn();
    puts("called");
    fflush(stdout);
    getchar();                            /* they name the frames while this process lives */
    unlink(path);
    return 0;
}
"""


def test_jit_frames_named_from_the_perf_map(tmp_path):
    """Code in anonymous executable memory is named from /tmp/perf-PID.map, as bpftrace (bcc) names it."""
    (tmp_path / "jit.c").write_text(JIT_SOURCE)
    subprocess.run(["gcc", "-O1", "-fno-omit-frame-pointer", "-o", str(tmp_path / "jit"), str(tmp_path / "jit.c")],
                   check=True)
    target = subprocess.Popen([str(tmp_path / "jit")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        wait_ready(target, b"ready\n")   # else its getpid() for the map's name can come after an attach
        program = (f"tracepoint:syscalls:sys_enter_getpid /pid == {target.pid}/ "
                   "{ @[ustack(perf, 2)] = count(); @u[ustack(1)] = count(); }")
        tracers = [Live(tool, program, "-p", str(target.pid)) for tool in ("pycore", "bpftrace")]
        for t in tracers:
            t.ready()
        target.stdin.write("g")     # one character: the next getchar() waits for the next one
        target.stdin.flush()
        assert target.stdout.readline() == "called\n"
        outs = [t.stop(expect="") for t in tracers]     # the maps are printed while the target still runs
    finally:
        target.communicate("q", timeout=30)
    ours, theirs = outs[0][0], outs[1][0]
    assert f" jitted::answer [JIT] tier1+7 (/tmp/perf-{target.pid}.map)\n" in ours, ours
    assert "@u[\n        jitted::answer [JIT] tier1+7\n]: 3\n" in ours, ours
    assert ours == theirs
    assert not os.path.exists(f"/tmp/perf-{target.pid}.map")


def test_nested_and_sized_symbols_found_as_bcc_finds_them():
    """bcc's walk back from the nearest symbol: nested ones skipped, a symbol's size bounds it."""
    from pycore.lang.usyms import _Table

    # bcc's own example (bcc_syms.cc): goo 0x0+6, foo 0x6+0x10, bar 0x8+4 (nested in foo), baz 0x16+0x10
    t = _Table([0x0, 0x6, 0x8, 0x16], [0x6, 0x10, 0x4, 0x10], ["goo", "foo", "bar", "baz"], "so")
    assert t.find(0x12) == ("foo", 0xC)
    assert t.find(0x9) == ("bar", 1)
    assert t.find(0x16) == ("baz", 0)
    assert t.find(0x26) is None                # past baz's end
    t = _Table([0x10, 0x20], [0x8, 0x0], ["f", "end_marker"], "so")
    assert t.find(0x24) is None                # a size-0 symbol contains nothing and stops the walk


# -- PostgreSQL: usdt query__start ------------------------------------------------------------

pg = pytest.mark.skipif(not pg_available(), reason="PostgreSQL 15 is installed by ./dev.sh")

# this server's backends only (the postmaster's children, $1): the probe is in every postgres, and a
# suite run beside this one (another clone's) sends the same queries to its own server
QUERY_START = f"usdt:{POSTGRES}:postgresql:query__start /curtask->real_parent->tgid == $1/"
QUERIES = ["select 1", "select 2 + 2", "select 'pycore'"]


@pytest.fixture(scope="module")
def postgres():
    with pg_server() as server:
        yield server


def _pg_run(tool: str, server, program: str, queries: list[list[str]], expect: str = "") -> tuple[str, str]:
    tracer = Live(tool, program, params=(str(postmaster_pid(server)),))
    tracer.ready()
    for batch in queries:
        server.psql(*batch)
    return tracer.stop(expect=expect)


@pg
def test_postgres_query_start_printf(postgres):
    program = f'{QUERY_START} {{ printf("%s\\n", str(arg0)); }}'
    ours, err = _pg_run("pycore", postgres, program, [QUERIES], expect=QUERIES[-1] + "\n")
    theirs, _ = _pg_run("bpftrace", postgres, program, [QUERIES], expect=QUERIES[-1] + "\n")
    assert ours == "".join(q + "\n" for q in QUERIES) + "\n\n"
    assert ours == theirs
    assert "Attaching 2 probes...\n" == err


@pg
def test_postgres_query_counts(postgres):
    """Each query its own count (1, 2, 3) so that bpftrace's by-value order decides the lines."""
    program = f"{QUERY_START} {{ @[str(arg0)] = count(); @n = count(); }}"
    batches = [QUERIES, QUERIES[1:], QUERIES[2:]]
    ours, _ = _pg_run("pycore", postgres, program, batches)
    theirs, _ = _pg_run("bpftrace", postgres, program, batches)
    assert ours == "\n\n@[select 1]: 1\n@[select 2 + 2]: 2\n@[select 'pycore']: 3\n@n: 6\n"
    assert ours == theirs


# -- python3.11: usdt function__entry ----------------------------------------------------------

# CPython 3.11 fires function__entry only on its tracing path (DTRACE_FUNCTION_ENTRY sits next to
# the call-tracing hook in ceval.c, and in generator.throw()): without a profile function set, a
# script's own functions are never reported, by bpftrace or by us. The script sets an empty one.
PY_SCRIPT = textwrap.dedent("""\
    import sys
    sys.setprofile(lambda *args: None)
    def f2(x):
        return -x
    def f3(x):
        return x * 2
    def f6(x):
        return x * 3
    def gen():
        for i in range(4):
            yield i
    if len(sys.argv) > 1:
        print("waiting", flush=True)
        sys.stdin.read(1)
    # called from C (map, sorted, list), so that 3.11's inlined Python-to-Python calls do not hide them
    sorted(range(2), key=f2)
    list(map(f3, range(3)))
    list(map(f6, range(6)))
    list(gen())
    if len(sys.argv) > 1:
        print("done", flush=True)
        sys.stdin.read(1)
""")


@pytest.fixture(scope="module")
def py_script(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("py") / "calls.py"
    path.write_text(PY_SCRIPT)
    return str(path)


def test_python_function_entry_with_c(py_script):
    """The semaphore is set by the kernel (the uprobe's ref_ctr), before the command runs: both see every call."""
    program = (f'usdt:{PYTHON311}:python:function__entry /str(arg0) == "{py_script}"/ '
               '{ @[str(arg1)] = count(); @lines[str(arg1), arg2] = count(); }')
    ours, theirs = side_by_side(program, "-c", f"{PYTHON311} {py_script}")
    # gen() is entered once and resumed four times, plus the final resume that ends it
    assert "@[f2]: 2\n@[f3]: 3\n@[gen]: 5\n@[f6]: 6\n" in ours, ours
    assert "@lines[gen, 9]: 1\n@lines[f2, 3]: 2\n@lines[f3, 5]: 3\n@lines[gen, 11]: 4\n@lines[f6, 7]: 6\n" in ours
    assert ours == theirs


def test_python_function_entry_all_functions_same_counts(py_script):
    """No filter: every function entered, the interpreter's start-up included; same names, same counts."""
    program = f"usdt:{PYTHON311}:python:function__entry {{ @[str(arg1)] = count(); }}"
    ours, theirs = side_by_side(program, "-c", f"{PYTHON311} {py_script}")
    assert "@[f3]: 3\n" in ours
    # keys of equal count come in hash order: same lines, and both sorted by count
    assert sorted(ours.splitlines()) == sorted(theirs.splitlines())
    counts = [int(x) for x in re.findall(r": (\d+)$", ours, re.M)]
    assert counts == sorted(counts)


def test_python_function_entry_with_pid(py_script):
    program = f"usdt:{PYTHON311}:python:function__entry {{ @[str(arg1)] = count(); }}"
    outs = {}
    for tool in TOOLS:
        proc = subprocess.Popen([PYTHON311, py_script, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline() == "waiting\n"
            tracer = Live(tool, program, "-p", str(proc.pid))
            tracer.ready()
            proc.stdin.write("g")
            proc.stdin.flush()
            assert proc.stdout.readline() == "done\n"
            outs[tool], err = tracer.stop()
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
    # attached to a running interpreter: only what runs after the 'g' is seen (no start-up)
    # (decode: the stdin read that let it go returns through codecs' Python decoder)
    assert outs["pycore"] == "\n\n@[decode]: 1\n@[f2]: 2\n@[f3]: 3\n@[gen]: 5\n@[f6]: 6\n"
    assert outs["pycore"] == outs["bpftrace"]


def test_python_pid_ends_with_the_process(py_script):
    """-p PID: tracing ends when the interpreter exits, maps printed as bpftrace does."""
    proc = subprocess.Popen([PYTHON311, py_script, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "waiting\n"
    tracer = Live("pycore", f"usdt:{PYTHON311}:python:function__entry {{ @[str(arg1)] = count(); }}",
                  "-p", str(proc.pid))
    tracer.ready()
    proc.communicate("gq", timeout=30)
    out = tracer.rest + tracer.proc.communicate(timeout=30)[0]
    assert tracer.proc.returncode == 0
    assert "@[f3]: 3\n" in out


# -- bash: uretprobe readline through a pseudo-terminal ---------------------------------------------

TYPED = ["echo one", "true two three", "exit"]


def _bash_session(tool: str, home: str) -> tuple[str, str]:
    """An interactive bash in a pty, held until the tracer is ready (the pid is passed as $1), then typed at;
    its HOME ``home``, the test's own (with /tmp, it read /tmp/.inputrc and wrote /tmp/.bash_history)."""
    gate_r, gate_w = os.pipe()
    pid, fd = pty.fork()
    if pid == 0:                                       # the child: wait for the gate, become bash
        os.close(gate_w)
        os.read(gate_r, 1)
        os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"],
                  {"TERM": "dumb", "PS1": "$ ", "PATH": "/usr/bin:/bin", "HOME": home})
    os.close(gate_r)
    program = 'uretprobe:/bin/bash:readline /pid == $1/ { printf("%s\\n", str(retval)); @lines = count(); }'
    tracer = Live(tool, program, params=(str(pid),))
    try:
        tracer.ready()
        os.write(gate_w, b"g")

        def until(marker: bytes, timeout: float = 30) -> bytes:
            """Read the terminal until ``marker`` (a prompt) shows, or bash ends."""
            got, end = b"", time.monotonic() + timeout
            while marker not in got and time.monotonic() < end:
                r, _, _ = select.select([fd], [], [], 0.1)
                if r:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        break                       # EIO: bash has exited
                    if not chunk:
                        break
                    got += chunk
            return got

        assert b"$ " in until(b"$ ")                # the prompt: readline is waiting
        for line in TYPED:
            os.write(fd, line.encode() + b"\n")
            until(b"\n$ " if line != "exit" else b"\0")
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status)
        return tracer.stop(expect="exit\n")
    finally:
        os.close(gate_w)
        os.close(fd)
        if tracer.proc.poll() is None:
            tracer.proc.kill()
            tracer.proc.wait()


def test_bash_readline_uretprobe_through_a_pty(tmp_path):
    ours, err = _bash_session("pycore", str(tmp_path))
    theirs, terr = _bash_session("bpftrace", str(tmp_path))
    assert ours == "".join(t + "\n" for t in TYPED) + "\n\n@lines: 3\n", (ours, err)
    assert ours == theirs, (theirs, terr)


# -- functions, side by side ---------------------------------------------------------------------

@pytest.mark.parametrize("program", [
    'BEGIN { printf("%s|%s|%s|%s\\n", ntop(0x0100007f), ntop(2, 0x0100007f), ntop(0), ntop(10, 0x0100007f)); exit(); }',
    'BEGIN { @[ntop(0x0100007f)] = count(); @x = ntop(0x0200007f); print(ntop(0x0300007f)); '
    '$a = ntop(0x0400007f); printf("%s\\n", $a); exit(); }',
    'BEGIN { printf("%d %d %d %d\\n", strcontains("hello", "ll"), strcontains("hello", "lo!"), '
    'strcontains("hello", ""), strcontains("", "x")); exit(); }',
    'BEGIN { $s = "abcdefgh"; $t = "def"; printf("%d %d\\n", strcontains($s, $t), strcontains($t, $s)); exit(); }',
    'BEGIN { printf("%x %s %s\\n", kaddr("vfs_read"), ksym(kaddr("vfs_read")), ksym(kaddr("do_sys_openat2"))); exit(); }',
    'BEGIN { printf("%d %d %d %d %d\\n", sizeof(struct task_struct), sizeof(uint32), sizeof(pid), sizeof(comm), '
    'sizeof(curtask->pid)); cat("/proc/sys/kernel/%s", "ostype"); exit(); }',
], ids=["ntop-ints", "ntop-maps-vars", "strcontains-literals", "strcontains-vars", "kaddr", "sizeof-cat"])
def test_functions_like_bpftrace(program):
    for fmt in ("text", "json"):
        ours, theirs = side_by_side(program, "-f", fmt)
        assert ours == theirs, fmt


@pytest.fixture(scope="module")
def connector(tmp_path_factory) -> str:
    """Two IPv4 connections and one IPv6 connection over loopback to a port given as argv[1]."""
    path = tmp_path_factory.mktemp("net") / "conn.py"
    path.write_text(textwrap.dedent("""\
        import socket, sys
        port = int(sys.argv[1])
        for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            srv = socket.socket(fam)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((host, port))
            srv.listen()
            c = socket.create_connection((host, port))
            a, _ = srv.accept()
            c.close(); a.close(); srv.close()
    """))
    return str(path)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ntop_of_tracepoint_address_arrays(connector):
    """inet_sock_set_state's __u8 saddr[4] and saddr_v6[16]: ntop picks the family by size, or takes it given."""
    program = ("tracepoint:sock:inet_sock_set_state /args->sport == $1 || args->dport == $1/ { "
               'printf("%d %d>%d %s %s %s %s\\n", args->family, args->oldstate, args->newstate, ntop(args->saddr), '
               "ntop(args->daddr), ntop(args->saddr_v6), ntop(10, args->daddr_v6)); "
               "@[ntop(args->saddr_v6)] = count(); @f[ntop(args->family, args->daddr_v6)] = count(); }")
    port = str(_free_port())
    ours = pycore("-c", f"{PYTHON311} {connector} {port}", "-e", program, port)
    assert ours.returncode == 0, ours.stderr
    theirs = bpftrace("-c", f"{PYTHON311} {connector} {port}", "-e", program, port)
    assert "2 7>2 127.0.0.1 127.0.0.1 ::ffff:127.0.0.1 ::ffff:127.0.0.1\n" in ours.stdout
    assert "10 10>3 127.0.0.6 127.0.0.6 ::1 ::1\n" in ours.stdout   # the IPv4 view of ::1's bytes
    assert "@[::1]: 12\n@[::ffff:127.0.0.1]: 24\n" in ours.stdout
    # The events' order is not defined: a connection's state changes are made by the workload and by
    # the loopback's softirq, on whichever CPU runs it (ksoftirqd's, later, under load), and bpftrace
    # reads its per-CPU buffers one after the other; the event lines are compared as a multiset, the
    # maps as printed.
    assert _events_apart(ours.stdout) == _events_apart(theirs.stdout)


def _events_apart(out: str) -> tuple[list[str], list[str]]:
    """(the printf lines of test_ntop_of_tracepoint_address_arrays, sorted; the rest, as printed)."""
    lines = out.splitlines()
    events = [ln for ln in lines if re.match(r"\d+ \d+>\d+ ", ln)]
    return sorted(events), [ln for ln in lines if ln not in events]


def test_kernel_stacks_in_perf_mode(workload_exe):
    program = ("tracepoint:syscalls:sys_enter_getpid /pid == cpid/ { print(kstack(perf, 3)); "
               "printf(\"%s|\\n\", kstack(perf, 2)); @[kstack(perf, 2)] = count(); @k[kstack(2)] = count(); }")
    ours, theirs = side_by_side(program, "-c", f"{workload_exe} 3")
    assert re.search(r"\n\t[0-9a-f]{16} \w+\+\d+\n", ours)
    assert ours == theirs


@pytest.fixture(scope="module")
def workload_exe(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("getpid")
    (d / "g.c").write_text("#include <stdlib.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n"
                           "int main(int c, char **v) { for (int i = 0; i < atoi(v[1]); i++) syscall(SYS_getpid); }\n")
    subprocess.run(["gcc", "-O2", "-o", str(d / "g"), str(d / "g.c")], check=True)
    return str(d / "g")


def side_by_side_held(program: str, cmd: str, last: str, times: int = 1) -> tuple[str, str]:
    """``side_by_side(program, "-c", cmd)`` for a command that stays until it reads a byte on its stdin
    (the tracer's): the byte is written once the tracer has printed ``last`` (a line of its own)
    ``times`` times, so that the command is alive while the tracer names its user addresses, however
    slow the machine (a fixed 0.5 s sleep in the command was too short under load: the addresses were
    printed in hex)."""
    outs = []
    for argv in (PYCORE, [BPFTRACE]):
        proc = subprocess.Popen([*argv, "-c", cmd, "-e", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            seen = b""
            deadline = time.monotonic() + 60
            while seen.splitlines().count(last.encode()) < times:
                assert time.monotonic() < deadline, f"{argv[0]}: no {last!r} within 60 s: {seen!r}"
                if select.select([proc.stdout.fileno()], [], [], 0.5)[0]:
                    chunk = os.read(proc.stdout.fileno(), 65536)     # raw: select() sees what is left
                    assert chunk, f"{argv[0]} ended before it printed {last!r}: {seen!r} {proc.stderr.read()!r}"
                    seen += chunk
            out = seen.decode()
            proc.stdin.write("g")
            proc.stdin.flush()
            rest, err = proc.communicate(timeout=60)    # closes stdin
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        out = "".join(ln for ln in (out + rest).splitlines(True) if not ln.startswith("Attaching "))
        outs.append(as_023(out) if argv[0] == BPFTRACE else out)       # 0.17's output in 0.23.2's forms
    return outs[0], outs[1]


GETPID_C = r"""
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 3; i++)
        getpid();                   /* glibc's getpid: aliases __getpid, getpid (and __GI___getpid in its debug file) */
    char go;
    return read(0, &go, 1) < 0;     /* alive while the tracers name its addresses: until the test says go */
}
"""


def test_user_stacks_through_libc(tmp_path):
    """Frames in libc (symbols from its separate debug file when installed, the same alias bcc picks
    among several at one address: __getpid, not getpid), from a tracepoint, in both stack modes."""
    (tmp_path / "gp.c").write_text(GETPID_C)
    exe = str(tmp_path / "gp")
    subprocess.run(["gcc", "-O0", "-fno-omit-frame-pointer", "-o", exe, str(tmp_path / "gp.c")], check=True)
    program = ('tracepoint:syscalls:sys_enter_getpid /pid == cpid/ { print(ustack(3)); print(ustack(perf, 3)); '
               'printf("printed\\n"); }')
    ours, theirs = side_by_side_held(program, f"/usr/bin/setarch -R {exe}", "printed", times=3)
    # getpid keeps no frame pointer: the unwinder goes from it to main's caller
    assert re.search(r"\n        \w*getpid\+\d+\n        \S+\n", ours), ours
    assert re.search(r"\n\t[0-9a-f]+ \w*getpid\+\d+ \(/\S+/libc\.so\.6\)\n", ours), ours
    assert ours == theirs


STATIC_C = r"""
#include <unistd.h>
static __attribute__((noinline)) long inner(void) { return getpid(); }
static __attribute__((noinline)) long outer(void) { return inner() + 1; }
int main(void) {
    char go;
    outer();
    return read(0, &go, 1) < 0;     /* alive while the tracers name its addresses: until the test says go */
}
"""


def test_user_symbols_from_a_debuglink_file(tmp_path):
    """A stripped program whose symbols are in a separate file named by .gnu_debuglink (CRC checked),
    next to it: static functions named from there; without the file, their addresses in hex."""
    (tmp_path / "st.c").write_text(STATIC_C)
    exe, debug = str(tmp_path / "st"), str(tmp_path / "st.debug")
    subprocess.run(["gcc", "-O0", "-fno-omit-frame-pointer", "-g", "-Wl,--build-id=none", "-o", exe,
                    str(tmp_path / "st.c")], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", exe, debug], check=True)
    subprocess.run(["strip", "--strip-all", exe], check=True)
    subprocess.run(["objcopy", f"--add-gnu-debuglink={debug}", exe], check=True)
    program = ('tracepoint:syscalls:sys_enter_getpid /pid == cpid/ { print(ustack(4)); print(ustack(perf, 4)); '
               'printf("printed\\n"); }')
    ours, theirs = side_by_side_held(program, f"/usr/bin/setarch -R {exe}", "printed")
    assert re.search(r"\n        outer\+\d+\n        main\+\d+\n", ours), ours
    assert ours == theirs
    os.rename(debug, debug + ".away")
    ours, theirs = side_by_side_held(program, f"/usr/bin/setarch -R {exe}", "printed")
    assert "outer" not in ours and re.search(r"\n        0x[0-9a-f]+\n", ours), ours
    assert re.search(r"\n\t[0-9a-f]+ 0x[0-9a-f]+ \(\[unknown\]\)\n", ours), ours
    assert ours == theirs


# -- errors: one line and a caret -----------------------------------------------------------------

@pytest.mark.parametrize("program,message", [
    ('BEGIN { printf("%x\\n", kaddr("no_such_symbol_here")); }', "kaddr: no kernel symbol 'no_such_symbol_here'"),
    ('tracepoint:syscalls:sys_enter_getpid { printf("%x\\n", reg("ip")); }', 'reg can not be used with "tracepoint" probes'),
    ('uprobe:/bin/bash:readline { printf("%x\\n", reg("rip")); }', "'rip' is not a valid register on this architecture (did you mean 'ip'?)"),
    ('BEGIN { printf("%s\\n", ntop("abcdefgh")); }', "ntop() argument must be 4 or 16 bytes in size, not 9"),
    ('BEGIN { printf("%d\\n", strcontains(1, "a")); }', "strcontains() takes strings"),
])
def test_function_errors(program, message):
    r = pycore("-e", program)
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    assert re.match(r"^stdin:\d+:\d+: error: ", r.stderr), r.stderr
    assert message in r.stderr.splitlines()[0], r.stderr
    assert re.search(r"(?m)^ *\^~*$", r.stderr), r.stderr

