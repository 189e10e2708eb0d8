"""``vmlinux.h``, the kernel's types as C for CO-RE programs, written from BTF by :mod:`btf` and cached.

The header depends only on the BTF's bytes (and on the writer), so it is
kept in ``$XDG_CACHE_HOME/pycore/vmlinux/KEY/vmlinux.h`` (``~/.cache`` by
default), KEY a digest of both: writing one from a kernel's BTF takes
about 0.2 s, a cached one costs a hash of the 5 MB file (a few ms).
Where the cache cannot be written, the header goes to a temporary
directory removed after the build.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from pycore.build.errors import BuildError

__all__ = ["KERNEL_BTF", "cache_root", "vmlinux_dir", "given_vmlinux_dir"]

KERNEL_BTF = "/sys/kernel/btf/vmlinux"
_HEADER = "vmlinux.h"
# Bump when what btf.cdump writes changes in a way the cache must not hide.
_WRITER = b"btf.cdump/1"


def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pycore", "vmlinux")


def _read_btf(path: str | None) -> tuple[str, bytes]:
    source = path or KERNEL_BTF
    try:
        with open(source, "rb") as f:
            return source, f.read()
    except FileNotFoundError:
        if path is None:
            raise BuildError(f"no BTF for the running kernel ({KERNEL_BTF} is missing; such kernels lack "
                             f"CONFIG_DEBUG_INFO_BTF): give --btf FILE, a vmlinux BTF from a kernel that has it") from None
        raise BuildError(f"--btf {path}: no such file") from None
    except OSError as e:
        raise BuildError(f"{'--btf ' if path else ''}{source}: cannot read: {e.strerror}") from None


def _write_header(source: str, data: bytes, directory: str) -> None:
    """Parse ``data`` as kernel BTF and write ``directory/vmlinux.h`` whole or not at all."""
    from btf import BtfError, Kind, Spec
    from btf.cdump import write_header

    flag = "--btf " if source != KERNEL_BTF else ""
    try:
        if data[:4] == b"\x7fELF":
            from btf.elf import btf_section  # only for ELF input

            data = btf_section(data, source)
        spec = Spec(data)
    except (BtfError, ValueError) as e:
        raise BuildError(f"{flag}{source}: not BTF ({e}): give raw BTF like {KERNEL_BTF}, "
                         f"or an ELF vmlinux with a .BTF section") from None
    if not spec.ids_named("task_struct", (Kind.STRUCT,)):
        raise BuildError(f"{flag}{source}: BTF without the kernel's types (no struct task_struct): "
                         f"give a kernel's BTF, like {KERNEL_BTF}")
    fd, tmp = tempfile.mkstemp(prefix=".vmlinux.h.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            write_header(spec, out)
        os.replace(tmp, os.path.join(directory, _HEADER))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise



@contextlib.contextmanager
def vmlinux_dir(btf_path: str | None = None) -> Iterator[str]:
    """A directory holding ``vmlinux.h`` for ``btf_path`` (the running kernel's BTF by default)."""
    source, data = _read_btf(btf_path)
    key = hashlib.sha256(_WRITER + b"\0" + data).hexdigest()[:32]
    cached = os.path.join(cache_root(), key)
    if os.path.isfile(os.path.join(cached, _HEADER)):
        yield cached
        return
    try:
        os.makedirs(cached, exist_ok=True)
    except OSError:
        cached = ""
    if cached:
        try:
            _write_header(source, data, cached)
        except OSError:
            cached = ""
    if cached:
        yield cached
        return
    tmp = tempfile.mkdtemp(prefix="pycore-vmlinux-")  # the cache is only a cache
    try:
        _write_header(source, data, tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def given_vmlinux_dir(header: str) -> Iterator[str]:
    """A directory where ``#include "vmlinux.h"`` finds ``header`` (a ready header, e.g. bpf_src/vmlinux.h)."""
    if not os.path.isfile(header):
        raise BuildError(f"--vmlinux-h {header}: no such file")
    header = os.path.abspath(header)
    if os.path.basename(header) == _HEADER:
        yield os.path.dirname(header)
        return
    tmp = tempfile.mkdtemp(prefix="pycore-vmlinux-")
    try:
        os.symlink(header, os.path.join(tmp, _HEADER))
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
