"""speedscope's own file format (``.speedscope.json``): one "sampled" profile per process.

Frames are shared (``shared.frames``: name, file, line); each sample is a
list of frame indexes, root first, and its weight is its time in seconds
(on-CPU: samples over the rate; off-CPU: the time waited).
The schema: https://www.speedscope.app/file-format-schema.json.
"""

from __future__ import annotations

import json
from typing import TextIO

from pycore.profile.stacks import Frame, Profile

__all__ = ["write_speedscope"]

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def write_speedscope(profile: Profile, out: TextIO, name: str = "pycore profile") -> None:
    frames: list[dict] = []
    index: dict[Frame, int] = {}

    def frame_id(f: Frame) -> int:
        i = index.get(f)
        if i is None:
            i = index[f] = len(frames)
            entry: dict = {"name": f.label() if f.kind == "kernel" else f.name}
            if f.file:
                entry["file"] = f.file
            if f.line:
                entry["line"] = f.line
            frames.append(entry)
        return i

    period = profile.unit_seconds
    by_process: dict[int, tuple[list, list]] = {}
    label = profile.labels().__getitem__
    for f in sorted(profile.frames(), key=lambda f: (label(f), f)):
        frame_id(f)
    ids = index.__getitem__
    # The samples in the order of their frames' labels: ids are given in that order, so the stacks'
    # id lists sort as their label lists would, and are made once (sorting by label lists made one
    # list of 90 strings a stack for the sort alone: 6 s for 100,000 stacks, bench/bench_profile.py)
    rows = sorted((list(map(ids, stack)), n) for stack, n in profile.stacks.items())
    for row, n in rows:
        samples, weights = by_process.setdefault(row[0], ([], []))
        samples.append(row[1:])
        weights.append(n * period)
    roots = {ids(stack[0]): stack[0] for stack in profile.stacks}
    profiles = [{"type": "sampled", "name": roots[proc].name, "unit": "seconds", "startValue": 0,
                 "endValue": sum(weights), "samples": samples, "weights": weights}
                for proc, (samples, weights) in by_process.items()]
    # json.dumps, not json.dump: dump() encodes in Python chunk by chunk, dumps() in C (4x faster here)
    out.write(json.dumps({"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": profiles, "name": name,
                          "activeProfileIndex": 0, "exporter": "pycore"}))
