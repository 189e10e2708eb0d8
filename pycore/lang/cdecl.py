"""C declarations of a script and its ``#include``d headers, as split BTF on the kernel's.

bpftrace hands a script's head (``#`` lines and ``struct``/``union``/``enum``
definitions, in order) to clang and takes the types clang lays out. pycore
has no compiler: pcpp preprocesses the same text (:mod:`pycore.lang.macros`,
one run for macros and types), pycparser parses it, and this module lays the
types out as gcc does on x86-64 (System V ABI: sizes, alignment, bitfields
that do not straddle their type's unit, zero-width bitfields, unions,
anonymous members, ``packed`` and ``aligned(N)``) and writes them as split
BTF (:class:`btf.writer.Writer`), so that every reader of a :class:`btf.Spec`
handles them; a declared name hides the kernel's (``shadows``).

Names the text does not define (``struct task_struct``, ``u64``, ``size_t``)
are the kernel's types, by id. A header pycparser cannot read (GNU C beyond
what is stripped below) is passed over and named in the errors that follow;
the script's own declarations must parse, else one error at their line:column.
"""

from __future__ import annotations

import re

from pycore.lang.cdecl_layout import _BUILTIN, SCRIPT, DeclError, Layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from btf import Spec

__all__ = ["DeclError", "SCRIPT", "script_text", "declare", "may_declare"]

_MAX_RETRIES = 64            # kernel type names added to the prelude one parse error at a time
# a name used as a type in the script's lines: 'u64 x;', 'u32 *p,', 'size_t n[4]'
_TYPE_USE = re.compile(r"\b([A-Za-z_]\w*)\s*[\s*]\s*\**\s*[A-Za-z_]\w*\s*[;,\[:)]")
_C_WORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while _Bool bool _Alignas _Alignof _Atomic _Noreturn _Static_assert""".split())


def script_text(program: Any) -> str:
    """The script's ``#`` lines and C definitions, in order, each at its own line and column, so that
    positions in the preprocessed text are the script's."""
    items = sorted([*program.includes, *program.directives, *program.c_definitions],
                   key=lambda n: (n.pos.line, n.pos.col))
    out: list[str] = []
    line, col = 1, 1
    for n in items:
        text = n.text.rstrip("\n")
        if not hasattr(n, "path") and not text.lstrip().startswith("#") and not text.endswith(";"):
            text += ";"      # bpftrace takes 'struct X { ... }' without its ';', as clang does
        if n.pos.line > line:
            out.append("\n" * (n.pos.line - line))
            line, col = n.pos.line, 1
        out.append(" " * max(0, n.pos.col - col))
        out.append(text)
        line += text.count("\n")
        col = (len(text) - text.rfind("\n")) if "\n" in text else max(col, n.pos.col) + len(text)
        if text.lstrip().startswith("#"):      # a directive ends its line
            out.append("\n")
            line, col = line + 1, 1
    return "".join(out) + "\n"


def may_declare(program: Any) -> bool:
    """Whether the script's head can declare types: a C definition, or an ``#include`` that is not in the
    ``#ifndef BPFTRACE_HAVE_BTF`` branch bpftrace's tools put theirs in (dropped on a kernel with BTF). Saves
    loading the preprocessor for those tools' casts."""
    if program.c_definitions:
        return True
    lines = sorted([*program.includes, *program.directives], key=lambda n: (n.pos.line, n.pos.col))
    stack: list[bool] = []          # per open #if: is this branch dropped for sure?
    for n in lines:
        words = n.text.lstrip("#").split()
        word = words[0] if words else ""
        if word in ("if", "ifdef", "ifndef"):
            stack.append(word == "ifndef" and words[1:2] == ["BPFTRACE_HAVE_BTF"])
        elif word in ("else", "elif") and stack:
            stack[-1] = False
        elif word == "endif" and stack:
            stack.pop()
        elif hasattr(n, "path") and not any(stack):
            return True
    return False


# -- GNU C that pycparser does not read, taken out (same length: columns stay the script's) ----------

_WORDS = {"__extension__": "", "__restrict": "", "__restrict__": "", "__inline": "inline",
          "__inline__": "inline", "__signed__": "signed", "__signed": "signed", "__const": "const",
          "__volatile__": "volatile", "__volatile": "volatile", "__alignof__": "_Alignof",
          "__alignof": "_Alignof", "__thread": "", "_Thread_local": "", "__int128": "__i128__"}
_WORD_RE = re.compile(r"\bunsigned\s+__int128\b|\bsigned\s+__int128\b|\b(?:" + "|".join(_WORDS) + r")\b")
_PAREN_WORDS = re.compile(r"\b(?:__attribute__|__attribute|__asm__|__asm|asm|__declspec)\s*\(")

# types gcc knows without a declaration: stand-ins for the parser, laid out by Layout.typedef
_PRELUDE = f"""#line 1 "{_BUILTIN}"
typedef int __builtin_va_list; typedef int __i128__; typedef int __u128__; typedef int _Float128;
typedef int _Float64x; typedef int _Float32x; typedef int _Float64; typedef int _Float32;
typedef int __float128; typedef int __float80; typedef int _Float16;
"""


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def strip_gnu(text: str) -> str:
    """``text`` with the GNU C that pycparser does not read replaced by spaces (newlines kept): keywords,
    ``__asm__(...)``, and ``__attribute__((...))`` lists, of which ``packed`` and ``aligned`` are kept
    as C23's ``[[packed]]`` in the same place, for the layout (pycparser reads C23 attributes)."""
    out = text
    pos = 0
    while True:
        m = _PAREN_WORDS.search(out, pos)
        if m is None:
            break
        depth, i = 0, m.end() - 1
        while i < len(out):
            if out[i] == "(":
                depth += 1
            elif out[i] == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        keep = _layout_attributes(out[m.end():i]) if m.group().startswith("__attribute") else ""
        out = _blank(out, m.start(), i + 1)
        if keep:
            new = f"[[{keep}]]"
            out = out[:m.start()] + new + out[m.start() + len(new):]
        pos = i + 1

    def word(m: re.Match) -> str:
        w = m.group()
        new = "__u128__" if w.startswith("unsigned") else "__i128__" if w.startswith("signed") else _WORDS[w]
        return new + " " * (len(w) - len(new))

    return _WORD_RE.sub(word, out)


_LAYOUT_ATTR = re.compile(r"\s*(?:__)?(packed|aligned)(?:__)?\s*(\([^()]*(?:\([^()]*\)[^()]*)*\))?\s*$")


def _layout_attributes(inner: str) -> str:
    """The ``packed`` and ``aligned(N)`` items of an attribute list's ``(...)`` text, others dropped."""
    body = inner.strip()[1:-1] if inner.strip().startswith("(") else inner
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    items.append(cur)
    kept = []
    for it in items:
        m = _LAYOUT_ATTR.match(it)
        if m:
            kept.append(m.group(1) + (m.group(2) or ""))
    return ", ".join(kept)


# -- parsing --------------------------------------------------------------------------------------


def _parser() -> Any:
    """pycparser's parser, with an error's place taken from the next token when pycparser gives none."""
    from pycparser import c_parser

    class Parser(c_parser.CParser):  # type: ignore[misc]
        failed_at: tuple[str, Any] | None = None

        def _parse_error(self, msg: str, coord: Any) -> Any:
            tok = None
            try:
                tok = self._peek()
            except Exception:  # noqa: BLE001 - the lexer's own error: keep pycparser's message
                pass
            if tok is not None:
                self.failed_at = (tok.value, self._tok_coord(tok))
                if not hasattr(coord, "line"):
                    coord = self.failed_at[1]
                    msg = f"{msg.lower()} at {tok.value!r}"
            raise c_parser.ParseError(f"{coord}: {msg}")

    return Parser(dialect="c23")


def _where(err: str) -> tuple[str, int, int, str]:
    """(file, line, col, message) of pycparser's ``file:line:col: message``."""
    m = re.match(r"(.*?):(\d+)(?::(\d+))?: (.*)", err, re.S)
    if m is None:
        file, _, msg = err.partition(": ")
        return (file, 0, 0, msg) if msg else ("", 0, 0, err)
    return m.group(1), int(m.group(2)), int(m.group(3) or 0), m.group(4)


def _runs(text: str) -> list[tuple[str, str]]:
    """The preprocessed text cut at each ``#line`` directive: (file, its text with the directive)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        m = re.match(r'#line \d+ "(.*)"', line)
        if m:
            out.append((m.group(1), []))
        else:
            if not out:
                out.append((SCRIPT, []))
            if line.lstrip().startswith("#"):     # what pcpp passes through (#!, #pragma): not C declarations
                line = "\n"
        out[-1][1].append(line)
    return [(f, "".join(lines)) for f, lines in out]


def _header_name(path: str) -> str:
    for d in ("/usr/include/x86_64-linux-gnu/", "/usr/include/aarch64-linux-gnu/", "/usr/include/"):
        if d in path:
            return "<" + path.split(d, 1)[1] + ">"
    return path


def parse(text: str, kernel_names: Any) -> tuple[Any, dict[str, int], list[str]]:
    """pycparser's tree of the preprocessed ``text``: (ast, kernel typedef names the text used -> id,
    headers passed over).

    Each header that pycparser cannot read is passed over; a name pycparser does not know as a type is
    retried as the kernel's typedef of that name (``u64``). Errors in the script's lines raise
    :class:`DeclError`."""
    from pycparser import c_parser

    runs = _runs(text)
    dropped: set[str] = set()
    externs: dict[str, int] = {}
    skipped: list[str] = []
    scanned = False
    for _ in range(_MAX_RETRIES + len({f for f, _ in runs})):
        body = "".join(seg for f, seg in runs if f not in dropped)
        prelude = _PRELUDE + "".join(f"typedef int {n};\n" for n in externs)
        p = _parser()
        try:
            return p.parse(strip_gnu(prelude + body), SCRIPT), externs, skipped
        except c_parser.ParseError as e:
            file, line, col, msg = _where(str(e))
            tok = p.failed_at[0] if p.failed_at else ""
            if file == SCRIPT and msg == "before: }" and _add_semicolon(runs, line, col):
                continue     # 'struct R { int a }': clang (bpftrace) and gcc warn and go on; so do we
            if tok and tok.isidentifier() and tok not in externs:
                found = kernel_names(tok)
                if found:
                    externs[tok] = found
                    if not scanned:      # the script's other such names at once: a parse per name is slow
                        scanned = True
                        script = "".join(seg for f, seg in runs if f == SCRIPT)
                        for name in dict.fromkeys(_TYPE_USE.findall(script)):
                            if name not in externs and not _C_WORDS.issuperset([name]):
                                found = kernel_names(name)
                                if found:
                                    externs[name] = found
                    continue
                if file == SCRIPT and msg.startswith(("invalid", "missing type")):
                    msg = f"unknown type name {tok!r}: declared neither in the script nor in this kernel's BTF"
            if file not in (SCRIPT, _BUILTIN) and any(f == file for f, _ in runs) and file not in dropped:
                dropped.add(file)       # a header pycparser cannot read: passed over, named in later errors
                skipped.append(f"{_header_name(file)}:{line}: {msg}")
                continue
            note = f" (pycore's C parser could not read {'; '.join(skipped)})" if skipped else ""
            raise DeclError(f"C declaration: {_plain(msg)}{note}", line if file == SCRIPT else 0, col) from None
    raise DeclError("C declarations: too many unknown type names")


def _add_semicolon(runs: list[tuple[str, str]], line: int, col: int) -> bool:
    """Put the ';' a struct's last member lacks before the '}' at the script's ``line``:``col``."""
    for i, (f, text) in enumerate(runs):
        m = re.match(r'#line (\d+) "', text)
        if f != SCRIPT or m is None:
            continue
        lines = text.split("\n")
        k = line - int(m.group(1)) + 1
        if 1 <= k < len(lines) and lines[k][col - 1:col] == "}" and not lines[k][:col - 1].rstrip().endswith((";", "{")):
            lines[k] = lines[k][:col - 1] + ";" + lines[k][col - 1:]
            runs[i] = (f, "\n".join(lines))
            return True
    return False


def _plain(msg: str) -> str:
    msg = msg.replace("before: ", "syntax error before ")
    return "syntax error at end of input" if msg == "At end of input" else msg


def declare(text: str, kernel: Spec) -> tuple[Spec | None, list[str]]:
    """The types ``text`` (pcpp's output, with ``#line`` directives) declares, as split BTF on ``kernel``
    with shadowing names; None when it declares none. Also the headers pycparser could not read."""
    def kernel_names(name: str) -> int:
        from btf.kinds import Kind

        ids = kernel.ids_named(name, (Kind.TYPEDEF, Kind.INT, Kind.FLOAT))
        return ids[0] if ids else 0

    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        return None, []      # nothing left after the preprocessor (#ifndef BPFTRACE_HAVE_BTF): pycparser not loaded
    ast, externs, skipped = parse(text, kernel_names)
    return Layout(kernel, externs).run(ast), skipped
