"""The bpftrace language, compiled by pycore: ``pycore trace`` and ``pycore.trace()``.

A textbook compiler, one module (or package of modules by concern) per stage,
each testable alone: the grammar (``grammar.lark``) and
:mod:`~pycore.lang.parser`, the tree (:mod:`~pycore.lang.ast`), the probes
resolved on this system (:mod:`~pycore.lang.probes`), the checker against BTF
(:mod:`~pycore.lang.check`), the lowering (:mod:`~pycore.lang.lower`, written
with :mod:`~pycore.lang.emit`), the :mod:`~pycore.lang.runtime` and
:mod:`~pycore.lang.session`, and bpftrace's :mod:`~pycore.lang.output`.

May import: :mod:`pycore.errors`, :mod:`btf`, and the layers below it
(asm, native, link, kernel, elf, listing). Submodules are not imported here.
"""
