"""The map -> metric rules of pycore/lang/metrics.py on their own, fuzzed where they read text.

``// @map:`` comment lines come from script files (root's, but typed by people): any text must
give a result or one :class:`AnnotationError` line, never another exception.  Label values must
come out as text Prometheus stores as is (no control characters, bounded).  The histogram rule is
checked against what ``le`` means to Prometheus (values <= le), for values run through bpftrace's
own bucket functions (pycore.hist, the functions pycore's BPF code mirrors).
"""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("prometheus_client")

from pycore.hist import linear_bucket, log2_bucket  # noqa: E402
from pycore.lang.metrics import (LABEL_VALUE_MAX, AnnotationError, hist_buckets, label_value,  # noqa: E402
                                 parse_annotations)

FUZZ = settings(max_examples=400, deadline=2000, derandomize=True)


def test_annotations_read():
    text = ('// @opens: help="files \\"opened\\"" labels=command,file\n'
            "BEGIN { }\n//@: name=my_total\n  // @lat : help=plain\n")
    assert parse_annotations(text) == {"@opens": {"help": 'files "opened"', "labels": ["command", "file"]},
                                       "@": {"name": "my_total"}, "@lat": {"help": "plain"}}


@pytest.mark.parametrize("line, says", [
    ("// @a: labels=le", "line 1: labels=le"),
    ("// @a: labels=x,x", "distinct"),
    ("// @a: labels=__x", "labels=__x"),
    ("// @a: name=9bad", "not a metric name"),
    ("// @a: colour=red", "unknown option colour="),
    ("// @a: help=", "expected help="),
    ('// @a: help="open', "expected help="),
])
def test_annotation_errors(line, says):
    with pytest.raises(AnnotationError, match=re.escape(says)):
        parse_annotations(line)


@FUZZ
@given(st.text(max_size=200))
def test_annotations_fuzzed(tail):
    try:
        got = parse_annotations("// @m:" + tail + "\n// @n: " + tail)
    except AnnotationError as e:
        assert str(e).startswith("line ") and "\n" not in str(e)
        return
    for opts in got.values():
        assert set(opts) <= {"help", "labels", "name"}
        for name in opts.get("labels", ()):
            assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) and name not in ("le", "quantile")


@FUZZ
@given(st.one_of(st.text(max_size=2000), st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1),
                 st.binary(max_size=100), st.tuples(st.text(max_size=50), st.text(max_size=50))))
def test_label_values_fuzzed(v):
    text = label_value(v)
    assert isinstance(text, str) and len(text) <= LABEL_VALUE_MAX
    assert not re.search(r"[\x00-\x1f\x7f]", text)
    if isinstance(v, int):
        assert text == str(v)


def test_stack_folded_root_first():
    assert label_value(("leaf+1", "mid+2", "root+3")) == "root+3;mid+2;leaf+1"
    assert label_value(()) == "[unknown]"


def _prometheus_counts(values: list[int], les: list[str]) -> list[int]:
    return [sum(1 for v in values if le == "+Inf" or v <= int(le)) for le in les]


@FUZZ
@given(st.lists(st.integers(min_value=-(1 << 40), max_value=1 << 40), min_size=1, max_size=50))
def test_hist_le_means_what_prometheus_reads(values):
    counts: dict[int, int] = {}
    for v in values:
        counts[log2_bucket(v)] = counts.get(log2_bucket(v), 0) + 1
    got = hist_buckets(counts, None)
    les = [le for le, _ in got]
    assert les[-1] == "+Inf" and [n for _, n in got] == _prometheus_counts(values, les)
    assert all(int(le) + 1 == 0 or (int(le) + 1) & int(le) == 0 for le in les[:-1])   # 2^k - 1 (and -1)


@FUZZ
@given(st.lists(st.integers(min_value=-100, max_value=3000), min_size=1, max_size=50),
       st.integers(min_value=-50, max_value=50), st.integers(min_value=1, max_value=2000),
       st.integers(min_value=1, max_value=400))
def test_lhist_le_means_what_prometheus_reads(values, lo, span, step):
    hi = lo + span
    counts: dict[int, int] = {}
    for v in values:
        b = linear_bucket(v, lo, hi, step)
        counts[b] = counts.get(b, 0) + 1
    got = hist_buckets(counts, (lo, hi, step))
    les = [le for le, _ in got]
    assert les[-1] == "+Inf" and [n for _, n in got] == _prometheus_counts(values, les)


def test_clashing_names_are_left_out_with_a_note():
    """Two maps whose samples would share a name (@x's pycore_..._x_total and @x_total's), or a map
    named like pycore's own families, would make an exposition Prometheus refuses: the later map is
    not exported and a note says why (the script still runs)."""
    from pycore.lang.metrics import metric_plans
    from pycore.lang.runtime import Script

    script = Script("BEGIN { @x = count(); @x_total = count(); @h = hist(1); @h_bucket = 2; @keys = count(); "
                    "@ok = 1; }")
    script.check()
    plans, notes = metric_plans(script, "s")
    assert [p.map_name for p in plans] == ["@h", "@keys", "@ok", "@x"]
    assert len(notes) == 2 and any("@h_bucket" in n for n in notes) and any("@x_total" in n for n in notes)
    plans, notes = metric_plans(script, "map")   # pycore_script_map_keys is pycore's own
    assert "@keys" not in [p.map_name for p in plans]
    assert any(n.startswith("@keys: not exported: its pycore_script_map_keys") for n in notes)


def test_tseries_map_left_out_with_a_note():
    """A tseries() map is a time series already: not exported, and a note says so and what to do."""
    from pycore.lang.metrics import metric_plans
    from pycore.lang.runtime import Script

    script = Script('BEGIN { @ts = tseries(1, 1s, 10, "sum"); @n = count(); }')
    script.check()
    plans, notes = metric_plans(script, "s")
    assert [p.map_name for p in plans] == ["@n"]
    assert notes == ["@ts: a tseries() map is not exported (Prometheus keeps the series: export the value as "
                     "a map, @m = v, and let it scrape)"]


@FUZZ
@given(st.integers(1, 6), st.integers(1, 3), st.data())
def test_per_cpu_sums_numpy_and_python(ncpus, words, data):
    """_cpu_sums (a per-CPU map's values summed per key a column at a time, as a scrape reads them) adds
    what summing each key's CPUs one by one adds, with numpy (big maps) and without (small ones)."""
    np = pytest.importorskip("numpy")
    import pycore.lang.metrics as M

    keys = data.draw(st.integers(0, 40))
    vals = data.draw(st.lists(st.integers(-2**62 // 8, 2**62 // 8), min_size=keys * ncpus * words,
                              max_size=keys * ncpus * words))
    blob = struct.pack(f"={len(vals)}q", *vals)
    saved = M._NUMPY_BYTES
    try:
        for word in range(words):
            want = [sum(vals[k * ncpus * words + c * words + word] for c in range(ncpus)) for k in range(keys)]
            M._NUMPY_BYTES = 1 << 60                    # map(add), column by column
            assert M._cpu_sums(blob, ncpus, words, word) == want
            M._NUMPY_BYTES = 0                          # numpy's strided view and one sum
            assert M._numpy() is np and M._cpu_sums(blob, ncpus, words, word) == want
    finally:
        M._NUMPY_BYTES = saved
