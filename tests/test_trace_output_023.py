"""Where bpftrace 0.17 and 0.23.2 print the same thing differently, pycore prints 0.23.2's form (issue 30):
each test runs the script through both pycore and the real bpftrace 0.23.2 and compares stdout.

The differences: hist/lhist headers (``@h:``, 0.17 ``@h: ``), stacks in map keys (frames by 8, 0.17 by 4),
structs in map keys (``{ .a = 1 }``, 0.17 ``{.a=1}``), ``-f json`` keys (escaped twice, pointers in
unsigned decimal, structs as objects), the probes ``missing_probes`` skipped (counted in ``Attaching N
probes...`` and warned after it), and ``delete()`` of a missing key (0.23.2's warning on stdout).
``Attaching N probes...`` is on bpftrace's stdout and pycore's stderr: the tests drop it from stdout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests import bpftrace023
from tests.conftest import as_023, require_root

PYCORE = [sys.executable, "-m", "pycore", "trace"]

# the BEGIN program's own frame and kernel addresses differ run to run (and bpftrace names its program
# BEGIN_1): the frames below it, the layout and the escaping are compared
_VOLATILE = [(re.compile(r"bpf_prog_[0-9a-f]+_\w+?\+\d+"), "PROG"), (re.compile(r"(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])"), "ADDR")]


def _stable(text: str) -> str:
    for pat, rep in _VOLATILE:
        text = pat.sub(rep, text)
    return text


def ours(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PYCORE, *args, "-e", script], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def theirs(script: str, *args: str) -> subprocess.CompletedProcess:
    require_root()
    bpftrace023.require()
    p = subprocess.run(bpftrace023.argv(*args, "-e", script), capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, env=bpftrace023.env())
    p.stderr = "".join(line for line in p.stderr.splitlines(keepends=True) if "RLIMIT_MEMLOCK" not in line)
    p.stdout = "".join(line for line in p.stdout.splitlines(keepends=True)
                       if not line.startswith(("Attaching ", '{"type": "attached_probes"')))
    return p


def both(script: str, *args: str) -> tuple[str, str]:
    b, p = theirs(script, *args), ours(script, *args)
    assert b.returncode == 0, b.stderr
    assert p.returncode == 0, p.stderr
    stdout = "".join(line for line in p.stdout.splitlines(keepends=True)
                     if not line.startswith('{"type": "attached_probes"'))
    return _stable(b.stdout), _stable(stdout)


KEYS = ('BEGIN { @h[1, "a"] = hist(5); @l = lhist(3, 0, 10, 1); @hh = hist(1000); print(@h); '
        '@k[kstack(3)] = 1; @t[kstack(perf, 2)] = 1; @z[kstack(raw, 1)] = 1; @v[1] = kstack(2); '
        '@[curtask->se.load] = 1; @s[curtask->se.load, 5] = count(); @b[buf("ab\\n", 3)] = 2; '
        '@m["a\\nb\\"c\\\\d\\te"] = 1; @n[1, "x\\"y"] = 2; @q[(1, "x\\""), 2] = 3; @p["a\\nb"] = "v\\nw"; '
        '@f[(uint64 *)16] = 1; @g[(uint64 *)-16] = 1; @d[ksym(0)] = 1; @e[-5, (uint32)-1] = 1; '
        'printf("%s|\\n", kstack(2)); print(kstack(1)); exit(); }')


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_keys_hists_and_stacks_as_023(fmt: str) -> None:
    b, p = both(KEYS, "-f", fmt)
    assert "@h[1, a]:\n" in b or fmt == "json"          # the script reaches what it is about
    assert p == b


def test_missing_probes_counted_and_warned_after_attaching() -> None:
    """0.23.2 counts the attach points missing_probes skipped and warns after its Attaching line, last
    first; with ignore it still counts them."""
    for policy in ("warn", "ignore"):
        script = (f'config = {{ missing_probes = "{policy}" }} '
                  "uprobe:/bin/bash:zz_m1, uprobe:/bin/bash:readline { @ = 1; } "
                  "uprobe:/bin/bash:zz_m2, uprobe:/bin/bash:zz_m3, uprobe:/bin/bash:readline { @ = 2; } "
                  'BEGIN { printf("hi\\n"); exit(); }')
        require_root()
        bpftrace023.require()
        b = subprocess.run(bpftrace023.argv("-e", script), capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=bpftrace023.env())
        assert b.returncode == 0, b.stderr
        p = ours(script)
        assert p.returncode == 0, p.stderr
        # bpftrace: the Attaching line on stdout, the warnings on stderr; pycore: both on stderr
        their_lines = [line for line in b.stdout.splitlines() if line.startswith("Attaching")] + \
            [line for line in b.stderr.splitlines() if line.startswith("WARNING: Could not")]
        assert their_lines[0] == "Attaching 6 probes..."
        assert [line for line in p.stderr.splitlines() if line.startswith(("Attaching", "WARNING"))] == their_lines
        assert (len(their_lines) == 4) == (policy == "warn")


def test_delete_of_a_missing_key_warns_as_023() -> None:
    script = ('BEGIN { @m[1] = 1; delete(@m, 2); delete(@m[3]); @x = 1; delete(@x); delete(@x); @n[1, 2] = 1; '
              'delete(@n, (5, 6)); if (@m[1]) {\n\tdelete(@m, 9); } printf("after\\n"); exit(); }')
    for fmt in ("text", "json"):
        b, p = both(script, "-f", fmt)
        assert "Can't delete map element because it does not exist." in b
        assert p == b


def test_delete_warning_of_a_script_file(tmp_path) -> None:
    """The file's name, a tab as 4 spaces under the marker, and a call over two lines (lines only)."""
    require_root()
    bpftrace023.require()
    text = "BEGIN {\n  @m[1] = 1;\n\tdelete(@m, 2); delete(@m,\n 3); exit(); }\n"
    name = "pycore-delete-test.bt"
    inside = os.path.join(bpftrace023.root(), "tmp", name)
    with open(inside, "w") as f:
        f.write(text)
    with open(tmp_path / name, "w") as f:
        f.write(text)
    try:
        b = subprocess.run(bpftrace023.argv(f"/tmp/{name}"), capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=bpftrace023.env())
    finally:
        os.unlink(inside)
    p = subprocess.run([*PYCORE, name], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.getcwd()})
    want = b.stdout.replace(f"/tmp/{name}", name).replace("Attaching 1 probe...\n", "")
    assert "~~~~~~~~~~~~~" in want and f"{name}:3-4: WARNING" in want
    assert p.stdout == want


def test_as_023_on_017_output() -> None:
    """conftest.as_023 turns 0.17's forms into 0.23.2's and leaves the rest as it is."""
    t017 = ("@h: \n[4, 8)                 1 |@@|\n\n@k[\n    f+1\n    g+2\n]: 1\n@v[1]: \n        f+1\n"
            "@s[{.a=1,.b={.c=2}}, 5]: 3\n")
    assert as_023(t017) == ("@h:\n[4, 8)                 1 |@@|\n\n@k[\n        f+1\n        g+2\n]: 1\n"
                            "@v[1]: \n        f+1\n@s[{ .a = 1, .b = { .c = 2 } }, 5]: 3\n")
    j017 = ('{"type": "map", "data": {"@m": {"a\\nb\\"c": 1}}}\n'
            '{"type": "map", "data": {"@k": {"\\n    f+1\\n": "\\n        f+1\\n"}}}\n'
            '{"type": "map", "data": {"@s": {"{.a=1,.b=2},5": 1}}}\n'
            '{"type": "printf", "data": "x\\n"}\n')
    assert as_023(j017) == ('{"type": "map", "data": {"@m": {"a\\\\nb\\\\\\"c": 1}}}\n'
                            '{"type": "map", "data": {"@k": {"\\\\n        f+1\\\\n": "\\n        f+1\\n"}}}\n'
                            '{"type": "map", "data": {"@s": {"{ \\"a\\": 1, \\"b\\": 2 },5": 1}}}\n'
                            '{"type": "printf", "data": "x\\n"}\n')
