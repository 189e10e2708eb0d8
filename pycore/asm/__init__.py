"""BPF instructions as plain data, for ``pycore trace``'s code generator.

- :mod:`~pycore.asm.opcodes`: classes, sizes, ALU/JMP operations and modes as named constants
- :mod:`~pycore.asm.insn`: ``Insn`` (``ld_imm64`` is one Insn of two slots), encoding, decoding
- :mod:`~pycore.asm.builders`: one function per form the code generator emits (``mov64_imm``, ``ldx``...)
- :mod:`~pycore.asm.assembler`: ``Assembler`` and ``Label``: jump offsets resolved
- :mod:`~pycore.asm.helpers`: BPF helper ids (``enum bpf_func_id``), checked against the kernel's BTF
- :mod:`~pycore.asm.disasm`: ``format(insns)`` in the kernel verifier's syntax, for ``pycore trace -v``

May import: :mod:`pycore.errors`. Nothing else of pycore (not even btf).
"""
