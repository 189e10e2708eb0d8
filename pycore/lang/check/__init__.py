"""The checker: every expression of a script typed against this kernel, before anything loads.

For each probe block and each :class:`~pycore.lang.probes.Target` it
expands to, the checker resolves names (builtins, ``args.NAME``, ``$x``,
``@m``), follows fields and casts through BTF, types every expression, and
collects what the runtime needs: each map's key and value shape, each printf
and action with its argument types.  Errors point at the script's
line:column and say what exists nearby (``d_nmae``: did you mean ``d_name``).
Nothing here emits code; :mod:`pycore.lang.lower` walks the same tree
with these types.

The typing rules refer to each other (a field's type feeds a map key, a cast, a printf check), so
:class:`~pycore.lang.check.core.Checker` is one class, its concerns mixins of their own modules:

* :mod:`~pycore.lang.check.records`: what the checker hands on (:class:`MapInfo`, :class:`Checked`);
* :mod:`~pycore.lang.check.core`: statements, maps, expressions;
* :mod:`~pycore.lang.check.types`: type names (declarations, DWARF, BTF), casts, fields, sizeof;
* :mod:`~pycore.lang.check.builtins`: builtins, args, ctx, registers, positional parameters;
* :mod:`~pycore.lang.check.calls`: function calls and their arguments.
"""

from pycore.lang.check.builtins import c_integer
from pycore.lang.check.calls import is_literal, kernel_address
from pycore.lang.check.core import Checker
from pycore.lang.check.records import AGGREGATES, USER_PROBES, Checked, MapInfo
from pycore.lang.check.types import member_offset

__all__ = ["MapInfo", "Checked", "Checker", "AGGREGATES", "USER_PROBES", "kernel_address", "is_literal", "member_offset",
           "c_integer"]
