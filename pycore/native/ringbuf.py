"""Reading a BPF ring buffer (BPF_MAP_TYPE_RINGBUF) from Python.

Modelled on cilium/ebpf's ``ringbuf.Reader``: no libbpf consumer and no
callback per record.  We mmap the map ourselves, as the kernel lays it out:

- offset 0, one page, read-write: ``consumer_pos`` (the only thing we write);
- offset ``page_size``, read-only: one page holding ``producer_pos``, then
  the data area, which the kernel maps twice in a row so that a record that
  wraps around the end is still contiguous in our address space.

Each record starts with an 8-byte header, ``u32 len`` (bit 31 BUSY: reserved
but not yet submitted; bit 30 DISCARD: skip it) and ``u32 pg_off``, and its
payload is padded to 8 bytes.  Records between ``consumer_pos`` and
``producer_pos`` are all reserved, so their headers are valid; a BUSY one
ends the batch (the kernel wakes us when it is submitted, because our
``consumer_pos`` then equals its position) and DISCARDed ones are skipped.
Advancing ``consumer_pos`` hands the space back to the producers, so records
are copied out (decoded) before it moves.

Most programs emit one event type, so records usually all have the same
length.  A batch is then checked in one strided read of the length words: if
the first record has length L and every word at multiples of its padded size
says L, each of those words is a real header (by induction from the first),
and the whole run is decoded at once (``struct.iter_unpack`` into dataclasses,
or one ``numpy.frombuffer`` for :meth:`RingBuffer.read_batch`).  Anything else
(mixed sizes, BUSY, DISCARD) is walked record by record.

Which struct the records hold (the ``event`` argument):

1. a codec (``pycore.native.codec.decoder_for(...)``) or a BTF type name/id of the
   object's BTF, when given;
2. else the map's BTF value type, if the map declares ``__type(value, ...)``
   (ring buffer maps usually do not);
3. else the type the C source names with ``PYCORE_RING_EVENT(map, struct x)``
   (pycore.bpf.h; what ``pycore skel`` reads too);
4. else the only struct of the object's BTF whose name ends in ``_event``
   (ambiguous: ValueError, pass ``event=``);
5. else, or with ``event=bytes``, records are returned as ``bytes``.

Rings that no BpfObject owns (``pycore trace`` creates its maps itself):
:meth:`RingBuffer.from_fd` takes the map's fd (or a ``RawMap``) and a
decoder, a callable from one record's bytes to an event.

Lost events: pycore programs reserve through ``pycore_reserve()``, which
counts failed reservations in the object's global ``pycore_dropped``
(bpf_src/pycore.bpf.h); :attr:`RingBuffer.lost` reads it.  It counts the
losses of every ring buffer of the object.  An object whose programs do not
count (no ``pycore_dropped``) has ``lost`` None: a full ring's drops happen in
the kernel, which tells no one, so they cannot be known from here.
``on_lost=callback(n)`` is called with each new loss seen by a consumer, and
``events(include_lost=True)`` puts a :class:`Lost` marker in the stream
before the events read after the loss (as bcc's ``lost_cb`` and cilium's
``LostSamples``).

Closing: ``close()`` wakes every consumer (a thread in ``events()`` or
``poll()``, a task in ``async for``) and ends it as if the ring were empty;
any later use raises :class:`pycore.errors.Closed`.  ``end_when(fd)`` ends
the consumers the same way, after draining what is left, once ``fd`` is
readable (a pidfd: the traced process exited).
"""

from __future__ import annotations

import gc
import mmap
import os
import select
import threading

from pycore.errors import BpfError, Closed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from typing import Any

    import numpy

    from pycore.native.object import BpfObject

__all__ = ["RingBuffer", "Lost", "BUSY_BIT", "DISCARD_BIT", "HEADER_SIZE", "drain", "DRAIN_SECONDS",
           "MIN_DRAIN_SECONDS"]

BUSY_BIT = 1 << 31
DISCARD_BIT = 1 << 30
HEADER_SIZE = 8
_LEN_MASK = ~(BUSY_BIT | DISCARD_BIT) & 0xFFFFFFFF
_RINGBUF_MAP_TYPE = 27
_DROPPED_VAR = "pycore_dropped"
_ANNOTATION = "__pycore_ring_event__"  # PYCORE_RING_EVENT(map, type), bpf_src/pycore.bpf.h


#: After Ctrl-C, how long a tool prints what its ring buffer holds before it gives up on the rest
#: (counted on stderr): the whole exit stays within ~2 s however fast the probes fired.
DRAIN_SECONDS = 0.5
#: ... but at least this long once the probes are detached: detaching under a slow (emulated) CPU
#: once took all of DRAIN_SECONDS, and a single event waiting in the ring was counted, not printed
#: (threadsnoop.bt in the 6.12 VM, beside bpftrace 0.23.2, which printed its own).
MIN_DRAIN_SECONDS = 0.2


def drain(poll: Callable[[Callable[[], bool]], int], skip: Callable[[], int],
          signals: Callable[[], int], first_signal: float) -> int:
    """Read the last events of a ring whose probes are detached (``pycore trace`` and the tools).

    ``poll(until)`` reads a batch and returns how many it read, stopping early once ``until()``;
    ``signals()`` is how many Ctrl-C/SIGTERM arrived, the first at ``first_signal``
    (``time.monotonic()``).  With no signal, the ring is read to its end; after one, until
    DRAIN_SECONDS after it and at least MIN_DRAIN_SECONDS from now; a second one stops at once.
    Returns how many events were left unread (``skip()``), for the caller to count on stderr.
    """
    import time

    interrupted = signals() > 0
    deadline = max(first_signal + DRAIN_SECONDS, time.monotonic() + MIN_DRAIN_SECONDS)

    def enough() -> bool:
        return signals() > 1 or (interrupted and time.monotonic() > deadline)

    while poll(enough) and not enough():
        pass
    return skip() if enough() else 0


class Lost:
    """In an event stream asked for with ``include_lost=True``: ``n`` records were dropped (the ring was
    full) since the last report; they would have come before the events that follow."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lost) and other.n == self.n

    def __hash__(self) -> int:
        return hash((Lost, self.n))

    def __repr__(self) -> str:
        return f"Lost({self.n})"


def _padded(length: int) -> int:
    """Bytes a record of payload ``length`` takes in the ring, header included."""
    return (length + HEADER_SIZE + 7) & ~7


class RingBuffer:
    """Consumer of one ring buffer map of a loaded :class:`~pycore.native.object.BpfObject`.

    Ways to read, all sharing one position (events decoded but not yet handed
    out, e.g. when a loop breaks early, are kept and come first next time):

    - ``for ev in rb.events(timeout=1.0)``: blocks; ends after ``timeout``
      seconds without events (``None``: never);
    - ``rb.poll(callback, timeout)``: like libbpf's ``ring_buffer__poll``;
    - ``async for ev in rb``: waits through ``loop.add_reader`` on the ring map's fd;
    - ``rb.read_batch()``: everything available as a numpy structured array.

    ``close()`` (or the end of a ``with`` block) unmaps; it is safe twice,
    and safe from another thread while a consumer waits or decodes: it wakes
    the waiter (an eventfd in the epoll set), takes the lock decoding holds,
    and the consumer's loop ends as if it had timed out.
    """

    #: Records decoded per step.  Bounded so that a full ring does not become
    #: one huge list: besides the memory, every live container makes the
    #: cyclic GC's collections slower (quadratic over a batch of 200k events).
    batch_size = 8192

    def __init__(self, obj: BpfObject, map_name: str, event: Any = None, *,
                 on_lost: Callable[[int], object] | None = None) -> None:
        self._obj: BpfObject | None = obj
        try:
            m = obj.maps[map_name]
        except KeyError:
            raise KeyError(f"{obj.name}: no map {map_name!r} (have {', '.join(obj.maps) or 'none'})") from None
        if m.type != _RINGBUF_MAP_TYPE:
            raise ValueError(f"{obj.name}: map {map_name} is a {m.type_name} map, not a ring buffer")
        self._setup(m.fd, m.max_entries, map_name, _resolve_event(obj, m, event), None, f"{obj.name}: map {map_name}")
        self.on_lost = on_lost

    @classmethod
    def from_fd(cls, fd: Any, *, decode: Callable[[bytes], Any] | Any = None, size: int | None = None,
                name: str = "ring", lost: Callable[[], int] | None = None,
                on_lost: Callable[[int], object] | None = None) -> RingBuffer:
        """A consumer of a ring buffer map that no BpfObject owns (``pycore trace``'s, made with
        ``pycore.native.program.create_map``).

        ``fd`` is the map's fd or an object with ``.fd`` (a ``RawMap``); the
        ring has its own dup of it.  ``decode`` turns one record's bytes into
        an event: a callable (called with ``bytes``), a codec
        (``pycore.native.codec.decoder_for(...)``), or None/``bytes`` for the
        bytes themselves.  ``size`` (bytes) is read from the kernel when not
        given.  ``lost``, if given, is called by :attr:`lost` (the program's
        own count of failed reservations); without it :attr:`lost` is None.
        """
        self = cls.__new__(cls)
        self._obj = None
        raw_fd = fd if isinstance(fd, int) else fd.fd
        mtype = getattr(fd, "map_type", None)
        if size is None:
            mtype, size = _map_type_and_size(raw_fd, name)
            if size == 0:  # kernels without map info for rings would say 0
                raise ValueError(f"map {name} (fd {raw_fd}): the kernel gives no size; pass size=")
        if mtype is not None and mtype != _RINGBUF_MAP_TYPE:
            raise ValueError(f"map {name} (fd {raw_fd}) is of map type {mtype}, not a ring buffer ({_RINGBUF_MAP_TYPE})")
        codec, fn = None, None
        if decode is not None and decode is not bytes:
            if hasattr(decode, "decode") and hasattr(decode, "size"):
                codec = decode
            elif callable(decode):
                fn = decode
            else:
                raise TypeError(f"decode must be a callable or a codec, not {type(decode).__name__}")
        self._setup(raw_fd, size, name, codec, fn, f"map {name}")
        self._lost_fn = lost
        self.on_lost = on_lost
        return self

    def _setup(self, fd: int, size: int, map_name: str, codec: Any, decode_fn: Callable[[bytes], Any] | None,
               what: str) -> None:
        self.name = map_name
        self.size = size
        self.codec = codec
        self._decode_fn = decode_fn
        self._lost_fn: Callable[[], int] | None = None
        self.consumed = 0    # records taken out of the ring (not counting discarded ones)
        self.discarded = 0   # records the program discarded
        self._pending: list = []
        self._globals: Any = None
        self._np_dtypes: dict[int, Any] = {}
        self._fd = -1
        self._ep = None
        self._wake = -1
        self._lock = threading.RLock()  # decoding vs close() from another thread
        self._idle = threading.Condition(self._lock)
        self._waiters = 0               # threads inside epoll_wait
        self._closing = False
        self._async: set[Any] = set()   # (loop, future) of `async for` consumers waiting: close() settles them
        self._async_waiters = 0         # inside add_reader: the epoll fd outlives close() until they leave
        self._end_fds: dict[int, Callable[[], object] | None] = {}
        self.ended = False              #: an end_when() fd fired: consumers stop once the ring is drained
        self.on_lost: Callable[[int], object] | None = None
        self._lost_seen = 0             # losses already reported to on_lost / as Lost markers
        self._lost_unknown = False
        self._unmarked = 0              # reported to on_lost but not yet in a Lost marker
        self._cons_map = self._data_map = None
        self._page = mmap.PAGESIZE
        if self.size <= 0 or self.size & (self.size - 1) or self.size % self._page:
            raise ValueError(f"map {map_name}: max_entries {self.size} is not a power-of-2 multiple of the page size")
        self._mask = self.size - 1
        self._fd = os.dup(fd)
        try:
            self._cons_map = mmap.mmap(self._fd, self._page, mmap.MAP_SHARED,
                                       mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
            self._data_map = mmap.mmap(self._fd, self._page + 2 * self.size, mmap.MAP_SHARED,
                                       mmap.PROT_READ, offset=self._page)
            self._ep = select.epoll()
            self._ep.register(self._fd, select.EPOLLIN)
            self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            self._ep.register(self._wake, select.EPOLLIN)
        except OSError as exc:
            self.close()
            raise BpfError(f"{what}: mmap/epoll ring buffer", exc.errno or 1) from None
        # 8-byte aligned views: positions are read and written as single u64s
        # (x86-64 and arm64 guarantee such accesses are atomic; the kernel
        # pairs them with smp_load_acquire/smp_store_release).
        self._cons = memoryview(self._cons_map).cast("Q")
        whole = memoryview(self._data_map)
        self._prod = whole[:8].cast("Q")
        self._data = whole[self._page:]
        self._words = self._data.cast("I")
        self._cons_pos = self._cons[0]
        del whole

    # -- lifecycle --------------------------------------------------------

    def close(self) -> None:
        """Unmap and close the fds; safe to call twice, and from any thread.  Pending events are dropped."""
        with self._lock:
            self._closing = True
            if self._wake >= 0:
                # Wake consumers blocked in epoll and let them leave it before
                # closing: closing the eventfd would take its readiness off the
                # epoll ready list before a woken waiter reads it, and the
                # waiter would sleep on until its timeout.
                os.eventfd_write(self._wake, 1)
                self._idle.wait_for(lambda: self._waiters == 0, timeout=5.0)
            for loop, fut in list(self._async):
                try:
                    loop.call_soon_threadsafe(_settle, fut)
                except RuntimeError:  # that loop is closed
                    pass
            for name in ("_words", "_data", "_prod", "_cons"):
                mv = self.__dict__.pop(name, None)
                if mv is not None:
                    mv.release()
            for name in ("_cons_map", "_data_map"):
                mp = getattr(self, name, None)
                if mp is not None:
                    mp.close()
                    setattr(self, name, None)
            if not self._async_waiters:  # else the last `async for` closes them, once its loop lets go
                self._close_fds()
            self._pending = []

    def _close_fds(self) -> None:
        if self._ep is not None:
            self._ep.close()
            self._ep = None
        if self._wake >= 0:
            os.close(self._wake)
            self._wake = -1
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0 or self._closing

    def __enter__(self) -> RingBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.available} bytes available"
        return f"<RingBuffer {self.name} {self.size} bytes, {state}>"

    def fileno(self) -> int:
        """An epoll fd, readable when the ring has data (for selectors and event loops)."""
        self._require()
        return self._ep.fileno()

    # -- counters ---------------------------------------------------------

    @property
    def available(self) -> int:
        """Bytes between our position and the producers' (headers and BUSY records included)."""
        self._require()
        return self._prod[0] - self._cons_pos

    @property
    def lost(self) -> int | None:
        """Failed reservations counted by ``pycore_reserve()`` (the object's ``pycore_dropped``);
        for :meth:`from_fd` rings, what its ``lost`` callable says.  None where nothing counts them
        (an object without ``pycore_dropped``, a ring without ``lost=``): they cannot be known."""
        self._require()
        return self._read_lost()

    def _read_lost(self) -> int | None:
        if self._lost_unknown:
            return None
        if self._obj is None:
            if self._lost_fn is None:
                self._lost_unknown = True
                return None
            return int(self._lost_fn())
        if self._globals is None:  # building it parses the ELF: once, then live reads
            g = self._obj.globals
            if _DROPPED_VAR not in g:
                self._lost_unknown = True
                return None
            self._globals = g
        return int(self._globals[_DROPPED_VAR])

    def _new_losses(self) -> int:
        """Losses counted since the last call (0 where they cannot be known)."""
        n = self._read_lost()
        if not n or n <= self._lost_seen:
            return 0
        delta, self._lost_seen = n - self._lost_seen, n
        return delta

    def report_lost(self, marker: bool = True) -> Lost | None:
        """New losses since the last report: to :attr:`on_lost`, and as a :class:`Lost` (or None)
        when ``marker`` (losses reported to on_lost alone are still in the next marker).  The
        consumers call it after each batch; a consumer of its own (``consume()``) may too."""
        if self.on_lost is None and not marker:
            return None
        with self._lock:
            if self._closing:
                return None
            n = self._new_losses()
        if n and self.on_lost is not None:
            self.on_lost(n)
        if not marker:
            self._unmarked += n
            return None
        n, self._unmarked = n + self._unmarked, 0
        return Lost(n) if n else None

    def end_when(self, fd: int, callback: Callable[[], object] | None = None) -> None:
        """End the consumers (after the ring is drained) once ``fd`` is readable, e.g. a pidfd: the
        traced process exited.  :attr:`ended` is then True and ``callback()`` is called once."""
        self._require()
        with self._lock:
            self._ep.register(fd, select.EPOLLIN)
            self._end_fds[fd] = callback

    def _check_end(self, ready: list[tuple[int, int]]) -> None:
        for fd, _ in ready:
            if fd in self._end_fds and not self.ended:
                self._mark_ended(fd)

    def _mark_ended(self, fd: int) -> None:
        with self._lock:
            if self.ended:
                return
            self.ended = True
            callback = self._end_fds.get(fd)
            if self._ep is not None:
                for f in self._end_fds:
                    try:
                        self._ep.unregister(f)
                    except (OSError, ValueError):
                        pass
        if callback is not None:
            callback()

    # -- consuming ----------------------------------------------------------

    def events(self, timeout: float | None = None, *, include_lost: bool = False) -> Iterator[Any]:
        """Yield events as they come; stop after ``timeout`` seconds with none (``None``: never), at
        :meth:`close` (from any thread) or once :attr:`ended`.  ``include_lost``: a :class:`Lost`
        marker comes before the events read after records were dropped."""
        self._require()
        while True:
            batch = self._take()
            if not batch:
                if self.ended or not self._wait(timeout):
                    return
                continue
            lost = self.report_lost(include_lost)
            if lost is not None:
                yield lost
            it = iter(batch)
            try:
                yield from it
            finally:
                rest = list(it)  # the loop broke early: keep these for next time
                if rest:
                    self._pending = rest + self._pending

    def __iter__(self) -> Iterator[Any]:
        return self.events(None)

    def poll(self, callback: Callable[[Any], object], timeout: float | None = None,
             until: Callable[[], bool] | None = None) -> int:
        """Call ``callback(event)`` for each available event; wait up to ``timeout`` s if none.

        Returns the number of events handled.  If the callback raises, the
        events after the one that failed are kept for the next call.
        ``until``, when given, is asked after each event: once it is true the
        rest of the batch (up to :attr:`batch_size` events) is kept for the next
        call, so a Ctrl-C is acted on at once, not after thousands of events.
        """
        self._require()
        batch = self._take()
        if not batch and timeout != 0 and not self.ended and self._wait(timeout):
            batch = self._take()
        if batch and self.on_lost is not None:
            self.report_lost(False)
        it = iter(batch)
        n = 0
        try:
            for ev in it:
                n += 1
                callback(ev)
                if until is not None and until():
                    break
        except BaseException:
            self._pending = list(it) + self._pending
            raise
        rest = list(it)
        if rest:
            self._pending = rest + self._pending
        return n

    def run(self, callback: Callable[[Any], object]) -> int:
        """The callback loop: ``callback(event)`` for every event until :meth:`close` (from another
        thread or from the callback) or :attr:`ended`; returns how many were handled."""
        self._require()
        n = 0
        while not self._closing:
            try:
                got = self.poll(callback, None)
            except Closed:  # closed between two polls
                break
            n += got
            if not got and (self.ended or self._closing):
                break
        return n

    def skip(self) -> int:
        """Drop every event now in the ring, and those kept pending, undecoded; returns how many.

        For a consumer that must stop now (a second Ctrl-C, a deadline): the
        ring's space goes back to the producers without the cost of decoding.
        """
        self._require()
        with self._lock:
            n = len(self._pending)
            self._pending = []
            if not self._closing:
                n += self._walk(lambda off, count, stride, length: None, None)
        return n

    def consume(self, max_events: int | None = None) -> list[Any]:
        """Events available now (at most ``max_events``, default :attr:`batch_size`), without waiting."""
        self._require()
        return self._take(max_events)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the ring has data (True) or ``timeout`` seconds pass (False)."""
        self._require()
        return self._wait(timeout)

    async def _aiter(self, include_lost: bool = False) -> AsyncIterator[Any]:
        import asyncio

        global _current_task
        _current_task = asyncio.current_task
        loop = asyncio.get_running_loop()
        self._require()
        # The loop's reader is on the ring map's own fd (readable while it holds data), not on our
        # epoll fd: one epoll less between the kernel's wake-up and the task.  close() settles the
        # waiting future itself; end_when() fds get readers of their own.
        fd = self._fd
        waiting: list[Any] = [None]     # the future a wait is on, else None
        registered = False

        def ready() -> None:
            nonlocal registered
            fut = waiting[0]
            if fut is not None:
                _settle(fut)    # the task runs now, and takes what the ring holds (_Wakeup says why)
            else:  # data while the consumer is busy elsewhere: not called again until it waits
                loop.remove_reader(fd)
                registered = False

        def ended(end_fd: int) -> None:
            loop.remove_reader(end_fd)
            self._mark_ended(end_fd)
            if waiting[0] is not None:
                _settle(waiting[0])

        with self._lock:
            if self._closing:
                return
            self._async_waiters += 1
            ends = list(self._end_fds) if not self.ended else []
        for end_fd in ends:
            loop.add_reader(end_fd, ended, end_fd)
        try:
            while not self._closing:
                batch = self._take()
                if batch:
                    lost = self.report_lost(include_lost)   # returns at once when no one asks for losses
                    if lost is not None:
                        yield lost
                    it = iter(batch)
                    try:
                        for ev in it:
                            yield ev
                    finally:
                        rest = list(it)
                        if rest:
                            self._pending = rest + self._pending
                    continue
                if self.ended:
                    return
                fut = _Wakeup(loop)
                entry = (loop, fut)
                with self._lock:
                    if self._closing:
                        return
                    self._async.add(entry)
                waiting[0] = fut
                try:
                    if not registered:  # the reader stays registered from one wait to the next
                        loop.add_reader(fd, ready)
                        registered = True
                    if not self._closing and not self._has_data():  # else it arrived meanwhile
                        await fut
                finally:
                    waiting[0] = None
                    # no lock: a set's discard is atomic, and close() settling a wait that ended meanwhile
                    # does nothing (one lock less between the wake-up and the event)
                    self._async.discard(entry)
        finally:
            if registered:
                loop.remove_reader(fd)
            for end_fd in ends:
                loop.remove_reader(end_fd)
            with self._lock:
                self._async_waiters -= 1
                if self._closing and not self._async_waiters:
                    self._close_fds()

    def __aiter__(self) -> AsyncIterator[Any]:
        """``async for ev in rb``: ends at :meth:`close` (from any thread or task) or once :attr:`ended`."""
        self._require()
        return self._aiter()

    def aevents(self, *, include_lost: bool = False) -> AsyncIterator[Any]:
        """``async for ev in rb.aevents(include_lost=True)``: ``async for`` with :class:`Lost` markers."""
        self._require()
        return self._aiter(include_lost)

    def read_batch(self, max_events: int | None = None, timeout: float = 0.0) -> numpy.ndarray:
        """Available records as one numpy structured array (``codec.numpy_dtype()``).

        Waits up to ``timeout`` seconds when the ring is empty; returns an
        empty array if still nothing.  Does not see events already decoded
        by the other modes and kept pending (do not mix the two on one ring).
        """
        import numpy as np

        self._require()
        if self.codec is None:
            raise ValueError(f"ring buffer {self.name}: read_batch needs an event type (pass event=)")
        dtype = self.codec.numpy_dtype()
        if not self._has_data() and timeout != 0:
            self._wait(timeout)
        parts: list = []
        slow: list[bytes] = []
        size = self.codec.size
        mm, base = self._data_map, self._page

        def run(off: int, n: int, stride: int, length: int) -> None:
            if length < size:   # shorter than the struct: zero-fill, record by record
                for i in range(n):
                    o = off + i * stride + HEADER_SIZE
                    slow.append(bytes(self._data[o:o + length]) + bytes(size - length))
                return
            if slow:
                parts.append(np.frombuffer(b"".join(slow), dtype=dtype))
                slow.clear()
            rec = self._np_dtypes.get(stride)
            if rec is None:  # the payload as opaque bytes: numpy copies a void field in one piece, not field by field
                rec = self._np_dtypes[stride] = np.dtype(
                    {"names": ["ev"], "formats": [f"V{dtype.itemsize}"], "offsets": [HEADER_SIZE], "itemsize": stride})
            parts.append(np.frombuffer(mm, dtype=rec, count=n, offset=base + off)["ev"].copy().view(dtype))

        with self._lock:
            if not self._closing:
                # Headers checked in numpy: a Python list of 1.5 M length words cost as much as the copy.
                words = np.frombuffer(mm, dtype=np.uint32, offset=base)

                def same(first: int, n: int, step: int, hdr: int) -> int:
                    differ = words[first:first + n * step:step] != hdr
                    return int(differ.argmax()) if differ.any() else n

                try:
                    self._walk(run, max_events, same)
                finally:
                    del words, same  # views of the mapping: close() cannot unmap while they live
        if slow:
            parts.append(np.frombuffer(b"".join(slow), dtype=dtype))
        if not parts:
            return np.empty(0, dtype=dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    # -- internals ----------------------------------------------------------

    def _require(self) -> None:
        if self._fd < 0 or self._closing:
            raise Closed(f"ring buffer {self.name}")

    def _has_data(self) -> bool:
        return self._prod[0] != self._cons_pos

    def _wait(self, timeout: float | None) -> bool:
        """True when there is something to take; False on timeout or once closed."""
        with self._lock:
            if self._closing:
                return False
            if self._pending or self._has_data():
                return True
            ep = self._ep
            self._waiters += 1
        try:
            ready = ep.poll(-1 if timeout is None else timeout)
        except (OSError, ValueError):  # closed by another thread
            ready = []
        finally:
            with self._lock:
                self._waiters -= 1
                if self._closing:       # only close() waits for it: a notify per wake-up was ~1 us for nothing
                    self._idle.notify_all()
        if self._end_fds and ready and not self._closing:
            self._check_end(ready)
        return bool(ready) and not self._closing

    def _take(self, limit: int | None = None) -> list[Any]:
        """Pending events, else up to ``limit`` (default :attr:`batch_size`) decoded from the ring."""
        with self._lock:
            if self._closing:
                return []
            return self._take_locked(limit)

    def _take_locked(self, limit: int | None) -> list[Any]:
        if self._pending:
            batch, self._pending = self._pending, []
            return batch
        cons, prod = self._cons_pos, self._prod[0]
        if cons == prod:
            return []
        # One record waiting, the usual case of a consumer woken by an event: decoded here, without
        # _walk's runs, the closures below and the GC pause.  A consumer just out of epoll_wait runs on
        # cold caches, where each piece of code touched costs several times its warm time; this path
        # took ~1/3 off the time from the wake-up to the event (bench/wakeup.py, issue 24).
        off = cons & self._mask
        hdr = self._words[off >> 2]
        length = hdr & _LEN_MASK
        if not hdr & (BUSY_BIT | DISCARD_BIT) and prod - cons == _padded(length) and limit != 0:
            o = off + HEADER_SIZE
            codec = self.codec
            if self._decode_fn is not None:
                ev = self._decode_fn(bytes(self._data[o:o + length]))
            elif codec is None:
                ev = bytes(self._data[o:o + length])
            elif length >= codec.size:
                ev = codec.decode(self._data, o)
            else:
                ev = codec.decode(bytes(self._data[o:o + length]) + bytes(codec.size - length), 0)
            self._cons[0] = self._cons_pos = prod
            self.consumed += 1
            return [ev]
        out: list[Any] = []
        codec = self.codec
        data = self._data
        fn = self._decode_fn
        if fn is not None:  # a caller's decoder: one call per record, on a copy (the ring space is reused)
            def run(off: int, n: int, stride: int, length: int) -> None:
                for i in range(n):
                    o = off + i * stride + HEADER_SIZE
                    out.append(fn(bytes(data[o:o + length])))
        elif codec is None:
            def run(off: int, n: int, stride: int, length: int) -> None:
                for i in range(n):
                    o = off + i * stride + HEADER_SIZE
                    out.append(bytes(data[o:o + length]))
        else:
            decode, decode_many, size = codec.decode, codec.decode_many, codec.size

            def run(off: int, n: int, stride: int, length: int) -> None:
                if length >= size:  # one iter_unpack over the run, header and padding skipped
                    out.extend(decode_many(data, n, stride, off + HEADER_SIZE))
                    return
                for i in range(n):  # shorter than the struct: zero-filled
                    o = off + i * stride + HEADER_SIZE
                    out.append(decode(bytes(data[o:o + length]) + bytes(size - length), 0))

        # The events are acyclic: pausing the cyclic GC while a batch is built
        # (as btf.cdump does for its dump) doubles the decoding rate.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            self._walk(run, self.batch_size if limit is None else limit)
        finally:
            if paused:
                gc.enable()
        return out

    def _same_headers(self, first: int, n: int, step: int, hdr: int) -> int:
        """How many of ``n`` records, the first at word ``first`` and ``step`` words apart, have header ``hdr``."""
        lens = self._words[first:first + n * step:step].tolist()
        if lens.count(hdr) == n:
            return n
        return next(i for i, w in enumerate(lens) if w != hdr)

    def _walk(self, run: Callable[[int, int, int, int], None], limit: int | None,
              same: Callable[[int, int, int, int], int] | None = None) -> int:
        """Hand runs of same-length records to ``run(offset, count, stride, length)``.

        ``offset`` is into the (double-mapped) data area.  Advances
        consumer_pos after each run; returns the number of records handed.
        ``same`` checks a run's headers (default :meth:`_same_headers`).
        """
        same = same or self._same_headers
        words, mask = self._words, self._mask
        cons = self._cons_pos
        prod = self._prod[0]
        left = -1 if limit is None else limit
        handed = 0
        while cons < prod and left != 0:
            off = cons & mask
            hdr = words[off >> 2]
            if hdr & BUSY_BIT:
                break
            length = hdr & _LEN_MASK
            stride = _padded(length)
            if hdr & DISCARD_BIT:
                cons += stride
                self.discarded += 1
                self._cons[0] = self._cons_pos = cons
                continue
            n = (prod - cons) // stride
            if 0 <= left < n:
                n = left
            if n > 1:    # a run of one when the next header differs (lengths alternating), asked at once
                n = 1 if words[(off + stride) >> 2] != hdr else _run_length(same, off >> 2, n, stride >> 2, hdr)
            run(off, n, stride, length)
            cons += n * stride
            handed += n
            if left > 0:
                left -= n
            self._cons[0] = self._cons_pos = cons
        self.consumed += handed
        return handed


def _run_length(same: Callable[[int, int, int, int], int], first: int, n: int, step: int, hdr: int) -> int:
    """How many of ``n`` records from word ``first`` have header ``hdr`` (the first has), asking
    ``same`` about windows that double from 16 records.  Why: records of alternating lengths (a
    ``time()`` record, then a ``printf``) make runs of one, and checking the whole backlog's headers
    for each cost time in proportion to the backlog: quadratic (1.4 of 2.2 s of a 15,000-event flood
    on the host, and a backlog of thousands under QEMU's TCG that pycore never caught up with)."""
    checked, window = 1, 16
    while checked < n:
        k = min(window, n - checked)
        got = same(first + checked * step, k, step, hdr)
        checked += got
        if got < k:
            break
        window *= 2
    return checked


def _settle(fut: _Wakeup) -> None:
    """Wake an ``async for`` waiting on ``fut`` (the ring's reader fired, or close())."""
    fut.wake()


_current_task: Callable[[Any], Any] = None  # type: ignore[assignment]  # asyncio.current_task, set by the first `async for`


class _Wakeup:
    """What an ``async for`` consumer awaits: a future-like object (the ``_asyncio_future_blocking``
    protocol that asyncio's Tasks accept from any awaitable, as from a Future) whose :meth:`wake` resumes
    the waiting task at once, inside the loop callback that calls it (the ring's reader, close()'s
    call_soon_threadsafe, an end_when() fd's reader).

    Why: a Future's set_result() only schedules the task (call_soon), so it ran in the loop's next
    iteration: a second select (a system call) and handle dispatch between the ring's wake-up and the
    consumer's code.  From the reader's wake to the consumer's code: 10-15 us -> 7-9 us p50, 16-23 ->
    11-14 us p90, on the cold caches of a consumer that slept (bench/wakeup.py async, issue 24).
    A task runs synchronously here only when no other task is running (the loop's own
    callbacks); else, and for cancel() (task.cancel(), timeouts), the task is scheduled as a Future does.
    """

    __slots__ = ("_loop", "_state", "_callbacks", "_asyncio_future_blocking", "_msg")

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self._state = 0                 # 0 pending, 1 woken, 2 cancelled
        self._callbacks: list[tuple[Callable[[Any], object], Any]] = []
        self._asyncio_future_blocking = False
        self._msg: Any = None

    def get_loop(self) -> Any:
        return self._loop

    def done(self) -> bool:
        return self._state != 0

    def cancelled(self) -> bool:
        return self._state == 2

    def result(self) -> None:
        if self._state == 1:
            return
        import asyncio

        if self._state == 2:
            raise asyncio.CancelledError(*(() if self._msg is None else (self._msg,)))
        if self._state == 0:
            raise asyncio.InvalidStateError("result is not set")

    def exception(self) -> BaseException | None:
        self.result()
        return None

    def add_done_callback(self, fn: Callable[[Any], object], *, context: Any = None) -> None:
        if self._state:
            self._loop.call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        n = len(self._callbacks)
        self._callbacks = [(f, c) for f, c in self._callbacks if f != fn]
        return n - len(self._callbacks)

    def cancel(self, msg: Any = None) -> bool:
        if self._state:
            return False
        self._state, self._msg = 2, msg
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)
        return True

    def wake(self) -> None:
        if self._state:
            return
        self._state = 1
        callbacks, self._callbacks = self._callbacks, []
        if not callbacks:
            return
        if _current_task(self._loop) is not None:
            for fn, context in callbacks:
                self._loop.call_soon(fn, self, context=context)
            return
        for fn, context in callbacks:
            if context is None:
                fn(self)
            else:
                context.run(fn, self)

    def __await__(self) -> Any:
        if not self._state:
            self._asyncio_future_blocking = True
            yield self
        if self._state != 1:
            self.result()       # raises CancelledError

    __iter__ = __await__


# -- event type ----------------------------------------------------------------


def _map_type_and_size(fd: int, name: str) -> tuple[int, int]:
    """(map type, max_entries) of a map fd, from the kernel (BPF_OBJ_GET_INFO_BY_FD)."""
    from pycore.native import libbpf as L

    info = L.ffi.new("struct bpf_map_info *")
    length = L.ffi.new("__u32 *", L.ffi.sizeof("struct bpf_map_info"))
    ret = L.lib.bpf_obj_get_info_by_fd(fd, info, length)
    if ret < 0:
        raise BpfError(f"map {name} (fd {fd}): get info", -ret)
    return int(info.type), int(info.max_entries)


def _resolve_event(obj: BpfObject, m: Any, event: Any) -> Any:
    """The codec for the records, or None for raw bytes (rules in the module docstring)."""
    if event is bytes:
        return None
    if event is not None and hasattr(event, "decode") and hasattr(event, "size"):
        return event
    spec = obj.btf
    if event is None:
        from btf.kinds import Kind

        vid = m.btf_value_type_id
        annotated = spec.ids_named(_ANNOTATION + m.name, (Kind.VAR,))
        if vid:
            event = vid
        elif annotated:  # PYCORE_RING_EVENT(map, type): a pointer to the event type
            from btf import layout

            event = layout.skip(spec.type(annotated[0]).type)
            event = event.type if event.kind == Kind.PTR else event
        else:
            from btf.spec import glob_pattern

            ids = spec.ids_matching(glob_pattern("*_event"), (Kind.STRUCT,))
            names = sorted({spec.name(i) for i in ids})
            if not names:
                return None
            if len(names) > 1:
                raise ValueError(f"{obj.name}: map {m.name}: several event structs ({', '.join(names)}); "
                                 "pass event='struct name'")
            event = ids[0]
    return _decoder_for(spec, event)


def _decoder_for(spec: Any, event: Any) -> Any:
    from pycore.native.codec import decoder_for

    if isinstance(event, str) and event.startswith("struct "):
        event = event[len("struct "):]
    return decoder_for(spec, event)
