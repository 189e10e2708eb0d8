"""What the USDT tools share: attach a tool's programs to probes through
:class:`pycore.elf.usdt.UsdtAttacher` (own argument reader, semaphores through
the uprobe reference counter), to one process with ``-p`` or to every
process running the binary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from pycore.native.object import BpfObject
    from pycore.elf.usdt import Probe, UsdtAttacher


def attach_usdt(obj: BpfObject, binary: str, pid: int, probes: dict[str, tuple[str, str]],
                on_spec: Callable[[int, Probe, int], None] | None = None) -> UsdtAttacher:
    """``probes``: program name -> (provider, probe name); ``on_spec`` as in
    :class:`~pycore.elf.usdt.UsdtAttacher`."""
    from pycore.elf.usdt import UsdtAttacher

    att = UsdtAttacher(obj, on_spec=on_spec)
    try:
        for prog, (provider, name) in probes.items():
            att.attach(prog, binary, provider, name, pid=pid or -1)
    finally:
        att.close()
    return att
