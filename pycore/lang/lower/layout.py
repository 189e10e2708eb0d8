"""What the programs of one script share and how a program lays out its memory.

The record tags the runtime dispatches on, the per-CPU scratch buffer's size, the
:class:`Layout` (maps, actions, stack maps) shared by every program of a script, and
the :class:`_Frame` that hands out stack slots and scratch regions while one program
is lowered.
"""

from __future__ import annotations

from pycore.lang.check import MapInfo
from pycore.lang.types import Type
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.lang.lower.gen import Gen


SCRATCH_SIZE = 32768         # per-CPU work area (strings, keys, values, records) at most: a per-CPU
                             # map's value can be no larger (the kernel's PCPU_MIN_UNIT_SIZE); each
                             # script's is as large as its programs need (Layout.scratch_used)
LOST_OFF = 0                 # scratch[0:8]: events this CPU could not put in the ring
REFUSED_OFF = 8              # scratch[8 + 8 * i]: new keys the script's map i refused, on this CPU (full)
MAX_STACK = 512
BPF_ANY, BPF_NOEXIST = 0, 1
ZERO_STORES = 32             # zero or copy at most this many words with stores; more with one helper call
R0_LENGTH = -1               # string_into's answer: r0 holds the *_str helper's result (the length with the NUL)
BPF_F_USER_STACK = 1 << 8

# record tags: what the runtime does with a ring-buffer record
TAG_PRINTF, TAG_EXIT, TAG_PRINT_MAP, TAG_CLEAR, TAG_ZERO, TAG_TIME, TAG_PRINT_VALUE, TAG_JOIN = range(8)
TAG_SYSTEM, TAG_CAT = 8, 9
TAG_HELPER_ERROR = 10          # a helper failed where bpftrace 0.23.2 warns (delete of a missing key)


@record
class Action:
    """One output statement: its tag, and what the runtime needs to format its record."""

    tag: int
    text: str = ""                                   # printf/time format, map name, system command
    args: list[Type] = field(default_factory=list)   # argument types in record order
    extra: tuple = ()


@record
class Layout:
    """What every program of a script shares: maps by name, actions by index, constant strings."""

    maps: dict[str, MapInfo]
    actions: list[Action] = field(default_factory=list)
    stack_maps: dict[tuple[bool, int], str] = field(default_factory=dict)
    cpid: int = 0                      # the -c command's pid (the cpid builtin)
    scratch_used: int = 0              # the most scratch bytes any of the programs uses: the map's value size

    def refused_off(self, name: str) -> int:
        """Where in scratch the count of new keys map ``name`` refused (it was full) is kept: one u64
        a map, in the order of :attr:`maps`, after the lost-events counter."""
        return REFUSED_OFF + 8 * list(self.maps).index(name)

    @property
    def counters_end(self) -> int:
        """Where the counters at the start of scratch end (lost events, then keys refused by each map)."""
        return REFUSED_OFF + 8 * len(self.maps)

    def action(self, a: Action) -> int:
        for i, old in enumerate(self.actions):
            if old == a:
                return i
        self.actions.append(a)
        return len(self.actions) - 1


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


class _Frame:
    """Stack slots (8 bytes, below r10) and scratch regions (above r8), handed out like a stack."""

    def __init__(self, gen: Gen) -> None:
        self.gen = gen
        self.stack = 0            # bytes used below r10
        self.scratch = gen.layout.counters_end   # bytes used in the scratch buffer (first the counters)

    def slot(self) -> int:
        self.stack += 8
        if self.stack > MAX_STACK:
            raise self.gen.error(None, "the probe needs more than 512 bytes of stack: simplify its expressions")
        return -self.stack

    def region(self, size: int) -> int:
        off = self.scratch
        self.scratch += _align8(size)
        if self.scratch > SCRATCH_SIZE:
            raise self.gen.error(None, f"the probe needs more than {SCRATCH_SIZE} bytes of strings and records "
                                       "(a lower max_strlen makes its strings shorter)")
        layout = self.gen.layout
        layout.scratch_used = max(layout.scratch_used, self.scratch)
        return off

    def mark(self) -> tuple[int, int]:
        return self.stack, self.scratch

    def release(self, mark: tuple[int, int]) -> None:
        self.stack, self.scratch = mark
