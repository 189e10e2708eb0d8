"""What the checker hands on to the lowering and the runtime: each map's agreed shape, each checked
(block, target) pair's types and known values, and the names of the probe kinds both read.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.probes import Target
from pycore.lang.types import Type, width
from pycore.record import field, record


# value kinds of maps filled by aggregation functions
AGGREGATES = ("count", "sum", "min", "max", "avg", "stats", "hist", "lhist", "tseries")
# those whose values are kept in buckets, the bucket's number after the key (8 bytes)
BUCKETED = ("hist", "lhist", "tseries")
# those that print but never read as a value, nor print one key's (bpftrace's refusals)
PRINT_ONLY = ("hist", "lhist", "stats", "tseries")
# those whose maps read as a number in an expression, as in bpftrace 0.21+: combined over the CPUs
# (an avg's total / count); stats, hist and lhist maps are refused there
READ_AGGREGATES = ("count", "sum", "min", "max", "avg")


@record
class MapInfo:
    """What a map holds, agreed by every use in the script."""

    name: str
    keys: tuple[Type, ...] | None = None      # None: not keyed yet; () scalar map
    kind: str = ""                             # "int", "str", or one of AGGREGATES
    value: Type | None = None                  # for "int"/"str"
    lhist: tuple[int, int, int] | None = None  # (min, max, step)
    tseries: tuple[int, int, str] | None = None   # (interval_ns, num_intervals, agg: "" or avg/max/min/sum)
    log2_k: int = 0                            # hist(v, k): 2**k buckets per power of 2 (bpftrace 0.20)
    pos: A.Pos | None = None
    decl: A.MapDecl | None = None              # its declaration (let @m = lruhash(N)), if any

    @property
    def key_size(self) -> int:
        return sum(_slot(t) for t in self.keys or ()) or 8


_slot = width


@record
class Checked:
    """The checker's result for one (probe block, target) pair."""

    block: A.ProbeBlock
    target: Target
    types: dict[int, Type] = field(default_factory=dict)       # id(expr node) -> its type
    consts: dict[int, int] = field(default_factory=dict)       # id(node) -> value known when checked (sizeof)
    ip_relative: dict[int, int] = field(default_factory=dict)  # id(node) -> its distance from the probe's ip (uaddr)
    blobs: dict[int, bytes] = field(default_factory=dict)      # id(node) -> bytes known when checked (pton)
    comptime: dict[int, bool] = field(default_factory=dict)    # id(if comptime statement) -> the branch taken
    fields: dict[int, int] = field(default_factory=dict)       # id($record.name) -> the element's index
    variables: dict[str, Type] = field(default_factory=dict)   # a variable's key -> its type
    var_keys: dict[int, str] = field(default_factory=dict)     # id(Var node) -> its variable's key
    loops: dict[int, Type] = field(default_factory=dict)       # id(for statement) -> its variable's type
    kfuncs: dict[int, tuple[int, ...]] = field(default_factory=dict)  # id(call) -> what it needs of BTF
    # (comm(pid): bpf_task_from_pid's and bpf_task_release's ids, comm's offset in task_struct)
    assigns: dict[int, A.Assign] = field(default_factory=dict)  # id(call) -> what it sets (find(): $v = @m[k])
    limits: dict[int, int] = field(default_factory=dict)   # id(call) -> bytes it reads (strlen(ptr): max_strlen + 1)
    merged: dict[int, Type] = field(default_factory=dict)  # id(tuple == tuple) -> the type both are compared as
    typeinfo: dict[int, A.Tuple] = field(default_factory=dict)   # id(typeinfo(x)) -> the record it stands for

    def type_of(self, node: A.Expr) -> Type:
        return self.types[id(node)]

    def var_key(self, node: A.Var) -> str:
        """The key of the variable ``node`` names, in :attr:`variables`: its name, or ``name#N`` for the
        N-th variable of that name in the probe (block scoping: ``$x`` of two sibling blocks are two)."""
        return self.var_keys.get(id(node), node.name)


USER_PROBES = frozenset({"uprobe", "uretprobe", "usdt"})
