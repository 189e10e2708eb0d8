"""Ready-made tracers run by ``pycore run NAME``: the Tool API is in
:mod:`pycore.tools.base`, the list of tools in :mod:`pycore.tools.registry`,
and each tool is one module here plus one ``bpf_src/tools/NAME.bpf.c``."""
