"""CPython code objects of a running process, read from ``/proc/PID/mem``.

The BPF program records each Python frame as its code object's address and
its ``prev_instr``; everything with a string in it is read here, once per code
object (name, qualified name, file, first line, line table), while the
process lives.  The offsets are :class:`pycore.elf.cpython.FrameLayout`'s.

The line of an instruction comes from the code object's location table
(``co_linetable`` of 3.11, Objects/locations.md): entries of one header byte
(``1CCCCLLL``: code C, length L+1 code units) followed by the code's operands.
"""

from __future__ import annotations

import os
import struct
from functools import lru_cache

from pycore.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.elf.cpython import FrameLayout

__all__ = ["CodeInfo", "CodeReader", "PythonProcess", "find_python", "line_of"]

_MAX_STRING = 4096
_MAX_TABLE = 1 << 20
_USER_END = 1 << 47                 # x86-64 user addresses (4-level paging; 5-level: 1 << 56)


@record
class CodeInfo:
    """What a frame needs of its code object."""

    qualname: str
    filename: str
    firstlineno: int
    linetable: bytes
    bytecode: int          # address of co_code_adaptive

    def line(self, instr: int) -> int:
        """The line running at ``prev_instr`` ``instr`` (the first line when it is before the code)."""
        index = (instr - self.bytecode) // 2
        if index < 0:
            return self.firstlineno
        found = line_of(self.linetable, self.firstlineno, index)
        return self.firstlineno if found is None else found


def _varint(t: bytes, i: int) -> tuple[int, int]:
    b = t[i]
    i += 1
    value, shift = b & 63, 0
    while b & 64:
        b = t[i]
        i += 1
        shift += 6
        value |= (b & 63) << shift
    return value, i


def _svarint(t: bytes, i: int) -> tuple[int, int]:
    v, i = _varint(t, i)
    return (-(v >> 1) if v & 1 else v >> 1), i


def line_of(table: bytes, firstlineno: int, index: int) -> int | None:
    """The line of code unit ``index`` in a 3.11 location table; None for "no location"."""
    line, addr, i, n = firstlineno, 0, 0, len(table)
    try:
        while i < n:
            head = table[i]
            i += 1
            code, length = (head >> 3) & 15, (head & 7) + 1
            located = True
            if code == 15:                  # no location
                located = False
            elif code == 14:                # long form: line delta, end line, column, end column
                delta, i = _svarint(table, i)
                line += delta
                for _ in range(3):
                    _, i = _varint(table, i)
            elif code == 13:                # no column: line delta
                delta, i = _svarint(table, i)
                line += delta
            elif code >= 10:                # one-line forms: delta code-10, column, end column
                line += code - 10
                i += 2
            else:                           # short form: same line, one column byte
                i += 1
            if addr <= index < addr + length:
                return line if located else None
            addr += length
    except IndexError:
        return None
    return None


def _counted(refcnt: int) -> bool:
    """A live object's reference count (see :meth:`CodeReader._live`), not a freed block's pointer."""
    return 0 < refcnt < 1 << 40


class ProcessGone(OSError):
    """/proc/PID/mem read nothing at all: the address space it was opened on is gone (the process
    exited, or exec'd another program). An address it does not map reads EIO instead."""


class CodeReader:
    """Code objects of one process, each read once; None for one that cannot be read."""

    def __init__(self, pid: int, layout: FrameLayout, code_type: int = 0) -> None:
        self.pid = pid
        self.layout = layout
        self.code_type = code_type      # PyCode_Type's run-time address: 0 when not known
        self._codes: dict[int, CodeInfo | None] = {}
        self.rejected: dict[int, str] = {}  # code object named [code 0x...]: why it could not be read
        try:
            self._fd: int | None = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read(self, addr: int, size: int) -> bytes:
        if self._fd is None or not 0 < addr < _USER_END:
            raise OSError("no memory")      # a torn read in BPF gives garbage pointers: never pread them
        data = os.pread(self._fd, size, addr)
        if len(data) == size:
            return data
        if not data:
            raise ProcessGone("the process exited before its code objects were read")
        raise OSError(f"{len(data)} of {size} bytes: memory unmapped")

    def _ptr(self, addr: int) -> int:
        return struct.unpack("<Q", self._read(addr, 8))[0]

    def _string(self, obj: int) -> str:
        L = self.layout
        length = struct.unpack("<q", self._read(obj + L.unicode_length, 8))[0]
        state = struct.unpack("<I", self._read(obj + L.unicode_state, 4))[0]
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or length < 0:   # a code object's names are compact: this one was freed
            raise OSError("not a compact string")
        length = min(length, _MAX_STRING)
        if ascii_:
            text = self._read(obj + L.ascii_data, length).decode("ascii", "replace")
        else:
            width = {1: 1, 2: 2, 4: 4}.get(kind, 1)
            raw = self._read(obj + L.compact_data, length * width)
            text = raw.decode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[width], "replace")
        if not text.isprintable():      # not a name: a frame read while it changed, a freed code object
            raise OSError("not a string")
        return text

    def _live(self, obj: int) -> None:
        """Raise unless ``obj`` has a live object's reference count: pymalloc keeps a freed block's
        next-free pointer (or NULL) there, glibc's free() its list pointers (3.12+'s immortal objects
        count 2**32 - 1 or so: below 2**40 still)."""
        if not _counted(struct.unpack("<Q", self._read(obj, 8))[0]):
            raise OSError("not a live object")

    def _fields(self, addr: int) -> bytes:
        """The code object's header and the fields read below it, in one read."""
        L = self.layout
        return self._read(addr, max(L.code_qualname, L.code_name, L.code_filename, L.code_linetable,
                                    L.code_firstlineno) + 8)

    def _identity(self, fields: bytes) -> tuple[int, ...]:
        """What must not change while a code object is read: its type, the objects it names, its
        first line. Not its reference count (each frame running it holds one) nor 3.11's
        co_warmup, which its calls count down (a whole -a run named spin [code 0x...] so)."""
        L = self.layout
        return (struct.unpack_from("<Q", fields, 8)[0],
                *(struct.unpack_from("<Q", fields, off)[0]
                  for off in (L.code_qualname, L.code_name, L.code_filename, L.code_linetable)),
                struct.unpack_from("<i", fields, L.code_firstlineno)[0])

    def code(self, addr: int) -> CodeInfo | None:
        if addr in self._codes:
            return self._codes[addr]
        L = self.layout
        info = None
        try:
            # the sample is read ~100 ms after BPF took it: a code object freed since (an import's
            # module code, a lambda) may hold anything now, so its ob_type must still be PyCode_Type,
            # it and its strings must have reference counts (a freed string still reads as its old
            # text), and its fields must be the same after the strings are read as before: the
            # cyclic GC frees code objects in batches and the compiler builds new ones in their
            # memory, and one read across that once named g25602 with <gen25691>'s file
            # (tests/profile_churn.py)
            fields = self._fields(addr)
            refcnt, ob_type = struct.unpack_from("<QQ", fields)
            if not _counted(refcnt) or (self.code_type and ob_type != self.code_type):
                raise OSError("not a live code object")

            def ptr(offset: int) -> int:
                obj = struct.unpack_from("<Q", fields, offset)[0]
                self._live(obj)
                return obj

            table_obj = ptr(L.code_linetable)
            size = min(struct.unpack("<q", self._read(table_obj + L.bytes_size, 8))[0], _MAX_TABLE)
            qualname = self._string(ptr(L.code_qualname))
            name = self._string(ptr(L.code_name))
            filename = self._string(ptr(L.code_filename))
            firstlineno = struct.unpack_from("<i", fields, L.code_firstlineno)[0]
            # a live code object's qualified name ends with its name, and it starts at a line >= 0;
            # one freed and reused, or half torn down, seldom agrees with itself so
            if not name or (qualname != name and not qualname.endswith("." + name)) or firstlineno < 0:
                raise OSError("not a live code object")
            linetable = self._read(table_obj + L.bytes_data, size) if size > 0 else b""
            if self._identity(self._fields(addr)) != self._identity(fields):
                raise OSError("the code object changed while it was read")
            info = CodeInfo(qualname=qualname, filename=filename, firstlineno=firstlineno,
                            linetable=linetable, bytecode=addr + L.code_adaptive)
        except (OSError, struct.error, UnicodeDecodeError, KeyError, OverflowError, ValueError) as e:
            info = None
            self.rejected[addr] = str(e) or type(e).__name__
        self._codes[addr] = info
        return info


@record
class PythonProcess:
    """A process's CPython: where its ``_PyRuntime`` is and the layout to read it with."""

    pid: int
    name: str                  # "CPython 3.11.2"
    layout: FrameLayout
    runtime: int               # run-time address of _PyRuntime
    path: str                  # the file defining it, as the process sees it
    code_type: int = 0         # run-time address of PyCode_Type (0: not known)


def find_python(pid: int) -> tuple[PythonProcess | None, str]:
    """The CPython of ``pid`` (its executable, else a mapped libpython), or None and why not."""
    from pycore.elf.cpython import layout_for
    from pycore.errors import ElfError

    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError as e:
        return None, f"cannot read its maps ({e.strerror})"
    first: dict[str, tuple[int, int]] = {}          # path -> (start, file offset) of its first mapping
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and parts[5] not in first:
            first[parts[5]] = (int(parts[0].split("-")[0], 16), int(parts[2], 16))
    candidates = [exe] + [p for p in first if "libpython" in os.path.basename(p)]
    why = "not CPython (no Py_Version symbol in its executable or a libpython)"
    for path in candidates:
        if path not in first:
            continue
        root = f"/proc/{pid}/root{path}"
        try:
            binary = _binary(root if os.path.exists(root) else path)
        except (ElfError, OSError):
            continue
        if binary.version is None:
            continue
        layout, name = layout_for(binary)
        if layout is None or not layout.profiles:
            why = name if layout is None else f"{name}: no profiling offsets for it"
            continue
        start, offset = first[path]
        bias = _load_bias(binary_segments(root if os.path.exists(root) else path), start, offset)
        runtime = binary.runtime_address()
        if bias is None or runtime is None:
            why = f"{name}: {path} is not mapped as its segments say"
            continue
        code_type = binary.symbols.get("PyCode_Type")
        return PythonProcess(pid, name, layout, runtime + bias, path, code_type + bias if code_type else 0), name
    return None, why


def _binary(path: str):  # noqa: ANN202 - a PythonBinary
    """The file's CPython facts, read once per file version (-a looks at every process)."""
    st = os.stat(path)
    return _binary_at(path, (st.st_dev, st.st_ino, st.st_mtime_ns))


@lru_cache(maxsize=512)
def _binary_at(path: str, _identity: tuple[int, int, int]):  # noqa: ANN202
    from pycore.elf.cpython import PythonBinary

    return PythonBinary(path)


@lru_cache(maxsize=512)
def binary_segments(path: str) -> list[tuple[int, int, int]]:
    from pycore.elf.file import ElfFile

    with ElfFile(path) as f:
        return list(f.segments)


def _load_bias(segments: list[tuple[int, int, int]], start: int, offset: int) -> int | None:
    """Run-time minus link-time addresses, from the mapping of file offset ``offset`` at ``start``."""
    for vaddr, size, off in segments:
        if off <= offset < off + max(size, 1) or (off & ~0xFFF) == offset:
            return start + off - offset - vaddr
    return None
