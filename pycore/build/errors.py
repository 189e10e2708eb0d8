"""The build helper's error: one line, what is missing and what to do about it."""

from __future__ import annotations

from pycore.errors import PycoreError

__all__ = ["BuildError"]


class BuildError(PycoreError):
    """A BPF object could not be built: no compiler, no headers, no BTF, or the compiler refused the source."""
