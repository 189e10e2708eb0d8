"""``tseries(v, interval, n[, agg])`` (bpftrace 0.24; issue 30): a value kept per interval, printed as
bpftrace 0.26 charts it.

bpftrace 0.23.2 has no tseries. The charts are compared with upstream's own expected output
(tests/data/tseries: its runtime tests, which set the clock through a map); the BPF side runs here on
the host's BEGIN, interval and tracepoint probes, on both CPUs.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pycore.lang.output import tseries as T
from pycore.lang.runtime import tseries_bucket
from tests.conftest import require_root, running, stop, wait_attached
from tests.test_trace_values import PYCORE, pycore

DATA = Path(__file__).parent / "data" / "tseries"
MS = 10**6


@pytest.fixture()
def utc():
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def chart(name: str, series: dict, num: int, interval: int = 100 * MS, signed: bool = True) -> str:
    """The map as format_map prints it, each key's {epoch: value}, CLOCK_TAI = CLOCK_REALTIME."""
    from pycore.lang.output import format_map

    entries = [((k,) if k else (), s) for k, s in series.items()]
    return format_map(name, "tseries", entries, tseries=(interval, num, 0, signed))


def upstream(name: str) -> str:
    """Upstream's expected text, its hour as UTC's (its runtime tests compare without the trailing
    blank line that ends every map bpftrace prints)."""
    return (DATA / name).read_text().replace("%H", "00").rstrip("\n") + "\n\n"


@pytest.mark.parametrize("name, values", [
    ("tseries.txt", 9), ("tseries_avg.txt", 4), ("tseries_max.txt", 9), ("tseries_min.txt", 0)])
def test_one_value_a_row_as_upstream(utc, name: str, values: int) -> None:
    """Five intervals of 100 ms from 0.5 s, one value each (upstream's (uint64)i % 10 ten times an
    interval: the last 9, the average 4, the max 9, the min 0): min == max widens the scale by one
    each way, an unsigned one not below 0."""
    assert chart("@a", {"": {e: values for e in range(5, 10)}}, 5, signed=False) == upstream(name)
    if values == 0:
        assert chart("@a", {"": {9: 0}}, 5).splitlines()[1].split() == ["-1", "1"]


def test_keys_in_one_range_as_upstream(utc) -> None:
    """Two keys: the rows run over the newest key's last ten intervals, each key's from its own first
    value; an interval with none prints "-" (upstream's epoch 0 holds 0: its unused-bucket marker)."""
    text = chart("@a", {"one": {0: 0, 1: 5, 2: 5, 3: 5, 4: 5}, "two": {e: 4 for e in range(5, 10)}}, 10)
    assert text == upstream("tseries_multiple.txt")


def test_zigzag_across_zero_as_upstream(utc) -> None:
    """Negative and positive values: the zero column dotted, each point placed in float32 arithmetic."""
    values = [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4]
    assert chart("@", {"": dict(zip(range(1, 21), values))}, 20) == upstream("tseries_zigzag.txt")


def test_units_from_the_rows_spacing(utc) -> None:
    """The time column's fraction follows the rows' spacing: none for seconds, ns for a single row."""
    assert chart("@", {"": {3: 1, 4: 2}}, 2, interval=10**9).splitlines()[1:4] == [
        " " * 9 + f"{1:<21}{2:>32}", "hh:mm:ss |" + "_" * 51 + "|",
        "00:00:03 *" + " " * 51 + "| 1"]
    one = chart("@", {"": {7: -3}}, 1, interval=10**9).splitlines()
    assert one[2] == "hh:mm:ss.ns        |" + "_" * 51 + "|" and one[3].startswith("00:00:07.000000000 |")
    assert chart("@", {"": {}}, 3) == "@:\n<no data>\n"         # zero(@): no key has a value
    nulls = chart("@a", {"x": {5: 1}, "y": {}}, 3).split("@a[y]:\n")[1].splitlines()   # a key without one
    assert nulls[0].split() == ["null", "null"] and nulls[2].endswith("| -") and nulls[2].startswith("00:00:00.500")


def test_json_rows_in_utc() -> None:
    from pycore.lang.output import map_json

    line = map_json("@a", "tseries", [(("one",), {1: 5, 3: -2})], tseries=(100 * MS, 3, 0, True))
    assert line == ('{"type": "tseries", "data": {"@a": {"one": [{"interval_start": "1970-01-01 '
                    '00:00:00.100000000", "value": 5}, {"interval_start": "1970-01-01 00:00:00.300000000", '
                    '"value": -2}]}}}\n')


def _cpu(val: int, meta: int, epoch: int, signed: bool = True) -> bytes:
    return struct.pack("<qqQ" if signed else "<QQQ", val, meta, epoch)


def test_buckets_reduced_over_the_cpus_as_upstream() -> None:
    """util/tseries.cpp: the latest epoch over the CPUs wins; the CPUs of that epoch are combined (the
    last set for no aggregation, by its time); a CPU that never set the bucket (epoch 0) is skipped."""
    assert tseries_bucket([_cpu(7, 100, 5), _cpu(9, 90, 5), _cpu(1, 999, 4)], "", True) == (5, 7)
    assert tseries_bucket([_cpu(3, 0, 5), _cpu(4, 0, 5), _cpu(0, 0, 0)], "sum", True) == (5, 7)
    assert tseries_bucket([_cpu(-7, 2, 5), _cpu(0, 1, 5)], "avg", True) == (5, -2)    # C's -7 / 3
    assert tseries_bucket([_cpu(-7, 1, 5), _cpu(2, 1, 5)], "min", True) == (5, -7)
    assert tseries_bucket([_cpu(2**64 - 1, 1, 5, False), _cpu(2, 1, 5, False)], "max", False) == (5, 2**64 - 1)
    assert tseries_bucket([_cpu(0, 0, 0), _cpu(0, 0, 0)], "sum", True) is None


def _rows(text: str, name: str) -> list[tuple[str, str]]:
    """(time, value) of each row of the chart of ``name`` in pycore trace's output."""
    lines = text.split(f"\n{name}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [(ln.split(" ", 1)[0], ln.rsplit(" ", 1)[1]) for ln in lines[2:] if ln[:1].isdigit()]


def test_aggregations_in_one_interval() -> None:
    """Each aggregation in one interval of an hour (a run of BEGIN does not straddle one), keyed and
    not, signed and not: the row's time is the hour's start, TAI as the wall clock shows it."""
    require_root()
    before = time.time()
    p = pycore('BEGIN { @last = tseries(5, 1h, 4); @last = tseries(6, 1h, 4); '
               '@sum["a"] = tseries(3, 1h, 4, "sum"); @sum["a"] = tseries(-10, 1h, 4, "sum"); '
               '@sum["b"] = tseries(1, 1h, 4, "sum"); @avg = tseries(10, 1h, 4, "avg"); '
               '@avg = tseries(21, 1h, 4, "avg"); @min = tseries(-3, 1h, 4, "min"); @min = tseries(2, 1h, 4, "min"); '
               '@max = tseries((uint64)-1, 1h, 4, "max"); @max = tseries((uint64)5, 1h, 4, "max"); exit(); }', "-q")
    after = time.time()
    assert p.returncode == 0, p.stderr
    hours = {time.strftime("%H:00:00", time.localtime(t - t % 3600)) for t in (before, after)}
    for name, want in [("@last", "6"), ("@sum[a]", "-7"), ("@sum[b]", "1"), ("@avg", "15"), ("@min", "-3"),
                       ("@max", str(2**64 - 1))]:
        (stamp, value), = _rows(p.stdout, name)
        assert value == want, (name, p.stdout)
        assert stamp[:8] in hours and stamp[8:] == ".000000000", (name, stamp, hours)
    assert p.stdout.index("@sum[a]:") < p.stdout.index("@sum[b]:")


def test_intervals_from_an_interval_probe() -> None:
    """Forty ticks 20 ms apart into 100 ms intervals, the last five shown: the last value of each
    interval grows, the newest is the last tick's, and the sums count each tick once."""
    require_root()
    p = pycore('interval:ms:20 { @last = tseries(@n, 100ms, 5); @sum = tseries(1, 100ms, 5, "sum"); @n++; '
               'if (@n == 40) { exit(); } } END { clear(@n); }', "-q")
    assert p.returncode == 0, p.stderr
    last, sums = _rows(p.stdout, "@last"), _rows(p.stdout, "@sum")
    assert len(last) == len(sums) == 5, p.stdout
    values = [int(v) for _, v in last if v != "-"]
    assert values == sorted(set(values)) and values[-1] == 39, p.stdout
    assert all(v == "-" or 1 <= int(v) <= 10 for _, v in sums) and sum(int(v) for _, v in sums if v != "-") <= 40
    stamps = [t for t, _ in last]
    step = [round((_secs(b) - _secs(a)) * 1000) % 86_400_000 for a, b in zip(stamps, stamps[1:])]
    assert step == [100] * 4 and stamps == [t for t, _ in sums], p.stdout


def _secs(stamp: str) -> float:
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def test_both_cpus_in_one_bucket() -> None:
    """Two processes pinned to CPU 0 and 1 add to one interval: the per-CPU buckets are summed."""
    require_root()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU on this kernel's machine")
    prog = ('tracepoint:syscalls:sys_enter_getppid /comm == "tseries-cpu"/ { @sum = tseries(1, 1h, 2, "sum"); '
            '@cpus = tseries(cpu, 1h, 2, "max"); }')
    with running([*PYCORE, "-q", "-e", prog]) as tracer:
        wait_attached(tracer)
        for cpu in sorted(os.sched_getaffinity(0))[:2]:
            subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-c",
                            "import os, ctypes; ctypes.CDLL(None).prctl(15, b'tseries-cpu', 0, 0, 0); "
                            "[os.getppid() for _ in range(5)]"], check=True)
        out, err = stop(tracer)
    assert [v for _, v in _rows(out, "@sum")] == ["10"], (out, err)
    assert [v for _, v in _rows(out, "@cpus")] == [str(sorted(os.sched_getaffinity(0))[1])], (out, err)


def test_tseries_errors() -> None:
    """bpftrace 0.26's words for bad bounds and aggregations; a tseries map prints, it is not read."""
    for script, want in [
        ("BEGIN { @a = tseries(1, 0, 5); }", "tseries() interval_ns must be >= 1 (0 provided)"),
        ("BEGIN { @a = tseries(1, 1s, 0); }", "tseries() num_intervals must be >= 1 (0 provided)"),
        ("BEGIN { @a = tseries(1, 1s, 1000001); }", "tseries() num_intervals must be < 1000000 (1000001 provided)"),
        ('BEGIN { @a = tseries(1, 1s, 5, "median"); }',
         'tseries() expects one of the following aggregation functions: avg, max, min, sum ("median" provided)'),
        ("BEGIN { @a = tseries(1, 1s, 5); @a = tseries(2, 1s, 6); }", "Different tseries bounds in a single map unsupported"),
        ("BEGIN { @a = tseries(1, 1s, 5); $x = @a; }", "@a is a tseries: it can be printed, not read as a value"),
        ('BEGIN { @a[1] = tseries(1, 1s, 5); print(@a[1]); }', "Map type tseries_t cannot print the value of individual keys"),
        ('BEGIN { @a = tseries("x", 1s, 5); }', "tseries() needs an integer"),
        ("BEGIN { @a = tseries(1, 1s); }", "tseries() takes 3 arguments, not 2"),
    ]:
        p = pycore(script, "--dry-run")
        assert p.returncode != 0 and "Traceback" not in p.stderr, (script, p.stderr)
        assert want in p.stderr.splitlines()[0], (script, p.stderr)
