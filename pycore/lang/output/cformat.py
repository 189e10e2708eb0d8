"""printf() as bpftrace 0.17 runs it: its specifier table, its checks, and glibc's snprintf rules.

bpftrace finds specifiers with one regex, ``%-?[0-9]*(\\.[0-9]+)?(TYPE)``,
TYPE one of ``s r rx c`` or a length (none, hh, h, l, ll, j, z, t) before
``d u x X p o``: no ``%i``, no ``+``/space/``#`` flags.  It cuts the format
after each specifier and hands each piece, with its one argument, to
``snprintf``.  What follows from that, and what we reproduce:

- integers reach snprintf as 64-bit values, so ``%d``/``%u``/``%x`` without
  ``l`` print the low 32 bits (``%u`` of -1 is 4294967295), ``%hhd`` the low
  8, ``%c`` the low byte;
- ``%%`` becomes ``%`` in every piece but the text after the last specifier,
  which is written as it is (``printf("%d%%\\n", 5)`` prints ``5%%``);
- each piece stops at its first NUL (``%c`` of 0 ends the piece);
- ``%p`` is glibc's: ``(nil)`` for 0, else ``0x`` and hex;
- widths and precisions count bytes, not characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["SPECIFIER_RE", "specifiers", "arg_category", "validate_format", "format_printf",
           "format_printf_bytes", "compile_printf", "hex_buffer"]

_LENGTHS = ("hh", "h", "ll", "l", "j", "z", "t", "")
_CONVS = ("d", "u", "x", "X", "p", "o")
# longest alternatives first: "rx" before "r" (bpftrace's %rx is hex, never %r then "x")
TOKENS: dict[str, str] = {"rx": "buffer", "r": "buffer", "s": "string", "c": "integer"}
TOKENS.update({ln + c: "integer" for ln in _LENGTHS for c in _CONVS})
SPECIFIER_RE = re.compile(r"%-?[0-9]*(?:\.[0-9]+)?(" + "|".join(sorted(TOKENS, key=len, reverse=True)) + ")")
_WIDTHS = {"hh": 8, "h": 16, "": 32}
_M64 = (1 << 64) - 1
# one C conversion as snprintf parses it, or "%%"
_C_CONV = re.compile(rb"%(?:%|([-+ #0]*)([0-9]*)(?:\.([0-9]*))?(hh|h|ll|l|j|z|t|L|q)?([diouxXcspaAeEfFgGn]))")


def specifiers(fmt: str) -> list[re.Match[str]]:
    """The specifiers bpftrace sees in ``fmt`` (each consumes one argument), in order."""
    return list(SPECIFIER_RE.finditer(fmt))


_CATEGORY = {"Str": "string", "Stack": "string", "Inet": "string", "Mac": "string", "Ptr": "integer", "Record": "record", "Array": "array",
             "Tuple": "tuple", "Buffer": "buffer", "Void": "none"}


def arg_category(t: Any) -> str:
    """bpftrace's name for what an argument of trace type ``t`` is, as printf checks it.

    Symbols and stacks print as strings and pointers as integers, as in
    bpftrace; a plain string (``"integer"``) is taken as already a category.
    """
    if isinstance(t, str):
        return t
    if getattr(t, "display", ""):      # ksym/usym, strftime(), cgroup_path(): printed as text
        return "string"
    name = type(t).__name__
    return "integer" if name in ("Int", "Bool", "Enum") else _CATEGORY.get(name, "none")


def validate_format(fmt: str, arg_types: Sequence[Any], func: str = "printf") -> str | None:
    """Why bpftrace would reject ``func(fmt, args...)`` at compile time, or None when it would not.

    Mirrors bpftrace 0.17's messages: the argument count first, then the
    first specifier whose argument has the wrong kind.
    """
    tokens = specifiers(fmt)
    n, want = len(arg_types), len(tokens)
    if n < want:
        return f"{func}: Not enough arguments for format string ({n} supplied, {want} expected)"
    if n > want:
        return f"{func}: Too many arguments for format string ({n} supplied, {want} expected)"
    for m, t in zip(tokens, arg_types):
        token = m.group(1)
        expect = TOKENS[token]
        got = arg_category(t)
        if got != expect and not (expect == "string" and type(t).__name__ in ("Bool", "Enum")):   # %s: true, a name
            return f"{func}: %{token} specifier expects a value of type {expect} ({got} supplied)"
    return None


def hex_buffer(data: bytes, keep_ascii: bool = True) -> str:
    """A buf() as %r prints it: printable ASCII kept, other bytes ``\\xNN`` (%rx: every byte)."""
    return "".join(chr(b) if keep_ascii and 0x20 <= b <= 0x7E else f"\\x{b:02x}" for b in data)


def _stack_text(frames: Sequence[str], indent: int = 8) -> str:
    pad = " " * indent
    return "\n" + "".join(f"{pad}{f}\n" for f in frames)


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (list, tuple)):
        value = _stack_text(value)
    return str(value).encode("utf-8", "surrogateescape")


def _pad(body: bytes, width: int, left: bool) -> bytes:
    return body.ljust(width) if left else body.rjust(width)


def _c_int(m: re.Match[bytes], value: int) -> bytes:
    flags, width_s, prec_s, length, conv = m.group(1), m.group(2), m.group(3), m.group(4) or "", m.group(5)
    flags = flags.decode()
    length = length.decode() if isinstance(length, bytes) else length
    conv = conv.decode()
    width = int(width_s) if width_s else 0
    prec = None if prec_s is None else int(prec_s or b"0")
    left = "-" in flags
    v = value & _M64
    if conv == "c":
        return _pad(bytes([v & 0xFF]), width, left)
    if conv == "p":
        if v == 0:
            return _pad(b"(nil)", width, left)
        digits, prefix, sign = f"{v:x}", "0x", ""
    else:
        bits = _WIDTHS.get(length, 64)
        v &= (1 << bits) - 1
        sign = ""
        if conv in "di":
            if v >> (bits - 1):
                v -= 1 << bits
            sign = "-" if v < 0 else "+" if "+" in flags else " " if " " in flags else ""
            v = abs(v)
        digits = {"x": f"{v:x}", "X": f"{v:X}", "o": f"{v:o}"}.get(conv, str(v))
        prefix = "0x" if conv == "x" and "#" in flags and v else "0X" if conv == "X" and "#" in flags and v else ""
    if prec is not None:
        digits = "" if prec == 0 and v == 0 else digits.rjust(prec, "0")
    if conv == "o" and "#" in flags and not digits.startswith("0"):
        digits = "0" + digits
    head = sign + prefix
    if "0" in flags and not left and prec is None:
        digits = digits.rjust(width - len(head), "0")
    return _pad((head + digits).encode(), width, left)


def _c_str(m: re.Match[bytes], data: bytes) -> bytes:
    width = int(m.group(2)) if m.group(2) else 0
    if m.group(3) is not None:
        data = data[: int(m.group(3) or b"0")]
    return _pad(data, width, b"-" in m.group(1))


def _snprintf(piece: bytes, value: Any, token: str) -> bytes:
    """One piece through snprintf with one argument; pieces stop at their first NUL."""
    if token in ("r", "rx"):
        piece = re.sub(rb"%rx?", b"%s", piece)
        value = hex_buffer(bytes(value) if not isinstance(value, str) else value.encode(), token == "r")
    out = bytearray()
    pos = 0
    used = False
    for m in _C_CONV.finditer(piece):
        out += piece[pos:m.start()]
        pos = m.end()
        if m.group(0) == b"%%":
            out += b"%"
        elif used or m.group(5) not in b"diouxXcps":
            out += m.group(0)           # a second conversion reads garbage in bpftrace; keep the text
        else:
            used = True
            if m.group(5) == b"s":
                out += _c_str(m, _to_bytes(value))
            elif isinstance(value, int):
                out += _c_int(m, value)
            else:
                out += m.group(0)
    out += piece[pos:]
    nul = out.find(b"\0")
    return bytes(out if nul < 0 else out[:nul])


def format_printf_bytes(fmt: str, values: Sequence[Any]) -> bytes:
    """printf's output as bytes, exactly as bpftrace writes it (see :func:`format_printf`)."""
    raw = fmt.encode("utf-8", "surrogateescape")
    tokens = list(SPECIFIER_RE.finditer(fmt))
    # match offsets are in characters; cut on the encoded text at the same places
    ends = [len(fmt[:m.end()].encode("utf-8", "surrogateescape")) for m in tokens]
    out = bytearray()
    last = 0
    for i, value in enumerate(values[: len(tokens)]):
        out += _snprintf(raw[last:ends[i]], value, tokens[i].group(1))
        last = ends[i]
    out += raw[last:]
    return bytes(out)


def format_printf(fmt: str, values: Sequence[Any]) -> str:
    """printf(fmt, values...) as bpftrace 0.17 prints it; ``fmt`` has its escapes already decoded.

    Values are Python values as the runtime decodes them: ints already
    sign-interpreted (only their low 64 bits matter), strings, stacks as
    lists of frames (printed as bpftrace prints a stack under ``%s``),
    ``bytes`` for buf() under ``%r``/``%rx``.  Bytes that are not UTF-8
    (``%c`` of 0xff) come back as U+FFFD; :func:`format_printf_bytes` keeps them.
    """
    return format_printf_bytes(fmt, values).decode("utf-8", "replace")


def compile_printf(fmt: str) -> Callable[[Sequence[Any]], str] | None:
    """:func:`format_printf` for one format, compiled once into a Python ``%`` format.

    Why: a flood of printf (one per syscall) costs ~10 us a line through
    :func:`format_printf`, which scans the format at every call; after Ctrl-C
    the tracer prints what the ring buffer holds (up to ~50,000 lines) and
    must exit within 2 s even in a slow VM.  The compiled function takes the
    same values and returns the same text; it passes values it has no rule
    for (a string that is not ASCII, where widths count bytes; a value that is
    not an int under %d) to :func:`format_printf`.  None when a specifier
    needs the general path every time: %c, %r/%rx, an integer precision of 0,
    %p with a precision or a 0 flag, a '%' in the text that snprintf would
    read, a NUL in the format.
    """
    if "\0" in fmt:
        return None
    try:
        fmt.encode("utf-8")
    except UnicodeEncodeError:
        return None
    py: list[str] = []
    kinds: list[tuple[str, int, int]] = []     # (kind, mask, sign bit) per value: "d" signed, "u", "s", "p"
    last = 0
    for m in SPECIFIER_RE.finditer(fmt):
        prefix = fmt[last:m.start()]
        if "%" in prefix.replace("%%", ""):
            return None                        # snprintf would read it as a conversion: the general path
        c = _C_CONV.fullmatch(m.group(0).encode())
        if c is None or c.group(0) == b"%%":
            return None
        flags, width, prec = c.group(1).decode(), c.group(2).decode(), c.group(3)
        length, conv = (c.group(4) or b"").decode(), c.group(5).decode()
        left = "-" if "-" in flags else ""
        if conv == "s":
            spec = f"%{left}{width}" + ("" if prec is None else f".{prec.decode()}") + "s"
            kinds.append(("s", 0, 0))
        elif conv == "p":
            if prec is not None or "0" in flags:
                return None
            spec = f"%{left}{width}s"
            kinds.append(("p", _M64, 0))
        elif conv in "diuxXo":
            if prec is not None and int(prec or b"0") == 0:
                return None                    # C prints no digits for 0 there; Python prints "0"
            zero = "0" if "0" in flags and not left and prec is None else ""
            bits = _WIDTHS.get(length, 64)
            spec = (f"%{left}{zero}{width}" + ("" if prec is None else f".{int(prec)}")
                    + {"i": "d", "u": "d"}.get(conv, conv))
            kinds.append(("d" if conv in "di" else "u", (1 << bits) - 1, 1 << (bits - 1)))
        else:
            return None                        # %c: a byte, maybe NUL (which ends the piece)
        py.append(prefix + spec)
        last = m.end()
    py.append(fmt[last:].replace("%", "%%"))  # the text after the last specifier is written as it is
    pyfmt = "".join(py)
    n = len(kinds)

    def compiled(values: Sequence[Any]) -> str:
        if len(values) < n:
            return format_printf(fmt, values)
        args = []
        for (kind, mask, sign), v in zip(kinds, values):
            if kind == "s":
                if type(v) is not str or not v.isascii() or "\0" in v:
                    return format_printf(fmt, values)
                args.append(v)
            elif type(v) is not int:
                return format_printf(fmt, values)
            elif kind == "d":
                v &= mask
                args.append(v - (mask + 1) if v & sign else v)
            elif kind == "u":
                args.append(v & mask)
            else:
                args.append(f"0x{v & mask:x}" if v & mask else "(nil)")
        return pyfmt % tuple(args)

    return compiled
