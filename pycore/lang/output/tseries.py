"""A tseries map (bpftrace 0.24's ``tseries(v, interval, n[, agg])``) as bpftrace 0.26 prints it.

Each key's series is ``{epoch: value}`` (an epoch is a TAI time / the interval, the runtime keeps
each bucket's latest): the rows run over the last ``n`` epochs up to the newest of any key, from
the first epoch this key has a value in; an epoch without a value prints ``-``. The text is a
53-column chart, time down the left (the clock's unit chosen by the rows' spacing), as upstream's
``TextEmitter<Value::TimeSeries>`` (src/output/text.cpp) draws it, its float32 arithmetic included;
``-f json`` lists ``{"interval_start", "value"}`` for the rows with a value (src/output/json.cpp).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Mapping

__all__ = ["epoch_range", "rows", "render", "json_rows"]

_WIDTH = 53                # the chart's columns
_PAD = 21                  # the minimum's column in the scale lines
Row = tuple[int, "int | None"]     # (wall clock ns, value or None)


def epoch_range(series: Iterable[Mapping[int, int]], num: int) -> tuple[int, int]:
    """(first, last) epoch shown: the newest epoch of any key, and num - 1 before it; none when no key
    has a value (zero(@m): upstream's range underflows, and it prints ``<no data>``)."""
    last = max((max(s) for s in series if s), default=None)
    return (1, 0) if last is None else (last - num + 1, last)


def rows(series: Mapping[int, int], first: int, last: int, interval: int, tai_off: int) -> list[Row]:
    """A key's rows: each epoch of [first, last] from its own first value in that range."""
    start = min((e for e in series if e >= first), default=last)    # none in range: the last, empty
    return [(e * interval - tai_off, series.get(e)) for e in range(max(first, start), last + 1)]


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def _offset(span: int, part: int, whole: int) -> int:
    """int((float)span * (float)part / (float)whole), in float32 as upstream computes it."""
    return int(_f32(_f32(_f32(float(span)) * _f32(float(part))) / _f32(float(whole))))


def _unit(spacing: int) -> int:
    """The fraction digits a spacing of rows needs: 0 (s), 3 (ms), 6 (us) or 9 (ns)."""
    return 0 if spacing >= 10**9 else 3 if spacing >= 10**6 else 6 if spacing >= 10**3 else 9


def _stamp(ns: int, digits: int) -> str:
    sec, frac = divmod(ns, 10**9)
    text = time.strftime("%H:%M:%S", time.localtime(sec))
    return f"{text}.{frac // 10 ** (9 - digits):0{digits}d}" if digits else text


def render(series_rows: list[Row], signed: bool = True) -> str:
    """The chart of one key's rows, with its trailing newline; ``<no data>`` (no newline) for none.
    ``signed``: int64 values, else uint64 (a scale widened by one each way stops at 0 and 2**64 - 1)."""
    if not series_rows:
        return "<no data>"
    values = [v for _, v in series_rows if v is not None]
    lo = hi = series_rows[0][1]
    if values:
        lo, hi = min(values), max(values)
    if lo == hi and lo is not None and hi is not None:
        floor, ceiling = (-(1 << 63), (1 << 63) - 1) if signed else (0, (1 << 64) - 1)
        lo, hi = max(floor, lo - 1), min(ceiling, hi + 1)
    spacing = (series_rows[-1][0] - series_rows[0][0]) // max(1, len(series_rows) - 1)
    digits = _unit(spacing)
    unit = {0: "", 3: ".ms", 6: ".μs", 9: ".ns"}[digits]
    size = 8 + (1 + digits if digits else 0)      # the time column (upstream counts μs as 2 bytes: it pads
    head = "hh:mm:ss" + unit                       # one column less, which is kept)
    low, high = ("null" if lo is None else str(lo)), ("null" if hi is None else str(hi))
    scale = f"{low:<{_PAD}}{high:>{_WIDTH - _PAD}}"
    head_pad = size + 1 - (len(head.encode()) - len(head))
    out = [" " * (size + 1) + scale, f"{head:<{head_pad}}|{'_' * (_WIDTH - 2)}|"]
    zero = _offset(_WIDTH, lo, lo - hi) if lo is not None and hi is not None and lo < 0 < hi else 0
    for ns, v in series_rows:
        line = [" "] * _WIDTH
        line[0] = line[-1] = "|"
        if zero > 0:
            line[zero] = "."
        if v is None:
            out.append(f"{_stamp(ns, digits)} {''.join(line)} -")
            continue
        point = _WIDTH // 2
        if lo != hi and lo is not None and hi is not None:
            point = _offset(_WIDTH - 1, lo - v, lo - hi)
        line[max(0, min(_WIDTH - 1, point))] = "*"
        out.append(f"{_stamp(ns, digits)} {''.join(line)} {v}")
    out.append(" " * size + " v" + "_" * (_WIDTH - 2) + "v")
    out.append(" " * size + " " + scale)
    return "\n".join(out) + "\n"


def json_rows(series_rows: list[Row]) -> str:
    """``[{"interval_start": "YYYY-MM-DD HH:MM:SS.nnnnnnnnn", "value": v}, ...]``: UTC, the rows with a value."""
    items = []
    for ns, v in series_rows:
        if v is None:
            continue
        sec, frac = divmod(ns, 10**9)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec)) + f".{frac:09d}"
        items.append(f'{{"interval_start": "{stamp}", "value": {v}}}')
    return "[" + ", ".join(items) + "]"
