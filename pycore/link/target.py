"""One probe of ``pycore trace`` to its links: the resolver's ``attach`` tuple, dispatched.

``pycore.lang.probes.Target.attach`` says how a target attaches, as plain
data so that this layer need not know the trace layer's classes:

- ``("begin",)``, ``("end",)``: nothing to attach (the runtime runs them)
- ``("tracepoint", CATEGORY, NAME)``, ``("raw_tracepoint", NAME)``
- ``("tracing", NAME)``: fentry/fexit/tp_btf, loaded with its BTF id
- ``("kprobe", FUNC, OFFSET, RETPROBE)``
- ``("uprobe", PATH, FILE_OFFSET, RETPROBE, SEMAPHORE_OFFSET)``
- ``("perf", "profile", UNIT, N)``, ``("perf", "interval", PERIOD_NS)``,
  ``("perf", "software", CONFIG, COUNT)``, ``("perf", "hardware", CONFIG, COUNT)``
- ``("watchpoint", ADDRESS, LENGTH, HW_BREAKPOINT_BITS)``
- ``("iter", NAME)``: a BPF iterator, run when its link is read (:func:`pycore.link.iter.run_iter`)
"""

from __future__ import annotations

from pycore.link.base import Link

__all__ = ["attach_target", "attach_spec"]


def attach_target(prog: object, target: object, *, pid: int | None = None) -> list[Link]:
    """Attach ``prog`` where ``target.attach`` says (``pid`` filters uprobes and perf samples)."""
    return attach_spec(prog, tuple(getattr(target, "attach", ())), pid=pid)


def attach_spec(prog: object, spec: tuple, *, pid: int | None = None) -> list[Link]:
    """Attach ``prog`` as the ``attach`` tuple ``spec`` says; the links made (none for BEGIN/END)."""
    if not spec:
        raise ValueError("attach: the target has no attach spec")
    kind, args = spec[0], spec[1:]
    if kind in ("begin", "end"):
        return []
    if kind == "tracepoint":
        from pycore.link.tracepoint import attach_tracepoint

        return [attach_tracepoint(prog, args[0], args[1])]
    if kind == "raw_tracepoint":
        from pycore.link.raw_tracepoint import attach_raw_tracepoint

        return [attach_raw_tracepoint(prog, args[0])]
    if kind == "tracing":
        from pycore.link.tracing import attach_tracing

        return [attach_tracing(prog, target=args[0] if args else "")]
    if kind == "kprobe":
        from pycore.link.kprobe import attach_kprobe

        func, offset, ret = (tuple(args) + (0, False))[:3]
        return [attach_kprobe(prog, func, offset or 0, retprobe=bool(ret))]
    if kind == "uprobe":
        from pycore.link.uprobe import attach_uprobe

        path, offset, ret, semaphore = (tuple(args) + (False, 0))[:4]
        return [attach_uprobe(prog, path, offset, pid=-1 if pid is None else pid, retprobe=bool(ret),
                              ref_ctr_offset=semaphore or 0)]
    if kind == "perf":
        from pycore.link import perf

        what = args[0]
        if what == "profile":
            return [perf.attach_profile(prog, args[2], args[1], pid=-1 if pid is None else pid)]
        if what == "interval":
            return [perf.attach_interval(prog, args[1])]
        if what == "software":
            return [perf.attach_software(prog, args[1], args[2])]
        if what == "hardware":
            return [perf.attach_hardware(prog, args[1], args[2])]
    if kind == "iter":
        from pycore.link.iter import attach_iter

        return [attach_iter(prog, args[0])]
    if kind == "watchpoint":
        from pycore.link.watchpoint import attach_watchpoint

        return [attach_watchpoint(prog, args[0], args[1], args[2], pid=-1 if pid is None else pid)]
    raise ValueError(f"attach: unknown attach spec {spec!r}")
