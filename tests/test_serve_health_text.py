"""pycore serve writes its scripts' health families (up, info, keys refused, reloads, probe
statistics...) as exposition text directly (pycore.lang.metrics.families_text): the bytes
prometheus_client's own generate_latest and OpenMetrics exposition write for the same rows' families,
which its parsers read as the same samples, for a server with a script down, one whose map refused
keys and one reloaded; the whole scrape passes promtool check metrics.
"""

from __future__ import annotations

import io
import math
import shutil
import subprocess
import urllib.request

import pytest

from tests.conftest import require_root
from tests.test_serve_reload import COMM, counting, reload, serving, workload  # noqa: F401 - a fixture
from tests.test_serve_script import _script

pytest.importorskip("prometheus_client")

SIZES = list(range(1, 51))      # the workload reads 50 distinct sizes: a 10-key map refuses 40
KEYS = 10
COUNTS = (f'tracepoint:syscalls:sys_enter_openat /comm == "{COMM}"/ {{ @opens[comm] = count(); }}\n'
          f'tracepoint:syscalls:sys_enter_read /comm == "{COMM}"/ {{ @sizes = hist(args.count); }}\n')
FULL = f'tracepoint:syscalls:sys_enter_read /comm == "{COMM}"/ {{ @c[args.count] = count(); @n = count(); }}\n'
BROKEN = 'tracepoint:syscalls:sys_enter_openat { @x = args.no_such_field; }\n'
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


class _Fixed:
    """A collector giving the families it was made with (prometheus_client's exposition of them)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self):  # noqa: ANN201
        return iter(self.families)


def _client_text(families: list, openmetrics: bool) -> str:
    """What prometheus_client writes for ``families`` (OpenMetrics without its ``# EOF``)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    if openmetrics:
        return generate_openmetrics(registry).decode().removesuffix("# EOF\n")
    return generate_latest(registry).decode()


def _parsed(text: str, openmetrics: bool) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} as prometheus_client's parser of that format reads it."""
    if openmetrics:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families

        if not text.endswith("# EOF\n"):
            text += "# EOF\n"
    else:
        from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, key
            out[key] = s.value
    return out


def test_rows_written_as_prometheus_client_writes_them():
    """Escapes (backslash, newline, quote in HELP and label values), label order, counters' names and
    values as Go writes floats, against prometheus_client itself (no kernel needed)."""
    from pycore.lang.metrics import _go, families_of, families_text
    from prometheus_client.utils import floatToGoString

    values = [0, 1, -1, 7, 999_999, 1_000_000, 12_345_678, -12_345_678, 2**53, 2**64, 10**15 - 1, -(10**15),
              0.0, 1.5, 1e-9, 123456.5, 1764210000.0, 1764210000.123, math.inf, -math.inf, True, False]
    assert [_go(v) for v in values] == [floatToGoString(v) for v in values]
    assert _go(math.nan) == floatToGoString(math.nan) == "NaN"
    rows = [
        ("weird_family", "counter", 'help with "quotes", a \\ and a\nnewline', ("script", "file", "error"),
         [(["a", '/x/"quoted"\\dir\nname', 'it said "no\\"'], 3), (["b", "", ""], 2.5), (["c", "é", "ü"], 10**7)]),
        ("plain_gauge", "gauge", "no labels", (), [([], 0.25)]),
        ("empty_counter", "counter", "no samples", ("script",), []),
        ("one_label", "gauge", "one", ("map",), [(["@m"], 1), (['@"'], -3)]),
        ("two_labels", "counter", "two, sorted", ("script", "map"), [(["s", "@a"], 5), (["t", "@b"], 0)]),
    ]
    for om in (False, True):
        text = families_text(rows, om)
        assert text == _client_text(families_of(rows), om)
        labels = (("error", 'it said "no\\"'), ("file", '/x/"quoted"\\dir\nname'), ("script", "a"))
        assert _parsed(text, om)[("weird_family_total", labels)] == 3


def test_health_text_is_what_prometheus_client_writes(workload, tmp_path):
    """One read of a real server's health (a script down with an error, one whose maps refused keys,
    one replaced by a reload, one whose file's path needs escaping) written both ways: same bytes,
    same samples, in both formats."""
    require_root()
    from pycore.embed.scripts import ScriptsCollector, ScriptSet
    from pycore.lang.metrics import families_of, families_text

    d = tmp_path / 'we"ird\\dir'
    d.mkdir()
    paths = [_script(d, "counts.bt", COUNTS), _script(d, "full.bt", FULL), _script(d, "broken.bt", BROKEN),
             _script(d, "later.bt", counting("r"))]
    err = io.StringIO()
    scripts = ScriptSet(paths, [], map_size=KEYS, err=err)
    scripts.start()
    scripts.load()
    try:
        subprocess.run([workload, "3", "/", *map(str, SIZES)], check=True)
        _script(d, "later.bt", counting("r2"))
        assert not scripts.reload("test")       # broken.bt still does not load
        assert "script later: reload: replaced" in err.getvalue()
        served = ScriptsCollector(scripts)
        assert served.maps_text()
        rows = served.health_rows()
        texts = {}
        for om in (False, True):
            texts[om] = families_text(rows, om)
            assert texts[om] == _client_text(families_of(rows), om)
        plain, om = _parsed(texts[False], False), _parsed(texts[True], True)
        assert plain == om
        assert plain[("pycore_script_up", (("script", "broken"),))] == 0
        assert plain[("pycore_script_up", (("script", "later"),))] == 1
        info = {dict(k[1])["script"]: dict(k[1]) for k in plain if k[0] == "pycore_script_info"}
        assert info["counts"]["file"] == paths[0] and info["counts"]["error"] == ""
        assert "no_such_field" in info["broken"]["error"] and info["broken"]["error"].startswith(paths[2] + ":1:")
        refused = (("map", "@c"), ("script", "full"))
        assert plain[("pycore_script_map_keys_refused_total", refused)] == len(SIZES) - KEYS
        assert plain[("pycore_script_map_max_keys", refused)] == KEYS
        assert plain[("pycore_script_map_keys", refused)] == KEYS
        assert plain[("pycore_scripts_reloads_total", ())] == 1
        assert plain[("pycore_scripts_reload_failures_total", ())] == 1
        assert plain[("pycore_scripts_last_reload_successful", ())] == 0
        runs = {dict(k[1])["script"] for k in plain if k[0] == "pycore_script_probe_runs_total"}
        assert runs == {"counts", "full", "later"}
        # and ScriptsCollector.collect(), for a registry, gives those families
        got = [(f.name, f.type, f.documentation, [s.labels for s in f.samples]) for f in served.collect()]
        assert got == [(f.name, f.type, f.documentation, [s.labels for s in f.samples]) for f in families_of(rows)]
    finally:
        scripts.close()


def _scrape(port: int, accept: str = "") -> tuple[str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["Content-Type"], r.read().decode()


def test_served_scrape_in_both_formats(workload, tmp_path):
    """The whole scrape of pycore serve (maps, process_*, health) in both formats: families in
    prometheus_client's order (the health last, before OpenMetrics' # EOF), the same samples read by
    each format's parser, and promtool check metrics has nothing to say."""
    assert shutil.which("promtool"), "promtool (Debian's prometheus package, ./dev.sh) is needed"
    paths = [_script(tmp_path, "counts.bt", COUNTS), _script(tmp_path, "full.bt", FULL),
             _script(tmp_path, "broken.bt", BROKEN), _script(tmp_path, "later.bt", counting("r"))]
    with serving(*[a for p in paths for a in ("--script", p)], "--map-keys-max", str(KEYS)) as (p, port, log):
        subprocess.run([workload, "3", "/", *map(str, SIZES)], check=True)
        _script(tmp_path, "later.bt", counting("r2"))
        assert "1 replaced" in reload(p, log)
        subprocess.run([workload, "2", "/"], check=True)
        plain_type, plain = _scrape(port)
        om_type, om = _scrape(port, OPENMETRICS)
    assert plain_type.startswith("text/plain; version=0.0.4") and om_type.startswith("application/openmetrics-text")
    r = subprocess.run(["promtool", "check", "metrics"], input=plain, capture_output=True, text=True)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    assert om.endswith("# EOF\n") and om.count("# EOF") == 1
    for text, counter in ((plain, "_total"), (om, "")):
        types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        first = types.index("pycore_script_up")
        assert types[first:first + 4] == ["pycore_script_up", "pycore_script_info", "pycore_script_log_lines" + counter,
                                          "pycore_script_log_dropped" + counter]
        assert all(not t.startswith("pycore_script_") or t.startswith(("pycore_script_counts_", "pycore_script_full_",
                                                                       "pycore_script_later_"))
                   for t in types[:types.index("process_cpu_seconds" + counter)]), types   # maps, process_*, health
        assert types[-1] == "pycore_script_probe_run_time_seconds" + counter
    a, b = _parsed(plain, False), _parsed(om, True)
    assert a.keys() == b.keys()
    moving = ("process_", "pycore_script_probe_run")     # counted between the two scrapes
    assert {k: v for k, v in a.items() if not k[0].startswith(moving)} == \
        {k: v for k, v in b.items() if not k[0].startswith(moving)}
    assert a[("pycore_script_up", (("script", "broken"),))] == 0
    assert a[("pycore_script_map_keys_refused_total", (("map", "@c"), ("script", "full")))] == len(SIZES) - KEYS
    assert a[("pycore_scripts_reloads_total", ())] == 1 and a[("pycore_script_later_r2_total", ())] == 2 + 1
    assert p.returncode == 0, log.text()
