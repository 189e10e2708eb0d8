"""A full map's refused update, warned as bpftrace 0.23.2 warns (on stdout, each time, at the
statement): ``stdin:L:C-E: WARNING: Map full; can't update element. Try increasing max_map_keys
config``, its ``Additional Info`` line, the script's line and a marker, where 0.23.2's lexer puts the
statement's place (the whole statement; ``++`` alone before a map; an aggregation's call and what
touches it with no blank between). Side by side with 0.23.2, text and ``-f json``."""

from __future__ import annotations

import re

import pytest

from tests import bpftrace023
from tests.conftest import require_root
from tests.test_trace_values import pycore

CASES = ['@[1]=1; @[2]=2; @[3]=3;', '@a[0]=min(1); @a[1]=min(1);', '@c[0]=avg(1); @c[1]=avg(1);',
         '@e[0]=lhist(1,0,10,1); @e[1]=lhist(1,0,10,1);', '@f[0]=1; @f[1] += 1;', '@g[0]=1; @g[1]++;',
         '@i[0]="y"; @i[1]="x";', '@j[0]=count(); @j[1]=count();', '@k[0]=1; @k[1] = 1 + 2;',
         '@l[0]=count(); @l[1] = count( );', '$x = 1; @m[0] = $x; @m[$x] = $x * 2;',
         '@j[0]=count(); @j[1] =count();', '@o[0]=sum(1); @o[1] = sum(2);', '@p[0]=1; @p[1] -= 1;',
         '@q[0]=1; ++@q[1];', '@h[0]=hist(1); @h[1] = hist(1);', '@s[1,2]=sum(1); @s[3,4]=sum(2);',
         '@t[0]=1; @t[1] =\n  2;', 'if (1) { @u[0] = 1; @u[1] = 2; }']
_ATTACHING = re.compile(r"^Attaching \d+ probes?\.\.\.\n", re.M)


@pytest.mark.parametrize("body", CASES)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_map_full_warned_as_023(body: str, fmt: str) -> None:
    require_root()
    script = f"config = {{ max_map_keys = 1 }} BEGIN {{ {body} exit(); }}"
    args = ("-f", "json") if fmt == "json" else ()
    theirs = bpftrace023.run(script, *args)
    ours = pycore(script, *args)
    assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
    want = theirs.stdout if fmt == "json" else _ATTACHING.sub("", theirs.stdout)
    assert "Map full" in want
    assert ours.stdout == want, (ours.stdout, want)
