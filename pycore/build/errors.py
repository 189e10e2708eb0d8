"""The build helper's error: one line, what is missing and what to do about it (defined with the
rest of the exception tree in :mod:`pycore.errors`)."""

from __future__ import annotations

from pycore.errors import BuildError

__all__ = ["BuildError"]
