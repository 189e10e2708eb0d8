"""Histograms printed exactly as bpftrace prints ``hist()`` and ``lhist()``.

Users compare our output with bpftrace's side by side, so the text follows
bpftrace 0.17's TextOutput byte for byte: labels padded to 16 columns, counts
right-aligned in 8, a bar of ``@`` scaled in single precision to 52 columns
between ``|`` borders, zero rows trimmed at both ends.

Buckets are indexes as bpftrace's BPF code computes them (:func:`log2_bucket`,
:func:`linear_bucket`), so a BPF map keyed by bucket index renders directly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["log2_bucket", "linear_bucket", "log2_bounds", "linear_bounds", "log2_hist", "linear_hist",
           "from_values", "render_log2", "render_linear", "Bucket", "Hist"]

BAR_WIDTH = 52
_F32 = struct.Struct("f")


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def log2_bucket(value: int) -> int:
    """bpftrace's hist() bucket: 0 for negatives, 1 for 0, 2 + floor(log2(v)) above."""
    if value < 0:
        return 0
    if value == 0:
        return 1
    return value.bit_length() + 1


def linear_bucket(value: int, lo: int, hi: int, step: int) -> int:
    """bpftrace's lhist() bucket: 0 below ``lo``, one per ``step``, last at ``hi`` and up."""
    if value < lo:
        return 0
    if value >= hi:
        return (hi - lo) // step + 1
    return (value - lo) // step + 1


def log2_bounds(bucket: int) -> tuple[int | None, int | None]:
    """The values of :func:`log2_bucket`'s ``bucket``: ``(lo, hi)``, lo included, hi not; None where
    the bucket has no bound (bucket 0 holds every negative value: ``(None, 0)``)."""
    if bucket < 0:
        raise ValueError(f"no log2 bucket {bucket}")
    if bucket == 0:
        return None, 0
    if bucket == 1:
        return 0, 1
    return 1 << (bucket - 2), 1 << (bucket - 1)


def linear_bounds(bucket: int, lo: int, hi: int, step: int) -> tuple[int | None, int | None]:
    """The values of :func:`linear_bucket`'s ``bucket`` for ``lhist(v, lo, hi, step)``: ``(lo, hi)``
    as :func:`log2_bounds` (the first bucket is ``(None, lo)``, the last ``(hi, None)``)."""
    last = (hi - lo) // step + 1
    if bucket < 0 or bucket > last:
        raise ValueError(f"no bucket {bucket} in lhist({lo}, {hi}, {step}) (0 to {last})")
    if bucket == 0:
        return None, lo
    if bucket == last:   # from hi, or below it when step does not divide hi - lo (as linear_bucket counts)
        return min(lo + (last - 1) * step, hi), None
    return lo + (bucket - 1) * step, min(lo + bucket * step, hi)


class Bucket:
    """One row of a histogram: the values ``lo <= v < hi`` (None: unbounded) and how many fell there.
    Unpacks as ``lo, hi, count = bucket`` (not a NamedTuple: ``count`` would hide tuple.count)."""

    __slots__ = ("lo", "hi", "count")

    def __init__(self, lo: int | None, hi: int | None, count: int) -> None:
        self.lo = lo
        self.hi = hi
        self.count = count

    def __iter__(self) -> Iterator[int | None]:
        return iter((self.lo, self.hi, self.count))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bucket) and (self.lo, self.hi, self.count) == (other.lo, other.hi, other.count)

    def __hash__(self) -> int:
        return hash((self.lo, self.hi, self.count))

    def __repr__(self) -> str:
        return f"Bucket(lo={self.lo}, hi={self.hi}, count={self.count})"


class Hist:
    """A hist() or lhist() as counts per bucket index, with the bounds of each bucket.

    ``counts`` is what a map read gives (``{bucket: count}``, as ``pycore.trace``'s ``map()``
    returns a hist); ``lhist=(lo, hi, step)`` for a linear one.
    """

    def __init__(self, counts: Mapping[int, int], lhist: tuple[int, int, int] | None = None) -> None:
        self.counts: dict[int, int] = _counts(counts)
        self.lhist = lhist

    def bounds(self, bucket: int) -> tuple[int | None, int | None]:
        """``(lo, hi)`` of one bucket index: lo included, hi not, None unbounded."""
        return linear_bounds(bucket, *self.lhist) if self.lhist else log2_bounds(bucket)

    def buckets(self) -> list[Bucket]:
        """The rows bpftrace prints, in order: every bucket from the first non-empty one to the last
        (empty ones between included), with its bounds."""
        used = [i for i, c in self.counts.items() if c]
        if not used:
            return []
        return [Bucket(*self.bounds(i), count=self.counts.get(i, 0)) for i in range(min(used), max(used) + 1)]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def text(self) -> str:
        """The rows as bpftrace prints them."""
        return render_linear(self.counts, *self.lhist) if self.lhist else render_log2(self.counts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hist) and (self.counts, self.lhist) == (other.counts, other.lhist)

    def __repr__(self) -> str:
        kind = f"lhist{self.lhist}" if self.lhist else "hist"
        return f"<Hist {kind} {self.total} values in {len(self.buckets())} buckets>"


def _log2_label(power: int) -> str:
    suffix = ""
    for p, s in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if power >= p:
            power -= p
            suffix = s
            break
    return f"{1 << power}{suffix}"


def _linear_label(n: int) -> str:
    if n == 0:
        return "0"
    if n % 1048576 == 0:
        return f"{n // 1048576}M"
    if n % 1024 == 0:
        return f"{n // 1024}K"
    return str(n)


def _row(label: str, count: int, top: int) -> str:
    # bpftrace: int bar_width = value / (float)max_value * max_width;
    width = int(_f32(_f32(_f32(count) / _f32(top)) * BAR_WIDTH)) if top else 0
    return f"{label:<16}{count:>8} |{'@' * width:<{BAR_WIDTH}}|\n"


def _counts(buckets: Mapping[int, int] | Any) -> dict[int, int]:
    if hasattr(buckets, "items"):
        items = buckets.items()
    else:
        items = enumerate(buckets)
    out: dict[int, int] = {}
    for k, v in items:
        k = int(k) if not isinstance(k, int) else k
        out[k] = out.get(k, 0) + (sum(v) if isinstance(v, list) else int(v))  # per-CPU lists add up
    return out


def render_log2(buckets: Mapping[int, int] | Iterable[int] | Any, k: int = 0) -> str:
    """Rows of a log2 histogram from bucket index -> count (a dict, a list, or a
    BPF map keyed by bucket index, per-CPU values summed); ``k`` splits each power
    of 2 into 2**k buckets (bpftrace 0.20's ``hist(v, k)``)."""
    if k:
        return _render_log2_split(_counts(buckets), k)
    counts = _counts(buckets)
    used = [i for i, c in counts.items() if c > 0]
    if not used:
        return ""
    top = max(counts.values())
    rows = []
    for i in range(min(used), max(used) + 1):
        if i == 0:
            label = "(..., 0)"
        elif i == 1:
            label = "[0]"
        elif i == 2:
            label = "[1]"
        else:
            label = f"[{_log2_label(i - 2)}, {_log2_label(i - 1)})"
        rows.append(_row(label, counts.get(i, 0), top))
    return "".join(rows)


def log2_split_label(index: int, k: int) -> str:
    """The lower bound of bucket ``index`` of a ``hist(v, k)`` (index >= 2**k), as bpftrace prints it:
    each power of 2 from the (k+1)th on is 2**k buckets, with a K/M/G/.. suffix per 2**10."""
    n = 1 << k
    power = (index >> k) - 1
    decade = power // 10
    return f"{(1 << (power - 10 * decade)) * (n + (index & (n - 1)))}{' KMGTPE'[decade].strip()}"


def _render_log2_split(counts: dict[int, int], k: int) -> str:
    used = [i for i, c in counts.items() if c > 0]
    if not used:
        return ""
    top = max(counts.values())
    rows = []
    for i in range(min(used), max(used) + 1):
        if i == 0:
            label = "(..., 0)"
        elif i <= 2 << k:     # the first two sets of 2**k buckets hold one value each
            label = f"[{i - 1}]"
        else:
            label = f"[{log2_split_label(i - 1, k)}, {log2_split_label(i, k)})"
        rows.append(_row(label, counts.get(i, 0), top))
    return "".join(rows)


def render_linear(buckets: Mapping[int, int] | Iterable[int] | Any, lo: int, hi: int, step: int) -> str:
    """Rows of a linear histogram (bpftrace's ``lhist(v, lo, hi, step)``)."""
    if step <= 0 or hi <= lo:
        raise ValueError(f"lhist needs lo < hi and step > 0 (got {lo}, {hi}, {step})")
    counts = _counts(buckets)
    used = [i for i, c in counts.items() if c != 0]
    if not used:
        return ""
    top = max(counts.values())
    last = (hi - lo) // step + 1
    rows = []
    for i in range(min(used), max(used) + 1):
        if i == 0:
            label = f"(..., {_linear_label(lo)})"
        elif i == last:
            label = f"[{_linear_label(hi)}, ...)"
        else:
            label = f"[{_linear_label((i - 1) * step + lo)}, {_linear_label(i * step + lo)})"
        rows.append(_row(label, counts.get(i, 0), top))
    return "".join(rows)


def _titled(name: str | None, body: str) -> str:
    return body if name is None else f"{name}: \n{body}\n"


def log2_hist(buckets: Mapping[int, int] | Iterable[int] | Any, name: str | None = None) -> str:
    """A log2 histogram; with ``name`` (``"@h"``), titled and spaced as bpftrace prints a map."""
    return _titled(name, render_log2(buckets))


def linear_hist(buckets: Mapping[int, int] | Iterable[int] | Any, lo: int, hi: int, step: int,
                name: str | None = None) -> str:
    return _titled(name, render_linear(buckets, lo, hi, step))


def from_values(values: Iterable[int], lhist: tuple[int, int, int] | None = None) -> dict[int, int]:
    """Bucket counts of raw values: log2, or linear with ``lhist=(lo, hi, step)``."""
    counts: dict[int, int] = {}
    for v in values:
        b = linear_bucket(v, *lhist) if lhist else log2_bucket(v)
        counts[b] = counts.get(b, 0) + 1
    return counts
