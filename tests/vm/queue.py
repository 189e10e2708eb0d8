"""A kernel's tests as one queue that all its VMs pull from (issue 29).

Dealt ahead of time (each VM a fixed share), a kernel's VMs ended minutes apart: the recorded times
are those of other runs, and a VM that starts late (the second one waits for the host tests) cannot
take over its sibling's rest. Pulled from a queue, each VM takes the next test nobody has taken yet,
so a kernel's VMs end within a test of each other, and the runner may start another VM for whichever
kernel has most left.

The queue is a directory the host shares with the kernel's VMs (9p, ``--rwdir``). A VM takes a
*unit* by creating its claim file with ``O_CREAT | O_EXCL``: QEMU's 9p server makes that ``open(2)``
on the host's file system, where it is atomic, so exactly one VM gets each unit. The claim file names
the VM and the unit's node ids, which is all the host needs to know what is left
(:func:`claimed`) and to check afterwards that every test ran once (:func:`coverage`).

A unit is one test, or a whole module whose tests share work that must run in one process: a module
says so with ``VM_QUEUE = "module"`` (tests/test_tools_023_kernel.py, whose fixture runs every tool of
the module side by side at once). Each VM goes through the units longest first (the times recorded in
tests/vm/durations.json), so the last ones taken are short and the VMs end together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Unit:
    key: str                    # the node id, or the module's path for a whole module
    nodeids: tuple[str, ...]    # in collection order
    cost: float                 # seconds, from the recorded times


def units(nodeids: Sequence[str], weights: Mapping[str, float], whole: Iterable[str] = ()) -> list[Unit]:
    """The units of ``nodeids``, longest first (ties by key). ``whole``: modules (paths) that are one
    unit. A test without a recorded time counts as the median of those with one."""
    default = statistics.median(weights.values()) if weights else 1.0
    whole = set(whole)
    groups: dict[str, list[str]] = {}
    for nodeid in nodeids:
        module = nodeid.split("::", 1)[0]
        groups.setdefault(module if module in whole else nodeid, []).append(nodeid)
    found = [Unit(key, tuple(ids), sum(weights.get(i, default) for i in ids)) for key, ids in groups.items()]
    return sorted(found, key=lambda u: (-u.cost, u.key))


def claim_path(queue: Path, key: str) -> Path:
    return queue / hashlib.sha1(key.encode()).hexdigest()[:24]


def claim(queue: Path, unit: Unit, who: str) -> bool:
    """Take ``unit`` for ``who``: True for the one caller that created its claim file."""
    try:
        fd = os.open(claim_path(queue, unit.key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write("\n".join([who, *unit.nodeids]) + "\n")
    return True


def claimed(queue: Path) -> dict[str, str]:
    """Node id -> the VM that took it, from the claim files written so far. A file being written
    (created, not yet filled) counts once it is filled: the host asks again a second later."""
    taken: dict[str, str] = {}
    try:
        paths = list(queue.iterdir())
    except OSError:
        return taken
    for path in paths:
        try:
            who, *ids = path.read_text().splitlines()
        except (OSError, ValueError):
            continue
        taken.update(dict.fromkeys(ids, who))
    return taken


def coverage(expected: Sequence[str], taken: Mapping[str, str], reported: Mapping[str, Sequence[str]]) -> list[str]:
    """What is wrong with a kernel's run, one line each: a test no VM took, a test taken but absent
    from its VM's junit, a test reported twice. ``reported``: VM name -> the node ids in its junit."""
    problems = []
    if missing := [n for n in expected if n not in taken]:
        problems.append(f"{len(missing)} test(s) ran in no VM: {', '.join(missing[:3])}"
                        + (" ..." if len(missing) > 3 else ""))
    seen: dict[str, str] = {}
    for vm, ids in reported.items():
        for nodeid in ids:
            if nodeid in seen:
                problems.append(f"{nodeid} ran twice ({seen[nodeid]}, {vm})")
            seen[nodeid] = vm
    unreported = [n for n, vm in taken.items() if n not in seen and vm in reported]
    if unreported:
        problems.append(f"{len(unreported)} test(s) taken but not reported by their VM: {', '.join(unreported[:3])}"
                        + (" ..." if len(unreported) > 3 else ""))
    return problems


def left(expected: Sequence[str], taken: Mapping[str, str], weights: Mapping[str, float]) -> float:
    """Seconds of ``expected`` nobody has taken yet, by the recorded times (the median when unknown)."""
    default = statistics.median(weights.values()) if weights else 1.0
    return sum(weights.get(n, default) for n in expected if n not in taken)
