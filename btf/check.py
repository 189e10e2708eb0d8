"""Checks a blob must pass before it goes where a bad one does harm (libbpf's parser, the kernel).

``Spec`` decodes lazily and trusts a type id until someone follows it, which
is right for listings; an object handed to libbpf 1.1 must be whole first:
its ``bpf_object__open_mem`` follows a VAR's or member's type id without a
bound and crashes the process on one past the end.
"""

from __future__ import annotations

from . import types as T
from .errors import BtfError
from .spec import Spec

__all__ = ["check_references"]


def _referenced(t: T.Type) -> list[tuple[str, int]]:
    """(what, type id) for every id a record names."""
    if isinstance(t, T.Array):
        return [("element", t.type_id), ("index", t.index_type_id)]
    if isinstance(t, T.Composite):
        return [(f"member {m.name or '(anonymous)'}", m.type_id) for m in t]
    if isinstance(t, T.FuncProto):
        return [("return", t.return_type_id)] + [(f"parameter {p.name or i}", p.type_id)
                                                 for i, p in enumerate(t.params)]
    if isinstance(t, T.Datasec):
        return [("variable", v.type_id) for v in t.vars]
    if isinstance(t, T._Ref):
        return [("type", t.type_id)]
    return []


def check_references(spec: Spec) -> None:
    """Raise BtfError unless every type decodes and every type id a record names exists."""
    count = len(spec)
    for t in spec:
        for what, ref in _referenced(t):
            if not 0 <= ref < count:
                raise BtfError(f"{type(t).__name__.lower()} {t.name or '(anonymous)'} (id {t.id}): "
                               f"{what} refers to type id {ref}, past the last ({count - 1})")
