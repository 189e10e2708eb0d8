"""``pycore list``: what can be traced here, with types.

- :mod:`~pycore.listing.patterns`: probe patterns (``kfunc:vfs_*``, ``usdt:/path:p:n``, ``struct x``)
- :mod:`~pycore.listing.entry`: one listed line and its details
- :mod:`~pycore.listing.kernel`: the Lister: kernel probes and types from BTF, kallsyms and tracefs; hands user-space patterns to :mod:`~pycore.listing.user`
- :mod:`~pycore.listing.user`: USDT probes and uprobe functions of binaries and processes

May import: everything below it (:mod:`pycore.elf`, :mod:`pycore.kernel`, :mod:`pycore.native`, :mod:`btf`).
"""
