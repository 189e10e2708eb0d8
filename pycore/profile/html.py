"""A self-contained interactive flame graph (``.html``): one file, no network needed to open it.

The stacks are merged into a tree (a frame's children sorted by name, as
flamegraph.pl sorts them) and embedded as JSON in a ``<script
type="application/json">`` block; the page's own script and style are inline,
so the file opens from disk, offline, in any browser.  The root is at the top
(an "icicle": deep Python recursion stays in view without scrolling to the
bottom).  Click a frame to zoom to it (its ancestors stay, full width; click
one to zoom out), search to highlight the frames whose name holds the text
(and see their share of the samples), hover for the frame's count, seconds
and share (off-CPU: the seconds waited and their share).  Frame labels are
the folded format's, so each tree path is one folded line.

The tree, as the page reads it: ``[name index, kind index, samples,
[children...]]``, names and kinds in their own tables.

A frame with less than :data:`MIN_SHARE` of all samples is not drawn (nor
anything above it), as flamegraph.pl's ``--minwidth`` leaves out what would be
narrower than 0.1 pixel: its parent is wider than its children by what was
left out, and the info line says how many samples that is. A profile of fewer
than 50,000 samples loses nothing. Without it a profile of many threads or
unrelated deep stacks is a tree of millions of nodes that no browser draws:
100,000 distinct 90-frame stacks took 90 s of CPU and gigabytes to write
(bench/bench_profile.py, "writing").
"""

from __future__ import annotations

import html
import json
from bisect import bisect_right
from itertools import accumulate
from typing import TextIO

from pycore.profile.stacks import Profile

__all__ = ["KINDS", "MIN_SHARE", "flame_tree", "write_html"]

KINDS = ("root", "process", "thread", "python", "native", "kernel")

#: The smallest share of all samples a frame is drawn with (1/50,000: a frame of one sample is drawn
#: in a profile of up to 50,000 samples; 0.02 pixel of a 1,200-pixel page, 0.1 px of flamegraph.pl's
#: default, left room for zooming in).
MIN_SHARE = 1 / 50_000


def flame_tree(profile: Profile, min_share: float = MIN_SHARE) -> tuple[list[str], list, int]:
    """(names, tree, samples left out): the stacks merged root first; a node is ``[name, kind,
    samples, children]``, children in name order, none with less than ``min_share`` of the samples.

    The stacks become rows of frame codes (name index * 8 + kind, names numbered in sorted order),
    sorted; a node's rows are then one run of the sorted list, its children runs within it found by
    bisection and its samples read off running sums. So the work is the sort and the nodes drawn,
    not every frame of every sample.
    """
    names: dict[str, int] = {"all": 0}
    code = {f: names.setdefault(label, len(names)) * 8 + KINDS.index(f.kind)
            for f, label in sorted(profile.labels().items(), key=lambda fl: (fl[1], fl[0]))}
    coded = [(tuple(map(code.__getitem__, stack)), n) for stack, n in profile.stacks.items()]
    if len(set(code.values())) < len(code):     # frames that look the same (a name in two files): merged
        merged: dict[tuple[int, ...], int] = {}
        for key, n in coded:
            merged[key] = merged.get(key, 0) + n
        coded = list(merged.items())
    coded.sort()
    rows = [key for key, _ in coded]
    sums = list(accumulate((n for _, n in coded), initial=0))
    floor = sums[-1] * min_share
    left_out = 0
    root: list = [0, 0, sums[-1], []]
    todo = [(root, 0, len(rows), 0)]      # a node, its run of rows, its depth (rows share code[:depth])
    while todo:
        node, lo, hi, depth = todo.pop()
        i = lo
        if i < hi and len(rows[i]) == depth:    # the stack that ends here sorts first (at most one)
            i += 1
        while i < hi:
            c = rows[i][depth]
            j = bisect_right(rows, c, i, hi, key=lambda r: r[depth])
            samples = sums[j] - sums[i]
            if samples >= floor:
                child = [c >> 3, c & 7, samples, []]
                node[3].append(child)
                todo.append((child, i, j, depth + 1))
            else:
                left_out += samples
            i = j
    return list(names), root, left_out


def write_html(profile: Profile, out: TextIO, title: str = "pycore profile") -> None:
    names, tree, left_out = flame_tree(profile)
    data = {"names": names, "kinds": list(KINDS), "tree": tree, "hz": profile.hz,
            "duration": round(profile.duration, 3), "samples": profile.samples, "title": title,
            "left_out": left_out}
    if profile.off_cpu:               # a node's value is microseconds waited: shown in seconds
        data.update(hz=0, offcpu=True, waits=profile.waits)
    # "<" only occurs inside JSON strings: as \u003c it cannot close the script element
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    out.write(_PAGE.replace("@TITLE@", html.escape(title)).replace("@DATA@", payload))


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@TITLE@</title>
<style>
body { margin: 0; font: 12px/1.3 monospace; background: #fff; color: #000; }
header { position: sticky; top: 0; z-index: 2; background: #eee; padding: 6px 8px; display: flex;
         gap: 12px; align-items: center; border-bottom: 1px solid #ccc; }
header h1 { font-size: 14px; margin: 0; }
#search { width: 22em; }
#matched { color: #806; }
#status { position: sticky; bottom: 0; z-index: 2; background: #eee; padding: 4px 8px;
          border-top: 1px solid #ccc; min-height: 1.3em; white-space: pre; overflow: hidden; }
#chart { position: relative; margin: 4px 8px; }
.f { position: absolute; height: 16px; box-sizing: border-box; border: 1px solid #fff; overflow: hidden;
     white-space: nowrap; text-overflow: ellipsis; padding: 0 2px; cursor: pointer; line-height: 14px; }
.f:hover { border-color: #000; }
.f.match { background: #e0e !important; color: #fff; }
.f.anc { opacity: 0.6; }
</style>
</head>
<body>
<header>
<h1 id="title"></h1>
<button id="reset" type="button" title="Zoom out to every sample (Esc)">Reset zoom</button>
<input id="search" type="search" placeholder="Search frames (Ctrl-F)" autocomplete="off">
<span id="matched"></span>
<span id="info"></span>
</header>
<div id="chart"></div>
<div id="status"> </div>
<script type="application/json" id="data">@DATA@</script>
<script>
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const H = 16, chart = document.getElementById("chart"), status = document.getElementById("status");
  const search = document.getElementById("search"), matched = document.getElementById("matched");
  const nodes = [];
  function build(a, parent, depth) {
    const n = {name: D.names[a[0]], kind: D.kinds[a[1]], v: a[2], p: parent, d: depth, c: [],
               i: nodes.length};
    nodes.push(n);
    for (const c of a[3]) n.c.push(build(c, n, depth + 1));
    return n;
  }
  const root = build(D.tree, null, 0);
  const total = root.v || 1;
  let zoomed = root, query = "";
  document.getElementById("title").textContent = D.title;
  document.getElementById("info").textContent = D.offcpu
    ? "off-CPU: " + (D.samples / 1e6).toFixed(2) + " s waited in " + D.waits + " waits, " + D.duration + " s"
    : D.samples + " samples at " + D.hz + " Hz, " + D.duration + " s";
  function amount(v) {
    return D.offcpu ? (v / 1e6).toFixed(3) + " s waited" : v + " sample" + (v === 1 ? "" : "s");
  }
  if (D.left_out)
    document.getElementById("info").textContent += "; " + amount(D.left_out) +
      " in frames under 1/50,000 of the total, not drawn";

  function hash(s) {
    let h = 0;
    for (let k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) | 0;
    return (h >>> 0) / 4294967296;
  }
  const BASE = {root: [0, 0, 80], process: [0, 0, 70], thread: [0, 0, 78], python: [110, 55, 55],
                native: [20, 85, 58], kernel: [40, 85, 52]};
  function colour(n) {
    const b = BASE[n.kind] || BASE.native, r = hash(n.name);
    if (!b[1]) return "hsl(0,0%," + b[2] + "%)";
    return "hsl(" + (b[0] + r * 30) + "," + b[1] + "%," + (b[2] + r * 15) + "%)";
  }
  function matches(n) {
    return query !== "" && n.name.toLowerCase().includes(query);
  }
  function place(n, x, w, depth, ancestor) {
    const e = document.createElement("div");
    e.className = "f" + (ancestor ? " anc" : "") + (matches(n) ? " match" : "");
    e.style.left = (x * 100) + "%";
    e.style.width = (w * 100) + "%";
    e.style.top = (depth * H) + "px";
    e.style.background = colour(n);
    e.textContent = n.name;
    e.dataset.i = n.i;
    chart.appendChild(e);
  }
  function render() {
    chart.textContent = "";
    const px = chart.clientWidth || 1000;
    const path = [];
    for (let a = zoomed.p; a; a = a.p) path.unshift(a);
    path.forEach((a, depth) => place(a, 0, 1, depth, true));
    let deepest = path.length;
    const span = zoomed.v || 1;
    (function layout(n, x, depth) {
      place(n, x, n.v / span, depth, false);
      if (depth > deepest) deepest = depth;
      let cx = x;
      for (const c of n.c) {
        const w = c.v / span;
        if (w * px >= 1) layout(c, cx, depth + 1);
        cx += w;
      }
    })(zoomed, 0, path.length);
    chart.style.height = ((deepest + 1) * H) + "px";
  }
  function describe(n) {
    let s = n.name + "  " + amount(n.v);
    if (D.hz) s += ", " + (n.v / D.hz).toFixed(2) + " s";
    s += ", " + (100 * n.v / total).toFixed(2) + "% of all";
    if (zoomed !== root) s += ", " + (100 * n.v / (zoomed.v || 1)).toFixed(2) + "% of the zoomed frame";
    return s;
  }
  function updateMatched() {
    if (query === "") { matched.textContent = ""; return; }
    let hit = 0;
    (function walk(n) {            // a match's samples count once, not again for a matching callee
      if (matches(n)) { hit += n.v; return; }
      for (const c of n.c) walk(c);
    })(root);
    matched.textContent = "Matched: " + (D.offcpu ? amount(hit) : hit + " samples") + " (" + (100 * hit / total).toFixed(2) + "%)";
  }
  chart.addEventListener("click", (ev) => {
    const i = ev.target.dataset && ev.target.dataset.i;
    if (i === undefined) return;
    zoomed = nodes[+i];
    render();
  });
  chart.addEventListener("mouseover", (ev) => {
    const i = ev.target.dataset && ev.target.dataset.i;
    if (i !== undefined) status.textContent = describe(nodes[+i]);
  });
  chart.addEventListener("mouseleave", () => { status.textContent = " "; });
  document.getElementById("reset").addEventListener("click", () => { zoomed = root; render(); });
  search.addEventListener("input", () => {
    query = search.value.toLowerCase();
    render();
    updateMatched();
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") { zoomed = root; render(); }
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); search.focus(); }
  });
  window.addEventListener("resize", render);
  window.pycoreFlame = {root: root, nodes: nodes, describe: describe};
  render();
})();
</script>
</body>
</html>
"""
