"""/proc/kallsyms: which functions the running kernel really has.

BTF describes every function the compiler emitted a body for, but a name in
BTF is no promise that a traceable symbol exists.  Where tracefs'
``available_filter_functions`` cannot be read, the text symbols here are
the best stand-in.  The file is 5 MB; it is read once, as bytes, and
searched with regular expressions rather than split into 120k lines.
"""

from __future__ import annotations

import os
import re

__all__ = ["KALLSYMS_PATH", "Kallsyms"]

KALLSYMS_PATH = "/proc/kallsyms"
VMLINUX = "vmlinux"


class Kallsyms:
    """The kernel's symbol table, read lazily; names only (addresses may be
    zeroed by kptr_restrict and are never needed for listing)."""

    def __init__(self, path: str = KALLSYMS_PATH) -> None:
        self.path = path
        self._data: bytes | None = None

    @property
    def data(self) -> bytes:
        """The whole file; OSError if unreadable."""
        if self._data is None:
            from btf.spec import read_file

            # A leading newline lets every line be found as "\n<addr> <type> <name>".
            self._data = b"\n" + read_file(self.path)
        return self._data

    def text_symbols(self, name_regex: bytes) -> dict[str, set[str]]:
        """Text (``t``/``T``) symbols whose name fully matches ``name_regex``
        (a bytes regex without whitespace wildcards), by module; the kernel
        proper is ``vmlinux``."""
        rx = re.compile(rb" [tT] (" + name_regex + rb")(?:\t\[([^\]\n]+)\])?\n")
        found: dict[str, set[str]] = {}
        for m in rx.finditer(self.data):  # not findall: 100k tuples at once for 'kfunc:*'
            name, module = m.groups()
            found.setdefault(module.decode() if module else VMLINUX, set()).add(name.decode())
        return found

    def has_text_symbol(self, name: str) -> bool:
        """Whether the kernel proper or a module has a function called ``name``."""
        return re.search(rb" [tT] " + re.escape(name.encode()) + rb"[\t\n]", self.data) is not None
