"""bpftrace's output, byte for byte: printf, print, maps, histograms, structs, and ``-f json``.

Users put our output next to bpftrace 0.17's, so every rule here was read off
bpftrace's source and checked against the binary (tests/test_trace_output.py
runs both).  The stage is pure Python and value-based: the runtime hands in
values already decoded from maps and ring-buffer records (ints
sign-interpreted, strings, stacks as lists of frames, structs as bytes with
their BTF type) plus their trace types from :mod:`pycore.lang.types`.

- :mod:`~pycore.lang.output.cformat`: printf's specifiers, checks and glibc formatting
- :mod:`~pycore.lang.output.values`: print(x), map keys and values, BTF structs
- :mod:`~pycore.lang.output.maps`: maps in text and json, bpftrace's sort order
  (with :mod:`~pycore.lang.output.stdsort`, libstdc++'s std::sort), hist/lhist
  drawn by :mod:`pycore.hist`
- :mod:`~pycore.lang.output.messages`: json envelopes and escaping, time(), join()
"""

from __future__ import annotations

from pycore.lang.output.cformat import (arg_category, compile_printf, format_printf, format_printf_bytes, hex_buffer,
                                         specifiers, validate_format)
from pycore.lang.output.maps import folded, format_map, hist_json, map_json, sort_entries
from pycore.lang.output.messages import (EXIT_PREAMBLE, attached_json, attached_text, format_join, format_time,
                                          helper_error_json, helper_error_text, json_escape, json_message,
                                          lost_json, lost_text)
from pycore.lang.output.values import (btf_layout, format_btf, format_fields, format_inet, format_key, format_mac,
                                       format_value, stack_text)

__all__ = ["format_printf", "format_printf_bytes", "compile_printf", "validate_format", "specifiers", "arg_category",
           "hex_buffer",
           "format_value", "value_json", "format_inet", "format_mac", "format_key", "format_fields", "format_btf",
           "btf_layout", "stack_text",
           "format_map", "map_json", "sort_entries", "hist_json", "folded",
           "json_escape", "json_message", "helper_error_text", "helper_error_json", "attached_text", "attached_json", "lost_text", "lost_json",
           "format_time", "format_join", "EXIT_PREAMBLE"]


def value_json(value: object, t: object = None) -> str:
    """print(value) under ``-f json``: ``{"type": "value", "data": ...}`` and a newline."""
    return f'{{"type": "value", "data": {format_value(value, t, json=True)}}}\n'
