"""Built-in tools inside your own process: ``pycore.open_tool(name, **options)``.

``pycore run`` is a :class:`~pycore.tools.runner.Runner` that owns the process
(signals, stdout, exit status).  An agent embeds the same tools without any
of that: :func:`open_tool` picks the attach method exactly as ``pycore run``
does (fallbacks included), and the :class:`ToolSession` it returns hands out
the tool's events and aggregations as Python objects.  Nothing here is
global: open as many sessions as you like, of the same tool or different
ones, from any thread; each owns its BPF object and ring buffer.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, Literal, NoReturn, TypeVar, overload

from pycore.errors import Closed
from pycore.native.object import BpfObject
from pycore.native.ringbuf import Lost, RingBuffer
from pycore.tools.api import Method, NoMethod, Tool, tool_options
from pycore.tools.runner import Runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.tools import fget_crack, net_drops, pg_queries, print_args, py_calls, usdt_passwd, vfs_unlink

__all__ = ["ToolSession", "open_tool", "NoMethod"]

E = TypeVar("E")
LostCallback = Callable[[int], object]
EndCallback = Callable[[], object]
#: open_tool's keywords that are the session's, not the tool's options
SESSION_OPTIONS = ("ring_size", "map_size", "on_lost", "on_end")

# One overload per built-in tool, so mypy --strict checks an agent's options and the fields it reads
# of the events (each tool module's Event dataclass).  The keywords and their types are those of the
# tool's Option declarations (tests/test_agent_api.py compares them).  The last overload takes a name
# known only at run time, with no options (give it `Any` to pass some: they are checked at run time);
# a catch-all with **options would also accept every misspelt option of the tools above.
@overload
def open_tool(name: Literal["fget-crack"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None,
              pattern: str = ...) -> ToolSession[fget_crack.Event]: ...
@overload
def open_tool(name: Literal["vfs-unlink"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None
              ) -> ToolSession[vfs_unlink.Event]: ...
@overload
def open_tool(name: Literal["lock-contention"], *, pid: int = 0,
              ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None, threshold: float = ...,
              flags: bool = ...) -> ToolSession[NoReturn]: ...
@overload
def open_tool(name: Literal["fd-leak"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None) -> ToolSession[NoReturn]: ...
@overload
def open_tool(name: Literal["print-args"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None, func: str,
              deref: str | None = ...) -> ToolSession[print_args.Event]: ...
@overload
def open_tool(name: Literal["usdt-passwd"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None,
              binary: str | None = ...) -> ToolSession[usdt_passwd.Event]: ...
@overload
def open_tool(name: Literal["pg-queries"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None, min_ms: float = ...,
              binary: str = ...) -> ToolSession[pg_queries.Event]: ...
@overload
def open_tool(name: Literal["py-calls"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None,
              binary: str | None = ...) -> ToolSession[py_calls.Event]: ...
@overload
def open_tool(name: Literal["net-drops"], *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None,
              netns: str | None = ..., interface: str | None = ...,
              no_events: bool = ...) -> ToolSession[net_drops.Event]: ...
@overload
def open_tool(name: str, *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None) -> ToolSession[Any]: ...


def open_tool(name: str, *, pid: int = 0, ring_size: int | None = None, map_size: int | None = None,
              on_lost: LostCallback | None = None, on_end: EndCallback | None = None,
              **options: Any) -> ToolSession[Any]:
    """Load and attach the tool ``name`` (as ``pycore tools`` lists them).

    ``pid`` filters in the kernel like ``-p``; ``options`` are the tool's own
    (:attr:`Tool.options <pycore.tools.api.Tool.options>`: ``pattern="crack"``,
    ``threshold=50``, ``func="vfs_read"`` for a positional one), converted and
    checked before anything loads: TypeError for an unknown or missing option or a
    value of the wrong kind, :class:`~pycore.tools.api.OptionError` (a ValueError)
    for a value the tool refuses, both naming the option.  Nothing here exits the
    process or writes to stderr.  Raises PermissionError (one line naming
    the missing capabilities), :class:`NoMethod` (no attach method works on
    this kernel: the message says what would), KeyError (no such tool),
    :class:`~pycore.kernel.process.TargetError` (``pid`` does not exist), or
    :class:`~pycore.errors.BpfError`.

    ``ring_size`` (bytes, a power-of-2 multiple of the page size) sizes the tool's ring buffer,
    ``map_size`` the entries of each of its hash maps; ``on_lost(n)`` is called with the events
    dropped since the last call (the ring was full) as a consumer reads on; ``on_end()`` once the
    ``pid`` target exits (the session then ends: :attr:`ToolSession.ended`, consumers stop).
    """
    from pycore.kernel.privileges import missing_privileges
    from pycore.kernel.process import check_pid
    from pycore.tools import registry

    tool_cls = registry.get(name)
    if not isinstance(pid, int) or isinstance(pid, bool) or pid < 0:
        raise TypeError(f"{name}: pid takes a process id (an int >= 0), not {pid!r}")
    args = _tool_args(tool_cls, pid, options)
    if pid:
        check_pid(pid)
    why = missing_privileges()
    if why:
        raise PermissionError(f"pycore: {why}")
    return ToolSession(tool_cls(args, out=io.StringIO()), ring_size=ring_size, map_size=map_size,
                       on_lost=on_lost, on_end=on_end)


def _tool_args(tool_cls: type[Tool], pid: int, options: dict[str, Any]) -> Any:
    """The namespace ``pycore run NAME`` would parse, from the tool's declared options (no argv)."""
    import argparse

    return argparse.Namespace(**tool_options(tool_cls, options), pid=pid, cmd=None, duration=None, json=False)


class ToolSession(Generic[E]):
    """One attached tool.  Read events with :meth:`events` (iterator),
    :meth:`poll` (callback) or ``async for``; read aggregations with
    :meth:`summary`; :meth:`close` (or ``with``) detaches everything.

    One consumer at a time per session; :meth:`close` may be called from
    any thread or task and ends every consumer (:meth:`events`, :meth:`run`,
    ``async for``); any later use raises :class:`~pycore.errors.Closed`.
    A ``pid`` target's exit ends the session (:attr:`ended`).  Events are
    the tool module's ``Event`` dataclass (``pycore.tools.fget_crack.Event``),
    which ``open_tool``'s overloads name, so mypy checks the fields read.
    """

    def __init__(self, tool: Tool, *, ring_size: int | None = None, map_size: int | None = None,
                 on_lost: LostCallback | None = None, on_end: EndCallback | None = None) -> None:
        from pycore.kernel.process import PidWatch

        self.tool = tool
        self._notes = io.StringIO()
        self._closed = False
        self.on_end = on_end
        self._ended = False
        tool.err = self._notes          # the tool's notes too: nothing goes to the process's stderr
        runner = Runner(tool, err=self._notes)
        sizes = None
        if ring_size is not None or map_size is not None:
            sizes = lambda obj: _resize(obj, tool, ring_size, map_size)  # noqa: E731
        self.obj: BpfObject = runner.open(tool.args.pid, sizes)
        self._rb: RingBuffer | None = None
        self._watch: PidWatch | None = None
        try:
            if tool.event is not None:
                if tool.event_type is not None:
                    _use_event_type(self.obj, tool.event, tool.event_type)
                self._rb = RingBuffer(self.obj, tool.ringbuf, event=tool.event, on_lost=on_lost)
            if tool.args.pid:
                self._watch = PidWatch(tool.args.pid)
                fd = self._watch.fileno()
                if self._rb is not None and fd is not None:
                    self._rb.end_when(fd, self._end)
        except BaseException:
            self.close()
            raise
        tool.started(self.obj)

    # -- what is running ---------------------------------------------------

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def method(self) -> Method:
        """The attach method in use (the first that worked)."""
        assert self.tool.method is not None
        return self.tool.method

    @property
    def options(self) -> dict[str, Any]:
        """The tool's options as it runs with them: converted, defaults filled."""
        return {o.name: getattr(self.tool.args, o.name) for o in self.tool.options}

    @property
    def notice(self) -> str:
        """What ``pycore run`` prints on stderr: the fallback notice ('' when the first method worked)
        and the tool's notes (py-calls on an interpreter whose frames it cannot walk, ...)."""
        return self._notes.getvalue().strip()

    @property
    def has_events(self) -> bool:
        """Whether the tool streams events (some only aggregate in maps)."""
        return self._rb is not None

    @property
    def lost(self) -> int | None:
        """Events dropped because the ring buffer was full, counted in the kernel (every built-in
        tool counts them); None for a tool without events."""
        self._require()
        return self._guard(lambda: self._rb.lost) if self._rb is not None else None

    @property
    def on_lost(self) -> LostCallback | None:
        """Called with the number of events dropped since the last call, as a consumer reads on."""
        return self._rb.on_lost if self._rb is not None else None

    @on_lost.setter
    def on_lost(self, callback: LostCallback | None) -> None:
        if self._rb is not None:
            self._rb.on_lost = callback

    @property
    def ended(self) -> bool:
        """The ``pid`` target exited: consumers stop once the ring is drained; ``on_end`` was called."""
        if not self._ended and self._watch is not None and not self._closed and self._watch.exited():
            self._end()
        return self._ended

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self.on_end is not None:
            self.on_end()

    # -- events ----------------------------------------------------------------

    def _require(self) -> None:
        if self._closed:
            raise Closed(f"ToolSession {self.name}")

    def _guard(self, read: Callable[[], Any]) -> Any:
        """``read()``, where a close() from another thread meanwhile is this session's Closed, not an
        internal map's."""
        try:
            return read()
        except Closed:
            raise Closed(f"ToolSession {self.name}") from None
        except (ValueError, OSError):
            if self._closed:
                raise Closed(f"ToolSession {self.name}") from None
            raise

    def _ring(self) -> RingBuffer:
        self._require()
        if self._rb is None:
            raise ValueError(f"{self.name} has no event stream; read summary()")
        return self._rb

    @overload
    def events(self, timeout: float | None = None, *, include_lost: Literal[False] = False) -> Iterator[E]: ...
    @overload
    def events(self, timeout: float | None = None, *, include_lost: bool) -> Iterator[E | Lost]: ...

    def events(self, timeout: float | None = None, *, include_lost: bool = False) -> Iterator[E | Lost]:
        """Events (dataclasses) as they come; ends after ``timeout`` s without one, at close() or once
        :attr:`ended`.  ``include_lost``: a :class:`~pycore.native.ringbuf.Lost` marker where events
        were dropped."""
        return self._guard(lambda: self._ring().events(timeout, include_lost=include_lost))

    def poll(self, callback: Callable[[E], object], timeout: float | None = None) -> int:
        """``callback(event)`` for each available event, waiting up to ``timeout`` s; returns the count."""
        return self._guard(lambda: self._ring().poll(callback, timeout))

    def run(self, callback: Callable[[E], object]) -> int:
        """The callback loop: ``callback(event)`` for every event until close() (from any thread, or
        the callback) or the ``pid`` target's exit; returns how many were handled."""
        return self._guard(lambda: self._ring().run(callback))

    def __aiter__(self) -> AsyncIterator[E]:
        """``async for``: ends at close() (from another task or thread) or the ``pid`` target's exit."""
        return self._guard(lambda: self._ring().__aiter__())

    @overload
    def aevents(self, *, include_lost: Literal[False] = False) -> AsyncIterator[E]: ...
    @overload
    def aevents(self, *, include_lost: bool) -> AsyncIterator[E | Lost]: ...

    def aevents(self, *, include_lost: bool = False) -> AsyncIterator[E | Lost]:
        """``async for ev in session.aevents(include_lost=True)``: with :class:`Lost` markers."""
        return self._guard(lambda: self._ring().aevents(include_lost=include_lost))

    def format(self, event: E) -> str | None:
        """The line ``pycore run`` prints for ``event``."""
        return self.tool.format_event(event)

    def as_dict(self, event: E) -> dict[str, Any] | None:
        """The JSON object ``pycore run --json`` prints for ``event``."""
        return self.tool.event_json(event)

    # -- aggregations --------------------------------------------------------------

    def summary(self) -> dict[str, Any] | None:
        """The tool's aggregations now (what ``--json`` prints at the end), read live from maps."""
        self._require()
        return self._guard(lambda: self.tool.summary_json(self.obj))

    def summary_text(self) -> str:
        """The same, as ``pycore run`` prints it."""
        self._require()
        return self._guard(lambda: self.tool.summary(self.obj))

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Detach and free everything, ending every consumer; safe twice and from any thread."""
        if self._closed:
            return
        self._closed = True
        if self._rb is not None:
            self._rb.close()
        self.obj.close()
        self.tool.close()
        if self._watch is not None:
            self._watch.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> ToolSession[E]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"attached via {self.method.name}"
        return f"<ToolSession {self.name} {state}>"


_HASH_TYPES = (1, 5, 9, 10)  # BPF_MAP_TYPE_HASH, PERCPU_HASH, LRU_HASH, LRU_PERCPU_HASH


def _resize(obj: BpfObject, tool: Tool, ring_size: int | None, map_size: int | None) -> None:
    """open_tool's ring_size= and map_size=, before the object loads."""
    if ring_size is not None:
        if ring_size <= 0 or ring_size & (ring_size - 1) or ring_size % 4096:
            raise ValueError(f"{tool.name}: ring_size must be a power-of-2 multiple of 4096 bytes, not {ring_size}")
        if tool.event is not None:
            obj.maps[tool.ringbuf].max_entries = ring_size
    if map_size is not None:
        if map_size <= 0:
            raise ValueError(f"{tool.name}: map_size must be > 0, not {map_size}")
        for m in obj.maps.values():
            if m.type in _HASH_TYPES:
                m.max_entries = map_size


def _use_event_type(obj: BpfObject, struct_name: str, cls: type) -> None:
    """Make the ring's records decode to the tool's own ``Event`` class (checked against the object's
    BTF when the ring is made: a field that differs is a ValueError naming both lists)."""
    from btf.kinds import Kind

    from pycore.native.codec import codec_registry

    ids = obj.btf.ids_named(struct_name, (Kind.STRUCT,))
    if ids:
        codec_registry(obj.btf).use_classes({ids[0]: cls})
