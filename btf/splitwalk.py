"""Pass one in two processes, for kernel-sized BTF with no cached index.

Where each record starts is found by a serial walk (a record's length is in
its info word), and on vmlinux that walk and the columns gathered after it
are about 50 ms of pure Python before anything else can start.  The walk
cannot be cut at an arbitrary word, but a record start can be recognised:
from a real one, a run of records decodes with valid kinds, zeroed unused
bits and names inside the string table, where from a word in the middle of a
record it almost never does.  So a helper process walks from such a guess
near the middle while this one walks up to it.  If this one's walk lands on
the guess exactly, the guess was a record start and the halves join; if it
steps over it (or the helper fails), this one walks on alone.  The result
never depends on the guess, only the time does.
"""

from __future__ import annotations

import mmap
import os
from array import array

from .kinds import MAX_KIND, record_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Walk = Callable[[array, int, int], "tuple[array, int]"]
    Gather = Callable[..., "list[array]"]

# Records get smaller towards the end of a kernel's type section (functions
# and their prototypes), so half the records end at about 62% of the words.
SPLIT_AT = 0.62
PLAUSIBLE_RUN = 16   # records that must decode cleanly from a guess
SEARCH_WORDS = 4096  # how far past the split point to look for one
_UNUSED_INFO_BITS = 0x60FF0000
SIGKILL = 9  # signal.SIGKILL on Linux, without the 1.4 ms the signal module takes to import


def _plausible(words: array, at: int, str_len: int) -> bool:
    """Whether ``PLAUSIBLE_RUN`` records decode cleanly from word ``at``."""
    n = len(words)
    for _ in range(PLAUSIBLE_RUN):
        if at + 3 > n:
            return False
        info = words[at + 1]
        kind = (info >> 24) & 0x1F
        if info & _UNUSED_INFO_BITS or not 0 < kind <= MAX_KIND or words[at] >= str_len:
            return False
        at += record_words(info)
    return at <= n


def guess_start(words: array, str_len: int) -> int | None:
    """A word near the split point that looks like a record start, if any."""
    first = int(len(words) * SPLIT_AT)
    for at in range(first, min(first + SEARCH_WORDS, len(words))):
        if _plausible(words, at, str_len):
            return at
    return None


def walk_in_two(words: array, middle: int, walk: Walk,
                gather: Gather) -> tuple[tuple[array, array, array, array], int] | None:
    """(offsets, names, infos, sizes) of the records, and where the walk
    ended (the end of the section, unless the BTF is bad), with a helper
    walking from ``middle`` (see :func:`guess_start`); None when there is no
    process to be had, and the caller walks alone.  ``walk(words, start,
    stop)`` and ``gather(words, offsets, *shifts)`` are the spec's own."""
    # The helper's half: a count, then four columns of at most one entry
    # per three words (the smallest record).
    most = (len(words) - middle) // 3 + 1
    shared = mmap.mmap(-1, 4 + 16 * most)
    try:
        ready, done = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(ready)
            os.close(done)
            return None
        if pid == 0:  # the helper: never returns into the caller's code
            try:
                os.close(ready)
                if _helper(words, middle, walk, gather, shared):
                    os.write(done, b"1")
            finally:
                os._exit(0)
        os.close(done)
        try:
            return _join(words, middle, walk, gather, shared, ready)
        finally:
            os.close(ready)
            try:
                os.kill(pid, SIGKILL)  # done by now, unless this side gave up on it
            except ProcessLookupError:  # pragma: no cover
                pass
            os.waitpid(pid, 0)
    finally:
        shared.close()


def _helper(words: array, middle: int, walk: Walk, gather: Gather, shared: mmap.mmap) -> bool:
    """Walk from ``middle`` to the end and publish the half, if it ends there."""
    offsets, end = walk(words, middle, len(words))
    if end != len(words):
        return False  # not a clean end: the other side will find out why
    count = len(offsets)
    at = 4
    for column in (offsets, *gather(words, offsets, 0, 1, 2)):
        shared[at:at + 4 * count] = column
        at += 4 * count
    shared[:4] = count.to_bytes(4, "little")
    return True


def _join(words: array, middle: int, walk: Walk, gather: Gather, shared: mmap.mmap,
          ready: int) -> tuple[tuple[array, array, array, array], int]:
    offsets, end = walk(words, 0, middle)
    names, infos, sizes = gather(words, offsets, 0, 1, 2)
    if end == middle and os.read(ready, 1) == b"1":
        count = int.from_bytes(shared[:4], "little")
        at = 4
        with memoryview(shared) as view:
            for column in (offsets, names, infos, sizes):
                column.frombytes(view[at:at + 4 * count])
                at += 4 * count
        return (offsets, names, infos, sizes), len(words)
    # The guess was inside a record, or the helper could not finish:
    # carry on from where this walk stopped.
    rest, end = walk(words, end, len(words))
    offsets.extend(rest)
    for column, more in zip((names, infos, sizes), gather(words, rest, 0, 1, 2)):
        column.extend(more)
    return (offsets, names, infos, sizes), end
