"""pycore trace on the host kernel: bpftrace's one-liner tutorial, the lab's scripts, errors,
and bpftrace 0.17 side by side on deterministic workloads.

bpftrace prints "Attaching N probes..." on stdout and pycore on stderr (as the
issue asks); everything else is compared byte for byte where the workload is
deterministic. Probes the host kernel lacks (kfunc, kprobe) are in
tests/test_trace_kernel.py, run in the kernel VMs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.conftest import as_023, bpftool_show, prog_ids_of, require_root, stop

PYCORE = [sys.executable, "-m", "pycore", "trace"]
BPFTRACE = shutil.which("bpftrace")


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def pycore(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCORE, *args], capture_output=True, text=True, timeout=timeout)


def bpftrace(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    assert BPFTRACE, "bpftrace is installed by ./dev.sh"
    r = subprocess.run([BPFTRACE, *args], capture_output=True, text=True, timeout=timeout)
    r.raw = r.stdout  # type: ignore[attr-defined]
    # in bpftrace 0.23.2's forms where pycore prints those (conftest.as_023)
    r.stdout = as_023("".join(line for line in r.stdout.splitlines(True) if not line.startswith("Attaching ")))
    return r


def side_by_side(program: str, *args: str) -> tuple[str, str]:
    ours = pycore(*args, "-e", program)
    assert ours.returncode == 0, ours.stderr
    theirs = bpftrace(*args, "-e", program)
    assert theirs.returncode == 0, theirs.stderr
    return ours.stdout, theirs.stdout


def same_as_bpftrace(program: str, *args: str) -> str:
    """The program prints the same as bpftrace, in text and in json; pycore's json output."""
    for fmt in ("text", "json"):
        ours, theirs = side_by_side(program, "-f", fmt, *args)
        assert ours == theirs, fmt
    return ours


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """A C program making exactly N of a few syscalls: getpid, reads of known sizes, openat of a named file."""
    d = tmp_path_factory.mktemp("trace")
    src = d / "work.c"
    src.write_text(textwrap.dedent(r"""
        #include <fcntl.h>
        #include <stdlib.h>
        #include <sys/syscall.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            int n = atoi(argv[1]);
            char buf[65536];
            for (int i = 0; i < n; i++) syscall(SYS_getpid);
            int fd = open(argv[2], O_RDONLY);
            for (int size = 1; size <= 65536; size *= 4) read(fd, buf, size);
            close(fd);
            return 0;
        }
    """))
    exe = d / "work"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    data = d / "trace-target-file.bin"
    data.write_bytes(os.urandom(200000))
    return str(exe), str(data)


# -- the one-liner tutorial --------------------------------------------------------------------

def test_hello_world_and_every_map_shape_like_bpftrace():
    program = ('BEGIN { printf("hello world\\n"); @x = count(); @y[1, "a"] = sum(5); @y[2, "b"] = sum(-3); '
               '@h = hist(5); @h = hist(1000); @h = hist(-1); @l = lhist(15, 0, 100, 10); @m = max(7); '
               '@n = min(-2); @a = avg(3); @a = avg(4); @s = stats(10); @s = stats(20); @str["k"] = "v"; '
               'print(42); print("s"); exit(); }')
    ours = same_as_bpftrace(program)


def test_attaching_line_on_stderr():
    r = pycore("-e", "BEGIN { exit(); } END { printf(\"end\\n\"); }")
    assert r.returncode == 0
    assert r.stderr == "Attaching 2 probes...\n"
    assert r.stdout == "end\n\n\n"


def test_openat_with_str_filename(workload):
    exe, data = workload
    program = 'tracepoint:syscalls:sys_enter_openat /pid == cpid/ { printf("%s %s\\n", comm, str(args->filename)); }'
    ours, theirs = side_by_side(program, "-c", f"{exe} 0 {data}")
    assert f"work {data}\n" in ours
    assert ours == theirs


def test_args_dot_and_arrow_are_the_same(workload):
    exe, data = workload
    r = pycore("-c", f"{exe} 0 {data}", "-e",
               'tracepoint:syscalls:sys_enter_openat /pid == cpid/ { printf("%s|%s\\n", str(args.filename), str(args->filename)); }')
    assert f"{data}|{data}\n" in r.stdout


def test_syscall_counts_by_process(workload):
    exe, data = workload
    program = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @[comm] = count(); } " \
              "tracepoint:syscalls:sys_enter_getpid /pid == cpid/ { @getpid = count(); }"
    ours, theirs = side_by_side(program, "-c", f"{exe} 1234 {data}")
    assert "@getpid: 1234\n" in ours
    # before its exec the held child is the tracer's own stub: 'sh' for us, 'bpftrace' for bpftrace
    def strip(text: str) -> str:
        return re.sub(r"(?m)^@\[(sh|bpftrace)\]: \d+\n", "", text)
    assert strip(ours) == strip(theirs)


def test_read_sizes_hist_with_pid_predicate(workload):
    exe, data = workload
    # comm, not cpid: before its exec bpftrace's child reads its own pipe, which we would not see
    ours, theirs = side_by_side('tracepoint:syscalls:sys_exit_read /comm == "work"/ { @bytes = hist(args->ret); }',
                                "-c", f"{exe} 0 {data}")
    assert "[64K, 128K)" in ours
    assert ours == theirs


def test_lhist_and_positional_parameters(workload):
    exe, data = workload
    program = 'tracepoint:syscalls:sys_exit_read /comm == "work"/ { @ = lhist(args->ret, 0, $1, $2); @n = $#; }'
    ours = pycore("-c", f"{exe} 0 {data}", "-e", program, "70000", "10000").stdout
    # bpftrace 0.17 does not fold $1/$2 in lhist's bounds (it draws '[1, ...)'): give it the numbers
    literal = program.replace("$1", "70000").replace("$2", "10000").replace("$#", "2")
    theirs = bpftrace("-c", f"{exe} 0 {data}", "-e", literal).stdout
    assert "@n: 2\n" in ours
    assert ours == theirs


def test_read_latency_with_start_and_delete(workload):
    exe, data = workload
    program = ("tracepoint:syscalls:sys_enter_read /pid == cpid/ { @start[tid] = nsecs; } "
               "tracepoint:syscalls:sys_exit_read /@start[tid]/ { @ns[comm] = hist(nsecs - @start[tid]); "
               "@reads[comm] = count(); delete(@start[tid]); }")
    r = pycore("-c", f"{exe} 0 {data}", "-e", program)
    assert r.returncode == 0, r.stderr
    assert "@ns[work]:\n" in r.stdout
    assert "@reads[work]: " in r.stdout
    reads = int(re.search(r"@reads\[work\]: (\d+)", r.stdout).group(1))
    rows = sum(int(m) for m in re.findall(r"\)\s+(\d+) \|", r.stdout))
    assert rows == reads  # every read measured once


def test_per_second_counts_with_interval():
    r = pycore("-e", "tracepoint:raw_syscalls:sys_enter { @ = count(); } interval:ms:300 { print(@); clear(@); } "
                     "interval:ms:1000 { exit(); }")
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"(?m)^@: \d+$", r.stdout)) >= 2


def test_profile_with_kstack():
    r = pycore("-d", "1", "-e", "profile:hz:99 { @[kstack] = count(); }")
    assert r.returncode == 0, r.stderr
    assert re.search(r"@\[\n        [a-z_][\w.]*\+\d+\n", r.stdout), r.stdout[:500]


def test_sched_switch_stacks_and_folded():
    r = pycore("-d", "1", "-e", "tracepoint:sched:sched_switch { @[kstack] = count(); }")
    assert re.search(r"\n        __schedule\+\d+\n", r.stdout), r.stdout[:500]
    r = pycore("-d", "1", "--folded", "-e", "tracepoint:sched:sched_switch { @[kstack] = count(); }")
    assert re.search(r"(?m)^\S*;__schedule\+\d+ \d+$", r.stdout), r.stdout[:500]


def test_block_io_sizes(tmp_path):
    out = tmp_path / "direct.bin"
    cmd = f"dd if=/dev/zero of={out} bs=65536 count=8 oflag=direct"
    r = pycore("-c", cmd, "-e", "tracepoint:block:block_rq_issue { @ = hist(args->bytes); }")
    assert r.returncode == 0, r.stderr
    if "@:\n" not in r.stdout:
        pytest.fail(f"no block I/O seen for {cmd}: {r.stdout!r}")
    assert "[64K, 128K)" in r.stdout


# -- the lab's lock-contention script and its exercises -----------------------------------------

LOCK_WORK = """
import os, shutil, sys, tempfile, threading
d = tempfile.mkdtemp()   # removed at the end: nothing left in /tmp
tids = [threading.get_native_id()]
def work(i):
    tids.append(threading.get_native_id())
    for _ in range(1500):
        p = os.path.join(d, f"f{i}")
        open(p, "w").close()
        os.rename(p, os.path.join(d, f"g{i}"))
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
shutil.rmtree(d)
if len(sys.argv) > 1:
    open(sys.argv[1], "w").write(" ".join(map(str, tids)))
"""

LOCK_SCRIPT = """\
tracepoint:lock:contention_begin
{
  @[tid, args.lock_addr] = nsecs;
}

tracepoint:lock:contention_end
/@[tid, args.lock_addr] != 0/
{
  $lock_duration = nsecs - @[tid, args.lock_addr];
  if ($lock_duration > 1000*100) { /* block duration threshold time -  100 microsecs */
    printf("contended time: %lld\\n", $lock_duration);
  }
  delete(@[tid, args.lock_addr]);
}
"""

# the four exercises, written as a user would
LOCK_EXERCISES = """\
tracepoint:lock:contention_begin
{
  @[tid, args.lock_addr] = nsecs;
  @type[args.flags & 0x1 ? "spin" : (args.flags & 0x2 ? "read" : (args.flags & 0x4 ? "write" :
        (args.flags & 0x8 ? "rt" : (args.flags & 0x10 ? "percpu" : (args.flags & 0x20 ? "mutex" : "other")))))] = count();
}

tracepoint:lock:contention_end
/@[tid, args.lock_addr] != 0/
{
  $lock_duration = nsecs - @[tid, args.lock_addr];
  if ($lock_duration > $1) {
    @long_block_times[args.lock_addr] = hist($lock_duration);
  }
  delete(@[tid, args.lock_addr]);
}

END
{
  clear(@);
}
"""


def test_lock_contention_lab_script(tmp_path):
    (tmp_path / "lock.bt").write_text(LOCK_SCRIPT)
    (tmp_path / "work.py").write_text(LOCK_WORK)
    r = pycore("-c", f"python3 {tmp_path / 'work.py'} {tmp_path / 'tids'}", str(tmp_path / "lock.bt"), timeout=120)
    assert r.returncode == 0, r.stderr
    times = [int(x) for x in re.findall(r"(?m)^contended time: (\d+)$", r.stdout)]
    assert times and all(t > 100000 for t in times)
    # every begin of the workload's threads was deleted at its end (a key left is printed at exit); the
    # script traces every thread, and another's contention may span the detach (CI: a kernel thread's
    # on a static lock), as in bpftrace
    ours = set((tmp_path / "tids").read_text().split())
    left = re.findall(r"(?m)^@\[(\d+), 0x[0-9a-f]+\]: \d+$", r.stdout)
    assert r.stdout.count("@[") == len(left) and not ours & set(left), (left, ours)


def test_lock_contention_exercises(tmp_path):
    (tmp_path / "lock.bt").write_text(LOCK_EXERCISES)
    (tmp_path / "work.py").write_text(LOCK_WORK)
    r = pycore("-c", f"python3 {tmp_path / 'work.py'}", str(tmp_path / "lock.bt"), "1000", timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"@long_block_times\[0xffff[0-9a-f]+\]:\n\[", r.stdout), r.stdout[:800]
    assert re.search(r"@type\[(spin|read|write|rt|percpu|mutex|other)\]: \d+", r.stdout)
    assert not re.search(r"(?m)^@\[", r.stdout)  # END cleared the anonymous map


# -- the Python API ------------------------------------------------------------------------------

def test_python_api_events_and_live_maps():
    import pycore as pc

    prog = ('BEGIN { printf("started %d\\n", $1); } '
            'tracepoint:syscalls:sys_enter_getppid /pid == $1/ { @calls = count(); @h = hist(3); @by[comm] = count(); }')
    with pc.trace(prog, params=(str(os.getpid()),)) as s:
        for _ in range(7):
            os.getppid()
        events = list(s.events(timeout=0.3))
        assert [e.text for e in events] == [f"started {os.getpid()}\n"]
        maps = s.maps()
        assert maps["@calls"] == 7
        assert maps["@h"] == {3: 7}          # hist as buckets (pycore.hist's indexes)
        assert set(maps["@by"].values()) == {7}
        assert "@h:\n[2, 4)" in s.map_text("h")
    assert s.script._closed


def test_bswap_like_bpftrace(workload):
    """bswap() reverses the bytes of its argument's own width (1, 2, 4 or 8) and gives an unsigned int."""
    program = ('BEGIN { printf("%x %x %x %lx %d %u\\n", bswap((uint16)0x1234), bswap((uint32)0x12345678), '
               'bswap(0x1122334455667788), bswap(0x1122334455667788), bswap((int8)-2), bswap((uint16)1)); '
               '@[bswap((uint16)0x0100)] = count(); @v = bswap((int32)-1); print(bswap((uint32)1)); exit(); }')
    ours = same_as_bpftrace(program)
    assert '{"type": "printf", "data": "3412 78563412 44332211 8877665544332211 254 256\\n"}' in ours
    exe, data = workload
    program = ('tracepoint:syscalls:sys_enter_openat /pid == cpid/ '
               '{ @[bswap((uint32)args->flags), bswap((uint16)args->dfd), bswap(args->mode)] = count(); }')
    ours, theirs = side_by_side(program, "-c", f"{exe} 0 {data}")
    assert ours == theirs and ours.count("@[") >= 1


def test_buf_like_bpftrace(tmp_path):
    """buf(): raw bytes from a user pointer with a constant or run-time length, printed by %r/%rx,
    print(), as a map key and value, in text and json, byte for byte as bpftrace 0.17."""
    src = tmp_path / "w.c"
    src.write_text('#include <fcntl.h>\n#include <unistd.h>\nint main(void) { int fd = open("/dev/null", O_WRONLY);'
                   ' for (int i = 0; i < 3; i++) write(fd, "ab\\001c\\377Z", 6); write(fd, "xyz", 3); return 0; }\n')
    exe = tmp_path / "w"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    program = ('tracepoint:syscalls:sys_enter_write /pid == cpid/ { printf("%r|%rx|%d\\n", buf(args->buf, args->count), '
               'buf(args->buf, 2), args->count); @[buf(args->buf, 4)] = count(); @last = buf(args->buf, args->count); '
               '$n = args->count - 1; print(buf(args->buf, $n)); }')
    ours = same_as_bpftrace(program, "-c", str(exe))
    assert ours.count('{"type": "printf", "data": "ab\\\\x01c\\\\xffZ|\\\\x61\\\\x62|6\\n"}') == 3
    assert '{"type": "map", "data": {"@last": "xyz"}}' in ours
    # a string and a variable holding a buffer
    ours, theirs = side_by_side('BEGIN { $a = "hello"; printf("%r\\n", buf($a, 3)); print(buf($a, 2)); '
                                '$b = buf($a, 4); printf("%r\\n", $b); exit(); }')
    assert ours == theirs and ours.startswith("hel\nhe\nhell\n")


def test_address_spaces_like_bpftrace(tmp_path):
    """A cast of a uprobe's argument reads user memory (it read kernel memory, and so zeros, before);
    kptr() and uptr() say otherwise, as in bpftrace 0.17."""
    src = tmp_path / "u.c"
    src.write_text("#include <stdio.h>\nstruct pt { long x; long y; };\n"
                   "__attribute__((noinline)) long use(struct pt *p) { asm volatile(\"\"); return p->x + p->y; }\n"
                   "int main(void) { struct pt p = {7, 35}; printf(\"%ld\\n\", use(&p)); return 0; }\n")
    exe = tmp_path / "u"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    ts = "(struct timespec64 *)"
    for program, want in [
        (f'uprobe:{exe}:use {{ printf("%d %d\\n", ({ts}arg0)->tv_sec, ({ts}arg0)->tv_nsec); }}', "7 35\n"),
        (f'uprobe:{exe}:use {{ $p = {ts}uptr(arg0); printf("%d\\n", $p->tv_nsec); }}', "35\n"),
        (f'uprobe:{exe}:use {{ $p = {ts}kptr(arg0); printf("%d\\n", $p->tv_sec); }}', "0\n"),
        # "42\n" written from user memory, read through an integer marked as a user address
        (f'tracepoint:syscalls:sys_enter_write /pid == cpid/ {{ printf("%d\\n", '
         f'({ts}uptr((uint64)args->buf))->tv_sec & 0xffff); }}', f"{0x3234}\n"),
    ]:
        ours = pycore("-c", str(exe), "-e", program)
        assert ours.returncode == 0, ours.stderr
        theirs = bpftrace("-c", str(exe), "-e", program)
        assert theirs.returncode == 0, theirs.stderr
        printed = [ln for ln in ours.stdout.splitlines(True) if ln not in ("42\n", "\n")]
        assert printed == [want], (program, ours.stdout)
        assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines()), program


def test_tracepoint_integer_array_spelled_in_c(workload):
    """raw_syscalls' ``unsigned long args[6]``: C's spelling of the element type found in BTF
    (``long unsigned int``), so args->args[N] is typed and read as bpftrace reads it."""
    exe, data = workload
    program = "tracepoint:raw_syscalls:sys_enter /pid == cpid && args->id == 0/ { @[args->args[2]] = count(); }"
    ours, theirs = side_by_side(program, "-c", f"{exe} 0 {data}")
    assert sorted(ours.splitlines()) == sorted(theirs.splitlines())
    assert "@[65536]: 1\n" in ours and "@[16]: 1\n" in ours


def test_tuples_like_bpftrace(workload):
    """Tuples: literals, nested, $t.N (scalars, strings, inner tuples), in variables and map values,
    print() and the maps at the end, text and json, as bpftrace 0.17 prints them; maps() gives tuples."""
    program = ('BEGIN { $t = (1, "abc", (int8)-2); print($t); printf("%d %s\\n", $t.0, $t.1); @a = $t; '
               '@b[1] = ("x", 5); @c = ((1, 2), "x"); print(@c); print((1, 2)); $u = @c; print($u.0.1); exit(); }')
    ours = same_as_bpftrace(program)
    assert '{"type": "map", "data": {"@c": [[1,2],"x"]}}' in ours
    exe, data = workload
    program = ('tracepoint:syscalls:sys_enter_openat /pid == cpid/ { $t = (str(args->filename), args->flags, 7); '
               '@[$t.0, $t.1] = count(); @last = $t; $u = (($t.2, $t.1), $t.0); @n = $u; '
               'if ($t.0 == "' + data + '") { printf("%s %d %d\\n", $t.0, $u.0.1, $u.0.0); } }')
    for fmt in ("text", "json"):
        ours, theirs = side_by_side(program, "-f", fmt, "-c", f"{exe} 0 {data}")
        if fmt == "text":   # the loader's opens count 1 each too: bpftrace orders ties as its hash walks
            assert sorted(ours.splitlines()) == sorted(theirs.splitlines())
            assert f"@last: ({data}, 0, 7)\n@n: ((7, 0), {data})\n" in ours
        else:
            assert ours.splitlines()[-2:] == theirs.splitlines()[-2:]
    assert f'{{"type": "printf", "data": "{data} 0 7\\n"}}' in ours and ours.splitlines()[1] in theirs
    from pycore import trace

    with trace('BEGIN { @t = (3, "x"); @m[2] = ((1, "y"), -1); exit(); }') as s:
        list(s.events(timeout=5))
        assert s.maps() == {"@t": (3, "x"), "@m": {2: ((1, "y"), -1)}}


@pytest.fixture
def veth_ns():
    """A network namespace with a veth pair of known MAC addresses and a permanent neighbour,
    so that UDP sent out of veth0 is queued in the sender's own context (net:net_dev_queue)."""
    ns = f"pycore-mac-{os.getpid()}"
    ip = ["ip", "-n", ns]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for cmd in (["link", "add", "veth0", "type", "veth", "peer", "name", "veth1"],
                    ["link", "set", "veth0", "address", "02:11:22:33:44:55"],
                    ["link", "set", "veth1", "address", "02:66:77:88:99:aa"],
                    ["addr", "add", "10.9.9.1/24", "dev", "veth0"], ["addr", "add", "10.9.9.2/24", "dev", "veth1"],
                    ["link", "set", "veth0", "up"], ["link", "set", "veth1", "up"],
                    ["neigh", "replace", "10.9.9.2", "lladdr", "02:66:77:88:99:aa", "dev", "veth0", "nud", "permanent"]):
            subprocess.run([*ip, *cmd], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def test_macaddr_like_bpftrace(veth_ns, tmp_path):
    """macaddr() of a kernel pointer (the device's address, the frame's destination): printf, map keys."""
    sender = tmp_path / "send.py"
    sender.write_text("import socket\n"
                      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                      "s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b'veth0')\n"
                      "for _ in range(3):\n    s.sendto(b'x', ('10.9.9.2', 9999))\n")
    skb = "((struct sk_buff *)args->skbaddr)"
    program = (f"tracepoint:net:net_dev_queue /pid == cpid/ {{ @[macaddr({skb}->dev->dev_addr), macaddr({skb}->data)]"
               f' = count(); printf("%s %s\\n", macaddr({skb}->dev->dev_addr), macaddr({skb}->data)); }}')
    ip = shutil.which("ip")   # bpftrace 0.17 wants one binary: /sbin/ip and /usr/sbin/ip are two to it
    ours, theirs = side_by_side(program, "-c", f"{ip} netns exec {veth_ns} {sys.executable} {sender}")
    assert ours == theirs
    assert ours == "02:11:22:33:44:55 02:66:77:88:99:AA\n" * 3 + "\n\n@[02:11:22:33:44:55, 02:66:77:88:99:AA]: 3\n"
    # a variable, a map value and print(), in json: bpftrace 0.17 writes a mac value unquoted (not
    # JSON), pycore quotes it; otherwise the same
    program = (f"tracepoint:net:net_dev_queue /pid == cpid/ {{ $m = macaddr({skb}->dev->dev_addr); @[$m] = count(); "
               "@v = $m; print($m); }")
    ours, theirs = side_by_side(program, "-f", "json", "-c", f"{ip} netns exec {veth_ns} {sys.executable} {sender}")
    assert [json.loads(line) for line in ours.splitlines() if line][-1] == \
        {"type": "map", "data": {"@v": "02:11:22:33:44:55"}}
    assert ours.replace('"data": "02:11:22:33:44:55"', '"data": 02:11:22:33:44:55') \
               .replace('"@v": "02:11:22:33:44:55"', '"@v": 02:11:22:33:44:55') == theirs


NANOSLEEP = ("import ctypes\n"
             "class timespec(ctypes.Structure): _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
             "for t in ((0, 250000), (0, 1000), (1, 5000)): ctypes.CDLL(None).syscall(35, ctypes.byref(timespec(*t)), None)\n")


def test_tracepoint_struct_pointer_field(tmp_path):
    """A syscall tracepoint's ``struct __kernel_timespec *`` field typed from BTF and read from user
    memory (naptime.bt's args->rqtp->tv_sec), as bpftrace."""
    work = tmp_path / "nap.py"
    work.write_text(NANOSLEEP)
    same_as_bpftrace('tracepoint:syscalls:sys_enter_nanosleep /pid == cpid/ '
                     '{ printf("%d.%06d\\n", args->rqtp->tv_sec, args->rqtp->tv_nsec); @[args->rqtp->tv_sec] = count(); }',
                     "-c", f"{sys.executable} {work}")


def test_enum_values_from_btf():
    """C enum constants read from the kernel's BTF (tcplife.bt's TCP_FIN_WAIT1, tcpdrop.bt's drop
    reasons), with no #include, as bpftrace; also where a constant is needed (lhist's bounds). A
    constant is its enum's: a map key prints by its name, as bpftrace 0.21+ prints it (0.17: 7)."""
    from tests.test_trace_values import same_as_023

    assert same_as_023('BEGIN { printf("%d %d %d\\n", TCP_CLOSE, TCP_FIN_WAIT1, SKB_DROP_REASON_NOT_SPECIFIED); '
                       '@[TCP_CLOSE] = count(); if (TCP_CLOSE == 7) { printf("seven\\n"); } exit(); }') \
        == "7 4 2\nseven\n\n\n@[TCP_CLOSE]: 1\n"
    r = pycore("-e", "BEGIN { @ = lhist(TCP_CLOSE, 0, TCP_CLOSE + 3, 1); exit(); }")
    assert r.returncode == 0, r.stderr
    assert "[7, 8)                 1 |@@@@" in r.stdout


MACROS = """\
#include <sys/socket.h>
#include <fcntl.h>
#ifdef BPFTRACE_HAVE_BTF
#define V 1
#else
#define V 2
#endif
#define N 3
#define M (N << 2 | 1)
BEGIN { printf("%d %d %d %d %d %d\\n", AF_INET, AF_INET6, O_CREAT, N, M, V); @[AF_INET6] = lhist(M, 0, 20, 1); exit(); }
"""


def test_macros_of_defines_and_headers(tmp_path):
    """Integer macros of the script's #define lines and of system headers it includes (tcpconnect.bt's
    AF_INET), with BPFTRACE_HAVE_BTF defined, as bpftrace's clang reads them."""
    script = tmp_path / "macros.bt"
    script.write_text(MACROS)
    for fmt in ("text", "json"):
        ours, theirs = pycore("-f", fmt, str(script)), bpftrace("-f", fmt, str(script))
        assert ours.returncode == 0 and theirs.returncode == 0, (ours.stderr, theirs.stderr)
        assert ours.stdout == theirs.stdout, fmt
    assert '{"type": "printf", "data": "2 10 64 3 13 1\\n"}' in ours.stdout.splitlines()


@pytest.mark.parametrize("head,name,message", [
    ('#define S "x"', "S", "macro S expands to '\"x\"', not an integer constant"),
    ("#define E", "E", "macro E expands to '', not an integer constant"),
    ("#include <no/such/header.h>", "NOPE", "nor a macro of the script's #define and #include lines "
                                           "(not found here: no/such/header.h)"),
])
def test_macro_errors(head, name, message):
    r = pycore("-e", f"{head}\nBEGIN {{ printf(\"%d\\n\", {name}); }}")
    assert r.returncode == 2, r
    first, line, caret = r.stderr.splitlines()[:3]
    assert first.startswith("stdin:2:24: error: ") and message in first, r.stderr
    assert caret == " " * 23 + "^"


def test_strftime():
    """strftime(fmt, ns since boot): the wall clock time, local, formatted when printed, in printf, map keys
    and values, as bpftrace; in json pycore quotes the text (bpftrace 0.17 writes it bare, not JSON)."""
    program = ('BEGIN { printf("%s|\\n", strftime("%Y-%m-%d %H:%M:%S", 0)); @[strftime("%Y", nsecs), 5] = count(); '
               '@v = strftime("%m", nsecs); $t = strftime("%d", 0); printf("%s\\n", $t); exit(); }')
    ours, theirs = side_by_side(program)
    assert ours == theirs
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    assert ours.splitlines()[0] in {time.strftime("%Y-%m-%d %H:%M:%S|", time.localtime(boot + d)) for d in (-1, 0, 1)}
    ours, theirs = side_by_side(program, "-f", "json")
    assert ours == re.sub(r'("@v": )(\d+)', r'\1"\2"', theirs)
    # %f: the microseconds of the wall clock time
    r = pycore("-e", 'BEGIN { printf("%s %s\\n", strftime("%f", 0), strftime("%f", 1000)); exit(); }')
    a, b = (int(x) for x in r.stdout.split())
    assert (b - a) % 1_000_000 == 1, r.stdout
    # the seconds and %f of one instant: across a second's boundary the seconds roll over with them;
    # '%%f' is a literal %f (it printed an empty line)
    r = pycore("-e", 'BEGIN { printf("%s|%s|%s\\n", strftime("%s.%f", 0), strftime("%s.%f", 999999000), '
                     'strftime("%f %%f", 0)); exit(); }')
    first, second, literal = r.stdout.splitlines()[0].split("|")
    whole = [float(x) for x in (first, second)]
    assert abs(whole[1] - whole[0] - 0.999999) < 1e-6, r.stdout
    assert literal == f"{first.split('.')[1]} %f", r.stdout


@pytest.fixture
def cgroup_dir():
    """A cgroup of its own in the unified (v2) hierarchy, removed afterwards."""
    from pycore.kernel.cgroup import hierarchies

    unified = [root for name, root in hierarchies() if name == "unified"]
    assert unified, "a cgroup2 hierarchy is mounted"
    path = os.path.join(unified[0], f"pycore-test-{os.getpid()}")
    os.mkdir(path)
    yield path
    for _ in range(50):
        try:
            os.rmdir(path)
            break
        except OSError:        # its last process is still exiting
            time.sleep(0.1)


def test_cgroupid_and_cgroup_path(cgroup_dir, tmp_path):
    """cgroupid(path) when checked, cgroup_path(id[, filter]) when printed, in printf, print and a map value,
    for a -c command moved into a cgroup of its own, as bpftrace."""
    (tmp_path / "move.sh").write_text(f"echo $$ > {cgroup_dir}/cgroup.procs && exec /bin/echo hi\n")
    cmd = f"/bin/sh {tmp_path / 'move.sh'}"     # bpftrace 0.17 splits -c at spaces: no quotes
    program = (f'tracepoint:syscalls:sys_enter_write /pid == cpid/ {{ printf("%s %d\\n", cgroup_path(cgroup, "unif*"), '
               f'cgroup == cgroupid("{cgroup_dir}")); @v = cgroup_path(cgroup, "unified"); '
               f'print(cgroup_path(cgroupid("{cgroup_dir}"), "unified")); }}')
    ours, theirs = side_by_side(program, "-c", cmd)
    name = os.path.basename(cgroup_dir)
    # the shell's own write moves it (still in the parent cgroup), then echo writes from the new one
    assert ours.splitlines()[:5] == ["unified:/ 0", f"unified:/{name}", "hi", f"unified:/{name} 1", f"unified:/{name}"], ours
    assert ours == theirs
    ours, theirs = side_by_side(program, "-f", "json", "-c", cmd)
    assert ours == re.sub(rf'(": )(unified:/{name})', r'\1"\2"', theirs)   # bpftrace 0.17 writes it bare


def test_integer_dereference_and_bpftrace_int_pointers():
    """*x of an integer reads the int64 there (loads.bt's *kaddr("avenrun")); (uint64 *) names BTF's u64."""
    same_as_bpftrace('BEGIN { $p = (uint64)curtask; printf("%d %d %d\\n", *$p == *((uint64 *)curtask), sizeof(*$p), '
                     '*((uint8 *)curtask) == (*$p & 0xff)); exit(); }')


def test_function_wildcard_matching_nothing_is_left_out():
    """One of a block's attach points, a function wildcard that matches nothing here, is left out, as
    bpftrace 0.17 does (dcsnoop.bt's kprobe:lookup_fast.constprop.*); alone, it is an error."""
    program = 'uprobe:/bin/bash:readline, uprobe:/bin/bash:zzz_no_such* { @ = count(); } BEGIN { exit(); }'
    ours, theirs = pycore("-e", program), bpftrace("-e", program)
    assert ours.returncode == 0 and theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert "Attaching 2 probes..." in ours.stderr and theirs.raw.startswith("Attaching 2 probes...")  # type: ignore[attr-defined]
    r = pycore("-e", "uprobe:/bin/bash:zzz_no_such* { @ = count(); }")
    assert r.returncode == 2 and "uprobe:/bin/bash:zzz_no_such*: matches no probe on this system" in r.stderr


def test_control_flow_like_bpftrace():
    """break and continue in while; what follows exit(), return, break or continue is not run (nor
    emitted: the verifier refuses code that cannot run); a variable assigned on one path only, or only
    after an exit(), reads 0 on the others."""
    same_as_bpftrace(
        'BEGIN { $i = 0; while ($i < 9) { $i++; if ($i == 2) { continue; } if ($i == 5) { break; } '
        'printf("%d\\n", $i); } if (pid == 0) { $y = 1; $s = "abc"; } printf("%d %d %s|\\n", $i, $y, $s); '
        'unroll(3) { @u = count(); if (1) { exit(); } else { exit(); } printf("never\\n"); } exit(); '
        'printf("never\\n"); }')


def test_bpftrace_options_q_o_b_and_map_keys(tmp_path):
    """-q (no Attaching line, in text and json), -o FILE, -B, and BPFTRACE_MAP_KEYS_MAX (the fourth key
    of a two-key map is not stored), as bpftrace 0.17."""
    program = 'BEGIN { printf("x\\n"); @[1] = 1; @[2] = 2; @[3] = 3; exit(); }'
    env = {**os.environ, "BPFTRACE_MAP_KEYS_MAX": "2"}
    ours = subprocess.run([*PYCORE, "-q", "-e", program], capture_output=True, text=True, env=env, timeout=60)
    theirs = subprocess.run([BPFTRACE, "-q", "-e", program], capture_output=True, text=True, env=env, timeout=60)
    assert ours.returncode == 0 and "Attaching" not in ours.stderr, ours.stderr
    assert theirs.stdout == "x\n\n\n@[1]: 1\n@[2]: 2\n"
    # and 0.23.2's warning at the refused update, which 0.17 did not print (tests/test_trace_map_full.py)
    warning = ("stdin:1:44-52: WARNING: Map full; can't update element. Try increasing max_map_keys config\n"
               "Additional Info - helper: map_update_elem, retcode: -7\n" + program + "\n" + " " * 43 + "~" * 8 + "\n")
    assert ours.stdout == "x\n" + warning + "\n\n@[1]: 1\n@[2]: 2\n", ours.stdout
    ours = pycore("-q", "-f", "json", "-e", program)
    assert ours.stdout.splitlines()[0] == '{"type": "printf", "data": "x\\n"}'
    out = tmp_path / "out.txt"
    r = pycore("-o", str(out), "-B", "full", "-e", program)
    assert r.returncode == 0 and r.stdout == "" and "Attaching 1 probe..." in r.stderr
    assert out.read_text() == "x\n\n\n@[1]: 1\n@[2]: 2\n@[3]: 3\n"
    r = pycore("-o", str(tmp_path / "no" / "such" / "dir"), "-e", program)
    assert r.returncode == 2 and r.stderr.strip().endswith("No such file or directory") and "\n" not in r.stderr.strip()
    r = subprocess.run([*PYCORE, "-e", program], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "BPFTRACE_MAP_KEYS_MAX": "lots"})
    # bpftrace's words (0.17 and 0.23.2 alike)
    assert r.returncode == 2 and r.stderr == ("pycore trace: Env var 'BPFTRACE_MAP_KEYS_MAX' did not contain a valid "
                                              "uint64_t, or was zero-valued.\n")


STACK_ARGS_C = r"""
#include <stdio.h>
__attribute__((noinline)) long f(long a, long b, long c, long d, long e, long g, long h, long i) {
    return a + b + c + d + e + g + h + i;
}
int main(void) { printf("%ld\n", f(1, 2, 3, 4, 5, 6, -7, 8000000000L)); return 0; }
"""


def test_stack_arguments(tmp_path):
    """sarg0, sarg1: a function's 7th and 8th arguments, on the stack (x86-64), read in a uprobe, as bpftrace."""
    (tmp_path / "s.c").write_text(STACK_ARGS_C)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "s"), str(tmp_path / "s.c")], check=True)
    exe = tmp_path / "s"
    program = f'uprobe:{exe}:f {{ printf("%d %d %d\\n", sarg0, sarg1, arg5); @[sarg0, sarg1] = count(); }}'
    ours, theirs = side_by_side(program, "-c", str(exe))
    assert "@[-7, 8000000000]: 1" in ours.splitlines(), ours
    trace = [ln for ln in ours.splitlines() if ln != "8000000014"]      # the program's own line races ours
    assert trace == [ln for ln in theirs.splitlines() if ln != "8000000014"]


# -- errors: one line (and a caret), exit 2, never a traceback ------------------------------------

@pytest.mark.parametrize("program,message", [
    ('tracepoint:syscalls:sys_enter_openat { printf("%s\\n", str(args->filenme)); }', "did you mean 'filename'?"),
    ('tracepoint:syscalls:sys_enter_opnat { @ = count(); }', "no such tracepoint (did you mean 'sys_enter_openat'"),
    ('BEGIN { $x = (struct dentri *)0; }', "unknown type 'struct dentri': not in this kernel's BTF (did you mean 'struct dentry'?)"),
    ('BEGIN { printf("%d\\n", "x"); }', "%d specifier expects a value of type integer"),
    ('BEGIN { @x = 1 +; }', "expected an expression"),
    ('BEGIN { fo(); }', "unknown function fo()"),
    ('BEGIN { $f = "%Y"; printf("%s", strftime($f, 0)); }', "strftime() expects a string literal"),
    ('BEGIN { printf("%s", strftime("%Y", comm)); }', "strftime() only supports integer arguments (string[16] provided)"),
    ('BEGIN { $x = strftime("%Y", 0) + 1; }', "Type mismatch for '+': comparing 'timestamp' with 'int64'"),
    ('BEGIN { printf("%d", strftime("%Y", 0)); }', "%d specifier expects a value of type integer (string supplied)"),
    ('BEGIN { @ = cgroupid("/proc"); }', "cgroupid: /proc is not in the cgroup v2 hierarchy (mounted at /"),
    ('BEGIN { printf("%s", cgroup_path("a")); }', "cgroup_path() only supports integer arguments (string[2] provided)"),
    ('BEGIN { printf("%s", cgroup_path(1, comm)); }', "cgroup_path(): the filter must be a string literal"),
    ('tracepoint:syscalls:sys_enter_getpid, tracepoint:syscalls:sys_enter_zzz* { }',
     "tracepoint:syscalls:sys_enter_zzz*: matches no probe on this system"),
    ('BEGIN { break; }', "break used outside of a loop"),
    ('tracepoint:syscalls:sys_enter_read { print(sarg0); }',
     "The sarg0 builtin can only be used with 'kprobes' and 'uprobes' probes"),
    ('BEGIN { join("str"); }', "join() only supports int or pointer arguments (string[4] provided)"),
    ('BEGIN { unroll(2) { continue; } }', "continue used outside of a loop"),
    ('BEGIN { if ("s") { exit(); } }', "Invalid condition in if(): string[2]"),
    ('BEGIN { $x = comm ? 1 : 2; }', "Invalid condition in ternary: string[16]"),
    ('BEGIN /comm/ { }', "Invalid condition in predicate: string[16]"),
    ('BEGIN { @ = comn; }', "unknown identifier 'comn': not a builtin, nor an enum value in this kernel's BTF "
                            "(did you mean 'comm'?)"),
    ('BEGIN { @ = TCP_CLOZE; }', "unknown identifier 'TCP_CLOZE'"),
    ('BEGIN { @ = bswap(comm); }', "bswap() only supports integer arguments, not string[16]"),
    ('BEGIN { @ = bswap(); }', "bswap() takes one integer"),
    ('BEGIN { @ = macaddr(comm); }', "macaddr() argument must be 6 bytes in size, not 16"),
    ('BEGIN { $t = (1, 2); $t = (1, "a"); }', "$t holds (int64, int64), cannot assign (int64, string[2])"),
    ('BEGIN { @a = (1, 2); @a = (1, "a"); }', "@a holds (int64, int64) values elsewhere; here (int64, string[2])"),
    ('BEGIN { $t = (1, 2); print($t.2); }', "invalid tuple index: 2; the tuple has 2 elements"),
    ('BEGIN { $t = (1, 2); printf("%d", $t); }', "printf cannot print (int64, int64)"),
    ('BEGIN { @[1, 2] = 1; $t = (1, "a"); @[$t] = 2; }', "@: key is int64 elsewhere, string[2] here"),
    ('BEGIN { @ = uptr(comm); }', "uptr() expects an address or a pointer, not string[16]"),
    ('BEGIN { @ = kptr(); }', "kptr() takes one argument"),
    ('BEGIN { @ = buf(1); }', "buf() expects a length argument for non-array type"),
    ('BEGIN { @ = buf(1, 2); }', "buf() expects an array, a pointer or a string"),
    ('BEGIN { @ = buf(comm, -1); }', "buf(): the length cannot be negative"),
    ('BEGIN { @ = buf(comm, comm); }', "buf(): the length must be an integer"),
    ('BEGIN { @ = macaddr(1); }', "macaddr() only supports array or pointer arguments, not int64"),
    ('BEGIN { @m = ntop(1); @m = macaddr((u8 *)0); }', "@m holds inet values elsewhere; here mac"),
    ('BEGIN { $i = 0; while ($i < 1000000000) { $i++; } }', "a loop it cannot bound"),
    ('kfunc:vfs_read { @ = count(); }', "refuses fentry/fexit"),
    ('kfunc:zzz_no_such_fn* { @ = count(); }', "kfunc:zzz_no_such_fn*: matches no probe on this system"),
    ('kretfunc:vfs_no_such_* { @ = count(); }', "kretfunc:vfs_no_such_*: matches no probe on this system"),
    ('BEGIN { system("true"); }', "unsafe: run with --unsafe"),
    ('uprobe:/nonexistent/bin:f { }', "/nonexistent/bin"),
])
def test_errors_say_where_and_why(program, message):
    r = pycore("-e", program)
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    head = r.stderr.splitlines()[0]
    assert re.match(r"^stdin:\d+:\d+: error: ", head), r.stderr
    assert message in head, r.stderr
    assert re.search(r"(?m)^ *\^~*$", r.stderr), r.stderr  # a caret under the spot


def test_missing_script_file_and_dry_run(tmp_path):
    r = pycore(str(tmp_path / "nope.bt"))
    assert r.returncode == 2 and r.stderr.startswith("pycore trace: ") and "No such file" in r.stderr
    r = pycore("--dry-run", "-e", "tracepoint:syscalls:sys_enter_open* { @[probe] = count(); }")
    assert r.returncode == 0, r.stderr
    assert "tracepoint:syscalls:sys_enter_openat  (perf tracepoint)" in r.stdout
    assert "map @[string[" in r.stdout


@pytest.mark.parametrize("argv", [
    ["-e", "BEGIN { exit(); }"], ["-e", "BEGIN { }", "a", "b", "c"], ["-e", ""], ["x.bt"], ["x.bt", "1", "two"],
    [""], [], ["-e"], ["-e", "-x"], ["-e", "P", "-1"], ["-v", "-e", "P"], ["-e", "P", "--dry-run"],
    ["x.bt", "-p", "1"], ["--help"], ["-"], ["--"], ["-eP"], ["-d", "1", "x.bt"], ["x.bt", "--", "-1"],
])
def test_quick_args_read_what_argparse_reads(argv):
    import argparse

    from pycore.commands import trace as trace_command

    quick = trace_command.quick_args(argv)
    words = argv[1:] if argv[:1] == ["-e"] else argv   # the quick path: -e first, then no other option
    expect_quick = bool(words) and not any(w.startswith("-") for w in words)
    assert (quick is not None) == expect_quick, argv
    if quick is None:
        return  # argparse reads it
    parser = argparse.ArgumentParser(exit_on_error=False)
    trace_command.add_arguments(parser)
    assert vars(quick) == vars(parser.parse_args(argv))


@pytest.mark.parametrize("kind", ["kfunc", "kretfunc"])
def test_kfunc_wildcard_targets_are_the_named_ones(kind):
    """A wildcard's targets (one BTF scan for all names) are those of each function named alone
    (resolving needs only BTF, so the host checks it; attaching is in test_trace_kernel.py)."""
    from pycore.lang.runtime import Script

    def targets(probe):
        [(_, found)] = Script(f"{probe} {{ }}").resolve()
        return found

    def typed(fields):   # name and type of each field; a type's Spec differs from script to script
        return [(f.name, type(f.type), {k: v for k, v in vars(f.type).items() if k != "spec"})
                for f in fields if f is not None]

    wild = targets(f"{kind}:vfs_*")
    assert len(wild) > 20
    for t in wild:
        [alone] = targets(f"{kind}:{t.func}")
        assert (t.probe, t.attach_btf_id, t.attach_type) == (alone.probe, alone.attach_btf_id, alone.attach_type)
        assert typed(t.argn + [t.retval]) == typed(alone.argn + [alone.retval])


def test_pid_and_command_errors():
    p = subprocess.Popen(["true"])
    p.wait()
    r = pycore("-p", str(p.pid), "-e", "BEGIN { }")
    assert r.returncode == 2 and r.stderr.strip() == f"pycore trace: process {p.pid} does not exist"
    r = pycore("-c", "/nonexistent", "-e", "BEGIN { }")
    assert r.returncode == 2 and "-c: cannot run '/nonexistent'" in r.stderr


def test_ends_when_the_traced_process_exits():
    target = subprocess.Popen(["sleep", "1"])
    t0 = time.monotonic()
    r = pycore("-p", str(target.pid), "-e", "tracepoint:raw_syscalls:sys_enter { @ = count(); }", timeout=30)
    target.wait()
    assert r.returncode == 0 and time.monotonic() - t0 < 10


# -- nothing left behind -----------------------------------------------------------------------

def _loaded() -> set[int]:
    return {p["id"] for p in bpftool_show("prog")}


@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_nothing_stays_attached(how):
    import signal

    proc = subprocess.Popen([*PYCORE, "-e", "tracepoint:raw_syscalls:sys_enter { @ = count(); }"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().startswith("Attaching")
    ours = prog_ids_of(proc.pid)   # by id, not by name: another run's BEGIN and sys_enter may come and go
    assert ours and ours <= _loaded()
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    if how == "sigint":
        assert re.search(r"(?m)^@: \d+$", out)
    for _ in range(50):
        if not ours & _loaded():
            break
        time.sleep(0.1)
    assert not ours & _loaded()


def test_pointer_arithmetic_and_increments_like_bpftrace():
    """Pointer arithmetic steps by the pointee's size ((uint32 *)p + 1 is 4 bytes on, n + p too,
    struct pointers by sizeof, ++/--/+=/-= on pointer variables), and ++x/x++/--x/x-- are
    expressions with bpftrace's values for variables and maps. Before: $p + 1 was right but
    $p++ was refused, 2 + $p was 2 bytes on, and x++ as a value was 'unsupported expression'."""
    program = (
        'BEGIN { $p = (uint32 *)1000; printf("%d %d %d\\n", (uint64)($p + 1), (uint64)(2 + $p), (uint64)($p - 1)); '
        '$q = (struct task_struct *)0; printf("%d\\n", (uint64)($q + 1)); '
        '$p++; printf("%d\\n", (uint64)$p); --$p; $p--; printf("%d\\n", (uint64)$p); '
        '$x = 5; printf("%d %d %d %d %d\\n", $x++, $x, ++$x, $x--, --$x); '
        '@m = 1; printf("%d %d\\n", @m++, ++@m); '
        '@n[1] = 10; @n[1]--; printf("%d %d\\n", @n[1]--, --@n[1]); '
        '$h = (uint16 *)100; $h += 1; printf("%d\\n", (uint64)$h); $h -= 3; printf("%d\\n", (uint64)$h); '
        '$y = $x++ + ++$x; printf("%d %d\\n", $y, $x); exit(); }')
    ours = same_as_bpftrace(program)
    assert '"1004 1008 996\\n"' in ours and '"1 3\\n"' in ours and '"9 7\\n"' in ours
    bad = pycore("-e", "BEGIN { $a = (uint64 *)8; $b = (uint64 *)0; printf(\"%d\\n\", $a - $b); }")
    assert bad.returncode == 2 and bad.stderr.count("\n") <= 3 and "two pointers" in bad.stderr


def test_username_and_ctx_like_bpftrace(tmp_path):
    """username (the uid, named when printed: printf, map keys and values, print) and ctx (a uprobe's
    struct pt_regs *, read as a pointer or cast), side by side with bpftrace in text and json."""
    same_as_bpftrace('BEGIN { printf("%s\\n", username); @u[username] = count(); @v = username; '
                     'print(username); exit(); }')
    src = tmp_path / "regs.c"
    src.write_text("#include <unistd.h>\n__attribute__((noinline)) long work(long a, long b) { return a * 3 + b; }\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 3; i++) s += work(i, 7); return (int)(s & 1); }\n")
    exe = tmp_path / "regs"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    ours = same_as_bpftrace(f'uprobe:{exe}:work {{ printf("%d %d %d\\n", ctx->di, ctx->si, '
                            '((struct pt_regs *)ctx)->di + 1); @[ctx->di] = sum(ctx->di + 1); }', "-c", str(exe))
    assert '"0 7 1\\n"' in ours and '"2 7 3\\n"' in ours
    bad = pycore("-e", "tracepoint:syscalls:sys_enter_openat { printf(\"%p\\n\", ctx); }")
    assert bad.returncode == 2 and "Use args instead of ctx in tracepoint" in bad.stderr


def test_uaddr_like_bpftrace_and_in_pie(tmp_path):
    """uaddr("sym") points at a symbol of the probed binary, typed by its size: side by side with
    bpftrace on a non-PIE program. In a PIE bpftrace 0.17 reads the link-time address (zeros);
    pycore adds the load base (the probe's ip less the probed address) and reads the same values."""
    src = tmp_path / "g.c"
    src.write_text('int counter = 41; long big = 1234567890123; short sh = -5; char name[16] = "hello";\n'
                   "__attribute__((noinline)) long work(long a) { counter++; return a + counter; }\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 3; i++) s += work(i); return (int)(s & 1); }\n")
    outs = []
    for pie in ("-no-pie", "-pie"):
        exe = tmp_path / f"g{pie}"
        subprocess.run(["gcc", "-O1", pie, "-o", str(exe), str(src)], check=True)
        program = (f'uprobe:{exe}:work {{ printf("%d %ld %d %s\\n", *uaddr("counter"), *uaddr("big"), *uaddr("sh"), '
                   'str(uaddr("name"))); @[*uaddr("counter")] = sum(*uaddr("counter")); }')
        if pie == "-no-pie":
            outs.append(same_as_bpftrace(program, "-c", str(exe)))
        else:
            r = pycore("-f", "json", "-e", program, "-c", str(exe))
            assert r.returncode == 0, r.stderr
            outs.append(r.stdout)
    assert outs[0] == outs[1] and '"41 1234567890123 -5 hello\\n"' in outs[0]
    bad = pycore("-e", f'uretprobe:{tmp_path / "g-pie"}:work {{ printf("%d\\n", *uaddr("counter")); }}')
    assert bad.returncode == 2 and "position independent" in bad.stderr
    bad = pycore("-e", f'uprobe:{tmp_path / "g-pie"}:work {{ printf("%d\\n", *uaddr("nope")); }}')
    assert bad.returncode == 2 and "no symbol 'nope'" in bad.stderr


def test_positional_parameters_as_bpftrace_reads_them(tmp_path):
    """$N is a number in C's spellings (0x10, 077 octal, ' 12') unless str($N) asks for its text, which is
    the text as given ("0x10"); a parameter that is no number used as one is bpftrace's error; $N works
    inside attach points (interval:ms:$1, uprobe:$1:FUNC)."""
    # (str($2, 2) is "07" in bpftrace 0.17 and "0" in 0.23.2, whose pycore follows: tests/test_trace_config.py)
    program = 'BEGIN { printf("%d %d %s|%s| %d %s\\n", $1, $2, str($1), str($4), $3, str($2)); @[str($1)] = count(); exit(); }'
    ours = same_as_bpftrace(program, "0x10", "077", " 12")
    assert '"16 63 0x10|| 12 077\\n"' in ours
    for bad in ("1_000", "1e3", "hello", "99999999999999999999"):
        r = pycore("-e", 'BEGIN { printf("%d\\n", $1); exit(); }', bad)
        assert r.returncode == 2 and f'$1 used numerically but given "{bad}". Try using str($1).' in r.stderr
    assert '{"type": "printf", "data": "tick\\n"}' in same_as_bpftrace('interval:ms:$1 { printf("tick\\n"); exit(); }', "20")
    src = tmp_path / "w.c"
    src.write_text("__attribute__((noinline)) long work(long a) { return a + 1; }\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 3; i++) s += work(i); return (int)(s & 1); }\n")
    exe = tmp_path / "w"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    ours = same_as_bpftrace('uprobe:$1:work { printf("w %d\\n", arg0); }', "-c", str(exe), str(exe))
    assert ours.count('"w ') == 3


def test_script_from_stdin_and_listing_like_bpftrace():
    """pycore trace - reads the script from standard input, and -l/-lv list probes as pycore list (and
    bpftrace -l/-lv) do: the tutorial's first steps."""
    program = 'BEGIN { printf("hi %d\\n", $1); exit(); }'
    ours = subprocess.run([*PYCORE, "-", "5"], input=program, capture_output=True, text=True, timeout=60)
    theirs = subprocess.run([BPFTRACE, "-", "5"], input=program, capture_output=True, text=True, timeout=60)
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout.replace("Attaching 1 probe...\n", "") == "hi 5\n\n\n"
    for flags in (["-l"], ["-lv"]):
        ours = pycore(*flags, "tracepoint:syscalls:sys_enter_openat")
        theirs = bpftrace(*flags, "tracepoint:syscalls:sys_enter_openat")
        assert ours.returncode == theirs.returncode == 0, ours.stderr
        assert ours.stdout == theirs.stdout and ours.stdout.startswith("tracepoint:syscalls:sys_enter_openat\n")
    listed = pycore("-l", "-e", "BEGIN { }")     # bpftrace 0.22+: a program's probes (test_trace_probes_023.py)
    assert listed.returncode == 0 and listed.stdout == "special::\n", listed.stderr
    bad = pycore("-l", "-c", "/bin/true", "-e", "BEGIN { }")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_probes_on_one_place_fire_in_script_order_like_bpftrace(tmp_path):
    """Two blocks on one tracepoint, uprobe, uretprobe: they fire in the script's order, as in bpftrace
    (a uprobe's consumers run newest first, so pycore attaches user-space probes in reverse)."""
    src = tmp_path / "o.c"
    src.write_text("#include <unistd.h>\n__attribute__((noinline)) long work(long a) { return a + getppid(); }\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 2; i++) s += work(i); return (int)(s & 1); }\n")
    exe = tmp_path / "o"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    program = "".join(f'{p} {{ printf("{p[:2]}{i}\\n"); }} ' for p in
                      ("tracepoint:syscalls:sys_enter_getppid /pid == cpid/", f"uprobe:{exe}:work", f"uretprobe:{exe}:work")
                      for i in (1, 2))
    ours = same_as_bpftrace(program, "-c", str(exe))
    assert [json.loads(line)["data"].strip() for line in ours.splitlines() if '"printf"' in line] == \
        ["up1", "up2", "tr1", "tr2", "ur1", "ur2"] * 2


def test_uprobe_on_a_binary_in_another_mount_namespace(tmp_path):
    """With -p PID, a path is the process's: a binary that exists only in its mount namespace (a tmpfs
    mounted over an empty directory there) is probed through /proc/PID/root, as bpftrace does."""
    src = tmp_path / "slow.c"
    src.write_text("#include <unistd.h>\n__attribute__((noinline)) long work(long a) { return a + 1; }\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 100; i++) { s += work(i); usleep(50000); }"
                   " return (int)(s & 1); }\n")
    exe = tmp_path / "slow"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    hidden = tmp_path / "ns"
    hidden.mkdir()
    script = f"mount -t tmpfs none {hidden} && cp {exe} {hidden}/prog && exec {hidden}/prog"
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{proc.pid}/exe") != f"{hidden}/prog":
            assert time.monotonic() < deadline, "the program did not start in its namespace"
            time.sleep(0.05)
        assert not (hidden / "prog").exists()       # not in our namespace
        program = f'uprobe:{hidden}/prog:work {{ printf("%s %d\\n", probe, arg0 >= 0); exit(); }}'
        r = pycore("-p", str(proc.pid), "-e", program)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"uprobe:/proc/{proc.pid}/root{hidden}/prog:work 1\n")
        theirs = bpftrace("-p", str(proc.pid), "-e", program)
        assert theirs.stdout == r.stdout
    finally:
        proc.kill()
        proc.wait()


def test_watchpoint_like_bpftrace(tmp_path):
    """watchpoint:ADDRESS:LENGTH:MODE: a hardware breakpoint on a global of the -c command, each write
    counted, side by side with bpftrace 0.17; a bad length or mode is one line at the probe."""
    src = tmp_path / "g.c"
    src.write_text("int counter = 41;\n__attribute__((noinline)) void work(void) { counter++; }\n"
                   "int main(void) { for (int i = 0; i < 5; i++) work(); return counter == 46 ? 0 : 1; }\n")
    exe = tmp_path / "g"
    subprocess.run(["gcc", "-O1", "-no-pie", "-o", str(exe), str(src)], check=True)
    from pycore.elf.symbols import data_symbol

    addr = data_symbol(str(exe), "counter").address
    ours = same_as_bpftrace(f'watchpoint:{addr:#x}:4:w {{ @writes[comm] = count(); printf("hit\\n"); }}', "-c", str(exe))
    assert ours.count('"hit\\n"') == 5 and '{"@writes": {"g": 5}}' in ours
    for bad, why in (("3:w", "length must be one of"), ("4:q", "mode 'q'")):
        r = pycore("-e", f"watchpoint:{addr:#x}:{bad} {{ exit(); }}", "-c", str(exe))
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr


def test_iterators_task_and_task_file(tmp_path):
    """iter:task and iter:task_file walk every task (and its open files) once, then the script ends (END
    runs, maps print), as in bpftrace. This host loads iterators (bpftrace 0.17's feature check says
    it cannot: its side-by-side run is in the kernel VMs)."""
    src = tmp_path / "held.c"
    src.write_text('#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n'
                   'int main(int argc, char **argv) { int fd = open(argv[1], O_CREAT | O_RDWR, 0600);'
                   ' dup2(fd, 42); puts("ready"); fflush(stdout); pause(); return 0; }\n')
    exe = tmp_path / "iterheld"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    proc = subprocess.Popen([str(exe), str(tmp_path / "held.dat")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        r = pycore("-e", 'iter:task_file /ctx->task->comm == "iterheld"/ { printf("%d %s\\n", ctx->fd, '
                         'str(ctx->file->f_path.dentry->d_name.name)); } END { printf("end\\n"); }')
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert "3 held.dat" in lines and "42 held.dat" in lines and lines[-3:] == ["end", "", ""]
        r = pycore("-e", 'iter:task { @tasks = count(); if (ctx->task->comm == "iterheld") { '
                         '@mine[ctx->task->comm, ctx->task->tgid == ctx->task->pid] = count(); } }')
        assert r.returncode == 0, r.stderr
        assert "@mine[iterheld, 1]: 1\n" in r.stdout
        n = int(re.search(r"@tasks: (\d+)", r.stdout).group(1))
        assert n >= len([p for p in os.listdir("/proc") if p.isdigit()]) // 2
    finally:
        proc.kill()
        proc.wait()
    bad = pycore("-e", "iter:task { } iter:task_file { }")
    assert bad.returncode == 2 and "only one iter probe" in bad.stderr
    bad = pycore("-e", "iter:nope { }")
    assert bad.returncode == 2 and "this kernel's BTF has no iterator bpf_iter_nope" in bad.stderr


def test_aggregate_values_like_bpftrace():
    """Structs and arrays read whole, as bpftrace 0.17 keeps them: in variables (fields and elements read
    back from the copy), map values and keys (alone and in a multi-key), tuples, print(); == and != on
    arrays and buffers byte for byte. Before: '$s cannot hold struct load_weight', 'a map cannot hold'."""
    program = ('BEGIN { $s = curtask->se.load; print($s); printf("%d\\n", $s.weight); $a = curtask->cpus_ptr->bits; '
               'print($a); printf("%d\\n", $a[0]); @v = curtask->se.load; @k[curtask->se.load, 1] = count(); '
               '$t = (1, curtask->se.load); print($t); @tv = $t; $c = *curtask->cpus_ptr; print($c); @arr[$a] = 3; '
               'if ($a == curtask->cpus_ptr->bits) { printf("eq\\n"); } if ($a != $a) { printf("ne\\n"); } '
               '$b = buf(curtask->comm, 4); $bb = buf(curtask->comm, 4); if ($b == $bb) { printf("beq\\n"); } exit(); }')
    ours = same_as_bpftrace(program)
    assert '"eq\\n"' in ours and '"beq\\n"' in ours and '"ne\\n"' not in ours
    # buffers of two lengths differ (bpftrace 0.17 aborts in LLVM on this comparison)
    r = pycore("-e", 'BEGIN { $b = buf(curtask->comm, 4); if ($b != buf(curtask->comm, 3)) { printf("bne\\n"); } exit(); }')
    assert r.returncode == 0 and r.stdout.startswith("bne\n"), r.stderr
    bad = pycore("-e", "BEGIN { $a = curtask->cpus_ptr->bits; if ($a == curtask->se.load) { exit(); } }")
    assert bad.returncode == 2 and "compares two values of one type and size" in bad.stderr


def test_pton_like_bpftrace(tmp_path):
    """pton("addr"): the address's bytes as a uint8 array (4 or 16), printed, a map key, through ntop(),
    compared with == / != (also with a tracepoint's address field), side by side with bpftrace."""
    program = ('BEGIN { print(pton("10.0.0.200")); $a = pton("fe80::1"); print($a); printf("%s %s\\n", '
               'ntop(pton("10.0.0.200")), ntop(pton("fe80::1"))); @m[pton("1.2.3.4")] = 1; '
               'if (pton("1.2.3.4") == pton("1.2.3.4")) { printf("eq\\n"); } '
               'if ($a != pton("fe80::2")) { printf("ne\\n"); } exit(); }')
    ours = same_as_bpftrace(program)
    assert '{"type": "value", "data": [10,0,0,200]}' in ours and '"eq\\n"' in ours and '"ne\\n"' in ours
    script = tmp_path / "conn.py"
    script.write_text("import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                      "c = socket.create_connection(s.getsockname()); c.close()\n")
    # keys only (a state change in softirq context may count under the -c pid or not, run to run)
    program = ('tracepoint:sock:inet_sock_set_state /pid == cpid/ { @lo[args->saddr == pton("127.0.0.1")] = 1; '
               '@other[args->saddr != pton("127.0.0.2")] = 1; }')
    ours = same_as_bpftrace(program, "-c", f"{sys.executable} {script}")
    assert '"@lo": {"1": 1}' in ours and '"0": ' not in ours
    bad = pycore("-e", 'BEGIN { print(pton("nope")); }')
    assert bad.returncode == 2 and "expects an IPv4/IPv6 address" in bad.stderr


def test_sigusr1_prints_every_map_and_goes_on():
    """SIGUSR1 prints every map as bpftrace does (then tracing goes on, and the end prints them again).

    Each step waits for what the tracer printed, not for a fixed time (bpftrace 0.17 compiles with
    LLVM before it attaches, seconds under load): SIGUSR1 once the interval probe printed a tick (so
    BEGIN ran and @c exists), SIGINT once a tick came after the maps SIGUSR1 printed (printed whole,
    and tracing went on). The ticks are left out of the comparison."""
    program = ('BEGIN { @a = 1; @b[2] = 3; @s = hist(5); } '
               'interval:ms:50 { @c = count(); printf("tick\\n"); }')
    outs = []
    for argv in ([*PYCORE, "-e", program], [BPFTRACE, "-e", program]):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()

        def wait_for(seen, what: str) -> None:
            deadline = time.monotonic() + 60
            while not seen(list(lines)):
                assert proc.poll() is None, f"{argv[0]} exited before {what}: {proc.stderr.read()}"
                assert time.monotonic() < deadline, f"{argv[0]}: no {what} within 60 s: {lines}"
                time.sleep(0.02)

        try:
            wait_for(lambda got: "tick\n" in got, "tick")
            proc.send_signal(signal.SIGUSR1)
            wait_for(lambda got: "@a: 1\n" in got and "tick\n" in got[got.index("@a: 1\n"):],
                     "tick after the maps")
        finally:
            stop(proc, signal.SIGINT, communicate=False)
            reader.join(10)
        err = proc.stderr.read()
        assert proc.returncode == 0, err
        out = "".join(line for line in lines if line != "tick\n")
        outs.append(re.sub(r"@c: \d+", "@c: N", out.replace("Attaching 2 probes...\n", "")))
    ours, theirs = outs[0], as_023(outs[1])     # bpftrace 0.17's output in 0.23.2's forms
    assert ours == theirs
    assert ours.startswith("@a: 1\n@b[2]: 3\n@c: N\n@s:\n[4, 8)") and ours.count("@a: 1\n") == 2
