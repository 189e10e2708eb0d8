"""``@record``: a dataclass without the code generation, for classes defined on ``pycore trace``'s start.

``@dataclasses.dataclass`` writes an ``__init__``, ``__repr__`` and
``__eq__`` (and ``__hash__``, ``__setattr__``, ``__delattr__`` when frozen)
as source text for each class it decorates and compiles them: 0.1-0.35 ms
a class.  Importing dataclasses also imports inspect, and with it ast, dis
and tokenize: ~5 ms.  ``pycore trace`` defines 52 such classes (the syntax
tree's 34 node kinds, the 8 trace types, the checker's and code
generator's records) before it attaches: ~12 ms of a ~51 ms start to
attached (bench/bench_trace.py).

``@record`` takes the same declarations (annotated fields, defaults,
``field(default_factory=..., kw_only=..., compare=..., repr=...)``,
``frozen=True``) and gives every class the same few methods, which read
the class's field table, as the nodes of Python's own ``ast`` module share
theirs.  Construction is slower (a loop, not straight-line code): ~1 us
where a dataclass takes ~0.4 us, which no stage notices.  To a type checker
``record`` *is* ``dataclass``, so constructors stay checked.

What is left out, because nothing here uses it: ``__post_init__``,
``InitVar``, ordering, ``slots=True``, ``dataclasses.fields()`` (use
:func:`record_fields`), ``replace()``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from dataclasses import field
    from typing import Any

__all__ = ["record", "field", "record_fields", "FrozenInstanceError"]

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a ``frozen=True`` record (dataclasses' error of the same name)."""


class _Field:
    """What ``field(...)`` declares; ``record`` reads it and removes it from the class."""

    __slots__ = ("name", "default", "factory", "kw_only", "compare", "repr")

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING, kw_only: bool = False,
                 compare: bool = True, repr: bool = True) -> None:  # noqa: A002 - dataclasses' keyword
        self.name = ""
        self.default = default
        self.factory = default_factory
        self.kw_only = kw_only
        self.compare = compare
        self.repr = repr


if not TYPE_CHECKING:
    def field(*, default=_MISSING, default_factory=_MISSING, kw_only=False, compare=True, repr=True):  # noqa: A002
        """As :func:`dataclasses.field`, for the options listed in the module's docstring."""
        return _Field(default, default_factory, kw_only, compare, repr)

    def record(cls=None, /, *, frozen=False):
        """As ``@dataclass`` / ``@dataclass(frozen=True)``: see the module's docstring."""
        if cls is None:
            return lambda c: _make(c, frozen)
        return _make(cls, frozen)


def record_fields(cls: type) -> tuple[str, ...]:
    """The names of a record's fields, in order (as ``[f.name for f in dataclasses.fields(cls)]``)."""
    return tuple(f.name for f in cls.__record_fields__)  # type: ignore[attr-defined]


def _make(cls: type, frozen: bool) -> type:
    fields: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            fields[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, _Field) else _Field(default=value)
        f.name = name
        if isinstance(value, _Field):
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        fields.pop(name, None)
        fields[name] = f
    table = tuple(fields.values())
    # __init__'s order, as dataclasses': positional fields first, keyword-only ones after
    cls.__record_fields__ = table  # type: ignore[attr-defined]
    cls.__record_init__ = (tuple(f for f in table if not f.kw_only),  # type: ignore[attr-defined]
                           {f.name: f for f in table})
    cls.__record_compare__ = tuple(f.name for f in table if f.compare)  # type: ignore[attr-defined]
    cls.__record_repr__ = tuple(f.name for f in table if f.repr)  # type: ignore[attr-defined]
    cls.__record_frozen__ = frozen  # type: ignore[attr-defined]
    for name, method in (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq)):
        if name not in cls.__dict__:
            setattr(cls, name, method)
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[assignment]
        if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
            cls.__hash__ = _hash  # type: ignore[assignment]
    elif "__hash__" not in cls.__dict__:
        cls.__hash__ = None  # type: ignore[assignment]  # as dataclasses: eq without frozen is unhashable
    return cls


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    positional, by_name = type(self).__record_init__
    if len(args) > len(positional):
        raise TypeError(f"{type(self).__name__}() takes {len(positional)} positional arguments but "
                        f"{len(args)} were given")
    values = self.__dict__
    for f, value in zip(positional, args):
        values[f.name] = value
    for name, value in kwargs.items():
        f = by_name.get(name)
        if f is None or name in values:
            why = "an unexpected" if f is None else "multiple values for"
            raise TypeError(f"{type(self).__name__}() got {why} keyword argument {name!r}")
        values[name] = value
    if len(values) < len(by_name):
        for name, f in by_name.items():
            if name not in values:
                if f.factory is not _MISSING:
                    values[name] = f.factory()
                elif f.default is not _MISSING:
                    values[name] = f.default
                else:
                    raise TypeError(f"{type(self).__name__}() missing required argument: {name!r}")


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__record_repr__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, n) == getattr(other, n) for n in type(self).__record_compare__)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in type(self).__record_compare__))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")
