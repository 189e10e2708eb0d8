"""``pycore list`` on this host's kernel, checked against independent sources:
bpftrace 0.17 (struct bodies, tracepoint fields), bpftool's raw BTF dump
(kfunc argument lists), tracefs format files and /proc/kallsyms.

The CLI runs as a real subprocess (``python -m pycore``).  bpftrace and
bpftool are part of the test environment: missing means FAIL, not skip.
"""

from __future__ import annotations

import functools
import os
import random
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pycore.listing.kernel import Lister
from pycore.listing.patterns import ProbePattern

ROOT = Path(__file__).resolve().parent.parent
TRACEFS = "/sys/kernel/tracing"
FALLBACK_NOTE = "listing BTF functions found in /proc/kallsyms"


def pycore(*args: str, check_rc: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pycore", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.returncode, proc.stderr[-2000:])
    return proc


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it is part of this project's test environment")
    return path


def bpftrace(*args: str) -> str:
    proc = subprocess.run([tool("bpftrace"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def normalise(text: str) -> str:
    """Whitespace-insensitive C, minus two deliberate differences from the
    libbpf 1.1 that bpftrace 0.17 links: it prints an empty parameter list
    as ``()`` where newer libbpf (and we) print ``(void)``, and it renames
    same-named types ``NAME___2`` in the order it happened to meet them."""
    text = re.sub(r"___\d+\b", "", text)
    text = text.replace("(void)", "()")
    return " ".join(text.split())


@functools.cache
def lister() -> Lister:
    return Lister(verbose=True, mount_tracefs=True)


# -- types --------------------------------------------------------------------


def _sample_struct_names(n: int = 300) -> list[str]:
    names = sorted({line.split(" ", 1)[1] for line in bpftrace("-l", "struct *").splitlines()})
    step = len(names) / n
    sample = [names[int(i * step)] for i in range(n)]
    return sorted(set(sample) | {"dentry", "file", "task_struct", "sk_buff"})


def c_block(text: str, keyword: str, name: str) -> str | None:
    """The top-level ``KEYWORD NAME {...};`` definition in ``text``, if any."""
    m = re.search(rf"^{keyword} {re.escape(name)} {{(?:}}|\n.*?^}})[^\n]*;$", text, re.M | re.S)
    return m.group() if m else None


@functools.cache
def bpftool_c() -> str:
    return subprocess.run([tool("bpftool"), "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"],
                          capture_output=True, text=True, check=True).stdout


def reference_body(keyword: str, name: str) -> tuple[str, str]:
    """(source, body): bpftrace's, or bpftool's where bpftrace 0.17 prints
    none (it picks a forward declaration, e.g. for ``struct file``).  Only
    the named definition is kept: for packed structs bpftrace also prints
    the struct that follows."""
    body = c_block(bpftrace("-lv", f"{keyword} {name}"), keyword, name)
    if body is not None:
        return "bpftrace", body
    body = c_block(bpftool_c(), keyword, name)
    assert body is not None, f"neither bpftrace nor bpftool prints {keyword} {name}"
    return "bpftool", body


@pytest.mark.slow
def test_struct_bodies_equal_bpftrace() -> None:
    names = _sample_struct_names()
    assert len(names) >= 300
    with ThreadPoolExecutor(max_workers=4) as pool:
        refs = dict(zip(names, pool.map(lambda n: reference_body("struct", n), names)))
    mismatched = []
    for name in names:
        ours = "\n".join(line for e in lister().entries(ProbePattern("struct", name)) for line in e.lines())
        if normalise(ours) != normalise(refs[name][1]):
            mismatched.append(name)
    assert not mismatched, f"{len(mismatched)} of {len(names)} differ, e.g. {mismatched[:10]}"
    # bpftrace 0.17 prints nothing for empty structs, some packed ones and
    # names that also have a forward declaration (about 9% here).
    from_bpftrace = [n for n in names if refs[n][0] == "bpftrace"]
    assert len(from_bpftrace) >= 250, f"only {len(from_bpftrace)} compared with bpftrace itself"


@pytest.mark.parametrize("name", ["dentry", "file", "task_struct", "sk_buff", "epoll_event"])
def test_struct_cli_equals_reference(name: str) -> None:
    ours = pycore("list", "-v", f"struct {name}").stdout
    assert ours.startswith(f"struct {name} {{\n") and ours.endswith(";\n\n")
    assert normalise(ours) == normalise(reference_body("struct", name)[1])


@pytest.mark.parametrize("kind", ["struct", "union", "enum"])
def test_type_names_equal_bpftrace(kind: str) -> None:
    ours = pycore("list", f"{kind} *").stdout
    if kind == "enum":  # bpftrace 0.17 predates BTF_KIND_ENUM64 (enums with 64-bit values)
        enum64 = {f"enum {name}" for k, name, _, _ in raw_btf().values() if k == "ENUM64" and name != "(anon)"}
        assert enum64 and enum64 <= set(ours.splitlines())
        ours = "".join(line + "\n" for line in ours.splitlines() if line not in enum64)
    assert ours == bpftrace("-l", f"{kind} *")


def test_enum_and_typedef_bodies() -> None:
    assert normalise(pycore("list", "-v", "enum pid_type").stdout) == normalise(bpftrace("-lv", "enum pid_type"))
    assert pycore("list", "-v", "typedef pid_t").stdout.strip() == "typedef __kernel_pid_t pid_t;"


# -- kfunc --------------------------------------------------------------------


@functools.cache
def raw_btf() -> dict[int, tuple[str, str, dict[str, str], list[tuple[str, int]]]]:
    """bpftool's raw dump of vmlinux BTF: id -> (kind, name, attrs, members)."""
    out = subprocess.run([tool("bpftool"), "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "raw"],
                         capture_output=True, text=True, check=True).stdout
    types: dict[int, tuple[str, str, dict[str, str], list[tuple[str, int]]]] = {}
    members: list[tuple[str, int]] = []
    for line in out.splitlines():
        m = re.match(r"\[(\d+)\] (\w+) '([^']*)'(.*)", line)
        if m:
            members = []
            attrs = dict(re.findall(r"(\w+)=(\S+)", m.group(4)))
            types[int(m.group(1))] = (m.group(2), m.group(3), attrs, members)
            continue
        m = re.match(r"\t'([^']*)' type_id=(\d+)", line)
        if m:
            members.append((m.group(1), int(m.group(2))))
    return types


def raw_type_name(type_id: int) -> str:
    """A parameter's type as bpftrace prints it, rendered from the raw dump
    (an implementation independent of btf.cformat, enough for vfs_*)."""
    if type_id == 0:
        return "void"
    kind, name, attrs, members = raw_btf()[type_id]
    target = int(attrs.get("type_id", 0))
    if kind in ("INT", "FLOAT", "TYPEDEF"):
        return name
    if kind in ("STRUCT", "UNION", "ENUM", "ENUM64"):
        return f"{'enum' if kind.startswith('ENUM') else kind.lower()} {name}"
    if kind == "FWD":
        return f"{attrs['fwd_kind']} {name}"
    if kind == "PTR":
        if target and raw_btf()[target][0] == "FUNC_PROTO":
            _, _, pattrs, params = raw_btf()[target]
            args = ", ".join(raw_type_name(t) for _, t in params) or "void"
            return f"{raw_type_name(int(pattrs['ret_type_id']))} (*)({args})"
        inner = raw_type_name(target)
        return inner + ("*" if inner.endswith("*") else " *")
    if kind in ("CONST", "VOLATILE"):
        inner = raw_type_name(target)
        word = kind.lower()
        return f"{inner} {word}" if inner.endswith("*") else f"{word} {inner}"
    if kind == "TYPE_TAG":
        return f'{raw_type_name(target)} __attribute__((btf_type_tag("{name}")))'
    raise AssertionError(f"raw_type_name: {kind} not handled")


def kallsyms_text() -> set[str]:
    with open("/proc/kallsyms") as f:
        return {parts[2] for parts in (line.split() for line in f)
                if len(parts) == 3 and parts[1] in "tT"}


def traceable_names() -> set[str]:
    try:
        with open(f"{TRACEFS}/available_filter_functions") as f:
            return {line.split()[0] for line in f if "[" not in line}
    except OSError:
        return kallsyms_text()


def parse_listing(text: str) -> dict[str, list[str]]:
    probes: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("    "):
            current.append(line[4:])
        else:
            current = probes.setdefault(line.split("  #")[0], [])
    return probes


def test_kfunc_vfs_arguments_equal_bpftool_raw() -> None:
    proc = pycore("list", "-v", "kfunc:vfs_*")
    ours = parse_listing(proc.stdout)
    funcs = {name: int(attrs["type_id"]) for kind, name, attrs, _ in raw_btf().values()
             if kind == "FUNC" and name.startswith("vfs_")}
    expected = {f"kfunc:vmlinux:{n}" for n in funcs if n in traceable_names()}
    assert set(ours) == expected
    assert len(expected) > 40
    for probe, lines in ours.items():
        _, _, attrs, params = raw_btf()[funcs[probe.rsplit(":", 1)[1]]]
        want = [f"{raw_type_name(t)} {n}" for n, t in params]
        ret = int(attrs["ret_type_id"])
        if ret:
            want.append(f"{raw_type_name(ret)} retval")
        assert lines == want, probe


def test_kfunc_matches_lab_example() -> None:
    out = pycore("list", "-v", "kfunc:vmlinux:vfs_write").stdout
    lines = out.splitlines()
    assert lines[0] == "kfunc:vmlinux:vfs_write"
    assert lines[1:] in (
        ["    struct file * file", "    const char * buf", "    size_t count", "    loff_t * pos",
         "    ssize_t retval"],
        ["    struct file * file", '    const char __attribute__((btf_type_tag("user"))) * buf',
         "    size_t count", "    loff_t * pos", "    ssize_t retval"])
    assert pycore("list", "-v", "kretfunc:fget").stdout == (
        "kretfunc:vmlinux:fget\n    unsigned int fd\n    struct file * retval\n")
    # written fexit, listed as bpftrace 0.20+ lists it (0.23.2: fexit:vmlinux:vfs_read)
    assert pycore("list", "fexit:vfs_read").stdout == "fexit:vmlinux:vfs_read\n"


def test_kallsyms_fallback_note_once() -> None:
    proc = pycore("list", "k*func:vfs_*")  # kfunc and kretfunc: two lookups
    try:
        open(f"{TRACEFS}/available_filter_functions").close()
        readable = True
    except OSError:
        readable = False
    assert proc.stderr.count(FALLBACK_NOTE) == (0 if readable else 1), proc.stderr
    if not readable:
        assert len([line for line in proc.stderr.splitlines() if FALLBACK_NOTE in line]) == 1
        assert "available_filter_functions unreadable" in proc.stderr


def test_functions_beyond_trampoline_limits_are_marked() -> None:
    out = pycore("list", "kfunc:ZSTD_*").stdout
    assert "# fentry cannot attach:" in out


# -- tracepoints ----------------------------------------------------------------


def format_fields(event: str) -> list[str]:
    category, name = event.split(":")
    with open(f"{TRACEFS}/events/{category}/{name}/format") as f:
        fields = [line.strip()[len("field:"):].split(";")[0] for line in f if line.strip().startswith("field:")]
    return [f for f in fields if not re.search(r"\bcommon_\w+$", f)]


def test_tracepoint_fields_equal_format_files() -> None:
    proc = pycore("list", "-v", "tracepoint:*")
    ours = parse_listing(proc.stdout)
    assert len(ours) > 1000
    events = sorted(p.split(":", 1)[1] for p in ours)
    sample = random.Random(7).sample(events, 300) + ["sched:sched_switch", "syscalls:sys_enter_openat"]
    for event in sample:
        assert ours[f"tracepoint:{event}"] == format_fields(event), event


def test_tracepoint_listing_equals_bpftrace() -> None:
    assert pycore("list", "-v", "tracepoint:*").stdout == bpftrace("-lv", "tracepoint:*")
    for pattern in ("tracepoint:syscalls:sys_enter_openat", "tracepoint:sched*", "t:lock:contention*"):
        assert pycore("list", "-v", pattern).stdout == bpftrace("-lv", pattern), pattern


# The field-name regex before it was made fast: the reference it must agree with.
SLOW_FIELD_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\]\s*)*$")


def test_field_name_regex_agrees_with_the_plain_search() -> None:
    from pycore.kernel.tracefs import _FIELD_NAME

    rnd = random.Random(3)
    decls = ["char comm[16]", "__data_loc char[] name", "const char * filename", "u8 x",
             "int a[2] [3]", "9abc", "x 99", "a[x [y]", "", "  ", "[4]", "unsigned long __probe_ip ",
             "struct foo *  bar_9[N][M]  "]
    decls += ["".join(rnd.choice("ab_9 []*\t;") for _ in range(rnd.randint(0, 14))) for _ in range(20000)]
    for decl in decls:
        slow, fast = SLOW_FIELD_NAME.search(decl), _FIELD_NAME.search(decl)
        assert (slow and slow.group(1)) == (fast and fast.group(1)), decl


def _kernel_format_texts() -> list[str]:
    from pycore.kernel.tracefs import Tracefs

    fs = Tracefs(TRACEFS)
    return [fs.read_bytes("events", *e.split(":"), "format").decode("utf-8", "replace")
            for e in fs.available_events()]


def test_field_decls_equal_parse_format() -> None:
    """field_decls (the listing's fast path) against the general parser, on
    every format file here and on shapes the kernel does not write, which
    must take the general path."""
    from pycore.kernel.tracefs import field_decls, parse_format

    texts = _kernel_format_texts()
    assert len(texts) > 1000
    odd = []
    for text in texts[:50]:
        odd += [text.replace("\tfield:", "  field:"),                      # spaces, not tabs
                text.replace("\toffset:", " offset:", 1),
                text.replace(";\toffset:", "; ;\toffset:", 1),             # a ';' in a declaration
                text.replace("\nprint fmt: ", "\nprint fmt: field: "),     # "field:" past the fields
                text.replace("common_pid", "pid").replace("\tfield:", "\tfield:common_", 1)]
    odd.append("format:\n\tfield:int common_x common_y;\toffset:0;\tsize:4;\tsigned:1;\n"
               "\tfield:char common_buf[common_N];\toffset:4;\tsize:4;\tsigned:1;\n")
    for text in texts + odd:
        assert field_decls(text) == [f.decl for f in parse_format(text) if not f.is_common], text[:200]


def test_tracepoint_listing_imports_neither_btf_nor_argparse() -> None:
    """Start-up is most of what separates us from bpftrace here: typing,
    btf and argparse were 11 ms of a 53 ms ``list -v 'tracepoint:*'``."""
    code = ("import io, sys; from pycore.cli import main; out = sys.stdout; sys.stdout = io.StringIO(); "
            "rc = main(['list', '-v', 'tracepoint:sched:*']); sys.stdout = out; "
            "print(rc, sorted(m for m in ('argparse', 'btf', 'typing') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout == "0 []\n", proc.stderr


# -- raw tracepoints --------------------------------------------------------------


def test_rawtracepoint_sched_switch() -> None:
    assert pycore("list", "-v", "rawtracepoint:sched_switch").stdout == (
        "rawtracepoint:sched_switch\n"
        "    bool preempt\n"
        "    struct task_struct * prev\n"
        "    struct task_struct * next\n"
        "    unsigned int prev_state\n")
    assert pycore("list", "tp_btf:sched_switch").stdout == "rawtracepoint:sched_switch\n"


def test_rawtracepoint_of_a_shared_class_gets_names() -> None:
    # sched_wakeup is a DEFINE_EVENT of class sched_wakeup_template.
    out = pycore("list", "-v", "rawtracepoint:sched_wakeup").stdout
    assert out == "rawtracepoint:sched_wakeup\n    struct task_struct * p\n"


# -- kprobes, errors, CLI ------------------------------------------------------------


def test_kprobes_absent_is_explained() -> None:
    if kallsyms_has("register_kprobe"):
        pytest.skip("this kernel has kprobes")
    proc = pycore("list", "kprobe:vfs_*", check_rc=1)
    assert "CONFIG_KPROBES" in proc.stderr and proc.stdout == ""


def kallsyms_has(name: str) -> bool:
    return name in kallsyms_text()


@pytest.mark.parametrize("pattern", ["kfunc:no_such_function_xyz", "struct no_such_struct_xyz",
                                     "tracepoint:nosuch:*", "rawtracepoint:nope_*"])
def test_no_match_exits_1(pattern: str) -> None:
    proc = pycore("list", pattern, check_rc=1)
    assert proc.stdout == ""
    assert "nothing matches" in proc.stderr


@pytest.mark.parametrize("pattern", ["", "bogus:x", "kfunc:a b", "vfs_read", "struct", "kfunc:a/b",
                                     "tracepoint:sched_switch"])
def test_bad_pattern_exits_2(pattern: str) -> None:
    proc = pycore("list", pattern, check_rc=2)
    assert proc.stdout == "" and proc.stderr.startswith("pycore list: ")
    assert len(proc.stderr.splitlines()) == 1


def test_version_and_help() -> None:
    from pycore import __version__

    assert pycore("--version").stdout == f"pycore {__version__}\n"
    assert "list" in pycore("--help").stdout
    assert "kfunc:vfs_*" in pycore("list", "--help").stdout
    assert pycore("nosuchcommand", check_rc=2).stdout == ""
    assert pycore(check_rc=2).stderr.startswith("usage: pycore")


@pytest.mark.parametrize("argv", [
    [], ["-v"], ["-vv", "x"], ["--verbose", "kfunc:*"], ["-v", "struct dentry", "-v"], [""],
    ["-p", "1", "usdt"], ["--help"], ["-h"], ["-x"], ["-"], ["--"], ["a", "b"], ["-vx"], ["--verb"],
    ["-v-"], ["-1"], ["--pid=3"],
])
def test_quick_args_read_what_argparse_reads(argv: list[str]) -> None:
    import argparse

    from pycore.commands import list as list_command

    quick = list_command.quick_args(argv)
    assert (quick is not None) == (not argv or argv[0] in ("-v", "-vv", "--verbose", "")), argv
    if quick is None:
        return  # argparse reads it
    parser = argparse.ArgumentParser(exit_on_error=False)
    list_command.add_arguments(parser)
    assert vars(quick) == vars(parser.parse_args(argv))


def test_no_pattern_lists_every_probe_type() -> None:
    out = pycore("list").stdout
    kinds = {line.split(":", 1)[0] for line in out.splitlines()}
    assert {"kfunc", "kretfunc", "tracepoint", "rawtracepoint"} <= kinds


def test_pipe_into_head_is_quiet() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(f"'{sys.executable}' -m pycore list -v | head -1", shell=True, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr


def test_btf_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "vmlinux"
    bad.write_bytes(b"\x9f\xeb\x01\x00" + b"\xff" * 20)
    code = ("import sys, btf.spec as s; s.VMLINUX_PATH = sys.argv[1]; "
            "s.load_kernel_spec.__defaults__ = (sys.argv[1],); "
            "from pycore.cli import main; sys.exit(main(['list', 'struct dentry']))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pycore: error: ") and "Traceback" not in proc.stderr
