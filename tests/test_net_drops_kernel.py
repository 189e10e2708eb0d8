"""net-drops in Debian's 6.1 and 6.12 kernels (tests/vm): the one object
loads with either attach method (kfree_skb's arguments and enum
skb_drop_reason differ between 6.1, 6.12 and the host's 6.18) and counts
UDP sent to a closed port on loopback as NO_SOCKET on ``lo``, exactly."""

from __future__ import annotations

import os
import socket

import pytest

pytestmark = pytest.mark.kernel

N = 12


def _closed_udp_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("method", ["tp_btf/kfree_skb", "tracepoint/skb/kfree_skb"])
def test_net_drops_counts_no_socket_on_lo(method, record_property):
    record_property("tool", "net-drops")
    from pycore.tools.runner import tool_parser
    from pycore.embed.session import ToolSession
    from pycore.tools.net_drops import NetDrops

    class One(NetDrops):
        methods = tuple(m for m in NetDrops.methods if m.name == method)

    own = os.stat("/proc/self/ns/net").st_ino
    port = _closed_udp_port()
    with ToolSession(One(tool_parser(NetDrops).parse_args(["--netns", str(own), "--interface", "lo"]))) as s:
        assert s.method.name == method
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            for _ in range(N):
                u.sendto(b"drop me", ("127.0.0.1", port))
        events: list = []
        while s.poll(events.append, timeout=0.5):
            pass
        rows = s.summary()["drops"]
        seen = [s.as_dict(e) for e in events]
    assert [(r["netns"], r["interface"], r["reason"], r["count"]) for r in rows] == [(own, "lo", "NO_SOCKET", N)]
    assert len(seen) == N
    assert {(e["interface"], e["reason"], e["protocol"]) for e in seen} == {("lo", "NO_SOCKET", "IPv4")}
