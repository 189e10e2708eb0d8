"""Where a CPython interpreter keeps the frames of the thread running bytecode,
for BPF programs that walk them (py-calls' depth).

The chain read is ``_PyRuntime.gilstate.tstate_current`` (the thread state
holding the GIL) ``->cframe->current_frame`` (a ``_PyInterpreterFrame``)
``->previous->...``; ``native_thread_id`` lets the BPF side check that the
thread state is the current thread's.  These are CPython internals that
change between minor versions, so a layout is known only for the versions
listed in :data:`LAYOUTS`, and the version is read from the binary itself
(the ``Py_Version`` constant, exported since 3.11), never assumed.

The offsets are ``offsetof()`` against the headers of the same version
(Debian's ``python3.11-dev``: ``internal/pycore_runtime.h``,
``cpython/pystate.h``, ``internal/pycore_frame.h``) for x86-64;
``tests/test_py_calls.py`` compiles that ``offsetof()`` program against the
installed headers and compares.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["FrameLayout", "LAYOUTS", "PythonBinary", "layout_for"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.elf.file import ElfFile


@dataclass(frozen=True)
class FrameLayout:
    """Byte offsets of the fields on the way from ``_PyRuntime`` to the frame chain."""

    tstate_current: int         # _PyRuntimeState.gilstate.tstate_current
    tstate_thread_id: int       # PyThreadState.native_thread_id
    tstate_cframe: int          # PyThreadState.cframe
    cframe_current_frame: int   # _PyCFrame.current_frame
    frame_previous: int         # _PyInterpreterFrame.previous
    # pycore profile: threads not holding the GIL, each frame's code and instruction, code objects
    interpreters_head: int = 0  # _PyRuntimeState.interpreters.head
    interp_threads_head: int = 0  # PyInterpreterState.threads.head
    tstate_next: int = 0        # PyThreadState.next
    frame_code: int = 0         # _PyInterpreterFrame.f_code
    frame_instr: int = 0        # _PyInterpreterFrame.prev_instr
    frame_is_entry: int = 0     # _PyInterpreterFrame.is_entry
    code_filename: int = 0      # PyCodeObject.co_filename
    code_name: int = 0          # PyCodeObject.co_name
    code_qualname: int = 0      # PyCodeObject.co_qualname
    code_linetable: int = 0     # PyCodeObject.co_linetable (3.11's location table, PEP 657)
    code_firstlineno: int = 0   # PyCodeObject.co_firstlineno
    code_adaptive: int = 0      # PyCodeObject.co_code_adaptive (the bytecode, inline)
    unicode_state: int = 32     # PyASCIIObject.state
    unicode_length: int = 16    # PyASCIIObject.length
    ascii_data: int = 48        # sizeof(PyASCIIObject): a compact ASCII string's characters
    compact_data: int = 72      # sizeof(PyCompactUnicodeObject): a compact non-ASCII string's
    bytes_size: int = 16        # PyVarObject.ob_size
    bytes_data: int = 32        # PyBytesObject.ob_sval

    @property
    def profiles(self) -> bool:
        """Whether the layout has what ``pycore profile`` reads (not only py-calls' depth)."""
        return bool(self.frame_code and self.code_adaptive)


# (major, minor) -> layout, x86-64 release builds (not Py_DEBUG).
LAYOUTS: dict[tuple[int, int], FrameLayout] = {
    (3, 11): FrameLayout(tstate_current=576, tstate_thread_id=160, tstate_cframe=56,
                         cframe_current_frame=8, frame_previous=48,
                         interpreters_head=40, interp_threads_head=16, tstate_next=8,
                         frame_code=32, frame_instr=56, frame_is_entry=68,
                         code_filename=112, code_name=120, code_qualname=128, code_linetable=136,
                         code_firstlineno=72, code_adaptive=184),
}

RUNTIME_SYMBOL = "_PyRuntime"


class PythonBinary:
    """What an ELF file (an interpreter, or a libpython) says about the CPython in it.

    ``source`` is a path, or an :class:`pycore.elf.file.ElfFile` already open
    (py-calls has the interpreter open for its probes).  A file that is not
    a readable ELF raises :class:`pycore.errors.ElfError` (one line)."""

    def __init__(self, source: str | ElfFile) -> None:
        from pycore.elf.file import ElfFile

        if isinstance(source, ElfFile):
            self._read(source)
        else:
            with ElfFile(source) as f:
                self._read(f)

    def _read(self, f: ElfFile) -> None:
        self.path = f.path
        self.machine = f.machine
        self.symbols = f.symbols()
        at = self.symbols.get("Py_Version")
        raw = f.read(at, 4) if at is not None else b""
        self.version_hex: int | None = struct.unpack("<I", raw)[0] if len(raw) == 4 else None

    @property
    def version(self) -> tuple[int, int, int] | None:
        """(major, minor, micro) from ``Py_Version`` (PY_VERSION_HEX), None before 3.11."""
        v = self.version_hex
        return None if v is None else (v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF)

    @property
    def debug_build(self) -> bool:
        """Py_DEBUG builds (python3.11d) export the reference total; their layout differs."""
        return "_Py_RefTotal" in self.symbols

    def runtime_address(self) -> int | None:
        """Link-time address of ``_PyRuntime``, None when this file does not define it."""
        return self.symbols.get(RUNTIME_SYMBOL)


def layout_for(binary: PythonBinary) -> tuple[FrameLayout | None, str]:
    """The frame layout for ``binary``, or None and a few words saying why not."""
    version = binary.version
    if version is None:
        return None, "no Py_Version symbol (CPython before 3.11, or not CPython)"
    name = "CPython {}.{}.{}".format(*version)
    if binary.machine != "EM_X86_64":
        return None, f"{name} on {binary.machine}: frame offsets are known for x86-64 only"
    if binary.debug_build:
        return None, f"{name} is a debug build (Py_DEBUG): its frame offsets are not known"
    if binary.runtime_address() is None:
        return None, f"{name}: no {RUNTIME_SYMBOL} symbol in {binary.path}"
    layout = LAYOUTS.get(version[:2])
    if layout is None:
        known = ", ".join("{}.{}".format(*v) for v in sorted(LAYOUTS))
        return None, f"{name}: frame offsets are known for {known} only"
    return layout, name
