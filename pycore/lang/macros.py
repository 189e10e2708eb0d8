"""Integer macros of a script's ``#define`` lines and ``#include``d headers (``AF_INET``).

bpftrace runs clang's preprocessor over a script's head, with
``BPFTRACE_HAVE_BTF`` defined on a kernel with BTF, and expands the macros it
finds in the probes. Its own tools rely on it: tcpconnect.bt takes
``AF_INET`` from ``<sys/socket.h>``. pycore has no compiler, so it runs pcpp
(a C99 preprocessor in Python) over the same lines, with the same system
include directories and the compiler's predefined names that glibc's
headers test. That costs about 150 ms for ``<sys/socket.h>``, so it is done
only when the checker meets a name that is neither a builtin nor an enum
constant in BTF.

A macro is taken when it expands to an integer constant expression (numbers,
operators, parentheses), evaluated as C's ``#if`` does. Anything else is
refused by name: glibc's ``#define SOCK_STREAM SOCK_STREAM`` names a C enum
of a header, which is not in BTF.
"""

from __future__ import annotations

import os

from pycore.lang import ast as A

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MacroError", "Macros", "head_of"]


class MacroError(Exception):
    """A macro was found but is not an integer constant (one line, for the checker's error)."""


def head_of(program: A.Program) -> str:
    """The script's ``#`` lines (includes and directives), in their order: what clang would preprocess."""
    lines = sorted([*program.includes, *program.directives], key=lambda n: (n.pos.line, n.pos.col))
    return "".join(n.text.rstrip("\n") + "\n" for n in lines)


def include_dirs() -> list[str]:
    """The C compiler's system include directories on this machine, in search order."""
    import glob

    machine = os.uname().machine
    gcc = sorted(glob.glob(f"/usr/lib/gcc/{machine}-linux-gnu/*/include"), key=_version)
    dirs = gcc[-1:] + ["/usr/local/include", f"/usr/include/{machine}-linux-gnu", "/usr/include"]
    return [d for d in dirs if os.path.isdir(d)]


def _version(path: str) -> tuple[int, ...]:
    parts = path.rstrip("/").split("/")[-2].split(".")
    return tuple(int(p) for p in parts if p.isdigit())


# What a C compiler for this machine predefines that glibc's headers test; BPFTRACE_HAVE_BTF as bpftrace.
_PREDEFINED = ("BPFTRACE_HAVE_BTF 1", "__linux__ 1", "__unix__ 1", "__GNUC__ 12", "__GNUC_MINOR__ 2",
               "__STDC__ 1", "__STDC_VERSION__ 201710L", "__CHAR_BIT__ 8", "__SIZEOF_INT__ 4",
               "__SIZEOF_LONG__ 8", "__SIZEOF_POINTER__ 8", "__LP64__ 1", "_LP64 1")
# gcc's <stdint.h> (first on the search path) defines its types from these when not hosted, as pcpp
# has no #include_next to reach glibc's: gcc's own values for LP64
_INT_TYPES = tuple(f"__{p}{w}_TYPE__ {t}" for w, (s, u) in {"8": ("signed char", "unsigned char"),
                   "16": ("short int", "short unsigned int"), "32": ("int", "unsigned int"),
                   "64": ("long int", "long unsigned int")}.items()
                   for p, t in (("INT", s), ("UINT", u), ("INT_LEAST", s), ("UINT_LEAST", u))) + tuple(
    f"__{n}_TYPE__ {t}" for n, t in (("INTPTR", "long int"), ("UINTPTR", "long unsigned int"),
                                     ("INTMAX", "long int"), ("UINTMAX", "long unsigned int"),
                                     ("SIZE", "long unsigned int"), ("PTRDIFF", "long int"),
                                     ("INT_FAST8", "signed char"), ("UINT_FAST8", "unsigned char"),
                                     ("INT_FAST16", "long int"), ("UINT_FAST16", "long unsigned int"),
                                     ("INT_FAST32", "long int"), ("UINT_FAST32", "long unsigned int"),
                                     ("INT_FAST64", "long int"), ("UINT_FAST64", "long unsigned int"),
                                     ("WINT", "unsigned int"), ("CHAR16", "short unsigned int"),
                                     ("CHAR32", "unsigned int")))
_ARCH = {"x86_64": ("__x86_64__ 1", "__x86_64 1", "__amd64__ 1", "__WCHAR_TYPE__ int"),
         "aarch64": ("__aarch64__ 1", "__WCHAR_TYPE__ unsigned int")}


_OPERATOR_CHARS = set("()+-*/%<>=&|^~!?:")
_MAX_HEADER = 4 << 20     # bytes: the largest header read (glibc's and the kernel's are far smaller)


class Macros:
    """The macros a script's head defines, read once on first use."""

    def __init__(self, head: str, filename: str = "<stdin>") -> None:
        self.head = head
        self.filename = filename
        self._pp: Any = None
        self.missing: list[str] = []      # headers #include'd but not on this machine
        self.missing_quoted: list[str] = []   # those of them #include'd as "file" (the user's, not the system's)

    def text(self) -> str:
        """The head preprocessed, with ``#line`` directives: what C declarations are read from
        (:mod:`pycore.lang.cdecl`), so that pcpp runs once for macros and types."""
        return self._preprocessor().pycore_text  # type: ignore[no-any-return]

    def _preprocessor(self) -> Any:
        if self._pp is None:
            try:
                self._pp = _run(self.head, self.filename, self.missing, self.missing_quoted)
            except Exception as e:  # noqa: BLE001 - pcpp on a user's lines: whatever it raises, one line
                raise MacroError(f"the script's # lines could not be preprocessed: {e}") from None
        return self._pp

    def value(self, name: str) -> int | None:
        """``name``'s value if the head defines it as an integer constant; None if it does not define it."""
        if not self.head or not name.isidentifier():
            return None
        pp = self._preprocessor()
        if name not in pp.macros:
            return None
        tokens = _suffixes_joined(pp, pp.expand_macros(pp.tokenize(name)))
        text = "".join(t.value for t in tokens).strip()
        bad = [t.value for t in tokens if t.type != pp.t_INTEGER and t.type not in pp.t_WS
               and not set(t.value) <= _OPERATOR_CHARS]
        if bad or not text:
            raise MacroError(f"macro {name} expands to {text!r}, not an integer constant"
                             + (f" ({bad[0]!r}; pycore reads integer macros only)" if bad else ""))
        errors = pp.return_code
        try:
            result, _ = pp.evalexpr(tokens)
        except Exception:  # noqa: BLE001 - pcpp's evaluator on the user's macro: whatever it raises, one line
            result = None
        if pp.return_code != errors or not isinstance(result, int):   # (1/0), (1 <<: reported to on_error
            raise MacroError(f"macro {name} expands to {text!r}, which does not evaluate to an integer")
        return result


def _suffixes_joined(pp: Any, tokens: list[Any]) -> list[Any]:
    """pcpp's lexer ends an integer after ``UL`` and leaves ``1ULL``'s last ``L`` an identifier:
    dropped here (it changes the type, not the value)."""
    out: list[Any] = []
    for t in tokens:
        if t.type == pp.t_ID and out and out[-1].type == pp.t_INTEGER and set(t.value) <= set("uUlL"):
            continue
        out.append(t)
    return out


def _run(head: str, filename: str, missing: list[str], quoted: list[str] | None = None) -> Any:
    """pcpp over ``head``: its macros, with every header it could find; the others listed in ``missing``."""
    import io

    from pcpp.preprocessor import OutputDirective, Action, Preprocessor

    class Quiet(Preprocessor):  # type: ignore[misc]
        """Errors collected, not printed: a header's trouble must not reach the user's terminal."""

        def on_error(self, file: str, line: int, msg: str) -> None:
            self.return_code += 1

        def on_file_open(self, is_system_include: bool, includepath: str) -> Any:
            """Regular files of a sane size only: ``#include "/dev/zero"`` must not read forever."""
            import stat

            st = os.stat(includepath)
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_HEADER:
                raise OSError(f"{includepath}: not a header")
            return super().on_file_open(is_system_include, includepath)

        def on_include_not_found(self, is_malformed: bool, is_system_include: bool, curdir: str,
                                 includepath: str) -> None:
            missing.append(includepath)
            if not is_system_include and quoted is not None:
                quoted.append(includepath)
            raise OutputDirective(Action.IgnoreAndRemove)

    pp = Quiet()
    pp.line_directive = "#line"
    for d in include_dirs():
        pp.add_path(d)
    for d in _PREDEFINED + _INT_TYPES + _ARCH.get(os.uname().machine, ()):
        pp.define(d)
    pp.parse(head, filename)
    out = io.StringIO()
    pp.write(out)               # runs the directives; the text is what C declarations are read from
    pp.pycore_text = out.getvalue()
    return pp
