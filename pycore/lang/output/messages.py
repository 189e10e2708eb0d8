"""bpftrace's one-line messages: JSON escaping, ``-f json`` envelopes, time(), join(), probe counts.

bpftrace 0.17 escapes JSON by hand, one ``char`` at a time, and ``char`` is
signed on x86: every byte of a UTF-8 sequence is below ``'\\x1f'`` there and
comes out as ``\\uffffffXX``.  :func:`json_escape` does the same by default
so our lines equal bpftrace's; ``exact=False`` keeps UTF-8 as it is.
"""

from __future__ import annotations

import time as _time

__all__ = ["json_escape", "json_message", "json_count", "attached_text", "attached_json", "lost_text",
           "lost_json", "format_time", "format_join", "helper_error_text", "helper_error_json", "EXIT_PREAMBLE"]

# bpftrace prints two newlines when the run ends, before the maps, in text and json alike
EXIT_PREAMBLE = "\n\n"

_SIMPLE = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def json_escape(text: str | bytes, *, exact: bool = True) -> str:
    """The inside of a JSON string as bpftrace writes it (``exact``: its signed-char escapes too)."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    if not exact:
        out = []
        for ch in raw.decode("utf-8", "replace"):
            o = ord(ch)
            out.append(_SIMPLE.get(o) or (f"\\u{o:04x}" if o <= 0x1F else ch))
        return "".join(out)
    parts: list[str] = []
    plain = bytearray()
    for b in raw:
        esc = _SIMPLE.get(b)
        if esc is None and b <= 0x1F:
            esc = f"\\u{b:04x}"
        elif esc is None and b >= 0x80:
            esc = f"\\u{0xFFFFFF00 | b:x}"      # (int)(signed char)b printed with std::hex
        if esc is None:
            plain.append(b)
            continue
        if plain:
            parts.append(plain.decode("ascii"))
            plain.clear()
        parts.append(esc)
    if plain:
        parts.append(plain.decode("ascii"))
    return "".join(parts)


def json_message(kind: str, text: str, *, exact: bool = True) -> str:
    """``{"type": kind, "data": "text"}`` and a newline: printf, time, join, cat, system output."""
    return f'{{"type": "{kind}", "data": "{json_escape(text, exact=exact)}"}}\n'


def _helper_message(helper: str, retcode: int) -> str:
    if helper == "map_delete_elem" and retcode == -2:
        return "Can't delete map element because it does not exist."
    if helper == "map_update_elem" and retcode == -7:
        return "Map full; can't update element. Try increasing max_map_keys config"
    if helper == "map_lookup_elem":
        return "Can't lookup map element because it does not exist."
    import os

    return os.strerror(-retcode)


def helper_error_text(filename: str, source: str, helper: str, retcode: int,
                      where: tuple[int, int, int, int]) -> str:
    """bpftrace 0.23.2's warning when a helper fails (on stdout, among the script's output)::

        stdin:1:20-33: WARNING: Can't delete map element because it does not exist.
        Additional Info - helper: map_delete_elem, retcode: -2
        BEGIN { @m[1] = 1; delete(@m, 2); }
                           ~~~~~~~~~~~~~

    A call over several lines has only its lines (``stdin:1-2: WARNING: ...``) and no source; tabs
    print as 4 spaces, in the source and under it.
    """
    line, col, end_line, end_col = where
    msg = f"WARNING: {_helper_message(helper, retcode)}\nAdditional Info - helper: {helper}, retcode: {retcode}"
    if end_line > line:
        return f"{filename}:{line}-{end_line}: {msg}\n"
    lines = source.splitlines()
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    head = f"{filename}:{line}:{col}-{end_col}: {msg}\n"
    if not src:
        return head
    marks = "".join((" " if x < col - 1 else "~") * (4 if ch == "\t" else 1)
                    for x, ch in enumerate(src[:end_col - 1]))
    return f"{head}{src.replace(chr(9), '    ')}\n{marks}\n"


def helper_error_json(helper: str, retcode: int, where: tuple[int, int, int, int]) -> str:
    """The ``-f json`` form of :func:`helper_error_text` (bpftrace 0.23.2's ``helper_error`` line)."""
    return (f'{{"type": "helper_error", "msg": "{json_escape(_helper_message(helper, retcode))}", '
            f'"helper": "{helper}", "retcode": {retcode}, "line": {where[0]}, "col": {where[1]}}}\n')


def json_count(kind: str, field: str, n: int) -> str:
    """``{"type": kind, "data": {"field": n}}``: attached_probes and lost_events."""
    return f'{{"type": "{kind}", "data": {{"{field}": {n}}}}}\n'


def attached_text(n: int) -> str:
    """The ``Attaching N probes...`` line bpftrace writes before running."""
    return f"Attaching {n} probe{'' if n == 1 else 's'}...\n"


def attached_json(n: int) -> str:
    """The ``-f json`` form of :func:`attached_text`."""
    return json_count("attached_probes", "probes", n)


def lost_text(n: int) -> str:
    """bpftrace's line for events the ring/perf buffer dropped."""
    return f"Lost {n} events\n"


def lost_json(n: int) -> str:
    """The ``-f json`` form of :func:`lost_text`."""
    return json_count("lost_events", "events", n)


def format_time(fmt: str = "%H:%M:%S\n", when: float | None = None) -> str:
    """time(fmt): strftime of the local time (now, or ``when`` seconds since the epoch), as bpftrace."""
    return _time.strftime(fmt, _time.localtime(when))


def format_join(words: list[str], sep: str = " ") -> str:
    """join(array[, sep]) in text mode: the words, the separator between, and a newline.

    In ``-f json`` bpftrace sends the same words without the newline:
    ``json_message("join", sep.join(words))``.
    """
    return sep.join(words) + "\n"
