"""Folded stacks: one line per distinct stack, ``root;...;leaf COUNT`` (flamegraph.pl's input).

A ``;`` inside a frame's name would split it in two, so it is written as
``:`` (a C++ name or a Python file name may hold one), and a character that
is not printable (a newline would end the line) as ``?``; lines are sorted so
that two runs over the same samples give the same file.
"""

from __future__ import annotations

from typing import TextIO

from pycore.profile.stacks import Profile, clean_label

__all__ = ["clean_label", "write_folded"]


def write_folded(profile: Profile, out: TextIO) -> None:
    label = profile.labels().__getitem__
    out.writelines(sorted(f"{';'.join(map(label, stack))} {n}\n" for stack, n in profile.stacks.items()))
