"""The BTF string table, read on demand.

Names are looked up by offset only when a type is decoded, so indexing a
126k-type vmlinux never decodes the 2 MB of names it carries.
"""

from __future__ import annotations

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

    @property
    def data(self) -> bytes:
        """This table's own bytes (not its base's): NUL-separated strings,
        the first at offset :attr:`start`."""
        return self._data

    @property
    def start(self) -> int:
        """The offset of this table's first byte: 0, or for split BTF the
        length of the base's table, which the offsets continue."""
        return self._start

    def lookup(self, offset: int) -> str:
        """The string at ``offset``; BtfError if it is out of range.  Kept
        for the next lookup (member names repeat across types)."""
        try:
            return self._cache[offset]
        except KeyError:
            pass
        if offset < self._start:
            return self._base.lookup(offset)  # type: ignore[union-attr]
        s = self._cache[offset] = self.get(offset)
        return s

    def get(self, offset: int) -> str:
        """The string at ``offset``, not kept: for walks over every function
        name, where a cache would only hold 50k strings until exit."""
        got = self._cache.get(offset)
        if got is not None:
            return got
        if offset < self._start:
            return self._base.get(offset)  # type: ignore[union-attr]
        local = offset - self._start
        data = self._data
        if local >= len(data):
            raise BtfError(f"string offset {offset} is past the string table ({len(self)} bytes)",
                           self._blob_offset)
        end = data.index(0, local)  # cannot fail: the table ends with NUL
        return data[local:end].decode("utf-8", "replace")

    def offsets_of(self, name: str, local: bool = False) -> list[int]:
        """Every offset whose string is exactly ``name``; ``local`` leaves out the base table."""
        found = self._base.offsets_of(name) if self._base is not None and not local else []
        needle = b"\x00" + name.encode() + b"\x00"
        data = self._data
        if not name:
            return found
        # The first string of a table starts at 0 with no NUL before it.
        if data.startswith(needle[1:]):
            found.append(self._start)
        pos = data.find(needle)
        while pos >= 0:
            found.append(self._start + pos + 1)
            pos = data.find(needle, pos + 1)
        return found

    def offsets_matching(self, pattern: bytes, local: bool = False) -> list[int]:
        """Offsets of whole strings that fully match a regular expression on bytes.

        The search runs in C over the raw table, anchored on the NUL that
        ends the previous string, and decodes nothing.
        """
        found = self._base.offsets_matching(pattern) if self._base is not None and not local else []
        if not pattern:
            return found
        import re  # 1.2 ms to import: only searches need it, listing one type does not

        rx = re.compile(b"\x00(?:" + pattern + b")(?=\x00)")
        start = self._start + 1
        # Prefix a NUL so a name at the very start of the table matches too.
        data = self._data if self._data[:1] == b"\x00" else b"\x00" + self._data
        if data is not self._data:
            start -= 1
        found.extend(start + m.start() for m in rx.finditer(data))
        return found
