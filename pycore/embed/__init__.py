"""pycore inside an agent's own process: sessions and metrics, no global state.

- :mod:`~pycore.embed.session`: :func:`open_tool` and :class:`ToolSession` (events, aggregations, close from any thread)
- :mod:`~pycore.embed.metrics`: Prometheus collectors for running sessions

May import: :mod:`pycore.tools` and everything below it.
"""
