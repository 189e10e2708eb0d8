"""The bpftrace language, compiled by pycore: ``pycore trace`` and ``pycore.trace()``.

A textbook compiler, one module per stage, each testable alone: the grammar
(``grammar.lark``) and :mod:`~pycore.trace.parser`, the tree
(:mod:`~pycore.trace.ast`), the probes resolved on this system
(:mod:`~pycore.trace.probes`), the :mod:`~pycore.trace.checker` against BTF,
the lowering (:mod:`~pycore.trace.codegen`, written with
:mod:`~pycore.trace.emit`), the :mod:`~pycore.trace.runtime` and
:mod:`~pycore.trace.session`, and bpftrace's :mod:`~pycore.trace.output`.

May import: :mod:`pycore.errors`, :mod:`btf`, and the layers below it
(asm, native, link, kernel, elf, listing). Submodules are not imported here.
"""
