"""One function per instruction form the code generator emits.

Argument order follows the kernel's own macros (include/linux/filter.h):
``ldx(size, dst, src, off)``, ``stx(size, dst, src, off)``, ``st(size, dst,
off, imm)``; ``size`` is in bytes (1, 2, 4, 8).  Jump targets are a
:class:`~pycore.asm.assembler.Label` (resolved by the assembler) or an int
offset in slots, relative to the next instruction, as the kernel counts.

ALU forms come in four flavours per operation: ``add64_imm(dst, imm)``,
``add64_reg(dst, src)``, ``add32_imm``, ``add32_reg`` (32-bit forms zero the
upper half of ``dst``); jumps in four too: ``jeq_imm(dst, imm, target)``,
``jeq_reg(dst, src, target)``, and ``jeq32_imm``/``jeq32_reg`` comparing the
lower halves.
"""

from __future__ import annotations

from collections.abc import Callable

from pycore.asm import opcodes as op
from pycore.asm.insn import AsmError, Insn

__all__ = [
    "alu64_imm", "alu64_reg", "alu32_imm", "alu32_reg", "neg64", "neg32", "bswap",
    "ld_imm64", "ld_map_fd", "ld_map_value", "ld_func", "ldx", "stx", "st", "atomic_add",
    "jmp_imm", "jmp_reg", "jmp32_imm", "jmp32_reg", "ja", "call", "exit",
]


def _reg(r: int, what: str = "register") -> int:
    if not isinstance(r, int) or not 0 <= r <= op.MAX_REG:
        raise AsmError(f"{what} r{r} does not exist (r0..r10)")
    return r


def _alu_op(operation: int | str) -> int:
    if isinstance(operation, str):
        try:
            return op.ALU_OPS[operation]
        except KeyError:
            raise AsmError(f"no ALU operation {operation!r} ({', '.join(op.ALU_OPS)})") from None
    return operation


def _jmp_op(operation: int | str) -> int:
    if isinstance(operation, str):
        try:
            return op.JMP_OPS[operation]
        except KeyError:
            raise AsmError(f"no jump {operation!r} ({', '.join(op.JMP_OPS)})") from None
    return operation


def _size(size: int) -> int:
    try:
        return op.SIZE_OF_BYTES[size]
    except KeyError:
        raise AsmError(f"memory access of {size} bytes: only 1, 2, 4 or 8") from None


# -- ALU -------------------------------------------------------------------------------------------


def alu64_imm(operation: int | str, dst: int, imm: int) -> Insn:
    """``dst OP= imm`` on 64 bits (imm is sign-extended from 32)."""
    return Insn(op.ALU64 | _alu_op(operation) | op.K, _reg(dst), 0, 0, imm)


def alu64_reg(operation: int | str, dst: int, src: int) -> Insn:
    """``dst OP= src`` on 64 bits."""
    return Insn(op.ALU64 | _alu_op(operation) | op.X, _reg(dst), _reg(src))


def alu32_imm(operation: int | str, dst: int, imm: int) -> Insn:
    """``wdst OP= imm`` on the lower 32 bits; the upper half of dst becomes 0."""
    return Insn(op.ALU | _alu_op(operation) | op.K, _reg(dst), 0, 0, imm)


def alu32_reg(operation: int | str, dst: int, src: int) -> Insn:
    """``wdst OP= wsrc`` on the lower 32 bits; the upper half of dst becomes 0."""
    return Insn(op.ALU | _alu_op(operation) | op.X, _reg(dst), _reg(src))


def _family(operation: int) -> tuple[Callable[[int, int], Insn], ...]:
    return (lambda dst, imm: alu64_imm(operation, dst, imm),
            lambda dst, src: alu64_reg(operation, dst, src),
            lambda dst, imm: alu32_imm(operation, dst, imm),
            lambda dst, src: alu32_reg(operation, dst, src))


mov64_imm, mov64_reg, mov32_imm, mov32_reg = _family(op.MOV)
add64_imm, add64_reg, add32_imm, add32_reg = _family(op.ADD)
sub64_imm, sub64_reg, sub32_imm, sub32_reg = _family(op.SUB)
mul64_imm, mul64_reg, mul32_imm, mul32_reg = _family(op.MUL)
div64_imm, div64_reg, div32_imm, div32_reg = _family(op.DIV)
mod64_imm, mod64_reg, mod32_imm, mod32_reg = _family(op.MOD)
or64_imm, or64_reg, or32_imm, or32_reg = _family(op.OR)
and64_imm, and64_reg, and32_imm, and32_reg = _family(op.AND)
xor64_imm, xor64_reg, xor32_imm, xor32_reg = _family(op.XOR)
lsh64_imm, lsh64_reg, lsh32_imm, lsh32_reg = _family(op.LSH)
rsh64_imm, rsh64_reg, rsh32_imm, rsh32_reg = _family(op.RSH)
arsh64_imm, arsh64_reg, arsh32_imm, arsh32_reg = _family(op.ARSH)
for _name in op.ALU_OPS:
    __all__ += [f"{_name}64_imm", f"{_name}64_reg", f"{_name}32_imm", f"{_name}32_reg"]


def neg64(dst: int) -> Insn:
    """``dst = -dst``."""
    return Insn(op.ALU64 | op.NEG, _reg(dst))


def neg32(dst: int) -> Insn:
    """``wdst = -wdst``."""
    return Insn(op.ALU | op.NEG, _reg(dst))


def bswap(dst: int, bits: int, order: str = "be") -> Insn:
    """``dst = be16 dst`` etc.: convert between host and big/little endian (network order: ``be``)."""
    if bits not in (16, 32, 64) or order not in ("be", "le"):
        raise AsmError(f"byte swap: bits must be 16, 32 or 64 and order 'be' or 'le', not {bits}, {order!r}")
    return Insn(op.ALU | op.END | (op.TO_BE if order == "be" else op.TO_LE), _reg(dst), 0, 0, bits)


# -- loads and stores --------------------------------------------------------------------------------


def ld_imm64(dst: int, imm: int, src: int = 0) -> Insn:
    """``dst = imm`` for any 64-bit value (two slots); ``src`` is a PSEUDO_* kind, 0 for a plain value."""
    return Insn(op.LD | op.DW | op.IMM, _reg(dst), src, 0, imm)


def ld_map_fd(dst: int, map_fd: int) -> Insn:
    """``dst = &map`` (BPF_PSEUDO_MAP_FD): the verifier turns the fd into the map's address."""
    return ld_imm64(dst, map_fd, op.PSEUDO_MAP_FD)


def ld_func(dst: int, target: object) -> Insn:
    """``dst = &subprogram`` (BPF_PSEUDO_FUNC) at label ``target``: a callback for ``bpf_loop`` or
    ``bpf_for_each_map_elem``; the assembler puts the distance in slots in the immediate."""
    return Insn(op.LD | op.DW | op.IMM, _reg(dst), op.PSEUDO_FUNC, 0, 0, target)


def ld_map_value(dst: int, map_fd: int, offset: int = 0) -> Insn:
    """``dst = &value_of_map[0] + offset`` (BPF_PSEUDO_MAP_VALUE) for single-element arrays (globals)."""
    if not 0 <= offset < (1 << 32):
        raise AsmError(f"map value offset {offset} out of range")
    return ld_imm64(dst, (offset << 32) | (map_fd & 0xFFFFFFFF), op.PSEUDO_MAP_VALUE)


def ldx(size: int, dst: int, src: int, off: int) -> Insn:
    """``dst = *(uSIZE *)(src + off)`` (zero-extended)."""
    return Insn(op.LDX | _size(size) | op.MEM, _reg(dst), _reg(src), off)


def stx(size: int, dst: int, src: int, off: int) -> Insn:
    """``*(uSIZE *)(dst + off) = src``."""
    return Insn(op.STX | _size(size) | op.MEM, _reg(dst), _reg(src), off)


def st(size: int, dst: int, off: int, imm: int) -> Insn:
    """``*(uSIZE *)(dst + off) = imm``."""
    return Insn(op.ST | _size(size) | op.MEM, _reg(dst), 0, off, imm)


def atomic_add(size: int, dst: int, src: int, off: int) -> Insn:
    """``lock *(uSIZE *)(dst + off) += src`` (size 4 or 8): a counter shared by CPUs."""
    if size not in (4, 8):
        raise AsmError(f"atomic add of {size} bytes: only 4 or 8")
    return Insn(op.STX | _size(size) | op.ATOMIC, _reg(dst), _reg(src), off, op.ATOMIC_ADD)


# -- jumps and calls -----------------------------------------------------------------------------------


def _jump(code: int, dst: int, src: int, imm: int, target: object) -> Insn:
    if isinstance(target, int):
        return Insn(code, dst, src, target, imm)
    return Insn(code, dst, src, 0, imm, target)


def jmp_imm(operation: int | str, dst: int, imm: int, target: object) -> Insn:
    """``if dst OP imm goto target`` (64-bit compare; imm sign-extended)."""
    return _jump(op.JMP | _jmp_op(operation) | op.K, _reg(dst), 0, imm, target)


def jmp_reg(operation: int | str, dst: int, src: int, target: object) -> Insn:
    """``if dst OP src goto target`` (64-bit compare)."""
    return _jump(op.JMP | _jmp_op(operation) | op.X, _reg(dst), _reg(src), 0, target)


def jmp32_imm(operation: int | str, dst: int, imm: int, target: object) -> Insn:
    """``if wdst OP imm goto target`` (compares the lower 32 bits)."""
    return _jump(op.JMP32 | _jmp_op(operation) | op.K, _reg(dst), 0, imm, target)


def jmp32_reg(operation: int | str, dst: int, src: int, target: object) -> Insn:
    """``if wdst OP wsrc goto target`` (compares the lower 32 bits)."""
    return _jump(op.JMP32 | _jmp_op(operation) | op.X, _reg(dst), _reg(src), 0, target)


def _jfamily(operation: int) -> tuple[Callable[[int, int, object], Insn], ...]:
    return (lambda dst, imm, target: jmp_imm(operation, dst, imm, target),
            lambda dst, src, target: jmp_reg(operation, dst, src, target),
            lambda dst, imm, target: jmp32_imm(operation, dst, imm, target),
            lambda dst, src, target: jmp32_reg(operation, dst, src, target))


jeq_imm, jeq_reg, jeq32_imm, jeq32_reg = _jfamily(op.JEQ)
jne_imm, jne_reg, jne32_imm, jne32_reg = _jfamily(op.JNE)
jgt_imm, jgt_reg, jgt32_imm, jgt32_reg = _jfamily(op.JGT)
jge_imm, jge_reg, jge32_imm, jge32_reg = _jfamily(op.JGE)
jlt_imm, jlt_reg, jlt32_imm, jlt32_reg = _jfamily(op.JLT)
jle_imm, jle_reg, jle32_imm, jle32_reg = _jfamily(op.JLE)
jsgt_imm, jsgt_reg, jsgt32_imm, jsgt32_reg = _jfamily(op.JSGT)
jsge_imm, jsge_reg, jsge32_imm, jsge32_reg = _jfamily(op.JSGE)
jslt_imm, jslt_reg, jslt32_imm, jslt32_reg = _jfamily(op.JSLT)
jsle_imm, jsle_reg, jsle32_imm, jsle32_reg = _jfamily(op.JSLE)
jset_imm, jset_reg, jset32_imm, jset32_reg = _jfamily(op.JSET)
for _name in op.JMP_OPS:
    __all__ += [f"{_name}_imm", f"{_name}_reg", f"{_name}32_imm", f"{_name}32_reg"]
del _name


def ja(target: object) -> Insn:
    """``goto target``."""
    return _jump(op.JMP | op.JA, 0, 0, 0, target)


def call(helper: int) -> Insn:
    """``call helper`` (a :mod:`pycore.asm.helpers` id): args in r1-r5, result in r0, r1-r5 clobbered."""
    return Insn(op.JMP | op.CALL, 0, 0, 0, int(helper))


def exit() -> Insn:  # noqa: A001 - the instruction's name
    """``exit``: return r0 to the kernel."""
    return Insn(op.JMP | op.EXIT)
