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

from pycore.native.object import BpfObject
from pycore.native.ringbuf import RingBuffer
from pycore.tools.api import Method, NoMethod, Tool, tool_options
from pycore.tools.runner import Runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pycore.tools import fget_crack, net_drops, pg_queries, print_args, py_calls, usdt_passwd, vfs_unlink

__all__ = ["ToolSession", "open_tool", "NoMethod"]

E = TypeVar("E")

# One overload per built-in tool, so mypy --strict checks an agent's options and the fields it reads
# of the events (each tool module's Event dataclass).  The keywords and their types are those of the
# tool's Option declarations (tests/test_agent_api.py compares them).  The last overload takes a name
# known only at run time, with no options (give it `Any` to pass some: they are checked at run time);
# a catch-all with **options would also accept every misspelt option of the tools above.
@overload
def open_tool(name: Literal["fget-crack"], *, pid: int = 0,
              pattern: str = ...) -> ToolSession[fget_crack.Event]: ...
@overload
def open_tool(name: Literal["vfs-unlink"], *, pid: int = 0) -> ToolSession[vfs_unlink.Event]: ...
@overload
def open_tool(name: Literal["lock-contention"], *, pid: int = 0, threshold: float = ...,
              flags: bool = ...) -> ToolSession[NoReturn]: ...
@overload
def open_tool(name: Literal["fd-leak"], *, pid: int = 0) -> ToolSession[NoReturn]: ...
@overload
def open_tool(name: Literal["print-args"], *, pid: int = 0, func: str,
              deref: str | None = ...) -> ToolSession[print_args.Event]: ...
@overload
def open_tool(name: Literal["usdt-passwd"], *, pid: int = 0,
              binary: str | None = ...) -> ToolSession[usdt_passwd.Event]: ...
@overload
def open_tool(name: Literal["pg-queries"], *, pid: int = 0, min_ms: float = ...,
              binary: str = ...) -> ToolSession[pg_queries.Event]: ...
@overload
def open_tool(name: Literal["py-calls"], *, pid: int = 0,
              binary: str | None = ...) -> ToolSession[py_calls.Event]: ...
@overload
def open_tool(name: Literal["net-drops"], *, pid: int = 0, netns: str | None = ..., interface: str | None = ...,
              no_events: bool = ...) -> ToolSession[net_drops.Event]: ...
@overload
def open_tool(name: str, *, pid: int = 0) -> ToolSession[Any]: ...


def open_tool(name: str, *, pid: int = 0, **options: Any) -> ToolSession[Any]:
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
    return ToolSession(tool_cls(args, out=io.StringIO()))


def _tool_args(tool_cls: type[Tool], pid: int, options: dict[str, Any]) -> Any:
    """The namespace ``pycore run NAME`` would parse, from the tool's declared options (no argv)."""
    import argparse

    return argparse.Namespace(**tool_options(tool_cls, options), pid=pid, cmd=None, duration=None, json=False)


class ToolSession(Generic[E]):
    """One attached tool.  Read events with :meth:`events` (iterator),
    :meth:`poll` (callback) or ``async for``; read aggregations with
    :meth:`summary`; :meth:`close` (or ``with``) detaches everything.

    One consumer at a time per session; :meth:`close` may be called from
    any thread and ends a consumer blocked in :meth:`events`.  Events are
    the tool module's ``Event`` dataclass (``pycore.tools.fget_crack.Event``),
    which ``open_tool``'s overloads name, so mypy checks the fields read.
    """

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self._notes = io.StringIO()
        tool.err = self._notes          # the tool's notes too: nothing goes to the process's stderr
        runner = Runner(tool, err=self._notes)
        self.obj: BpfObject = runner.open(tool.args.pid)
        self._rb: RingBuffer | None = None
        if tool.event is not None:
            try:
                if tool.event_type is not None:
                    _use_event_type(self.obj, tool.event, tool.event_type)
                self._rb = RingBuffer(self.obj, tool.ringbuf, event=tool.event)
            except BaseException:
                self.obj.close()
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
    def lost(self) -> int:
        """Events dropped because the ring buffer was full."""
        return self._rb.lost if self._rb is not None else 0

    # -- events ----------------------------------------------------------------

    def _ring(self) -> RingBuffer:
        if self._rb is None:
            raise ValueError(f"{self.name} has no event stream; read summary()")
        return self._rb

    def events(self, timeout: float | None = None) -> Iterator[E]:
        """Events (dataclasses) as they come; ends after ``timeout`` s without one, or at close()."""
        return self._ring().events(timeout)

    def poll(self, callback: Callable[[E], object], timeout: float | None = None) -> int:
        """``callback(event)`` for each available event, waiting up to ``timeout`` s; returns the count."""
        return self._ring().poll(callback, timeout)

    def __aiter__(self) -> AsyncIterator[E]:
        return self._ring().__aiter__()

    def format(self, event: E) -> str | None:
        """The line ``pycore run`` prints for ``event``."""
        return self.tool.format_event(event)

    def as_dict(self, event: E) -> dict[str, Any] | None:
        """The JSON object ``pycore run --json`` prints for ``event``."""
        return self.tool.event_json(event)

    # -- aggregations --------------------------------------------------------------

    def summary(self) -> dict[str, Any] | None:
        """The tool's aggregations now (what ``--json`` prints at the end), read live from maps."""
        return self.tool.summary_json(self.obj)

    def summary_text(self) -> str:
        """The same, as ``pycore run`` prints it."""
        return self.tool.summary(self.obj)

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Detach and free everything; safe twice and from any thread."""
        if self._rb is not None:
            self._rb.close()
        self.obj.close()
        self.tool.close()

    @property
    def closed(self) -> bool:
        return self.obj.closed

    def __enter__(self) -> ToolSession[E]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"attached via {self.method.name}"
        return f"<ToolSession {self.name} {state}>"


def _use_event_type(obj: BpfObject, struct_name: str, cls: type) -> None:
    """Make the ring's records decode to the tool's own ``Event`` class (checked against the object's
    BTF when the ring is made: a field that differs is a ValueError naming both lists)."""
    from btf.kinds import Kind

    from pycore.native.codec import codec_registry

    ids = obj.btf.ids_named(struct_name, (Kind.STRUCT,))
    if ids:
        codec_registry(obj.btf).use_classes({ids[0]: cls})
