"""The terminal's view: the functions with the most samples (off-CPU: time waited), by self and total.

Self: samples whose leaf is the function; total: samples with the function
anywhere in the stack (once per sample, however deep it recurses).  The
process and thread root frames are left out (every sample has them).
"""

from __future__ import annotations

from typing import TextIO

from pycore.profile.stacks import Frame, Profile

__all__ = ["write_top"]


def _name(f: Frame) -> str:
    if f.kind == "python":
        return f"{f.name} ({f.file})"
    if f.kind == "kernel":
        return f"{f.name} [kernel]"
    return f.name


def write_top(profile: Profile, out: TextIO, limit: int = 25, by: str = "self") -> None:
    """``limit`` rows sorted by ``by`` ("self" or "total"), ties by the other."""
    own, total = profile.functions()
    n = profile.samples
    period = profile.unit_seconds
    if profile.off_cpu:
        out.write(f"{n * period:.2f} s off-CPU in {profile.waits} waits ({profile.duration:.1f} s)\n")
    else:
        out.write(f"{n} samples at {profile.hz} Hz ({profile.duration:.1f} s)\n")
    if not n:
        return
    key = (lambda f: (own[f], total[f])) if by == "self" else (lambda f: (total[f], own[f]))
    out.write(f"{'SELF%':>6} {'SELF s':>8} {'TOTAL%':>7} {'TOTAL s':>8}  FUNCTION\n")
    for f in sorted(total, key=key, reverse=True)[:limit]:
        out.write(f"{100.0 * own[f] / n:6.1f} {own[f] * period:8.2f} {100.0 * total[f] / n:7.1f} "
                  f"{total[f] * period:8.2f}  {_name(f)}\n")
