"""Probe patterns: what a user may type after ``pycore list`` (and later ``run``).

The syntax follows bpftrace so that users and agents can carry their habits
over: ``kfunc:vfs_*``, ``kfunc:vmlinux:vfs_write``, ``tracepoint:sched:*``,
``rawtracepoint:sched_switch``, ``struct dentry``.  ``*`` and ``?`` are
wildcards anywhere, including in the probe type (``k*:vfs_read``).

Parsing is separate from listing so that it can be tested (and fuzzed) on
its own: :func:`parse_pattern` raises :class:`PatternError` and nothing else.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from pycore.errors import PycoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Collection

    Available = Callable[[], Collection[str]]

__all__ = [
    "PROBE_KINDS", "TYPE_KINDS", "USER_KINDS", "ALIASES", "PROCESS_EXE", "PatternError", "ProbePattern",
    "parse_pattern", "all_patterns", "process_patterns", "glob_to_regex", "has_wildcard",
]

# Canonical probe types, in listing order, and the types' keywords.
PROBE_KINDS = ("kfunc", "kretfunc", "kprobe", "kretprobe", "rawtracepoint", "tracepoint", "iter", "software",
               "hardware")
TYPE_KINDS = ("struct", "union", "enum", "typedef")
USER_KINDS = ("usdt", "uprobe", "uretprobe")
ALL = frozenset(PROBE_KINDS + USER_KINDS)
# ``uprobe:*`` with -p PID: the functions of the process's executable (as bpftrace -l -p lists
# them); a module no typed pattern can produce (a NUL cannot be in argv)
PROCESS_EXE = "\0exe"

# Other spellings (libbpf section names and bpftrace's short forms).
ALIASES = {
    "fentry": "kfunc", "f": "kfunc",
    "fexit": "kretfunc", "fr": "kretfunc",
    "k": "kprobe", "kr": "kretprobe",
    "t": "tracepoint",
    "rt": "rawtracepoint", "raw_tracepoint": "rawtracepoint", "raw_tp": "rawtracepoint",
    "tp_btf": "rawtracepoint",
    "tp": "tracepoint",
    "it": "iter", "s": "software", "h": "hardware",
}

# Probe types whose target may be prefixed by a module: kfunc:MODULE:FUNC.
_MODULE_KINDS = ("kfunc", "kretfunc", "kprobe", "kretprobe", "rawtracepoint")

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.*?\-]+")
_KIND_CHARS = re.compile(r"[A-Za-z_*?]+")
MAX_PATTERN_LEN = 4096


class PatternError(PycoreError, ValueError):
    """A pattern that cannot name any probe or type: the CLI exits 2."""


class ProbePattern:
    """One parsed pattern.

    ``kind`` is canonical (``kfunc``, ``tracepoint``, ``struct``, ...).
    ``module`` is a glob over module names (``vmlinux`` for the kernel) or
    None for "any".  ``target`` is a glob: a function or tracepoint name, a
    type name, or for tracepoints ``CATEGORY:NAME`` (``*`` may span the
    colon there, as in bpftrace's ``tracepoint:sched*``).
    """

    __slots__ = ("kind", "target", "module", "label")

    def __init__(self, kind: str, target: str, module: str | None = None, label: str | None = None) -> None:
        self.kind = kind
        self.target = target
        self.module = module
        self.label = label or kind      # the name listed: fentry/fexit when so written (bpftrace 0.20+)

    def _key(self) -> tuple[str, str, str | None]:
        return (self.kind, self.target, self.module)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProbePattern) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        module = f", module={self.module!r}" if self.module is not None else ""
        return f"ProbePattern({self.kind!r}, {self.target!r}{module})"

    @property
    def is_type(self) -> bool:
        return self.kind in TYPE_KINDS

    def matches(self, name: str) -> bool:
        """Whether ``name`` (a function, ``CAT:NAME``, or a type name) matches."""
        return fnmatchcase(name, self.target)

    def matches_module(self, module: str) -> bool:
        return self.module is None or fnmatchcase(module, self.module)

    def name_regex(self) -> bytes:
        """``target`` as a bytes regex for :meth:`btf.Spec.ids_matching`,
        whose wildcards never cross a NUL (one BTF string)."""
        return glob_to_regex(self.target, rb"[^\x00]")


def has_wildcard(text: str) -> bool:
    return "*" in text or "?" in text


def glob_to_regex(glob: str, any_char: bytes = rb"[^\x00]") -> bytes:
    """A bytes regex for a ``*``/``?`` glob; ``any_char`` is what one
    wildcard character may match (never a string separator)."""
    out = []
    for part in re.split(r"([*?])", glob):
        if part == "*":
            out.append(any_char + b"*")
        elif part == "?":
            out.append(any_char)
        elif part:
            out.append(re.escape(part.encode()))
    return b"".join(out)


def all_patterns() -> list[ProbePattern]:
    """What ``pycore list`` with no pattern lists: every probe of every type."""
    return [ProbePattern(kind, "*") for kind in PROBE_KINDS]


def process_patterns() -> list[ProbePattern]:
    """What ``pycore list -p PID`` with no pattern lists, as ``bpftrace -l -p PID``: the functions
    of the process's executable, then the USDT probes of every object it maps."""
    return [ProbePattern("uprobe", "*", PROCESS_EXE), ProbePattern("usdt", "*:*", "")]


def _check_name(part: str, what: str, text: str) -> None:
    if not part:
        raise PatternError(f"{text!r}: empty {what}")
    if not _NAME_CHARS.fullmatch(part):
        bad = sorted({c for c in part if not _NAME_CHARS.fullmatch(c)})
        raise PatternError(f"{text!r}: bad character{'s' if len(bad) > 1 else ''} "
                           f"{' '.join(repr(c) for c in bad)} in {what}")


def _probe_kinds(spelled: str, text: str, available: Available | None) -> list[str]:
    if not _KIND_CHARS.fullmatch(spelled):
        raise PatternError(f"{text!r}: bad probe type {spelled!r}")
    if has_wildcard(spelled):
        kinds = [k for k in PROBE_KINDS if fnmatchcase(k, spelled)]
        if not kinds:
            raise PatternError(f"{text!r}: no probe type matches {spelled!r}")
        return kinds
    kind = ALIASES.get(spelled, spelled)
    if kind not in PROBE_KINDS:
        have = _have(available)
        known = ", ".join([k for k in PROBE_KINDS + USER_KINDS if k in have] + list(TYPE_KINDS))
        where = "" if available is None else " on this kernel"
        raise PatternError(f"{text!r}: unknown probe type {spelled!r} (known{where}: {known})")
    return [kind]


def _have(available: Available | None) -> Collection[str]:
    """The probe types to suggest: this kernel's (``available``, asked only when a refusal is
    worded: it loads trial programs) or, without it, every type."""
    return ALL if available is None else set(available())


def _no_probe_type(stripped: str, text: str, available: Available | None) -> PatternError:
    """A pattern without a probe type: a file suggests its USDT probes and functions; a name, the
    kinds of kernel probe this kernel has."""
    path, _, func = stripped.partition(":")
    if "/" in path:
        return PatternError(f"{text!r}: no probe type; for a file write usdt:{path} (its USDT probes) "
                            f"or uprobe:{path}:{func or '*'} (its functions)")
    have = _have(available)
    spelled = {"kfunc": f"kfunc:{stripped}", "kprobe": f"kprobe:{stripped}",
               "tracepoint": f"tracepoint:*:{stripped}", "rawtracepoint": f"rawtracepoint:{stripped}"}
    ways = [way for kind, way in spelled.items() if kind in have or kind == "tracepoint"][:2]
    return PatternError(f"{text!r}: no probe type; write TYPE:NAME, e.g. {' or '.join(ways)}")


def parse_pattern(text: str, available: Available | None = None) -> list[ProbePattern]:
    """Parse one ``pycore list`` pattern into one pattern per probe type.

    A wildcard probe type (``k*:vfs_read``) expands to several.  Raises
    :class:`PatternError`, and only that, for anything unusable; ``available`` gives the probe
    types this kernel has, for a refusal to suggest only those (every type without it).
    """
    if not isinstance(text, str):
        raise PatternError(f"pattern must be a string, not {type(text).__name__}")
    if len(text) > MAX_PATTERN_LEN:
        raise PatternError(f"pattern is {len(text)} characters long (at most {MAX_PATTERN_LEN})")
    stripped = text.strip()
    if not stripped:
        raise PatternError("empty pattern")

    words = stripped.split()
    if words[0] in TYPE_KINDS:
        if len(words) != 2:
            raise PatternError(f"{text!r}: expected '{words[0]} NAME'")
        _check_name(words[1], f"{words[0]} name", text)
        if "-" in words[1] or "." in words[1]:
            raise PatternError(f"{text!r}: {words[1]!r} is not a C identifier")
        return [ProbePattern(words[0], words[1])]
    if len(words) != 1:
        raise PatternError(f"{text!r}: spaces are only allowed in 'struct NAME', 'union NAME', "
                           "'enum NAME' and 'typedef NAME'")

    user = _user_pattern(stripped, text)
    if user is not None:
        return [user]
    parts = stripped.split(":")
    if len(parts) == 1 or "/" in parts[0]:
        raise _no_probe_type(stripped, text, available)
    kinds = _probe_kinds(parts[0], text, available)
    rest = parts[1:]
    for part in rest:
        _check_name(part, "probe name", text)
    if len(kinds) == 1:
        found = _for_kind(kinds[0], rest, text)
        if kinds[0] in ("kfunc", "kretfunc") and parts[0] not in ("kfunc", "kretfunc"):
            found.label = {"kfunc": "fentry", "kretfunc": "fexit"}[kinds[0]]    # bpftrace 0.20+'s names
        return [found]
    found = []
    for kind in kinds:  # a wildcard type keeps the kinds this shape fits
        try:
            found.append(_for_kind(kind, rest, text))
        except PatternError:
            pass
    if not found:
        raise PatternError(f"{text!r}: no probe type {parts[0]!r} takes {len(rest)} name parts")
    return found


def _user_pattern(stripped: str, text: str) -> ProbePattern | None:
    """``usdt:PATH[:PROVIDER]:NAME``, ``usdt:PATH``, ``usdt`` (with -p PID),
    ``uprobe:PATH:FUNC``, ``uprobe:*`` (with -p PID): ``module`` is the file path ("" for every
    object of the process given with -p, :data:`PROCESS_EXE` for its executable), ``target`` a
    glob (``PROVIDER:NAME`` for USDT)."""
    kind, _, rest = stripped.partition(":")
    kind = {"U": "usdt", "u": "uprobe", "ur": "uretprobe"}.get(kind, kind)
    if kind not in USER_KINDS:
        return None
    if not rest:
        return ProbePattern(kind, "*:*" if kind == "usdt" else "*", "")
    path, _, probe = rest.partition(":")
    if path and not path.startswith("/") and has_wildcard(path) and path != "*":
        raise PatternError(f"{text!r}: no wildcards in a file path")
    if path == "*":
        path = ""
    if kind == "usdt":
        parts = probe.split(":") if probe else ["*"]
        if len(parts) == 1:
            parts = ["*", parts[0]]
        if len(parts) != 2:
            raise PatternError(f"{text!r}: USDT probes are usdt:PATH:PROVIDER:NAME or usdt:PATH:NAME")
        for part in parts:
            _check_name(part, "USDT provider or name", text)
        return ProbePattern(kind, ":".join(parts), path)
    if rest == "*":
        return ProbePattern(kind, "*", PROCESS_EXE)
    return ProbePattern(kind, probe or "*", path)  # path "": every object of the -p process


def _for_kind(kind: str, rest: list[str], text: str) -> ProbePattern:
    if kind == "tracepoint":
        if len(rest) == 2:
            return ProbePattern(kind, f"{rest[0]}:{rest[1]}")
        if len(rest) == 1 and has_wildcard(rest[0]):
            return ProbePattern(kind, rest[0])  # tracepoint:sched* spans the colon
        raise PatternError(f"{text!r}: tracepoints are tracepoint:CATEGORY:NAME "
                           f"(e.g. tracepoint:*:{rest[-1]})")
    if len(rest) == 1:
        return ProbePattern(kind, rest[0])
    if len(rest) == 2 and kind in _MODULE_KINDS:
        return ProbePattern(kind, rest[1], module=rest[0])
    raise PatternError(f"{text!r}: {kind} probes are {kind}:NAME or {kind}:MODULE:NAME")
