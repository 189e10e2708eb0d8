"""Facts about the running kernel: what it can do and what it exposes.

- :mod:`~pycore.kernel.features`: fentry, kprobes, tp_btf, ring buffers... tried for real
- :mod:`~pycore.kernel.privileges`: the capabilities we need and lack
- :mod:`~pycore.kernel.kallsyms`: /proc/kallsyms, text symbols, address to name
- :mod:`~pycore.kernel.tracefs`: tracefs mount, events and their formats
- :mod:`~pycore.kernel.netctx`: network namespaces and interface names over netlink (pyroute2)

May import: :mod:`pycore.errors`, :mod:`btf`, :mod:`pycore.native`.
"""
