"""Where a CPython interpreter keeps the frames of the thread running bytecode,
for BPF programs that walk them (py-calls' depth, pycore profile's stacks).

The chain read is the thread's ``PyThreadState`` (3.11: the GIL holder's,
``_PyRuntime.gilstate.tstate_current``; any version: the interpreter's
thread list, by ``native_thread_id``) ``->cframe->current_frame`` (3.11,
3.12; 3.13: ``->current_frame``), a ``_PyInterpreterFrame``,
``->previous->...``.  These are CPython internals that change between minor
versions, and the version is read from the binary itself (the ``Py_Version``
constant, exported since 3.11), never assumed:

- 3.11: ``offsetof()`` against Debian's ``python3.11-dev`` headers
  (``tests/test_py_calls.py`` and ``tests/test_profile.py`` compile that
  program against the installed headers and compare);
- 3.12: from its published layout (CPython 3.12's headers, as py-spy's
  generated bindings and Meta's strobelight tables give them): no 3.12 runs
  here, so it is untested (docs/profile.md says so);
- 3.13: read from the interpreter itself, ``_PyRuntime.debug_offsets``
  (``_Py_DebugOffsets``, first in ``_PyRuntime`` and initialised data, so
  the file holds it): only where those fields sit inside
  ``_Py_DebugOffsets`` is known here (:data:`DEBUG_OFFSETS`), and it is
  compared with Debian 13's python3.13 headers by ``tests/test_profile.py``.
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

    tstate_current: int         # _PyRuntimeState.gilstate.tstate_current; 0: none (3.12+)
    tstate_thread_id: int       # PyThreadState.native_thread_id
    tstate_cframe: int          # PyThreadState.cframe (3.11, 3.12); 3.13+: PyThreadState.current_frame
    cframe_current_frame: int | None  # _PyCFrame.current_frame; None: 3.13+ has no _PyCFrame
    frame_previous: int         # _PyInterpreterFrame.previous
    # pycore profile: threads not holding the GIL, each frame's code and instruction, code objects
    interpreters_head: int = 0  # _PyRuntimeState.interpreters.head
    interp_threads_head: int = 0  # PyInterpreterState.threads.head
    tstate_next: int = 0        # PyThreadState.next
    frame_code: int = 0         # _PyInterpreterFrame.f_code
    frame_instr: int = 0        # _PyInterpreterFrame.prev_instr
    frame_is_entry: int = 0     # _PyInterpreterFrame.is_entry (3.11)
    frame_owner: int = 0        # _PyInterpreterFrame.owner (3.12+: a C call's entry is a shim frame, owner 3)
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
        return bool(self.code_adaptive)

    @property
    def gil_holder(self) -> bool:
        """Whether ``_PyRuntime`` names the thread holding the GIL (3.11; py-calls needs it)."""
        return bool(self.tstate_current)


# (major, minor) -> layout, x86-64 release builds (not Py_DEBUG); 3.13 on is read from the binary.
LAYOUTS: dict[tuple[int, int], FrameLayout] = {
    (3, 11): FrameLayout(tstate_current=576, tstate_thread_id=160, tstate_cframe=56,
                         cframe_current_frame=8, frame_previous=48,
                         interpreters_head=40, interp_threads_head=16, tstate_next=8,
                         frame_code=32, frame_instr=56, frame_is_entry=68,
                         code_filename=112, code_name=120, code_qualname=128, code_linetable=136,
                         code_firstlineno=72, code_adaptive=184),
    # published layout, untested here: no gilstate.tstate_current (a thread-local since 3.12),
    # _PyCFrame without use_tracing, f_code first in the frame, entry frames owned by the C stack
    (3, 12): FrameLayout(tstate_current=0, tstate_thread_id=144, tstate_cframe=56,
                         cframe_current_frame=0, frame_previous=8,
                         interpreters_head=40, interp_threads_head=72, tstate_next=8,
                         frame_code=0, frame_instr=56, frame_owner=70,
                         code_filename=112, code_name=120, code_qualname=128, code_linetable=136,
                         code_firstlineno=68, code_adaptive=192,
                         ascii_data=40, compact_data=56),
}

DEBUG_COOKIE = b"xdebugpy"

# _Py_DebugOffsets (first in _PyRuntime from 3.13): each version's sections in order, each a list
# of uint64 fields (every section starts with its struct's size).  The struct itself changes
# between minor versions (its header says so), so its own layout is per version; the offsets in it
# are the interpreter's.  3.13: Include/internal/pycore_runtime.h of 3.13.
DEBUG_OFFSETS: dict[tuple[int, int], list[tuple[str, tuple[str, ...]]]] = {
    (3, 13): [
        ("head", ("cookie", "version", "free_threaded")),
        ("runtime_state", ("size", "finalizing", "interpreters_head")),
        ("interpreter_state", ("size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict",
                               "builtins", "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                               "gil_runtime_state_locked", "gil_runtime_state_holder")),
        ("thread_state", ("size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id",
                          "datastack_chunk", "status")),
        ("interpreter_frame", ("size", "previous", "executable", "instr_ptr", "localsplus", "owner")),
        ("code_object", ("size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount",
                         "localsplusnames", "localspluskinds", "co_code_adaptive")),
        ("pyobject", ("size", "ob_type")),
        ("type_object", ("size", "tp_name", "tp_repr", "tp_flags")),
        ("tuple_object", ("size", "ob_item", "ob_size")),
        ("list_object", ("size", "ob_item", "ob_size")),
        ("dict_object", ("size", "ma_keys", "ma_values")),
        ("float_object", ("size", "ob_fval")),
        ("long_object", ("size", "lv_tag", "ob_digit")),
        ("bytes_object", ("size", "ob_size", "ob_sval")),
        ("unicode_object", ("size", "state", "length", "asciiobject_size")),
        ("gc", ("size", "collecting")),
    ],
}


def read_debug_offsets(raw: bytes, version: tuple[int, int]) -> dict[str, int] | None:
    """``_Py_DebugOffsets`` as ``{"section.field": value}``, None when ``raw`` is short or its
    cookie is not CPython's (``head.cookie`` is left out: it is not a number)."""
    sections = DEBUG_OFFSETS.get(version)
    if sections is None or raw[:8] != DEBUG_COOKIE:
        return None
    names = [f"{sec}.{field}" for sec, fields in sections for field in fields]
    if len(raw) < 8 * len(names):
        return None
    values = struct.unpack_from(f"<{len(names)}Q", raw)
    return {n: v for n, v in zip(names, values) if n != "head.cookie"}


def layout_from_debug_offsets(d: dict[str, int]) -> FrameLayout:
    """The layout the interpreter publishes (3.13: no GIL holder in _PyRuntime, no _PyCFrame)."""
    ascii_size = d["unicode_object.asciiobject_size"]
    return FrameLayout(tstate_current=0, tstate_thread_id=d["thread_state.native_thread_id"],
                       tstate_cframe=d["thread_state.current_frame"], cframe_current_frame=None,
                       frame_previous=d["interpreter_frame.previous"],
                       interpreters_head=d["runtime_state.interpreters_head"],
                       interp_threads_head=d["interpreter_state.threads_head"],
                       tstate_next=d["thread_state.next"],
                       frame_code=d["interpreter_frame.executable"],
                       frame_instr=d["interpreter_frame.instr_ptr"],
                       frame_owner=d["interpreter_frame.owner"],
                       code_filename=d["code_object.filename"], code_name=d["code_object.name"],
                       code_qualname=d["code_object.qualname"], code_linetable=d["code_object.linetable"],
                       code_firstlineno=d["code_object.firstlineno"],
                       code_adaptive=d["code_object.co_code_adaptive"],
                       unicode_state=d["unicode_object.state"], unicode_length=d["unicode_object.length"],
                       ascii_data=ascii_size, compact_data=ascii_size + 16,   # + utf8_length, utf8
                       bytes_size=d["bytes_object.ob_size"], bytes_data=d["bytes_object.ob_sval"])

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
        # _PyRuntime's initial value (3.13+: _Py_DebugOffsets first), read while the file is open
        runtime = self.symbols.get(RUNTIME_SYMBOL)
        self.runtime_head = f.read(runtime, 1024) if runtime is not None else b""

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
    if layout is None and version[:2] in DEBUG_OFFSETS:
        d = read_debug_offsets(binary.runtime_head, version[:2])
        if d is None:
            return None, f"{name}: no _Py_DebugOffsets at the start of {RUNTIME_SYMBOL}"
        if d["head.version"] != binary.version_hex:
            return None, (f"{name}: its _Py_DebugOffsets are of version {d['head.version']:#x}, "
                          f"not {binary.version_hex:#x}")
        if d["head.free_threaded"]:
            return None, f"{name} is a free-threaded build: its objects' layout is not known"
        return layout_from_debug_offsets(d), name
    if layout is None:
        known = ", ".join("{}.{}".format(*v) for v in sorted(set(LAYOUTS) | set(DEBUG_OFFSETS)))
        return None, f"{name}: frame offsets are known for {known} only"
    return layout, name
