"""A full map: the new keys it refused are counted by the programs in the kernel (each script's
scratch counters), and told: ``pycore trace`` warns on stderr at exit (bpftrace 0.17 says nothing),
``TraceSession.refused`` gives them, ``pycore serve`` exports them beside each map's limit.

The workload (test_serve_script's gcc-built s25work) reads 50 distinct sizes once each; the maps hold
10 keys, so each map refuses exactly 40 new keys.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pycore
from tests.conftest import require_root
from tests.test_serve_script import _get, _samples, _script, serving, workload  # noqa: F401 - a fixture

SIZES = list(range(1, 51))
KEYS = 10
BY_SIZE = ('tracepoint:syscalls:sys_enter_read /comm == "s25work"/ '
           '{ @c[args.count] = count(); @v[args.count] = args.count; @sizes[args.count] = hist(args.count); @n = count(); }')


def test_trace_warns_of_the_keys_a_full_map_refused(workload):
    require_root()
    env = {**os.environ, "BPFTRACE_MAP_KEYS_MAX": str(KEYS)}
    cmd = " ".join([workload, "0", "/", *map(str, SIZES)])
    r = subprocess.run([sys.executable, "-m", "pycore", "trace", "-e", BY_SIZE, "-c", cmd],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("@c", "@v"):
        printed = re.findall(rf"^{name}\[(\d+)\]: (\d+)$", r.stdout, re.M)
        assert len(printed) == KEYS and all(int(k) in SIZES for k, _ in printed), r.stdout
    assert re.search(r"^@n: 50$", r.stdout, re.M)
    warnings = [line for line in r.stderr.splitlines() if "refused" in line]
    excess = len(SIZES) - KEYS
    assert warnings == [f"pycore trace: {m}: {excess} keys refused: the map was full at {KEYS} keys "
                        "(BPFTRACE_MAP_KEYS_MAX)" for m in ("@c", "@v", "@sizes")], r.stderr
    # room for every key: no warning
    env["BPFTRACE_MAP_KEYS_MAX"] = str(len(SIZES))
    r = subprocess.run([sys.executable, "-m", "pycore", "trace", "-e", BY_SIZE, "-c", cmd],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "refused" not in r.stderr, r.stderr
    assert len(re.findall(r"^@c\[\d+\]: 1$", r.stdout, re.M)) == len(SIZES)


def test_session_refused(workload):
    require_root()
    with pycore.trace(BY_SIZE, map_size=KEYS) as s:
        assert s.map_size == KEYS and s.refused == {}
        subprocess.run([workload, "0", "/", *map(str, SIZES)], check=True)
        assert s.refused == {m: len(SIZES) - KEYS for m in ("@c", "@v", "@sizes")}
        assert len(s.map("c")) == KEYS


def test_serve_exports_max_keys_and_refused(workload, tmp_path):
    path = _script(tmp_path, "full.bt", BY_SIZE + "\n")
    with serving("--script", path, "--map-keys-max", str(KEYS)) as (p, port):
        subprocess.run([workload, "0", "/", *map(str, SIZES)], check=True)
        exposition = _get(port)
        m = _samples(exposition)
    assert p.returncode == 0, p.tail
    for name in ("@c", "@v", "@sizes", "@n"):
        labels = f'map="{name}",script="full"'
        assert m[f"pycore_script_map_max_keys{{{labels}}}"] == KEYS
        assert m[f"pycore_script_map_keys_refused_total{{{labels}}}"] == (0 if name == "@n" else len(SIZES) - KEYS)
    assert m['pycore_script_map_keys{map="@c",script="full"}'] == KEYS
    assert len([k for k in m if k.startswith("pycore_script_full_c_total{")]) == KEYS
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_serve_map_keys_max_from_bpftrace_setting(workload, tmp_path):
    """BPFTRACE_MAP_KEYS_MAX, as pycore trace reads it, when --map-keys-max is not given."""
    path = _script(tmp_path, "full.bt", BY_SIZE + "\n")
    with serving("--script", path, env={**os.environ, "BPFTRACE_MAP_KEYS_MAX": "20"}) as (p, port):
        subprocess.run([workload, "0", "/", *map(str, SIZES)], check=True)
        m = _samples(_get(port))
    assert m['pycore_script_map_max_keys{map="@c",script="full"}'] == 20
    assert m['pycore_script_map_keys_refused_total{map="@c",script="full"}'] == len(SIZES) - 20


def test_serve_bad_map_keys_max(tmp_path):
    require_root()
    path = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    for extra, env, said in ((["--map-keys-max", "0"], {}, "--map-keys-max 0"),
                             ([], {"BPFTRACE_MAP_KEYS_MAX": "lots"}, "BPFTRACE_MAP_KEYS_MAX='lots'")):
        r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--script", path, *extra],
                           capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
        assert r.returncode == 2 and r.stderr == f"pycore serve: {said}: give a number of keys, at least 1\n"
