"""One BPF instruction as plain data, and its 8-byte encoding (``struct bpf_insn``).

``struct bpf_insn`` is ``u8 code; u8 dst_reg:4, src_reg:4; s16 off; s32 imm``,
little-endian on the hosts we run on.  A 64-bit immediate load
(``ld_imm64``) takes two slots: the second holds the immediate's upper half.
Here it is *one* :class:`Insn` whose ``imm`` is the whole 64-bit value and
whose :attr:`Insn.slots` is 2, so a program is a list of Insns and jump
offsets (counted in slots) are computed by the assembler.
"""

from __future__ import annotations

import struct

from pycore.asm import opcodes as op
from pycore.errors import PycoreError
from pycore.record import field, record

__all__ = ["Insn", "AsmError", "encode", "decode", "slot_count"]

_STRUCT = struct.Struct("<BBhi")
_LD_IMM64 = op.LD | op.DW | op.IMM


class AsmError(PycoreError, ValueError):
    """An instruction that cannot be encoded: a register, offset or immediate out of range, an unplaced label."""


def _s32(value: int, what: str) -> int:
    """``value`` as the s32 the encoding stores (u32 values wrap: 0xffffffff is -1)."""
    if -(1 << 31) <= value < (1 << 31):
        return value
    if 0 <= value < (1 << 32):
        return value - (1 << 32) if value >= (1 << 31) else value
    raise AsmError(f"{what}: immediate {value:#x} does not fit in 32 bits")


@record(frozen=True)
class Insn:
    """One instruction; ``target`` is a jump's label until the assembler turns it into ``off``."""

    code: int
    dst: int = 0
    src: int = 0
    off: int = 0
    imm: int = 0
    target: object = field(default=None, compare=False)

    @property
    def cls(self) -> int:
        return self.code & 0x07

    @property
    def wide(self) -> bool:
        """A two-slot 64-bit immediate load (``ld_imm64``, map fd/value loads)."""
        return self.code == _LD_IMM64

    @property
    def slots(self) -> int:
        """How many 8-byte slots it takes (2 for ``ld_imm64``)."""
        return 2 if self.code == _LD_IMM64 else 1

    @property
    def is_jump(self) -> bool:
        """A jump with an offset (conditional or ``ja``), not call/exit."""
        return self.cls in (op.JMP, op.JMP32) and (self.code & 0xF0) not in (op.CALL, op.EXIT)

    def encode(self) -> bytes:
        """The 8 (or 16, for ``ld_imm64``) bytes the kernel reads."""
        if self.target is not None:
            raise AsmError(f"jump to {self.target} not resolved: assemble the program first")
        if not (0 <= self.dst <= 15 and 0 <= self.src <= 15):
            raise AsmError(f"register out of range in {self!r}")
        if not -(1 << 15) <= self.off < (1 << 15):
            raise AsmError(f"offset {self.off} does not fit in 16 bits in {self!r}")
        regs = (self.src << 4) | self.dst
        if self.code == _LD_IMM64:
            imm = self.imm & 0xFFFFFFFFFFFFFFFF if -(1 << 63) <= self.imm < (1 << 64) else None
            if imm is None:
                raise AsmError(f"immediate {self.imm:#x} does not fit in 64 bits")
            lo, hi = imm & 0xFFFFFFFF, imm >> 32
            return (_STRUCT.pack(self.code, regs, self.off, _s32(lo, "ld_imm64"))
                    + _STRUCT.pack(0, 0, 0, _s32(hi, "ld_imm64")))
        return _STRUCT.pack(self.code, regs, self.off, _s32(self.imm, repr(self)))

    def __repr__(self) -> str:
        tail = f", target={self.target}" if self.target is not None else ""
        return f"Insn(code={self.code:#04x}, dst={self.dst}, src={self.src}, off={self.off}, imm={self.imm}{tail})"


def slot_count(insns: list[Insn]) -> int:
    """Number of 8-byte slots (what the kernel calls the instruction count)."""
    return sum(i.slots for i in insns)


def encode(insns: list[Insn]) -> bytes:
    """A whole program's bytes, as ``bpf_prog_load`` takes them."""
    return b"".join(i.encode() for i in insns)


def decode(data: bytes | memoryview) -> list[Insn]:
    """Instructions from their encoding (``ld_imm64`` pairs become one Insn)."""
    if len(data) % op.INSN_SIZE:
        raise AsmError(f"{len(data)} bytes is not a whole number of 8-byte instructions")
    out: list[Insn] = []
    slots = list(_STRUCT.iter_unpack(data))
    i = 0
    while i < len(slots):
        code, regs, off, imm = slots[i]
        if code == _LD_IMM64:
            if i + 1 >= len(slots):
                raise AsmError(f"ld_imm64 at slot {i} has no second half")
            hi = slots[i + 1][3] & 0xFFFFFFFF
            value = (hi << 32) | (imm & 0xFFFFFFFF)
            out.append(Insn(code, regs & 0xF, regs >> 4, off, value))
            i += 2
            continue
        out.append(Insn(code, regs & 0xF, regs >> 4, off, imm))
        i += 1
    return out
