"""Labels and jump resolution.

A jump built with a :class:`Label` target (``jeq_imm(R0, 0, out)``) has no
offset yet; :func:`assemble` takes a stream of instructions with labels
placed in it and returns instructions whose offsets are resolved, counted in
8-byte slots from the instruction after the jump (``ld_imm64`` counts 2).
:class:`Assembler` is the same with a builder's interface.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from pycore.asm.insn import AsmError, Insn

__all__ = ["Label", "Assembler", "assemble"]

_counter = itertools.count()


class Label:
    """A jump target; placed once in an instruction stream, referenced by any number of jumps."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name or f"L{next(_counter)}"

    def __repr__(self) -> str:
        return f"Label({self.name!r})"

    def __str__(self) -> str:
        return f"label {self.name}"


def assemble(items: Iterable[Insn | Label]) -> list[Insn]:
    """Instructions with every label's jump offset filled in (labels are dropped from the output).

    Fails with :class:`AsmError` on a label placed twice, a jump to a label
    never placed or placed after the last instruction, and an offset beyond
    the 16 bits an instruction holds.
    """
    insns: list[Insn] = []
    starts: list[int] = []          # slot where each instruction starts
    where: dict[Label, int] = {}    # label -> slot
    slot = 0
    for item in items:
        if isinstance(item, Label):
            if item in where:
                raise AsmError(f"{item} placed twice (slots {where[item]} and {slot})")
            where[item] = slot
            continue
        insns.append(item)
        starts.append(slot)
        slot += item.slots
    out = []
    for insn, start in zip(insns, starts):
        target = insn.target
        if target is None:
            out.append(insn)
            continue
        if target not in where:
            raise AsmError(f"jump at slot {start} to {target}, which is never placed")
        dest = where[target]
        if dest >= slot:
            raise AsmError(f"jump at slot {start} to {target}, placed after the last instruction")
        off = dest - (start + 1)
        if insn.wide:   # ld_imm64 of a subprogram (BPF_PSEUDO_FUNC): the distance is its immediate
            out.append(Insn(insn.code, insn.dst, insn.src, 0, off))
            continue
        if not -(1 << 15) <= off < (1 << 15):
            raise AsmError(f"jump at slot {start} to {target} (slot {dest}): offset {off} "
                           "does not fit in 16 bits; the program is too long for a direct jump")
        out.append(Insn(insn.code, insn.dst, insn.src, off, insn.imm))
    return out


class Assembler:
    """Collects instructions and labels; :meth:`assemble` resolves the jumps."""

    def __init__(self) -> None:
        self.items: list[Insn | Label] = []
        self._slots = 0

    def label(self, name: str = "") -> Label:
        """A new label, not placed yet (jumps may refer to it before :meth:`place`)."""
        return Label(name)

    def place(self, label: Label) -> Label:
        """Bind ``label`` to the next instruction emitted."""
        self.items.append(label)
        return label

    def emit(self, *insns: Insn) -> None:
        """Append instructions."""
        for i in insns:
            if not isinstance(i, Insn):
                raise AsmError(f"not an instruction: {i!r}")
            self.items.append(i)
            self._slots += i.slots

    __call__ = emit

    @property
    def slots(self) -> int:
        """Slots emitted so far (the kernel's instruction count; the next instruction's index)."""
        return self._slots

    def assemble(self) -> list[Insn]:
        """The program with jump offsets resolved."""
        return assemble(self.items)
