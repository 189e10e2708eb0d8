"""pycore.record: ``@record`` behaves as ``@dataclass`` for what it takes, side by side with dataclasses."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

import pytest

from pycore.record import FrozenInstanceError, field, record, record_fields


def pair(frozen: bool = False):  # noqa: ANN201 - the same declarations under both decorators
    out = []
    for deco, fld in ((dataclasses.dataclass, dataclasses.field), (record, field)):
        @deco(frozen=frozen)
        class Base:
            pos: int = fld(default=0, kw_only=True, compare=False, repr=False)

        @deco(frozen=frozen)
        class Point(Base):
            x: int
            y: int = 2
            tags: list = fld(default_factory=list)
            note: str = fld(default="", compare=False)

            def norm(self) -> int:
                return abs(self.x) + abs(self.y)

        out.append(Point)
    return out


@pytest.mark.parametrize("frozen", [False, True])
def test_same_as_dataclass(frozen: bool) -> None:
    D, R = pair(frozen)
    for args, kwargs in [((1,), {}), ((1, 5), {}), ((1,), {"y": 7, "pos": 3}), ((1, 2, [3]), {"note": "n"})]:
        d, r = D(*args, **kwargs), R(*args, **kwargs)
        assert repr(d).split("(", 1)[1] == repr(r).split("(", 1)[1]
        assert [getattr(d, n) for n in ("x", "y", "tags", "note", "pos")] == \
               [getattr(r, n) for n in ("x", "y", "tags", "note", "pos")]
        assert r.norm() == d.norm()
    assert R(1) == R(1, pos=9) and R(1) == R(1, note="other")    # pos and note left out of ==
    assert R(1) != R(2) and R(1, 2, [1]) != R(1, 2, [2])
    assert R(1).__eq__(D(1)) is NotImplemented                     # another class: never equal
    assert R(1).tags is not R(1).tags                              # a fresh list each time
    assert record_fields(R) == tuple(f.name for f in dataclasses.fields(D)) == ("pos", "x", "y", "tags", "note")


def test_hash_follows_dataclasses_rules() -> None:
    D, R = pair(frozen=False)
    with pytest.raises(TypeError):
        hash(R(1))                                                 # eq without frozen: unhashable
    D, R = pair(frozen=True)
    assert hash(R(1, 2, (), pos=4)) == hash(R(1, 2, (), pos=5))    # compare=False fields left out
    assert {R(1, 2, ()): "a"}[R(1, 2, ())] == "a"


def test_frozen_refuses_assignment() -> None:
    _, R = pair(frozen=True)
    p = R(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 3
    with pytest.raises(FrozenInstanceError):
        del p.y
    assert isinstance(FrozenInstanceError("x"), AttributeError)


@pytest.mark.parametrize("call, why", [
    (lambda R: R(), "missing required argument: 'x'"),
    (lambda R: R(1, 2, [], "n", 5), "takes 4 positional arguments but 5 were given"),
    (lambda R: R(1, z=2), "unexpected keyword argument 'z'"),
    (lambda R: R(1, x=2), "multiple values for keyword argument 'x'"),
])
def test_wrong_arguments_are_type_errors(call, why: str) -> None:  # noqa: ANN001
    _, R = pair()
    with pytest.raises(TypeError, match=why):
        call(R)


def test_pickles_and_methods_of_its_own_are_kept() -> None:
    from pycore.lang import ast as A
    from pycore.lang.types import Int, Str

    tree = A.Program([], [A.ProbeBlock([A.ProbeSpec("BEGIN", "", (), None, "BEGIN", pos=A.Pos(1, 1))], None,
                                       [A.ExprStmt(A.Call("exit", ()), pos=A.Pos(1, 9))])])
    back = pickle.loads(pickle.dumps(tree))
    assert back == tree and back.probes[0].probes[0].pos == (1, 1)
    assert pickle.loads(pickle.dumps(Int(4, False))) == Int(4, False) and hash(Int(4, False)) == hash(Int(4, False))
    assert str(Str(16)) == "string[16]" and repr(Str(16)) == "Str(size=16)"   # its own __str__ kept
    assert Int(8, True) != Int(8, False) and len({Int(8, True), Int(8, True), Int(4, True)}) == 2


def test_trace_start_defines_no_dataclass() -> None:
    """The point of pycore.record: nothing on pycore trace's way to attaching imports dataclasses
    (which imports inspect, ast, dis, tokenize: ~5 ms)."""
    code = ("import sys; import pycore.commands.trace, pycore.lang.session, pycore.lang.parser, "
            "pycore.native.program, pycore.lang.emit, pycore.lang.output, pycore.link.tracepoint, "
            "pycore.native.ringbuf; "
            "print(sorted(m for m in ('dataclasses', 'inspect', 'typing', 'logging', 'difflib', 'argparse') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
