"""Maps of a loaded object, as typed dicts.

Keys and values are decoded with :mod:`pycore.native.codec` from the map's BTF key
and value types (the object's own BTF), so a ``struct`` key reads as a
dataclass and accepts a dataclass, a dict, a tuple or bytes.  Maps without
BTF types (``key_size``/``value_size`` only) read and write ``bytes``.

Per-CPU maps hold one value per possible CPU: lookups return a list, and
:meth:`Map.sum` / :meth:`Map.summed` add them up.  Whole-map reads use the
kernel's batch operations when it has them for the map type and fall back
to one syscall per key (:attr:`Map.batch_used` says which happened).
""" 

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Iterator, Mapping

from pycore.native import libbpf as L
from pycore.errors import BpfError, Closed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from pycore.native.object import BpfObject

ffi, lib = L.ffi, L.lib


class Map:
    """A BPF map: metadata before load, contents after."""

    def __init__(self, obj: BpfObject, ptr) -> None:
        self._obj = obj
        self._ptr = ptr
        self.name = ffi.string(lib.bpf_map__name(ptr)).decode()
        self._codecs: tuple[Any, Any] | None = None
        self.batch_used: bool | None = None  # None: no whole-map read yet

    def __repr__(self) -> str:
        return f"<Map {self.name} {self.type_name}>"

    def _closed(self) -> None:
        self._ptr = None

    def _require(self):
        if self._ptr is None:
            raise Closed(f"map {self.name} of {self._obj.name}")
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
        return L.MAP_TYPE_NAMES.get(self.type, str(self.type))

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
    def pin_path(self) -> str | None:
        """Where the map is (or, before load, will be) pinned; None if not (see ``BpfObject(pin_dir=)``)."""
        p = lib.bpf_map__pin_path(self._require())
        return None if p == ffi.NULL else ffi.string(p).decode()

    @property
    def reused(self) -> bool:
        """Whether load() reused a map an earlier run pinned (its contents continue) rather than creating it."""
        pinning = self._obj._pinning
        return self._obj.loaded and pinning is not None and self.name in pinning.reused

    @property
    def internal(self) -> bool:
        """A map libbpf made for .rodata/.bss/.data/.kconfig."""
        return bool(lib.bpf_map__is_internal(self._require()))

    # -- types --------------------------------------------------------------

    @property
    def percpu(self) -> bool:
        return self.type in PERCPU_TYPES

    @property
    def is_array(self) -> bool:
        return self.type in ARRAY_TYPES

    @property
    def ncpus(self) -> int:
        """Number of possible CPUs: the length of a per-CPU value list."""
        n = lib.libbpf_num_possible_cpus()
        if n < 0:
            raise BpfError(f"{self._what('count possible CPUs')}", -n)
        return n

    def _codec_pair(self) -> tuple[Any, Any]:
        """(key codec, value codec); None for a side without BTF (raw bytes)."""
        if self._codecs is None:
            from pycore.native.codec import decoder_for

            kid, vid = self.btf_key_type_id, self.btf_value_type_id
            spec = self._obj.btf if kid or vid else None
            self._codecs = (decoder_for(spec, kid) if kid else None,
                            decoder_for(spec, vid) if vid else None)
        return self._codecs

    @property
    def key_codec(self) -> Any:
        return self._codec_pair()[0]

    @property
    def value_codec(self) -> Any:
        return self._codec_pair()[1]

    def _what(self, action: str) -> str:
        return f"{self._obj.name}: map {self.name}: {action}"

    def _dict_like(self) -> None:
        if self.type in NOT_DICT_TYPES:
            raise TypeError(f"map {self.name} is a {self.type_name} map, not dict-like"
                            + (" (read it with pycore.native.ringbuf)" if self.type == RINGBUF else ""))

    # -- encoding -----------------------------------------------------------

    def _encode(self, codec: Any, size: int, value: Any, side: str) -> bytes:
        if codec is not None:
            try:
                b = codec.encode(value)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"map {self.name}: {side}: {exc}") from None
        elif isinstance(value, int):
            b = value.to_bytes(size, "little", signed=value < 0)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            b = bytes(value)
        else:
            raise TypeError(f"map {self.name} has no BTF {side} type: give bytes or an int, "
                            f"not {type(value).__name__}")
        if len(b) != size:
            raise ValueError(f"map {self.name}: {side} is {len(b)} bytes, the map's is {size}")
        return b

    def encode_key(self, key: Any) -> bytes:
        return self._encode(self.key_codec, self.key_size, key, "key")

    def decode_key(self, raw: Any) -> Any:
        c = self.key_codec
        return c.decode(raw) if c is not None else bytes(raw)

    def _stride(self) -> int:
        return (self.value_size + 7) & ~7

    def encode_value(self, value: Any) -> bytes:
        size = self.value_size
        if not self.percpu:
            return self._encode(self.value_codec, size, value, "value")
        n, stride = self.ncpus, self._stride()
        if isinstance(value, list) and len(value) == n:  # one value per CPU
            parts = [self._encode(self.value_codec, size, v, "value") for v in value]
        else:  # one value for every CPU
            parts = [self._encode(self.value_codec, size, value, "value")] * n
        pad = bytes(stride - size)
        return b"".join(p + pad for p in parts)

    def decode_value(self, raw: Any) -> Any:
        c = self.value_codec
        if not self.percpu:
            return c.decode(raw) if c is not None else bytes(raw)
        stride = self._stride()
        if c is not None:
            return c.decode_many(raw, self.ncpus, stride)
        return [bytes(raw[i * stride:i * stride + self.value_size]) for i in range(self.ncpus)]

    def _value_buffer(self, count: int = 1):
        size = self._stride() * self.ncpus if self.percpu else self.value_size
        return ffi.new("char[]", max(size * count, 1))

    # -- raw access -----------------------------------------------------------

    def lookup_raw(self, key: bytes) -> bytes | None:
        value = self._value_buffer()
        if lib.bpf_map_lookup_elem(self.fd, key, value) < 0:
            err = ffi.errno
            if err == errno.ENOENT:
                return None
            raise BpfError(self._what("lookup"), err)
        return ffi.buffer(value)[:]

    def update_raw(self, key: bytes, value: bytes, flags: int = 0) -> None:
        if lib.bpf_map_update_elem(self.fd, key, value, flags) < 0:
            raise BpfError(self._what("update"), ffi.errno)

    def delete_raw(self, key: bytes) -> bool:
        if lib.bpf_map_delete_elem(self.fd, key) < 0:
            err = ffi.errno
            if err == errno.ENOENT:
                return False
            raise BpfError(self._what("delete"), err,
                           hint="array elements cannot be deleted; assign zero instead" if self.is_array else "")
        return True

    def keys_raw(self) -> Iterator[bytes]:
        fd, size = self.fd, self.key_size
        cur = ffi.NULL
        nxt = ffi.new("char[]", size)
        while lib.bpf_map_get_next_key(fd, cur, nxt) == 0:
            key = ffi.buffer(nxt)[:]
            yield key
            cur = ffi.new("char[]", key)

    def items_raw(self) -> list[tuple[bytes, bytes]]:
        """Every (key, value) as bytes: one batch syscall per chunk when the
        kernel supports it for this map, else one lookup per key."""
        if self.batch_used is not False:
            got = self._lookup_batch()
            if got is not None:
                self.batch_used = True
                return got
            self.batch_used = False
        out = []
        for k in self.keys_raw():
            v = self.lookup_raw(k)
            if v is not None:
                out.append((k, v))
        return out

    def _lookup_batch(self) -> list[tuple[bytes, bytes]] | None:
        """None when the kernel has no batch ops for this map (EINVAL, ENOTSUPP)."""
        if not L.has("bpf_map_lookup_batch"):
            return None
        fd, ksize = self.fd, self.key_size
        vsize = self._stride() * self.ncpus if self.percpu else self.value_size
        chunk = max(1, min(self.max_entries, 4096))
        keys = ffi.new("char[]", ksize * chunk)
        values = self._value_buffer(chunk)
        token_size = max(ksize, 8)
        in_batch, out_batch = ffi.NULL, ffi.new("char[]", token_size)
        count = ffi.new("__u32 *")
        opts = ffi.new("struct bpf_map_batch_opts *", {"sz": ffi.sizeof("struct bpf_map_batch_opts")})
        out: list[tuple[bytes, bytes]] = []
        kbuf, vbuf = ffi.buffer(keys), ffi.buffer(values)
        while True:
            count[0] = chunk
            ret = lib.bpf_map_lookup_batch(fd, in_batch, out_batch, keys, values, count, opts)
            err = ffi.errno if ret < 0 else 0
            if err and err != errno.ENOENT:
                if not out and in_batch == ffi.NULL and err in BATCH_UNSUPPORTED:
                    return None
                if err == errno.ENOSPC and not out:  # a hash bucket larger than the chunk
                    return None
                raise BpfError(self._what("batch lookup"), err)
            kb, vb = kbuf[:count[0] * ksize], vbuf[:count[0] * vsize]
            out.extend((kb[i * ksize:(i + 1) * ksize], vb[i * vsize:(i + 1) * vsize]) for i in range(count[0]))
            if err == errno.ENOENT:
                return out
            if in_batch == ffi.NULL:
                in_batch = ffi.new("char[]", token_size)
            ffi.memmove(in_batch, out_batch, token_size)

    # -- dict interface ---------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        self._dict_like()
        raw = self.lookup_raw(self.encode_key(key))
        if raw is None:
            raise KeyError(key)
        return self.decode_value(raw)

    def get(self, key: Any, default: Any = None) -> Any:
        self._dict_like()
        raw = self.lookup_raw(self.encode_key(key))
        return default if raw is None else self.decode_value(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._dict_like()
        self.update_raw(self.encode_key(key), self.encode_value(value))

    def __delitem__(self, key: Any) -> None:
        self._dict_like()
        if not self.delete_raw(self.encode_key(key)):
            raise KeyError(key)

    def __contains__(self, key: Any) -> bool:
        self._dict_like()
        return self.lookup_raw(self.encode_key(key)) is not None

    def __iter__(self) -> Iterator[Any]:
        self._dict_like()
        return (self.decode_key(k) for k in list(self.keys_raw()))

    keys = __iter__

    def __len__(self) -> int:
        self._dict_like()
        if self.is_array:
            return self.max_entries
        return sum(1 for _ in self.keys_raw())

    def items(self) -> list[tuple[Any, Any]]:
        self._dict_like()
        return [(self.decode_key(k), self.decode_value(v)) for k, v in self.items_raw()]

    def values(self) -> list[Any]:
        self._dict_like()
        return [self.decode_value(v) for _, v in self.items_raw()]

    def update(self, other: Mapping[Any, Any] | None = None, /, **kw: Any) -> None:
        """Write many entries (one batch syscall when the kernel supports it)."""
        self._dict_like()
        pairs = list((other or {}).items()) + list(kw.items())
        if not pairs:
            return
        keys = b"".join(self.encode_key(k) for k, _ in pairs)
        values = b"".join(self.encode_value(v) for _, v in pairs)
        if L.has("bpf_map_update_batch"):
            count = ffi.new("__u32 *", len(pairs))
            opts = ffi.new("struct bpf_map_batch_opts *", {"sz": ffi.sizeof("struct bpf_map_batch_opts")})
            if lib.bpf_map_update_batch(self.fd, keys, values, count, opts) == 0:
                return
            err = ffi.errno
            if err not in BATCH_UNSUPPORTED:
                raise BpfError(self._what(f"batch update of {len(pairs)} entries"), err)
        for k, v in pairs:
            self.update_raw(self.encode_key(k), self.encode_value(v))

    def clear(self) -> None:
        """Delete every entry; array elements (which cannot be deleted) are zeroed."""
        self._dict_like()
        if self.is_array:
            zero = bytes(len(self._value_buffer()))
            for i in range(self.max_entries):
                self.update_raw(i.to_bytes(self.key_size, "little"), zero)
            return
        keys = list(self.keys_raw())
        if not keys:
            return
        if L.has("bpf_map_delete_batch"):
            count = ffi.new("__u32 *", len(keys))
            opts = ffi.new("struct bpf_map_batch_opts *", {"sz": ffi.sizeof("struct bpf_map_batch_opts")})
            if lib.bpf_map_delete_batch(self.fd, b"".join(keys), count, opts) == 0:
                return
            if ffi.errno not in BATCH_UNSUPPORTED + (errno.ENOENT,):
                raise BpfError(self._what("batch delete"), ffi.errno)
        for k in keys:
            self.delete_raw(k)

    # -- per-CPU ------------------------------------------------------------------

    def sum(self, key: Any) -> Any:
        """A per-CPU value added up over the CPUs (numbers, and structs field by field)."""
        if not self.percpu:
            raise TypeError(f"map {self.name} is a {self.type_name} map, not per-CPU")
        return _sum(self[key])

    def summed(self) -> dict[Any, Any]:
        """Every key with its per-CPU values added up."""
        if not self.percpu:
            raise TypeError(f"map {self.name} is a {self.type_name} map, not per-CPU")
        return {k: _sum(v) for k, v in self.items()}


def _sum(values: list[Any]) -> Any:
    first = values[0]
    if isinstance(first, bool) or not isinstance(first, (int, float)) and not dataclasses.is_dataclass(first) \
            and not isinstance(first, list):
        return first if all(v == first for v in values) else values
    if isinstance(first, (int, float)):
        return sum(values)
    if isinstance(first, list):
        return [_sum(list(col)) for col in zip(*values)]
    return type(first)(**{f.name: _sum([getattr(v, f.name) for v in values])
                          for f in dataclasses.fields(first)})


HASH, ARRAY, PERCPU_HASH, PERCPU_ARRAY, LRU_HASH, LRU_PERCPU_HASH, RINGBUF = 1, 2, 5, 6, 9, 10, 27
PERCPU_TYPES = (PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH, 21)  # 21: percpu cgroup storage
ARRAY_TYPES = (ARRAY, PERCPU_ARRAY)
# rings, perf buffers and program/map arrays have no readable key -> value contents
NOT_DICT_TYPES = (RINGBUF, 4, 3, 12, 13, 7, 31)  # 31: user ringbuf
ENOTSUPP = 524  # the kernel's internal "not supported", leaked by some map types
BATCH_UNSUPPORTED = (errno.EINVAL, ENOTSUPP, errno.EOPNOTSUPP, errno.ENOSYS)
