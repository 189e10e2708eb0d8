"""pg-queries: PostgreSQL queries with their latency (``postgresql:query__start``
and ``query__done``), like bcc's dbslower; ``--min-ms`` filters in the kernel."""

from __future__ import annotations

import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, Tool

POSTGRES = "/usr/lib/postgresql/15/bin/postgres"


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """One query and its latency: one event (``struct pg_query_event``), as ``open_tool`` yields it."""

    pid: int = 0
    pad: int = 0
    start_ns: int = 0
    latency_ns: int = 0
    query: str = ""


class PgQueries(Tool):
    name = "pg-queries"
    description = "PostgreSQL query texts and latencies (USDT query__start/query__done)"
    object = "pg_queries"
    methods = (Method("usdt/postgresql:query__start+query__done", ("query_start", "query_done"), "usdt"),)
    event = "pg_query_event"
    event_type = Event

    options = (
        Option("min_ms", float, 0.0, "only queries at least this slow",
               check=lambda ms: "is negative" if ms < 0 else None),
        Option("binary", str, POSTGRES, f"the postgres binary (default {POSTGRES})"),
    )

    def configure(self, obj, method):  # noqa: ANN001
        obj.globals["min_ns"] = int(self.args.min_ms * 1e6)

    def attach(self, obj, method):  # noqa: ANN001
        from pycore.tools.usdt_common import attach_usdt

        attach_usdt(obj, self.args.binary, self.args.pid,
                    {"query_start": ("postgresql", "query__start"),
                     "query_done": ("postgresql", "query__done")})

    def started(self, obj):  # noqa: ANN001
        if not self.args.json:
            self.out.write(f"{'PID':<8} {'MS':>10} QUERY\n")
            self.out.flush()

    def format_event(self, ev: Any) -> str:
        return f"{ev.pid:<8} {ev.latency_ns / 1e6:>10.3f} {ev.query}"


TOOL = PgQueries
