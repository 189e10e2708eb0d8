"""The one exception the BTF reader raises for bad input."""

from __future__ import annotations


class BtfError(ValueError):
    """Malformed, truncated or unsupported BTF.

    ``offset`` is the byte offset in the BTF blob (from the start of the
    header) where the problem was found, when one is known.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        if offset is not None:
            message = f"{message} (at BTF offset {offset:#x})"
        super().__init__(message)
