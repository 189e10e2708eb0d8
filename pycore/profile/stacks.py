"""Frames, whole stacks (root first) and the aggregate every format reads.

A sample's stack, root first: the process (``NAME (PID)``), the thread
(``NAME (TID)``), then the user frames with the Python frames spliced in,
then the kernel frames.  The splice follows py-spy ``--native``: each native
``_PyEval_EvalFrameDefault`` frame runs the Python frames from the newest
down to the one marked ``is_entry`` (the frame that C call started with), so
the innermost such native frame is replaced by the innermost run of Python
frames, and so on outwards.  Runs left over (the native walk stopped early:
CPython built without frame pointers, as Debian's is, gives the kernel's
frame-pointer walk little beyond the leaf) go at the root of the user part,
above the native frames that were unwound: the Python frames are never lost.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

__all__ = ["EVAL_FRAME", "Frame", "Profile", "clean_label", "splice"]

EVAL_FRAME = "_PyEval_EvalFrameDefault"


class Frame(NamedTuple):
    """One frame: ``kind`` is process, thread, python, native or kernel."""

    kind: str
    name: str
    file: str = ""
    line: int = 0

    def label(self) -> str:
        """The frame as folded stacks and the terminal show it."""
        if self.kind == "python":       # a code object that could not be read has no file: [code 0x...]
            return f"{self.name} ({self.file}:{self.line})" if self.file else self.name
        if self.kind == "kernel":
            return f"{self.name}_[k]"
        return self.name


def splice(native: list[Frame], python: list[tuple[Frame, bool]]) -> list[Frame]:
    """User frames root first: ``native`` (root first) with ``python`` ((frame, is_entry), newest
    first) put in place of the ``_PyEval_EvalFrameDefault`` frames that run them."""
    runs: list[list[Frame]] = []          # innermost run first, each root first
    current: list[Frame] = []
    for frame, is_entry in python:
        current.append(frame)
        if is_entry:
            runs.append(current[::-1])
            current = []
    if current:
        runs.append(current[::-1])
    evals = [i for i, f in enumerate(native) if f.name == EVAL_FRAME]
    replaced: dict[int, list[Frame]] = {}
    for pos in reversed(evals):           # innermost eval frame first
        if not runs:
            break
        replaced[pos] = runs.pop(0)
    out: list[Frame] = []
    for run in reversed(runs):            # runs with no native eval frame: outermost first, at the root
        out.extend(run)
    for i, f in enumerate(native):
        out.extend(replaced.get(i, (f,)))
    return out


def clean_label(label: str) -> str:
    """The label with ``;`` as ``:`` and unprintable characters as ``?`` (one folded field)."""
    if label.isprintable() and ";" not in label:
        return label
    return "".join(":" if c == ";" else c if c.isprintable() else "?" for c in label)


class Profile:
    """Whole stacks (root first) with their sample counts (off-CPU: microseconds waited), and what
    the run was."""

    def __init__(self, hz: int, off_cpu: bool = False) -> None:
        self.hz = hz
        self.off_cpu = off_cpu         # a stack's value is the microseconds its thread waited there
        self.waits = 0                 # off-CPU: the waits recorded (a value sums several)
        self.stacks: Counter[tuple[Frame, ...]] = Counter()
        self.duration = 0.0            # seconds sampled
        self.lost = 0                  # samples the ring buffer dropped
        self.python_unread = 0         # samples of a Python process whose frames could not be read
        self.truncated = 0             # samples with more Python frames than the program reads
        # file (as native frames name it) -> (start, end, file offset, build id) of its executable
        # mapping in the first process seen with it; the most sampled process's executable first
        self.mappings: dict[str, tuple[int, int, int, str]] = {}

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    @property
    def unit_seconds(self) -> float:
        """Seconds one unit of a stack's value stands for: a sample's period, or a microsecond."""
        if self.off_cpu:
            return 1e-6
        return 1.0 / self.hz if self.hz else 0.0

    def add(self, stack: tuple[Frame, ...], count: int = 1) -> None:
        self.stacks[stack] += count

    def frames(self) -> set[Frame]:
        """Every distinct frame of every stack."""
        return set().union(*self.stacks) if self.stacks else set()

    def labels(self) -> dict[Frame, str]:
        """Each distinct frame's folded label (:func:`clean_label` of :meth:`Frame.label`), made once.

        The writers look labels up (``map(labels.__getitem__, stack)``, a loop in C) rather than
        format every frame of every stack: 100,000 samples of distinct 200-frame stacks are 20
        million frames but a few thousand distinct ones (bench/bench_profile.py, "writing")."""
        return {f: clean_label(f.label()) for f in self.frames()}

    def functions(self) -> tuple[Counter[Frame], Counter[Frame]]:
        """(self, total) samples per function (a frame without its line), the roots left out;
        total counts a function once per sample however often it recurs."""
        own: Counter[Frame] = Counter()
        func = {f: None if f.kind in ("process", "thread") else _function(f) for f in self.frames()}
        # total's counts in a Counter for each weight, where Counter.update(iterable) counts in C: a
        # loop of total[f] += n over every function of every stack took 6 s for 100,000 stacks of
        # about 90 frames (bench/bench_profile.py, "writing"). On-CPU weights are sample counts, a
        # few small numbers; off-CPU ones are times waited, nearly all distinct: past WEIGHTS of
        # them, the loop
        total: Counter[Frame] = Counter()
        by_weight: dict[int, Counter[Frame]] = {}
        for stack, n in self.stacks.items():
            funcs = set(map(func.__getitem__, stack))
            funcs.discard(None)
            if not funcs:
                continue
            own[func[stack[-1]]] += n        # type: ignore[index]
            counts = by_weight.get(n)
            if counts is None and len(by_weight) < WEIGHTS:
                counts = by_weight[n] = Counter()
            if counts is not None:
                counts.update(funcs)          # type: ignore[arg-type]
            else:
                for f in funcs:
                    total[f] += n             # type: ignore[index]
        for n, counts in by_weight.items():
            for f, k in counts.items():
                total[f] += k * n
        return own, total


#: Profile.functions: how many distinct weights get a Counter of their own
WEIGHTS = 64


def _function(f: Frame) -> Frame:
    return f._replace(line=0) if f.kind == "python" else f
