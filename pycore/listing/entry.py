"""One line of ``pycore list`` output, shared by the kernel and user-space listers."""

from __future__ import annotations

__all__ = ["Entry", "INDENT"]

INDENT = "    "


class Entry:
    """One listed probe or type: ``head`` (probe line or first line of a C
    body), an optional ``note`` shown as a trailing comment, and ``details``
    (argument lines, or the rest of the body)."""

    __slots__ = ("head", "details", "note")

    def __init__(self, head: str, details: list[str] | None = None, note: str = "") -> None:
        self.head = head
        self.details = details if details is not None else []
        self.note = note

    def __repr__(self) -> str:
        return f"<Entry {self.head!r}>"

    def lines(self) -> list[str]:
        head = f"{self.head}  # {self.note}" if self.note else self.head
        return [head, *self.details]
