"""The lowering's public names, where importers have always found them.

The stage itself is the package :mod:`pycore.lang.lower` (one module per concern).
"""

from pycore.lang.lower import (SCRATCH_SIZE, TAG_CAT, TAG_CLEAR, TAG_EXIT, TAG_JOIN, TAG_PRINT_MAP, TAG_PRINT_VALUE,
                               TAG_PRINTF, TAG_SYSTEM, TAG_TIME, TAG_ZERO, TAG_HELPER_ERROR, Action, Layout,
                               generate)

__all__ = ["Layout", "Action", "generate", "SCRATCH_SIZE", "TAG_EXIT", "TAG_PRINT_MAP", "TAG_CLEAR", "TAG_ZERO",
           "TAG_TIME", "TAG_PRINT_VALUE", "TAG_PRINTF", "TAG_JOIN", "TAG_SYSTEM", "TAG_CAT",
           "TAG_HELPER_ERROR"]
