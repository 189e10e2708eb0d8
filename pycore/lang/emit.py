"""The code generator's pen: an :class:`~pycore.asm.assembler.Assembler` with one method per form it writes.

Register-to-memory forms keep the order C reads (``stx(size, dst, off,
src)``: ``*(dst + off) = src``); helpers are called by name.
"""

from __future__ import annotations

from pycore.asm import builders as B
from pycore.asm.assembler import Assembler, Label
from pycore.asm.helpers import Helper

__all__ = ["Emitter"]


class Emitter(Assembler):
    """Instructions of one program, written in the order the code generator thinks of them.

    :meth:`mark` notes where each statement's code starts, so that a
    verifier complaint about instruction N can be told as a place in the script.
    """

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[int, object]] = []   # (first slot, script node)
        self.funcs: list[tuple[int, str]] = [(0, "main")]   # (first slot, name) of each BPF function

    def func(self, name: str) -> None:
        """Start a BPF-to-BPF subprogram (a loop's callback) at the next instruction: the loader
        describes each to the verifier (func_info), which a callback's address needs."""
        self.funcs.append((self.slots, name))

    def mark(self, node: object) -> None:
        self.marks.append((self.slots, node))

    def node_at(self, slot: int) -> object | None:
        """The statement whose code holds instruction ``slot`` (the last mark at or before it)."""
        found = None
        for start, node in self.marks:
            if start > slot:
                break
            found = node
        return found

    def mov_imm(self, dst: int, imm: int) -> None:
        if -(1 << 31) <= imm < (1 << 31):
            self.emit(B.alu64_imm("mov", dst, imm))
        else:
            self.emit(B.ld_imm64(dst, imm))

    def mov_reg(self, dst: int, src: int) -> None:
        self.emit(B.alu64_reg("mov", dst, src))

    def alu_imm(self, operation: str, dst: int, imm: int) -> None:
        if operation == "neg":
            self.emit(B.neg64(dst))
        elif -(1 << 31) <= imm < (1 << 31):
            self.emit(B.alu64_imm(operation, dst, imm))
        else:  # an immediate wider than 32 bits goes through a register
            other = 1 if dst != 1 else 2
            self.emit(B.ld_imm64(other, imm), B.alu64_reg(operation, dst, other))

    def alu_reg(self, operation: str, dst: int, src: int) -> None:
        self.emit(B.alu64_reg(operation, dst, src))

    def bswap(self, dst: int, bits: int) -> None:
        """Reverse the low ``bits`` bits' bytes of ``dst``, zeroing the rest (to big endian: a swap on our hosts)."""
        self.emit(B.bswap(dst, bits))

    def ld_imm64(self, dst: int, imm: int) -> None:
        self.emit(B.ld_imm64(dst, imm))

    def ld_btf_id(self, dst: int, btf_id: int) -> None:
        """``dst`` = the kernel variable of vmlinux BTF id ``btf_id`` (BPF_PSEUDO_BTF_ID: a typed ksym)."""
        from pycore.asm import opcodes as op

        self.emit(B.ld_imm64(dst, btf_id, op.PSEUDO_BTF_ID))

    def ld_func(self, dst: int, target: Label) -> None:
        self.emit(B.ld_func(dst, target))

    def ld_map(self, dst: int, fd: int) -> None:
        self.emit(B.ld_map_fd(dst, fd))

    def ldx(self, size: int, dst: int, src: int, off: int) -> None:
        """dst = *(size *)(src + off)"""
        self.emit(B.ldx(size, dst, src, off))

    def stx(self, size: int, dst: int, off: int, src: int) -> None:
        """*(size *)(dst + off) = src"""
        self.emit(B.stx(size, dst, src, off))

    def st(self, size: int, dst: int, off: int, imm: int) -> None:
        """*(size *)(dst + off) = imm"""
        self.emit(B.st(size, dst, off, imm))

    def jmp_imm(self, operation: str, dst: int, imm: int, target: Label) -> None:
        self.emit(B.jmp_imm(operation, dst, imm, target))

    def jmp_reg(self, operation: str, dst: int, src: int, target: Label) -> None:
        self.emit(B.jmp_reg(operation, dst, src, target))

    def ja(self, target: Label) -> None:
        self.emit(B.ja(target))

    def test(self, operation: str, dst: int, src: int, *, imm: bool = True) -> None:
        """r0 = 1 if ``dst operation src`` (an immediate, or with imm=False a register) else 0: a
        comparison's value, ``!``, and a helper's 0-on-success as a bool (delete(), write_user())."""
        yes, done = self.label(), self.label()
        (self.jmp_imm if imm else self.jmp_reg)(operation, dst, src, yes)
        self.mov_imm(0, 0)
        self.ja(done)
        self.place(yes)
        self.mov_imm(0, 1)
        self.place(done)

    def call(self, helper: str) -> None:
        self.emit(B.call(Helper[helper]))

    def call_kfunc(self, btf_id: int) -> None:
        """Call the kernel function of vmlinux BTF id ``btf_id`` (BPF_PSEUDO_KFUNC_CALL)."""
        from pycore.asm import opcodes as op
        from pycore.asm.insn import Insn

        self.emit(Insn(op.JMP | op.CALL, 0, op.PSEUDO_KFUNC_CALL, 0, btf_id))

    def exit(self) -> None:
        self.emit(B.exit())

    def disassemble(self) -> str:
        from pycore.asm.disasm import format as fmt

        return fmt(self.assemble())
