"""speedscope's npm package (1.22.2), downloaded once into ~/.cache/pycore and checked against the sha512
the npm registry publishes for it: its file-format schema (``dist/release/file-format-schema.json``)
and its built app (``dist/release/index.html``), for tests/test_profile.py's speedscope tests.

``./dev.sh setup`` fetches it (``python -m tests.speedscope_pkg``); a test calls :func:`release_dir`,
which fetches it too when the cache lacks it. The cache is the invoking user's own ~/.cache (not
$XDG_CACHE_HOME, which the tests point at a directory of each run's own), as dev.sh's Debian 13 root.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "1.22.2"
TARBALL = f"https://registry.npmjs.org/speedscope/-/speedscope-{VERSION}.tgz"
# dist.integrity of https://registry.npmjs.org/speedscope/1.22.2 (the registry's metadata)
INTEGRITY = "sha512-4jS06bzIU97YqF6IsnO9ocn3yQIVMYhvoJqHRHbRiYOcsc8N7zpH2fdlEmXM+734WVysUeACoIKJq1ANrwkHdA=="


def cache_dir() -> Path:
    home = pwd.getpwuid(os.getuid()).pw_dir or os.path.expanduser("~")
    return Path(home) / ".cache" / "pycore" / f"speedscope-{VERSION}"


def release_dir() -> Path:
    """``package/dist/release`` of the unpacked tarball (downloaded and checked first if need be)."""
    root = cache_dir()
    release = root / "package" / "dist" / "release"
    if (root / "READY").exists():
        return release
    data = urllib.request.urlopen(TARBALL, timeout=60).read()
    got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if got != INTEGRITY:
        raise RuntimeError(f"{TARBALL}: sha512 {got}, the registry says {INTEGRITY}")
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
    try:
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.seek(0)
            with tarfile.open(fileobj=f, mode="r:gz") as tar:
                # files and folders only, inside tmp (Debian 12's Python 3.11.2 has no extraction filter)
                for m in tar.getmembers():
                    if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                        raise RuntimeError(f"{TARBALL}: unexpected member {m.name!r}")
                tar.extractall(tmp)
        (tmp / "READY").write_text(INTEGRITY + "\n")
        try:
            tmp.rename(root)          # atomic: another run fetching at the same time keeps its own
        except OSError:
            if not (root / "READY").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return release


if __name__ == "__main__":
    print(release_dir())
