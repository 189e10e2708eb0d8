"""Network context for kernel events: interface names and network namespaces.

A BPF program sees an interface as a pair of numbers: the inode of its
network namespace (``net->ns.inum``, the inode ``stat /proc/PID/ns/net`` or
``stat /run/netns/NAME`` shows) and its ifindex, which is only unique within
that namespace.  :class:`NetContext` turns the pair into the interface's
name by asking the namespace itself over rtnetlink (pyroute2), keeps the
answers, and keeps them right: per namespace it holds a socket subscribed to
link notifications (RTM_NEWLINK/RTM_DELLINK), read without blocking
before each lookup (no listener thread), and it asks again on a miss.

Namespaces are named from ``/run/netns`` (``ip netns add``'s directory);
others are found through a process inside them (``/proc/PID/ns/net``).

Note that an open netlink socket keeps its namespace alive: a namespace
deleted with ``ip netns del`` while a NetContext still watches it lives on
until :meth:`NetContext.close`.
"""

from __future__ import annotations

import errno
import os
import select
import threading
import time
from typing import Any

__all__ = ["NETNS_RUN_DIR", "NetContext", "netns_inode", "own_netns"]

NETNS_RUN_DIR = "/run/netns"
_RETRY_S = 1.0   # a namespace nobody could be found in is looked for again after this


def netns_inode(path: str) -> int:
    """The namespace inode of a netns file (``/proc/PID/ns/net``, ``/run/netns/NAME``)."""
    return os.stat(path).st_ino


def own_netns() -> int:
    """This process's network namespace inode."""
    return netns_inode("/proc/self/ns/net")


class _Netns:
    """Inside one namespace: an rtnetlink query socket (pyroute2's IPRoute) and
    a plain netlink socket subscribed to link notifications, read without
    blocking and decoded by pyroute2's parser (pyroute2's own reader would
    keep notifications buffered where select() cannot see them)."""

    def __init__(self, path: str | None) -> None:
        import socket

        from pyroute2 import IPRoute, config, netns
        from pyroute2.netlink import NETLINK_ROUTE
        from pyroute2.netlink.rtnl import RTMGRP_LINK
        from pyroute2.netlink.rtnl.marshal import MarshalRtnl

        # A socket in another namespace is made by a child that pyroute2 forks from this thread and
        # stops with SIGTERM once it has sent the socket. The child inherits this process's Python
        # signal handlers: under an agent's (or pytest's) SIGTERM handler that raises, the child raised
        # out of pyroute2's wrapper into the copy of our thread pool and waited there for work, and
        # this thread waited for it forever. This makes the child take SIGTERM's default (it dies).
        config.disable_mp_signal = True

        # flags=0: never create a namespace, only enter an existing one
        self.query = IPRoute() if path is None else IPRoute(netns=path, flags=0)
        try:
            self.monitor = netns.create_socket(netns=path, family=socket.AF_NETLINK, socket_type=socket.SOCK_RAW,
                                               proto=NETLINK_ROUTE, flags=0)
            self.monitor.bind((0, RTMGRP_LINK))
            self.monitor.setblocking(False)
        except BaseException:
            self.query.close()
            raise
        self.marshal = MarshalRtnl()

    def links(self) -> dict[int, str]:
        return {msg["index"]: msg.get_attr("IFLA_IFNAME") for msg in self.query.get_links()}

    def changes(self) -> list[tuple[str, int, str]] | None:
        """(event, ifindex, name) of the link notifications waiting, without
        blocking; None when some were lost (ENOBUFS): ask for every link again."""
        out = []
        while True:
            try:
                data = self.monitor.recv(65536)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    return None
                raise
            for msg in self.marshal.parse(data):
                if msg.get("event") in ("RTM_NEWLINK", "RTM_DELLINK"):
                    out.append((msg["event"], msg["index"], msg.get_attr("IFLA_IFNAME")))

    def close(self) -> None:
        self.monitor.close()
        self.query.close()


class NetContext:
    """(netns inode, ifindex) -> interface name, and netns inode <-> name.

    Usable from any thread.  pyroute2's synchronous sockets keep an event
    loop per calling thread and close only the closing thread's, so every
    netlink call runs in one worker thread of ours; a cached name whose
    namespace has no notification waiting is answered without it.
    :meth:`close` (or ``with``) closes every socket and stops the worker.
    """

    def __init__(self, run_dir: str = NETNS_RUN_DIR) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.run_dir = run_dir
        self.own = own_netns()
        self._names: dict[tuple[int, int], str] = {}
        self._spaces: dict[int, _Netns] = {}
        self._monitors: dict[int, int] = {}   # netns inode -> notification socket fd
        self._unreachable: dict[int, float] = {}
        self._named: dict[int, str] = {}      # what named() read last, and when
        self._named_mtime = -1
        self._named_at = 0.0
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="pycore-netctx")
        self._closed = False

    def _call(self, fn: Any, *args: Any) -> Any:
        with self._lock:
            if self._closed:
                raise ValueError("NetContext is closed")
            future = self._worker.submit(fn, *args)
        return future.result()

    # -- namespaces ------------------------------------------------------------

    def named(self) -> dict[int, str]:
        """inode -> name of the namespaces in /run/netns.

        Asked for every event printed, so it is read again only when the
        directory changed (``ip netns add/del`` create and remove its
        files) or a second has passed (``ip netns add`` mounts the
        namespace on its file just after creating it): one stat a call."""
        try:
            mtime = os.stat(self.run_dir).st_mtime_ns
        except OSError:
            return {}
        now = time.monotonic()
        if mtime != self._named_mtime or now - self._named_at > _RETRY_S:
            out: dict[int, str] = {}
            try:
                entries = sorted(os.listdir(self.run_dir))
            except OSError:
                entries = []
            for name in entries:
                try:
                    out.setdefault(netns_inode(os.path.join(self.run_dir, name)), name)
                except OSError:
                    continue
            self._named, self._named_mtime, self._named_at = out, mtime, now
        return self._named

    def netns_name(self, inode: int) -> str | None:
        """The /run/netns name of a namespace, None when it has none."""
        return self.named().get(inode)

    def netns_label(self, inode: int) -> str:
        """What to print for a namespace: its name, "host" for ours, else the inode."""
        if inode == 0:
            return "?"
        name = self.netns_name(inode)
        if name is not None:
            return name
        return "host" if inode == self.own else str(inode)

    def resolve_netns(self, text: str) -> int:
        """A namespace given by name (/run/netns), inode, ``net:[INODE]`` or a path; ValueError if none."""
        t = text.strip()
        if t.startswith("net:[") and t.endswith("]"):
            t = t[5:-1]
        if t.isdigit():
            return int(t)
        if t == "host":
            return self.own
        path = t if "/" in t else os.path.join(self.run_dir, t)
        try:
            return netns_inode(path)
        except OSError:
            known = ", ".join(sorted(self.named().values())) or "none"
            raise ValueError(f"no network namespace {text!r} (named ones: {known}; "
                             f"or give its inode, see 'ls -L -i /proc/PID/ns/net')") from None

    def _path(self, inode: int) -> str | None:
        """A file to enter the namespace through; None for our own."""
        if inode == self.own:
            return None
        for ino, name in self.named().items():
            if ino == inode:
                return os.path.join(self.run_dir, name)
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                path = f"/proc/{pid}/ns/net"
                try:
                    if os.stat(path).st_ino == inode:
                        return path
                except OSError:
                    continue
        raise LookupError(f"no process in network namespace {inode}")

    def _space(self, inode: int) -> _Netns | None:
        space = self._spaces.get(inode)
        if space is not None:
            return space
        if time.monotonic() < self._unreachable.get(inode, 0):
            return None
        try:
            space = _Netns(self._path(inode))
            links = space.links()
        except (LookupError, OSError):
            self._unreachable[inode] = time.monotonic() + _RETRY_S
            return None
        self._spaces[inode] = space
        self._monitors[inode] = space.monitor.fileno()
        for index, name in links.items():
            self._names[(inode, index)] = name
        return space

    # -- interfaces -------------------------------------------------------------

    def refresh(self) -> None:
        """Apply the link notifications received since the last call (worker thread)."""
        for inode, space in list(self._spaces.items()):
            try:
                changes = space.changes()
            except OSError:
                changes = []
            if changes is None:   # notifications lost: start this namespace afresh
                for key in [k for k in self._names if k[0] == inode]:
                    del self._names[key]
                try:
                    changes = [("RTM_NEWLINK", i, n) for i, n in space.links().items()]
                except OSError:
                    changes = []
            for event, index, name in changes:
                if event == "RTM_NEWLINK" and name:
                    self._names[(inode, index)] = name
                else:
                    self._names.pop((inode, index), None)

    def ifname(self, netns: int, ifindex: int) -> str | None:
        """The name of interface ``ifindex`` in namespace ``netns`` now, None if unknown."""
        if ifindex <= 0 or netns <= 0:
            return None
        key = (netns, ifindex)
        fd = self._monitors.get(netns)
        if fd is not None and key in self._names and not select.select([fd], [], [], 0)[0]:
            return self._names.get(key)
        return self._call(self._lookup, netns, ifindex)

    def _lookup(self, netns: int, ifindex: int) -> str | None:
        self.refresh()
        key = (netns, ifindex)
        if key in self._names:
            return self._names[key]
        space = self._spaces.get(netns)
        if space is None:
            self._space(netns)
        else:  # a miss on a watched namespace: ask again
            try:
                links = space.links()
            except OSError:
                links = {}
            for index, name in links.items():
                self._names[(netns, index)] = name
        return self._names.get(key)

    def ifindex(self, netns: int, name: str) -> int | None:
        """The ifindex of interface ``name`` in namespace ``netns``, None if there is none."""
        return self._call(self._find, netns, name)

    def _find(self, netns: int, name: str) -> int | None:
        space = self._space(netns)
        if space is None:
            return None
        self.refresh()
        found = None
        for index, n in space.links().items():
            self._names[(netns, index)] = n
            if n == name:
                found = index
        return found

    def label(self, netns: int, ifindex: int) -> str:
        """The interface's name, or ``if<N>`` when it cannot be named (gone, or no ifindex)."""
        name = self.ifname(netns, ifindex)
        if name is not None:
            return name
        return f"if{ifindex}" if ifindex else "-"

    # -- lifecycle --------------------------------------------------------------

    def _close_all(self) -> None:
        spaces, self._spaces = self._spaces, {}
        self._monitors = {}
        for space in spaces.values():
            space.close()

    def close(self) -> None:
        """Close every netlink socket (letting go of the namespaces watched) and stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._worker.submit(self._close_all).result()
        self._worker.shutdown(wait=True)

    def __enter__(self) -> NetContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
