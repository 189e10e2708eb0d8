"""Folded stacks: one line per distinct stack, ``root;...;leaf COUNT`` (flamegraph.pl's input).

A ``;`` inside a frame's name would split it in two, so it is written as
``:`` (a C++ name or a Python file name may hold one), and a character that
is not printable (a newline would end the line) as ``?``; lines are sorted so
that two runs over the same samples give the same file.
"""

from __future__ import annotations

from typing import TextIO

from pycore.profile.stacks import Profile

__all__ = ["clean_label", "write_folded"]


def clean_label(label: str) -> str:
    """The label with ``;`` as ``:`` and unprintable characters as ``?`` (one folded field)."""
    if label.isprintable() and ";" not in label:
        return label
    return "".join(":" if c == ";" else c if c.isprintable() else "?" for c in label)


def write_folded(profile: Profile, out: TextIO) -> None:
    lines = sorted(";".join(clean_label(f.label()) for f in stack) + f" {n}\n"
                   for stack, n in profile.stacks.items())
    out.writelines(lines)
