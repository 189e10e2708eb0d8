"""Unique C names in a header, libbpf's way (``btf_dump_resolve_name``).

libbpf gives the second ``struct foo`` it prints the name ``foo___2``: a
name's suffix depends on the order in which the header mentions types, so
the header's text is made in the order it is written.
"""

from __future__ import annotations

from .columns import ENUM, FWD

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# what libbpf writes for old gcc's ``typedef void __gnuc_va_list``
GNUC_VA_LIST = "typedef __builtin_va_list __gnuc_va_list"


class Namer:
    """Unique C names, libbpf's way: one counter per namespace.

    Struct, union and enum tags share one namespace; typedefs and enum
    constants share the other.  A name is fixed the first time it is asked
    for, so the suffix follows the order in which the header mentions types.
    Forward declarations and empty enums keep their names as they are (they
    may stand for a definition printed elsewhere).
    """

    def __init__(self, name_of: Callable[[int], str], kinds: Sequence[int],
                 vlen: Callable[[int], int]) -> None:
        self._name_of = name_of
        self._kinds = kinds
        self._vlen = vlen
        self.type_counts: dict[str, int] = {}
        self.ident_counts: dict[str, int] = {}
        self._resolved: list[str | None] = [None] * len(kinds)  # by id: no int hashing

    def _resolve(self, type_id: int, counts: dict[str, int]) -> str:
        name = self._name_of(type_id)
        if not name:
            return ""
        k = self._kinds[type_id]
        if k == FWD or (k == ENUM and self._vlen(type_id) == 0):
            self._resolved[type_id] = name
            return name
        n = counts.get(name, 0) + 1
        counts[name] = n
        unique = name if n == 1 else f"{name}___{n}"
        self._resolved[type_id] = unique
        return unique

    def type_name(self, type_id: int) -> str:
        """A struct, union, enum or forward declaration's tag."""
        got = self._resolved[type_id]
        return got if got is not None else self._resolve(type_id, self.type_counts)

    def ident_name(self, type_id: int) -> str:
        """A typedef's name."""
        got = self._resolved[type_id]
        return got if got is not None else self._resolve(type_id, self.ident_counts)

    def enumerators(self, names: list[str]) -> list[str]:
        """One enum's constants, in order: counted each time an enum body is
        printed (an anonymous enum is printed at each use).  libbpf counts
        nameless constants too."""
        counts = self.ident_counts
        out = []
        for name in names:
            n = counts[name] = counts.get(name, 0) + 1
            out.append(name if n == 1 else f"{name}___{n}")
        return out
