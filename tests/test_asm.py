"""pycore.asm: encodings checked against LLVM's BPF back end, jump resolution, helper ids, the disassembler.

LLVM is the independent reference: every instruction form the code
generator uses is written once in LLVM's assembly syntax and once with our
builders, and the bytes clang assembles must be ours.  Tiny C functions
compiled with ``clang -target bpf -O2`` check the same from C.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from pycore.asm import builders as b
from pycore.asm import opcodes as op
from pycore.asm.assembler import Assembler, Label, assemble
from pycore.asm.disasm import format as disasm
from pycore.asm.helpers import Helper, helper_name
from pycore.asm.insn import AsmError, Insn, decode, encode, slot_count
from pycore.asm.opcodes import R0, R1, R2, R3, R6, R10

needs_llvm = pytest.mark.skipif(not (shutil.which("clang") and shutil.which("llvm-objcopy")),
                                reason="needs clang and llvm-objcopy")

# LLVM 14's assembler has no mod and no jset (test_hand_checked_encodings covers them)
ALU_LLVM = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/=", "or": "|=", "and": "&=",
            "xor": "^=", "lsh": "<<=", "rsh": ">>=", "arsh": "s>>=", "mov": "="}
JMP_LLVM = {"jeq": "==", "jne": "!=", "jgt": ">", "jge": ">=", "jlt": "<", "jle": "<=", "jsgt": "s>",
            "jsge": "s>=", "jslt": "s<", "jsle": "s<="}


def _forms() -> list[tuple[str, Insn]]:
    """(LLVM assembly, our instruction) for every form the code generator emits."""
    out: list[tuple[str, Insn]] = []
    for name, sym in ALU_LLVM.items():
        imm = 3 if name in ("lsh", "rsh", "arsh") else -8 if name in ("add", "mov") else 7
        out += [(f"r1 {sym} {imm}", getattr(b, f"{name}64_imm")(R1, imm)),
                (f"r1 {sym} r2", getattr(b, f"{name}64_reg")(R1, R2)),
                (f"w1 {sym} {imm}", getattr(b, f"{name}32_imm")(R1, imm)),
                (f"w1 {sym} w2", getattr(b, f"{name}32_reg")(R1, R2))]
    out += [("r3 = -r3", b.neg64(R3)), ("w3 = -w3", b.neg32(R3)),
            ("r1 = be16 r1", b.bswap(R1, 16)), ("r1 = be64 r1", b.bswap(R1, 64)), ("r1 = le32 r1", b.bswap(R1, 32, "le"))]
    for size, c in ((1, "u8"), (2, "u16"), (4, "u32"), (8, "u64")):
        out += [(f"r0 = *({c} *)(r1 + 6)", b.ldx(size, R0, R1, 6)),
                (f"*({c} *)(r10 - 16) = r2", b.stx(size, R10, R2, -16))]
    out += [("lock *(u64 *)(r0 + 8) += r1", b.atomic_add(8, R0, R1, 8)),
            ("lock *(u32 *)(r0 + 4) += w1", b.atomic_add(4, R0, R1, 4)),
            ("r1 = 0x123456789 ll", b.ld_imm64(R1, 0x123456789)),
            ("r2 = -1 ll", b.ld_imm64(R2, -1)),
            ("r6 = 0x8000000000000000 ll", b.ld_imm64(R6, 1 << 63))]
    for name, sym in JMP_LLVM.items():
        out += [(f"if r1 {sym} 5 goto +1", getattr(b, f"{name}_imm")(R1, 5, 1)),
                (f"if r1 {sym} r2 goto -2", getattr(b, f"{name}_reg")(R1, R2, -2)),
                (f"if w1 {sym} 5 goto +0", getattr(b, f"{name}32_imm")(R1, 5, 0)),
                (f"if w1 {sym} w2 goto +3", getattr(b, f"{name}32_reg")(R1, R2, 3))]
    out += [("goto +4", b.ja(4)), ("call 1", b.call(Helper.map_lookup_elem)), ("call 130", b.call(130)),
            ("exit", b.exit())]
    return out


def _clang_text(tmp_path, source: str, suffix: str, *flags: str) -> bytes:
    src = tmp_path / f"x{suffix}"
    src.write_text(source)
    obj, raw = tmp_path / "x.o", tmp_path / "x.bin"
    subprocess.run(["clang", "-target", "bpf", *flags, "-c", str(src), "-o", str(obj)], check=True,
                   capture_output=True, text=True)
    subprocess.run(["llvm-objcopy", "-O", "binary", "--only-section=.text", str(obj), str(raw)], check=True)
    return raw.read_bytes()


@needs_llvm
def test_every_form_encodes_as_llvm_assembles_it(tmp_path) -> None:
    forms = _forms()
    text = _clang_text(tmp_path, "".join(f"\t{asm}\n" for asm, _ in forms), ".s")
    ours = [i.encode() for _, i in forms]
    assert len(text) == sum(map(len, ours))
    pos = 0
    for (asm, insn), enc in zip(forms, ours):
        assert text[pos:pos + len(enc)].hex() == enc.hex(), f"{asm}: {insn!r}"
        pos += len(enc)
    assert encode(decode(text)) == text   # and back


C_FUNCTIONS = """
static long (*bpf_ktime_get_ns)(void) = (void *)5;
__attribute__((section(".text"))) long ret0(void) { return 0; }
long add(long a, long b) { return a + b; }
long second(long *p) { return p[1]; }
void put(long *p, long v) { p[2] = v; }
long now(void) { return bpf_ktime_get_ns(); }
long shift(long a) { return (a << 3) >> 1; }
"""


@needs_llvm
def test_tiny_c_functions_match(tmp_path) -> None:
    text = _clang_text(tmp_path, C_FUNCTIONS, ".c", "-O2")
    want = [b.mov64_imm(R0, 0), b.exit(),
            b.mov64_reg(R0, R2), b.add64_reg(R0, R1), b.exit(),   # clang 14 adds b + a
            b.ldx(8, R0, R1, 8), b.exit(),
            b.stx(8, R1, R2, 16), b.exit(),
            b.call(Helper.ktime_get_ns), b.exit(),
            b.mov64_reg(R0, R1), b.lsh64_imm(R0, 3), b.arsh64_imm(R0, 1), b.exit()]
    assert text == encode(want), disasm(decode(text))


def test_hand_checked_encodings() -> None:
    """Forms LLVM 14 cannot assemble: mod, jset, st with an immediate, map fd and map value loads."""
    assert [b.mod64_imm(R1, 7).code, b.mod64_reg(R1, R2).code, b.mod32_imm(R1, 7).code,
            b.mod32_reg(R1, R2).code] == [0x97, 0x9F, 0x94, 0x9C]
    assert b.mod64_reg(R1, R2).encode() == bytes.fromhex("9f21000000000000")
    assert [b.jset_imm(R1, 5, 1).code, b.jset_reg(R1, R2, 1).code, b.jset32_imm(R1, 5, 1).code,
            b.jset32_reg(R1, R2, 1).code] == [0x45, 0x4D, 0x46, 0x4E]
    assert b.jset_imm(R1, 5, -2).encode() == bytes.fromhex("4501feff05000000")
    assert b.st(8, R10, -8, 0).encode() == bytes.fromhex("7a0af8ff00000000")
    assert b.st(1, R10, -1, 7).encode() == bytes.fromhex("720affff07000000")
    # ld_imm64 with src_reg 1 (BPF_PSEUDO_MAP_FD): imm = fd, second slot 0
    assert b.ld_map_fd(R1, 5).encode() == bytes.fromhex("1811000005000000" "0000000000000000")
    # src_reg 2 (BPF_PSEUDO_MAP_VALUE): imm = fd, second slot's imm = offset into the value
    assert b.ld_map_value(R2, 7, 24).encode() == bytes.fromhex("1822000007000000" "0000000018000000")
    assert b.mov64_imm(R1, 0xFFFFFFFF).encode() == b.mov64_imm(R1, -1).encode()
    with pytest.raises(AsmError, match="32 bits"):
        b.mov64_imm(R1, 1 << 32).encode()
    with pytest.raises(AsmError, match="r11 does not exist"):
        b.mov64_reg(11, R1)
    with pytest.raises(AsmError, match="only 1, 2, 4 or 8"):
        b.ldx(3, R0, R1, 0)
    with pytest.raises(AsmError, match="16 bits"):
        b.ldx(8, R0, R1, 40000).encode()


def test_ld_imm64_is_two_slots() -> None:
    prog = [b.ld_imm64(R1, 1 << 40), b.exit()]
    assert [i.slots for i in prog] == [2, 1] and slot_count(prog) == 3
    assert len(encode(prog)) == 24
    assert decode(encode(prog)) == prog


def test_labels_resolve_forwards_and_backwards() -> None:
    a = Assembler()
    top, out = a.label("top"), a.label("out")
    a.place(top)
    a(b.add64_imm(R1, 1))                # slot 0
    a(b.jgt_imm(R1, 10, out))            # slot 1 -> 6
    a(b.ld_imm64(R2, 1 << 33))           # slots 2-3
    a(b.jeq_reg(R1, R2, out))            # slot 4 -> 6
    a(b.ja(top))                         # slot 5 -> 0
    a.place(out)
    a(b.mov64_imm(R0, 0), b.exit())      # slots 6, 7
    prog = a.assemble()
    assert [i.off for i in prog if i.is_jump] == [4, 1, -6]
    assert all(i.target is None for i in prog)
    assert a.slots == 8


def test_ld_func_holds_the_distance_to_its_subprogram() -> None:
    """A callback's address (BPF_PSEUDO_FUNC): its distance in slots from the next slot, in imm."""
    cb = Label("cb")
    out = assemble([b.ld_func(R2, cb), b.alu64_imm("mov", R0, 0), b.exit(), cb, b.alu64_imm("mov", R0, 1), b.exit()])
    ld = out[0]
    # the kernel finds it at insn_idx + imm + 1, insn_idx the ld_imm64's first slot: 0 + 3 + 1 = slot 4
    assert (ld.code, ld.src, ld.dst, ld.off, ld.imm) == (op.LD | op.DW | op.IMM, op.PSEUDO_FUNC, R2, 0, 3)
    assert encode(out)[:16] == bytes([0x18, 0x42, 0, 0, 3, 0, 0, 0]) + bytes(8)


def test_label_errors_are_clear() -> None:
    nowhere = Label("nowhere")
    with pytest.raises(AsmError, match="label nowhere, which is never placed"):
        assemble([b.ja(nowhere), b.exit()])
    twice = Label("twice")
    with pytest.raises(AsmError, match="label twice placed twice"):
        assemble([twice, b.exit(), twice])
    end = Label("end")
    with pytest.raises(AsmError, match="after the last instruction"):
        assemble([b.ja(end), b.exit(), end])
    far = Label("far")
    with pytest.raises(AsmError, match="does not fit in 16 bits"):
        assemble([b.ja(far)] + [b.mov64_imm(R0, 0)] * 40000 + [far, b.exit()])
    with pytest.raises(AsmError, match="not resolved"):
        b.jeq_imm(R0, 0, Label("x")).encode()


def test_disassembler_speaks_the_verifiers_syntax() -> None:
    a = Assembler()
    out = a.label("out")
    a(b.mov64_reg(R6, R1),
      b.ldx(8, R1, R10, -8),
      b.st(4, R10, -4, 0),
      b.ld_map_fd(R1, 5),
      b.mov64_reg(R2, R10),
      b.add64_imm(R2, -4),
      b.call(Helper.map_lookup_elem),
      b.jeq_imm(R0, 0, out),
      b.atomic_add(8, R0, R6, 0),
      b.jsgt32_reg(R1, R2, out),
      b.ld_map_value(R3, 5, 16),
      b.bswap(R1, 16))
    a.place(out)
    a(b.mov32_imm(R0, 0), b.exit())
    assert disasm(a.assemble()) == "\n".join([
        "   0: r6 = r1",
        "   1: r1 = *(u64 *)(r10 -8)",
        "   2: *(u32 *)(r10 -4) = 0",
        "   3: r1 = map[fd:5]",
        "   5: r2 = r10",
        "   6: r2 += -4",
        "   7: call bpf_map_lookup_elem#1",
        "   8: if r0 == 0x0 goto pc+5",
        "   9: lock *(u64 *)(r0 +0) += r6",
        "  10: if w1 s> w2 goto pc+3",
        "  11: r3 = map[fd:5][0]+16",
        "  13: r1 = be16 r1",
        "  14: w0 = 0",
        "  15: exit"])
    assert disasm([b.exit()], opcodes=True) == "   0: (95) exit"
    assert disasm([b.call(9999)]).endswith("call unknown#9999")


def test_helper_ids_match_the_running_kernel() -> None:
    """Every id in Helper is the kernel's own (enum bpf_func_id in /sys/kernel/btf/vmlinux)."""
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("no kernel BTF")
    from btf import Kind, load_kernel_spec

    enum = load_kernel_spec().find("bpf_func_id", Kind.ENUM)
    kernel = {v.name.removeprefix("BPF_FUNC_"): v.value for v in enum.values}
    for h in Helper:
        assert kernel.get(h.name) == h.value, h
    wanted = ("map_lookup_elem map_update_elem map_delete_elem probe_read_kernel probe_read_user "
              "probe_read_kernel_str probe_read_user_str ktime_get_ns ktime_get_boot_ns get_current_pid_tgid "
              "get_current_uid_gid get_current_comm get_current_task get_current_task_btf get_smp_processor_id "
              "get_stackid ringbuf_output ringbuf_reserve ringbuf_submit ringbuf_discard perf_event_output "
              "get_func_ip get_func_arg get_func_ret get_attach_cookie probe_read_str send_signal "
              "override_return loop snprintf").split()
    assert not [w for w in wanted if w not in Helper.__members__]
    assert helper_name(1) == "bpf_map_lookup_elem"


def test_asm_imports_nothing_above_errors() -> None:
    """asm is plain data: it may use pycore.errors and pycore.record (the layer under it), nothing more."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent / "pycore" / "asm"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("pycore", "btf"):
                assert node.module.startswith(("pycore.asm", "pycore.errors", "pycore.record")), (path.name, node.module)
