"""cffi bindings to the system's libbpf (ABI mode: no compiler at run time).

Only what pycore calls is declared (in :mod:`pycore.native.cdef`, compiled
ahead of time into ``_ffi.py``).  Symbols added after libbpf 1.1 are
declared too and probed with :func:`has`.

libbpf's own log goes to the ``pycore.native.libbpf`` logger; while an object
loads, it is also captured so that a failure can quote the verifier.
"""

from __future__ import annotations

import enum
import errno as _errno
import os
import threading

from pycore.errors import PycoreError

# Declarations live in pycore/native/cdef.py; this is their precompiled form.
from pycore.native._ffi import ffi  # noqa: E402

LIBRARY_NAMES = ("libbpf.so.1", "libbpf.so")


class MapType(enum.IntEnum):
    """uapi ``enum bpf_map_type`` (ABI: the kernel only appends; checked against BTF by tests/test_raw_load.py)."""

    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERF_EVENT_ARRAY = 4
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    STACK_TRACE = 7
    CGROUP_ARRAY = 8
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    PERCPU_CGROUP_STORAGE = 21
    QUEUE = 22
    STACK = 23
    RINGBUF = 27
    TASK_STORAGE = 29
    BLOOM_FILTER = 30
    USER_RINGBUF = 31


class ProgType(enum.IntEnum):
    """uapi ``enum bpf_prog_type``, the tracing kinds (checked against BTF by tests/test_raw_load.py)."""

    SOCKET_FILTER = 1
    KPROBE = 2
    TRACEPOINT = 5
    PERF_EVENT = 7
    RAW_TRACEPOINT = 17
    RAW_TRACEPOINT_WRITABLE = 24
    TRACING = 26
    EXT = 28
    LSM = 29
    SYSCALL = 31


class AttachType(enum.IntEnum):
    """uapi ``enum bpf_attach_type``, the tracing kinds (checked against BTF by tests/test_raw_load.py)."""

    TRACE_RAW_TP = 23
    TRACE_FENTRY = 24
    TRACE_FEXIT = 25
    MODIFY_RETURN = 26
    LSM_MAC = 27
    TRACE_ITER = 28
    PERF_EVENT = 41
    TRACE_KPROBE_MULTI = 42


MAP_TYPE_NAMES = {t.value: t.name.lower() for t in MapType}
PROG_TYPE_NAMES = {t.value: t.name.lower() for t in ProgType}


class LibbpfMissing(PycoreError, OSError):
    """libbpf's shared library could not be loaded."""


def _open_library():
    errors = []
    for name in LIBRARY_NAMES:
        try:
            return ffi.dlopen(name)
        except OSError as exc:
            errors.append(str(exc))
    raise LibbpfMissing(
        "cannot load libbpf (" + "; ".join(errors) + "): install Debian's libbpf1 (apt-get install libbpf1)")


lib = _open_library()
libc = ffi.dlopen(None)

_capture = threading.local()
_log = None


def _logger():  # noqa: ANN202 - logging.Logger
    """The ``pycore.native.libbpf`` logger, made at libbpf's first message: importing
    logging costs ~3 ms of ``pycore trace``'s start, and most runs never need it."""
    global _log
    if _log is None:
        import logging

        _log = logging.getLogger("pycore.native.libbpf")
        _log.addHandler(logging.NullHandler())  # errors carry the log; users opt in to the rest
    return _log


@ffi.callback("int(int, const char *, void *)")
def _print(level: int, fmt, args) -> int:
    buf = ffi.new("char[]", 4096)
    n = libc.vsnprintf(buf, 4096, fmt, args)
    text = ffi.string(buf, min(max(n, 0), 4095)).decode("utf-8", "replace").rstrip("\n")
    lines = getattr(_capture, "lines", None)
    if lines is not None:
        lines.append(text)
    _logger().log(_LEVELS.get(level, 10), "%s", text)
    return 0


_LEVELS = {0: 30, 1: 20, 2: 10}   # LIBBPF_WARN, _INFO, _DEBUG -> logging.WARNING, INFO, DEBUG
lib.libbpf_set_print(_print)


class Capture:
    """Collects libbpf's log lines on this thread while active (for error messages)."""

    def __enter__(self) -> list[str]:
        self.saved = getattr(_capture, "lines", None)
        _capture.lines = []
        return _capture.lines

    def __exit__(self, *exc: object) -> None:
        _capture.lines = self.saved


def has(symbol: str) -> bool:
    """Whether the loaded libbpf exports ``symbol`` (e.g. ``ring_buffer__consume_n``)."""
    try:
        getattr(lib, symbol)
    except (AttributeError, ffi.error):  # out-of-line cffi raises ffi.error
        return False
    return True


def version() -> tuple[int, int]:
    return lib.libbpf_major_version(), lib.libbpf_minor_version()


def errno_name(err: int) -> str:
    err = abs(err)
    return _errno.errorcode.get(err, f"errno {err}")


def error_text(err: int) -> str:
    err = abs(err)
    return f"{errno_name(err)}: {os.strerror(err)}"
