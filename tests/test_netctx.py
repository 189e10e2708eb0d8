"""pycore.kernel.netctx in a process with a SIGTERM handler of its own, as agents and pytest have.

A socket in another network namespace is made by a child that pyroute2 forks and then stops with
SIGTERM. The child inherits the process's Python signal handlers: under a handler that raises, it
raised out of pyroute2's wrapper into its copy of NetContext's worker thread and waited there,
while the parent waited for it forever (a whole test run hung in test_net_drops this way). Here the
child is made to linger in pyroute2's wrapper, so the parent's SIGTERM always finds it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest

from tests.conftest import ROOT, require_root

CHILD = r'''
import os, signal, sys, time
import pyroute2.process as P

real = P.wrapper
def lingering(*args):
    real(*args)
    time.sleep(1.0)        # still in pyroute2's wrapper when the parent's SIGTERM comes

P.wrapper = lingering

def raising(signum, frame):
    raise KeyboardInterrupt("SIGTERM")

signal.signal(signal.SIGTERM, raising)
from pycore.kernel.netctx import NetContext

ctx = NetContext()
inode = ctx.resolve_netns(sys.argv[1])
print(ctx.ifindex(inode, "lo"), flush=True)
ctx.close()
print("closed", flush=True)
'''


@pytest.fixture
def netns():
    require_root()
    name = f"pycore-t-ctx-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_another_namespace_under_a_raising_sigterm_handler(netns):
    p = subprocess.Popen([sys.executable, "-c", CHILD, netns], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)      # the hung process and pyroute2's child with it
        out, err = p.communicate()
        pytest.fail(f"NetContext hung closing a namespace's socket: {out!r} {err[-2000:]}")
    assert p.returncode == 0 and out.split() == ["1", "closed"], (out, err)
