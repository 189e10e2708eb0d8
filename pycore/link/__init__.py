"""Attach points, one file per kind, for programs that are not libbpf objects (``pycore trace``'s).

Modelled on cilium/ebpf's ``link`` package: every attach function takes a
loaded program (:class:`pycore.native.program.LoadedProgram`, or anything
with ``.fd`` and ``.name``) and returns a :class:`~pycore.link.base.Link`
that owns the fds (bpf_link and/or perf event) and detaches on ``close()``.

- :mod:`~pycore.link.base`: ``Link``; tracefs, PMU and CPU-list readers
- :mod:`~pycore.link.perf_event`: ``perf_event_open`` and attaching a program to a perf event
- :mod:`~pycore.link.tracepoint`, :mod:`~pycore.link.raw_tracepoint`, :mod:`~pycore.link.tracing` (fentry/fexit/tp_btf)
- :mod:`~pycore.link.kprobe`, :mod:`~pycore.link.uprobe` (through the kprobe/uprobe PMUs)
- :mod:`~pycore.link.perf` (``profile:hz:N``, ``interval:ms:N``, software/hardware counters)
- :mod:`~pycore.link.target`: ``attach_target``, one probe of ``pycore trace`` to its links

Failures are :class:`pycore.errors.BpfError` (one line: what, on what, why),
or :class:`pycore.errors.FeatureMissing` where the kernel lacks the kind.

May import: :mod:`pycore.errors`, :mod:`pycore.asm`, :mod:`pycore.native`, :mod:`btf`. Nothing above
(it sits below :mod:`pycore.kernel`: tracefs ids are read here, in a few lines).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_LAZY = {
    "Link": "pycore.link.base",
    "attach_target": "pycore.link.target",
    "attach_tracepoint": "pycore.link.tracepoint",
    "attach_raw_tracepoint": "pycore.link.raw_tracepoint",
    "attach_tracing": "pycore.link.tracing",
    "attach_kprobe": "pycore.link.kprobe",
    "attach_uprobe": "pycore.link.uprobe",
    "attach_profile": "pycore.link.perf",
    "attach_interval": "pycore.link.perf",
    "attach_perf": "pycore.link.perf",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """``from pycore.link import attach_tracepoint`` without importing every kind up front."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pycore.link' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
