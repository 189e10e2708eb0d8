"""pycore: a Linux tracer in Python built on libbpf CO-RE.

BPF programs (bpf_src/) are compiled ahead of time with clang and shipped in
this package as ``pycore/bpf/NAME.bpf.o`` (see :mod:`pycore.objects`); they
are loaded through cffi bindings to the system libbpf. Kernel types come from
BTF, read by the pure-Python :mod:`btf` package.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "open_tool"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.session import open_tool


def __getattr__(name: str):
    # lazy, so that `pycore list` does not pay for libbpf and the tools at start-up
    if name == "open_tool":
        from pycore.session import open_tool

        return open_tool
    raise AttributeError(f"module 'pycore' has no attribute {name!r}")
