"""Errors in a script, reported in script terms: FILE:LINE:COL, the line, and a caret under the spot."""

from __future__ import annotations

from pycore.errors import FeatureMissing, PycoreError

__all__ = ["ScriptError", "CheckError", "ScriptFeatureMissing", "ProbeError", "close_matches"]


def close_matches(word: str, choices: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The "did you mean" candidates (difflib's); difflib is imported only when a
    mistake needs them, as it costs ~1.4 ms of every ``pycore trace`` start."""
    import difflib

    return difflib.get_close_matches(word, choices, n=n, cutoff=cutoff)


class ScriptError(PycoreError):
    """Something wrong with a script at a place in it (syntax, types, probes, the verifier's refusal).

    ``str()`` is one line (``FILE:LINE:COL: MESSAGE``); :meth:`format` adds
    the source line and a caret, as bpftrace prints its errors.
    """

    def __init__(self, message: str, line: int = 0, col: int = 0, filename: str = "", source: str = "",
                 width: int = 1) -> None:
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename or "stdin"
        self.source = source
        self.width = max(1, width)
        super().__init__(self._head())

    def _head(self) -> str:
        where = f"{self.filename}:{self.line}:{self.col}" if self.line else self.filename
        return f"{where}: error: {self.message}"

    def __str__(self) -> str:
        return self._head()

    def format(self) -> str:
        """The error with its source line and a caret (``^~~~``) under the spot."""
        lines = self.source.splitlines()
        if not self.line or self.line > len(lines):
            return self._head()
        text = lines[self.line - 1].expandtabs(1)
        caret = " " * max(0, self.col - 1) + "^" + "~" * (self.width - 1)
        return f"{self._head()}\n{text}\n{caret}"


class CheckError(ScriptError):
    """A script that parses but cannot run: unknown names, wrong types, a refused program."""


class MapNotTypedYet(CheckError):
    """A for loop over a map no statement checked so far assigns: the runtime checks that block
    again once the others have typed the script's maps (bpftrace types maps over the whole script)."""


class ScriptFeatureMissing(CheckError, FeatureMissing):
    """A probe the running kernel cannot attach (a kprobe without CONFIG_KPROBES...), at its place in
    the script: a :class:`~pycore.errors.FeatureMissing` that is also a :class:`ScriptError`."""

    def __init__(self, missing: FeatureMissing, line: int, col: int, filename: str, source: str) -> None:
        # ScriptError's fields without its __init__: FeatureMissing's takes (feature, advice)
        self.message = str(missing)
        self.line = line
        self.col = col
        self.filename = filename or "stdin"
        self.source = source
        self.width = 1
        PycoreError.__init__(self, self._head())


class ProbeError(PycoreError):
    """A probe that does not resolve on this system (no such function, tracepoint, binary, probe)."""


class NoMatch(ProbeError):
    """A probe that resolved to nothing: a wildcard that matches no function, tracepoint or probe here.
    ``kind`` is the probe's kind (``kprobe``, ``tracepoint``...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class MissingFunction(ProbeError):
    """A function a probe names that is not there: not in a uprobe's binary, not in the kernel's BTF for
    a kfunc. Among other attach points of its block, bpftrace 0.23.2's ``missing_probes`` decides
    (pycore.lang.config): an error, ``warning`` on stderr and the rest attached, or nothing said."""

    def __init__(self, message: str, warning: str) -> None:
        super().__init__(message)
        self.warning = warning
