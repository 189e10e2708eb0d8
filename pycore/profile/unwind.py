"""Raw samples (the BPF program's records) to whole, named stacks.

A record is taken in two steps.  :meth:`Unwinder.add`, as the ring is read,
does what must be done while the process lives: its maps on its first sample,
and its Python frames named (each code object read once from its memory).
The walker thread (:meth:`Unwinder.start`) then walks the native stack over the
record's copy (.eh_frame, the costly part: a library's first walk parses its
tables) and counts the record by its content (pid, tid, thread name, the two
address stacks, the Python frames), named once per distinct stack at the end,
so a long run costs one dictionary update per sample.  Walking as the ring was
read left whole runs unnamed in the 6.12 VM: the first walks took 6 s there,
and the workload had exited before its first records' code objects were read.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections import Counter, deque
from typing import Callable

from pycore.profile.cfi import END, STOPS, unwind
from pycore.profile.stacks import Frame, Profile, splice

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.profile.pyframes import CodeReader, PythonProcess
    from pycore.profile.symbols import ProcessMaps, _Mapping

__all__ = ["FAILURES", "HEADER", "MAX_PENDING", "MAX_STACK", "PY_STATUS", "Unwinder"]

MAX_STACK = 127
HEADER = struct.Struct("<IIIiiiII16s")          # struct profile_sample up to kstack
UCOPY = 8192
_REGS = struct.Struct("<QQQII")                 # uregs[3], ucopy_len, pad2
_REGS_AT = HEADER.size + 2 * MAX_STACK * 8
_COPY_AT = _REGS_AT + _REGS.size
_PY = struct.Struct("<QQII")
_PY_AT = _COPY_AT + UCOPY
SCHEDULE = "__schedule"                         # where sched_switch fires: an off-CPU stack's kernel leaf

#: the BPF program's py_status for a CPython process whose frames it could not read
#: (bpf_src/profile/profile.bpf.c); -1 also for the first samples of a process seen by -a before
#: its layout was given to the program
PY_STATUS = {-1: "python_no_layout", -2: "python_no_thread_state", -3: "python_unreadable",
             -4: "python_truncated"}
#: every reason :attr:`Unwinder.failures` counts: the Python ones, then the native walk's
#: (pycore.profile.cfi.STOPS, and no copy of the user stack at all)
FAILURES = (*PY_STATUS.values(), "native_no_copy", "native_lagged", *("native_" + why for why in STOPS))


#: records read but not walked yet, at most (about 8 KiB each): past it add() counts the oldest as the
#: kernel walked it (frame pointers), in bounded memory and without slowing the reading of the ring
MAX_PENDING = 4096
#: seconds the walker sleeps when it finds nothing to walk. It looks, rather than being woken: add()
#: runs in the thread that gets signals, and a KeyboardInterrupt raised inside ``Event.set()`` (whose
#: Condition lock is taken in Python code) can leave that lock held, so that the next set(), by
#: close(), waits for ever (``pycore profile`` hung so after a Ctrl-C)
WALK_IDLE = 0.02

FRAME_OWNED_BY_CSTACK = 3      # 3.12+: the shim frame each C call into the eval loop pushes first


def _shims_to_entries(frames: list[tuple[Frame | None, bool]]) -> tuple[tuple[Frame, bool], ...]:
    """3.12+ marks where a C call into the eval loop began with a shim frame, older than the call's
    frames, where 3.11 flags the call's first frame ``is_entry``: the 3.11 form, for the splice."""
    out: list[tuple[Frame, bool]] = []
    for frame, shim in frames:          # newest first
        if frame is None:
            if shim and out:
                out[-1] = (out[-1][0], True)
        else:
            out.append((frame, False))
    return tuple(out)


class Unwinder:
    """Counts raw samples and turns them into a :class:`~pycore.profile.stacks.Profile`."""

    def __init__(self, hz: int, pythons: dict[int, PythonProcess] | None = None, off_cpu: bool = False) -> None:
        self.hz = hz
        self.off_cpu = off_cpu         # records are waits: weighted by the microseconds in pad
        self.waits = 0
        self.pythons = pythons if pythons is not None else {}
        self.raw: Counter[tuple] = Counter()
        self.maps: dict[int, ProcessMaps] = {}
        self.codes: dict[int, CodeReader] = {}
        self.comms: dict[int, str] = {}
        self._python_of: dict[int, PythonProcess | None] = {}   # what pythons held at _process
        self.python_unread = 0
        self.truncated = 0
        self.samples = 0               # records added (the raw counts' sum, kept as they arrive)
        self.failures: Counter[str] = Counter()    # why a sample's stack is short: FAILURES' reasons
        self._frames: dict[int, dict[tuple, tuple[Frame, bool]]] = {}   # pid: (code, instr, ...): named
        self.dwarf = 0                 # samples whose user stack came from .eh_frame
        self._pending: deque[tuple] = deque()    # records added, not walked yet
        self._shed: Counter[tuple] = Counter()   # records add() counted unwalked (the walker lagged)
        self._shed_waits = 0
        self._rejected: dict[int, str] = {}      # closed readers' code objects named [code 0x...]
        self._walking = threading.Lock()         # held for each record's walk (the walker's, walk()'s)
        self._closing = False
        self._walker: threading.Thread | None = None
        self._walker_error: BaseException | None = None
        self._to_read: deque[_Mapping] = deque()   # other roots' mappings whose modules are read soon
        self._opened: dict[tuple[int, int, int], int] = {}   # their files, open until read
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Walk the records in a thread of its own as they are added (else :meth:`walk` does)."""
        if self._walker is None:
            self._closing = False
            self._walker = threading.Thread(target=self._walk_loop, name="pycore-unwind", daemon=True)
            self._walker.start()
            self._reader = threading.Thread(target=self._read_loop, name="pycore-modules", daemon=True)
            self._reader.start()

    def _pin(self, mappings: list[_Mapping]) -> None:
        """A process in another root (a container, a chroot): its files' symbols are read by the
        reader thread, soon. add() read them itself before, in the thread that reads the ring and
        looks at -d's deadline: bpftrace 0.23.2's libLLVM took seconds there, and -d 1.5 sampled 4 to
        6.7 s under a 10% CPU quota.
        Each file not read yet is opened here (one descriptor a file, closed once it is read): a
        short-lived process is gone by the time the reader comes to it, and its root with it."""
        for m in mappings:
            if m.ident is None or m.known():
                continue
            if m.ident not in self._opened:
                try:
                    self._opened[m.ident] = os.open(m.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
            self._to_read.append(m)

    def _read_loop(self) -> None:
        while not self._closing or self._to_read:      # (what was pinned is read before it ends)
            if not self._to_read:
                time.sleep(WALK_IDLE)
            while self._to_read:
                m = self._to_read.popleft()
                try:
                    m.module(self._opened.get(m.ident))     # type: ignore[arg-type]
                except Exception:  # noqa: BLE001 - a file that cannot be read names nothing
                    pass
                fd = self._opened.pop(m.ident, None)        # type: ignore[arg-type]
                if fd is not None:
                    os.close(fd)

    def _walk_loop(self) -> None:
        try:
            while not self._closing:
                if not self._pending:
                    time.sleep(WALK_IDLE)
                self.walk(until=lambda: self._closing)
        except BaseException as e:  # noqa: BLE001 - raised again by walk() in the caller's thread
            self._walker_error = e

    def close(self) -> None:
        """Stop the walker and close the processes' memory (the records added stay, to be walked by
        :meth:`walk` and named); safe twice."""
        if self._walker is not None:
            self._closing = True
            if self._walker is not threading.current_thread():
                self._walker.join()
            self._walker = None
        if self._reader is not None:
            self._reader.join()
            self._reader = None
        for reader in self.codes.values():
            self._rejected.update(reader.rejected)
            reader.close()
        self.codes.clear()

    def codes_rejected(self) -> dict[int, str]:
        """The code objects named ``[code 0x...]``, each with why it could not be read."""
        out = dict(self._rejected)
        for reader in self.codes.values():
            out.update(reader.rejected)
        return out

    @property
    def pending(self) -> int:
        """Records added but not walked yet."""
        return len(self._pending)

    def _process(self, pid: int, comm: str) -> None:
        from pycore.profile.pyframes import CodeReader
        from pycore.profile.symbols import ProcessMaps

        self.maps[pid] = ProcessMaps(pid, self._pin if self._walker is not None else None)
        old = self.codes.pop(pid, None)
        if old is not None:
            self._rejected.update(old.rejected)
            old.close()
        self._frames[pid] = {}
        try:
            with open(f"/proc/{pid}/comm") as f:
                self.comms[pid] = f.read().strip() or comm
        except OSError:
            self.comms[pid] = comm
        py = self._python_of[pid] = self.pythons.get(pid)
        if py is not None:
            self.codes[pid] = CodeReader(pid, py.layout, py.code_type)

    def add(self, data: bytes) -> None:
        """One record of the ring buffer: its process's memory is read now, its native stack
        walked later (:meth:`walk`)."""
        pid, tid, _cpu, klen, ulen, status, n_py, waited_us, comm_raw = HEADER.unpack_from(data)
        comm = comm_raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        if pid not in self.maps or self.pythons.get(pid) is not self._python_of[pid]:
            # a process's first sample, or its CPython registered (or registered again) since: the
            # -c command's child was sampled between its release and its exec, and then its maps and
            # its lack of a CPython were kept, with no Python frame all run (1 run in 10 here)
            self._process(pid, comm)
        nk, nu = min(max(klen, 0) // 8, MAX_STACK), min(max(ulen, 0) // 8, MAX_STACK)
        kstack = struct.unpack_from(f"<{nk}Q", data, HEADER.size)
        ustack = struct.unpack_from(f"<{nu}Q", data, HEADER.size + MAX_STACK * 8)
        ip, sp, bp, copied, _ = _REGS.unpack_from(data, _REGS_AT)
        self.samples += 1
        py: tuple = ()
        if status == -4:
            self.truncated += 1
        elif status == -3 or (status == -2 and pid in self.pythons):
            self.python_unread += 1
        if status < 0 and pid in self.pythons:
            self.failures[PY_STATUS[status]] += 1
        reader = self.codes.get(pid)
        if n_py and reader is not None:
            n = min(n_py, (len(data) - _PY_AT) // _PY.size)
            cache = self._frames[pid]
            frames = []
            for key in _PY.iter_unpack(data[_PY_AT:_PY_AT + n * _PY.size]):
                frame = cache.get(key)
                if frame is None:
                    frame = cache[key] = self._python_frame(reader, *key)
                frames.append(frame)
            py = tuple(frames) if not reader.layout.frame_owner else _shims_to_entries(frames)
        copy = data[_COPY_AT:_COPY_AT + min(copied, UCOPY)] if copied and ip else b""
        self._pending.append((self.maps[pid], (pid, tid, comm, kstack, ustack, py),
                              ip, sp, bp, copy, waited_us))
        if len(self._pending) > MAX_PENDING:
            self._shed_oldest()

    def _shed_oldest(self) -> None:
        """The walker lags: count the oldest record waiting as the kernel walked it (frame pointers),
        here and now. add() walked it itself before, but a walk can take seconds (a large binary's
        .eh_frame read the first time), and add() runs in the thread that reads the ring and looks at
        -d's deadline: -d 1.5 sampled 6.7 s so, with pycore under a 10% CPU quota beside the test
        suite. Only this thread writes what it counts (the walker counts into ``raw``)."""
        try:
            _maps, key, ip, *_, copy, waited_us = self._pending.popleft()
        except IndexError:          # the walker took the last one
            return
        self._shed[key] += waited_us if self.off_cpu else 1
        self._shed_waits += self.off_cpu
        if copy:
            self.failures["native_lagged"] += 1
        elif ip and key[4]:
            self.failures["native_no_copy"] += 1

    def walk(self, *, until: Callable[[], bool] | None = None) -> None:
        """Walk every record added so far (what the walker has not), in this thread; ``until``, asked
        before each record: stop early once it is true (the records left stay for :meth:`walk` or
        :meth:`count_unwalked`)."""
        self._check_walker()
        while self._pending and not (until is not None and until()):
            self._walk_one()

    def _check_walker(self) -> None:
        if self._walker_error is not None:
            raise RuntimeError(f"the walker thread failed: {self._walker_error!r}") from self._walker_error

    def count_unwalked(self) -> None:
        """Count the records left as the kernel walked them (frame pointers only): a second Ctrl-C
        while they were walked."""
        with self._walking:
            while self._pending:
                maps, key, *_, waited_us = self._pending.popleft()
                self._walk(maps, key, 0, 0, 0, b"", waited_us)

    def _walk_one(self) -> None:
        with self._walking:
            if self._pending:
                self._walk(*self._pending.popleft())

    def _walk(self, maps: ProcessMaps, key: tuple, ip: int, sp: int, bp: int, copy: bytes,
              waited_us: int) -> None:
        if copy:
            # .eh_frame over the copied stack; the frame-pointer walk when it gets further
            walked, why = unwind(maps.locate, ip, sp, bp, copy, rules=maps.rules)
            if why != END:
                self.failures["native_" + why] += 1
            if len(walked) >= len(key[4]):
                key = (*key[:4], tuple(walked), key[5])
                self.dwarf += 1
        elif ip and key[4]:            # a user stack the kernel walked but the program could not copy
            self.failures["native_no_copy"] += 1
        if self.off_cpu:
            self.waits += 1
            self.raw[key] += waited_us
        else:
            self.raw[key] += 1

    @staticmethod
    def _python_frame(reader: CodeReader, code: int, instr: int, flags: int, _pad: int) -> tuple[Frame, bool]:
        """One Python frame named, (frame, is_entry): once per (code, instruction) of a process.
        3.12+ (``flags`` the frame's owner): (None, True) for the C stack's shim frame."""
        if reader.layout.frame_owner:
            if flags == FRAME_OWNED_BY_CSTACK:
                return None, True       # type: ignore[return-value] - _shims_to_entries drops it
            flags = 0
        info = reader.code(code)
        if info is None:
            return Frame("python", f"[code {code:#x}]"), bool(flags & 1)
        return Frame("python", info.qualname, info.filename, info.line(instr)), bool(flags & 1)

    def profile(self, kernel_names=None) -> Profile:  # noqa: ANN001 - a KernelSymbols, made when None
        """The samples so far, named."""
        from pycore.profile.symbols import KernelSymbols

        kernel = kernel_names or KernelSymbols()
        self._check_walker()
        with self._walking:             # the walker counts on while this names (pycore serve's scrapes)
            while self._pending:
                self._walk(*self._pending.popleft())
            merged = self.raw.copy()
            for key, n in dict(self._shed).items():    # (a copy: add() may count on in its thread)
                merged[key] += n
            raw, waits = list(merged.items()), self.waits + self._shed_waits
        prof = Profile(self.hz, self.off_cpu)
        prof.waits = waits
        prof.python_unread, prof.truncated = self.python_unread, self.truncated
        per_pid: Counter[int] = Counter()
        mappings: dict[str, tuple[int, int, int, str]] = {}
        for (pid, tid, comm, kstack, ustack, py), n in raw:
            maps = self.maps[pid]
            per_pid[pid] += n
            native: list[Frame] = []
            for i, addr in enumerate(ustack):
                # the kernel's frame-pointer walk: past the leaf, an address outside every
                # executable mapping means the walk went astray (code built without frame pointers)
                if i and not maps.executable(addr - 1):
                    break
                name, path = maps.lookup(addr if i == 0 else addr - 1)
                native.append(Frame("native", name, path))
                if path and path not in mappings:
                    m = maps.mapping(addr if i == 0 else addr - 1)
                    if m is not None:
                        mappings[path] = (m[0], m[1], m[2], m[4])
            native.reverse()
            stack = [Frame("process", f"{self.comms.get(pid, comm)} ({pid})"),
                     Frame("thread", f"{comm} ({tid})")]
            stack += splice(native, list(py))
            knames = [kernel(a) for a in kstack]
            if self.off_cpu and SCHEDULE in knames:
                # leaf first: the tracepoint's call into the program sits above __schedule
                knames = knames[knames.index(SCHEDULE):]
            stack += [Frame("kernel", name) for name in reversed(knames)]
            prof.add(tuple(stack), n)
        exes = [self.maps[pid].exe for pid, _ in per_pid.most_common()]
        main = next((e for e in exes if e in mappings), None)
        if main is not None:
            prof.mappings[main] = mappings.pop(main)
        prof.mappings.update(mappings)
        return prof
