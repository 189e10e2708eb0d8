"""Ready-made tracers run by ``pycore run NAME``.

- :mod:`~pycore.tools.api`: the Tool API (:class:`Tool`, :class:`Method`), what a tool declares
- :mod:`~pycore.tools.runner`: running one as ``pycore run`` does (options, fallback, loop, clean stop)
- :mod:`~pycore.tools.registry`: the list of tools
- one module per tool, plus one ``bpf_src/tools/NAME.bpf.c`` each

May import: everything below it (listing, elf, kernel, native, btf).
"""
