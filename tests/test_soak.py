"""A short run of bench/soak.py (``pycore serve`` with three tools under a
flat-out open/close workload, scraped every second): the agent stays flat
and accounts for every event.  The 10-minute soak is the same script run by
hand (``.venv/bin/python bench/soak.py``); its figures are in the notes.

At well over 100k events/s, 45 s of steady state is millions of events: a
leak of a byte per event, or one descriptor per scrape, shows up clearly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_root

pytest.importorskip("prometheus_client")
SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


@pytest.mark.slow
def test_short_soak_is_flat_and_counts_everything():
    require_root()
    r = subprocess.run([sys.executable, str(SOAK), "--duration", "60", "--sample", "3", "--warmup", "15", "--json"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["serve_exit"] == 0, s
    assert s["programs_left"] == []
    assert s["opens"] > 1_000_000, s["opens"]               # the workload really ran
    assert s["events"] + s["lost"] == s["opens"] + 1, s   # each open (+ the create): an event or a counted loss
    assert s["fds_min"] == s["fds_max"], [x["fds"] for x in s["samples"]]
    growth = s["rss_kb_median_last_fifth"] - s["rss_kb_median_first_fifth"]
    assert growth < 2048, [x["rss_kb"] for x in s["samples"]]
