"""What the checker's mixins share: declared once here, set by :class:`~pycore.lang.check.core.Checker`.

Each concern of the checker (types, builtins, calls) is a mixin calling the others through ``self``;
this base names the state they all read, so that a reader of one mixin (and a type checker) knows
what ``self.maps`` or ``self.spec`` is without opening ``core.py``.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.errors import CheckError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from btf import Spec
    from pycore.lang.check.records import MapInfo
    from pycore.lang.macros import Macros


class State:
    """The script being checked: its text and tree, its options, the maps met so far, the types' BTF."""

    program: A.Program | None       #: the whole script (its C definitions, includes, directives)
    filename: str
    source: str
    params: tuple[str, ...]         #: positional parameters
    unsafe: bool                    #: system(), signal(), override() allowed
    unsafe_hint: str                #: how the caller allows them ("run with --unsafe", "unsafe=True")
    has_head: bool                  #: the script has '#' lines (includes, defines)
    maps: dict[str, MapInfo]        #: @name -> its key and value, agreed by every use
    cpid: int                       #: the -c command's pid (cpid), set before checking
    _loops: int                     #: while loops around the statement being checked
    _macros: Macros | None          #: the head's macros, read on first need
    _named: dict[str, int | None]   #: a name's enum or macro value, each looked up once
    _enum_of: dict[str, int]        #: an enum constant's name -> its enum's BTF id
    _spec: Spec | None              #: the kernel's BTF (then the script's declarations on it), once read
    _declared: Spec | None | bool   #: the script's C declarations as BTF; False: not read yet

    if TYPE_CHECKING:
        @property
        def spec(self) -> Spec:
            """The kernel's BTF with the script's declarations on it (core.Checker.spec)."""

    def error(self, node: A.Node, message: str) -> CheckError:
        """An error at ``node`` in the script's terms (FILE:LINE:COL, the line, a caret)."""
        pos = node.pos
        return CheckError(message, pos.line, pos.col, self.filename, self.source)
