"""The BTF string table, read on demand.

Names are looked up by offset only when a type is decoded, so indexing a
126k-type vmlinux never decodes the 2 MB of names it carries.
"""

from __future__ import annotations

import re

from .errors import BtfError


class StringTable:
    """NUL-separated strings; offsets continue from ``base`` for split BTF."""

    __slots__ = ("_data", "_base", "_start", "_cache", "_blob_offset")

    def __init__(self, data: bytes, base: StringTable | None = None, blob_offset: int = 0) -> None:
        self._data = data
        self._base = base
        self._start = len(base) if base is not None else 0
        self._cache: dict[int, str] = {}
        self._blob_offset = blob_offset
        if data and data[-1] != 0:
            raise BtfError("string section does not end with NUL", blob_offset + len(data) - 1)
        if base is None and data and data[0] != 0:
            raise BtfError("string section does not start with an empty string", blob_offset)

    def __len__(self) -> int:
        return self._start + len(self._data)

    def lookup(self, offset: int) -> str:
        """The string at ``offset``; BtfError if it is out of range."""
        try:
            return self._cache[offset]
        except KeyError:
            pass
        if offset < self._start:
            return self._base.lookup(offset)  # type: ignore[union-attr]
        local = offset - self._start
        data = self._data
        if local >= len(data):
            raise BtfError(f"string offset {offset} is past the string table ({len(self)} bytes)",
                           self._blob_offset)
        end = data.index(0, local)  # cannot fail: the table ends with NUL
        s = data[local:end].decode("utf-8", "replace")
        self._cache[offset] = s
        return s

    def offsets_of(self, name: str) -> list[int]:
        """Every offset whose string is exactly ``name`` (base table included)."""
        return self.offsets_matching(re.escape(name.encode()))

    def offsets_matching(self, pattern: bytes | re.Pattern[bytes]) -> list[int]:
        """Offsets of whole strings that fully match a regular expression on bytes.

        The search runs in C over the raw table: no string is decoded.
        """
        if isinstance(pattern, re.Pattern):
            pattern = pattern.pattern
        rx = re.compile(rb"(?<![^\x00])(?:" + pattern + rb")(?=\x00)")
        found = self._base.offsets_matching(pattern) if self._base is not None else []
        if pattern == b"":
            return found
        start = self._start
        found.extend(start + m.start() for m in rx.finditer(self._data))
        return found
