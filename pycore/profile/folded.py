"""Folded stacks: one line per distinct stack, ``root;...;leaf COUNT`` (flamegraph.pl's input).

A ``;`` inside a frame's name would split it in two, so it is written as
``:`` (a C++ name or a Python file name may hold one); lines are sorted so
that two runs over the same samples give the same file.
"""

from __future__ import annotations

from typing import TextIO

from pycore.profile.stacks import Profile

__all__ = ["write_folded"]


def write_folded(profile: Profile, out: TextIO) -> None:
    lines = sorted(";".join(f.label().replace(";", ":") for f in stack) + f" {n}\n"
                   for stack, n in profile.stacks.items())
    out.writelines(lines)
