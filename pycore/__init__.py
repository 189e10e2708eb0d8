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

# public name -> module that defines it: the one list of public names (docs/architecture.md
# "Public import paths" and docs/embedding.md say the same; tests/test_agent_api.py checks that
# every PycoreError subclass of the package is here and that the three lists agree)
_EXPORTS = {
    # running things
    "open_tool": "pycore.embed.session",
    "ToolSession": "pycore.embed.session",
    "trace": "pycore.lang.session",
    "TraceSession": "pycore.lang.session",
    "profile": "pycore.profile",
    "ProfileSession": "pycore.profile.session",
    "Event": "pycore.lang.runtime",
    "BpfObject": "pycore.native.object",
    "RingBuffer": "pycore.native.ringbuf",
    "Link": "pycore.native.object",
    "object_path": "pycore.native.shipped",
    "Option": "pycore.tools.api",
    "Hist": "pycore.hist",
    "Bucket": "pycore.hist",
    "Lost": "pycore.native.ringbuf",
    # errors: every one pycore raises, each a PycoreError
    "PycoreError": "pycore.errors",
    "BpfError": "pycore.errors",
    "ElfError": "pycore.errors",
    "FeatureMissing": "pycore.errors",
    "PinError": "pycore.errors",
    "PinMismatch": "pycore.errors",
    "Closed": "pycore.errors",
    "NoMethod": "pycore.tools.api",
    "OptionError": "pycore.tools.api",
    "ScriptError": "pycore.lang.errors",
    "CheckError": "pycore.lang.errors",
    "ScriptFeatureMissing": "pycore.lang.errors",
    "ProbeError": "pycore.lang.errors",
    "NoMatch": "pycore.lang.errors",
    "MissingFunction": "pycore.lang.errors",
    "MapNotTypedYet": "pycore.lang.errors",
    "TargetError": "pycore.kernel.process",
    "UsdtError": "pycore.elf.stapsdt",
    "PatternError": "pycore.listing.patterns",
    "SkelError": "pycore.skel.errors",
    "BuildError": "pycore.errors",
    "AsmError": "pycore.asm.insn",
    "LibbpfMissing": "pycore.native.libbpf",
    "UnsupportedType": "pycore.native.codec",
}

__all__ = ["__version__", *_EXPORTS]

TYPE_CHECKING = False
if TYPE_CHECKING:
    # `X as X`: re-exported for mypy --strict (no implicit re-export; it cannot read __all__ here)
    from pycore.asm.insn import AsmError as AsmError
    from pycore.elf.stapsdt import UsdtError as UsdtError
    from pycore.embed.session import ToolSession as ToolSession, open_tool as open_tool
    from pycore.errors import BpfError as BpfError, BuildError as BuildError, ElfError as ElfError
    from pycore.errors import FeatureMissing as FeatureMissing, PycoreError as PycoreError
    from pycore.errors import PinError as PinError, PinMismatch as PinMismatch, Closed as Closed
    from pycore.hist import Bucket as Bucket, Hist as Hist
    from pycore.kernel.process import TargetError as TargetError
    from pycore.lang.errors import CheckError as CheckError, NoMatch as NoMatch, ProbeError as ProbeError
    from pycore.lang.errors import ScriptError as ScriptError, ScriptFeatureMissing as ScriptFeatureMissing
    from pycore.lang.errors import MissingFunction as MissingFunction, MapNotTypedYet as MapNotTypedYet
    from pycore.lang.runtime import Event as Event
    from pycore.lang.session import TraceSession as TraceSession, trace as trace
    from pycore.listing.patterns import PatternError as PatternError
    from pycore.profile.session import ProfileSession as ProfileSession, profile as profile
    from pycore.native.codec import UnsupportedType as UnsupportedType
    from pycore.native.libbpf import LibbpfMissing as LibbpfMissing
    from pycore.native.object import BpfObject as BpfObject, Link as Link
    from pycore.native.ringbuf import Lost as Lost, RingBuffer as RingBuffer
    from pycore.native.shipped import object_path as object_path
    from pycore.skel.errors import SkelError as SkelError
    from pycore.tools.api import NoMethod as NoMethod, Option as Option, OptionError as OptionError


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pycore' has no attribute {name!r}")
    import importlib

    imported = importlib.import_module(module)
    # pycore.profile: the package is the callable (pycore/profile/__init__.py says why)
    value = imported if module == f"pycore.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
