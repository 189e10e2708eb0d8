"""The raw columns the dump reads, keyed by type id (0 = void).

The dump works on the type words rather than on :mod:`btf.types` objects: a
vmlinux has 126k types and most of them (functions, variables) never appear
in the header, so decoding them would only cost time.  What it reads comes
from the spec's public columns (:attr:`btf.spec.Spec.words` and the name,
info and size-or-type columns), put end to end for split BTF, whose ids
continue its base's.
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate, repeat

from ..kinds import Kind

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..spec import Spec
    from ..strings import StringTable

# Kind numbers as plain ints: IntEnum comparisons cost a lot in the hot loops.
(INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR,
 DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64) = map(int, (
    Kind.INT, Kind.PTR, Kind.ARRAY, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.FWD, Kind.TYPEDEF,
    Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.FUNC, Kind.FUNC_PROTO, Kind.VAR, Kind.DATASEC,
    Kind.FLOAT, Kind.DECL_TAG, Kind.TYPE_TAG, Kind.ENUM64))
MODS = frozenset((VOLATILE, CONST, RESTRICT, TYPE_TAG))  # what qualifies a type without changing it


class Strings(dict):
    """Offset -> string (a plain dict hit is several times cheaper than a
    method call per member name).

    A miss reads the table in bulk, from where the last bulk read stopped to
    a little past the offset asked for: splitting in C beats one lookup per
    name, and a kernel's table has the names a header prints in its first
    half, before the 56k function names.
    """

    _AHEAD = 1 << 18  # bytes read past a miss

    def __init__(self, table: StringTable) -> None:
        super().__init__()
        self._lookup = table.lookup
        self._data = data = table.data
        self._start = table.start
        # local offset up to which every string is in the dict (only ASCII
        # tables are split in bulk: offsets count bytes, str indexes count
        # characters)
        self._read = 0 if data.isascii() else len(data)
        self[0] = ""

    def __missing__(self, off: int) -> str:
        local = off - self._start
        if self._read <= local < len(self._data):
            self._read_past(local)
            s = self.get(off)
            if s is not None:
                return s
        s = self[off] = self._lookup(off)  # mid-string offsets, base tables, errors
        return s

    def _read_past(self, local: int) -> None:
        data, begin = self._data, self._read
        end = data.find(0, min(local + self._AHEAD, len(data) - 1)) + 1  # the table ends with NUL
        with memoryview(data) as view:  # decoded from the table, not from a copy of it
            parts = str(view[begin:end], "ascii").split("\0")
        parts.pop()  # after the chunk's last NUL
        # string i starts after strings 0..i-1 and their i NULs
        self.update(zip(accumulate(map((1).__add__, map(len, parts)), initial=self._start + begin), parts))
        self._read = end


def _kind_bytes(infos: array) -> bytes:
    """Each id's kind as one byte, sliced out of the info words in C."""
    raw = infos.tobytes()
    high = raw[3::4] if sys.byteorder == "little" else raw[0::4]
    return high.translate(bytes(b & 0x1F for b in range(256)))


class Columns:
    """A spec's types as columns by id, its base's first for split BTF.

    ``words`` holds every record; ``offsets[id]`` is where one starts in
    it; ``names_off``, ``infos`` and ``st`` are each record's first three
    words (name offset, info, size or referenced type); ``kinds`` the kind
    of each as a byte (indexing bytes gives ints).  For plain vmlinux the
    words and offsets are the spec's own arrays, not copies.
    """

    def __init__(self, spec: Spec) -> None:
        chain = []
        s: Spec | None = spec
        while s is not None:
            chain.append(s)
            s = s.base
        chain.reverse()
        offsets, names, infos, sizes = array("I", [0]), array("I", [0]), array("I", [0]), array("I", [0])
        for s in chain:
            names.extend(array("I", s.name_column()))
            infos.extend(array("I", s.info_column()))
            sizes.extend(array("I", s.size_column()))
        if len(chain) == 1:
            words: Sequence[int] = spec.words
            offsets.extend(spec.offsets)
        else:
            words = flat = array("I")
            for s in chain:
                shift = len(flat)
                flat.extend(s.words)
                offsets.extend(o + shift for o in s.offsets)
        self.words = words
        self.offsets = offsets
        self.names_off = names
        self.infos = infos
        self.st = sizes                   # size or referenced type, by id
        self.n = len(offsets)
        self.kinds = _kind_bytes(infos)
        self.strings = Strings(spec.strings)
        self.ptr_size = self._pointer_size()

    def ids_of(self, wanted: frozenset[int] | set[int]) -> list[int]:
        """Ids whose kind is in ``wanted``, in id order: each one is where the
        gap before it ends, if the kinds are split at the wanted ones (in C,
        with no int made for the ids that are not wanted)."""
        gaps = self.kinds.translate(bytes(k in wanted for k in range(256))).split(b"\x01")
        gaps.pop()  # after the last one
        ids = accumulate(map((1).__add__, map(len, gaps)), initial=-1)
        next(ids)
        return list(ids)

    def _pointer_size(self) -> int:
        """libbpf guesses it from the size of ``long``; 8 when there is none."""
        longs = {"long", "long int", "unsigned long", "long unsigned int"}
        for type_id in self.ids_of({INT}):
            if self.name_of(type_id) in longs:
                return self.st[type_id]
        return 8

    def name_of(self, type_id: int) -> str:
        return self.strings[self.names_off[type_id]]

    def vlen(self, type_id: int) -> int:
        return self.infos[type_id] & 0xFFFF

    def member_columns(self, type_id: int) -> tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int] | None]:
        """A struct or union's members as columns: name offsets, types, bit
        offsets, and bitfield sizes (None when the record has no kflag, so
        no member is a bitfield).  Slices of the word array, made in C."""
        p = self.offsets[type_id] + 3
        info = self.infos[type_id]
        end = p + 3 * (info & 0xFFFF)
        words = self.words
        offs = words[p + 2:end:3]
        if info >> 31:
            return words[p:end:3], words[p + 1:end:3], [o & 0xFFFFFF for o in offs], [o >> 24 for o in offs]
        return words[p:end:3], words[p + 1:end:3], offs, None

    def members(self, type_id: int) -> list[tuple[int, int, int, int]]:
        """(name offset, type, bit offset, bitfield size) of each member."""
        names, types, offs, bits = self.member_columns(type_id)
        return list(zip(names, types, offs, repeat(0) if bits is None else bits))

    def member_types(self, type_id: int) -> Sequence[int]:
        p = self.offsets[type_id] + 4
        return self.words[p:p + 3 * (self.infos[type_id] & 0xFFFF):3]

    def params(self, type_id: int) -> list[tuple[int, int]]:
        """(name offset, type) of each parameter of a FUNC_PROTO."""
        p = self.offsets[type_id] + 3
        w = self.words[p:p + 2 * (self.infos[type_id] & 0xFFFF)]
        return list(zip(w[0::2], w[1::2]))

    def param_types(self, type_id: int) -> Sequence[int]:
        p = self.offsets[type_id] + 4
        return self.words[p:p + 2 * (self.infos[type_id] & 0xFFFF):2]

    def array_elem(self, type_id: int) -> int:
        return self.words[self.offsets[type_id] + 3]

    def array_index(self, type_id: int) -> int:
        return self.words[self.offsets[type_id] + 4]

    def array_len(self, type_id: int) -> int:
        return self.words[self.offsets[type_id] + 5]
