"""examples/systemd/pycore-serve.service starts and serves under its own hardening.

PID 1 here is not systemd, so the unit's settings are made with the kernel's own mechanisms
(tests/systemd_unit.py: a mount namespace with / read-only, /home and /root hidden, a private /tmp
and /dev, the cache directory; setpriv with exactly the unit's capability sets and no_new_privs; a
seccomp filter for its address families, architecture, namespaces and personality), and its
ExecStart runs there as written but for three paths: the pycore command (this venv's), the scripts
directory (the test's, holding the example's opens.bt and a script of the test's asking for kernel
and user stacks) and the port (a free one). A workload running as nobody opens a file 7 times; the
scrape must count 7 and name the stacks' functions; ExecReload= reloads both scripts, kept. Without
any one of the unit's capabilities, something of that fails (so each is needed). A probe run in
ExecStart's place finds what the unit forbids forbidden. ``systemd-analyze verify`` finds nothing to
say about the unit and ``systemd-analyze security`` rates it OK or better.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest

from tests import reach, systemd_unit
from tests.conftest import require_root, running, stop

pytest.importorskip("prometheus_client")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "systemd"
UNIT = EXAMPLE / "pycore-serve.service"
PYCORE = Path(sys.executable).with_name("pycore")
# What the service run here needs of the host besides the unit's own file system: this clone (the
# editable install's package and build, the test's scripts under build/) and its venv. Wherever the
# clone lies (under /tmp or /root too, which the unit hides), the sandbox binds them back read-only
# at their own names (tests/reach.py).
EXPOSE = [str(ROOT), sys.prefix]
OPENS = 7
CAP_BITS = {"bpf": 39, "perfmon": 38, "syslog": 34, "sys_ptrace": 19, "sys_admin": 21, "sys_resource": 24,
            "dac_read_search": 2, "dac_override": 1}
STACKS = """\
tracepoint:syscalls:sys_enter_openat /comm == "svc-wl"/ {
  @kstacks[kstack(1)] = count(); @ustacks[ustack(1)] = count();
}
"""
WORKLOAD = f"""\
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"svc-wl", 0, 0, 0)
for _ in range({OPENS}):
    os.close(os.open("/etc/hostname", os.O_RDONLY))
sys.stdout.write("opened\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def service() -> dict[str, list[str]]:
    return systemd_unit.parse(UNIT.read_text())["Service"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def place() -> Iterator[Path]:
    """The test's scripts and cache directories, in this clone's build/ (the sandbox binds the cache
    directory and exposes the clone even where PrivateTmp= or ProtectHome= would hide them), root's
    only, as pycore serve asks of script directories."""
    base = ROOT / "build"
    base.mkdir(exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="systemd-unit-", dir=base))
    d.chmod(0o755)
    (d / "scripts").mkdir(mode=0o755)
    shutil.copy(EXAMPLE / "opens.bt", d / "scripts" / "opens.bt")
    (d / "scripts" / "stacks.bt").write_text(STACKS)
    for f in (d / "scripts").iterdir():
        f.chmod(0o644)
    (d / "cache").mkdir(mode=0o700)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def exec_start(port: int, scripts: Path) -> list[str]:
    """The unit's ExecStart, its three host paths replaced (each must be there)."""
    [line] = service()["ExecStart"]
    argv = shlex.split(line)
    subst = {"/usr/local/bin/pycore": str(PYCORE), "/etc/pycore/scripts": str(scripts),
             "127.0.0.1:9435": f"127.0.0.1:{port}"}
    for old in subst:
        assert any(old in a for a in argv), f"ExecStart no longer has {old}: {line}"
    for old, new in subst.items():
        argv = [a.replace(old, new) for a in argv]
    return argv


def _mask(caps: list[str]) -> int:
    return sum(1 << CAP_BITS[c] for c in caps)


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def serve_as_unit(place: Path, unit_text: str) -> dict[str, Any]:
    """Run the unit's ExecStart under its settings, a workload as nobody while it serves; what was seen."""
    port = _free_port()
    config = place / "config.json"
    config.write_text(json.dumps({"unit": unit_text, "cache_dir": str(place / "cache"),
                                  "argv": exec_start(port, place / "scripts"), "expose": EXPOSE}))
    seen: dict[str, Any] = {}
    argv = ["unshare", "--mount", "--uts", "--propagation", "private", "--",
            sys.executable, "-m", "tests.systemd_unit", str(config)]
    with running(argv, cwd=ROOT) as p:
        assert p.stderr is not None
        lines = []
        for line in p.stderr:
            lines.append(line)
            if line.startswith("pycore serve: http://"):
                break
        else:
            seen["started"] = False
            seen["stderr"] = "".join(lines)
            p.wait(30)
            return seen
        seen["started"] = True
        seen["stderr"] = "".join(lines)
        with open(f"/proc/{p.pid}/status") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        seen["caps"] = {k: int(status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        seen["no_new_privs"] = status["NoNewPrivs"].strip()
        with open(f"/proc/{p.pid}/mountinfo") as f:
            seen["mounts"] = {fields[4]: fields[5].split(",") for fields in (line.split() for line in f)}
        seen["root_listing"] = sorted(os.listdir(f"/proc/{p.pid}/root/tmp"))
        wl = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               "/usr/bin/python3", "-c", WORKLOAD],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert wl.stdout is not None and wl.stdout.readline() == "opened\n"
            text = _scrape(port)          # while the workload lives: its /proc/PID/maps names ustack's frames
        finally:
            wl.communicate("", timeout=30)
        # ExecReload=, as systemctl reload runs it: $MAINPID is the service's process
        [reload] = systemd_unit.service_of(unit_text)["ExecReload"]
        subprocess.run(shlex.split(reload.replace("$MAINPID", str(p.pid))), check=True, timeout=30)
        for line in p.stderr:
            seen["stderr"] += line
            if "pycore serve: reload (SIGHUP) done" in line:
                seen["reloaded"] = line.strip()
                break
        out, err = stop(p, signal.SIGTERM)
        seen["exit"] = p.returncode
        seen["stderr"] += err
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    seen["opens"] = samples.get('pycore_script_opens_opens_total{comm="svc-wl"}')
    seen["kstack"] = [n for n in samples if n.startswith("pycore_script_stacks_kstacks_total{")]
    seen["ustack"] = [n for n in samples if n.startswith("pycore_script_stacks_ustacks_total{")]
    return seen


# What fails without each capability of the unit.
WHY = {"bpf": "needs root, or CAP_BPF and CAP_PERFMON", "perfmon": "needs root, or CAP_BPF and CAP_PERFMON",
       "syslog": "kernel stacks without names", "sys_ptrace": "user stacks of another user's process without names"}
SYMBOL = r'[A-Za-z_][\w.@]*\+\d+'   # a function and an offset, not 0x...


def _works(seen: dict[str, Any]) -> list[str]:
    """What the full unit does that this run did not (empty: all of it)."""
    failed = []
    if not seen["started"]:
        return ["start: " + str(seen["stderr"]).strip()]
    if seen["opens"] != OPENS:
        failed.append(f"opens counted {seen['opens']}, not {OPENS}")
    if not any(re.fullmatch(r'pycore_script_stacks_kstacks_total\{kstack="' + SYMBOL + '"}', n)
               for n in seen["kstack"]):
        failed.append(f"kernel stacks without names (CAP_SYSLOG): {seen['kstack']}")
    if not any(re.fullmatch(r'pycore_script_stacks_ustacks_total\{ustack="' + SYMBOL + '"}', n)
               for n in seen["ustack"]):
        failed.append(f"user stacks of another user's process without names (CAP_SYS_PTRACE): {seen['ustack']}")
    if "2 kept" not in seen.get("reloaded", ""):
        failed.append(f"ExecReload: {seen.get('reloaded', 'no reload logged')}")
    if seen["exit"] != 0:
        failed.append(f"exit {seen['exit']}")
    return failed


def test_unit_serves_under_its_settings(place: Path) -> None:
    require_root()
    unit = service()
    seen = serve_as_unit(place, UNIT.read_text())
    failed = _works(seen)
    assert failed == [], f"{failed}\n{seen['stderr']}"
    assert "Traceback" not in str(seen["stderr"])
    # no CAP_SYS_ADMIN: no bpf_enable_stats, said in one line, and served all the same
    assert "pycore serve: probes' run counts and time not counted" in str(seen["stderr"])
    # the process that served had exactly the unit's capabilities, and no way to gain more
    want = _mask(systemd_unit.caps(unit, "CapabilityBoundingSet"))
    assert _mask(systemd_unit.caps(unit, "AmbientCapabilities")) == want
    assert seen["caps"] == {"CapInh": want, "CapPrm": want, "CapEff": want, "CapBnd": want, "CapAmb": want}
    assert seen["no_new_privs"] == "1"
    # and saw the file system the unit describes: read-only but its cache, /tmp and the API file systems
    mounts: dict[str, list[str]] = seen["mounts"]
    assert "ro" in mounts["/"]
    for mp, opts in mounts.items():
        if not systemd_unit._under(mp, ["/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/var/cache/pycore"]):
            assert "ro" in opts, (mp, opts)
    assert "rw" in mounts["/var/cache/pycore"] and "rw" in mounts["/tmp"]
    assert "ro" in mounts["/root"] and "ro" in mounts["/home"]
    # its own /tmp: empty, but for the way to this clone where the clone lies under /tmp
    exposed = [os.path.realpath(p) for p in EXPOSE]
    assert seen["root_listing"] == sorted({p.split("/")[2] for p in exposed if reach.under(p, "/tmp")})
    for p in exposed:            # bound back read-only where the unit hides it, else read-only with /
        mp = max((m for m in mounts if reach.under(p, m)), key=len)
        assert "ro" in mounts[mp], (p, mp, mounts[mp])
    # pycore kept its cache in the cache directory: the scripts' parsed trees ($XDG_CACHE_HOME/pycore)
    cached = [p.name for p in (place / "cache").iterdir()]
    assert sum(c.startswith("trace-tree-") for c in cached) == 2, cached


@pytest.mark.slow
@pytest.mark.parametrize("cap", systemd_unit.caps(service(), "CapabilityBoundingSet"))
def test_each_capability_is_needed(place: Path, cap: str) -> None:
    """The unit without one capability (both sets): something the full unit does fails."""
    require_root()
    name = "CAP_" + cap.upper()
    text = UNIT.read_text()
    lines = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("CapabilityBoundingSet", "AmbientCapabilities"):
            line = key + "=" + " ".join(w for w in value.split() if w != name)
        lines.append(line)
    less = "\n".join(lines)
    assert less.count(name) == text.count(name) - 2
    seen = serve_as_unit(place, less)
    failed = _works(seen)
    assert failed != [], f"{name} is not needed: everything works without it"
    assert WHY.get(cap, "") in "\n".join(failed), failed


PROBE = """\
import ctypes, errno, os, socket, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def c(r):
    if r == -1:
        raise OSError(ctypes.get_errno(), "")
print("inet", call(lambda: socket.socket(socket.AF_INET).close()))
print("netlink", call(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()))
print("packet", call(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()))
print("personality", call(lambda: c(libc.personality(0x0008))))
print("userns", call(lambda: c(libc.unshare(0x10000000))))
t = threading.Thread(target=print, args=("thread ok",)); t.start(); t.join()
print("write /", call(lambda: open("/unit-probe", "w")))
print("write cache", call(lambda: os.close(os.open("/var/cache/pycore/probe", os.O_CREAT | os.O_WRONLY, 0o600))))
print("write tmp", call(lambda: open("/tmp/probe", "w").close()))
print("list /root", call(lambda: os.listdir("/root")))
print("dev", sorted(n for n in os.listdir("/dev") if not n.startswith(".")))
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status") if ":\\t" in line)
print("seccomp", status["Seccomp"].strip(), status["NoNewPrivs"].strip())
"""


def test_the_sandbox_bites(place: Path) -> None:
    """What the unit forbids is forbidden to the process run as it: tests/systemd_unit.py's sandbox,
    checked from inside with the unit as it is and a probe in place of ExecStart."""
    require_root()
    config = place / "config.json"
    config.write_text(json.dumps({"unit": UNIT.read_text(), "cache_dir": str(place / "cache"),
                                  "argv": [sys.executable, "-c", PROBE], "expose": EXPOSE}))
    r = subprocess.run(["unshare", "--mount", "--uts", "--propagation", "private", "--",
                        sys.executable, "-m", "tests.systemd_unit", str(config)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "inet ok", "netlink ok",
        "packet EAFNOSUPPORT",          # RestrictAddressFamilies= (else EPERM: no CAP_NET_RAW)
        "personality EPERM",            # LockPersonality=
        "userns EPERM",                 # RestrictNamespaces= (else allowed: no capability needed)
        "thread ok",                    # clone3 refused (ENOSYS), libc falls back to clone
        "write / EROFS", "write cache ok", "write tmp ok",
        "list /root EACCES",
        "dev ['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', "
        "'urandom', 'zero']",        # PrivateDevices=
        "seccomp 2 1",
    ], r.stderr
    assert (place / "cache" / "probe").exists()


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd-analyze (Debian's systemd package, ./dev.sh) finds nothing to say about the unit (an
    unknown key, a bad value, a missing command: each a warning), and rates its exposure OK or better."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze missing: ./dev.sh setup installs the systemd package")
    unit = tmp_path / UNIT.name   # the command where this venv has it: verify checks it is executable
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/pycore", str(PYCORE)))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    bad = tmp_path / "bad" / UNIT.name
    bad.parent.mkdir()
    bad.write_text(unit.read_text().replace("ProtectHome=yes", "ProtectHome=yess"))
    r = subprocess.run([analyze, "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "Failed to parse protect home value" in r.stderr  # what the check above would see
    r = subprocess.run([analyze, "security", "--offline=yes", str(unit)], capture_output=True, text=True,
                       timeout=60)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", r.stdout)
    assert level and level.group(2) in {"OK", "SAFE"}, r.stdout[-2000:] + r.stderr
