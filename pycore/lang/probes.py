"""Probes of a script, resolved against this kernel and these binaries into attach targets.

A probe as written (``kfunc:vfs_*``, ``tracepoint:syscalls:sys_enter_openat``,
``usdt:/usr/bin/python3.11:python:function__entry``) becomes one
:class:`Target` per program to load: wildcards are expanded with the same
listers ``pycore list`` uses, and each target says how its context holds the
arguments (``args.NAME``, ``argN``, ``retval``) so the code generator can
read them: tracepoint fields at their tracefs offsets, fentry arguments as
the trampoline's u64 array typed from BTF, kprobe/uprobe arguments from
``pt_regs``, USDT arguments by their note's location specs.
"""

from __future__ import annotations

import os
import re

from pycore.lang.errors import MissingFunction, NoMatch, ProbeError, close_matches
from pycore.lang.types import INT64, UINT64, Int, Ptr, Str, Type, from_btf
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from btf import Spec

    from pycore.elf.stapsdt import Arg
    from pycore.kernel.tracefs import Tracefs
    from pycore.listing.kernel import Lister

__all__ = ["CtxField", "Target", "Resolver", "REGS", "PROG_KPROBE", "PROG_TRACEPOINT", "PROG_PERF_EVENT",
           "PROG_RAW_TRACEPOINT", "PROG_TRACING"]

# enum bpf_prog_type / bpf_attach_type (uapi, stable)
PROG_KPROBE, PROG_TRACEPOINT, PROG_PERF_EVENT, PROG_RAW_TRACEPOINT, PROG_TRACING = 2, 5, 7, 17, 26
ATTACH_TRACE_RAW_TP, ATTACH_TRACE_FENTRY, ATTACH_TRACE_FEXIT, ATTACH_TRACE_ITER = 23, 24, 25, 28

# struct pt_regs on x86-64: the System V argument registers, the return value, the ip
PT_REGS = {"r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40, "r11": 48, "r10": 56,
           "r9": 64, "r8": 72, "rax": 80, "rcx": 88, "rdx": 96, "rsi": 104, "rdi": 112,
           "rip": 128, "rsp": 152}
ARG_REGS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
# reg("NAME"): bpftrace's register names on x86-64, at their pt_regs offsets
REGS = {name: 8 * i for i, name in enumerate(
    ("r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx", "dx", "si", "di",
     "orig_ax", "ip", "cs", "flags", "sp", "ss"))}
MAX_FENTRY_ARGS = 12

_ALIASES = {"fentry": "kfunc", "fexit": "kretfunc"}


def _spelled(kind: str, text: str) -> str:
    """The name a kfunc/kretfunc probe goes by in ``probe`` and listings: kfunc/kretfunc when so
    written (bpftrace 0.17, the lab), else fentry/fexit (bpftrace 0.20+'s names: 0.23.2 prints
    fentry:vmlinux:vfs_read for ``fentry:vfs_read`` and ``f:vfs_read``)."""
    written = text.split(":", 1)[0]
    if written in ("kfunc", "kretfunc"):
        return written
    return {"kfunc": "fentry", "kretfunc": "fexit"}.get(kind, kind)


@record(frozen=True)
class CtxField:
    """A value the program reads from its context: ``size`` bytes at ``offset``.

    ``data_loc`` marks a tracepoint ``__data_loc`` field (a u32 whose low half
    is the offset of a string inside the record).
    """

    name: str
    type: Type
    offset: int
    size: int = 8
    signed: bool = False
    data_loc: bool = False
    pointee: str = ""       # a tracepoint's ``struct X *`` field: the C name the checker types it by



@record
class Target:
    """One program to load and attach, for one probe of the script."""

    probe: str                   # the probe's full name, as the ``probe`` builtin prints it
    kind: str                    # normalised: kfunc, kretfunc, tracepoint, uprobe, usdt, BEGIN, ...
    func: str = ""               # what ``func`` prints
    prog_type: int = PROG_RAW_TRACEPOINT
    attach_type: int | None = None
    attach_btf_id: int | None = None
    args: dict[str, CtxField] = field(default_factory=dict)   # args.NAME
    argn: list[CtxField] = field(default_factory=list)        # arg0, arg1, ...
    retval: CtxField | None = None
    usdt_args: tuple[Arg, ...] = ()                           # usdt: argN from the location's specs
    attach: tuple = ()                                        # what pycore.link needs (see Runtime)
    args_record: tuple[str, int] | None = None                # (struct name, size) when ``args`` prints whole
    user: bool = False                                        # pointers it gives point into user memory
    vaddr: int = 0                                            # uprobe/usdt: the probed instruction's link-time address
    debug: object = None                                      # uprobe/usdt: the binary's DWARF (pycore.elf.dwarf.DebugInfo)

    @property
    def is_return(self) -> bool:
        return self.kind in ("kretfunc", "kretprobe", "uretprobe")


def _duration_rate(part: str, text: str) -> tuple[str, ...]:
    """bpftrace 0.24's ``interval:1s``, ``profile:100ms``: a duration as the period, in the largest of
    the units s, ms, us that holds it whole (``1m`` is ``s:60``)."""
    m = re.fullmatch(r"([0-9]+)(ns|us|ms|s|m|h|d)", part)
    if m is None:
        return (part,)
    ns = int(m.group(1)) * {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
                            "d": 86400 * 10**9}[m.group(2)]
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns and ns % size == 0:
            return (unit, str(ns // size))
    raise ProbeError(f"{text}: a period of {part} is finer than the microseconds a probe's period is counted in")


def _suggest(name: str, choices: list[str] | set[str]) -> str:
    near = close_matches(name, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""


def _has_wildcard(text: str) -> bool:
    return any(c in text for c in "*?[")


class Resolver:
    """Turns probe specs into targets; caches BTF, tracefs and ELF look-ups across probes."""

    def __init__(self, *, pid: int | None = None, lister: Lister | None = None) -> None:
        self.pid = pid
        self._lister = lister
        self._tracefs: Tracefs | None = None
        self.skipped: list[str] = []       # wildcard matches that cannot attach, with why
        self.typed = False                 # a uprobe's args and retval typed from DWARF (when the block uses them)
        self.named_types = False           # the block names types: casts look in the binary's DWARF too
        self.several = False               # the block has other attach points (missing_probes applies)
        self._debug: dict[str, object] = {}    # path -> DebugInfo | None, read once a run

    # -- sources ------------------------------------------------------------------------------

    @property
    def lister(self) -> Lister:
        if self._lister is None:
            from pycore.listing.kernel import Lister

            self._lister = Lister(verbose=False)
        return self._lister

    def tracefs(self) -> Tracefs | None:
        """The mounted tracefs: the lister's when there is one, else found without
        it (a script of named tracepoints needs no listing, nor its 3 ms import)."""
        if self._lister is not None:
            return self._lister.tracefs()
        if self._tracefs is None:
            from pycore.kernel.tracefs import find_tracefs

            self._tracefs = find_tracefs()[0]
        return self._tracefs

    @property
    def spec(self) -> Spec:
        return self.lister.spec

    def _spec_or_none(self) -> Spec | None:
        try:
            return self.spec
        except Exception:  # noqa: BLE001 - without BTF, array fields stay integers
            return None

    def debug_info(self, path: str, text: str):  # noqa: ANN201 - a DebugInfo or None
        """The binary's DWARF (its own or its debug file's) as a BTF of its own, or None; read once.
        Not split on the kernel's BTF: the types it gives carry their spec, and a script using a
        libc function's args then never parses the kernel's (35-50 ms of a first run of
        bench/bench_trace.py --only dwarf: its length, which split ids start from, needs a walk)."""
        if path not in self._debug:
            from pycore.elf.dwarf import DebugInfo
            from pycore.errors import ElfError

            try:
                self._debug[path] = DebugInfo.open(path)
            except ElfError as e:
                raise ProbeError(f"{text}: {e}") from None
        return self._debug[path]

    def _listed(self, kind: str, target: str, module: str | None = None) -> list[str]:
        from pycore.listing.patterns import ProbePattern

        return [e.head for e in self.lister.entries(ProbePattern(kind, target, module))]

    # -- probes -------------------------------------------------------------------------------

    def resolve(self, kind: str, target: str, parts: tuple[str, ...], offset: int | None, text: str) -> list[Target]:
        """Every target of one probe as written; a probe that matches nothing is a :class:`ProbeError`."""
        kind = _ALIASES.get(kind, kind)
        method = getattr(self, f"_{kind.lower()}", None)
        if method is None:
            raise ProbeError(f"{text}: unknown probe type {kind!r}")
        targets = method(target, parts, offset, text)
        if not targets:
            raise NoMatch(f"{text}: matches no probe on this system", kind)
        return targets

    def _begin(self, target, parts, offset, text) -> list[Target]:
        return [Target("BEGIN", "BEGIN", attach=("begin",))]

    def _end(self, target, parts, offset, text) -> list[Target]:
        return [Target("END", "END", attach=("end",))]

    def _self(self, target, parts, offset, text) -> list[Target]:
        """``self:signal:SIGUSR1`` (bpftrace 0.22): run when pycore trace gets SIGUSR1, instead of
        printing the maps; bpftrace 0.23.2's one trigger and one signal, with its errors."""
        trigger, sig = (list(parts) + ["", ""])[:2]
        if trigger != "signal":
            raise ProbeError(f"{text}: {trigger} is not a supported trigger")
        if sig != "SIGUSR1":
            raise ProbeError(f"{text}: {sig} is not a supported signal")
        return [Target("self:signal:SIGUSR1", "self", attach=("begin",))]

    def _test(self, target, parts, offset, text) -> list[Target]:
        """``test:NAME`` (bpftrace 0.25): run once by ``pycore trace --test``, BPF_PROG_TEST_RUN, its
        return value the verdict (0 passes); ignored without --test."""
        if not parts or not parts[0]:
            raise ProbeError(f"{text}: test probes must have a name")
        return [Target(f"test:{parts[0]}", "test", func=parts[0], attach=("test",))]

    def _interval(self, target, parts, offset, text) -> list[Target]:
        unit, n = self._rate(parts, text, ("s", "ms", "us", "hz"))
        period_ns = {"s": 10**9, "ms": 10**6, "us": 10**3}.get(unit, 0) * n or 10**9 // n
        return [Target(f"interval:{unit}:{n}", "interval", prog_type=PROG_PERF_EVENT,
                       attach=("perf", "interval", period_ns))]

    def _profile(self, target, parts, offset, text) -> list[Target]:
        unit, n = self._rate(parts, text, ("hz", "s", "ms", "us"))
        return [Target(f"profile:{unit}:{n}", "profile", prog_type=PROG_PERF_EVENT,
                       attach=("perf", "profile", unit, n))]

    def _software(self, target, parts, offset, text) -> list[Target]:
        events = {"cpu-clock": 0, "cpu": 0, "task-clock": 1, "page-faults": 2, "faults": 2,
                  "context-switches": 3, "cs": 3, "cpu-migrations": 4, "migrations": 4,
                  "minor-faults": 5, "major-faults": 6, "alignment-faults": 7, "emulation-faults": 8,
                  "dummy": 9, "bpf-output": 10}
        if not parts or parts[0] not in events:
            raise ProbeError(f"{text}: unknown software event{_suggest(parts[0] if parts else '', events)}")
        count = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1000000 if parts[0] in ("cpu-clock", "cpu", "task-clock") else 1000
        return [Target(f"software:{parts[0]}:{count}", "software", prog_type=PROG_PERF_EVENT,
                       attach=("perf", "software", events[parts[0]], count))]

    def _iter(self, target, parts, offset, text) -> list[Target]:
        """``iter:NAME``: a BPF iterator over the kernel's objects (ctx->task, ctx->vma, ...); every one
        this kernel's BTF has, as bpftrace 0.19+ (0.17 knew task and task_file)."""
        from pycore.listing.kernel import iterators

        name = parts[0] if parts else ""
        found = iterators(self.spec)
        if len(parts) != 1 or name not in found:
            if len(parts) == 2 and parts[0] in found:
                raise ProbeError(f"{text}: pinning an iterator (iter:NAME:PIN) is not in pycore trace")
            raise ProbeError(f"{text}: this kernel's BTF has no iterator bpf_iter_{name or '...'} "
                             f"(it has: {', '.join(found) or 'none'})")
        return [Target(f"iter:{name}", "iter", func=name, prog_type=PROG_TRACING, attach_type=ATTACH_TRACE_ITER,
                       attach_btf_id=found[name], attach=("iter", name))]

    def _watchpoint(self, target, parts, offset, text) -> list[Target]:
        """``watchpoint:ADDRESS:LENGTH:MODE``: a hardware breakpoint (with -p/-c, in that process)."""
        from pycore.link.watchpoint import LENGTHS, breakpoint_type

        addr_text, length_text, mode = parts
        try:
            address = int(addr_text, 0)
        except ValueError:
            raise ProbeError(f"{text}: {addr_text!r} is not an address (a number: 0x7ffd0010, 4210736)") from None
        if not length_text.isdigit() or int(length_text) not in LENGTHS:
            raise ProbeError(f"{text}: the length must be one of {', '.join(map(str, LENGTHS))} bytes")
        try:
            bp_type = breakpoint_type(mode)
        except ValueError as e:
            raise ProbeError(f"{text}: {e}") from None
        return [Target(f"watchpoint:{address:#x}:{length_text}:{mode}", "watchpoint", prog_type=PROG_PERF_EVENT,
                       attach=("watchpoint", address, int(length_text), bp_type))]

    @staticmethod
    def _rate(parts: tuple[str, ...], text: str, units: tuple[str, ...]) -> tuple[str, int]:
        if len(parts) == 1 and parts[0].isdigit():
            parts = (units[0], parts[0])
        elif len(parts) == 1:
            parts = _duration_rate(parts[0], text)
        if len(parts) != 2 or parts[0] not in units or not parts[1].isdigit() or int(parts[1]) <= 0:
            raise ProbeError(f"{text}: expected {text.split(':')[0]}:{'|'.join(units)}:N with N > 0")
        return parts[0], int(parts[1])

    # tracepoints

    def _tracepoint(self, target, parts, offset, text) -> list[Target]:
        if len(parts) != 2:
            raise ProbeError(f"{text}: expected tracepoint:CATEGORY:NAME")
        cat, name = parts
        tracefs = self.tracefs()
        if tracefs is None:
            raise ProbeError(f"{text}: tracefs is not available (mount -t tracefs nodev /sys/kernel/tracing)")
        if _has_wildcard(cat) or _has_wildcard(name):
            names = [h.split(":", 1)[1] for h in self._listed("tracepoint", f"{cat}:{name}")]
        else:
            names = [f"{cat}:{name}"]
        out = []
        for full in names:
            c, n = full.split(":", 1)
            try:
                fields = tracefs.format(c, n)
            except OSError:
                if len(names) == 1:
                    known = [e.split(":", 1)[1] for e in tracefs.available_events() if e.startswith(c + ":")]
                    where = _suggest(n, known) if known else f" (no category {c!r})"
                    raise ProbeError(f"{text}: no such tracepoint{where}") from None
                continue
            t = Target(f"tracepoint:{c}:{n}", "tracepoint", func=f"{c}:{n}", prog_type=PROG_TRACEPOINT,
                       attach=("tracepoint", c, n), user=c == "syscalls")
            for f in fields:
                if f.is_common:
                    continue
                t.args[f.name] = _tracefs_field(f, user=c == "syscalls", spec=self._spec_or_none)
            t.args_record = (f"{c}:{n}", max((f.offset + f.size for f in fields), default=0))
            out.append(t)
        return out

    def _rawtracepoint(self, target, parts, offset, text) -> list[Target]:
        name = parts[-1] if parts else target
        names = [h.rsplit(":", 1)[1] for h in self._listed("rawtracepoint", name)] if _has_wildcard(name) else [name]
        out = []
        for n in names:
            t = Target(f"rawtracepoint:{n}", "rawtracepoint", func=n, prog_type=PROG_RAW_TRACEPOINT,
                       attach=("raw_tracepoint", n))
            t.argn = [CtxField(f"arg{i}", UINT64, 8 * i) for i in range(MAX_FENTRY_ARGS)]
            out.append(t)
        return out

    # kernel functions

    def _kfunc(self, target, parts, offset, text, ret: bool = False) -> list[Target]:
        from btf.kinds import Kind

        module = target or None
        name = parts[-1] if parts else ""
        if not name:
            raise ProbeError(f"{text}: expected {'kretfunc' if ret else 'kfunc'}:[MODULE:]FUNCTION")
        spec = self.spec
        if _has_wildcard(name) or module and _has_wildcard(module):
            from pycore.listing.patterns import ProbePattern

            # The lister's own match: the hookable functions with their BTF ids, so
            # nothing is looked up again by name (ids_named is a linear search of
            # BTF's names, 2.2 ms a name: 170 ms for kfunc:vfs_*'s 77 functions).
            by_name: dict[str, list[int]] = {}
            lister = self.lister
            for _, mod_spec, type_id in lister.functions(
                    ProbePattern("kretfunc" if ret else "kfunc", name, module)):
                if mod_spec is not spec:   # a module's function: its BTF is not vmlinux's (not attached)
                    continue
                n = spec.name(type_id)
                note = lister.fentry_note(spec, type_id)
                if note:                # the lister knows a trampoline would refuse it: say so, go on
                    self.skipped.append(f"{n} ({note.removeprefix('fentry cannot attach: ')})")
                else:
                    by_name[n] = [type_id]
            names = list(by_name)
        else:
            names = [name]
            by_name = {name: spec.ids_named(name, (Kind.FUNC,))}
        out = []
        for n in names:
            ids = by_name.get(n, [])
            if not ids:
                if len(names) == 1:
                    raise MissingFunction(f"{text}: no kernel function {n!r} in BTF{self._near_funcs(n)}",
                                          f"WARNING: No BTF found for {n}, skipping.")
                continue
            func = spec.type(ids[0])
            proto = func.type
            kind = "kretfunc" if ret else "kfunc"
            t = Target(f"{_spelled(kind, text)}:vmlinux:{n}", kind, func=n, prog_type=PROG_TRACING,
                       attach_type=ATTACH_TRACE_FEXIT if ret else ATTACH_TRACE_FENTRY,
                       attach_btf_id=ids[0], attach=("tracing", n))
            params = list(proto.params)
            if proto.variadic or len(params) > MAX_FENTRY_ARGS:
                self.skipped.append(f"{n} (variadic or too many arguments)")
                continue
            for i, p in enumerate(params):
                f = _arg_field(p.name or f"arg{i}", from_btf(spec, p.type_id), 8 * i)
                t.args[f.name] = f
                t.argn.append(f)
            if ret and proto.return_type_id:
                t.retval = _arg_field("retval", from_btf(spec, proto.return_type_id), 8 * len(params))
            out.append(t)
        return out

    def _kretfunc(self, target, parts, offset, text) -> list[Target]:
        return self._kfunc(target, parts, offset, text, ret=True)

    def _near_funcs(self, name: str) -> str:
        from btf.kinds import Kind

        prefix = name[:4].encode()
        try:
            near = [self.spec.name(i) for i in self.spec.ids_matching(prefix + b".*", (Kind.FUNC,))[:5000]]
        except Exception:  # noqa: BLE001 - a suggestion is a courtesy
            return ""
        return _suggest(name, near)

    def _kprobe(self, target, parts, offset, text, ret: bool = False) -> list[Target]:
        name = parts[-1] if parts else ""
        if not name:
            raise ProbeError(f"{text}: expected {'kretprobe' if ret else 'kprobe'}:FUNCTION")
        names = [h.rsplit(":", 1)[1] for h in self._listed("kretprobe" if ret else "kprobe", name)] \
            if _has_wildcard(name) else [name]
        kind = "kretprobe" if ret else "kprobe"
        if self.several and not _has_wildcard(name) and self._untraceable(kind, target, name):
            # bpftrace 0.23.2: a named function among other attach points that the kernel cannot probe
            # is what missing_probes says (biolatency-kp.bt's __blk_account_io_start on 6.12)
            where = f"{target}:" if target else ""
            raise MissingFunction(f"{text}: no traceable kernel function {name!r} "
                                  "(available_filter_functions)",
                                  f"WARNING: could not attach probe {kind}:{where}{name}, skipping.")
        out = []
        for n in names:
            where = f"{target}:" if target else ""     # kprobe:MODULE:FUNC (0.20) names the module, as bpftrace
            t = Target(f"{kind}:{where}{n}" + (f"+{offset}" if offset else ""), kind, func=n, prog_type=PROG_KPROBE,
                       attach=("kprobe", n, offset or 0, ret))
            t.argn = [CtxField(f"arg{i}", UINT64, PT_REGS[r]) for i, r in enumerate(ARG_REGS)]
            if ret:
                t.retval = CtxField("retval", UINT64, PT_REGS["rax"])
            out.append(t)
        return out

    def _untraceable(self, kind: str, module: str, name: str) -> bool:
        """A kernel with kprobes that cannot hook ``name`` (not in available_filter_functions: absent,
        inlined, notrace). Where kprobes are missing altogether, False: attaching says so."""
        if self.lister.kprobes_unavailable():
            return False
        return not self._listed(kind, name, module or None)

    def _kretprobe(self, target, parts, offset, text) -> list[Target]:
        return self._kprobe(target, parts, offset, text, ret=True)

    # user space

    def _binary(self, path: str, text: str) -> str:
        from pycore.elf.usdt import resolve_path
        from pycore.errors import ElfError

        if not path:
            raise ProbeError(f"{text}: which binary? write {text.split(':')[0]}:/path/to/binary:...")
        try:
            return resolve_path(path, self.pid if self.pid else -1)
        except ElfError as e:
            raise ProbeError(f"{text}: {e}") from None

    def _uprobe(self, target, parts, offset, text, ret: bool = False) -> list[Target]:
        from pycore.elf.symbols import functions
        from pycore.errors import ElfError

        kind = "uretprobe" if ret else "uprobe"
        path = self._binary(target, text)
        name = parts[-1] if parts else ""
        if not name:
            raise ProbeError(f"{text}: expected {kind}:BINARY:FUNCTION")
        if self.typed and not _has_wildcard(name):
            self._prefetch_dwarf(path, name)
        wildcard = _has_wildcard(name)
        try:
            # a name: only its functions made (libc's 3k Function records and their sort: ~5 ms of
            # every run of bench/bench_trace.py --only dwarf)
            funcs = functions(path, None if wildcard else name)
            if not funcs and not wildcard:
                funcs = functions(path)          # for the suggestions
        except ElfError as e:
            raise ProbeError(f"{text}: {e}") from None
        from fnmatch import fnmatchcase

        if wildcard:
            chosen = [f for f in funcs if fnmatchcase(f.name, name) or fnmatchcase(f.demangled, name)]
        else:
            chosen = [f for f in funcs if name in (f.name, f.demangled)][:1]
            if not chosen:
                names = {f.demangled for f in funcs}
                raise MissingFunction(f"{text}: no function {name!r} in {path}{_suggest(name, names)}",
                                      f"WARNING: Could not resolve symbol: {path}:{name}, skipping probe.")
        out = []
        seen: set[int] = set()
        for f in sorted(chosen, key=lambda f: f.demangled):
            if f.address in seen:
                continue
            seen.add(f.address)
            from pycore.elf.symbols import file_offset

            # the probe is named by the symbol as the file has it (bpftrace's probe builtin prints
            # the mangled C++ name), func by its demangled name
            t = Target(f"{kind}:{path}:{f.name}" + (f"+{offset}" if offset else ""), kind, func=f.demangled,
                       prog_type=PROG_KPROBE, user=True, vaddr=f.address + (offset or 0),
                       attach=("uprobe", path, file_offset(path, f.address) + (offset or 0), ret, 0))
            t.argn = [CtxField(f"arg{i}", UINT64, PT_REGS[r]) for i, r in enumerate(ARG_REGS)]
            if ret:
                t.retval = CtxField("retval", UINT64, PT_REGS["rax"])
            if self.typed:
                self._dwarf_args(t, path, f.name, text)
            elif self.named_types:
                t.debug = self.debug_info(path, text)
            out.append(t)
        return out

    def _prefetch_dwarf(self, path: str, symbol: str) -> None:
        """Have the binary's DWARF of ``symbol`` read on a thread while its symbols are read here
        (:meth:`pycore.elf.dwarf.DebugInfo.prefetch`): a first run of bench/bench_trace.py --only
        dwarf pays for it.  Errors are reported where the args are read."""
        if path in self._debug:
            return
        from pycore.elf.dwarf import DebugInfo
        from pycore.errors import ElfError

        try:
            dbg = DebugInfo.open(path)
        except ElfError:
            return
        self._debug[path] = dbg
        if dbg is not None:
            dbg.prefetch(symbol)

    def _dwarf_args(self, t: Target, path: str, symbol: str, text: str) -> None:
        """``args.NAME`` and a typed ``retval`` from the binary's DWARF, as bpftrace reads them: the
        first six parameters in their argument registers (x86-64's System V order)."""
        from pycore.errors import ElfError

        dbg = t.debug = self.debug_info(path, text)
        if dbg is None:
            return
        try:
            fn = dbg.function(symbol)
        except ElfError as e:
            raise ProbeError(f"{text}: {e}") from None
        if fn is None:
            return
        for i, (name, type_id) in enumerate(fn.params[:len(ARG_REGS)]):
            f = CtxField(name or f"arg{i}", from_btf(fn.spec, type_id, user=True), PT_REGS[ARG_REGS[i]])
            t.args[f.name] = f
        if t.retval is not None and fn.ret:
            t.retval = CtxField("retval", from_btf(fn.spec, fn.ret, user=True), PT_REGS["rax"])

    def _uretprobe(self, target, parts, offset, text) -> list[Target]:
        return self._uprobe(target, parts, offset, text, ret=True)

    def _usdt(self, target, parts, offset, text) -> list[Target]:
        from fnmatch import fnmatchcase

        from pycore.elf.usdt import UsdtFile
        from pycore.errors import ElfError

        path = self._binary(target, text)
        if len(parts) == 2:
            provider, name = parts
        elif len(parts) == 1:
            provider, name = "*", parts[0]
        else:
            raise ProbeError(f"{text}: expected usdt:BINARY:[PROVIDER:]NAME")
        try:
            with UsdtFile(path) as f:
                probes = f.probes()
                chosen = [p for p in probes if fnmatchcase(p.provider, provider) and fnmatchcase(p.name, name)]
                if not chosen:
                    known = {p.name for p in probes}
                    raise ProbeError(f"{text}: no USDT probe {provider}:{name} in {path}{_suggest(name, known)}")
                out = []
                for p in chosen:
                    for loc in p.locations:
                        t = Target(f"usdt:{path}:{p.provider}:{p.name}", "usdt", func=f"{p.provider}:{p.name}",
                                   prog_type=PROG_KPROBE, user=True, usdt_args=loc.args, vaddr=loc.address,
                                   attach=("uprobe", path, loc.file_offset, False, p.semaphore_offset))
                        t.argn = [CtxField(f"arg{i}", INT64 if a.signed else UINT64, i, a.size, a.signed)
                                  for i, a in enumerate(loc.args)]
                        out.append(t)
                return out
        except ElfError as e:
            raise ProbeError(f"{text}: {e}") from None


def _arg_field(name: str, t: Type, offset: int) -> CtxField:
    """A trampoline argument: a u64 slot, read at the width of its type (the upper bytes may be stale)."""
    if isinstance(t, Int) and t.size in (1, 2, 4):
        return CtxField(name, Int(8, t.signed), offset, t.size, t.signed)
    return CtxField(name, t, offset)


def _tracefs_field(f, user: bool, spec: Callable[[], Spec | None] = lambda: None) -> CtxField:  # noqa: ANN001
    """A tracepoint's field (a tracefs.Field) as the checker types it.

    ``spec`` gives the kernel's BTF only when a field needs it (an integer
    array): loading it costs ~10 ms and ~7 MiB that most tracepoints do not.
    """
    decl = f.decl
    if decl.startswith("__data_loc"):
        return CtxField(f.name, Str(), f.offset, 4, False, data_loc=True)
    if "[" in decl and ("char" in decl.split("[")[0]):
        return CtxField(f.name, Str(f.size), f.offset, f.size, False)
    kspec = spec() if "[" in decl else None
    if kspec is not None:
        # an array of integers (``__u8 saddr_v6[16]``): its element type from BTF, by name
        arr = _tracefs_array(kspec, decl.split("[")[0].rsplit(None, 1)[0], f.size)
        if arr is not None:
            return CtxField(f.name, arr, f.offset, f.size, False)
    if "*" in decl:
        # ``struct __kernel_timespec * rqtp``: typed from BTF by the checker when the field is used
        words = decl.split("*")[0].replace("const ", " ").replace("volatile ", " ").split()
        pointee = " ".join(words) if decl.count("*") == 1 and words[:1] in (["struct"], ["union"]) else ""
        return CtxField(f.name, Ptr(0, user), f.offset, 8, False, pointee=pointee)
    size = f.size if f.size in (1, 2, 4, 8) else 8
    return CtxField(f.name, Int(8, f.signed), f.offset, size, f.signed)


# C's spellings of the integer types, as a tracepoint's format writes them, and the names BTF
# gives them (GCC's): ``unsigned long args[6]`` is an array of BTF's ``long unsigned int``.
_BTF_INT_NAMES = {
    "unsigned": "unsigned int", "long": "long int", "unsigned long": "long unsigned int",
    "long unsigned": "long unsigned int", "short": "short int", "unsigned short": "short unsigned int",
    "long long": "long long int", "unsigned long long": "long long unsigned int", "signed char": "signed char",
    "signed": "int", "signed int": "int", "signed long": "long int", "int unsigned": "unsigned int",
}


def _tracefs_array(spec: Spec, elem: str, size: int) -> Type | None:
    from btf.kinds import Kind
    from btf.layout import sizeof

    from pycore.lang.types import Array

    elem = " ".join(elem.replace("const ", "").split())
    ids = spec.ids_named(_BTF_INT_NAMES.get(elem, elem), (Kind.TYPEDEF, Kind.INT))
    if not ids:
        return None
    esize = sizeof(spec.type(ids[0]))
    if not esize or size % esize:
        return None
    return Array(ids[0], size // esize, esize, False, spec)


def tracefs_mounted() -> bool:
    return os.path.isdir("/sys/kernel/tracing/events")
