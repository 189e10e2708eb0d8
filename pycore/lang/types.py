"""The value types of the trace language, and how BTF and tracefs types map onto them.

bpftrace's rules: integers are 64-bit in expressions (a field keeps its size
and sign until it is read), strings are fixed-size buffers (64 bytes unless
``str(x, n)`` says otherwise), pointers carry the type they point to (from
BTF) and the address space they point into, structs are places in memory
that can be printed or have their fields taken.
"""

from __future__ import annotations

from pycore.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec
    from btf import types as T

__all__ = ["Type", "Int", "Bool", "BOOL", "Enum", "enum_names", "TextInt", "Timestamp", "CgroupPath", "Username", "Strerror", "SyscallName", "SignalName", "Str", "Ptr", "Record", "Array", "Stack", "Inet", "Mac", "Buffer", "Tuple", "Void", "INT64", "UINT64",
           "STRING_SIZE", "COMM", "USYM", "from_btf", "type_name", "width", "is_buffer", "is_aggregate"]

STRING_SIZE = 64   # bpftrace's default for str() and string map values


class Type:
    """A value's type: its size in a record or on the stack, and how to print it."""

    size: int = 8


@record(frozen=True)
class Int(Type):
    size: int = 8
    signed: bool = True
    display: str = ""       # "", "ksym", "usym" (and TextInt's kinds): printed as text, not a number

    def __str__(self) -> str:
        return f"{'' if self.signed else 'u'}int{self.size * 8}"


@record(frozen=True)
class Bool(Int):
    """``true`` and ``false`` (bpftrace 0.23): an integer in arithmetic, conditions and printf's ``%d``;
    ``print()``, map keys and values print it as ``true``/``false`` (json: 1/0, as 0.23.2)."""

    size: int = 8
    signed: bool = False

    def __str__(self) -> str:
        return "bool"


BOOL = Bool()


@record(frozen=True)
class Enum(Int):
    """A C enum's value (an enum constant, a field of enum type, ``(enum foo)3``): an integer in
    arithmetic and printf's ``%d``; printed by its enumerator's name in maps, ``print()`` and ``%s``, as
    bpftrace 0.21+ prints it (json keeps the number)."""

    signed: bool = False
    enum_id: int = 0            # the enum's BTF id in ``spec``
    spec: Spec | None = None

    def __str__(self) -> str:
        return type_name(self.spec, self.enum_id) if self.spec else "enum"

    def names(self) -> dict[int, str]:
        """The enum's values -> their (first) names."""
        return enum_names(self.spec, self.enum_id) if self.spec else {}


_ENUM_NAMES: dict[tuple[int, int], dict[int, str]] = {}


def enum_names(spec: Spec, enum_id: int) -> dict[int, str]:
    """value -> name of a BTF enum's constants (the first name of a value), read once per enum."""
    key = (id(spec), enum_id)
    names = _ENUM_NAMES.get(key)
    if names is None:
        from btf.layout import skip

        names = {}
        for v in getattr(skip(spec.type(enum_id)), "values", ()):
            names.setdefault(v.value, v.name)
        _ENUM_NAMES[key] = names
    return names


@record(frozen=True)
class TextInt(Int):
    """An integer the probe keeps and user space turns into text when it prints it (printf's ``%s``, map
    keys and values); no arithmetic, no condition. ``display`` names the kind."""

    size: int = 8
    signed: bool = False


@record(frozen=True)
class Timestamp(TextInt):
    """What ``strftime(fmt, ns)`` gives: nanoseconds since boot, printed as ``fmt`` formats the wall
    clock time (``%f``: microseconds), as bpftrace's timestamp type."""

    display: str = "strftime"
    fmt: str = ""

    def __str__(self) -> str:
        return "timestamp"


@record(frozen=True)
class CgroupPath(TextInt):
    """What ``cgroup_path(id[, filter])`` gives: the cgroup id, printed as its paths in the mounted
    hierarchies whose names match ``filter`` (:mod:`pycore.kernel.cgroup`)."""

    display: str = "cgroup_path"
    filter: str = "*"

    def __str__(self) -> str:
        return "cgroup_path"


@record(frozen=True)
class Username(TextInt):
    """What ``username`` gives: the uid, printed as its user's name (the uid when it has none), as bpftrace."""

    display: str = "username"

    def __str__(self) -> str:
        return "username"


@record(frozen=True)
class Strerror(TextInt):
    """What ``strerror(n)`` gives (bpftrace 0.21): the error number, printed as the C library's text
    for it ("No such file or directory"), as bpftrace prints it."""

    display: str = "strerror"

    def __str__(self) -> str:
        return "strerror_t"


@record(frozen=True)
class SyscallName(TextInt):
    """What ``syscall_name(nr)`` gives (bpftrace 0.25): the number, printed as the system call's name
    on x86-64 (:mod:`pycore.lang.syscalls`). Upstream's is a string[64] it copies from a table in BPF;
    here the table is read where the value is printed, as strerror's text is."""

    display: str = "syscall_name"

    def __str__(self) -> str:
        return "string"


@record(frozen=True)
class SignalName(TextInt):
    """What ``signal_name(sig)`` gives (bpftrace 0.26): the number, printed as the signal's description
    (:func:`pycore.lang.signals.signal_name`), read where the value is printed as syscall_name's is."""

    display: str = "signal_name"

    def __str__(self) -> str:
        return "string"


@record(frozen=True)
class Str(Type):
    size: int = STRING_SIZE

    def __str__(self) -> str:
        return f"string[{self.size}]"


@record(frozen=True)
class Ptr(Type):
    """A pointer value. ``target`` is the BTF id of what it points to (0: void/unknown); ``pointee``
    instead, a value of pycore's own that BTF has no type for (``&$tuple``, ``&$user``: bpftrace
    0.25's address-of a variable)."""

    target: int = 0
    user: bool = False       # points into user memory (uprobe/usdt arguments, syscall pointers)
    spec: Spec | None = None
    size: int = 8
    pointee: Type | None = None

    def __str__(self) -> str:
        if self.pointee is not None:
            return f"{self.pointee} *"
        return f"{type_name(self.spec, self.target) if self.spec else 'void'} *"


@record(frozen=True)
class Record(Type):
    """A struct or union in memory (reached through a pointer, or a tracepoint's args)."""

    btf_id: int = 0
    size: int = 0
    user: bool = False
    spec: Spec | None = None

    def __str__(self) -> str:
        return type_name(self.spec, self.btf_id) if self.spec else "struct"


@record(frozen=True)
class Array(Type):
    elem_id: int = 0
    count: int = 0
    elem_size: int = 0
    user: bool = False
    spec: Spec | None = None

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.count * self.elem_size

    def __str__(self) -> str:
        return f"{type_name(self.spec, self.elem_id) if self.spec else '?'}[{self.count}]"


@record(frozen=True)
class Stack(Type):
    """A stack id from bpf_get_stackid; ``user`` stacks are keyed with the pid too.

    ``mode`` is bpftrace's stack mode: "" (its default, ``bpftrace``) or ``perf``.
    """

    user: bool = False
    limit: int = 127
    size: int = 8
    mode: str = ""

    def __str__(self) -> str:
        return "ustack" if self.user else "kstack"


@record(frozen=True)
class Inet(Type):
    """What ``ntop()`` gives, as bpftrace's inet type: the address family (8 bytes), then 16 address bytes."""

    size: int = 24

    def __str__(self) -> str:
        return "inet"


@record(frozen=True)
class Mac(Inet):
    """What ``macaddr()`` gives: six address bytes, kept in an inet's 24-byte layout (family 0, then
    the bytes) so that variables, map keys and values, ternaries and printf treat both alike."""

    def __str__(self) -> str:
        return "mac"


@record(frozen=True)
class Buffer(Inet):
    """What ``buf()`` gives: the length (8 bytes), then up to :data:`STRING_SIZE` bytes, zero-padded.

    One size for every buffer, so that two of them in one variable, map key or
    value always fit; only the length read differs. %r prints it.
    """

    size: int = 8 + STRING_SIZE

    def __str__(self) -> str:
        return "buffer"


@record(frozen=True)
class Tuple(Inet):
    """``(a, b, ...)``: each element at an 8-byte aligned offset, as wide as :func:`width` says.

    Built in place like the other buffer values, so a variable, a map value
    and print() take it whole; :func:`tuple_type` makes one from its elements.
    """

    elems: tuple = ()
    names: tuple = ()          # a record's field names (bpftrace 0.25's (name=value, ...)); () for a tuple

    def offsets(self) -> list[int]:
        out, pos = [], 0
        for t in self.elems:
            out.append(pos)
            pos += width(t)
        return out

    def __str__(self) -> str:
        if self.names:
            return "(" + ", ".join(f"{n}={t}" for n, t in zip(self.names, self.elems)) + ")"
        return "(" + ", ".join(str(t) for t in self.elems) + ")"


def tuple_type(elems: tuple, names: tuple = ()) -> Tuple:
    return Tuple(size=sum(width(t) for t in elems), elems=elems, names=names)


def element_order(src: Tuple, dst: Tuple) -> list[int]:
    """For each element of ``src``, its index in ``dst``: by name for records, else in turn."""
    if src.names:
        return [dst.names.index(n) for n in src.names]
    return list(range(len(src.elems)))


def merge_tuples(old: Tuple, new: Tuple) -> Tuple | None:
    """The tuple type that holds both ``old``'s and ``new``'s values, as bpftrace 0.23.2 lets a variable
    take (1, "abcd") and then (2, "abcdefgh"): each string as long as the longer, each integer as wide
    as the wider, nested tuples merged alike; a record's fields matched by name, in ``old``'s order.
    None when they do not fit (other lengths, names or kinds)."""
    if len(old.elems) != len(new.elems) or bool(old.names) != bool(new.names) \
            or sorted(old.names) != sorted(new.names):
        return None
    elems = list(old.elems)
    for i, j in enumerate(element_order(new, old)):
        a, b = elems[j], new.elems[i]
        if a == b:
            continue
        if type(a) is Str and type(b) is Str:
            elems[j] = Str(max(a.size, b.size))
        elif isinstance(a, Tuple) and isinstance(b, Tuple):
            m = merge_tuples(a, b)
            if m is None:
                return None
            elems[j] = m
        elif type(a) is Int and type(b) is Int:
            elems[j] = Int(max(a.size, b.size), a.signed or b.signed)
        else:
            return None
    return tuple_type(tuple(elems), old.names)


@record(frozen=True)
class Void(Type):
    size: int = 0

    def __str__(self) -> str:
        return "void"


INT64 = Int(8, True)
UINT64 = Int(8, False)
COMM = Str(16)
USYM = Int(8, False, "usym")     # an address; in records, keys and values the pid follows it


def is_buffer(t: Type) -> bool:
    """Values built in a buffer (written into place), not computed in a register: strings, inet, and
    structs and arrays read whole (a variable, a map key or value, a tuple's element)."""
    return isinstance(t, (Str, Inet, Record, Array))


def is_aggregate(t: Type) -> bool:
    """A struct, union or array value: bytes compared and printed whole, as bpftrace's."""
    return isinstance(t, (Record, Array))


def width(t: Type) -> int:
    """Bytes a value of type ``t`` takes in a map key, a map value or an output record.

    A ``usym`` value carries the pid after the address, as bpftrace's does:
    the address means something only in its process.
    """
    if isinstance(t, (Str, Record, Inet, Array)):
        return (t.size + 7) // 8 * 8
    if isinstance(t, Int) and t.display == "usym":
        return 16
    return 8


def type_name(spec: Spec | None, type_id: int) -> str:
    """C spelling of a BTF type (``struct dentry``, ``unsigned int``)."""
    if spec is None or type_id == 0:
        return "void"
    from btf.cformat import CFormatter

    return CFormatter().type_name(spec.type(type_id))


def from_btf(spec: Spec, type_id: int, *, user: bool = False) -> Type:
    """The trace-language type of a value of BTF type ``type_id`` (typedefs and qualifiers skipped)."""
    from btf.kinds import Kind
    from btf.layout import sizeof, skip

    if type_id == 0:
        return Void()
    t = skip(spec.type(type_id))
    k = t.kind
    if k == Kind.INT:
        return Int(t.size, bool(t.signed) and not t.is_bool)
    if k in (Kind.ENUM, Kind.ENUM64):
        return Enum(t.size, bool(getattr(t, "signed", False)), enum_id=t.id, spec=spec)
    if k == Kind.PTR:
        return Ptr(_skip_id(spec, t.type_id), user, spec)
    if k in (Kind.STRUCT, Kind.UNION):
        return Record(t.id, t.size, user, spec)
    if k == Kind.ARRAY:
        elem = skip(t.type)
        if elem.kind == Kind.INT and elem.size == 1:
            return Str(t.nelems)
        return Array(elem.id, t.nelems, sizeof(elem), user, spec)
    if k == Kind.FLOAT:
        return Int(t.size, True)
    return Int(sizeof(t) or 8, False)


def _skip_id(spec: Spec, type_id: int) -> int:
    from btf.layout import skip

    if type_id == 0:
        return 0
    return skip(spec.type(type_id)).id
