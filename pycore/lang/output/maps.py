"""Maps as bpftrace 0.17 prints them at exit and on print(@m[, top[, div]]), in text and ``-f json``.

The order is bpftrace's:

- count, sum, min, max and integer maps: by value, ascending (``std::sort``
  on the order the map was read in; ties stay in that order up to 16 keys);
- avg and stats maps: by the average; hist and lhist maps: by the total
  count; both starting from the keys' byte order (ints little-endian, so
  256 comes before 1) as bpftrace's ``std::map`` holds them;
- every other map (strings, stacks, symbols, structs): by key, first key
  element first, integers compared as unsigned 64-bit (-1 after 5),
  strings bytewise; other key types keep the read order.

``top`` keeps the last ``top`` entries of that order; ``div`` divides
count/sum/int/min/max/avg values and hist counts (not lhist, not stats:
bpftrace warns and ignores both there).  Text layout: entries one a line
and a newline after the map; stats and avg maps end with a blank line; each
hist entry is ``@h[key]:`` then its rows (0.17 put a space after the colon; 0.23.2 does not), a blank line between entries;
stack and symbol values are not separated at all (a bpftrace quirk kept:
``@s[1]: f@s[2]: g``).  An empty map prints its newline(s) in text and
nothing in json.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pycore.hist import BAR_WIDTH, render_linear, render_log2
from pycore.lang.output import tseries as T
from pycore.lang.output.stdsort import std_sort
from pycore.lang.output.values import format_key, format_value, is_stack_type, quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Entry = tuple[tuple, Any]   # (key tuple, value)

__all__ = ["format_map", "map_json", "sort_entries", "hist_json", "folded"]

_M64 = (1 << 64) - 1
_BY_VALUE = ("count", "sum", "min", "max")
_STATS = ("avg", "stats")
_HISTS = ("hist", "lhist")


def _cdiv(a: int, b: int) -> int:
    """C integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _entries(entries: Iterable[Entry] | Mapping[Any, Any]) -> list[Entry]:
    items = entries.items() if isinstance(entries, Mapping) else entries
    return [(k if isinstance(k, tuple) else (k,), v) for k, v in items]


def _stats(value: Any) -> tuple[int, int]:
    """(count, total) of an avg/stats value: a pair, or a dict with count and total."""
    if isinstance(value, Mapping):
        return int(value.get("count", 0)), int(value.get("total", 0))
    count, total = value[0], value[1]
    return int(count), int(total)


def _average(value: Any) -> int:
    count, total = _stats(value)
    return _cdiv(total, count) if count else 0


def _hist_total(value: Any) -> int:
    items = value.values() if isinstance(value, Mapping) else value
    return sum(sum(v) if isinstance(v, list) else int(v) for v in items)


def _key_bytes(key: tuple, key_types: Sequence[Any] | None) -> bytes:
    """The key as bytes, as bpftrace's std::map orders hist/stats keys."""
    out = bytearray()
    types = list(key_types or ())
    for i, v in enumerate(key):
        t = types[i] if i < len(types) else None
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, int):
            size = getattr(t, "size", 8) or 8
            out += (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        elif isinstance(v, str):
            size = getattr(t, "size", 64) or 64
            out += v.encode("utf-8", "surrogateescape")[:size].ljust(size, b"\0")
        elif isinstance(v, (bytes, bytearray)):
            out += bytes(v)
    return bytes(out)


def _key_sort(v: Any, t: Any) -> Any:
    """One key element's place in bpftrace's sort_by_key: unsigned ints, bytewise strings, else no order."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int) and type(t).__name__ in ("Int", "Bool", "NoneType") and not is_stack_type(t):
        size = getattr(t, "size", 8) or 8
        return (0, v & ((1 << (8 * min(size, 8))) - 1), b"")
    if isinstance(v, str) and type(t).__name__ in ("Str", "NoneType"):
        return (0, 0, v.encode("utf-8", "surrogateescape").split(b"\0", 1)[0])
    return (0, 0, b"")


def _int_valued(kind: str, entries: list[Entry], value_type: Any) -> bool:
    if kind in _BY_VALUE:
        return True
    if value_type is not None:
        return type(value_type).__name__ in ("Int", "Bool") and not is_stack_type(value_type)
    return kind == "int" and all(isinstance(v, int) for _, v in entries)


def sort_entries(kind: str, entries: Iterable[Entry] | Mapping[Any, Any], *, key_types: Sequence[Any] | None = None,
                 value_type: Any = None) -> list[Entry]:
    """Entries in the order bpftrace prints them (see the module docstring); input order breaks ties."""
    items = _entries(entries)
    if kind in _HISTS or kind in _STATS:
        items.sort(key=lambda e: _key_bytes(e[0], key_types))
        score = _hist_total if kind in _HISTS else _average
        return std_sort(items, key=lambda e: score(e[1]))
    if _int_valued(kind, items, value_type) or type(value_type).__name__ == "Enum":   # enums: by their numbers
        return std_sort(items, key=lambda e: int(e[1]))
    types = list(key_types or ())
    return sorted(items, key=lambda e: tuple(_key_sort(v, types[i] if i < len(types) else None)
                                             for i, v in enumerate(e[0])))


def _top(items: list[Entry], top: int) -> list[Entry]:
    return items[len(items) - top:] if top and len(items) > top else items


def _int_text(value: Any, div: int) -> str:
    return str(_cdiv(int(value), div)) if div > 1 else str(int(value))


def _hist_rows(value: Any, kind: str, lhist: tuple[int, int, int] | None, div: int, k: int = 0) -> str:
    if kind == "lhist":
        if lhist is None:
            raise ValueError("an lhist map needs its (min, max, step) to be printed")
        return render_linear(value, *lhist)
    rows = render_log2(value, k)
    if div <= 1 or not rows:
        return rows
    # bpftrace divides the count column (not the bars) by div
    out = []
    tail = 3 + BAR_WIDTH + 1          # " |" + bar + "|" + "\n"
    for line in rows.splitlines(keepends=True):
        head, rest = line[:-tail], line[-tail:]
        count = head.split()[-1]
        width = max(8, len(count))
        out.append(f"{head[:-width]}{int(count) // div:>8}{rest}")
    return "".join(out)


def format_map(name: str, kind: str, entries: Iterable[Entry] | Mapping[Any, Any], *, keyed: bool | None = None,
               lhist: tuple[int, int, int] | None = None, top: int = 0, div: int = 0,
               key_types: Sequence[Any] | None = None, value_type: Any = None, k: int = 0,
               tseries: tuple[int, int, int, bool] | None = None) -> str:
    """One map as bpftrace's text output prints it: sorted, ``@name[k1, k2]: value`` lines, trailing newline(s).

    ``kind`` is the map's aggregation (count, sum, min, max, avg, stats,
    hist, lhist) or what it holds (int, str, ...); ``entries`` are
    ``(key tuple, value)`` pairs or a dict (non-tuple keys are one-element
    keys): avg/stats values are ``(count, total)``, hist/lhist values
    ``{bucket index: count}`` (or a list), stacks lists of frames.
    ``keyed`` is unused (keys say it) and kept for callers that pass it.
    ``k`` is a hist's buckets per power of 2, as 2**k (``hist(v, k)``).
    ``tseries`` is a tseries map's (interval ns, intervals, CLOCK_TAI - CLOCK_REALTIME ns, signed); its values
    are ``{epoch: value}``, its entries in the order to print them.
    """
    del keyed
    if kind == "tseries":
        return "\n".join(f"{name}{_key_head(key, key_types)}:\n{chart}" for key, chart in
                         _tseries_charts(entries, tseries, lambda rows: T.render(rows, tseries[3]))) + "\n"
    div = div or 1
    items = sort_entries(kind, entries, key_types=key_types, value_type=value_type)
    if kind == "stats":
        top, div = 0, 1
    items = _top(items, top)
    elems = []
    for key, value in items:
        head = name + (f"[{', '.join(format_key(key, key_types))}]" if key else "")
        if kind in _HISTS:
            elems.append(f"{head}:\n{_hist_rows(value, kind, lhist, div, k)}")
        elif kind == "stats":
            count, total = _stats(value)
            avg = _cdiv(total, count) if count else 0
            elems.append(f"{head}: count {count}, average {avg}, total {total}")
        elif kind == "avg":
            elems.append(f"{head}: {_cdiv(_average(value), div)}")
        elif isinstance(value, int) and not isinstance(value, bool) and _int_valued(kind, items, value_type) \
                and type(value_type).__name__ != "Bool":     # true/false print as words
            elems.append(f"{head}: {_int_text(value, div)}")
        else:
            elems.append(f"{head}: {format_value(value, value_type)}")
    sep = "" if value_type is not None and is_stack_type(value_type) else "\n"
    if value_type is None and items and all(isinstance(v, list) and all(isinstance(f, str) for f in v)
                                            for _, v in items) and kind not in _HISTS:
        sep = ""
    end = "\n\n" if kind in _STATS else "\n"
    return sep.join(elems) + end


def hist_json(value: Any, kind: str = "hist", lhist: tuple[int, int, int] | None = None, div: int = 1,
              k: int = 0) -> str:
    """One histogram as bpftrace's json: ``[{"min": 4, "max": 7, "count": 1}, ...]``, zero rows trimmed."""
    counts: dict[int, int] = {}
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for i, c in items:
        counts[int(i)] = counts.get(int(i), 0) + (sum(c) if isinstance(c, list) else int(c))
    used = [i for i, c in counts.items() if c > 0]
    if not used:
        return "[]"
    rows = []
    for i in range(min(used), max(used) + 1):
        c = counts.get(i, 0)
        if kind == "lhist":
            if lhist is None:
                raise ValueError("an lhist map needs its (min, max, step) to be printed")
            lo, hi, step = lhist
            if i == 0:
                bounds = f'"max": {lo - 1}, '
            elif i == (hi - lo) // step + 1:
                bounds = f'"min": {hi}, '
            else:
                bounds = f'"min": {(i - 1) * step + lo}, "max": {i * step + lo - 1}, '
        else:
            c //= div
            if i == 0:
                bounds = '"max": -1, '
            elif i <= 2 << k:     # bpftrace's: one value a bucket in the first two sets of 2**k
                bounds = f'"min": {i - 1}, "max": {i - 1}, '
            else:
                n = 1 << k
                low = (1 << (((i - 1) >> k) - 1)) * (n + ((i - 1) & (n - 1)))
                high = (1 << ((i >> k) - 1)) * (n + (i & (n - 1))) - 1
                bounds = f'"min": {low}, "max": {high}, '
        rows.append(f"{{{bounds}\"count\": {c}}}")
    return "[" + ", ".join(rows) + "]"


def map_json(name: str, kind: str, entries: Iterable[Entry] | Mapping[Any, Any], *,
             lhist: tuple[int, int, int] | None = None, top: int = 0, div: int = 0,
             key_types: Sequence[Any] | None = None, value_type: Any = None, keyed: bool | None = None,
             k: int = 0, tseries: tuple[int, int, int, bool] | None = None) -> str:
    """One map as bpftrace's ``-f json`` line (with its newline), or "" for an empty map as bpftrace.

    ``{"type": "map"|"hist"|"stats", "data": {"@name": ...}}``: a keyed map's
    keys are its elements joined by ``,`` as one string.  ``keyed`` says
    whether the map has keys when ``entries`` is empty or a scalar's
    ``{(): v}``; by default a map has keys when its entries do.
    """
    if kind == "tseries":
        charts = _tseries_charts(entries, tseries, T.json_rows)
        if not charts:
            return ""
        elems = [f"{quoted(','.join(_json_key(key, key_types)))}: {text}" if key else text for key, text in charts]
        body = "{" + ", ".join(elems) + "}" if charts[0][0] else elems[0]
        return f'{{"type": "tseries", "data": {{{quoted(name)}: {body}}}}}\n'
    div = div or 1
    items = sort_entries(kind, entries, key_types=key_types, value_type=value_type)
    if not items:
        return ""
    if kind == "stats":
        top, div = 0, 1
    items = _top(items, top)
    has_keys = bool(items[0][0]) if keyed is None else keyed
    json_keys = [None if type(t).__name__ == "Enum" else t for t in key_types or ()]   # enums: numbers in json
    elems = []
    for key, value in items:
        if kind in _HISTS:
            text = hist_json(value, kind, lhist, div, k)
        elif kind == "stats":
            count, total = _stats(value)
            avg = _cdiv(total, count) if count else 0
            text = f'{{"count": {count}, "average": {avg}, "total": {total}}}'
        elif kind == "avg":
            text = str(_cdiv(_average(value), div))
        elif isinstance(value, int) and not isinstance(value, bool) and _int_valued(kind, items, value_type):
            text = _int_text(value, div)
        else:
            text = format_value(value, value_type, json=True)
        elems.append(f"{quoted(','.join(_json_key(key, json_keys)))}: {text}" if key else text)
    kind_name = "hist" if kind in _HISTS else "stats" if kind in _STATS else "map"
    body = "{" + ", ".join(elems) + "}" if has_keys else ", ".join(elems)
    return f'{{"type": "{kind_name}", "data": {{{quoted(name)}: {body}}}}}\n'


def _key_head(key: tuple, key_types: Sequence[Any] | None) -> str:
    return f"[{', '.join(format_key(key, key_types))}]" if key else ""


def _tseries_charts(entries: Iterable[Entry] | Mapping[Any, Any], shape: tuple[int, int, int, bool] | None,
                    draw: Callable[[list[T.Row]], str]) -> list[tuple[tuple, str]]:
    """(key, drawn series) of each entry of a tseries map, over the epochs the newest of them sets."""
    if shape is None:
        raise ValueError("a tseries map needs its (interval, intervals, TAI offset, signed) to be printed")
    interval, num, tai_off, _ = shape
    items = _entries(entries)
    first, last = T.epoch_range([series for _, series in items], num)
    return [(key, draw(T.rows(series, first, last, interval, tai_off))) for key, series in items]


def _json_key(key: tuple, key_types: Sequence[Any] | None) -> list[str]:
    """A key's elements as bpftrace 0.23.2's -f json writes them, before the whole key is escaped as
    one JSON string: strings, stacks, symbols and buffers escaped already (so escaped twice in the
    line: ``"a\\nb"``, stacks' ``\\n``), pointers in decimal, a struct as a JSON object, a tuple among
    them as JSON (``"[1,\"x\"],2"``).  bpftrace 0.17 escaped them once."""
    types = list(key_types or ())
    out = format_key(key, key_types, json=True)
    for i, t in enumerate(types[:len(key)]):
        if type(t).__name__ == "Tuple":
            out[i] = format_value(key[i], t, json=True)
    return out


def folded(value: Iterable[Entry] | Mapping[Any, Any]) -> str:
    """A stack-keyed count map as flame-graph folded lines (``root;...;leaf count``): not bpftrace's, for --folded.

    A stack is a list (or, to be a dict key, a tuple) of frames, leaf first.
    """
    lines = []
    for key, count in _entries(value):
        if isinstance(value, Mapping) and key and all(isinstance(f, str) for f in key) and len(key) > 1:
            key = (key,)     # a dict keyed by the frames tuple itself
        frames = next((k for k in key if isinstance(k, (list, tuple))), None)
        if frames is None:
            frames = [str(k) for k in key]
        else:
            frames = list(reversed(frames))
        lines.append(f"{';'.join(frames) or '[unknown]'} {count}")
    return "".join(line + "\n" for line in sorted(lines))

