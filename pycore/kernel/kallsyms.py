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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["KALLSYMS_PATH", "Kallsyms", "TextSymbols"]

KALLSYMS_PATH = "/proc/kallsyms"
VMLINUX = "vmlinux"


class Kallsyms:
    """The kernel's symbol table, read lazily; names only (addresses may be
    zeroed by kptr_restrict and are never needed for listing; see
    :class:`TextSymbols` for them)."""

    def __init__(self, path: str = KALLSYMS_PATH) -> None:
        self.path = path
        self._data: bytes | None = None

    @property
    def data(self) -> bytes:
        """The whole file; OSError if unreadable."""
        if self._data is None:
            from btf.spec import read_file

            # A leading newline lets every line be found as "\n<addr> <type> <name>".
            # (Read into place after it: b"\n" + data would copy 5 MB.)
            self._data = read_file(self.path, prefix=b"\n")
        return self._data

    def release(self) -> None:
        """Drop the file's contents (5 MB); the next use reads it again."""
        self._data = None

    def text_symbols(self, name_regex: bytes) -> dict[str, set[str]]:
        """Text (``t``/``T``) symbols whose name fully matches ``name_regex``
        (a bytes regex without whitespace wildcards), by module; the kernel
        proper is ``vmlinux``."""
        found: dict[str, set[str]] = {}
        for module, name in self.iter_text_symbols(name_regex):
            found.setdefault(module, set()).add(name)
        return found

    def iter_text_symbols(self, name_regex: bytes) -> Iterator[tuple[str, str]]:
        """(module, name) of each matching text symbol, in file order and
        with repeats, made one at a time (``kfunc:*`` matches 120k)."""
        rx = re.compile(rb" [tT] (" + name_regex + rb")(?:\t\[([^\]\n]+)\])?\n")
        for m in rx.finditer(self.data):  # not findall: 100k tuples at once for 'kfunc:*'
            name, module = m.groups()
            yield (module.decode() if module else VMLINUX), name.decode()

    def has_text_symbol(self, name: str) -> bool:
        """Whether the kernel proper or a module has a function called ``name``."""
        return re.search(rb" [tT] " + re.escape(name.encode()) + rb"[\t\n]", self.data) is not None

    def address(self, name: str) -> int | None:
        """The address of symbol ``name`` of any type (text, data, bss: what bpftrace's
        ``kaddr()`` takes), the first one listed; None when absent or hidden
        (kptr_restrict shows every address as zero)."""
        m = re.search(rb"\n([0-9a-f]+) [a-zA-Z] " + re.escape(name.encode()) + rb"[\t\n]", self.data)
        if m is None:
            return None
        return int(m.group(1), 16) or None


class TextSymbols:
    """Kernel text addresses to ``symbol+0xoff`` (where a drop or a call
    happened), from the text symbols' addresses, read on first use.  With
    kptr_restrict hiding them (all zero), addresses stay as hex."""

    def __init__(self, kallsyms: Kallsyms | None = None) -> None:
        self._kallsyms = kallsyms or Kallsyms()
        self._addrs: list[int] | None = None
        self._names: list[str] = []

    def _load(self) -> None:
        try:
            data = self._kallsyms.data
        except OSError:
            data = b""
        pairs = []
        for addr, name in re.findall(rb"\n([0-9a-f]+) [tT] (\S+)", data):
            a = int(addr, 16)
            if a:
                pairs.append((a, name.decode()))
        pairs.sort()
        self._kallsyms.release()   # the sorted columns are all that is needed now
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]

    def lookup(self, addr: int) -> tuple[str, int] | None:
        """(symbol, offset) of the text symbol ``addr`` falls in, or None."""
        import bisect

        if self._addrs is None:
            self._load()
        assert self._addrs is not None
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0 or not addr:
            return None
        return self._names[i], addr - self._addrs[i]

    def __call__(self, addr: int) -> str:
        found = self.lookup(addr)
        if found is None:
            return f"{addr:#x}"
        return f"{found[0]}+{found[1]:#x}"
