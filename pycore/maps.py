"""Maps of a loaded object.  (Skeleton: raw bytes access; typed access builds on it.)"""

from __future__ import annotations

from . import libbpf as L
from .errors import BpfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .object import BpfObject

ffi, lib = L.ffi, L.lib


class Map:
    """A BPF map: metadata before load, contents after."""

    def __init__(self, obj: BpfObject, ptr) -> None:
        self._obj = obj
        self._ptr = ptr
        self.name = ffi.string(lib.bpf_map__name(ptr)).decode()

    def __repr__(self) -> str:
        return f"<Map {self.name} {self.type_name}>"

    def _closed(self) -> None:
        self._ptr = None

    def _require(self):
        if self._ptr is None:
            raise ValueError(f"map {self.name}: object is closed")
        return self._ptr

    @property
    def fd(self) -> int:
        fd = lib.bpf_map__fd(self._require())
        if fd < 0:
            raise ValueError(f"map {self.name}: no fd before load()")
        return fd

    @property
    def type(self) -> int:
        return lib.bpf_map__type(self._require())

    @property
    def type_name(self) -> str:
        from .object import MAP_TYPE_NAMES

        return MAP_TYPE_NAMES.get(self.type, str(self.type))

    @property
    def key_size(self) -> int:
        return lib.bpf_map__key_size(self._require())

    @property
    def value_size(self) -> int:
        return lib.bpf_map__value_size(self._require())

    @property
    def max_entries(self) -> int:
        return lib.bpf_map__max_entries(self._require())

    @max_entries.setter
    def max_entries(self, n: int) -> None:
        self._obj._require_open("resize a map")
        ret = lib.bpf_map__set_max_entries(self._require(), n)
        if ret < 0:
            raise BpfError(f"{self._obj.name}: map {self.name}: set max_entries {n}", -ret)

    @property
    def btf_key_type_id(self) -> int:
        return lib.bpf_map__btf_key_type_id(self._require())

    @property
    def btf_value_type_id(self) -> int:
        return lib.bpf_map__btf_value_type_id(self._require())

    @property
    def internal(self) -> bool:
        """A map libbpf made for .rodata/.bss/.data/.kconfig."""
        return bool(lib.bpf_map__is_internal(self._require()))

    # -- raw access -------------------------------------------------------

    def lookup_raw(self, key: bytes) -> bytes | None:
        value = ffi.new("char[]", self.value_size)
        if lib.bpf_map_lookup_elem(self.fd, key, value) < 0:
            if ffi.errno == 2:  # ENOENT
                return None
            raise BpfError(f"map {self.name}: lookup", ffi.errno)
        return ffi.buffer(value)[:]

    def update_raw(self, key: bytes, value: bytes, flags: int = 0) -> None:
        if lib.bpf_map_update_elem(self.fd, key, value, flags) < 0:
            raise BpfError(f"map {self.name}: update", ffi.errno)

    def delete_raw(self, key: bytes) -> bool:
        if lib.bpf_map_delete_elem(self.fd, key) < 0:
            if ffi.errno == 2:
                return False
            raise BpfError(f"map {self.name}: delete", ffi.errno)
        return True

    def keys_raw(self):
        fd, size = self.fd, self.key_size
        cur = ffi.NULL
        nxt = ffi.new("char[]", size)
        while lib.bpf_map_get_next_key(fd, cur, nxt) == 0:
            key = ffi.buffer(nxt)[:]
            yield key
            cur = ffi.new("char[]", key)
