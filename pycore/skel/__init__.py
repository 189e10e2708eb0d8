"""Typed skeletons: ``pycore skel OBJ.bpf.o`` writes a Python module (and its .pyi) for one object.

The generated class (``Counter`` for counter.bpf.o) subclasses
:class:`Skeleton` and has typed attributes for the object's programs, maps
(key/value dataclasses), globals (``rodata`` before load, ``bss``/``data``
live) and ring buffers (their event dataclass); a wrong name or a wrongly
typed value fails under mypy and, with a message naming what exists, at run
time. A thin layer over BpfObject and RingBuffer: not a second loader.

- :mod:`~pycore.skel.runtime`: Skeleton and the typed attributes generated code uses (run time)
- :mod:`~pycore.skel.model`: what a skeleton says about an object, from its ELF and BTF (generation)
- :mod:`~pycore.skel.render`: the model as .py and .pyi text, deterministic
- :mod:`~pycore.skel.generate`: both files written whole or not at all
- :mod:`~pycore.skel.errors`: SkelError, one line saying what to do

May import: :mod:`pycore.native`, :mod:`pycore.errors`, :mod:`btf`. Nothing above.
"""

from pycore.skel.runtime import (MapAttr, Namespace, PerCpuMap, PerCpuMapAttr, PlainMapAttr, ProgAttr, RingAttr,
                                 Section, Skeleton, TypedMap, TypedRing, Var)

__all__ = ["Skeleton", "Namespace", "Section", "Var", "ProgAttr", "MapAttr", "PerCpuMapAttr", "PlainMapAttr",
           "RingAttr", "TypedMap", "PerCpuMap", "TypedRing"]
