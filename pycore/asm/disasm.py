"""Instructions as text, in the kernel verifier's syntax (kernel/bpf/disasm.c), for ``pycore trace -v``.

``r1 = *(u64 *)(r10 -8)``, ``if r0 == 0x0 goto pc+3``, ``call
bpf_map_lookup_elem#1``: the same words the verifier's log uses, so a
listing and a rejection read alike.  Lines are numbered by slot, as the
verifier numbers them (an ``ld_imm64`` takes two).  One difference: a map
load shows the fd we passed (``map[fd:5]``) where the kernel would show the
map's id.
"""

from __future__ import annotations

from collections.abc import Iterable

from pycore.asm import opcodes as op
from pycore.asm.helpers import helper_name
from pycore.asm.insn import Insn

__all__ = ["format", "format_insn"]

def _r(cls: int, reg: int) -> str:
    return f"{'w' if cls in (op.ALU, op.JMP32) else 'r'}{reg}"


def _imm64(insn: Insn) -> str:
    if insn.src == op.PSEUDO_MAP_FD:
        return f"map[fd:{insn.imm & 0xFFFFFFFF}]"
    if insn.src == op.PSEUDO_MAP_VALUE:
        return f"map[fd:{insn.imm & 0xFFFFFFFF}][0]+{insn.imm >> 32}"
    if insn.src == op.PSEUDO_MAP_IDX:
        return f"map[idx:{insn.imm & 0xFFFFFFFF}]"
    if insn.src == op.PSEUDO_MAP_IDX_VALUE:
        return f"map[idx:{insn.imm & 0xFFFFFFFF}][0]+{insn.imm >> 32}"
    if insn.src == op.PSEUDO_BTF_ID:
        return f"btf_id:{insn.imm & 0xFFFFFFFF}"
    return f"{insn.imm & 0xFFFFFFFFFFFFFFFF:#x}"


def format_insn(insn: Insn) -> str:
    """One instruction's text, without the slot number."""
    code, cls = insn.code, insn.code & 0x07
    opc, src_x = code & 0xF0, code & op.X
    size = op.SIZE_NAMES.get(code & 0x18, "?")
    mode = code & 0xE0
    target = f"{getattr(insn.target, 'name', insn.target)}" if insn.target is not None else f"pc{insn.off:+d}"
    if cls in (op.ALU, op.ALU64):
        d = _r(cls, insn.dst)
        if opc == op.END:
            return f"r{insn.dst} = {'be' if src_x else 'le'}{insn.imm} r{insn.dst}"
        if opc == op.NEG:
            return f"{d} = -{d}"
        sym = op.ALU_SYMBOLS.get(opc)
        if sym is None:
            return f"invalid alu op {code:#04x}"
        rhs = _r(cls, insn.src) if src_x else str(insn.imm)
        return f"{d} {sym} {rhs}"
    if cls == op.LDX and mode == op.MEM:
        return f"r{insn.dst} = *({size} *)(r{insn.src} {insn.off:+d})"
    if cls == op.STX and mode == op.MEM:
        return f"*({size} *)(r{insn.dst} {insn.off:+d}) = r{insn.src}"
    if cls == op.STX and mode == op.ATOMIC:
        if insn.imm in (op.ATOMIC_ADD, op.ATOMIC_OR, op.ATOMIC_AND, op.ATOMIC_XOR):
            return f"lock *({size} *)(r{insn.dst} {insn.off:+d}) {op.ALU_SYMBOLS[insn.imm]} r{insn.src}"
        return f"atomic {insn.imm:#x} *({size} *)(r{insn.dst} {insn.off:+d}) r{insn.src}"
    if cls == op.ST and mode == op.MEM:
        return f"*({size} *)(r{insn.dst} {insn.off:+d}) = {insn.imm}"
    if cls == op.LD and insn.wide:
        return f"r{insn.dst} = {_imm64(insn)}"
    if cls in (op.JMP, op.JMP32):
        if code == op.JMP | op.CALL:
            if insn.src == op.PSEUDO_CALL:
                return f"call pc{insn.imm:+d}"
            if insn.src == op.PSEUDO_KFUNC_CALL:
                return f"call kernel-function#{insn.imm}"
            return f"call {helper_name(insn.imm) or 'unknown'}#{insn.imm}"
        if code == op.JMP | op.EXIT:
            return "exit"
        if code == op.JMP | op.JA:
            return f"goto {target}"
        sym = op.JMP_SYMBOLS.get(opc)
        if sym is None:
            return f"invalid jump {code:#04x}"
        rhs = _r(cls, insn.src) if src_x else f"{insn.imm & 0xFFFFFFFF:#x}"
        return f"if {_r(cls, insn.dst)} {sym} {rhs} goto {target}"
    return f"unknown instruction {code:#04x}"


def format(insns: Iterable[Insn], *, opcodes: bool = False) -> str:  # noqa: A001 - the module's verb
    """A numbered listing, one line per instruction (``opcodes=True`` adds the verifier's ``(bf)`` codes)."""
    lines = []
    slot = 0
    for insn in insns:
        text = format_insn(insn)
        if opcodes:
            text = f"({insn.code:02x}) {text}"
        lines.append(f"{slot:4d}: {text}")
        slot += insn.slots
    return "\n".join(lines)
