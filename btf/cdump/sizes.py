"""Sizes, alignments and packing by type id, memoised: libbpf's
``btf__resolve_size`` and ``btf__align_of``, and btf_dump's test for
``__attribute__((packed))``.

The struct bodies of :mod:`btf.cdump.render` read these for every member
(padding, packing), and lay out most records themselves as they go: see
:meth:`btf.cdump.render.Renderer.struct_def`.
"""

from __future__ import annotations

from itertools import repeat

from ..errors import BtfError
from .columns import (ARRAY, CONST, DATASEC, ENUM, ENUM64, FLOAT, INT, PTR, RESTRICT, STRUCT, TYPE_TAG,
                      TYPEDEF, UNION, VAR, VOLATILE)

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .columns import Columns

_SIZED = frozenset((INT, ENUM, ENUM64, STRUCT, UNION, DATASEC, FLOAT))
_SIZE_OF_TARGET = frozenset((TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG, VAR))


class Sizes:
    """The memos, and the walks that fill them.

    Those read once per member are lists indexed by type id: the ids come
    out of arrays as new int objects, and a dict lookup would hash and
    compare them (a cache miss per member on a big table).  Those read once
    per record are dicts: a list of 126k slots is 1 MB of fresh memory,
    2.5 ms to fault in on a VM.
    """

    def __init__(self, cols: Columns) -> None:
        self.cols = cols
        n = cols.n
        self.size_cache: list[int | None] = [None] * n
        self.align_cache: list[int | None] = [None] * n
        self.align_cache[0] = 0
        self.packed_cache: dict[int, bool] = {}
        self.members_cache: dict[int, tuple] = {}

    def member_columns(self, type_id: int, keep: bool = True) -> tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int] | None]:
        """:meth:`Columns.member_columns`, kept (unless not ``keep``) from
        the layout to the body, which takes them out: 11k records' columns
        kept to the end were 1.4k more pages to fault in."""
        got = self.members_cache.get(type_id)
        if got is not None:
            return got
        got = self.cols.member_columns(type_id)
        if keep:
            self.members_cache[type_id] = got
        return got

    def sizeof(self, type_id: int) -> int:
        """libbpf's btf__resolve_size, with 0 for what has no size."""
        got = self.size_cache[type_id]
        if got is not None:
            return got
        cols = self.cols
        kinds, st = cols.kinds, cols.st
        nelems = 1
        t = type_id
        for _ in range(64):
            k = kinds[t]
            if k in _SIZED:
                size = st[t] * nelems
                break
            if k == PTR:
                size = cols.ptr_size * nelems
                break
            if k in _SIZE_OF_TARGET:
                t = st[t]
            elif k == ARRAY:
                nelems *= cols.array_len(t)
                t = cols.array_elem(t)
            else:
                size = 0
                break
        else:
            raise BtfError(f"type {type_id}: reference chain too long (cycle?)")
        self.size_cache[type_id] = size
        return size

    def alignof(self, type_id: int, depth: int = 0) -> int:
        """libbpf's btf__align_of: natural alignment, 1 for packed records."""
        got = self.align_cache[type_id]
        if got is not None:
            return got
        if depth > 64:
            raise BtfError(f"type {type_id}: types nest too deep (cycle?)")
        cols = self.cols
        k = cols.kinds[type_id]
        if k in (INT, ENUM, ENUM64, FLOAT):
            align = min(cols.ptr_size, cols.st[type_id])
        elif k == PTR:
            align = cols.ptr_size
        elif k in (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG):
            align = self.alignof(cols.st[type_id], depth + 1)
        elif k == ARRAY:
            align = self.alignof(cols.array_elem(type_id), depth + 1)
        elif k in (STRUCT, UNION):
            align = self._record_layout(type_id, depth)[0]
        else:
            align = 0
        self.align_cache[type_id] = align
        return align

    def _record_layout(self, type_id: int, depth: int = 0) -> tuple[int, bool]:
        """A struct or union's alignment, and whether it needs the packed attribute.

        Both come from the same test: a member off its natural alignment, or
        a size that is not a multiple of the alignment, means packed.
        """
        alignof, cache = self.alignof, self.align_cache
        best = 1
        irregular = False
        _, mtypes, moffs, bits = self.member_columns(type_id)
        for mtype, moff, mbits in zip(mtypes, moffs, repeat(0) if bits is None else bits):
            a = cache[mtype]
            if a is None:
                a = alignof(mtype, depth + 1)
            if a <= 0:
                return self._record_layout_slow(type_id)
            if a > best:
                best = a
            if not mbits and moff % (8 * a):
                irregular = True
        if self.cols.st[type_id] % best:
            irregular = True
        packed = irregular and self.cols.kinds[type_id] == STRUCT
        self.packed_cache[type_id] = packed
        return (1 if irregular else best), packed

    def _record_layout_slow(self, type_id: int) -> tuple[int, bool]:
        """libbpf's exact answers when a member has no alignment (bad BTF)."""
        members = self.cols.members(type_id)
        align = 1
        for _, mtype, moff, mbits in members:
            a = self.alignof(mtype)
            if a <= 0:
                align = a
                break
            align = max(align, a)
            if not mbits and moff % (8 * a):
                align = 1
                break
        else:
            if self.cols.st[type_id] % align:
                align = 1
        packed = False
        if self.cols.kinds[type_id] == STRUCT:
            best = 1
            for _, mtype, moff, mbits in members:
                a = self.alignof(mtype)
                if a and not mbits and moff % (8 * a):
                    packed = True
                    break
                best = max(best, a)
            else:
                packed = self.cols.st[type_id] % best != 0
        self.packed_cache[type_id] = packed
        return align, packed

    def is_packed(self, type_id: int) -> bool:
        """Whether a struct's BTF layout needs ``__attribute__((packed))``."""
        got = self.packed_cache.get(type_id)
        if got is None:
            self.alignof(type_id)
            got = self.packed_cache.get(type_id)
            if got is None:
                got = self._record_layout(type_id)[1]
        return got
