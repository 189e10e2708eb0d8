"""The runtime: a checked script loaded, attached, run, and its output formatted.

:class:`Script` goes through the stages in order (parse, resolve probes,
check, generate, load), each one testable on its own; :meth:`start` then
runs BEGIN and attaches the other probes, in bpftrace's order, and the
session (pycore.lang.session) goes on as bpftrace does: events as they
arrive, and at the end (Ctrl-C, ``exit()``, the ``-c`` command or the
traced PID ending) END, then every non-empty map.  Everything native it
makes is owned here and closed in :meth:`close`, so nothing stays attached.
BEGIN and END are raw-tracepoint programs run once with BPF_PROG_TEST_RUN,
in this process, where bpftrace uses a uprobe on itself.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
import sys
import time

from pycore.lang import ast as A
from pycore.lang.check.records import BUCKETED
from pycore.lang.checker import AGGREGATES, Checked, Checker, MapInfo
from pycore.lang.codegen import (TAG_CAT, TAG_CLEAR, TAG_EXIT, TAG_JOIN, TAG_PRINT_MAP,
                                  TAG_PRINT_VALUE, TAG_PRINTF, TAG_SYSTEM, TAG_TIME, TAG_ZERO, TAG_HELPER_ERROR, Action,
                                  Layout,
                                  generate)
from pycore.errors import Closed, FeatureMissing
from pycore.lang.errors import MapNotTypedYet, MissingFunction, NoMatch, ProbeError, ScriptFeatureMissing
from pycore.lang.probes import PROG_RAW_TRACEPOINT, Resolver, Target
from pycore.lang.types import Array, Bool, Buffer, Enum, Inet, Int, Mac, Ptr, Record, Stack, Str, Timestamp, CgroupPath, Username, Strerror, SignalName, SyscallName, Tuple, Type, width
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any, TextIO

__all__ = ["Script", "Event", "Compiled", "DEFAULT_MAP_KEYS"]

DEFAULT_MAP_KEYS = 4096           # bpftrace's BPFTRACE_MAP_KEYS_MAX
# bytes per value of each aggregation: min/max keep [value, set], avg/stats [count, total]
_VALUE_SIZES = {"count": 8, "sum": 8, "min": 16, "max": 16, "avg": 16, "stats": 16, "hist": 8, "lhist": 8,
                "tseries": 24}
RING_SIZE = 1 << 21
_U64 = struct.Struct("<Q")
MAP_HASH, MAP_ARRAY, MAP_PERCPU_HASH, MAP_PERCPU_ARRAY, MAP_STACK_TRACE, MAP_RINGBUF = 1, 2, 5, 6, 7, 27
MAP_LRU_HASH, MAP_LRU_PERCPU_HASH = 9, 10
#: The BPF map type of each kind a map declaration names (let @m = lruhash(N), bpftrace 0.24).
DECLARED_MAP_TYPES = {"hash": MAP_HASH, "lruhash": MAP_LRU_HASH, "percpuhash": MAP_PERCPU_HASH,
                      "percpulruhash": MAP_LRU_PERCPU_HASH}


_FUNCTION_KINDS = frozenset({"kprobe", "kretprobe", "kfunc", "kretfunc", "uprobe", "uretprobe"})


@record
class Event:
    """One output of a running script, as the Python API hands it out.

    ``kind`` is ``printf``, ``print``, ``time``, ``join``, ``cat``,
    ``syscall`` (system()'s output), ``map`` (a map printed by ``print(@m)``
    or at the end), ``lost``, ``error`` (for stderr: a file cat() cannot open), or ``errorf`` /
    ``warnf`` (bpftrace 0.24's printf to stderr: ``name`` is its place, ``file:line:col-end``, and
    ``value_type`` (ERROR or WARNING, file, line, column, place)); ``text`` is what bpftrace would
    print; ``value`` the Python value (for ``map``, a dict).
    """

    kind: str
    text: str
    value: Any = None
    name: str = ""
    value_type: Any = None     # print(x): x's trace type (how -f json writes it)


@record
class Compiled:
    """A program ready to load: the target it serves and its instructions."""

    block: A.ProbeBlock
    target: Target
    checked: Checked
    insns: list = field(default_factory=list)
    listing: str = ""


# Probes on one place fire in the order bpftrace fires them (measured side by side on 6.12,
# tests/test_trace_order_kernel.py): the script's order for tracepoints, uprobes, uretprobes, kprobes,
# kretprobes and kfuncs, and the reverse for kretfuncs. A uprobe's consumers, a kprobe's aggregated
# probes and an fentry trampoline's programs run newest first (the kernel adds each at the head of
# its list), so those kinds attach in reverse; the others in the script's order. Software perf events
# of one kind too: the kernel's list of a CPU's events is newest first (bpftrace 0.17 and 0.23.2 fire
# two software:page-faults:1 blocks in the script's order; tests/test_trace_probes_023.py).
_NEWEST_FIRST = frozenset({"uprobe", "uretprobe", "usdt", "kprobe", "kfunc", "software"})


def attach_order(compiled: list) -> list:
    """The order to attach programs in, so that probes on one place fire in the script's order."""
    first = [c for c in compiled if c.target.kind not in _NEWEST_FIRST]
    return first + [c for c in reversed(compiled) if c.target.kind in _NEWEST_FIRST]


class Script:
    """One bpftrace script, from text to a finished run."""

    def __init__(self, text: str, *, filename: str = "<stdin>", params: tuple[str, ...] = (),
                 pid: int | None = None, unsafe: bool = False, map_keys: int | None = None,
                 ring_size: int = RING_SIZE, environ: Mapping[str, str] | None = None) -> None:
        """``environ``: the ``BPFTRACE_*`` variables to read, as bpftrace reads them (pycore trace
        passes its environment; None reads none); ``map_keys``, when given, sizes the maps whatever
        the script's config block or ``environ`` say."""
        from pycore.lang.config import read_config
        from pycore.lang.expand import NamedOptions, expand
        from pycore.lang.parser import parse_cached

        self.text = text
        self.filename = filename
        # bpftrace 0.24's command line: after '--', '--name[=value]' is an option for the script's
        # getopt(); other words are positional parameters wherever they are
        self.options = NamedOptions(tuple(p for p in params if p.startswith("--") and len(p) > 2))
        self.params = tuple(p for p in params if not (p.startswith("--") and len(p) > 2))
        self.pid = pid
        self.unsafe = unsafe
        self.ring_size = ring_size
        from pycore.lang.sugar import desugar

        # macros expanded first (one may use ppid or comm()), then comm(), ppid, pid(init) made plain
        self.program = desugar(expand(parse_cached(text, filename), options=self.options, filename=filename,
                                      text=text))
        self.resolver = Resolver(pid=pid)
        self.checker = Checker(lambda: self.resolver.spec, self.params, unsafe=unsafe, filename=filename,
                               source=text, program=self.program)
        self.config = read_config(self.program, environ, self.checker.error)
        self.map_keys = map_keys or self.config.max_map_keys
        self.checker.config = self.config
        self.exit_code = 0             # exit(code)'s code (bpftrace 0.21), the status of pycore trace
        self.warn: Callable[[str], object] = lambda line: print(line, file=sys.stderr)   # bpftrace's WARNING lines
        # attach points skipped by missing_probes = warn|ignore: bpftrace 0.23.2 counts them in
        # "Attaching N probes..." and warns after that line, last first (it attaches them in reverse);
        # late_warnings: the caller prints them (pycore trace, after its Attaching line)
        self.missing: list[str] = []
        self.late_warnings = False
        self.compiled: list[Compiled] = []
        self.layout: Layout | None = None
        self._maps: dict[str, Any] = {}
        self._progs: list[Any] = []
        self._links: list[Any] = []
        self._begin: list[Any] = []
        self._end: list[Any] = []
        self._signal: list[Any] = []    # self:signal:SIGUSR1, run when the signal comes
        self.testing = False            # pycore trace --test: BEGIN, the test probes, END; nothing attached
        self.tests: list[tuple[str, Any]] = []      # (name, program) of each test probe, in order
        self._ring = None
        self._closed = False
        self.exited = False
        self._ending = False           # END is running: its output counts again
        self.lost = 0
        self._boot_ns: int | None = None   # the wall clock time at boot, for strftime()
        self._printers: dict[int, tuple[Callable[[bytes], str], bool] | None] = {}   # action -> poll()'s fast path
        self._printf_events: dict[int, Callable[[bytes], Event] | None] = {}   # action index -> fast Event
        self._usernames: dict[int, str] = {}

    # -- stages ----------------------------------------------------------------------------------

    def expand_positionals(self, spec: A.ProbeSpec) -> A.ProbeSpec:
        """``interval:ms:$1``, ``uprobe:$1:main``: the parameters' text in the attach point, as bpftrace
        puts it there ("" for a missing one), then the probe parsed again."""
        import re

        from pycore.lang.errors import ScriptError
        from pycore.lang.parser import parse_probe

        text = re.sub(r"\$(\d+)", lambda m: self.checker.positional_text(A.Positional(int(m.group(1)))), spec.text)
        try:
            return parse_probe(text, spec.pos.line, spec.pos.col)
        except ScriptError as e:
            raise self.checker.error(spec, f"{spec.text} is {text!r} with its parameters, and {e.message}") from None

    def resolve(self) -> list[tuple[A.ProbeBlock, list[Target]]]:
        """Every probe block with its targets on this system."""
        out = []
        self.missing = []
        tests: dict[str, A.ProbeSpec] = {}
        for block in self.program.probes:
            kinds = {spec.kind for spec in block.probes}
            # bpftrace 0.25: test probes run in test mode only, and in test mode nothing is attached
            if ("test" in kinds and not self.testing) or (self.testing and not kinds <= {"BEGIN", "END", "test"}):
                continue
            for spec in block.probes:
                name = spec.parts[0] if spec.kind == "test" and spec.parts else None
                if name in tests:
                    raise self.checker.error(spec, f'"{name}" was used as the name for more than one TEST probe '
                                                   f"(the other at line {tests[name].pos.line})")
                if name is not None:
                    tests[name] = spec
            targets: list[Target] = []
            unmatched = []
            missing = 0     # of unmatched: functions missing_probes lets go
            # a uprobe's args and retval are typed from DWARF only for a block that uses them (reading
            # DWARF costs milliseconds a function: uprobe:libc:* would read every one of them)
            nodes = list(A.walk(block))
            self.resolver.typed = any(isinstance(n, A.Builtin) and n.name in ("args", "retval") for n in nodes)
            self.resolver.named_types = any(isinstance(n, (A.Cast, A.TypeName)) for n in nodes)
            self.resolver.several = len(block.probes) > 1
            for spec in block.probes:
                if "$" in spec.text:
                    spec = self.expand_positionals(spec)
                try:
                    targets.extend(self.resolver.resolve(spec.kind, spec.target, tuple(spec.parts),
                                                         spec.offset, spec.text))
                except NoMatch as e:
                    # as bpftrace 0.17: a function wildcard, one of several attach points, that matches
                    # nothing here is left out (dcsnoop.bt's kprobe:lookup_fast.constprop.* on a kernel
                    # that made no such clone); a tracepoint wildcard is an error, there as here
                    if e.kind not in _FUNCTION_KINDS or len(block.probes) == 1:
                        raise self.checker.error(spec, str(e)) from None
                    unmatched.append(self.checker.error(spec, str(e)))
                except MissingFunction as e:
                    # bpftrace 0.23.2: a missing function among other attach points is what the config's
                    # missing_probes says (warn by default); alone, an error
                    policy = self.config.missing_probes
                    if len(block.probes) == 1 or policy == "error":
                        raise self.checker.error(spec, str(e)) from None
                    self.missing.append(e.warning)
                    if policy == "warn" and not self.late_warnings:
                        self.warn(e.warning)
                    unmatched.append(self.checker.error(spec, str(e)))
                    missing += 1
                except ProbeError as e:
                    raise self.checker.error(spec, str(e)) from None
            if unmatched and not targets:
                if missing == len(unmatched):
                    # every attach point a missing function missing_probes lets go: bpftrace 0.23.2 runs
                    # the script without the block (biolatency-kp.bt on 6.12, where neither
                    # blk_account_io_start nor __blk_account_io_start can be hooked)
                    continue
                raise unmatched[0]
            if any(t.kind == "iter" for t in targets) and (len(targets) > 1 or any(
                    t.kind == "iter" for _, ts in out for t in ts)):
                raise self.checker.error(block, "only one iter probe is allowed in a script, as in bpftrace "
                                                "(its walk ends the script)")
            out.append((block, targets))
        if not out and not self.testing:
            first = next((s for b in self.program.probes for s in b.probes if s.kind == "test"), None)
            if first is not None:
                raise self.checker.error(first, "No probes attached; use --test to run test probes")
        return out

    def check(self) -> list[Compiled]:
        """Type every block against every target it attaches to."""
        if self.compiled:
            return self.compiled
        later: list[tuple[int, A.ProbeBlock, Target]] = []
        for block, targets in self.resolve():
            for t in targets:
                try:
                    self.compiled.append(Compiled(block, t, self.checker.check(block, t)))
                except MapNotTypedYet:   # a for loop over a map a later block assigns: once they have
                    later.append((len(self.compiled), block, t))
                    self.compiled.append(None)   # type: ignore[arg-type]
        for i, block, t in later:
            self.compiled[i] = Compiled(block, t, self.checker.check(block, t))
        for i, c in enumerate(self.compiled):
            # a map loop's (key, value) as the whole script types the map (a later block may widen a
            # string key or value): checked again once every block has been
            if c.checked.loops:
                self.compiled[i] = Compiled(c.block, c.target, self.checker.check(c.block, c.target))
        for m in self.checker.maps.values():
            if not m.kind:
                m.kind = "int"
                m.value = m.value or Int(8, True)
            if m.keys is None:
                m.keys = ()
        self.checker.map_declarations()
        self.layout = Layout(self.checker.maps, cpid=self.checker.cpid)
        return self.compiled

    def plan(self) -> str:
        """What --dry-run prints: each program, where it attaches, and how."""
        lines = []
        for c in self.check():
            t = c.target
            lines.append(f"{t.probe}  ({_method(t)})")
        for m in self.layout.maps.values():
            keys = ", ".join(str(k) for k in m.keys or ()) or "-"
            decl = f" ({m.decl.kind}, {m.decl.max_entries} keys)" if m.decl is not None else ""
            lines.append(f"map {m.name}[{keys}]: {m.kind}{decl}")
        return "\n".join(lines)

    # -- native resources ---------------------------------------------------------------------------

    def _create_maps(self) -> dict[str, int]:
        from pycore.native.program import create_map

        fds: dict[str, int] = {}
        for m in self.layout.maps.values():
            kind = m.kind
            key_size = m.key_size + (8 if kind in BUCKETED else 0)
            value_size = _VALUE_SIZES.get(kind) or (width(m.value) if m.value is not None else 8)
            map_type = MAP_PERCPU_HASH if kind in AGGREGATES else MAP_HASH
            if m.decl is not None:      # its declaration's kind (checked against its use) and size
                map_type = DECLARED_MAP_TYPES[m.decl.kind]
            mp = create_map(map_type, key_size, value_size, self.map_size(m.name), name=_map_name(m.name))
            self._maps[m.name] = mp
            fds[m.name] = mp.fd
        start = create_map(MAP_ARRAY, 4, 8, 1, name="start")
        self._maps["$start"] = start
        fds["$start"] = start.fd
        ring = create_map(MAP_RINGBUF, 0, 0, self.ring_size, name="ring")
        self._maps["$ring"] = ring
        fds["$ring"] = ring.fd
        return _LazyStackMaps(fds, self._maps)

    def load(self, verbose: bool = False) -> None:
        """Create the maps, generate and load every program."""
        from pycore.lang.emit import Emitter
        from pycore.native.program import create_map

        self.check()
        fds = self._create_maps()
        # The scratch map is as large as the programs need, known once they are all generated: they
        # are generated with a stand-in fd, which then becomes the map's (dup2) before they load.
        stand_in = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        try:
            fds["$scratch"] = stand_in
            emitted = []
            for c in self.compiled:
                em = Emitter()
                generate(c.checked, self.layout, em, fds, self.params, (self.filename, self.text))
                c.insns = em.assemble()
                if verbose:
                    c.listing = em.disassemble()
                emitted.append((c, em))
            size = max(self.layout.scratch_used, self.layout.counters_end, 8)
            scratch = self._maps["$scratch"] = create_map(MAP_PERCPU_ARRAY, 4, (size + 7) // 8 * 8, 1, name="scratch")
            os.dup2(scratch.fd, stand_in)
            self._load(emitted)
        finally:
            os.close(stand_in)

    def _load(self, emitted: list) -> None:
        """Load each generated program (and sort them: BEGIN, END, SIGUSR1, the attached ones)."""
        from pycore.native.program import load_program

        for c, em in emitted:
            t = c.target
            prog_type = t.prog_type if t.kind not in ("BEGIN", "END", "self", "test") else PROG_RAW_TRACEPOINT
            try:
                prog = load_program(c.insns, prog_type, name=_prog_name(t),
                                    expected_attach_type=t.attach_type, attach_btf_id=t.attach_btf_id,
                                    funcs=em.funcs)
            except OSError as e:
                raise self._load_error(c, e, em) from None
            self._progs.append(prog)
            if t.kind == "BEGIN":
                self._begin.append(prog)
            elif t.kind == "END":
                self._end.append(prog)
            elif t.kind == "self":
                self._signal.append(prog)
            elif t.kind == "test":
                self.tests.append((t.func, prog))
            else:
                c.prog = prog  # type: ignore[attr-defined]

    def _load_error(self, c: Compiled, exc: OSError, em: Any) -> Exception:
        """The verifier's refusal told in script terms: which statement, and why in a few words."""
        import re

        from pycore.lang.errors import CheckError

        log = "\n".join(getattr(exc, "log", []) or [])
        tail = exc.verifier_tail() if hasattr(exc, "verifier_tail") else ""
        lines = [ln for ln in log.splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if not re.match(r"^\d+: |^processed |^verification time|^stack depth", ln)),
                      "") or str(exc)
        m = re.search(r"processed (\d+) insns \(limit (\d+)\)", log)
        if m and int(m.group(1)) >= int(m.group(2)) or "too large" in log or "too complex" in log:
            reason = (f"the verifier gave up after {int(m.group(2)):,} instructions: a loop it cannot bound "
                      "(bound while loops by a constant, e.g. while ($i < 100))")
        if re.search(r"(unknown func|cannot use helper) bpf_override_return", log):   # 6.1, 6.12
            reason = ("this kernel cannot override a function's return: it is built without "
                      "CONFIG_BPF_KPROBE_OVERRIDE (Debian's kernels are)")
        if re.search(r"(unknown func|cannot use helper) bpf_probe_write_user", log):   # write_user()
            mode = _lockdown()
            reason = (f"this kernel forbids bpf_probe_write_user (write_user()): its lockdown is {mode}; "
                      "only a kernel with lockdown=none allows it" if mode not in ("", "none")
                      else "this kernel does not give BPF programs bpf_probe_write_user (write_user())")
        if getattr(exc, "errno", 0) == 1 and c.target.kind in ("kfunc", "kretfunc"):
            reason = ("this kernel refuses fentry/fexit (BPF trampolines); use kprobe:/kretprobe: where the "
                      "kernel has kprobes, or a tracepoint")
        node = c.block
        insn = [int(x) for x in re.findall(r"(?m)^(\d+): ", log)]
        if insn:
            found = em.node_at(insn[-1])
            if found is not None:
                node = found
        err = CheckError(f"the kernel refused the program for {c.target.probe}: {reason}",
                         node.pos.line, node.pos.col, self.filename, self.text)
        err.verifier = tail  # type: ignore[attr-defined]
        return err

    def start(self) -> int:
        """What bpftrace's run does, in its order: elapsed's clock started, BEGIN run, then every other
        probe attached, then the iter: walks; returns the probe count.

        BEGIN runs before anything else is attached, so its records are the first in the ring and its
        output comes first, whatever fires as soon as a probe is attached (an exec in another process,
        under execsnoop.bt: its line came above the header when BEGIN ran after attaching)."""
        self._start_clock()
        self.run_special("BEGIN")
        n = self.attach(clock=False)
        self.run_iterators()
        return n + len(self.missing)     # bpftrace 0.23.2 counts the probes missing_probes skipped

    def _start_clock(self) -> None:
        """``elapsed`` counts from here (bpftrace writes its start time just before BEGIN)."""
        self._maps["$start"].update(struct.pack("<I", 0), struct.pack("<Q", time.monotonic_ns()))

    def attach(self, clock: bool = True) -> int:
        """Attach every loaded program (BEGIN and END are run, not attached); returns how many probes
        are attached (bpftrace's count).  ``clock``: ``elapsed`` counts from here (:meth:`start` starts
        it before BEGIN instead)."""
        from pycore.link import attach_target

        n = len(self._begin) + len(self._end) + len(self._signal)
        for c in attach_order(self.compiled):
            prog = getattr(c, "prog", None)
            if prog is None:
                continue
            try:
                links = attach_target(prog, c.target, pid=self.pid)
            except FeatureMissing as e:   # no kprobe PMU...: said at the probe, as a ScriptError too
                raise ScriptFeatureMissing(e, c.block.pos.line, c.block.pos.col, self.filename,
                                           self.text) from None
            except OSError as e:
                from pycore.lang.errors import CheckError

                raise CheckError(f"cannot attach {c.target.probe}: {e}", c.block.pos.line, c.block.pos.col,
                                 self.filename, self.text) from None
            self._links.extend(links)
            n += 1
        if clock:
            self._start_clock()
        return n

    def detach(self) -> None:
        """Detach every probe, keeping maps, ring and END: what a run does first when it ends, so that
        nothing new arrives while the ring's records and the maps are printed (bpftrace does the same).
        In the order they were attached, as bpftrace: a script's first probe (the lab's contention_begin)
        stops before its last (contention_end), which would otherwise miss the ends of what began
        while the first waited for its detach (an RCU grace period), and leave them in the map."""
        for link in self._links:
            link.close()
        self._links.clear()

    def close(self) -> None:
        """Detach and free everything; safe twice."""
        if self._closed:
            return
        self._closed = True
        self.detach()
        if self._ring is not None:
            self._ring.close()
        for p in self._progs:
            p.close()
        self._progs.clear()
        for m in self._maps.values():
            m.close()
        self._maps.clear()

    def __enter__(self) -> Script:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ------------------------------------------------------------------------------------

    def ring(self):  # noqa: ANN201
        if self._ring is None:
            from pycore.native.ringbuf import RingBuffer

            # losses are counted by the programs themselves (output(): a failed ringbuf_output adds one in
            # the scratch map's per-CPU counter), whatever the ring's size
            self._ring = RingBuffer.from_fd(self._maps["$ring"].fd, decode=bytes, lost=self.lost_events)
        return self._ring

    def run_special(self, which: str) -> None:
        """Run the BEGIN, END or self:signal:SIGUSR1 programs once, in this process (BEGIN: before
        :meth:`attach`, as :meth:`start` does; END: after :meth:`detach`, so that their output is first
        and last; SIGUSR1: when the signal comes)."""
        if which == "END":
            self._ending = True
        for prog in {"BEGIN": self._begin, "END": self._end, "SIGUSR1": self._signal}[which]:
            prog.test_run()

    @property
    def on_sigusr1(self) -> bool:
        """Whether the script has a ``self:signal:SIGUSR1`` probe (then SIGUSR1 runs it, and the maps
        are not printed, as in bpftrace 0.22+)."""
        return bool(self._signal)

    def run_iterators(self) -> None:
        """iter: probes walk their objects once, after BEGIN; then the script ends (as in bpftrace, where
        a script has one iter probe at most)."""
        iters = [link for link in self._links if link.kind == "iter"]
        if not iters:
            return
        from pycore.link.iter import run_iter

        for link in iters:      # each walk's last call records an exit(): the script ends there
            run_iter(link)

    def poll(self, handle: Callable[[Event], None], timeout: float, *, printf: Callable[[str], object] | None = None,
             text: Callable[[str], object] | None = None, until: Callable[[], bool] | None = None) -> int:
        """Hand each record now in the ring to ``handle``; returns how many.

        ``printf``, when given, takes the text of printf() records directly, without an Event, where
        their arguments are integers and strings (pycore trace's output: ~2 us a line, not ~11);
        ``text``, when given with it, takes time()'s text so (capable.bt's time() + printf flood:
        18.3 -> 16.9 us an event, bench/bench_trace.py --only flood).
        ``until`` is asked after each record: once true, the rest waits for the next call (Ctrl-C).
        """
        n = 0
        printers = self._printers
        actions = self.layout.actions

        def one(data: bytes) -> None:
            nonlocal n
            n += 1
            if printf is not None:
                idx = _U64.unpack_from(data)[0]
                fast = printers.get(idx, False)
                if fast is False:
                    fast = printers[idx] = self._printer(actions[idx])
                if fast is not None:
                    make, timed = fast
                    sink = text if timed else printf
                    if sink is not None:
                        if not self.exited or self._ending:
                            sink(make(data))
                        return
            for ev in self.decode(data):
                handle(ev)

        self.ring().poll(one, timeout, until)
        return n

    def _printer(self, a: Action) -> tuple[Callable[[bytes], str], bool] | None:
        """(record -> text, whether it is time()'s) for :meth:`poll`'s fast path: a printf's in one
        struct read and a compiled format, time()'s as :meth:`decode` makes it; None for the general
        path (other actions, printf arguments other than integers, pointers and strings)."""
        if a.tag == TAG_TIME:
            fmt_time = a.text

            def now(data: bytes) -> str:
                return time.strftime(fmt_time, time.localtime())

            return now, True
        parts = self._printf_parts(a)
        if parts is None:
            return None
        values, fmt = parts

        def text(data: bytes) -> str:
            return fmt(values(data))

        return text, False

    def event_fast(self, data: bytes) -> Event | None:
        """The Event of a printf record whose arguments are integers, pointers and strings, as
        :meth:`decode` makes it, in one struct read and a compiled format; None for every other record
        (and after exit()), which :meth:`decode` then takes.

        Why: :meth:`decode` scans the format with regular expressions at each record and walks each
        argument's type; a consumer woken for one record (TraceSession.events(), ``async for``) runs
        that on cold caches, ~25 us of its wake-up latency (bench/wakeup.py, issue 24)."""
        idx = _U64.unpack_from(data)[0]
        make = self._printf_events.get(idx, False)
        if make is False:
            make = self._printf_events[idx] = self._printf_event(self.layout.actions[idx])
        if make is None or (self.exited and not self._ending):
            return None
        return make(data)

    def _printf_event(self, a: Action) -> Callable[[bytes], Event] | None:
        parts = self._printf_parts(a)
        if parts is None:
            return None
        values, fmt = parts

        def event(data: bytes) -> Event:
            v = values(data)
            return Event("printf", fmt(v), v)

        return event

    def _printf_parts(self, a: Action) -> tuple[Callable[[bytes], list[Any]], Callable[[list[Any]], str]] | None:
        """(record -> the values :meth:`_values` decodes, values -> the text :func:`format_printf` makes) of a
        printf whose arguments are integers (without a display), pointers and strings; else None."""
        from pycore.lang.output import compile_printf

        if a.tag != TAG_PRINTF or a.extra:
            return None
        fmt = compile_printf(a.text)
        if fmt is None:
            return None
        codes, strings, pos = ["<8x"], [], 8
        for i, t in enumerate(a.args):
            if type(t) is Str:
                codes.append(f"{t.size}s{width(t) - t.size}x")
                strings.append(i)
            elif (type(t) is Int and not t.display) or type(t) is Ptr:
                codes.append("q" if type(t) is Int and t.signed else "Q")
                codes.append(f"{width(t) - 8}x" if width(t) > 8 else "")
            else:
                return None
            pos += width(t)
        reader = struct.Struct("".join(codes))
        if reader.size != pos:
            return None
        unpack = reader.unpack_from

        cut = self.truncated()
        cut_at = [i for i in strings if a.args[i].size >= self.config.max_strlen] if cut else []

        def values(data: bytes) -> list[Any]:
            if len(data) < pos:       # a record that ends with a string comes up to its NUL (emit_record)
                data = data.ljust(pos, b"\0")
            out = list(unpack(data))
            for i in strings:
                out[i] = _cstr(out[i])
            for i in cut_at:
                out[i] = cut(out[i])
            return out

        return values, fmt

    def truncated(self) -> Callable[[str], str] | None:
        """What printf does to a ``%s`` string that filled its buffer, as bpftrace 0.21+ guesses it was
        cut: the config's str_trunc_trailer (".."; "" for none) after it. None when nothing is added."""
        trailer = self.config.others.get("str_trunc_trailer", "..")
        if not trailer:
            return None
        full = self.config.max_strlen - 1

        def cut(s: str) -> str:
            return s + trailer if 4 * len(s) >= full and len(s.encode("utf-8", "surrogateescape")) == full else s

        return cut

    def lost_events(self) -> int:
        """Events the ring had no room for (all CPUs, since the load)."""
        return self.counters()[0]

    def refused_keys(self) -> dict[str, int]:
        """Map name -> new keys it refused because it was full (all CPUs' counts, since the load);
        every map of the script, 0 for most."""
        return self.counters()[1]

    def map_size(self, name: str) -> int:
        """How many keys map ``name`` (``@m``) holds at most: its declaration's, else ``map_keys``."""
        m = self.layout.maps.get(name) if self.layout is not None else None
        return m.decl.max_entries if m is not None and m.decl is not None else self.map_keys

    def counters(self) -> tuple[int, dict[str, int]]:
        """(lost events, {map: keys refused}): both counted in the per-CPU scratch entry, read with one
        lookup (a scrape of pycore serve asks for both)."""
        scratch = self._maps.get("$scratch")
        if scratch is None:
            return 0, {}
        values = scratch.lookup_percpu(struct.pack("<I", 0))
        lost = sum(struct.unpack_from("<Q", v)[0] for v in values)
        if self.layout is None:
            return lost, {}
        return lost, {name: sum(struct.unpack_from("<Q", v, self.layout.refused_off(name))[0] for v in values)
                      for name in self.layout.maps}

    # -- records ------------------------------------------------------------------------------------

    def decode(self, data: bytes) -> Iterator[Event]:
        """The events one ring-buffer record stands for."""
        from pycore.lang import output as O

        idx = struct.unpack_from("<Q", data)[0]
        a: Action = self.layout.actions[idx]
        tag = a.tag
        if self.exited and not self._ending:
            return                      # as bpftrace: what follows exit() is dropped, until END
        if tag == TAG_PRINTF:
            values = self._values(data, a.args)
            if any(isinstance(t, Bool) for t in a.args):     # %s of true: the word, as bpftrace 0.23
                values = [("true" if v else "false") if isinstance(t, Bool) and m.group(1) == "s" else v
                          for v, t, m in zip(values, a.args, O.specifiers(a.text))]
            cut = self.truncated()
            if cut is not None:
                values = [cut(v) if type(t) is Str and t.size >= self.config.max_strlen else v
                          for v, t in zip(values, a.args)]
            text = O.format_printf(a.text, values)
            if a.extra:     # errorf()/warnf(): (ERROR or WARNING, file, line, column, where)
                yield Event("errorf" if a.extra[0] == "ERROR" else "warnf", text, values, a.extra[4], a.extra)
            else:
                yield Event("printf", text, values)
        elif tag == TAG_EXIT:
            if a.args and not self.exited:    # exit(code): pycore trace's exit status (bpftrace 0.21)
                self.exit_code = self._values(data, a.args)[0] & 0xFF
            self.exited = True
        elif tag == TAG_PRINT_MAP:
            name = a.text
            ev = Event("map", self.map_text(name, *a.extra), self.map_value(name), name)
            ev.extra = a.extra  # type: ignore[attr-defined]
            yield ev
        elif tag in (TAG_CLEAR, TAG_ZERO):
            self.clear_map(a.text, zero=tag == TAG_ZERO)
        elif tag == TAG_TIME:
            text = time.strftime(a.text, time.localtime())
            yield Event("time", text)
        elif tag == TAG_PRINT_VALUE:
            values = self._values(data, a.args)
            if a.text == "args":
                text = O.format_fields(dict(zip(a.extra, values)), a.args)
            else:
                text = O.format_value(values[0], a.args[0])
            if a.text == "args":
                yield Event("print", text + "\n", dict(zip(a.extra, values)))
            else:
                yield Event("print", text + "\n", values[0], value_type=a.args[0])
        elif tag == TAG_JOIN:
            parts = [s.split(b"\0", 1)[0].decode("utf-8", "replace") for s in
                     (data[8 + 64 * i: 8 + 64 * (i + 1)] for i in range(16))]
            # the words up to the first empty one, as bpftrace prints them: execve's argv ends at its
            # NULL, and the slots after it hold what followed the array (the environment, or junk)
            words = list(itertools.takewhile(bool, parts))
            yield Event("join", a.text.join(words) + "\n", words)
        elif tag == TAG_HELPER_ERROR:     # bpftrace 0.23.2's warning, among the output (stdout)
            retcode = self._values(data, a.args)[0]
            helper, where = a.extra[0], a.extra[1:]
            ev = Event("helper_error", O.helper_error_text(a.text, self.text, helper, retcode, where), retcode)
            ev.json = O.helper_error_json(helper, retcode, where)  # type: ignore[attr-defined]
            yield ev
        elif tag in (TAG_SYSTEM, TAG_CAT):
            values = self._values(data, a.args)
            text = O.format_printf(a.text, values)
            if tag == TAG_SYSTEM:
                import subprocess

                r = subprocess.run(text, shell=True, capture_output=True, text=True)  # noqa: S602 - --unsafe
                yield Event("syscall", r.stdout, r.stdout)      # bpftrace's json type for system()
            else:
                try:
                    with open(text) as f:
                        yield Event("cat", f.read(), text)
                except OSError as e:
                    yield Event("error", f"ERROR: failed to open file '{text}': {e.strerror}\n", text)

    def _values(self, data: bytes, types: list[Type]) -> list[Any]:
        out: list[Any] = []
        pos = 8
        for t in types:
            out.append(self._decode(data, pos, t))
            pos += width(t)
        return out

    def _decode(self, data: bytes, pos: int, t: Type) -> Any:
        """The value of type ``t`` at ``data[pos:]`` (a record, key or map value), as printed."""
        if isinstance(t, Str):
            return _cstr(data[pos:pos + t.size])
        if isinstance(t, (Record, Array)):
            return data[pos:pos + t.size]
        if isinstance(t, Tuple):
            return tuple(self._decode(data, pos + off, et) for off, et in zip(t.offsets(), t.elems))
        if isinstance(t, Buffer):   # bytes: %r, print and map keys show them escaped (hex_buffer)
            (length,) = struct.unpack_from("<Q", data, pos)
            return bytes(data[pos + 8:pos + 8 + min(length, t.size - 8)])
        if isinstance(t, Inet):
            from pycore.lang.output import format_inet, format_mac

            return format_mac(data[pos + 8:pos + 14]) if isinstance(t, Mac) else format_inet(data[pos:pos + 24])
        (v,) = struct.unpack_from("<Q", data, pos)
        if isinstance(t, Int) and t.display == "usym":
            return self.usym(v, struct.unpack_from("<Q", data, pos + 8)[0] if len(data) >= pos + 16 else 0)
        return self._scalar(v, t)

    def _scalar(self, v: int, t: Type) -> Any:
        if isinstance(t, Int):
            if t.signed and v >= 1 << 63:
                v -= 1 << 64
            if t.display == "ksym":
                return self.ksym(v)
            if isinstance(t, Timestamp):
                return self.strftime(t.fmt, v)
            if isinstance(t, CgroupPath):
                from pycore.kernel.cgroup import cgroup_paths

                return cgroup_paths(v, t.filter)
            if isinstance(t, Username):
                return self.username(v)
            if isinstance(t, Enum):
                from pycore.lang.output.values import EnumValue

                return EnumValue(v, t.names().get(v, str(v)))
            if isinstance(t, SyscallName):
                from pycore.lang.syscalls import syscall_name

                return syscall_name(v)
            if isinstance(t, SignalName):
                from pycore.lang.signals import signal_name

                return signal_name(v)
            if isinstance(t, Strerror):
                return os.strerror(v & 0xFFFFFFFF if v & 0xFFFFFFFF < 1 << 31 else (v & 0xFFFFFFFF) - (1 << 32))
            return v
        if isinstance(t, Stack):
            return self.stack(v, t)
        return v

    def username(self, uid: int) -> str:
        """A uid's user name from the passwd database (the uid itself when it has none), as bpftrace."""
        name = self._usernames.get(uid)
        if name is None:
            import pwd

            try:
                name = pwd.getpwuid(uid).pw_name
            except (KeyError, OverflowError):
                name = str(uid)
            self._usernames[uid] = name
        return name

    def strftime(self, fmt: str, since_boot_ns: int) -> str:
        """strftime(fmt, ns): the wall clock time ``ns`` after boot, local time, ``%f`` its microseconds,
        as bpftrace (boot's wall clock time is read once, as the difference of the two clocks)."""
        if self._boot_ns is None:
            self._boot_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        wall = self._boot_ns + since_boot_ns
        if "%f" in fmt:     # the microseconds of the same instant as the seconds (no separate reading
            micros = f"{wall % 1_000_000_000 // 1000:06d}"      # to roll over between); '%%f' stays literal
            fmt = re.sub(r"%(.)", lambda m: micros if m.group(1) == "f" else m.group(0), fmt)
        try:
            return time.strftime(fmt, time.localtime(wall // 1_000_000_000))
        except (ValueError, OverflowError, OSError):
            return f"(strftime: {since_boot_ns} ns out of range)"

    # symbols and stacks

    def ksym(self, addr: int) -> str:
        from pycore.kernel.kallsyms import TextSymbols

        if not hasattr(self, "_ksyms"):
            self._ksyms = TextSymbols()
        found = self._ksyms.lookup(addr)
        if found:
            return found[0]
        return f"0x{addr:x}" if addr else "0"     # bpftrace's (void *)addr: 0 prints as 0

    @property
    def user_symbols(self):  # noqa: ANN201 - pycore.lang.usyms.UserSymbols
        if not hasattr(self, "_usyms"):
            from pycore.lang.usyms import UserSymbols

            self._usyms = UserSymbols(demangle=self.config.cpp_demangle)
        return self._usyms

    def usym(self, addr: int, pid: int) -> str:
        """usym(addr) as bpftrace prints it: the symbol of ``addr`` in process ``pid``, or the address."""
        from pycore.lang.usyms import format_usym

        return format_usym(self.user_symbols.lookup(pid, addr) if pid else (None, 0, None), addr)

    def stack(self, key: int, t: Stack) -> tuple[str, ...] | str:
        """A kstack/ustack: its frames (bpftrace mode), or the text bpftrace's perf mode prints."""
        sid = key & 0xFFFFFFFF
        if sid >= 1 << 31:
            return () if not t.mode else "\n"
        name = f"$stack:{'u' if t.user else 'k'}:{t.limit}"
        mp = self._maps.get(name)
        raw = mp.lookup(struct.pack("<I", sid)) if mp is not None else None
        if raw is None:
            return () if not t.mode else "\n"
        addrs: list[int] = []
        for a in struct.unpack(f"<{len(raw) // 8}Q", raw)[: t.limit]:
            if not a:
                break
            addrs.append(a)
        if t.mode == "raw":        # bpftrace 0.20's raw mode: the addresses in hex, one a line, unnamed
            return "\n" + "".join(f"{a:x}\n" for a in addrs)
        if t.user:
            from pycore.lang.usyms import format_frame

            pid = key >> 32
            frames = tuple(format_frame(self.user_symbols.lookup(pid, a), a, t.mode == "perf") for a in addrs)
        else:
            frames = tuple(self.ksym_offset(a) for a in addrs)
            if t.mode == "perf":
                frames = tuple(f"\t{a:x} {f}" for a, f in zip(addrs, frames))
        if t.mode == "perf":
            return "\n" + "".join(f + "\n" for f in frames)
        return frames

    def ksym_offset(self, addr: int) -> str:
        from pycore.kernel.kallsyms import TextSymbols

        if not hasattr(self, "_ksyms"):
            self._ksyms = TextSymbols()
        found = self._ksyms.lookup(addr)
        if not found:
            return f"0x{addr:x}"
        name, off = found
        return f"{name}+{off}"

    # maps

    def map_entries(self, name: str) -> list[tuple[tuple, Any]]:
        """(key tuple, value) of every element of a map, per-CPU values combined.

        Raises Closed when the script is closed before or while the map is read: close() from another
        thread closes the map's descriptor under the reader, whose next get_next_key then fails like
        the end of the keys, and a scalar count() read as 0, an empty map as no keys, silently."""
        m: MapInfo = self.layout.maps[name]
        if self._closed:
            raise Closed(f"map {name}")
        mp = self._maps.get(name)
        if mp is None:          # not loaded (yet)
            return []
        out = self._read_entries(m, mp)
        if self._closed:
            raise Closed(f"map {name}")
        return out

    def _read_entries(self, m: MapInfo, mp: Any) -> list[tuple[tuple, Any]]:
        percpu = m.kind in AGGREGATES
        # by the key's bytes: two keys may print alike (usym names, ntop of AF_INET with other
        # bytes behind) and are still two elements, as bpftrace prints them
        out: dict[bytes, tuple[tuple, Any]] = {}
        hist = m.kind in ("hist", "lhist")
        for kb in mp.keys():
            vals = mp.lookup_percpu(kb) if percpu else [mp.lookup(kb)]
            if vals is None or any(v is None for v in vals):
                continue
            raw = bytes(kb[:m.key_size])
            if hist or m.kind == "tseries":
                bucket = struct.unpack_from("<Q", kb, m.key_size)[0]
                entry = out.get(raw)
                if entry is None:
                    entry = out[raw] = (self._key(kb, m), {})
                if hist:
                    entry[1][bucket] = sum(struct.unpack_from("<Q", v)[0] for v in vals)
                else:           # {epoch: value}: each bucket's latest epoch
                    reduced = tseries_bucket(vals, m.tseries[2], m.value.signed)  # type: ignore[index,union-attr]
                    if reduced is not None:
                        entry[1][reduced[0]] = reduced[1]
                continue
            out[raw] = (self._key(kb, m), self._combine(m, vals))
        if not out and m.kind == "count" and not m.keys:
            # bpftrace keeps a key-less count() in a one-slot per-CPU array: it is there from the start,
            # and clear() or delete() zero it, so it prints as @c: 0 (0.17 and 0.23.2 alike)
            return [((), 0)]
        if m.kind == "tseries":     # bpftrace 0.26 prints them in its std::map's order: the key's bytes
            return [out[raw] for raw in sorted(out)]
        return list(out.values())

    def _key(self, kb: bytes, m: MapInfo) -> tuple:
        if not m.keys:
            return ()
        out = []
        pos = 0
        for t in m.keys:
            out.append(self._decode(kb, pos, t))
            pos += width(t)
        return tuple(out)

    def _combine(self, m: MapInfo, vals: list[bytes]) -> Any:
        kind = m.kind
        if kind in ("count", "sum"):
            total = sum(struct.unpack_from("<q", v)[0] for v in vals)
            return total
        if kind in ("avg", "stats"):
            count = sum(struct.unpack_from("<q", v)[0] for v in vals)
            total = sum(struct.unpack_from("<q", v, 8)[0] for v in vals)
            return (count, total)
        if kind in ("min", "max"):
            seen = [struct.unpack_from("<q", v)[0] for v in vals if struct.unpack_from("<Q", v, 8)[0]]
            return (min if kind == "min" else max)(seen) if seen else 0
        return self._decode(vals[0], 0, m.value or Int(8, True))

    def map_value(self, name: str) -> Any:
        """A map as a Python value: {key: value} (a one-part key bare, stacks as tuples of frames),
        a scalar map's value itself (None when unset); hist buckets as {bucket: count}."""
        m = self.layout.maps[name]
        entries = self.map_entries(name)
        if not m.keys:
            return entries[0][1] if entries else None
        out = {}
        for k, v in entries:
            k = tuple(tuple(p) if isinstance(p, list) else p for p in k)
            out[k if len(k) != 1 else k[0]] = tuple(v) if isinstance(v, list) else v
        return out

    def _shape(self, name: str) -> dict[str, Any]:
        m = self.layout.maps[name]
        value_type = m.value if m.kind in ("int", "str") else None
        return {"lhist": m.lhist, "key_types": list(m.keys or ()), "value_type": value_type, "keyed": bool(m.keys),
                "k": m.log2_k, "tseries": m.tseries and (m.tseries[0], m.tseries[1], tai_to_realtime(),
                                          getattr(m.value, "signed", True))}

    def map_text(self, name: str, top: int = 0, div: int = 0) -> str:
        from pycore.lang import output as O

        m = self.layout.maps[name]
        return O.format_map(name, m.kind, self.map_entries(name), top=top, div=div, **self._shape(name))

    def map_json(self, name: str, top: int = 0, div: int = 0) -> str:
        from pycore.lang import output as O

        m = self.layout.maps[name]
        return O.map_json(name, m.kind, self.map_entries(name), top=top, div=div, **self._shape(name))

    def clear_map(self, name: str, zero: bool = False) -> None:
        mp = self._maps.get(name)
        if mp is None:
            return
        if zero:
            m = self.layout.maps[name]
            percpu = m.kind in AGGREGATES
            for kb in list(mp.keys()):
                v = mp.lookup_percpu(kb) if percpu else [mp.lookup(kb)]
                if v:
                    mp.update(kb, [bytes(len(v[0]))] * len(v) if percpu else bytes(len(v[0])))
        else:
            for kb in list(mp.keys()):
                mp.delete(kb)

    def final_maps(self) -> list[Event]:
        """Every map at the end of a run, in bpftrace's order (by name); an empty one prints as bpftrace's does."""
        return [Event("map", self.map_text(name), self.map_value(name), name) for name in sorted(self.layout.maps)]


class _LazyStackMaps(dict):
    """Map fds by name; stack maps are made the first time a program asks for one."""

    def __init__(self, fds: dict[str, int], owned: dict[str, Any]) -> None:
        super().__init__(fds)
        self._owned = owned

    def __missing__(self, name: str) -> int:
        if not name.startswith("$stack:"):
            raise KeyError(name)
        from pycore.native.program import create_map

        limit = int(name.rsplit(":", 1)[1])
        mp = create_map(MAP_STACK_TRACE, 4, 8 * limit, DEFAULT_MAP_KEYS, name="stack_" + name.split(":")[1])
        self._owned[name] = mp
        self[name] = mp.fd
        return mp.fd


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def tseries_bucket(vals: list[bytes], agg: str, signed: bool) -> tuple[int, int] | None:
    """(epoch, value) of one tseries bucket from its per-CPU [value, meta, epoch]s, as bpftrace 0.26
    reduces them (util/tseries.cpp): the latest epoch's, the CPUs' values of that epoch combined (the
    most recently set for no aggregation, by meta's time); None when no CPU has set it."""
    fmt = "<qqQ" if signed else "<QQQ"
    by_epoch: dict[int, list[int]] = {}
    for v in vals:
        val, meta, epoch = struct.unpack_from(fmt, v)
        if epoch == 0:
            continue
        cur = by_epoch.get(epoch)
        if cur is None:
            by_epoch[epoch] = [val, meta]
        elif agg == "":
            if meta > cur[1]:
                cur[0], cur[1] = val, meta
        elif agg in ("sum", "avg"):
            cur[0] += val
            cur[1] += meta
        else:
            cur[0] = (min if agg == "min" else max)(cur[0], val)
    if not by_epoch:
        return None
    epoch = max(by_epoch)
    val, meta = by_epoch[epoch]
    if agg == "avg":
        q = abs(val) // meta if meta else 0      # C's division, toward zero
        val = q if val >= 0 else -q
    bits = 1 << 64
    val %= bits
    if signed and val >= bits >> 1:
        val -= bits
    return epoch, val


def tai_to_realtime() -> int:
    """CLOCK_TAI less CLOCK_REALTIME, in ns: a tseries interval's TAI start as a wall clock time. The
    kernel keeps it in whole seconds (its TAI offset: 0, or 37 where NTP set it): rounded so, as the
    two readings are a few hundred ns apart."""
    diff = time.clock_gettime_ns(time.CLOCK_TAI) - time.time_ns()
    return round(diff / 1e9) * 10**9


def _map_name(name: str) -> str:
    clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name.lstrip("@")) or "anon"
    return ("AT_" + clean)[:15]


def _prog_name(t: Target) -> str:
    clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in (t.func or t.kind))
    return clean[:15]


def _method(t: Target) -> str:
    if t.kind == "self":
        return "BPF_PROG_TEST_RUN at each SIGUSR1"
    kind = t.attach[0] if t.attach else t.kind
    return {"begin": "BPF_PROG_TEST_RUN once at start", "end": "BPF_PROG_TEST_RUN once at exit",
            "tracing": "fentry/fexit trampoline", "tracepoint": "perf tracepoint", "kprobe": "kprobe PMU",
            "uprobe": "uprobe PMU" + (" with semaphore" if t.kind == "usdt" and t.attach[4] else ""),
            "perf": "perf event", "raw_tracepoint": "raw tracepoint"}.get(kind, kind)


def _lockdown() -> str:
    """The kernel's lockdown mode, the bracketed word of /sys/kernel/security/lockdown ("" when unknown):
    integrity and confidentiality take bpf_probe_write_user from BPF programs."""
    try:
        with open("/sys/kernel/security/lockdown") as f:
            text = f.read()
    except OSError:
        return ""
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else ""


_ = (Ptr, os, sys)
