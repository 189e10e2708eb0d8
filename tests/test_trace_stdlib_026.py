"""bpftrace 0.25-0.26's standard-library task and text helpers (issue 30): ``signal_name(sig)``,
``leader_tid``/``leader_comm``, ``has_cpid``, ``ppid`` as upstream's stdlib reads it
(``task.real_parent.pid``: the thread that forked, not its process), ``strlen``, ``strstr``,
``strcap`` and the type queries ``is_str``, ``is_ptr``, ``is_array``, ``is_integer``,
``is_unsigned_integer`` and ``is_literal``.

bpftrace 0.23.2 has none of these: compared with upstream's documented meaning (docs/stdlib.md) and
its definitions (src/stdlib/base.bt, src/stdlib/strings/signal.h at v0.26.1), on this machine's facts.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

from tests.conftest import require_root
from tests.test_trace_values import pycore


def test_signal_name_as_upstreams_table() -> None:
    """strsignal(3)'s words for 0-64 as upstream's table has them, "N/A" past it and below 0; as a
    value, a map key, a tuple's element and print()'s argument."""
    require_root()
    p = pycore('BEGIN { $n = 9; printf("%s|%s|%s|%s|%s|%s|%s|%s\\n", signal_name(2), signal_name($n), '
               'signal_name(0), signal_name(32), signal_name(34), signal_name(64), signal_name(65), '
               'signal_name(-1)); print(signal_name(15)); @s[signal_name(11)] = count(); @v = signal_name(1); '
               '@t = (signal_name(17), 1); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("Interrupt|Killed|Unknown signal 0|Unknown signal 32|Real-time signal 0|"
                        "Real-time signal 30|N/A|N/A\nTerminated\n\n\n@s[Segmentation fault]: 1\n"
                        "@t: (Child exited, 1)\n@v: Hangup\n"), p.stdout


def test_signal_name_table() -> None:
    """The table against this libc's strsignal(3) for the classic signals (1-31), where glibc and
    upstream's table agree word for word."""
    from pycore.lang.signals import signal_name

    libc = ctypes.CDLL(None)
    libc.strsignal.restype = ctypes.c_char_p
    for sig in range(1, 32):
        assert signal_name(sig) == libc.strsignal(sig).decode(), sig
    assert signal_name(-1) == signal_name(65) == "N/A"
    assert signal_name((1 << 40) + 9) == "Killed"
    assert signal_name((1 << 32) + 2) == "Interrupt"      # (int32)sig, as upstream's macro casts it


def test_signal_name_errors() -> None:
    for script, want in [('BEGIN { $s = signal_name("INT"); }', "signal_name() only supports integer arguments"),
                         ("BEGIN { $s = signal_name(); }", "signal_name() requires 1 argument")]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


# a child whose main thread is named "leader" and a second thread "worker", which calls getppid()
_THREADED = (f"{sys.executable} -c 'import ctypes, os, threading\n"
             "prctl = ctypes.CDLL(None).prctl\n"
             "prctl(15, b\"leader\", 0, 0, 0)\n"
             "def work():\n"
             "    prctl(15, b\"worker\", 0, 0, 0)\n"
             "    os.getppid()\n"
             "t = threading.Thread(target=work); t.start(); t.join()'")


def test_leader_tid_and_comm_in_a_thread() -> None:
    """leader_tid / leader_tid() / leader_tid(curtask) and leader_comm (0.26): the thread group
    leader's tid and name, seen from a second thread whose own name differs."""
    require_root()
    p = pycore('uprobe:libc:getppid /pid == cpid && tid != pid/ { printf("%d %d %d %s %s %s|%s\\n", '
               'leader_tid == pid, leader_tid() == pid, leader_tid(curtask) == pid, leader_comm, leader_comm(), '
               'leader_comm(curtask), comm); }', "-q", "-c", _THREADED)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "1 1 1 leader leader leader|worker", p.stdout


def test_ppid_is_the_forking_threads_tid() -> None:
    """ppid is task.real_parent.pid (upstream's stdlib): pycore started from a second thread of this
    process has that thread's tid as its ppid, not this process's pid; pcomm is that thread's name."""
    require_root()
    got: dict[str, object] = {}

    def run() -> None:
        ctypes.CDLL(None).prctl(15, b"starter", 0, 0, 0)
        got["tid"] = threading.get_native_id()
        got["p"] = pycore('BEGIN { printf("%d %s %d\\n", ppid, pcomm, ppid(curtask)); exit(); }', "-q")

    t = threading.Thread(target=run)
    t.start()
    t.join()
    p = got["p"]
    assert p.returncode == 0, p.stderr  # type: ignore[attr-defined]
    assert got["tid"] != os.getpid()
    assert p.stdout.splitlines()[0] == f"{got['tid']} starter {got['tid']}", p.stdout  # type: ignore[attr-defined]


def test_has_cpid() -> None:
    """has_cpid / has_cpid() (0.25): true with a -c command, false without, as upstream's docs say
    ("true iff cpid is available"; its macro tests `== 0`, the opposite, through 0.26.1)."""
    require_root()
    script = 'BEGIN { print(has_cpid); printf("%d\\n", has_cpid()); if (has_cpid) { printf("%d\\n", cpid > 0); } exit(); }'
    p = pycore(script.replace("cpid > 0", "1"), "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["false", "0"], p.stdout
    p = pycore(script, "-q", "-c", "/bin/true")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["true", "1", "1"], p.stdout


# (haystack, needle): strstr() is str.find() (-1 when absent, 0 for an empty needle), strlen() len()
_SEARCHES = [("hello", "ll"), ("hello", "lo!"), ("hello", ""), ("", "x"), ("", ""), ("abcabc", "cab"),
             ("aaab", "aab"), ("abcdefgh", "gh"), ("abcdefgh", "abcdefgh"), ("abc", "abcd"), ("x", "x")]


def test_strstr_and_strlen_as_str_find() -> None:
    """strstr(h, n) (0.25) is the needle's first position or -1, and strlen(s) its length up to the NUL,
    for literal needles (compared as immediates) and variables (read from scratch), as Python's
    str.find() and len() answer; and strlen() of comm and of a map's string."""
    require_root()
    calls = []
    for h, n in _SEARCHES:
        calls.append(f'$h = "{h}"; $n = "{n}"; printf("%d %d %d %d\\n", strstr($h, "{n}"), strstr($h, $n), '
                     f'strlen($h), strlen("{n}"));')
    p = pycore("BEGIN { " + " ".join(calls) + ' @s = "four"; printf("%d %d %d\\n", strlen(comm) == strlen(str(comm)), '
               'strlen(@s), strlen(@s) + strlen(comm)); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    comm = open("/proc/self/comm").read().strip()     # pycore's own: python3's, set by no prctl
    want = [f"{h.find(n)} {h.find(n)} {len(h)} {len(n)}" for h, n in _SEARCHES] + [f"1 4 {4 + len(comm)}"]
    assert p.stdout.splitlines()[:len(want)] == want, p.stdout


_SHOW_C = r"""
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) void show(const char *s) { puts(s); }
int main(void) {
    char buf[200], word[8];
    for (int i = 0; i < 199; i++) buf[i] = 'a' + i % 26;
    buf[199] = 0;
    strcpy(word, "short");   /* on the stack: a literal's page may not be in memory when the probe reads it */
    show(buf); show(word); show(word + 5);
    return 0;
}
"""


def test_strlen_of_a_char_pointer(tmp_path) -> None:
    """strlen((int8 *)p) reads the user string up to max_strlen characters (upstream's strnlen with
    max_strlen), where str(p) keeps max_strlen - 1 and its NUL."""
    require_root()
    prog = tmp_path / "show"
    subprocess.run(["gcc", "-O0", "-x", "c", "-o", str(prog), "-"], input=_SHOW_C, text=True, check=True)
    probe = f'uprobe:{prog}:show {{ printf("%d %d %d %d\\n", strlen((int8 *)arg0), strlen(str(arg0)), ' \
            'strstr(str(arg0), "or"), strcap((int8 *)arg0)); }'
    for block, long_one in (("", "199 199 -1 199"), ("config = { max_strlen = 16 } ", "16 15 -1 16")):
        p = pycore(block + probe, "-q", "-c", str(prog))
        assert p.returncode == 0, p.stderr
        assert [ln for ln in p.stdout.splitlines() if ln[:1].isdigit()] == [long_one, "5 5 2 5", "0 0 -1 0"], p.stdout


def test_type_queries_and_strcap() -> None:
    """is_str/is_ptr/is_array/is_integer/is_unsigned_integer/is_literal (0.25, upstream's
    typeinfo(x).base_type tests) answer for x's type when the script is checked, as a bool; strcap()
    of a string or an array is its size (upstream: sizeof), of a pointer its strlen."""
    require_root()
    p = pycore('BEGIN { $s = "abc"; $p = (int8 *)0; $a = (uint8[8])12345; '
               'printf("%d %d %d %d %d|%d %d %d %d|%d %d %d %d %d|%d %d\\n", '
               'is_str($s), is_str(1), is_str(strerror(1)), is_str(comm), is_str($p), '
               'is_ptr($p), is_ptr(1), is_ptr(curtask), is_ptr($s), '
               'is_integer(1), is_integer(true), is_integer($s), is_unsigned_integer((uint8)1), is_unsigned_integer(-1), '
               'is_literal(1), is_literal($s)); '
               'printf("%d %d %d %d\\n", is_array($a), is_array($s), is_integer($a), is_literal("x")); '
               'print(is_str("x")); printf("%d %d %d\\n", strcap("abc"), strcap(comm), strcap($a)); exit(); }', "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:4] == ["1 0 1 1 0|1 0 1 0|1 0 0 1 0|1 0", "1 0 0 1", "true", "4 16 8"], p.stdout


def test_string_helpers_errors() -> None:
    for script, want in [('BEGIN { $n = strlen(1); }', "strlen() takes a string or a char pointer"),
                         ('BEGIN { $n = strlen(); }', "strlen(string)"),
                         ('BEGIN { $n = strstr("a", 1); }', "strstr() takes strings"),
                         ('BEGIN { $n = strstr("a"); }', "strstr(haystack, needle)"),
                         ('BEGIN { $n = strcap(1); }', "strcap() takes a string, a char array or a char pointer"),
                         ('BEGIN { $n = is_str(); }', "is_str(expression)"),
                         ('BEGIN { $n = is_ptr(1, 2); }', "is_ptr(expression)")]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_write_user_errors() -> None:
    """write_user(dst, src, len) (0.26) is refused without --unsafe, and with it when len is not a
    constant within the string or array written (the verifier's bound on bpf_probe_write_user's size)."""
    for args, script, want in [
            ((), 'BEGIN { write_user(0, "ab", 2); }', "write_user() is unsafe: run with --unsafe to allow it"),
            (("--unsafe",), 'BEGIN { write_user(0, "a", 3); }', "write_user(): 3 bytes from a 2-byte string[2]: write 1 to 2"),
            (("--unsafe",), 'BEGIN { write_user(0, "a", 0); }', "write_user(): 0 bytes from a 2-byte string[2]"),
            (("--unsafe",), 'BEGIN { write_user(0, 1, 1); }', "write_user() writes a string or an array's bytes"),
            (("--unsafe",), 'BEGIN { write_user("x", "a", 1); }', "write_user() writes to a user address"),
            (("--unsafe",), 'BEGIN { $n = 1; write_user(0, "a", $n); }', "expected a constant integer here"),
            (("--unsafe",), 'BEGIN { write_user(0, "a"); }', "write_user(dst, src, len)")]:
        p = pycore(script, "--dry-run", *args)
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        assert want in p.stderr.splitlines()[0], p.stderr


def test_str_of_a_string_cut_at_n() -> None:
    """``str(s, n)`` of a string (0.23.2 refused it: "str() expects an integer or a pointer type"):
    bpftrace 0.26 reads n bytes with the NUL, n - 1 characters, and folds a literal's to n characters;
    the bytes after the cut are NULs, so the cut string is one map key; ``str($1, n)`` is 0.23.2's
    n - 1 characters."""
    require_root()
    p = pycore('BEGIN { $s = "hello"; @m = "abcdefghijklmnopqrstuvwxyz0123456789"; '
               'printf("%s|%s|%s|%s|%s|%s|%s\\n", str("hello", 3), str($s, 3), $s, str(@m, 20), str($s, 0), '
               'str($s, 99), str($1, 3)); '
               '@k[str($s, 4)] = count(); @k[str("hel", 9)] = count(); @k[str("help", 3)] = count(); '
               'delete(@m); exit(); }', "-q", "hello")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "hel|he|hello|abcdefghijklmnopqrs||hello|he", p.stdout
    assert "@k[hel]: 3" in p.stdout, p.stdout
    bad = pycore('BEGIN { $n = 2; printf("%s\\n", str(comm, $n)); }', "--dry-run")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr, bad.stderr
    assert "str(string, n) cuts a string at a constant length n" in bad.stderr.splitlines()[0], bad.stderr
