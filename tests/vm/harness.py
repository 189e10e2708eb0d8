"""Run the ``kernel``-marked tests in Debian's stock kernels under QEMU.

The host kernel refuses fentry/fexit and has no kprobes (see
/work/shared/KERNEL-LAB.md), so those tests run in a VM:

1. :func:`resolve` finds the newest ``linux-image-SERIES...-amd64`` package
   of a series (``6.1`` -> ``linux-image-6.1.0-56-amd64``, ``6.12`` ->
   ``linux-image-6.12.117+deb12-amd64``) with ``apt-cache search``.
2. :func:`fetch` downloads it with ``apt-get download`` into the cache
   (``$PYCORE_KERNEL_CACHE``, default ``~/.cache/pycore/kernels``), unpacks
   it with ``dpkg -x`` and runs ``depmod -b``; the unpacked tree is kept
   (``CACHE/RELEASE/root``) and the .deb deleted, so later runs reuse it.
3. :func:`kernel_test_files` collects ``-m kernel`` on the host, so the
   guest imports only the test files that have kernel tests;
   :func:`precompile` writes the .pyc files the read-only guest cannot.
4. :func:`run_kernel` boots it with virtme-ng (``vng --run VMLINUZ
   --disable-kvm``, TCG: the KVM guest hangs here), sharing the host's root
   filesystem read-only, and runs a generated ``guest.sh`` that runs pytest
   in the repository and writes into the result directory (the one directory
   the guest may write, ``--rwdir``; and the kernel's queue, tests/vm/queue.py):
   ``started`` (guest uptime when the command began), ``uname``, ``current``
   (the test running now), ``junit.xml``, ``pytest.log`` and ``exitcode``.
   The verdict comes from those files, never from the console, which is
   saved as ``console.log`` for diagnosis.

Missing prerequisites (vng, qemu, depmod, dpkg, an unreachable package) raise
:class:`HarnessError`: a failure, never a skip.  ``./dev.sh vm-test`` installs
them.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"


class HarnessError(Exception):
    """A prerequisite or a step of the harness failed (not a test failure)."""


def log(msg: str) -> None:
    sys.stderr.write(f"[vm] {msg}\n")      # one write: the VMs' threads log side by side
    sys.stderr.flush()


def cache_dir() -> Path:
    env = os.environ.get("PYCORE_KERNEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pycore" / "kernels"


def _need(tool: str, hint: str) -> str:
    path = shutil.which(tool, path=f"{VENV_BIN}:{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if not path:
        raise HarnessError(f"{tool} not found: {hint}")
    return path


# -- 1. resolve -------------------------------------------------------------

def _package_re(series: str) -> re.Pattern[str]:
    # bookworm: linux-image-6.1.0-56-amd64; bookworm-updates/backports: linux-image-6.12.117+deb12-amd64
    return re.compile(rf"^linux-image-({re.escape(series)}(?:\.0-\d+|\.\d+\+deb\d+)-amd64)$")


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", release))


def resolve(series: str) -> str:
    """The kernel release (``uname -r``) of the newest apt package of ``series``.

    Falls back to the newest release already in the cache when apt knows
    none (offline, no package lists), with a warning.
    """
    pattern = _package_re(series)
    found: list[str] = []
    try:
        out = subprocess.run(["apt-cache", "search", "--names-only", "^linux-image-"],
                             capture_output=True, text=True, check=True).stdout
        found = [m.group(1) for line in out.splitlines()
                 if (m := pattern.match(line.split(" - ", 1)[0].strip()))]
    except (OSError, subprocess.CalledProcessError) as exc:
        log(f"apt-cache search failed: {exc}")
    if found:
        return max(found, key=_version_key)
    cached = [p.name for p in cache_dir().glob("*") if pattern.match("linux-image-" + p.name)
              and (p / "READY").exists()]
    if cached:
        release = max(cached, key=_version_key)
        log(f"warning: apt knows no linux-image for {series}; using cached {release}")
        return release
    raise HarnessError(
        f"no Debian kernel package for {series} reachable through apt "
        f"(apt-cache search finds no {pattern.pattern}); run apt-get update, "
        "check /etc/apt/sources.list* (bookworm, bookworm-updates)")


# -- 2. fetch ---------------------------------------------------------------

@dataclasses.dataclass
class Kernel:
    series: str           # what was asked for: "6.1"
    release: str          # uname -r: "6.1.0-56-amd64"
    root: Path            # unpacked package: boot/vmlinuz-RELEASE, lib/modules/RELEASE
    download_s: float | None = None   # None: it was cached

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"


def fetch(series: str) -> Kernel:
    """Resolve, then download and unpack unless the cache has it already."""
    release = resolve(series)
    home = cache_dir() / release
    kernel = Kernel(series, release, home / "root")
    if (home / "READY").exists() and kernel.vmlinuz.exists():
        return kernel
    package = f"linux-image-{release}"
    for tool, hint in (("apt-get", "not a Debian system?"), ("dpkg", "not a Debian system?"),
                       ("depmod", "apt-get install kmod (./dev.sh vm-test does)")):
        _need(tool, hint)
    t0 = time.monotonic()
    work = cache_dir() / f".{release}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        log(f"apt-get download {package}")
        cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", package]
        if subprocess.run(cmd, cwd=work).returncode != 0:
            log("apt-get download failed; apt-get update and retrying once")
            subprocess.run(["apt-get", "update", "-q"], stdin=subprocess.DEVNULL)
            if subprocess.run(cmd, cwd=work).returncode != 0:
                raise HarnessError(f"apt-get download {package} failed")
        debs = list(work.glob(f"{package}_*.deb"))
        if len(debs) != 1:
            raise HarnessError(f"apt-get download {package}: expected one .deb in {work}, got {debs}")
        subprocess.run(["dpkg", "-x", str(debs[0]), str(work / "root")], check=True)
        debs[0].unlink()
        subprocess.run(["depmod", "-b", str(work / "root"), release], check=True)
        if not (work / "root" / "boot" / f"vmlinuz-{release}").exists():
            raise HarnessError(f"{package} has no boot/vmlinuz-{release}")
        (work / "READY").write_text(f"{package}\n")
        shutil.rmtree(home, ignore_errors=True)
        work.rename(home)
    except subprocess.CalledProcessError as exc:
        raise HarnessError(f"unpacking {package}: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kernel.download_s = time.monotonic() - t0
    log(f"{release}: downloaded and unpacked in {kernel.download_s:.1f} s into {home}")
    return kernel


# -- 3. select --------------------------------------------------------------

def kernel_test_files(pytest_args: list[str]) -> list[str]:
    """Test files with tests selected by ``-m kernel PYTEST_ARGS``, collected on the host.

    Importing every test module in the guest costs about 30 s under TCG; the
    guest gets only these files.  Raises when nothing is selected (a VM run
    would prove nothing) or the collection fails.
    """
    return sorted({node.split("::", 1)[0] for node in kernel_test_nodes(pytest_args)})


def kernel_test_nodes(pytest_args: list[str]) -> list[str]:
    """The node ids behind :func:`kernel_test_files`, in collection order: what each kernel's queue
    holds (tests/vm/queue.py), so a collection that fails here fails the run (the host's pytest
    fails on the same error)."""
    # PYTHONDONTWRITEBYTECODE unset: this collection writes pytest's assert-rewritten .pyc files, which the
    # guest (a read-only root) reads instead of rewriting every test module again under TCG: 2.9 s of
    # CPU natively without them, 1.0 s with, and a VM's time to its first test was 77 s without them
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([str(VENV_BIN / "python"), "-m", "pytest", "--collect-only", "-q", "-m", "kernel",
                           "-p", "no:cacheprovider", *pytest_args],
                          cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    nodes = [line.strip() for line in proc.stdout.splitlines() if "::" in line]
    if proc.returncode == 5 or (proc.returncode == 0 and not nodes):
        raise HarnessError(f"no test selected by pytest -m kernel {shlex.join(pytest_args)}")
    if proc.returncode != 0:
        last = (proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or ["?"])[-1]
        raise HarnessError(f"collecting the kernel tests on the host failed (pytest exit {proc.returncode}): {last}")
    return nodes


def precompile() -> None:
    """Byte-compile the repository on the host: the guest cannot write __pycache__ (read-only root)."""
    subprocess.run([str(VENV_BIN / "python"), "-m", "compileall", "-q", "pycore", "btf", "tests"],
                   cwd=REPO, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


# -- 4. run -----------------------------------------------------------------

@dataclasses.dataclass
class Result:
    kernel: Kernel
    outdir: Path
    exitcode: int | None = None        # pytest's, from the guest; None: never written
    error: str = ""                    # why the run failed outside pytest (timeout, no boot)
    boot_s: float | None = None        # host: launch of vng -> guest command started
    guest_uptime_s: float | None = None  # guest: kernel boot -> command started
    total_s: float = 0.0               # host: launch -> vng exited
    oopses: list[str] = dataclasses.field(default_factory=list)   # kernel reports in the console

    @property
    def ok(self) -> bool:
        return not self.error and self.exitcode == 0

    @property
    def junit(self) -> Path:
        return self.outdir / "junit.xml"


GUEST_SH = """\
#!/bin/sh
# generated by tests/vm/harness.py; runs inside the VM
cut -d' ' -f1 /proc/uptime >{out}/started
uname -r >{out}/uname
cd {repo} || exit 1
PYCORE_VM_QUEUE={queue} PYCORE_VM_NAME={name} PYCORE_VM_SERIES={series} PYCORE_VM_KMSG=1 PYCORE_VM_CURRENT={out}/current PYCORE_VM_FAILURES={out}/failures.log {python} -m pytest -m kernel -p no:cacheprovider --junitxml={out}/junit.xml {args} >{out}/pytest.log 2>&1
echo $? >{out}/exitcode
"""


def vng_command(kernel: Kernel, outdir: Path, memory: str = "2G", cpus: int = 2,
                tcg: str | None = None, queue: Path | None = None) -> list[str]:
    """``tcg``: QEMU's TCG threading, ``"single"`` or ``"multi"`` (None: QEMU's default, multi).
    ``queue``: the kernel's queue directory, writable in the guest too."""
    cmd = [_need("vng", "pip install virtme-ng into .venv (./dev.sh vm-test does)"),
           "--run", str(kernel.vmlinuz), "--disable-kvm", "--memory", memory, "--cpus", str(cpus),
           "--verbose", "--force-9p", "--rwdir", str(outdir)]
    if queue is not None:
        cmd += ["--rwdir", str(queue)]
    if tcg is not None:
        cmd += [f"--qemu-opts=-accel tcg,thread={tcg}"]
    return cmd + ["--", f"sh {outdir}/guest.sh"]


# The first line of a kernel report: an oops (int3, page fault, GPF), a BUG() or BUG: line, a WARN(),
# a panic. Lines in the console start with the kernel's "[   88.123456] " stamp.
_REPORT = re.compile(r"\] (?:Oops: |BUG: |kernel BUG at |WARNING: CPU: |WARNING: .* at |"
                     r"general protection fault|Kernel panic - not syncing)")
_TEST_MARK = re.compile(r"\] (?:pycore-test|exercise4): (.*)")


def oopses(console: str, context: int = 24) -> list[str]:
    """Each kernel report in a console log, as lines: the test that was running when it began
    (``pycore-test: NODEID``, which the guest's conftest writes to /dev/kmsg) first, then the report's
    first ``context`` lines. The panic that follows an oops belongs to it; each oops (one a CPU), BUG
    or WARNING is a report of its own."""
    lines = console.splitlines()
    found: list[list[str]] = []
    running = "(no test started yet)"
    open_ = False                       # lines go on into found[-1]
    for line in lines:
        if (m := _TEST_MARK.search(line)):
            running, open_ = m.group(1).strip(), False
        elif _REPORT.search(line) and not (found and "Kernel panic" in line):
            found.append([f"running: {running}", line])
            open_ = True
        elif open_ and len(found[-1]) <= context:
            found[-1].append(line)
    return ["\n".join(report) for report in found]


# QEMU's TCG runs each vCPU on a host thread of its own by default (thread=multi). Under it Debian's
# 6.12 oopses on an int3 left by its own text patching (text_poke_bp, which jump labels and static
# calls use: at boot, and at every tracepoint attach and detach) while the other vCPU runs that code:
# issue 29, python -m tests.vm.exercise4_loop. With one thread for all vCPUs (thread=single) QEMU runs
# them in turn and the patching is never observed half done. README's "Kernel VM tests" has the figures.
TCG = "single"


def run_kernel(kernel: Kernel, outdir: Path, pytest_args: list[str], timeout: float = 360,
               tcg: str | None = TCG, queue: Path | None = None, stall: float | None = None) -> Result:
    """Boot ``kernel``, run pytest -m kernel in it, read the verdict from ``outdir``. ``queue``: the
    kernel's queue (tests/vm/queue.py), of which this VM runs the tests it takes; None: all the tests.
    ``timeout``: seconds for the whole run; ``stall``: seconds the guest may go without starting a
    test (or booting), a hang.

    A kernel report in the console (an oops, BUG, WARNING or panic) fails the run whatever pytest
    said, naming the test that was running and printing the report: never retried, never hidden.
    """
    return _run_once(kernel, outdir, pytest_args, timeout, tcg, queue, stall)


# the process groups of the VMs running now (vng starts a session of its own: a signal to the runner
# does not reach QEMU), so that an interrupted run leaves none behind: stop_all()
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _stop(pgid: int) -> None:
    """SIGTERM to a VM's process group (vng and its QEMU), SIGKILL after 10 s."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_all() -> int:
    """Stop every VM still running and start no other (the runner was interrupted); how many
    were running."""
    _STOPPING.set()
    with _LIVE_LOCK:
        pgids = list(_LIVE)
    for pgid in pgids:
        _stop(pgid)
    return len(pgids)


def _mtimes(*paths: Path) -> tuple[float, ...]:
    out = []
    for path in paths:
        try:
            out.append(path.stat().st_mtime)
        except OSError:
            out.append(0.0)
    return tuple(out)


def _running(outdir: Path) -> str:
    """``": NODEID was running"`` for the guest's current test, or ""."""
    current = _read(outdir / "current").strip()
    return f": {current} was running" if current else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _run_once(kernel: Kernel, outdir: Path, pytest_args: list[str], timeout: float,
              tcg: str | None, queue: Path | None = None, stall: float | None = None) -> Result:
    _need("qemu-system-x86_64", "apt-get install qemu-system-x86 (./dev.sh vm-test does)")
    cmd = vng_command(kernel, outdir, tcg=tcg, queue=queue)
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir(parents=True)
    (outdir / "guest.sh").write_text(GUEST_SH.format(
        out=shlex.quote(str(outdir)), repo=shlex.quote(str(REPO)),
        python=shlex.quote(str(VENV_BIN / "python")), args=shlex.join(pytest_args),
        queue=shlex.quote(str(queue) if queue is not None else ""), name=shlex.quote(outdir.name),
        series=shlex.quote(kernel.series)))
    result = Result(kernel, outdir)
    log(f"{kernel.release}: booting ({shlex.join(cmd)})")
    t0 = last = time.monotonic()
    seen: tuple[float, ...] = ()
    with open(outdir / "console.log", "wb") as console:
        env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")  # vng runs virtme-run
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=console,
                                stderr=subprocess.STDOUT, start_new_session=True)
        with _LIVE_LOCK:
            _LIVE.add(proc.pid)
        try:
            while proc.poll() is None:
                if result.boot_s is None and (outdir / "started").exists():
                    result.boot_s = time.monotonic() - t0
                now = time.monotonic()
                if now - t0 > timeout:
                    result.error = f"timed out after {timeout:.0f} s{_running(outdir)}"
                    break
                if stall is not None:
                    progress = _mtimes(outdir / "started", outdir / "current")
                    if progress != seen:
                        seen, last = progress, now
                    elif now - last > stall:
                        result.error = f"no test started for {stall:.0f} s{_running(outdir)}"
                        break
                if _STOPPING.is_set():
                    result.error = "interrupted"
                    break
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                _stop(proc.pid)   # vng and its qemu
                proc.wait()
            with _LIVE_LOCK:
                _LIVE.discard(proc.pid)
    result.total_s = time.monotonic() - t0

    def read(name: str) -> str | None:
        try:
            return (outdir / name).read_text().strip()
        except OSError:
            return None

    if (up := read("started")) is not None:
        result.guest_uptime_s = float(up)
    if (code := read("exitcode")) is not None:
        result.exitcode = int(code)
    elif not result.error:
        result.error = (f"the guest wrote no exit code (vng exited {proc.returncode}): "
                        "it did not boot or the command died")
    if (uname := read("uname")) is not None and uname != kernel.release:
        result.error = f"guest runs {uname}, expected {kernel.release}"
    result.oopses = oopses(_read(outdir / "console.log"))
    if result.oopses:
        first = result.oopses[0].splitlines()
        result.error = (f"kernel report in the console while {first[0].removeprefix('running: ')} ran: "
                        f"{first[1].split('] ', 1)[-1]}" + (f" (and {len(result.oopses) - 1} more)"
                                                            if len(result.oopses) > 1 else ""))
    return result


def explain(result: Result) -> None:
    """Print why a run failed: its kernel reports, then the ends of its console and pytest log."""
    if result.ok:
        return
    for report in result.oopses:
        log(f"--- {result.kernel.release}: kernel report ---")
        for line in report.splitlines():
            print(f"    {line}", file=sys.stderr)
    tail(f"{result.kernel.release} console", result.outdir / "console.log")
    # each failure as it happened (tests/conftest.py): a run cut short by its timeout never
    # gets to pytest's summary, and this is then the only place that says why a test failed
    tail(f"{result.kernel.release} failures", result.outdir / "failures.log", lines=200)
    tail(f"{result.kernel.release} pytest", result.outdir / "pytest.log")


def tail(what: str, path: Path, lines: int = 40) -> None:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return
    log(f"--- last {len(text)} lines of {what} ({path}) ---")
    for line in text:
        print(f"    {line}", file=sys.stderr)
