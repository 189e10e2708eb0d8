"""Opt-in pinning for a BpfObject: state that survives a restart or an upgrade of the agent.

``BpfObject(path, pin_dir=DIR)`` pins maps in ``DIR`` (a directory on bpffs,
created if needed) as ``DIR/MAP``.  At the next load, from the same build or
a newer one, a map pinned there whose layout matches is reused: counters and
histograms continue.  One whose layout does not match is refused before
anything is loaded, with a :class:`pycore.errors.PinMismatch` naming the map,
the pin, what differs and what to do.  Without ``pin_dir`` nothing is
pinned, including maps the C source declares with
``__uint(pinning, LIBBPF_PIN_BY_NAME)`` (libbpf would pin those in
``/sys/fs/bpf``): pinning outlives kill -9, so it is asked for, never implied.

Which maps (``pin_maps``): ``None``, those declared ``LIBBPF_PIN_BY_NAME``;
``True``, every map but the ``.rodata``/``.bss``/``.data`` ones (libbpf
fills those at creation, so they cannot be reused); a list of names, those
and the declared ones; ``False``, none.  ``pin_links=True`` pins every link
the object's programs make as ``DIR/links/PROGRAM`` (``PROGRAM.2``... for a
program's further links), so programs keep running while the agent is down;
a restarted agent's new link takes over the pin and the old one is detached
(both run for the instant in between).

"Layout" is what a reader of the map's bytes relies on: map type, key and
value sizes, max_entries, flags, and the key and value BTF types (names,
members, offsets, member types; see :mod:`pycore.native.maplayout`),
compared with the BTF the kernel keeps with the pinned map.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pycore.errors import BpfError, PinError, PinMismatch
from pycore.native import bpffs, objinfo
from pycore.native import libbpf as L

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.native.maps import Map
    from pycore.native.object import BpfObject, Link

__all__ = ["Pinning", "declared_pins"]

ffi, lib = L.ffi, L.lib

PinMaps = bool | Iterable[str] | None


def declared_pins(obj: BpfObject) -> list[str]:
    """Maps whose pin path libbpf set at open: those declared ``__uint(pinning, LIBBPF_PIN_BY_NAME)``."""
    return [name for name, m in obj.maps.items() if lib.bpf_map__pin_path(m._require()) != ffi.NULL]


class Pinning:
    """What one object pins where; set up after open, checked before load, used at attach."""

    def __init__(self, obj: BpfObject, pin_dir: str, pin_maps: PinMaps, pin_links: bool) -> None:
        self.obj = obj
        self.dir = pin_dir                     # absolute, on bpffs (checked by the caller)
        self.links = bool(pin_links)
        self.reused: set[str] = set()
        self._link_counts: dict[str, int] = {}
        self._link_paths: list[str] = []
        declared = declared_pins(obj)
        if pin_maps is False:
            chosen: list[str] = []
        elif pin_maps is None:
            chosen = declared
        elif pin_maps is True:
            chosen = [n for n, m in obj.maps.items() if not m.internal]
        else:
            if isinstance(pin_maps, str):
                raise TypeError("pin_maps: give a list of map names, True, False or None, not one string")
            chosen = list(declared)
            for name in pin_maps:
                m = obj.maps.get(name)
                if m is None:
                    raise KeyError(f"{obj.name}: pin_maps: no map {name!r} (have {', '.join(obj.maps) or 'none'})")
                if m.internal:
                    raise ValueError(f"{obj.name}: pin_maps: {name} holds the object's globals, which "
                                     "libbpf writes when it creates the map: it cannot be pinned and reused")
                if name not in chosen:
                    chosen.append(name)
        self.maps: dict[str, str] = {}
        for name, m in obj.maps.items():
            path = os.path.join(self.dir, name) if name in chosen else None
            ret = lib.bpf_map__set_pin_path(m._require(), path.encode() if path else ffi.NULL)
            if ret < 0:
                raise BpfError(f"{obj.name}: map {name}: set pin path {path}", -ret)
            if path:
                self.maps[name] = path

    # -- before load ----------------------------------------------------------

    def prepare(self) -> None:
        """Create the pin directory and refuse pinned maps that do not match (before libbpf sees them)."""
        bpffs.make_pin_dir(self.dir)
        self.reused.clear()
        for name, path in self.maps.items():
            if os.path.lexists(path):
                self._check(self.obj.maps[name], path)
                self.reused.add(name)

    def _check(self, m: Map, path: str) -> None:
        try:
            fd = objinfo.open_pinned(path)
        except BpfError as exc:
            raise PinError(f"{self.obj.name}: map {m.name}: {exc}") from None
        try:
            kind = objinfo.kind_of(objinfo.fdinfo(fd))
            if kind != "map":
                self._refuse(m, path, [f"{path} holds a {kind or 'BPF object'}, not a map"])
            differences = self._differences(m, objinfo.map_info(fd))
        finally:
            os.close(fd)
        if differences:
            self._refuse(m, path, differences)

    def _differences(self, m: Map, old: objinfo.MapInfo) -> list[str]:
        out = []
        if old.type != m.type:
            out.append(f"map type {old.type_name} != {m.type_name}")
            return out
        new_max = m.max_entries
        if old.max_entries != new_max and not (new_max == 0 and m.type_name == "perf_event_array"):
            out.append(f"max_entries {old.max_entries} != {new_max}")
        flags = lib.bpf_map__map_flags(m._require())
        if old.map_flags != flags:
            out.append(f"map_flags {old.map_flags:#x} != {flags:#x}")
        spec_old = None
        for side, old_size, new_size, old_id, new_id in (
                ("key", old.key_size, m.key_size, old.btf_key_type_id, m.btf_key_type_id),
                ("value", old.value_size, m.value_size, old.btf_value_type_id, m.btf_value_type_id)):
            layout: list[str] = []
            if old_id and new_id and old.btf_id:
                if spec_old is None:
                    spec_old = objinfo.kernel_btf(old.btf_id)
                from pycore.native.maplayout import differences

                layout = differences(spec_old, old_id, self.obj.btf, new_id)
            if old_size != new_size:
                out.append(f"{side} size {old_size} != {new_size}" + (f": {'; '.join(layout)}" if layout else ""))
            elif layout:
                out.append(f"{side} layout: {'; '.join(layout)}")
        return out

    def _refuse(self, m: Map, path: str, differences: list[str]) -> None:
        raise PinMismatch(
            f"{self.obj.name}: map '{m.name}' pinned at {path} does not match this object (pinned != new): "
            f"{'; '.join(differences)}. An incompatible build wrote it: remove the old state with "
            f"'pycore pins {self.dir} --remove' (its contents are lost) or pin to a new pin_dir",
            map=m.name, path=path, differences=differences, pin_dir=self.dir)

    # -- links -----------------------------------------------------------------

    def pin_link(self, link: Link, program: str) -> None:
        """Pin a new link as ``links/PROGRAM``, taking the pin over from the previous run's link."""
        n = self._link_counts[program] = self._link_counts.get(program, 0) + 1
        directory = os.path.join(self.dir, "links")
        path = os.path.join(directory, program if n == 1 else f"{program}.{n}")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            os.unlink(path)  # the old link: detached now that the new one runs (if nothing else holds it)
        except FileNotFoundError:
            pass
        link.pin(path)
        self._link_paths.append(path)

    # -- removal -------------------------------------------------------------------

    def unpin(self) -> list[str]:
        """Remove this object's pins (maps and links); returns the paths removed."""
        removed = []
        for path in list(self.maps.values()) + self._link_paths:
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                pass
        self._link_paths.clear()
        for d in (os.path.join(self.dir, "links"), self.dir):
            try:
                os.rmdir(d)
            except OSError:
                pass  # other pins live there, or it is gone
        return removed
