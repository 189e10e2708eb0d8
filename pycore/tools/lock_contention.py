"""lock-contention: kernel locks threads block on for long (the kernel lab's
``lock:contention_begin``/``contention_end`` script with its exercises done).

Per thread and lock address, the time from contention_begin to
contention_end; blocks of at least ``--threshold`` microseconds go into a
log2 histogram (nanoseconds) per lock address.  Only that histogram is
printed, at the end, as bpftrace prints ``hist()`` maps::

    @[0xffff888103a4c5d0]:
    [128K, 256K)           3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

``--flags`` adds the lock's kind to the key (``@[0xffff..., MUTEX]``), decoded
with the names of the tracepoint's own ``__print_flags`` (tracefs format
file), so the names follow the running kernel.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from pycore.tools.api import Method, Option, Tool

FORMAT = "/sys/kernel/tracing/events/lock/contention_begin/format"
# include/trace/events/lock.h, used when the format file cannot be read
DEFAULT_FLAGS = {1: "SPIN", 2: "READ", 4: "WRITE", 8: "RT", 16: "PERCPU", 32: "MUTEX"}

_HIST_KEY = struct.Struct("<QI4x")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def _c_int(expr: str) -> int:
    """The value of a constant like ``(1U << 3)``, ``0x04`` or ``8``."""
    expr = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", expr.strip().strip("()").strip())
    if "<<" in expr:
        a, b = expr.split("<<")
        return _c_int(a) << _c_int(b)
    return int(expr.strip("() "), 0)


def parse_print_flags(fmt_text: str) -> dict[int, str]:
    """bit -> name from the ``__print_flags(...)`` of a tracepoint's print fmt."""
    m = re.search(r"__print_flags\((.*)\)", fmt_text)
    if not m:
        return {}
    return {_c_int(v): name for v, name in re.findall(r"\{\s*([^,{}]+?)\s*,\s*\"([^\"]+)\"\s*\}", m.group(1))}


def flag_names(flags: int, names: dict[int, str]) -> str:
    """``SPIN|WRITE``, as __print_flags joins them (unknown bits in hex)."""
    parts = [n for bit, n in names.items() if flags & bit]
    rest = flags & ~sum(names)
    if rest:
        parts.append(hex(rest))
    return "|".join(parts)


class LockContention(Tool):
    name = "lock-contention"
    description = "kernel lock contention: log2 histogram of long blocks per lock address"
    object = "lock_contention"
    methods = (
        Method("tp_btf/contention_{begin,end}", ("tp_btf_begin", "tp_btf_end"), "tp_btf"),
        Method("tracepoint/lock/contention_{begin,end}", ("tp_begin", "tp_end"), "tracepoint"),
    )

    options = (
        Option("threshold", float, 100.0, "only blocks of at least this many microseconds (default 100)",
               metavar="US", check=lambda us: "is negative" if us < 0 else None),
        Option("flags", bool, help="key the histograms by lock address and lock kind (SPIN, MUTEX, ...)"),
    )

    def configure(self, obj, method: Method) -> None:
        obj.globals["threshold_ns"] = int(self.args.threshold * 1000)

    def histograms(self, obj) -> dict[int, dict[int, int]]:
        """lock address -> {log2 bucket: count}, read from the ``hist`` map."""
        out: dict[int, dict[int, int]] = {}
        for k, v in obj.maps["hist"].items_raw():
            lock, slot = _HIST_KEY.unpack(k)
            out.setdefault(lock, {})[slot] = _U64.unpack(v)[0]
        return out

    def lock_flags(self, obj) -> dict[int, int]:
        return {_U64.unpack(k)[0]: _U32.unpack(v)[0] for k, v in obj.maps["lock_flags"].items_raw()}

    def _names(self) -> dict[int, str]:
        try:
            with open(FORMAT) as f:
                return parse_print_flags(f.read()) or DEFAULT_FLAGS
        except OSError:
            return DEFAULT_FLAGS

    def summary(self, obj) -> str:
        hists = self.histograms(obj)
        if not hists:
            return ""
        from pycore.hist import log2_hist

        flags = self.lock_flags(obj) if self.args.flags else {}
        names = self._names() if flags else {}
        # bpftrace prints hist maps in increasing order of their total count
        order = sorted(hists, key=lambda lock: (sum(hists[lock].values()), lock))
        parts = []
        for lock in order:
            key = f"{lock:#x}"
            if self.args.flags:
                key += ", " + flag_names(flags.get(lock, 0), names)
            parts.append(log2_hist(hists[lock], f"@[{key}]"))
        return "\n" + "".join(parts)

    def summary_json(self, obj) -> dict[str, Any]:

        hists = self.histograms(obj)
        flags = self.lock_flags(obj)
        names = self._names() if flags else {}
        return {"long_block_times": [
            {"lock": f"{lock:#x}", "flags": flag_names(flags.get(lock, 0), names),
             "buckets": {str(0 if s < 2 else 1 << (s - 2)): n for s, n in sorted(h.items())}}
            for lock, h in sorted(hists.items())]}


TOOL = LockContention
