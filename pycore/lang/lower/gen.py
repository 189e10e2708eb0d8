"""The generator: one probe block for one target, lowered to BPF instructions.

Its concerns are the mixins of this package; :func:`generate` is the entry.
"""

from __future__ import annotations

from pycore.lang.check import Checked
from pycore.lang.lower.calls import Calls
from pycore.lang.lower.exprs import Exprs
from pycore.lang.lower.layout import Layout, _Frame
from pycore.lang.lower.loops import Loops
from pycore.lang.lower.maps import Maps
from pycore.lang.lower.statements import Statements
from pycore.lang.lower.strings import Strings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.lang.emit import Emitter


class Gen(Statements, Loops, Maps, Calls, Exprs, Strings):
    """Emits one program: one (probe block, target) pair.

    The concerns are mixins that call each other through ``self`` (an expression may need a
    string, a string a map read, a map key an expression); this class sets the state they share
    (declared in :mod:`pycore.lang.lower.state`).
    """

    def __init__(self, checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
                 params: tuple[str, ...], source: tuple[str, str]) -> None:
        self.c = checked
        self.layout = layout
        self.e = emit
        self.fds = fds
        self.params = params
        self.filename, self.source = source
        self.f = _Frame(self)
        self.vars = {}
        self.exit_label = emit.label()
        self.return_label = emit.label()    # 'return e': r0 holds the program's value
        self._loops = []
        self._pending = []
        self.update_site: tuple[int, int, int, int] | None = None   # the map update's place (map-full warnings)
        self.found: dict[int, int] = {}     # id(MapRef) -> stack slot of the value find() looked up



def generate(checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
             params: tuple[str, ...] = (), source: tuple[str, str] = ("", "")) -> None:
    """Emit the program for one (probe block, target) pair into ``emit``."""
    Gen(checked, layout, emit, fds, params, source).program()
