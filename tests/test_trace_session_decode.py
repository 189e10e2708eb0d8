"""TraceSession's fast printf path (Script.event_fast) hands out the Events decode() makes."""

from __future__ import annotations

import asyncio

import pytest

import pycore
from tests.conftest import require_root

PROGRAM = r'''BEGIN {
  printf("%d %u %x %llu|%5d|%-4s|%s\n", -5, 7, 255, 1 << 40, -3, "ab", "xyz");
  printf("%s %d\n", comm, pid);
  printf("%p %p\n", 0, 4096);
  printf("plain\n");
  printf("%c\n", 65);
  print(5);
  time("%Y");
  @n = count();
  print(@n);
}'''


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root()


def test_fast_printf_events_are_decodes() -> None:
    with pycore.trace(PROGRAM) as session:
        script = session.script
        records = script.ring().consume()
        assert len(records) == 8
        fast = [script.event_fast(r) for r in records]
        slow = [list(script.decode(r)) for r in records]
        assert [ev is not None for ev in fast] == [True] * 4 + [False] * 4   # %c, print, time, map: decode()
        for f, s in zip(fast, slow):
            if f is not None:
                assert [f] == s
        assert fast[0].text == "-5 7 ff 1099511627776|   -3|ab  |xyz\n"
        assert fast[2].text == "(nil) 0x1000\n" and fast[3].value == []


def test_session_streams_hand_out_the_same_events() -> None:
    with pycore.trace(PROGRAM) as a, pycore.trace(PROGRAM) as b:
        expected = [ev for r in a.script.ring().consume() for ev in a.script.decode(r)]
        assert [e.text for e in a.events(timeout=0)] == []
        got = list(b.events(timeout=0.2))
        assert got == expected
    with pycore.trace(PROGRAM) as c:
        async def drain() -> list:
            out = []
            async for ev in c:
                out.append(ev)
                if len(out) == len(expected):
                    break
            return out
        assert asyncio.run(drain()) == expected


def test_no_fast_event_after_exit() -> None:
    with pycore.trace('BEGIN { printf("a\\n"); exit(); } END { printf("end\\n"); }') as session:
        script = session.script
        records = script.ring().consume()
        assert script.event_fast(records[0]).text == "a\n"
        assert list(script.decode(records[1])) == [] and script.exited
        assert script.event_fast(records[0]) is None       # what follows exit() is dropped, as decode() drops it
        assert list(script.decode(records[0])) == []
