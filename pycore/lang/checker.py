"""The checker's public names, where importers have always found them.

The stage itself is the package :mod:`pycore.lang.check` (one module per concern).
"""

from pycore.lang.check import (AGGREGATES, USER_PROBES, Checked, Checker, MapInfo, c_integer, is_literal, kernel_address,
                               member_offset)

__all__ = ["MapInfo", "Checked", "Checker", "AGGREGATES", "USER_PROBES", "kernel_address", "is_literal", "member_offset",
           "c_integer"]
