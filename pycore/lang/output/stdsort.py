"""libstdc++'s ``std::sort``, step for step, so equal elements end where bpftrace leaves them.

bpftrace sorts map entries with ``std::sort``, which is not stable: entries
with equal values come out in an order that depends on the algorithm
(introsort: median-of-three quicksort down to runs of 16, heapsort past
2*log2(n) levels, then insertion sort).  Python's sort is stable, so a
plain ``sorted`` prints ties differently once a map has more than 16 keys.
Given the same input order (and for hist, avg and stats maps bpftrace's
input order is the key bytes', which we rebuild), this gives the same output.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

__all__ = ["std_sort"]

_THRESHOLD = 16


def std_sort(items: list[T], key: Callable[[T], Any]) -> list[T]:
    """A new list ordered as ``std::sort(begin, end, [](a, b) { return key(a) < key(b); })`` would."""
    a = [(key(x), x) for x in items]
    n = len(a)
    if n > 1:
        _introsort(a, 0, n, 2 * (n.bit_length() - 1))
        _final_insertion_sort(a, 0, n)
    return [x for _, x in a]


def _lt(a: list, i: int, j: int) -> bool:
    return a[i][0] < a[j][0]


def _introsort(a: list, first: int, last: int, depth: int) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_sort(a, first, last)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last)
        _introsort(a, cut, last, depth)
        last = cut


def _partition_pivot(a: list, first: int, last: int) -> int:
    mid = first + (last - first) // 2
    _median_to_first(a, first, first + 1, mid, last - 1)
    # unguarded partition of [first + 1, last) around a[first]
    lo, hi = first + 1, last
    pivot = a[first][0]
    while True:
        while a[lo][0] < pivot:
            lo += 1
        hi -= 1
        while pivot < a[hi][0]:
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _median_to_first(a: list, result: int, x: int, y: int, z: int) -> None:
    if _lt(a, x, y):
        if _lt(a, y, z):
            pick = y
        elif _lt(a, x, z):
            pick = z
        else:
            pick = x
    elif _lt(a, x, z):
        pick = x
    elif _lt(a, y, z):
        pick = z
    else:
        pick = y
    a[result], a[pick] = a[pick], a[result]


def _final_insertion_sort(a: list, first: int, last: int) -> None:
    if last - first > _THRESHOLD:
        _insertion_sort(a, first, first + _THRESHOLD)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(a, i)
    else:
        _insertion_sort(a, first, last)


def _insertion_sort(a: list, first: int, last: int) -> None:
    for i in range(first + 1, last):
        if a[i][0] < a[first][0]:
            val = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _linear_insert(a, i)


def _linear_insert(a: list, last: int) -> None:
    val = a[last]
    nxt = last - 1
    while val[0] < a[nxt][0]:
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _heap_sort(a: list, first: int, last: int) -> None:
    n = last - first
    if n >= 2:   # make_heap
        parent = (n - 2) // 2
        while True:
            _adjust_heap(a, first, parent, n, a[first + parent])
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:   # sort_heap: pop_heap(first, last - 1, last - 1) each time
        last -= 1
        val = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, val)


def _adjust_heap(a: list, first: int, hole: int, n: int, val: tuple) -> None:
    top = hole
    child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if a[first + child][0] < a[first + child - 1][0]:
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and a[first + parent][0] < val[0]:
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = val
