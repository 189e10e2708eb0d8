"""The build helper: compile an agent's own ``*.bpf.c`` into a CO-RE object the way pycore builds its own.

Build time only. ``pycore build`` and the CMake function
``pycore_add_bpf_object`` (``pycore/cmake/PycoreBpf.cmake``, which calls
``pycore build``) use it; nothing that loads, attaches or traces imports it
(tests/test_build_helper.py checks), so an agent's run time never needs
clang, headers or a ``vmlinux.h``.

- :mod:`~pycore.build.errors`: BuildError, one line saying what is missing and what to do
- :mod:`~pycore.build.toolchain`: clang, llvm-strip, bpftool, libbpf's headers, the target arch
- :mod:`~pycore.build.headers`: pycore's own BPF headers (``pycore.bpf.h``, ``pycore_usdt.bpf.h``) and CMake files
- :mod:`~pycore.build.vmlinux`: ``vmlinux.h`` written from a BTF file by :mod:`btf`, cached by the BTF's digest
- :mod:`~pycore.build.compile`: the one definition of the compile: flags, strip, link, depfile

May import: :mod:`pycore.errors`, :mod:`btf`. Nothing above.
"""
