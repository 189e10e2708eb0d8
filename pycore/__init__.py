"""pycore: a Linux tracer in Python built on libbpf CO-RE.

BPF programs (bpf_src/) are compiled ahead of time with clang and shipped in
this package as ``pycore/bpf/NAME.bpf.o`` (see :mod:`pycore.native.shipped`);
they are loaded through cffi bindings to the system libbpf. Kernel types come
from BTF, read by the pure-Python :mod:`btf` package.

The public API is what this module exports (``pycore.open_tool``,
``pycore.BpfObject``, ...) plus the modules docs/embedding.md names;
docs/architecture.md shows the layers. Names are imported on first use, so
``pycore list`` does not pay for libbpf and the tools at start-up.
"""

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "open_tool": "pycore.embed.session",
    "trace": "pycore.lang.session",
    "TraceSession": "pycore.lang.session",
    "ToolSession": "pycore.embed.session",
    "NoMethod": "pycore.tools.api",
    "BpfObject": "pycore.native.object",
    "RingBuffer": "pycore.native.ringbuf",
    "object_path": "pycore.native.shipped",
    "PycoreError": "pycore.errors",
    "BpfError": "pycore.errors",
    "ElfError": "pycore.errors",
    "FeatureMissing": "pycore.errors",
}

__all__ = ["__version__", *_EXPORTS]

TYPE_CHECKING = False
if TYPE_CHECKING:
    # `X as X`: re-exported for mypy --strict (no implicit re-export; it cannot read __all__ here)
    from pycore.embed.session import ToolSession as ToolSession, open_tool as open_tool
    from pycore.lang.session import TraceSession as TraceSession, trace as trace
    from pycore.errors import BpfError as BpfError, ElfError as ElfError
    from pycore.errors import FeatureMissing as FeatureMissing, PycoreError as PycoreError
    from pycore.native.object import BpfObject as BpfObject
    from pycore.native.ringbuf import RingBuffer as RingBuffer
    from pycore.native.shipped import object_path as object_path
    from pycore.tools.api import NoMethod as NoMethod


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pycore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
