"""The native layer: libbpf through cffi, and the wrappers that own what it hands out.

Modelled on libbpf-rs: a few classes own native resources (objects, links,
ring buffers) and release them deterministically; every failure is a
:class:`pycore.errors.BpfError` saying what failed and why.

- :mod:`~pycore.native.cdef`, :mod:`~pycore.native._ffi`: the declarations and their precompiled cffi module
- :mod:`~pycore.native.libbpf`: the loaded library, its log, map/program type names
- :mod:`~pycore.native.object`: BpfObject, Program, Link
- :mod:`~pycore.native.maps`, :mod:`~pycore.native.globals`: typed maps and .rodata/.bss/.data
- :mod:`~pycore.native.codec`: BTF types to dataclasses and back
- :mod:`~pycore.native.ringbuf`: ring-buffer consumers (dataclasses, callbacks, asyncio, numpy)
- :mod:`~pycore.native.progstats`: per-program run counts and time
- :mod:`~pycore.native.pinning`, :mod:`~pycore.native.maplayout`: opt-in pinning, reuse of matching pinned maps
- :mod:`~pycore.native.bpffs`, :mod:`~pycore.native.objinfo`: what is pinned on bpffs, what the kernel says of it
- :mod:`~pycore.native.shipped`: where the package's precompiled ``NAME.bpf.o`` live

May import: :mod:`pycore.errors`, :mod:`btf`. Nothing above.
"""
