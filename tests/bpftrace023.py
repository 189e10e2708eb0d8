"""The reference bpftrace 0.23.2 (Debian 13's package), for tests that compare ``pycore trace`` with it.

``./dev.sh bpftrace-0.23 ARGS`` builds, once, a Debian 13 root with bpftrace (mmdebstrap, cached in
~/.cache/pycore/trixie-root, a READY stamp) and runs bpftrace there, chrooted, with /proc, /dev and
/sys bound in a mount namespace of its own. :func:`available` builds the root on first use; a test
that needs it calls :func:`require`, which skips when it cannot be had, and under CI=true fails
(tests/conftest.py turns such a skip into a failure: ./dev.sh provides it).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = os.path.join(ROOT, "dev.sh")
VERSION = "bpftrace v0.23.2"

_READY: str | None = None   # None: not tried yet; "": ready; else why not


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XDG_CACHE_HOME", None)   # the root outlives test runs: the user's own ~/.cache
    return env


def available() -> str:
    """"" when bpftrace 0.23.2 runs here, else why not (the root is built on the first call)."""
    global _READY
    if _READY is None:
        if os.geteuid() != 0:
            _READY = "needs root (chroot, mount, BPF)"
            return _READY
        try:
            p = subprocess.run([DEV, "bpftrace-0.23", "--version"], capture_output=True, text=True,
                               timeout=900, env=_env(), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            _READY = f"./dev.sh bpftrace-0.23 failed: {e}"
            return _READY
        if VERSION not in p.stdout:
            _READY = f"./dev.sh bpftrace-0.23 --version gave {p.stdout.strip()!r}: {p.stderr.strip()[-500:]}"
        else:
            _READY = ""
    return _READY


def require() -> None:
    """Skip the calling test unless bpftrace 0.23.2 runs here (a failure under CI=true)."""
    why = available()
    if why:
        pytest.skip(f"no reference bpftrace 0.23.2: {why}")


def argv(*args: str) -> list[str]:
    """The command line that runs bpftrace 0.23.2 with ``args`` (after :func:`require`)."""
    return [DEV, "bpftrace-0.23", *args]


_NOISE = re.compile(r"^WARNING: Unknown error -1: couldn't set RLIMIT_MEMLOCK.*\n", re.M)


def run(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """bpftrace 0.23.2 -e ``script``: exit code, stdout and stderr (its chroot's memlock warning dropped)."""
    require()
    p = subprocess.run(argv(*args, "-e", script), capture_output=True, text=True, timeout=timeout, env=_env(),
                       stdin=subprocess.DEVNULL)
    p.stderr = _NOISE.sub("", p.stderr)
    return p


def env() -> dict[str, str]:
    """The environment :func:`argv`'s command runs in."""
    return _env()


def root() -> str:
    """The Debian 13 root bpftrace 0.23.2 runs in (chrooted): a file at ``root() + path`` is ``path`` to it."""
    if os.environ.get("PYCORE_TRIXIE_ROOT"):
        return os.environ["PYCORE_TRIXIE_ROOT"]
    import pwd

    return os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "pycore", "trixie-root")
