"""A whole, compilable ``vmlinux.h`` from a Spec, as bpftool writes it.

``bpftool btf dump file ... format c`` (v7.1, libbpf 1.1) is the reference:
our output is meant to equal it byte for byte, so it follows libbpf's
btf_dump algorithm, one stage per module:

* :mod:`.columns`: the spec's records as columns by type id (the raw words
  the rest reads, and the strings they name);
* :mod:`.plan`: which types the header defines, in which order, and where a
  forward declaration goes (libbpf's ordering and emitting walks); a plan
  is a list of (type id, what to print) items, with no text made;
* :mod:`.render`: the C text of each plan item, with :mod:`.sizes` for the
  sizes, alignments and packing that padding needs;
* :mod:`.names`: libbpf's unique names, ``foo___2`` for the second
  ``foo`` in a C namespace, given in the order the text is made.

:func:`write_header` runs them in one process: the plan, then each item's
text in its order.
"""

from __future__ import annotations

import gc
import io
import sys

from ..errors import BtfError
from .columns import Columns
from .names import Namer
from .plan import plan
from .render import Renderer
from .sizes import Sizes

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import TextIO

    from ..spec import Spec

__all__ = ["HEADER_EPILOGUE", "HEADER_PROLOGUE", "HeaderWriter", "header", "write_header"]

HEADER_PROLOGUE = (
    "#ifndef __VMLINUX_H__\n"
    "#define __VMLINUX_H__\n"
    "\n"
    "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n"
    "#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)\n"
    "#endif\n"
    "\n"
)
HEADER_EPILOGUE = (
    "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n"
    "#pragma clang attribute pop\n"
    "#endif\n"
    "\n"
    "#endif /* __VMLINUX_H__ */\n"
)

_WRITE_PARTS = 256  # parts joined per write (see write_header)


class HeaderWriter:
    """One pass of libbpf's btf_dump over a whole spec: :attr:`columns`
    read once, planned once (:meth:`plan`), each item rendered in the plan's
    order (:meth:`render`: names are given as the text is made)."""

    def __init__(self, spec: Spec, type_tags: bool = False) -> None:
        """``type_tags`` adds ``btf_type_tag`` attributes, which bpftool 7.1 leaves out."""
        self.columns = cols = Columns(spec)
        self.namer = Namer(cols.name_of, cols.kinds, cols.vlen)
        self.sizes = Sizes(cols)
        self.renderer = Renderer(cols, self.sizes, self.namer, type_tags)
        self.render = self.renderer.render

    def plan(self) -> list[int]:
        """What the header defines, in order (see :mod:`btf.cdump.plan`)."""
        return plan(self.columns)

    def run(self) -> list[str]:
        """The header's text in parts: the plan, rendered in its order."""
        return [HEADER_PROLOGUE, *map(self.render, self.plan()), HEADER_EPILOGUE]


def write_header(spec: Spec, out: TextIO, type_tags: bool = False) -> None:
    """Write ``vmlinux.h`` for ``spec``: what ``bpftool btf dump ... format c`` prints.

    ``type_tags`` adds ``btf_type_tag`` attributes, which bpftool 7.1 leaves out.
    """
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    # The dump allocates ~a million small objects and frees none of them
    # until the end: the cyclic collector would only walk them again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        parts = HeaderWriter(spec, type_tags).run()
    except RecursionError:
        # Ordering is a depth-first walk like libbpf's; real BTF stays under a
        # hundred levels, so this depth means a cycle through typedefs/modifiers.
        raise BtfError("type graph nests too deep to order (cyclic BTF?)") from None
    finally:
        sys.setrecursionlimit(limit)
        if gc_was_on:
            gc.enable()
    # In pieces of a few hundred kB: one 4 MB string (and its UTF-8 copy)
    # is fresh memory the kernel must fault in page by page, where pieces
    # reuse the same few pages (3 ms of a dump on a VM).
    for at in range(0, len(parts), _WRITE_PARTS):
        out.write("".join(parts[at:at + _WRITE_PARTS]))


def header(spec: Spec, type_tags: bool = False) -> str:
    """The whole ``vmlinux.h`` as one string."""
    buf = io.StringIO()
    write_header(spec, buf, type_tags)
    return buf.getvalue()
