"""A running script's maps as Prometheus metrics, read from the kernel when scraped.

:class:`ScriptCollector` is a ``prometheus_client`` collector over one
:class:`~pycore.lang.runtime.Script`: each scrape reads every map (no
interval printing, no text to parse) and writes it as docs/serve.md says:
``count()``/``sum()`` a counter, ``min()``/``max()``/an assignment a gauge,
``avg()``/``stats()`` a summary without quantiles (``_sum``, ``_count``),
``hist()``/``lhist()`` a histogram whose ``le`` are bpftrace's bucket
bounds.  Labels come from the map's key, named from its expression, or from
a ``// @map: help="..." labels=a,b`` comment line.  Here, not in
``pycore.embed``, so that :meth:`TraceSession.collector` (this layer) can
hand one to an agent.
"""

from __future__ import annotations

import re
import struct
import threading
from operator import add

from prometheus_client.registry import Collector

from pycore.lang import ast as A
from pycore.lang.types import Int, Ptr, Stack, Str, Tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from pycore.lang.runtime import Script

__all__ = ["ScriptCollector", "MapMetric", "metric_plans", "parse_annotations", "label_value", "sample_names",
           "hist_buckets", "DEFAULT_SERIES_LIMIT", "AnnotationError", "Family", "families_of", "families_text"]

#: Series (samples) one script may export per scrape; what is beyond is cut and counted.
DEFAULT_SERIES_LIMIT = 10_000
#: A label value longer than this is cut (and ends with "...").
LABEL_VALUE_MAX = 512

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_OK = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_OK = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ANNOTATION = re.compile(r"^\s*//\s*@([A-Za-z0-9_]*)\s*:(.*)$")
_OPTION = re.compile(r'\s*([a-z]+)=("(?:[^"\\]|\\.)*"|[^"\s]\S*)')
#: functions whose label is named after their argument: str(args.filename) -> filename
_TRANSPARENT = frozenset({"str", "ntop", "ksym", "usym", "kaddr", "uaddr", "buf", "macaddr", "cgroup_path",
                          "strftime", "path", "reg", "pton"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_U64 = struct.Struct("<Q")

#: A counter or gauge family as rows, read once and written either way (:func:`families_of`,
#: :func:`families_text`): (name, a counter's without ``_total``; "counter" or "gauge"; help; label
#: names; one (label values, value) a sample).
Family = tuple[str, str, str, tuple[str, ...], list[tuple[list[str], float]]]


class AnnotationError(ValueError):
    """A ``// @map:`` comment line pycore cannot read (line number in the message)."""


def sanitize_name(text: str) -> str:
    """A metric name part: every character outside [a-zA-Z0-9_] becomes ``_``."""
    return _NAME_BAD.sub("_", text)


def parse_annotations(text: str) -> dict[str, dict[str, Any]]:
    """``// @map: help="..." labels=a,b name=metric`` lines: {"@map": {"help": ..., "labels": [...], "name": ...}}."""
    out: dict[str, dict[str, Any]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _ANNOTATION.match(line)
        if not m:
            continue
        opts: dict[str, Any] = {}
        rest = m.group(2)
        pos = 0
        while rest[pos:].strip():
            o = _OPTION.match(rest, pos)
            if not o:
                raise AnnotationError(f"line {lineno}: expected help=\"...\", labels=a,b or name=NAME, "
                                      f"found {rest[pos:].strip()!r}")
            key, value = o.group(1), o.group(2)
            pos = o.end()
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            if key == "help":
                opts["help"] = value
            elif key == "labels":
                labels = [x for x in value.split(",") if x]
                bad = [x for x in labels if not _LABEL_OK.fullmatch(x) or x.startswith("__") or x in ("le", "quantile")]
                if bad or len(set(labels)) != len(labels):
                    raise AnnotationError(f"line {lineno}: labels={value}: label names are distinct "
                                          f"[a-zA-Z_][a-zA-Z0-9_]* (not le, quantile or __...)")
                opts["labels"] = labels
            elif key == "name":
                if not _METRIC_OK.fullmatch(value):
                    raise AnnotationError(f"line {lineno}: name={value}: not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
                opts["name"] = value
            else:
                raise AnnotationError(f"line {lineno}: unknown option {key}= (help, labels, name)")
        out["@" + m.group(1)] = opts
    return out


def _expr_name(e: Any) -> str | None:
    """The label name a key expression gives: comm, pid, str(args.filename) -> filename, $x -> x."""
    while True:
        if isinstance(e, A.Builtin):
            return e.name
        if isinstance(e, A.Var):
            return e.name.lstrip("$")
        if isinstance(e, A.Field):
            return e.name
        if isinstance(e, A.Cast):
            e = e.expr
            continue
        if isinstance(e, A.Call):
            if e.name in ("kstack", "ustack"):
                return e.name
            if e.name in _TRANSPARENT and e.args and not isinstance(e.args[0], A.TypeName):
                e = e.args[0]
                continue
            return None
        return None


def _key_exprs(program: A.Program) -> dict[str, tuple[Any, ...]]:
    """The key expressions of each map's first keyed use: {"@name": (expr, ...)}."""
    out: dict[str, tuple[Any, ...]] = {}
    for block in program.probes:
        for node in A.walk(block):
            if isinstance(node, A.MapRef) and node.keys and "@" + node.name not in out:
                out["@" + node.name] = node.keys
    return out


def _key_names(exprs: tuple[Any, ...], types: tuple[Any, ...]) -> list[str]:
    """One label name per key element (a tuple key's elements flattened); key0, key1... where the
    expression gives none or a name twice."""
    names: list[str | None] = []
    for i, t in enumerate(types):
        e = exprs[i] if i < len(exprs) else None
        if isinstance(t, Tuple) and not isinstance(t, Stack):
            elems = e.elems if isinstance(e, A.Tuple) and len(e.elems) == len(t.elems) else (None,) * len(t.elems)
            names.extend(_expr_name(x) if x is not None else None for x in elems)
        else:
            names.append(_expr_name(e) if e is not None else None)
    out: list[str] = []
    for i, n in enumerate(names):
        if n is not None:
            n = sanitize_name(n)
        if not n or not _LABEL_OK.fullmatch(n) or n.startswith("__") or n in ("le", "quantile") or n in out:
            n = f"key{i}"
        out.append(n)
    return out


def label_value(v: Any, t: Any = None) -> str:
    """A key element as a label value: integers in decimal, pointers in hex (as map keys print), strings
    as they are (control characters as \\xNN, cut at LABEL_VALUE_MAX), a stack folded root first
    (``a;b;c``), bytes in hex."""
    if isinstance(t, Stack) or (t is None and isinstance(v, tuple) and all(isinstance(f, str) for f in v)):
        if isinstance(v, str):     # perf mode: one frame a line, leaf first
            v = tuple(f.strip() for f in v.splitlines() if f.strip())
        text = ";".join(reversed(v)) if v else "[unknown]"
    elif isinstance(t, Ptr):
        text = f"0x{int(v) & 0xFFFF_FFFF_FFFF_FFFF:x}"
    elif isinstance(v, bool):
        text = str(int(v))
    elif isinstance(v, (bytes, bytearray)):
        text = bytes(v).hex()
    else:
        text = str(v)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(text) > LABEL_VALUE_MAX:
        text = text[:LABEL_VALUE_MAX - 3] + "..."
    return text


def hist_buckets(counts: dict[int, int], lhist: tuple[int, int, int] | None) -> list[tuple[str, int]]:
    """Cumulative ``(le, count)`` of one bpftrace hist()/lhist() ({bucket index: count}), +Inf last.

    The values are integers, so bucket ``[lo, hi)`` is every value ``<= hi - 1``: hist()'s ``le`` are
    -1 (negatives, only once one was seen), 0, 1, 3, 7, ... 2^k - 1.  The buckets run from the first
    (0, or the negatives' once used) to the highest one used, so a series never goes back down.
    """
    from pycore.hist import linear_bounds, log2_bounds

    used = [i for i, c in counts.items() if c]
    top = max(used) if used else 1
    start = 0 if counts.get(0) else 1
    out: list[tuple[str, int]] = []
    total = 0
    last = (lhist[1] - lhist[0]) // lhist[2] + 1 if lhist else None
    for i in range(start, top + 1):
        total += counts.get(i, 0)
        hi = (linear_bounds(i, *lhist) if lhist else log2_bounds(i))[1]
        if hi is None or i == last:
            break
        out.append((str(hi - 1), total))
    total = sum(counts.values())
    out.append(("+Inf", total))
    return out


class MapMetric:
    """How one map is exported: metric name, type, label names, help."""

    def __init__(self, map_name: str, metric: str, mtype: str, labels: list[str], help_text: str,
                 key_types: tuple[Any, ...], value_label: bool = False) -> None:
        self.map_name = map_name
        self.metric = metric
        self.type = mtype            # counter, gauge, summary, histogram, or "" (not exported)
        self.labels = labels
        self.help = help_text
        self.key_types = key_types
        self.value_label = value_label   # a string value: a gauge of 1 with the value as label "value"


def metric_plans(script: Script, name: str) -> tuple[list[MapMetric], list[str]]:
    """Each map of a loaded script with its metric; and a note for each map not exported (why)."""
    assert script.layout is not None, "a loaded script"
    script_annotations = parse_annotations(script.text)
    exprs = _key_exprs(script.program)
    prefix = f"pycore_script_{sanitize_name(name)}_"
    plans: list[MapMetric] = []
    notes: list[str] = []
    taken: set[str] = set()
    for map_name in sorted(script.layout.maps):
        m = script.layout.maps[map_name]
        ann = script_annotations.get(map_name, {})
        key_types = tuple(m.keys or ())
        labels = _key_names(exprs.get(map_name, ()), key_types)
        if "labels" in ann:
            if len(ann["labels"]) != len(labels):
                notes.append(f"{map_name}: labels={','.join(ann['labels'])} names {len(ann['labels'])} labels, "
                             f"its key has {len(labels)}: the key's own names are used")
            else:
                labels = list(ann["labels"])
        metric = ann.get("name") or prefix + (sanitize_name(map_name[1:]) or "map")
        kind = m.kind
        value_label = False
        if kind in ("count", "sum"):
            mtype = "counter"
        elif kind in ("min", "max"):
            mtype = "gauge"
        elif kind in ("avg", "stats"):
            mtype = "summary"
        elif kind in ("hist", "lhist"):
            mtype = "histogram"
        elif kind == "tseries":
            notes.append(f"{map_name}: a tseries() map is not exported (Prometheus keeps the series: export "
                         f"the value as a map, @m = v, and let it scrape)")
            continue
        elif kind == "int" and (isinstance(m.value, Int) and not m.value.display or isinstance(m.value, Ptr)):
            mtype = "gauge"     # a pointer value too, as before maps kept pointers' types: its address
        elif kind == "str" or (kind == "int" and isinstance(m.value, (Int, Str))):
            mtype, value_label = "gauge", True
            if "value" in labels:
                labels = [f"key{i}" if x == "value" else x for i, x in enumerate(labels)]
        else:
            notes.append(f"{map_name}: a map of {m.value} values is not exported (numbers and strings are)")
            continue
        what = f"{kind}() map" if kind not in ("int", "str") else "map"
        help_text = ann.get("help") or f"{what} {map_name} of script {name}"
        if mtype == "counter" and metric.endswith("_total"):
            metric = metric[:-6]
        names = sample_names(metric, mtype)
        clash = names & (taken | _RESERVED_NAMES)
        if clash:
            notes.append(f"{map_name}: not exported: its {min(clash)} is another metric's name "
                         "(rename it with // " + map_name + ": name=...)")
            continue
        taken |= names
        plans.append(MapMetric(map_name, metric, mtype, labels, help_text, key_types, value_label))
    return plans, notes


#: the families pycore itself writes beside a script's maps
RESERVED = frozenset({
    "pycore_script_up", "pycore_script_info", "pycore_script_log_lines_total", "pycore_script_log_dropped_total",
    "pycore_script_map_keys", "pycore_script_map_max_keys", "pycore_script_map_keys_refused_total",
    "pycore_script_series", "pycore_script_series_cut_total",
    "pycore_script_lost_events_total", "pycore_script_probe_runs_total", "pycore_script_probe_run_time_seconds_total",
})
# and the names OpenMetrics gives pycore's own counters: the family without _total, its _created
_RESERVED_NAMES = RESERVED | {n[:-6] + x for n in RESERVED if n.endswith("_total") for x in ("", "_created")}


def sample_names(metric: str, mtype: str) -> set[str]:
    """The names a family's samples (and its own name) take, which no other family may."""
    # _created: OpenMetrics keeps it for a counter's, summary's or histogram's creation time
    suffixes = {"counter": ("_total", "", "_created"), "summary": ("", "_count", "_sum", "_created"),
                "histogram": ("", "_bucket", "_count", "_sum", "_created")}.get(mtype, ("",))
    return {metric + x for x in suffixes}


class ScriptCollector(Collector):
    """``prometheus_client`` collector of one running script's maps and health (``register`` it).

    ``lock``, when given, is held while reading (whoever closes the script holds it too).
    :meth:`collect` gives ``prometheus_client`` families (an agent's registry); ``pycore serve``
    writes the maps' exposition text directly (:meth:`maps_text`, the same samples at a fraction
    of the cost) and the health families' too (:meth:`health_rows` and :func:`families_text`).
    """

    def __init__(self, script: Script, name: str, *, series_limit: int = DEFAULT_SERIES_LIMIT,
                 lock: threading.Lock | None = None, probes: bool = True) -> None:
        self.script = script
        self.name = name
        self.series_limit = series_limit
        self.lock = lock or threading.Lock()
        self.probes = probes
        self.plans, self.notes = metric_plans(script, name)
        self.cut_total = 0
        self.series = 0                        # exported at the last read
        self.keys: dict[str, int] = {}         # map -> keys at the last read
        # map -> {key bytes: (label values, label text)}: keys decoded once while they stay in the map
        self._labels: dict[str, dict[bytes | int, tuple[list[str], str]]] = {}

    def describe(self) -> list[Any]:
        return []       # families vary with the maps' contents: registered unchecked (auto_describe off)

    def collect(self) -> Iterator[Any]:
        with self.lock:
            if self.script._closed:
                return
            read = self._read()
            health = self._health()
        yield from _families(read) + families_of(health)

    def maps_text(self, openmetrics: bool = False) -> str:
        """The maps' families in the Prometheus text format (0.0.4), as :meth:`collect` gives them
        (``openmetrics``: in OpenMetrics 1.0, without the ``# EOF`` that ends the whole exposition)."""
        with self.lock:
            if self.script._closed:
                return ""
            return _text(self._read(), openmetrics)

    def health(self) -> Iterator[Any]:
        """The health families (keys, series, cuts, lost events, probe statistics) of the last read."""
        yield from families_of(self.health_rows())

    def health_rows(self) -> list[Family]:
        """:meth:`health`'s families as rows (:data:`Family`), for :func:`families_text` to write
        (pycore serve) or :func:`families_of` to make prometheus_client families of."""
        with self.lock:
            if self.script._closed:
                return []
            return self._health()

    def _read(self) -> list[tuple[MapMetric, list[tuple[list[str], str]], list[Any]]]:
        """Each map's rows as two columns, within the series limit: (label values, label text) and
        the value (a hist's cumulative buckets); what is beyond the limit is counted in cut_total."""
        layout = self.script.layout
        assert layout is not None
        left = self.series_limit
        cut = 0
        out = []
        for p in self.plans:
            m = layout.maps[p.map_name]
            heads, values = self._entries(p)
            self.keys[p.map_name] = len(heads)
            if p.type == "histogram":
                lhist = m.lhist if m.kind == "lhist" else None
                kept_heads, kept = [], []
                for head, counts in zip(heads, values):
                    buckets = hist_buckets(counts, lhist)
                    if len(buckets) > left:
                        cut += len(buckets)
                        continue
                    left -= len(buckets)
                    kept_heads.append(head)
                    kept.append(buckets)
                heads, values = kept_heads, kept
            else:           # as many series a row: the first rows that fit, by slicing
                n = 2 if p.type == "summary" else 1
                keep = min(len(heads), left // n)
                if keep < len(heads):
                    cut += (len(heads) - keep) * n
                    heads, values = heads[:keep], values[:keep]
                left -= keep * n
            out.append((p, heads, values))
        self.cut_total += cut
        self.series = self.series_limit - left
        return out

    def _entries(self, p: MapMetric) -> tuple[list[tuple[list[str], str]], list[Any]]:
        """(label values, label text) and value of every key of one map, as two columns in the
        kernel's order, read with one batch syscall per chunk (RawMap.items_packed).

        Speed (bench/bench_serve.py, a 10,000-key count() map: 30 ms a scrape before, ~6 ms now, of
        which the kernel's batch read is half): the values are decoded a column at a time
        (_cpu_sums), not a key at a time; a key's labels are decoded once, then found by its bytes
        (one dict lookup a key, in C: map(cache.get)), or by its integer where the key is 8 bytes
        (one cast of the keys' buffer instead of 10,000 slices, and ints hash for free).
        """
        script = self.script
        assert script.layout is not None
        m = script.layout.maps[p.map_name]
        mp = script._maps.get(p.map_name)
        if mp is None:
            return [], []
        n, kblob, vblob = mp.items_packed()
        size, full = m.key_size, mp.key_size
        vsize = mp.stride * mp.ncpus if mp.percpu else mp.value_size     # one key's value buffer
        kind = m.kind
        values: list[Any]
        heads: list[Any]
        if size == full == 8:
            keys: list[Any] = memoryview(kblob).cast("Q").tolist()
            raw_key = lambda i: kblob[i * 8:i * 8 + 8]  # noqa: E731
        else:
            keys = [kblob[i:i + size] for i in range(0, n * full, full)]
            raw_key = keys.__getitem__
        if kind in ("hist", "lhist"):
            hists: dict[bytes, dict[int, int]] = {}      # key -> {bucket: count}; the bucket ends the map's key
            totals = _cpu_sums(vblob, mp.ncpus, mp.stride // 8, 0)
            for i, raw in enumerate(keys):
                hists.setdefault(raw, {})[_U64.unpack_from(kblob, i * full + size)[0]] = totals[i]
            keys, values = list(hists), list(hists.values())
            raw_key = keys.__getitem__
        elif kind in ("count", "sum"):       # as Script._combine adds them, a column at a time
            values = _cpu_sums(vblob, mp.ncpus, mp.stride // 8, 0)
        elif kind in ("avg", "stats"):       # (count, total)
            values = list(zip(_cpu_sums(vblob, mp.ncpus, 2, 0), _cpu_sums(vblob, mp.ncpus, 2, 1)))
        elif mp.percpu:                      # min(), max()
            stride, vs = mp.stride, mp.value_size
            values = [script._combine(m, [vblob[j:j + vs] for j in range(i, i + vsize, stride)])
                      for i in range(0, n * vsize, vsize)]
        else:
            values = [script._combine(m, [vblob[i:i + vsize]]) for i in range(0, n * vsize, vsize)]
        # labels cached by key bytes, unless they may read differently later (stacks: an id's frames can
        # be replaced; symbols, user and cgroup names: looked up as of now)
        cacheable = all(type(t) in (Int, Ptr, Str) and not getattr(t, "display", "") for t in p.key_types)
        if not cacheable:
            heads = [self._label(p, script._key(raw_key(i), m)) for i in range(len(keys))]
        else:
            cache = self._labels.setdefault(p.map_name, {})
            heads = list(map(cache.get, keys))
            if None in heads:
                for i, head in enumerate(heads):
                    if head is None:
                        heads[i] = cache[keys[i]] = self._label(p, script._key(raw_key(i), m))
            if len(cache) > 2 * len(keys) + 64:  # keys gone from the map: keep the labels of those there now
                self._labels[p.map_name] = dict(zip(keys, heads))
        if mp.batch_used is False and len(set(keys)) < len(keys):
            # key by key, a walk restarts when its key is deleted meanwhile and sees keys again: the last wins
            latest = dict(zip(keys, zip(heads, values)))
            heads, values = [h for h, _ in latest.values()], [v for _, v in latest.values()]
        return heads, values

    def _label(self, p: MapMetric, key: tuple[Any, ...]) -> tuple[list[str], str]:
        labels = [label_value(v, t) for v, t in _flatten(key, p.key_types)]
        if len(labels) != len(p.labels):
            labels = labels[:len(p.labels)] + [""] * (len(p.labels) - len(labels))
        return labels, ",".join(f'{n}="{_escape(v)}"' for n, v in zip(p.labels, labels))

    def _health(self) -> list[Family]:
        name, script = self.name, self.script
        rows: list[Family] = [
            ("pycore_script_map_keys", "gauge", "keys in each map of the script now "
             "(a map holds at most pycore_script_map_max_keys)", ("script", "map"),
             [([name, map_name], n) for map_name, n in self.keys.items()])]
        lost, refused = script.counters()
        rows.append(("pycore_script_map_max_keys", "gauge", "keys a map of the script can hold "
                     "(pycore serve --map-keys-max)", ("script", "map"),
                     [([name, map_name], script.map_keys) for map_name in refused]))
        rows.append(("pycore_script_map_keys_refused", "counter", "updates of a new key a map of the "
                     "script refused because it was full", ("script", "map"),
                     [([name, map_name], n) for map_name, n in refused.items()]))
        rows.append(("pycore_script_series", "gauge", "series the script's maps exported at this scrape",
                     ("script",), [([name], self.series)]))
        rows.append(("pycore_script_series_cut", "counter", "series left out of scrapes because the "
                     "script reached its series limit (summed over scrapes)", ("script",), [([name], self.cut_total)]))
        rows.append(("pycore_script_lost_events", "counter", "printf and other events the script's "
                     "ring buffer had no room for", ("script",), [([name], lost)]))
        if self.probes:
            rows += self._probe_stats(name)
        return rows

    def _probe_stats(self, name: str) -> list[Family]:
        """Run count and run time of each probe's program (the kernel counts while BPF stats are on)."""
        from pycore.native.progstats import prog_stats

        per: dict[str, list[int]] = {}
        for c in self.script.compiled:
            prog = getattr(c, "prog", None)
            if prog is None:
                continue
            try:
                st = prog_stats(prog.fd)
            except OSError:
                continue
            row = per.setdefault(c.target.probe, [0, 0])
            row[0] += st.run_cnt
            row[1] += st.run_time_ns
        probes = sorted(per.items())
        return [("pycore_script_probe_runs", "counter", "times the kernel ran the probe's BPF "
                 "program (counted while BPF stats are on)", ("script", "probe"),
                 [([name, probe], n) for probe, (n, _) in probes]),
                ("pycore_script_probe_run_time_seconds", "counter", "time spent in the probe's BPF "
                 "program (counted while BPF stats are on)", ("script", "probe"),
                 [([name, probe], ns / 1e9) for probe, (_, ns) in probes])]


def _flatten(key: tuple[Any, ...], types: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """(value, type) per label: a tuple-typed key element gives one per element."""
    out: list[tuple[Any, Any]] = []
    for i, v in enumerate(key):
        t = types[i] if i < len(types) else None
        if isinstance(t, Tuple) and not isinstance(t, Stack) and isinstance(v, tuple):
            out.extend(zip(v, t.elems))
        else:
            out.append((v, t))
    return out


def _cpu_sums(values: bytes, ncpus: int, words: int, word: int) -> list[int]:
    """Per key, the sum over the CPUs of 64-bit signed word ``word`` of each CPU's ``words``-word slot:
    ``values`` is a per-CPU map's value buffers back to back (RawMap.items_packed).

    A column at a time: the CPUs' columns are strided views of one buffer, added with numpy when it
    is installed and the map is big (10,000 keys on 2 CPUs: 0.25 ms, 0.5 ms with map(add); with 64
    CPUs numpy's one pass is what keeps a scrape in milliseconds), else with map(add) column by column.
    """
    step = ncpus * words
    if len(values) >= _NUMPY_BYTES:
        np = _numpy()
        if np is not None:
            return np.frombuffer(values, "=i8").reshape(-1, step)[:, word::words].sum(axis=1).tolist()
    column = memoryview(values).cast("q")
    total = column[word::step].tolist()
    for cpu in range(1, ncpus):
        total = list(map(add, total, column[cpu * words + word::step].tolist()))
    return total


#: below this many bytes of values, numpy's call overhead is more than it saves (and it is not imported)
_NUMPY_BYTES = 1 << 15
_np: Any = False


def _numpy() -> Any:
    """numpy (the optional extra pycore-bpf[numpy]) once imported, or None without it."""
    global _np
    if _np is False:
        try:
            import numpy
            _np = numpy
        except ImportError:
            _np = None
    return _np


def _escape(v: str) -> str:
    """A label value as prometheus_client escapes it: backslash, newline and double quote (a map key's
    label_value() has written newlines as \\xNN already)."""
    if "\\" in v or '"' in v or "\n" in v:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return v


def _head(family: str, mtype: str, help_text: str, openmetrics: bool) -> str:
    """A family's ``# HELP`` and ``# TYPE`` lines (``family``: a counter's name without ``_total``),
    HELP escaped as prometheus_client does; the text format names a counter's family with ``_total``."""
    help_text = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    if openmetrics:
        help_text = help_text.replace('"', '\\"')
    elif mtype == "counter":
        family += "_total"
    return f"# HELP {family} {help_text}\n# TYPE {family} {mtype}\n"


def _families(read: list[tuple[MapMetric, list[tuple[list[str], str]], list[Any]]]) -> list[Any]:
    """prometheus_client families of :meth:`ScriptCollector._read`'s rows."""
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                        SummaryMetricFamily)

    out: list[Any] = []
    for p, heads, values in read:
        if p.type == "counter":
            fam: Any = CounterMetricFamily(p.metric, p.help, labels=p.labels)
        elif p.type == "summary":
            fam = SummaryMetricFamily(p.metric, p.help, labels=p.labels)
        elif p.type == "histogram":
            fam = HistogramMetricFamily(p.metric, p.help, labels=p.labels)
        else:
            fam = GaugeMetricFamily(p.metric, p.help, labels=p.labels + (["value"] if p.value_label else []))
        for (labels, _), value in zip(heads, values):
            if p.type == "histogram":
                fam.add_metric(labels, value, None)
            elif p.type == "summary":
                fam.add_metric(labels, value[0], value[1])
            elif p.value_label:
                fam.add_metric(labels + [label_value(value)], 1)
            else:
                fam.add_metric(labels, value)
        out.append(fam)
    return out


def _text(read: list[tuple[MapMetric, list[tuple[list[str], str]], list[Any]]], openmetrics: bool = False) -> str:
    """The text format (0.0.4) of :meth:`ScriptCollector._read`'s rows, the samples prometheus_client
    writes for :func:`_families` (integers without '.0'), written directly: a fifth of its time.
    ``openmetrics``: OpenMetrics 1.0 (a counter's family named without ``_total``, '"' escaped in
    HELP; the same samples, ``le`` as in the text format so Prometheus keeps the same series)."""
    lines: list[str] = []
    add = lines.append
    for p, heads, values in read:
        family = p.metric.removesuffix("_total") if p.type == "counter" else p.metric
        name = family + "_total" if p.type == "counter" else family
        add(_head(family, p.type, p.help, openmetrics))
        # a map's samples in one join of one list comprehension, not a string (and a call) per row;
        # the label text is "" exactly when the map has no key (p.labels is empty)
        if p.type == "histogram":
            for (_, text), buckets in zip(heads, values):
                pre = f"{name}_bucket{{{text}," if text else f"{name}_bucket{{"
                add("".join([f'{pre}le="{le}"}} {n}\n' for le, n in buckets]))
        elif p.type == "summary":
            braced = "{%s}" if p.labels else "%.0s"
            add("".join([f"{name}_count{b} {count}\n{name}_sum{b} {total}\n"
                         for b, (count, total) in zip([braced % text for _, text in heads], values)]))
        elif p.value_label:
            for (_, text), value in zip(heads, values):
                v = f'value="{_escape(label_value(value))}"'
                add(f"{name}{{{text},{v}}} 1\n" if text else f"{name}{{{v}}} 1\n")
        elif p.labels:
            add("".join([f"{name}{{{text}}} {value}\n" for (_, text), value in zip(heads, values)]))
        else:
            add("".join([f"{name} {value}\n" for value in values]))
    return "".join(lines)


def families_of(rows: list[Family]) -> list[Any]:
    """prometheus_client families of :data:`Family` rows (an agent's registry, ``collect()``)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    out: list[Any] = []
    for name, mtype, help_text, labels, samples in rows:
        fam = (CounterMetricFamily if mtype == "counter" else GaugeMetricFamily)(name, help_text, labels=labels)
        for values, value in samples:
            fam.add_metric(values, value)
        out.append(fam)
    return out


def families_text(rows: list[Family], openmetrics: bool = False) -> str:
    """:data:`Family` rows in the text format (0.0.4), or OpenMetrics 1.0 without its ``# EOF``: the
    bytes prometheus_client's ``generate_latest`` writes for :func:`families_of` of the same rows
    (labels sorted by name, values as Go writes floats, label values and HELP escaped as it does).

    Speed (bench/bench_serve.py, pycore serve with 20 scripts: ~300 health samples a scrape): one
    f-string a sample and one join, without prometheus_client's Metric and Sample objects, the
    label dict made and sorted per sample and its per-sample format calls: each family's label order
    is worked out once, and an integer below 10^6 (most health values) is written without float().
    """
    lines: list[str] = []
    add = lines.append
    for name, mtype, help_text, labels, samples in rows:
        sample = name + "_total" if mtype == "counter" else name
        add(_head(name, mtype, help_text, openmetrics))
        if not labels:
            add("".join([f"{sample} {_go(value)}\n" for _, value in samples]))
            continue
        order = sorted(range(len(labels)), key=labels.__getitem__)
        if len(labels) == 1:
            pre = f'{sample}{{{labels[0]}="'
            add("".join([f'{pre}{_escape(values[0])}"}} {_go(value)}\n' for values, value in samples]))
            continue
        pairs = [(f'{labels[i]}="', i) for i in order]
        add("".join([sample + "{" + ",".join([n + _escape(values[i]) + '"' for n, i in pairs])
                     + f"}} {_go(value)}\n" for values, value in samples]))
    return "".join(lines)


def _go(value: float) -> str:
    """A sample's value as prometheus_client writes it (floatToGoString): ``3.0``, ``1.5e+07``."""
    if type(value) is int and -1_000_000_000_000_000 < value < 1_000_000:
        return f"{value}.0"            # repr(float(value)), which Go would not write with an exponent
    from prometheus_client.utils import floatToGoString

    return floatToGoString(value)
