"""The generator: one probe block for one target, lowered to BPF instructions.

Its concerns are the mixins of this package; :func:`generate` is the entry.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check import Checked
from pycore.lang.errors import CheckError
from pycore.lang.lower.calls import Calls
from pycore.lang.lower.exprs import Exprs
from pycore.lang.lower.layout import Layout, _Frame
from pycore.lang.lower.maps import Maps
from pycore.lang.lower.statements import Statements
from pycore.lang.lower.strings import Strings
from pycore.lang.types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.lang.emit import Emitter


class Gen(Statements, Maps, Calls, Exprs, Strings):
    """Emits one program: one (probe block, target) pair.

    The concerns are mixins that call each other through ``self`` (an expression may need a
    string, a string a map read, a map key an expression); this class holds the state they share.
    """

    def __init__(self, checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
                 params: tuple[str, ...], source: tuple[str, str]) -> None:
        self.c = checked
        self.layout = layout
        self.e = emit
        self.fds = fds           # map name -> fd ("@x", "$scratch", "$ring", "$start", "$stack:k:127")
        self.params = params
        self.filename, self.source = source
        self.f = _Frame(self)
        self.vars: dict[str, int] = {}   # $x -> stack slot (ints) or scratch region (strings)
        self.exit_label = emit.label()
        self._loops: list[tuple[Any, Any]] = []   # (top, end) labels of the while loops around a statement

    def error(self, node: A.Node | None, message: str) -> CheckError:
        pos = node.pos if node is not None else self.c.block.pos
        return CheckError(message, pos.line, pos.col, self.filename, self.source)

    def t(self, node: A.Expr) -> Type:
        return self.c.types[id(node)]


def generate(checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
             params: tuple[str, ...] = (), source: tuple[str, str] = ("", "")) -> None:
    """Emit the program for one (probe block, target) pair into ``emit``."""
    Gen(checked, layout, emit, fds, params, source).program()
