"""A pure-Python reader of BTF, the BPF Type Format.

``Spec`` parses a blob (raw, or the ``.BTF`` section of an ELF object);
``btf.types`` is the type model; ``btf.cformat`` renders C; ``btf.cdump``
writes a whole ``vmlinux.h``.  Nothing here imports pycore.
"""

from .errors import BtfError
from .kinds import Kind
from .spec import Spec, load_kernel_spec, load_module_spec

__all__ = ["BtfError", "Kind", "Spec", "load_kernel_spec", "load_module_spec"]
