"""pycore serve's reload: SIGHUP and --scripts-dir, with a real workload and real scrapes over HTTP.

An unchanged script keeps its programs (the same kernel ids) and its counters keep counting; a
changed one is replaced (new programs, the old ones freed); a broken one leaves the old version
serving; a deleted one is detached (its programs gone from the kernel, per bpftool); a new file in
the directory is picked up without SIGHUP.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from tests.conftest import require_root, running
from tests.test_robustness import wait_gone
from tests.test_serve_script import WORKLOAD, _free_port, _get, _programs_using, _samples, _script

pytest.importorskip("prometheus_client")

COMM = "s25reload"      # not test_serve_script's s25work: its tests may run beside these


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    """test_serve_script's workload (opens a path N times, then /dev/zero once) under its own name."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    d = tmp_path_factory.mktemp("s25reload")
    (d / "w.c").write_text(WORKLOAD)
    exe = d / COMM
    subprocess.run(["gcc", "-O1", "-static", "-o", str(exe), str(d / "w.c")], check=True)
    return str(exe)


def counting(map_name: str, extra: str = "") -> str:
    """A script counting the workload's openat calls in @MAP (its kernel map: AT_MAP)."""
    return f'tracepoint:syscalls:sys_enter_openat /comm == "{COMM}"/ {{ @{map_name} = count(); }}\n{extra}'


class Log:
    """The server's stderr, read by a thread as it comes; :meth:`wait` for a line."""

    def __init__(self, stream) -> None:  # noqa: ANN001
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:  # noqa: ANN001
        for line in stream:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append("")       # the end
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.lines)

    def wait(self, pattern: str, since: int = 0, timeout: float = 20.0) -> str:
        """The first line from index ``since`` on matching ``pattern`` (fails the test after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines[since:]:
                    if re.search(pattern, line):
                        return line
                if self.lines and self.lines[-1] == "" or not self.cond.wait(deadline - time.monotonic()):
                    pytest.fail(f"no line matching {pattern!r}; log:\n{self.text()}")

    def text(self) -> str:
        return "".join(self.lines)


@contextmanager
def serving(*args: str):
    """pycore serve ARGS on a free port: (process, port, log) once it serves; SIGTERM at the end."""
    require_root()
    port = _free_port()
    with running([sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{port}", *args]) as p:
        log = Log(p.stderr)
        log.wait(r"^pycore serve: http://", timeout=60)
        yield p, port, log
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
        log.thread.join(10)


def reload(p, log: Log) -> str:  # noqa: ANN001
    """SIGHUP, and the reload's summary line once it is done."""
    since = log.mark()
    p.send_signal(signal.SIGHUP)
    return log.wait(r"^pycore serve: reload \(SIGHUP\) done: ", since)


def test_sighup_keeps_unchanged_and_replaces_changed(workload, tmp_path):
    keep = _script(tmp_path, "keep.bt", counting("kept_opens"))
    change = _script(tmp_path, "change.bt", counting("chg_opens", "BEGIN { @version = 1; }\n"))
    with serving("--script", keep, "--script", change) as (p, port, log):
        kept_progs, old_progs = _programs_using("AT_kept_opens"), _programs_using("AT_chg_opens")
        assert len(kept_progs) == len(old_progs) == 1
        subprocess.run([workload, "10", "/"], check=True)
        before = _samples(_get(port))
        assert before["pycore_script_keep_kept_opens_total"] == 11       # and /dev/zero
        assert before["pycore_script_change_chg_opens_total"] == 11
        assert before["pycore_scripts_last_reload_successful"] == 1
        with open(change, "w") as f:
            f.write(counting("chg_opens", "BEGIN { @version = 2; }\n"))
        since = log.mark()
        assert reload(p, log).rstrip().endswith("1 kept, 1 replaced")
        log.wait(r"^pycore serve: script keep: reload: kept$", since)
        log.wait(r"^pycore serve: script change: reload: replaced$", since)
        # the unchanged script's program is the one that ran before; the old version's is freed
        assert _programs_using("AT_kept_opens") == kept_progs
        new_progs = _programs_using("AT_chg_opens")
        assert len(new_progs) == 1 and not new_progs & old_progs
        wait_gone(old_progs)
        subprocess.run([workload, "5", "/"], check=True)
        m = _samples(_get(port))
    assert p.returncode == 0 and "Traceback" not in log.text()
    assert m["pycore_script_keep_kept_opens_total"] == 11 + 6      # not reset: it kept counting
    assert m["pycore_script_change_version"] == 2
    assert m["pycore_script_change_chg_opens_total"] == 6           # the new version counts from its load
    assert m['pycore_script_up{script="change"}'] == m['pycore_script_up{script="keep"}'] == 1
    assert m["pycore_scripts_last_reload_successful"] == 1
    assert m["pycore_scripts_reloads_total"] == 1 and m["pycore_scripts_reload_failures_total"] == 0
    assert m["pycore_scripts_last_reload_success_timestamp_seconds"] > before[
        "pycore_scripts_last_reload_success_timestamp_seconds"]
    wait_gone(kept_progs | new_progs)       # SIGTERM detached everything


def test_broken_reload_keeps_the_old_version(workload, tmp_path):
    good = counting("brk_opens")
    path = _script(tmp_path, "brk.bt", good)
    late = _script(tmp_path, "late.bt", "BEGIN { @late = nosuch(); }\n")      # down from the start
    with serving("--script", path, "--script", late) as (p, port, log):
        progs = _programs_using("AT_brk_opens")
        subprocess.run([workload, "3", "/"], check=True)
        with open(path, "w") as f:
            f.write("tracepoint:syscalls:sys_enter_openat { @brk_opens = args.no_such_field; }\n")
        since = log.mark()
        assert reload(p, log).rstrip().endswith("2 failed; not every file loaded")      # and late.bt, again
        line = log.wait(r"^pycore serve: script brk: reload: failed: ", since)
        assert "no_such_field" in line and line.rstrip().endswith("(the previous version serves on)")
        subprocess.run([workload, "3", "/"], check=True)        # the old version still counts
        m = _samples(_get(port))
        assert _programs_using("AT_brk_opens") == progs
        assert m["pycore_script_brk_brk_opens_total"] == 8
        assert m['pycore_script_up{script="brk"}'] == 1
        info = [k for k in m if k.startswith('pycore_script_info{') and 'script="brk"' in k]
        assert len(info) == 1 and "reload failed, the previous version serves on: " in info[0]
        assert f"{path}:1:" in info[0] and "no_such_field" in info[0]
        assert m["pycore_scripts_last_reload_successful"] == 0
        assert m["pycore_scripts_reload_failures_total"] == 1
        assert m['pycore_script_up{script="late"}'] == 0
        # the file put back as it runs: kept (not reloaded), the error gone; late.bt fixed: loaded
        with open(path, "w") as f:
            f.write(good)
        with open(late, "w") as f:
            f.write("BEGIN { @late = 7; }\n")
        assert reload(p, log).rstrip().endswith("1 loaded, 1 kept")
        m = _samples(_get(port))
        assert m['pycore_script_up{script="late"}'] == 1 and m["pycore_script_late_late"] == 7
        # a --script file gone: named on the command line, so a failed reload, the running version kept
        os.rename(path, path + ".away")
        since = log.mark()
        assert reload(p, log).rstrip().endswith("1 kept, 1 failed; not every file loaded")
        line = log.wait(r"^pycore serve: script brk: reload: failed: ", since)
        assert "No such file" in line and "(the previous version serves on)" in line
        assert _programs_using("AT_brk_opens") == progs
        os.rename(path + ".away", path)
        assert reload(p, log).rstrip().endswith("2 kept")
        m = _samples(_get(port))
    assert p.returncode == 0 and "Traceback" not in log.text()
    assert m["pycore_script_brk_brk_opens_total"] == 8
    assert m[f'pycore_script_info{{error="",file="{path}",script="brk"}}'] == 1
    assert m["pycore_scripts_last_reload_successful"] == 1 and m["pycore_scripts_reloads_total"] == 4


def test_deleted_script_is_detached_and_its_series_disappear(workload, tmp_path):
    d = tmp_path / "scripts"
    d.mkdir(mode=0o755)
    stays = _script(d, "stays.bt", counting("stays_opens"))
    goes = _script(d, "goes.bt", counting("goes_opens", 'END { printf("goes: END ran\\n"); }\n'))
    with serving("--scripts-dir", str(d)) as (p, port, log):
        gone_progs, kept_progs = _programs_using("AT_goes_opens"), _programs_using("AT_stays_opens")
        assert len(gone_progs) == len(kept_progs) == 1
        subprocess.run([workload, "2", "/"], check=True)
        assert _samples(_get(port))["pycore_script_goes_goes_opens_total"] == 3
        os.unlink(goes)
        since = log.mark()
        assert reload(p, log).rstrip().endswith("1 kept, 1 removed")
        log.wait(r"^pycore serve: script goes: reload: removed$", since)
        log.wait(r"^goes: goes: END ran$", since)          # closed as at SIGTERM: its END ran
        wait_gone(gone_progs)                              # detached and freed in the kernel
        subprocess.run([workload, "2", "/"], check=True)
        exposition = _get(port)
        m = _samples(exposition)
        assert _programs_using("AT_stays_opens") == kept_progs
    assert p.returncode == 0 and "Traceback" not in log.text()
    assert 'script="goes"' not in exposition and "pycore_script_goes_" not in exposition
    assert m["pycore_script_stays_stays_opens_total"] == 6
    assert m["pycore_scripts_last_reload_successful"] == 1
    assert stays


def test_scripts_dir_watched_without_sighup(workload, tmp_path):
    d = tmp_path / "watched"
    d.mkdir(mode=0o755)
    with serving("--scripts-dir", str(d)) as (p, port, log):
        assert "pycore_script_up{" not in _get(port)       # an empty directory serves nothing yet
        since = log.mark()
        t = time.monotonic()
        path = _script(d, "fresh.bt", counting("fresh_opens", "BEGIN { @v = 1; }\n"))
        log.wait(r"^pycore serve: script fresh: reload: loaded$", since, timeout=10)
        took = time.monotonic() - t
        log.wait(r"^pycore serve: reload \(a file changed in .*\) done: 1 loaded$", since)
        first = _programs_using("AT_fresh_opens")
        subprocess.run([workload, "4", "/"], check=True)
        assert _samples(_get(port))["pycore_script_fresh_fresh_opens_total"] == 5
        # changed in place: replaced, still without SIGHUP
        since = log.mark()
        with open(path, "w") as f:
            f.write(counting("fresh_opens", "BEGIN { @v = 2; }\n"))
        log.wait(r"^pycore serve: script fresh: reload: replaced$", since, timeout=10)
        wait_gone(first)
        # the directory made writable by others: refused, the running scripts left as they are
        since = log.mark()
        os.chmod(d, 0o777)
        line = log.wait(r"^pycore serve: reload: .*a user other than root can write", since, timeout=10)
        assert "its scripts are left as they are" in line
        log.wait(r"done: 1 failed; not every file loaded$", since)
        subprocess.run([workload, "1", "/"], check=True)
        m = _samples(_get(port))
        os.chmod(d, 0o755)
    assert p.returncode == 0 and "Traceback" not in log.text()
    assert took < 5, took           # a look every second, acted on once two looks agree
    assert m["pycore_script_fresh_v"] == 2 and m["pycore_script_fresh_fresh_opens_total"] == 2
    assert m['pycore_script_up{script="fresh"}'] == 1
    assert m["pycore_scripts_last_reload_successful"] == 0 and m["pycore_scripts_reloads_total"] == 3


def test_scrapes_during_reloads(workload, tmp_path):
    """Scrapes from other threads while SIGHUP replaces a script again and again: each answers 200 with
    the unchanged script's counter, each script's health once, and that counter never goes back."""
    keep = _script(tmp_path, "steady.bt", counting("steady_opens"))
    flip = _script(tmp_path, "flip.bt", counting("flip_opens", "BEGIN { @v = 0; }\n"))
    bad: list[str] = []
    seen: list[list[float]] = [[], [], []]      # each thread's readings of the steady counter
    done = threading.Event()

    def scrape(port: int, seen: list[float]) -> None:
        while not done.is_set():
            try:
                text = _get(port)
            except OSError as e:
                bad.append(repr(e))
                continue
            if text.count('pycore_script_up{script="steady"}') != 1 or text.count('pycore_script_up{script="flip"}') != 1:
                bad.append(text)
            seen.append(_samples(text)["pycore_script_steady_steady_opens_total"])

    with serving("--script", keep, "--script", flip) as (p, port, log):
        subprocess.run([workload, "5", "/"], check=True)
        threads = [threading.Thread(target=scrape, args=(port, got)) for got in seen]
        for t in threads:
            t.start()
        for i in range(1, 6):
            with open(flip, "w") as f:
                f.write(counting("flip_opens", f"BEGIN {{ @v = {i}; }}\n"))
            assert reload(p, log).rstrip().endswith("1 kept, 1 replaced")
            subprocess.run([workload, "1", "/"], check=True)
        done.set()
        for t in threads:
            t.join(30)
        m = _samples(_get(port))
    assert p.returncode == 0 and "Traceback" not in log.text()
    assert not bad, bad[:1]
    assert all(len(got) > 10 and got == sorted(got) for got in seen)
    assert m["pycore_script_steady_steady_opens_total"] == 6 + 5 * 2
    assert m["pycore_script_flip_v"] == 5


def test_insecure_scripts_dir_refused(tmp_path):
    require_root()
    d = tmp_path / "open"
    d.mkdir()
    _script(d, "x.bt", "BEGIN { @a = 1; }\n")
    for mode, owner, says in ((0o777, 0, "a user other than root can write"),
                              (0o1777, 0, "a user other than root can write"),     # sticky is not enough
                              (0o755, 65534, "owner uid 65534")):
        os.chmod(d, mode)
        os.chown(d, owner, 0)
        r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--scripts-dir", str(d)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    os.chown(d, 0, 0)
    os.chmod(d, 0o755)
    os.chmod(d / "x.bt", 0o666)     # a file of the directory: refused as a --script file is
    for argv, says in ((["--scripts-dir", str(d)], "x.bt: refusing a script that a user other than root"),
                       (["--scripts-dir", str(tmp_path / "none")], "No such file"),
                       (["--scripts-dir", str(d / "x.bt")], "not a directory")):
        r = subprocess.run([sys.executable, "-m", "pycore", "serve", *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_signal_storm_then_sigterm(workload, tmp_path):
    """SIGHUPs by the hundred (reloads asked for while reloads run), then SIGTERM: the server serves
    throughout and exits 0, every program detached, no traceback. (The handlers now only note the
    signals; the old ones, which called Event.set(), passed this too: the lock they could wait on
    is held by the main thread for microseconds at a time.)"""
    script = _script(tmp_path, "storm.bt", counting("storm_opens"))
    with serving("--script", script) as (p, port, log):
        progs = _programs_using("AT_storm_opens")
        for k in range(400):
            p.send_signal(signal.SIGHUP)
            if k % 50 == 0:
                assert "pycore_script_storm_storm_opens_total" in _get(port)
            time.sleep(0.002)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve did not exit within 60 s of SIGTERM; log:\n{log.text()[-3000:]}")
    assert p.returncode == 0, log.text()[-3000:]
    assert "Traceback" not in log.text()
    wait_gone(progs)
