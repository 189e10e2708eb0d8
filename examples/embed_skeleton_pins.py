"""An agent's own BPF program: built with ``pycore build``, typed with ``pycore skel``, its state
pinned so a restarted agent continues it.  Typed: ``mypy --strict`` checks every map, global and
event field against the C (tests/test_agent_api.py runs mypy on it, and on a copy with a field
misspelt).

examples/skeleton-pins/calls.bpf.c counts this process's getppid() calls.  The first "run" of
the agent counts 3 and stops; the second reuses the pinned ``by_pid`` map and counts on to 5; the
per-CPU ``total`` is not pinned and starts again.  A packaged agent builds the object and its
skeleton into its wheel (examples/agent-template); here they are built on first use into
$PYCORE_EXAMPLE_BUILD (default ~/.cache/pycore/examples), which needs clang and libbpf-dev.
Run as root: .venv/bin/python examples/embed_skeleton_pins.py
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parent / "skeleton-pins" / "calls.bpf.c"


def build_dir() -> pathlib.Path:
    """calls.bpf.o and calls_skel.py(i), built once per version of the C source."""
    root = pathlib.Path(os.environ.get("PYCORE_EXAMPLE_BUILD") or pathlib.Path.home() / ".cache/pycore/examples")
    out = root / f"calls-{hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]}"
    if not (out / "calls_skel.pyi").is_file():
        out.mkdir(parents=True, exist_ok=True)
        pycore = [sys.executable, "-m", "pycore"]
        subprocess.run([*pycore, "build", str(SOURCE), "-o", str(out / "calls.bpf.o")], check=True)
        subprocess.run([*pycore, "skel", str(out / "calls.bpf.o"), "-o", str(out / "calls_skel.py")], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def run_agent(pin_dir: str, calls: int) -> None:
    """One life of the agent: open with the pin directory, count ``calls`` getppid()s, report, stop."""
    from calls_skel import CallEvent, Calls

    with Calls.open(pin_dir=pin_dir) as skel:      # by_pid: reused from the last run if pinned there
        skel.rodata.targ_tgid = os.getpid()
        skel.load()
        skel.attach()
        for _ in range(calls):
            os.getppid()
        events: list[CallEvent] = list(skel.rings.events.events(timeout=0.3))
        reused = skel.obj.maps["by_pid"].reused
        count = skel.maps.by_pid.lookup(os.getpid())
        per_cpu = skel.maps.total.lookup_percpu(0)   # one value per CPU
        print(f"run: reused={reused} count={count} events={[e.seq for e in events]} "
              f"total={sum(per_cpu or [])} comm={events[-1].comm if events else None}")


def main() -> None:
    sys.path.insert(0, str(build_dir()))
    pin_dir = f"/sys/fs/bpf/pycore-example-{os.getpid()}"   # on bpffs; created at the first load
    try:
        run_agent(pin_dir, 3)      # first start: creates and pins by_pid
        run_agent(pin_dir, 2)      # restart: continues from 3
    finally:
        from pycore import BpfObject

        with BpfObject(pathlib.Path(sys.path[0]) / "calls.bpf.o", pin_dir=pin_dir) as obj:
            obj.unpin()            # the uninstall step: the pins and their directory go
    print("pins left:", os.path.exists(pin_dir))


if __name__ == "__main__":
    main()
