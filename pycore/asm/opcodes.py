"""Opcode fields of a BPF instruction (include/uapi/linux/bpf.h, bpf_common.h), as named constants.

``code`` is one byte: the low 3 bits are the class; for ALU/JMP classes the
high 4 bits are the operation and bit 3 the source (K: immediate, X:
register); for load/store classes bits 3-4 are the size and 5-7 the mode.
"""

from __future__ import annotations

# classes
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07

# sizes (load/store classes)
W, H, B, DW = 0x00, 0x08, 0x10, 0x18
SIZE_BYTES = {W: 4, H: 2, B: 1, DW: 8}
SIZE_OF_BYTES = {4: W, 2: H, 1: B, 8: DW}
SIZE_NAMES = {W: "u32", H: "u16", B: "u8", DW: "u64"}

# modes (load/store classes)
IMM, ABS, IND, MEM, MEMSX, ATOMIC = 0x00, 0x20, 0x40, 0x60, 0x80, 0xC0

# source (ALU/JMP classes)
K, X = 0x00, 0x08

# ALU operations
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR, MOV, ARSH, END = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0)
ALU_OPS = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "or": OR, "and": AND, "lsh": LSH,
           "rsh": RSH, "mod": MOD, "xor": XOR, "mov": MOV, "arsh": ARSH}
ALU_SYMBOLS = {ADD: "+=", SUB: "-=", MUL: "*=", DIV: "/=", OR: "|=", AND: "&=", LSH: "<<=", RSH: ">>=",
               MOD: "%=", XOR: "^=", MOV: "=", ARSH: "s>>="}
# byte swaps (class ALU, op END): source K = to little endian, X = to big endian
TO_LE, TO_BE = K, X

# JMP operations
JA, JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE, CALL, EXIT, JLT, JLE, JSLT, JSLE = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0)
JMP_OPS = {"jeq": JEQ, "jne": JNE, "jgt": JGT, "jge": JGE, "jlt": JLT, "jle": JLE, "jsgt": JSGT,
           "jsge": JSGE, "jslt": JSLT, "jsle": JSLE, "jset": JSET}
JMP_SYMBOLS = {JEQ: "==", JNE: "!=", JGT: ">", JGE: ">=", JLT: "<", JLE: "<=", JSGT: "s>", JSGE: "s>=",
               JSLT: "s<", JSLE: "s<=", JSET: "&"}

# atomic operations (mode ATOMIC, in imm)
ATOMIC_ADD, ATOMIC_OR, ATOMIC_AND, ATOMIC_XOR = ADD, OR, AND, XOR
FETCH, XCHG, CMPXCHG = 0x01, 0xE0 | 0x01, 0xF0 | 0x01

# src_reg of a ld_imm64: what the 64-bit immediate means
PSEUDO_MAP_FD, PSEUDO_MAP_VALUE, PSEUDO_BTF_ID, PSEUDO_FUNC = 1, 2, 3, 4
PSEUDO_MAP_IDX, PSEUDO_MAP_IDX_VALUE = 5, 6
# src_reg of a call
PSEUDO_CALL, PSEUDO_KFUNC_CALL = 1, 2

# registers: r0 return value, r1-r5 arguments (clobbered by calls), r6-r9 callee-saved, r10 frame pointer
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)
FP = R10
MAX_REG = 10

INSN_SIZE = 8
