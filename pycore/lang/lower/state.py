"""What the generator's mixins share: declared once here, set by :class:`~pycore.lang.lower.gen.Gen`.

Each concern of the lowering (statements, maps, calls, expressions, strings) is a mixin calling the
others through ``self``; this base names the state they all read, so that a reader of one mixin
(and a type checker) knows what ``self.e`` or ``self.c`` is without opening ``gen.py``.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.errors import CheckError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pycore.lang.check import Checked
    from pycore.lang.emit import Emitter
    from pycore.lang.lower.layout import Layout, _Frame
    from pycore.lang.types import Type


class State:
    """The program being emitted: its checked block, the script's layout, the emitter, map fds."""

    c: Checked                      #: the probe block and target, checked (types of every node)
    layout: Layout                  #: the script's maps and output actions
    e: Emitter                      #: where instructions go
    fds: dict[str, int]             #: map name -> fd ("@x", "$scratch", "$ring", "$start", "$stack:k:127")
    params: tuple[str, ...]         #: positional parameters
    filename: str
    source: str
    f: _Frame                       #: the stack frame's slots
    vars: dict[str, int]            #: $x -> stack slot (ints) or scratch region (strings)
    exit_label: Any                 #: the program's end
    _loops: list[tuple[Any, Any]]   #: (continue, break) labels of the loops around a statement
    _pending: list[tuple]           #: for loops whose callbacks are still to emit (pycore.lang.lower.loops)
    _var_end: int                   #: stack bytes of this frame's variables (what a loop's callback copies)
    _var_stack: int
    _var_scratch: int

    def error(self, node: A.Node | None, message: str) -> CheckError:
        """An error at ``node`` (else at the probe block) in the script's terms."""
        pos = node.pos if node is not None else self.c.block.pos
        return CheckError(message, pos.line, pos.col, self.filename, self.source)

    def t(self, node: A.Expr) -> Type:
        """The checked type of ``node``."""
        return self.c.types[id(node)]
