"""bpftrace features newer than what ``pycore trace`` has, named where a script using one fails.

pycore trace runs bpftrace 0.17's language, with parts of later ones (docs/trace.md says which). A
script written for a newer bpftrace fails to parse or check here; instead of the parser's "unexpected
'='" or the checker's "unknown function", the error names the feature and the bpftrace version that
added it (its CHANGELOG.md). Nothing here runs unless a script has already failed: the parser, the
probe resolver and the checker call these only on their way to an error.
"""

from __future__ import annotations

import re

__all__ = ["syntax_feature", "function_feature", "identifier_feature", "probe_feature", "message"]

_KW = r"(?<![\w$@.])"   # a keyword: not part of a name, a $variable, a @map or a field

#: A feature seen in the text, (pattern, what it is, the bpftrace version that added it). The patterns
#: run over the script with its strings and comments blanked; the first that matches at or before the
#: place the parser stopped, nearest that place, names the feature.
_SYNTAX: list[tuple[re.Pattern[str], str, str]] = [(re.compile(p, re.M), what, version) for p, what, version in [
]]

#: Functions of later bpftraces: name -> (what it is, version).
_FUNCTIONS: dict[str, tuple[str, str]] = {
    "dw_ustack": ("dw_ustack()", "0.26"),
    # the standard library's compile-time helpers and the type queries they use (0.25)
}

#: Builtins called with arguments that pycore does not take yet (any not named here: 0.24).
_CALLED_BUILTINS: dict[str, tuple[str, str]] = {
}

#: Identifiers of later bpftraces: name -> (what it is, version).
_IDENTIFIERS: dict[str, tuple[str, str]] = {
}

_PROBE_KINDS_LATER: dict[str, tuple[str, str]] = {
    "bench": ("BENCH probes", "0.24"),
}


def message(what: str, version: str) -> str:
    """The error's text: the feature, the bpftrace that added it, and what pycore trace runs."""
    return (f"{what}: new in bpftrace {version}, not in pycore trace yet (it runs bpftrace 0.17's language "
            f"and the later parts docs/trace.md lists)")


_BLANK = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*[\s\S]*?\*/')


def _blanked(text: str) -> str:
    """``text`` with its strings and comments turned into spaces (newlines kept): offsets unchanged."""
    return _BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def syntax_feature(text: str, pos: int) -> tuple[str, int] | None:
    """The newer syntax the parser most likely stopped on at offset ``pos``: (message, its offset)."""
    plain = _blanked(text)
    best: tuple[int, str, str] | None = None
    for pattern, what, version in _SYNTAX:
        for m in pattern.finditer(plain, 0, len(plain)):
            # the feature's place: the group named "at", else the match without its leading blanks
            start = m.start("at") if "at" in pattern.groupindex else m.start() + len(m.group()) - len(m.group().lstrip())
            if start > pos:
                break
            if pos - start > 200 or plain.count("\n", start, pos) > 3:   # too far back to be the cause
                continue
            if best is None or start > best[0]:
                best = (start, what, version)
    if best is None:
        return None
    return message(best[1], best[2]), best[0]


def function_feature(name: str, builtins: bool) -> str | None:
    """The message for an unknown function ``name()`` that a later bpftrace has (``builtins``: the
    name is one of pycore's builtins, called with parentheses)."""
    if builtins:
        what, version = _CALLED_BUILTINS.get(name, (f"{name}() (a builtin called like a function)", "0.24"))
        return message(what, version)
    if name in _FUNCTIONS:
        return message(*_FUNCTIONS[name])
    return None


def identifier_feature(name: str) -> str | None:
    """The message for an unknown identifier that a later bpftrace has as a builtin."""
    if name in _IDENTIFIERS:
        return message(*_IDENTIFIERS[name])
    return None


def probe_feature(kind: str, known: dict[str, tuple[int, int]], aliases: dict[str, str]) -> str | None:
    """The message for an unknown probe type that a later bpftrace accepts: BENCH, test."""
    low = kind.lower()
    if low in _PROBE_KINDS_LATER:
        return message(*_PROBE_KINDS_LATER[low])
    return None
