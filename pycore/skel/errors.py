"""SkelError: why ``pycore skel`` cannot type an object, in one line saying what to do."""

from __future__ import annotations

from pycore.errors import PycoreError


class SkelError(PycoreError, ValueError):
    """The object cannot get a typed skeleton: no BTF, an unknown ring struct, an untyped map, ..."""
