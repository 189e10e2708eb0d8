"""Unique C names in a header, libbpf's way, fixed now or after the text is made.

libbpf gives the second ``struct foo`` it prints the name ``foo___2``: a
name's suffix depends on the order in which the header mentions types.
:class:`Namer` hands names out in that order, as the text is produced.
:class:`DeferredNames` lets text be produced in any order (in another
process, say): a name that can only ever mean one thing is final at once,
and the few that are shared get a placeholder which :func:`resolve` turns
into the real name by running a :class:`Namer` over the placeholders in
the order the finished header has them.

Placeholders are ``\\x01`` tag argument ``\\x02``; they are only used when no
BTF string contains either byte (:func:`placeholders_safe`).
"""

from __future__ import annotations

from collections import Counter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

_STRUCT, _UNION, _ENUM, _FWD, _TYPEDEF, _ENUM64 = 4, 5, 6, 7, 8, 19

_OPEN, _CLOSE = "\x01", "\x02"
PLACEHOLDER_START = _OPEN  # text without it needs no resolve()

GNUC_VA_LIST = "typedef __builtin_va_list __gnuc_va_list"


def va_list_placeholder(type_id: int) -> str:
    """A ``__gnuc_va_list`` typedef to void whose name is not final yet:
    libbpf rewrites it only if the name stays unsuffixed."""
    return f"{_OPEN}v{type_id}{_CLOSE}"


class Namer:
    """Unique C names, libbpf's way: one counter per namespace.

    Struct, union and enum tags share one namespace; typedefs and enum
    constants share the other.  A name is fixed the first time it is asked
    for, so the suffix follows the order in which the header mentions types.
    Forward declarations and empty enums keep their names as they are (they
    may stand for a definition printed elsewhere).
    """

    deferred = False

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
        if k == _FWD or (k == _ENUM and self._vlen(type_id) == 0):
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

    def claim(self, type_id: int) -> str:
        """Fix a typedef's name before the text that precedes it is made
        (libbpf names a typedef before printing the type it aliases)."""
        self.ident_name(type_id)
        return ""

    def enumerator(self, name: str) -> str:
        """An enum constant: counted each time an enum body is printed."""
        counts = self.ident_counts
        n = counts.get(name, 0) + 1
        counts[name] = n
        return name if n == 1 else f"{name}___{n}"

    def enumerators(self, names: list[str], twice: bool = False) -> list[str]:
        """One enum's constants, in order (``twice`` matters only to
        :class:`DeferredNames`)."""
        counts = self.ident_counts
        out = []
        for name in names:
            n = counts[name] = counts.get(name, 0) + 1
            out.append(name if n == 1 else f"{name}___{n}")
        return out


class DeferredNames:
    """Names for text made out of order: final where only one type (or one
    printed enum constant) can ever carry the name, a placeholder otherwise.

    ``enumerators`` yields every enum constant's name once per enum.  An
    enum printed inside a declaration (an anonymous one, printed wherever it
    is used) may repeat its constants, so they are always placeholders.
    """

    deferred = True

    def __init__(self, name_of: Callable[[int], str], kinds: Sequence[int],
                 vlen: Callable[[int], int], shared_tags: set[str], shared_idents: set[str]) -> None:
        """``shared_tags`` and ``shared_idents``: the names that occur more
        than once in each namespace (:func:`repeated`)."""
        self._name_of = name_of
        self._kinds = kinds
        self._vlen = vlen
        self.shared_tags = shared_tags
        self.shared_idents = shared_idents
        self._resolved: list[str | None] = [None] * len(kinds)

    def _counted(self, type_id: int) -> bool:
        k = self._kinds[type_id]
        return not (k == _FWD or (k == _ENUM and self._vlen(type_id) == 0))

    def type_name(self, type_id: int) -> str:
        got = self._resolved[type_id]
        if got is None:
            got = self._name_of(type_id)
            if got in self.shared_tags and self._counted(type_id):
                got = f"{_OPEN}t{type_id}{_CLOSE}"
            self._resolved[type_id] = got
        return got

    def ident_name(self, type_id: int) -> str:
        got = self._resolved[type_id]
        if got is None:
            got = self._name_of(type_id)
            if got in self.shared_idents:
                got = f"{_OPEN}i{type_id}{_CLOSE}"
            self._resolved[type_id] = got
        return got

    def claim(self, type_id: int) -> str:
        """A mark where an ordered namer would fix the typedef's name."""
        name = self.ident_name(type_id)
        return f"{_OPEN}c{type_id}{_CLOSE}" if name.startswith(_OPEN) else ""

    def enumerator(self, name: str) -> str:
        # libbpf counts nameless constants too (a nameless typedef it does
        # not), so the empty name, which :func:`repeated` leaves out, waits
        return f"{_OPEN}e{name}{_CLOSE}" if name in self.shared_idents or not name else name

    def enumerators(self, names: list[str], twice: bool = False) -> list[str]:
        """One enum's constants; ``twice`` when the enum is printed more
        than once (then none is final).  Most enums share no constant name:
        one set test in C for all of them."""
        if not twice:
            if self.shared_idents.isdisjoint(names) and "" not in names:
                return names
            return list(map(self.enumerator, names))
        return [f"{_OPEN}e{name}{_CLOSE}" for name in names]


def repeated(names: Iterable[str]) -> set[str]:
    """Names that occur more than once (the empty name is never shared):
    over the tags of every struct, union and non-empty enum, and over every
    typedef's name and enum constant, what :class:`DeferredNames` needs."""
    shared = {name for name, n in Counter(names).items() if n > 1}
    shared.discard("")
    return shared


def placeholders_safe(strings: bytes) -> bool:
    """Whether no string can be mistaken for a placeholder's delimiters."""
    return b"\x01" not in strings and b"\x02" not in strings


def resolve(text: str, namer: Namer) -> str:
    """Replace :class:`DeferredNames` placeholders with the names ``namer``
    gives when asked in the order the placeholders appear in ``text``."""
    pieces = text.split(_OPEN)
    if len(pieces) == 1:
        return text
    out = [pieces[0]]
    append = out.append
    for piece in pieces[1:]:
        end = piece.index(_CLOSE)
        tag, arg = piece[0], piece[1:end]
        if tag == "t":
            append(namer.type_name(int(arg)))
        elif tag == "i":
            append(namer.ident_name(int(arg)))
        elif tag == "c":
            namer.claim(int(arg))
        elif tag == "v":
            name = namer.ident_name(int(arg))
            append(GNUC_VA_LIST if name == "__gnuc_va_list" else "typedef void " + name)
        else:
            append(namer.enumerator(arg))
        append(piece[end + 1:])
    return "".join(out)
