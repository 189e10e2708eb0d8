"""Where a binary's separate debug information lives, as gdb, libdw and bcc look for it.

Distributions strip their binaries and ship the DWARF (and the full
``.symtab``) in a separate file, found from the binary in two ways, tried
in this order:

* by build id: ``/usr/lib/debug/.build-id/xx/yyyy.debug``, from the
  ``.note.gnu.build-id`` note (``xx`` its first byte in hex, the rest after);
* by ``.gnu_debuglink``: a file name and a CRC-32 of the debug file, looked
  for beside the binary, in its ``.debug/`` subdirectory and under
  ``/usr/lib/debug/`` + the binary's directory; the CRC must match.

Both take a pyelftools ``ELFFile`` already open (readers here have one).
"""

from __future__ import annotations

import os
import struct

__all__ = ["DEBUG_DIR", "build_id", "debug_file"]

DEBUG_DIR = "/usr/lib/debug"


def build_id(elf) -> str | None:  # noqa: ANN001 - elftools.elf.elffile.ELFFile
    """The GNU build id of an ELF file in hex, None when it has none."""
    note = elf.get_section_by_name(".note.gnu.build-id")
    if note is None:
        return None
    data = note.data()
    if len(data) > 16 and data[12:16] == b"GNU\0":
        return data[16:].hex()
    return None


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _crc32(path: str) -> int | None:
    """The CRC-32 a debuglink carries (zlib's), read in chunks: debug files are big."""
    import zlib

    crc = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                crc = zlib.crc32(chunk, crc)
    except OSError:
        return None
    return crc


def debug_file(elf, path: str, debug_dir: str = DEBUG_DIR) -> str | None:  # noqa: ANN001
    """The separate debug file of ``path`` (open as ``elf``): by build id,
    else by debuglink with its CRC checked; None when there is none."""
    bid = build_id(elf)
    if bid is not None and len(bid) > 2:
        candidate = f"{debug_dir}/.build-id/{bid[:2]}/{bid[2:]}.debug"
        if os.path.exists(candidate) and not _same_file(candidate, path):
            return candidate
    link = elf.get_section_by_name(".gnu_debuglink")
    if link is None:
        return None
    data = link.data()
    if len(data) <= 5:
        return None
    name = data.split(b"\0", 1)[0].decode("utf-8", "replace")
    if not name or "/" in name:
        return None
    crc = struct.unpack_from("<I" if elf.little_endian else ">I", data, len(data) - 4)[0]
    bindir = os.path.dirname(os.path.abspath(path))
    for candidate in (f"{bindir}/{name}", f"{bindir}/.debug/{name}", f"{debug_dir}{bindir}/{name}"):
        if _same_file(candidate, path) or not os.path.isfile(candidate):
            continue
        return candidate if _crc32(candidate) == crc else None
    return None


def debug_package_hint(path: str) -> str:
    """What to install for ``path``'s DWARF, for an error message: its Debian package's debug
    package when dpkg knows the file (``libc6`` -> ``libc6-dbg``), else how to build it with it."""
    import subprocess

    r = None
    real = os.path.realpath(path)
    for name in dict.fromkeys((path, real, real.removeprefix("/usr"))):  # dpkg knows /bin/bash, not /usr/bin/bash
        try:
            r = subprocess.run(["dpkg-query", "-S", name], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            r = None
        if r is not None and r.returncode == 0:
            break
    if r is not None and r.returncode == 0 and ":" in r.stdout:
        pkg = r.stdout.split(":", 1)[0].split(",")[0].strip()
        return (f"install its debug symbols ({pkg}-dbgsym from Debian's debug archive, or {pkg}-dbg "
                f"where the package has one)")
    return "build it with -g, or install its separate debug file under /usr/lib/debug"
