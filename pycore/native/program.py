"""Programs and maps without an object file: loaded from instructions, created from sizes.

``pycore trace`` generates its programs in Python (:mod:`pycore.asm`), so it
has no ELF object for libbpf to open.  This module loads them with libbpf's
low-level ``bpf_prog_load`` and creates their maps with ``bpf_map_create``;
each wrapper owns its fd and closes it on :meth:`close`, at the end of a
``with`` block, or when garbage-collected.

A load is tried first without a verifier log (the verifier runs faster
without one, as libbpf does); only a failure is repeated with a log, so the
:class:`~pycore.errors.BpfError` can quote the verifier
(``.verifier_tail()``).
"""

from __future__ import annotations

import errno
import os
import re
import weakref
from collections.abc import Iterator, Sequence

from pycore.asm.insn import Insn, decode, encode
from pycore.errors import BpfError, Closed
from pycore.native import libbpf as L
from pycore.native.libbpf import MAP_TYPE_NAMES, PROG_TYPE_NAMES, AttachType, MapType, ProgType

__all__ = ["LoadedProgram", "RawMap", "load_program", "create_map", "ProgType", "MapType", "AttachType",
           "BPF_ANY", "BPF_NOEXIST", "BPF_EXIST", "BPF_F_NO_PREALLOC"]

ffi, lib = L.ffi, L.lib

# bpf_map_update_elem flags, bpf_map_create flags
BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2
BPF_F_NO_PREALLOC = 1

LOG_SIZE = 1 << 20          # first verifier-log buffer after a failed load
LOG_SIZE_MAX = 1 << 24      # libbpf's and the kernel's (< 5.2: 16 MiB - 256) ceiling
_PERCPU = {MapType.PERCPU_HASH, MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH, MapType.PERCPU_CGROUP_STORAGE}
_ARRAYS = {MapType.ARRAY, MapType.PERCPU_ARRAY}
_ENOTSUPP = 524
_BATCH_UNSUPPORTED = (errno.EINVAL, _ENOTSUPP, errno.EOPNOTSUPP, errno.ENOSYS)
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.]")
_BATCH_BYTES = 1 << 20     # keys and values one batch lookup reads at most


def kernel_name(name: str) -> str:
    """``name`` as the kernel accepts it for a program or map: [A-Za-z0-9_.], at most 15 bytes."""
    return _NAME_BAD.sub("_", name)[:15]


def _type_name(table: dict[int, str], t: int) -> str:
    return table.get(int(t), f"type {int(t)}")


def _verifier_reason(log: list[str]) -> str:
    """The line of the verifier log that says why (the last one before its statistics)."""
    for line in reversed(log):
        line = line.strip()
        if line and not line.startswith(("processed ", "verification time", "stack depth", "-- END")):
            return line
    return ""


class _OwnedFd:
    """What a program and a map share: one kernel fd, closed on close(), at ``with``'s end or when collected."""

    _noun = "object"

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        self.name = name
        self._finalizer = weakref.finalize(self, os.close, fd)

    @property
    def fd(self) -> int:
        if not self._finalizer.alive:
            raise Closed(f"{self._noun} {self.name}")
        return self._fd

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Close our fd (the kernel frees the object once nothing else holds it); safe twice."""
        self._finalizer()

    def __enter__(self):  # noqa: ANN204 - the subclass
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _state(self) -> str:
        return "closed" if self.closed else f"fd {self._fd}"


class LoadedProgram(_OwnedFd):
    """A program loaded into the kernel from instructions; owns its fd."""

    _noun = "program"

    def __init__(self, fd: int, name: str, prog_type: int, insn_count: int, log: str = "") -> None:
        super().__init__(fd, name)
        self.prog_type = int(prog_type)
        self.insn_count = insn_count    #: slots loaded (what the kernel counts)
        self.log = log                  #: the verifier's log, when loaded with ``log_level`` > 0

    @property
    def type_name(self) -> str:
        return _type_name(PROG_TYPE_NAMES, self.prog_type)

    def __repr__(self) -> str:
        return f"<LoadedProgram {self.name} {self.type_name} {self.insn_count} insns, {self._state()}>"

    def _info(self, xlated: bytearray | None = None) -> object:
        info = ffi.new("struct bpf_prog_info *")
        if xlated is not None:
            info.xlated_prog_len = len(xlated)
            info.xlated_prog_insns = int(ffi.cast("uintptr_t", ffi.from_buffer(xlated)))
        size = ffi.new("__u32 *", ffi.sizeof("struct bpf_prog_info"))
        ret = lib.bpf_obj_get_info_by_fd(self.fd, info, size)
        if ret < 0:
            raise BpfError(f"program {self.name}: get info", -ret)
        return info

    @property
    def id(self) -> int:
        """The kernel's id for the program (what ``bpftool prog show`` lists)."""
        return int(self._info().id)  # type: ignore[attr-defined]

    def xlated(self) -> list[Insn]:
        """The instructions as the verifier rewrote them (a map load shows the map's id, a call a relative address)."""
        n = int(self._info().xlated_prog_len)  # type: ignore[attr-defined]
        buf = bytearray(n)
        self._info(buf)
        return decode(bytes(buf))

    def test_run(self, ctx: bytes = b"", repeat: int = 0) -> int:
        """Run it once in the kernel (BPF_PROG_TEST_RUN; how BEGIN/END raw_tracepoint programs run); returns r0."""
        opts = ffi.new("struct bpf_test_run_opts *", {"sz": ffi.sizeof("struct bpf_test_run_opts"), "repeat": repeat})
        keep = ffi.from_buffer(ctx) if ctx else ffi.NULL
        if ctx:
            opts.ctx_in = keep
            opts.ctx_size_in = len(ctx)
        ret = lib.bpf_prog_test_run_opts(self.fd, opts)
        if ret < 0:
            raise BpfError(f"program {self.name}: test run", -ret)
        return int(opts.retval)


_BPF_BTF_LOAD = 18
_NR_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280, "riscv64": 280, "s390x": 351, "ppc64le": 361}


def func_btf(names: Sequence[str]) -> bytes:
    """The smallest BTF that describes a program's functions: ``long NAME(void)``, static, one a name.

    The verifier wants func_info (one BTF FUNC per BPF function, at its first instruction) before it
    takes a subprogram's address (BPF_PSEUDO_FUNC: a callback), and wants it static; it checks the
    prototypes of global functions only, so these name the functions and no more."""
    import struct

    strings = bytearray(b"\0long\0")
    types = bytearray()
    types += struct.pack("<III", 1, 1 << 24, 8) + struct.pack("<I", (1 << 24) | 64)   # [1] INT long, signed
    types += struct.pack("<III", 0, 13 << 24, 1)                                      # [2] FUNC_PROTO long (void)
    for n in names:                                                                    # [3..] FUNC n, static
        off = len(strings)
        strings += n.encode() + b"\0"
        types += struct.pack("<III", off, 12 << 24, 2)
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return header + bytes(types) + bytes(strings)


def load_btf(data: bytes) -> int:
    """Load BTF into the kernel (BPF_BTF_LOAD); returns its fd. libbpf has bpf_btf_load, but pycore's
    bindings are the syscall's: one call, a 28-byte attribute."""
    import struct

    nr = _NR_BPF.get(os.uname().machine)
    if nr is None:
        raise BpfError("BPF_BTF_LOAD", errno.ENOSYS, hint="no bpf syscall number known here")
    blob = ffi.from_buffer(data)
    log = ffi.new("char[]", 1 << 16)
    for level in (0, 1):
        attr = ffi.new("char[]", struct.pack("<QQIII", int(ffi.cast("uintptr_t", blob)),
                                             int(ffi.cast("uintptr_t", log)) if level else 0, len(data),
                                             (1 << 16) if level else 0, level) + bytes(4))
        fd = L.libc.syscall(ffi.cast("long", nr), ffi.cast("int", _BPF_BTF_LOAD), ffi.cast("void *", attr),
                            ffi.cast("unsigned int", 32))
        if fd >= 0:
            return int(fd)
        err = ffi.errno
    raise BpfError("load the BTF of a program's functions", err, ffi.string(log).decode("utf-8", "replace").splitlines())


def load_program(insns: Sequence[Insn] | bytes, prog_type: int, *, name: str = "pycore", license: str = "GPL",
                 expected_attach_type: int | None = None, attach_btf_id: int | None = None,
                 attach_btf_obj_fd: int | None = None, kern_version: int = 0,
                 log_level: int = 0, funcs: Sequence[tuple[int, str]] = ()) -> LoadedProgram:
    """Load instructions as a program of ``prog_type`` (a :class:`ProgType`); the verifier's log is kept on failure.

    ``log_level`` 0 asks for a log only if the load fails; 1 or 2 (verbose)
    load with a log from the start and keep it in ``.log``.  fentry/fexit/
    tp_btf programs need ``expected_attach_type`` and ``attach_btf_id`` (the
    function's or ``btf_trace_*`` typedef's id in /sys/kernel/btf/vmlinux).
    """
    code = bytes(insns) if isinstance(insns, (bytes, bytearray, memoryview)) else encode(list(insns))
    count = len(code) // 8
    kname = kernel_name(name)
    opts = ffi.new("struct bpf_prog_load_opts *", {"sz": ffi.sizeof("struct bpf_prog_load_opts")})
    if expected_attach_type is not None:
        opts.expected_attach_type = int(expected_attach_type)
    if attach_btf_id is not None:
        opts.attach_btf_id = attach_btf_id
    if attach_btf_obj_fd is not None:
        opts.attach_btf_obj_fd = attach_btf_obj_fd
    opts.kern_version = kern_version
    c_name, c_license = kname.encode(), license.encode()
    btf_fd = -1
    if len(funcs) > 1:   # subprograms: the verifier needs their func_info (see func_btf)
        import struct

        # the main function named as the program (the kernel names its symbol, in stacks, after it)
        main = re.sub(r"\W", "_", kname) if re.match(r"[A-Za-z_]", kname) else "_" + re.sub(r"\W", "_", kname)
        btf_fd = load_btf(func_btf([main] + [n for _, n in funcs[1:]]))
        records = ffi.new("char[]", b"".join(struct.pack("<II", slot, 3 + i) for i, (slot, _) in enumerate(funcs)))
        opts.prog_btf_fd = btf_fd
        opts.func_info = records
        opts.func_info_cnt = len(funcs)
        opts.func_info_rec_size = 8
    try:
        return _load(opts, prog_type, name, c_name, c_license, code, count, log_level, expected_attach_type)
    finally:
        if btf_fd >= 0:
            os.close(btf_fd)


def _load(opts, prog_type: int, name: str, c_name: bytes, c_license: bytes, code: bytes, count: int,  # noqa: ANN001
          log_level: int, expected_attach_type: int | None) -> LoadedProgram:

    def attempt(level: int, size: int) -> tuple[int, str]:
        buf = ffi.new("char[]", size) if level else ffi.NULL
        opts.log_level, opts.log_size, opts.log_buf = level, size if level else 0, buf
        fd = lib.bpf_prog_load(int(prog_type), c_name, c_license, code, count, opts)
        text = ffi.string(buf).decode("utf-8", "replace") if level else ""
        return fd, text

    fd, log = attempt(log_level, LOG_SIZE if log_level < 2 else LOG_SIZE_MAX) if log_level else attempt(0, 0)
    if fd >= 0:
        return LoadedProgram(fd, name, prog_type, count, log)
    err = -fd
    size = LOG_SIZE
    while True:  # again with a log, to say why; a log cut short (ENOSPC) is tried once more, larger
        retry, log = attempt(max(log_level, 1), size)
        if retry >= 0:  # passed this time (a transient failure): keep it
            return LoadedProgram(retry, name, prog_type, count, log)
        if -retry != errno.ENOSPC or size >= LOG_SIZE_MAX:
            break
        size = LOG_SIZE_MAX
    lines = log.splitlines()
    hint = _verifier_reason(lines)
    if not hint and err == errno.EPERM and int(prog_type) == ProgType.TRACING and expected_attach_type in (
            AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT, AttachType.MODIFY_RETURN):
        hint = "this kernel refuses BPF trampolines, which fentry/fexit need (ftrace is blocked or absent)"
    elif not hint and err == errno.EINVAL and int(prog_type) not in PROG_TYPE_NAMES:
        hint = f"program type {int(prog_type)} unknown to this kernel?"
    what = f"load {_type_name(PROG_TYPE_NAMES, prog_type)} program {name} ({count} insns)"
    raise BpfError(what, err, lines, hint)


class RawMap(_OwnedFd):
    """A map created from its sizes (no BTF): keys and values are bytes; per-CPU values a list per CPU."""

    def __init__(self, fd: int, map_type: int, key_size: int, value_size: int, max_entries: int, name: str,
                 flags: int = 0) -> None:
        super().__init__(fd, name)
        self.map_type = int(map_type)
        self.key_size, self.value_size, self.max_entries = key_size, value_size, max_entries
        self.flags = flags
        self.percpu = self.map_type in _PERCPU
        self.ncpus = _possible_cpus() if self.percpu else 1
        self.stride = (value_size + 7) & ~7   # a per-CPU value's slot in the buffer
        self.batch_used: bool | None = None   # whether items() used the batch syscall (None: not tried)

    _noun = "map"

    @property
    def type_name(self) -> str:
        return _type_name(MAP_TYPE_NAMES, self.map_type)

    def __repr__(self) -> str:
        return (f"<RawMap {self.name} {self.type_name} key {self.key_size} value {self.value_size} "
                f"x{self.max_entries}, {self._state()}>")

    def _what(self, action: str) -> str:
        return f"map {self.name} ({self.type_name}): {action}"

    def _key(self, key: bytes | int) -> bytes:
        if isinstance(key, int):
            return key.to_bytes(self.key_size, "little", signed=key < 0)
        key = bytes(key)
        if len(key) != self.key_size:
            raise ValueError(f"map {self.name}: key is {len(key)} bytes, the map's is {self.key_size}")
        return key

    def _buffer_size(self) -> int:
        return self.stride * self.ncpus if self.percpu else self.value_size

    def _split(self, raw: bytes) -> bytes | list[bytes]:
        if not self.percpu:
            return raw
        s, v = self.stride, self.value_size
        return [raw[i * s:i * s + v] for i in range(self.ncpus)]

    def _join(self, value: bytes | Sequence[bytes]) -> bytes:
        """The value buffer: bytes as is (a per-CPU map's one value goes to every CPU), a list one per CPU."""
        if not self.percpu:
            value = bytes(value)  # type: ignore[arg-type]
            if len(value) != self.value_size:
                raise ValueError(f"map {self.name}: value is {len(value)} bytes, the map's is {self.value_size}")
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) == self.stride * self.ncpus:
                return bytes(value)
            value = [bytes(value)] * self.ncpus
        if len(value) != self.ncpus or any(len(v) != self.value_size for v in value):
            raise ValueError(f"map {self.name}: a per-CPU value is {self.ncpus} values of {self.value_size} bytes")
        pad = bytes(self.stride - self.value_size)
        return b"".join(bytes(v) + pad for v in value)

    def lookup(self, key: bytes | int) -> bytes | list[bytes] | None:
        """The value (a list with one per CPU for per-CPU maps), or None if the key is absent."""
        buf = ffi.new("char[]", max(self._buffer_size(), 1))
        ret = lib.bpf_map_lookup_elem(self.fd, self._key(key), buf)
        if ret < 0:
            if -ret == errno.ENOENT:
                return None
            raise BpfError(self._what("lookup"), -ret)
        return self._split(ffi.buffer(buf)[:])

    def lookup_percpu(self, key: bytes | int) -> list[bytes] | None:
        """A per-CPU map's values, one per possible CPU."""
        if not self.percpu:
            raise TypeError(f"map {self.name} is a {self.type_name} map, not per-CPU")
        return self.lookup(key)  # type: ignore[return-value]

    def update(self, key: bytes | int, value: bytes | Sequence[bytes], flags: int = BPF_ANY) -> None:
        """Set ``key`` (``flags``: BPF_ANY, BPF_NOEXIST, BPF_EXIST)."""
        ret = lib.bpf_map_update_elem(self.fd, self._key(key), self._join(value), flags)
        if ret < 0:
            raise BpfError(self._what("update"), -ret)

    def delete(self, key: bytes | int) -> bool:
        """Remove ``key``; False if it was absent."""
        ret = lib.bpf_map_delete_elem(self.fd, self._key(key))
        if ret < 0:
            if -ret == errno.ENOENT:
                return False
            raise BpfError(self._what("delete"), -ret,
                           hint="array elements cannot be deleted" if self.map_type in _ARRAYS else "")
        return True

    def lookup_and_delete(self, key: bytes | int) -> bytes | list[bytes] | None:
        """Take ``key``'s value out in one syscall (hash maps: Linux >= 5.14), or None if absent."""
        buf = ffi.new("char[]", max(self._buffer_size(), 1))
        ret = lib.bpf_map_lookup_and_delete_elem(self.fd, self._key(key), buf)
        if ret < 0:
            if -ret == errno.ENOENT:
                return None
            raise BpfError(self._what("lookup and delete"), -ret)
        return self._split(ffi.buffer(buf)[:])

    def keys(self) -> Iterator[bytes]:
        """Every key, by ``bpf_map_get_next_key`` (a key deleted meanwhile restarts the walk, as in the kernel)."""
        fd, cur = self.fd, ffi.NULL
        nxt = ffi.new("char[]", max(self.key_size, 1))
        while lib.bpf_map_get_next_key(fd, cur, nxt) == 0:
            key = ffi.buffer(nxt)[:]
            yield key
            cur = ffi.new("char[]", key)

    __iter__ = keys

    def items(self) -> list[tuple[bytes, bytes | list[bytes]]]:
        """Every (key, value): one batch syscall per chunk where the kernel has them, else key by key."""
        n, keys, values = self.items_packed()
        ks, vs = self.key_size, self._buffer_size()
        return [(keys[i * ks:(i + 1) * ks], self._split(values[i * vs:(i + 1) * vs])) for i in range(n)]

    def items_packed(self) -> tuple[int, bytes, bytes]:
        """Every entry as ``(n, keys, values)``: n keys of ``key_size`` bytes back to back, and their n
        value buffers in the same order (a per-CPU map's is ``ncpus`` slots of ``stride`` bytes).

        What :meth:`items` splits; a reader that decodes whole columns at once (``pycore serve``'s
        scrape of a 10,000-key map) takes it as is, without 10,000 slices and lists.  Read with
        ``BPF_MAP_LOOKUP_BATCH`` where the kernel has it for the map (:attr:`batch_used`), else
        with ``bpf_map_get_next_key`` and one lookup per key.
        """
        if self.batch_used is not False:
            got = self._lookup_batch()
            self.batch_used = got is not None
            if got is not None:
                return got
        keys, values = [], []
        buf = ffi.new("char[]", max(self._buffer_size(), 1))
        for k in list(self.keys()):
            ret = lib.bpf_map_lookup_elem(self.fd, k, buf)
            if ret < 0:
                if -ret == errno.ENOENT:       # deleted since the walk saw it
                    continue
                raise BpfError(self._what("lookup"), -ret)
            keys.append(k)
            values.append(ffi.buffer(buf)[:])
        return len(keys), b"".join(keys), b"".join(values)

    def _lookup_batch(self) -> tuple[int, bytes, bytes] | None:
        if not L.has("bpf_map_lookup_batch"):
            return None
        ksize, vsize = self.key_size, self._buffer_size()
        # chunks of up to 1 MiB of keys and values: a 10,000-key count() map (8-byte keys, 2 CPUs' values)
        # in one syscall, where chunks of 4,096 keys took three
        chunk = max(1, min(self.max_entries, _BATCH_BYTES // max(ksize + vsize, 1)))
        keys, values = ffi.new("char[]", max(ksize * chunk, 1)), ffi.new("char[]", max(vsize * chunk, 1))
        token = max(ksize, 8)
        in_batch, out_batch = ffi.NULL, ffi.new("char[]", token)
        count = ffi.new("__u32 *")
        opts = ffi.new("struct bpf_map_batch_opts *", {"sz": ffi.sizeof("struct bpf_map_batch_opts")})
        kbuf, vbuf = ffi.buffer(keys), ffi.buffer(values)
        total, kparts, vparts = 0, [], []
        while True:
            count[0] = chunk
            ret = lib.bpf_map_lookup_batch(self.fd, in_batch, out_batch, keys, values, count, opts)
            err = -ret if ret < 0 else 0
            if err and err != errno.ENOENT:
                if not total and in_batch == ffi.NULL and err in _BATCH_UNSUPPORTED + (errno.ENOSPC,):
                    return None
                raise BpfError(self._what("batch lookup"), err)
            n = count[0]
            total += n
            kparts.append(kbuf[:n * ksize])
            vparts.append(vbuf[:n * vsize])
            if err == errno.ENOENT:
                if len(kparts) == 1:
                    return total, kparts[0], vparts[0]
                return total, b"".join(kparts), b"".join(vparts)
            if in_batch == ffi.NULL:
                in_batch = ffi.new("char[]", token)
            ffi.memmove(in_batch, out_batch, token)

    def clear(self) -> None:
        """Delete every entry; array elements (which cannot be deleted) are zeroed."""
        if self.map_type in _ARRAYS:
            zero = bytes(self._buffer_size())
            for i in range(self.max_entries):
                self.update(i, zero)
            return
        for k in list(self.keys()):
            self.delete(k)


def _possible_cpus() -> int:
    n = lib.libbpf_num_possible_cpus()
    if n < 0:
        raise BpfError("count possible CPUs (/sys/devices/system/cpu/possible)", -n)
    return n


def create_map(map_type: int, key_size: int, value_size: int, max_entries: int, *, name: str = "pycore",
               flags: int = 0, inner_map_fd: int | None = None) -> RawMap:
    """A new map of ``map_type`` (a :class:`MapType`), owned by the returned :class:`RawMap`.

    A ring buffer takes key and value sizes 0 and ``max_entries`` = its size
    in bytes (a power-of-2 multiple of the page size).
    """
    opts = ffi.new("struct bpf_map_create_opts *", {"sz": ffi.sizeof("struct bpf_map_create_opts"),
                                                      "map_flags": flags})
    if inner_map_fd is not None:
        opts.inner_map_fd = inner_map_fd
    fd = lib.bpf_map_create(int(map_type), kernel_name(name).encode(), key_size, value_size, max_entries, opts)
    if fd < 0:
        err = -fd
        hint = ""
        if err == errno.EINVAL and int(map_type) == MapType.RINGBUF:
            hint = "a ring buffer's size must be a power-of-2 multiple of the page size, key and value 0"
        elif err == errno.EINVAL:
            hint = "bad sizes or flags for this map type, or a type this kernel lacks"
        elif err == errno.EPERM:
            hint = "needs CAP_BPF (root), and RLIMIT_MEMLOCK on kernels before 5.11"
        raise BpfError(f"create {_type_name(MAP_TYPE_NAMES, map_type)} map {name} "
                       f"(key {key_size}, value {value_size}, {max_entries} entries)", err, hint=hint)
    return RawMap(fd, map_type, key_size, value_size, max_entries, name, flags)
