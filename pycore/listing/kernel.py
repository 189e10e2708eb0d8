"""What can be traced on this kernel: the engine behind ``pycore list``.

A :class:`Lister` answers one :class:`~pycore.listing.patterns.ProbePattern` at a time
with :class:`Entry` objects (a probe line and, with ``-v``, its arguments or
a type's C body).  Every source is opened lazily, so ``list 'struct dentry'``
reads BTF and nothing else, and ``list 'kfunc:vfs_*'`` decodes only the
matching functions: names are found by regex over BTF's string table and
over /proc/kallsyms, never by decoding everything.

Sources, by probe type:

* kfunc/kretfunc: BTF FUNCs (vmlinux, and modules' split BTF) that ftrace
  can hook: ``available_filter_functions`` when readable, else text symbols
  in /proc/kallsyms (a superset: inlined-elsewhere and notrace functions
  slip through; we say so once on stderr).
* tracepoint: tracefs ``available_events`` and ``events/CAT/NAME/format``;
  without tracefs, BTF ``btf_trace_*`` names and ``trace_event_raw_*`` structs.
* rawtracepoint (tp_btf): BTF ``btf_trace_NAME`` typedefs, parameter names
  from the ``__traceiter_NAME`` / ``__bpf_trace_CLASS`` functions the kernel
  generates for each tracepoint.
* kprobe/kretprobe: only where the kernel was built with CONFIG_KPROBES.
* software/hardware: perf events, bpftrace 0.23.2's names and short names.
* iter: BPF iterators, BTF ``struct bpf_iter__NAME`` with a ``bpf_iter_NAME``
  function (whose parameters after ``meta`` are the context's fields).
* struct/union/enum/typedef: vmlinux BTF.
"""

from __future__ import annotations

import os
import re

from pycore.kernel.kallsyms import VMLINUX, Kallsyms
from pycore.kernel.tracefs import Tracefs, find_tracefs
from pycore.listing.entry import INDENT, Entry
from pycore.listing.patterns import ProbePattern, glob_to_regex

# typing (2.8 ms) and btf (3 ms: BTF is not read to list tracepoints) are
# imported where they are used: `list -v 'tracepoint:*'` runs against
# bpftrace's 50 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterator

    from btf import Spec

    Warn = Callable[[str], None]

__all__ = ["Entry", "Lister", "fentry_max_args", "kprobes_unavailable_reason", "kinds_available", "iterators",
           "BTF_DIR"]

BTF_DIR = "/sys/kernel/btf"
# Struct arguments passed by value: trampolines copy at most two registers' worth.
MAX_STRUCT_ARG_SIZE = 16

# btf.Kind names
_TYPE_KINDS = {
    "struct": ("STRUCT",),
    "union": ("UNION",),
    "enum": ("ENUM", "ENUM64"),
    "typedef": ("TYPEDEF",),
}


def _kernel_version(release: str | None = None) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def fentry_max_args(machine: str | None = None, release: str | None = None) -> int:
    """How many argument registers a BPF trampoline can pass on this kernel.

    x86-64 trampolines take 6 register arguments until 6.5, 12 since (args 7
    to 12 from the stack; MAX_BPF_FUNC_ARGS).  arm64 trampolines take the 8
    argument registers (12 in the newest kernels; we stay conservative);
    other architectures are assumed to take 6.
    """
    machine = machine or os.uname().machine
    version = _kernel_version(release)
    if machine == "x86_64":
        return 12 if version >= (6, 5) else 6
    if machine == "aarch64":
        return 8
    return 6


def kprobes_unavailable_reason(kallsyms: Kallsyms, tracefs: Tracefs | None) -> str:
    """Empty if kprobes exist on this kernel, else why not (one line).

    CONFIG_KPROBES leaves two traces we can see without privileges beyond
    reading /proc/kallsyms: the ``register_kprobe`` function, and tracefs'
    ``kprobe_events`` file.  /proc/config.gz is optional, so it is not used.
    """
    if tracefs is not None and os.path.exists(tracefs.path("kprobe_events")):
        return ""
    try:
        if kallsyms.has_text_symbol("register_kprobe"):
            return ""
    except OSError as e:
        return f"cannot tell: {kallsyms.path}: {e.strerror}"
    return "kprobes are not available: this kernel is built without CONFIG_KPROBES"


#: The perf events bpftrace 0.23.2 lists (``software:NAME:``), short names too (cpu, faults, cs)
PERF_EVENTS = {
    "software": ("alignment-faults", "bpf-output", "context-switches", "cpu-clock", "cpu-migrations", "cpu", "cs",
                 "dummy", "emulation-faults", "faults", "major-faults", "minor-faults", "page-faults", "task-clock"),
    "hardware": ("backend-stalls", "branch-instructions", "branch-misses", "branches", "bus-cycles", "cache-misses",
                 "cache-references", "cpu-cycles", "cycles", "frontend-stalls", "instructions", "ref-cycles"),
}


def iterators(spec: Spec) -> dict[str, int]:
    """The kernel's BPF iterators, as bpftrace 0.19+ finds them: each ``struct bpf_iter__NAME`` (not the
    verifier's ``__safe_trusted`` variants) with the ``bpf_iter_NAME`` function an iterator program
    attaches to; NAME -> that function's BTF id, sorted by name."""
    from btf import Kind

    found = {}
    for struct_id in spec.ids_matching(rb"bpf_iter__[^\x00]+", (Kind.STRUCT,)):
        name = spec.name(struct_id)[len("bpf_iter__"):]
        if name.endswith("__safe_trusted"):
            continue
        funcs = spec.ids_named(f"bpf_iter_{name}", (Kind.FUNC,))
        if funcs:
            found[name] = funcs[0]
    return dict(sorted(found.items()))


def kinds_available() -> set[str]:
    """The probe types this kernel attaches, measured by trial loads (:mod:`pycore.kernel.features`,
    about 0.1 s): for a refused pattern to suggest only those (a kernel without kprobes or fentry
    is told of tracepoints, not of kprobe:NAME)."""
    from pycore.kernel.features import Features

    features = Features(mount=False)
    kinds = {"tracepoint", "usdt", "uprobe", "uretprobe", "iter", "software", "hardware"}
    for kind, feature in (("kfunc", "fentry"), ("kretfunc", "fexit"), ("kprobe", "kprobes"),
                          ("kretprobe", "kprobes"), ("rawtracepoint", "tp_btf")):
        if features.check(feature):
            kinds.add(kind)
    return kinds


class Lister:
    """Answers probe patterns for the running kernel; sources load on first use.

    ``warn`` receives one-line notes for stderr; each distinct note is
    passed on only once per Lister.
    """

    def __init__(self, verbose: bool = False, warn: Warn | None = None, *,
                 spec: Spec | None = None, kallsyms: Kallsyms | None = None,
                 btf_dir: str = BTF_DIR, mount_tracefs: bool = True) -> None:
        self.verbose = verbose
        self.pid: int | None = None  # list -p PID: usdt/uprobe in that process's objects
        self._warn_sink = warn or (lambda message: None)
        self._warned: set[str] = set()
        self._spec = spec
        self._kallsyms = kallsyms or Kallsyms()
        self._btf_dir = btf_dir
        self._mount_tracefs = mount_tracefs
        self._tracefs: Tracefs | None = None
        self._tracefs_why: str | None = None
        self._module_specs: dict[str, Spec] = {}
        self._traceable_cache: dict[bytes, dict[str, set[str]]] = {}
        self._prefixed_funcs: dict[tuple[int, str], dict[str, int]] = {}
        self._bpf_trace_by_signature: dict[int, dict[tuple[int, ...], list[str] | None]] = {}
        self._cformatter = None
        self._notes: dict[int, dict[int, str]] = {}  # id(spec) -> proto id -> fentry verdict

    # -- sources --------------------------------------------------------

    def warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self._warn_sink(message)

    @property
    def spec(self) -> Spec:
        if self._spec is None:
            from btf import load_kernel_spec

            self._spec = load_kernel_spec()
        return self._spec

    @property
    def _fmt(self):  # noqa: ANN202 (a btf.cformat.CFormatter)
        if self._cformatter is None:
            from btf.cformat import CFormatter

            self._cformatter = CFormatter()
        return self._cformatter

    def tracefs(self) -> Tracefs | None:
        if self._tracefs_why is None:
            self._tracefs, self._tracefs_why = find_tracefs(self._mount_tracefs)
        return self._tracefs

    def btf_modules(self, module_glob: str | None) -> Iterator[tuple[str, Spec]]:
        """(module, spec) for vmlinux and every module with BTF, matching the glob."""
        from btf import Spec

        pat = ProbePattern("kfunc", "*", module_glob)
        if pat.matches_module(VMLINUX):
            yield VMLINUX, self.spec
        try:
            names = sorted(os.listdir(self._btf_dir))
        except OSError:
            return
        for name in names:
            if name == VMLINUX or not pat.matches_module(name):
                continue
            spec = self._module_specs.get(name)
            if spec is None:
                spec = Spec.from_file(os.path.join(self._btf_dir, name), base=self.spec)
                self._module_specs[name] = spec
            yield name, spec

    def traceable_functions(self, name_regex: bytes) -> dict[str, set[str]]:
        """Functions ftrace can hook whose names match, by module.

        ``available_filter_functions`` hides inlined and notrace functions;
        where it cannot be read, kallsyms' text symbols stand in.
        """
        cached = self._traceable_cache.get(name_regex)
        if cached is not None:
            return cached
        found: dict[str, set[str]] = {}
        for module, name in self._traceable(name_regex):
            found.setdefault(module, set()).add(name)
        self._traceable_cache[name_regex] = found
        return found

    def _traceable(self, name_regex: bytes) -> Iterator[tuple[str, str]]:
        """(module, name) of each hookable function whose name matches, as
        the source lists them (repeats included), without keeping them: a
        'kfunc:*' listing would otherwise hold 120k names twice over."""
        tracefs = self.tracefs()
        if tracefs is None:
            why = f"tracefs unavailable ({self._tracefs_why})"
        else:
            try:
                data = tracefs.available_filter_functions()
            except OSError as e:
                why = f"available_filter_functions unreadable ({_errno_name(e)})"
            else:
                rx = re.compile(rb"(?m)^(" + name_regex + rb")(?: \[([^\]\n]+)\])?$")
                for m in rx.finditer(data):
                    name, module = m.groups()
                    yield (module.decode() if module else VMLINUX), name.decode()
                return
        self.warn(f"{why}; listing BTF functions found in /proc/kallsyms")
        yield from self._kallsyms.iter_text_symbols(name_regex)

    # -- answering patterns ---------------------------------------------

    def entries(self, pattern: ProbePattern) -> Iterator[Entry]:
        """Everything ``pattern`` matches, sorted as bpftrace sorts it."""
        kind = pattern.kind
        if kind in _TYPE_KINDS:
            return self._types(pattern)
        if kind in ("kfunc", "kretfunc"):
            return self._functions(pattern)
        if kind == "tracepoint":
            return self._tracepoints(pattern)
        if kind == "rawtracepoint":
            return self._raw_tracepoints(pattern)
        if kind in ("kprobe", "kretprobe"):
            return self._kprobes(pattern)
        if kind == "iter":
            return self._iterators(pattern)
        if kind in PERF_EVENTS:
            return iter([Entry(line) for line in sorted(f"{kind}:{name}:" for name in PERF_EVENTS[kind]
                                                        if pattern.matches(name))])
        if kind == "usdt":
            from pycore.listing.user import usdt_entries
            return usdt_entries(pattern, int(self.verbose), self.pid, self.warn)
        if kind in ("uprobe", "uretprobe"):
            from pycore.listing.user import uprobe_entries
            return uprobe_entries(pattern, int(self.verbose), self.pid)
        raise ValueError(f"unknown probe kind {kind!r}")

    # types

    def _types(self, pattern: ProbePattern) -> Iterator[Entry]:
        from btf import Kind
        from btf.cformat import definition

        spec = self.spec
        by_name: dict[str, int] = {}
        kinds = tuple(Kind[name] for name in _TYPE_KINDS[pattern.kind])
        for type_id in spec.ids_matching(pattern.name_regex(), kinds):
            by_name.setdefault(spec.name(type_id), type_id)
        by_name.pop("", None)
        for name in sorted(by_name):
            if not self.verbose:
                yield Entry(f"{pattern.kind} {name}")
                continue
            body = definition(spec.type(by_name[name])).split("\n")
            yield Entry(body[0], body[1:] + [""])

    # kfunc / kretfunc

    def _functions(self, pattern: ProbePattern) -> Iterator[Entry]:
        max_args = fentry_max_args()
        for module, spec, type_id in self.functions(pattern):
            yield self._function_entry(pattern.label, module, spec, type_id, max_args)

    def functions(self, pattern: ProbePattern) -> Iterator[tuple[str, Spec, int]]:
        """(module, its BTF, function id) of each function that matches and
        that ftrace can hook, by module, then by name; for listings and for
        ``pycore trace``'s kfunc wildcards (which need the ids, not the lines).

        BTF is searched first and the hookable names are streamed past it,
        so only the matching BTF names are ever held (peak RSS of
        'kfunc:*': the kernel has 120k text symbols, 55k BTF functions).
        """
        from btf import Kind

        name_rx = pattern.name_regex()
        wanted: dict[str, tuple[Spec, dict[str, int]]] = {}
        for module, spec in self.btf_modules(pattern.module):
            if spec is self._spec:
                ids = spec.ids_matching(name_rx, (Kind.FUNC,))
            else:  # split BTF: search the module's own (small) part only
                rx = re.compile(name_rx)
                ids = [i for i in spec.ids_of_kind(Kind.FUNC) if rx.fullmatch(spec.name(i).encode())]
            by_name: dict[str, int] = {}
            for type_id in ids:
                by_name.setdefault(spec.name(type_id), type_id)
            del ids
            if by_name:
                wanted[module] = (spec, by_name)
        if not wanted:
            return
        found: dict[str, list[tuple[str, int]]] = {module: [] for module in wanted}
        for module, name in self._traceable(glob_to_regex(pattern.target, rb"[^\s]")):
            got = wanted.get(module)
            if got is not None:
                type_id = got[1].pop(name, None)  # pop: a name listed twice counts once
                if type_id is not None:
                    found[module].append((name, type_id))
        self._kallsyms.release()  # 5 MB; read again if kprobes need it
        for module, (spec, _) in list(wanted.items()):
            del wanted[module]
            matched = found.pop(module)
            matched.sort()
            for _, type_id in matched:
                yield module, spec, type_id

    def fentry_note(self, spec: Spec, func_id: int) -> str:
        """Why a trampoline would refuse function ``func_id`` of ``spec``, or ''."""
        return self._fentry_note(spec, spec.type(func_id, cache=False).type_id, fentry_max_args())  # type: ignore[attr-defined]

    def _fentry_note(self, spec: Spec, proto_id: int, max_args: int) -> str:
        notes = self._notes.get(id(spec))
        if notes is None:
            notes = self._notes[id(spec)] = {}
        note = notes.get(proto_id)
        if note is None:
            note = notes[proto_id] = self._fentry_problem(spec.type(proto_id, cache=False), max_args)
        return note

    def _function_entry(self, kind: str, module: str, spec: Spec, func_id: int, max_args: int) -> Entry:
        # A listing looks at each function once: don't keep 55k decoded
        # functions and prototypes in the spec's cache (peak RSS).
        func = spec.type(func_id, cache=False)
        proto_id = func.type_id  # type: ignore[attr-defined]
        entry = Entry(f"{kind}:{module}:{func.name}")
        entry.note = self._fentry_note(spec, proto_id, max_args)
        if self.verbose:
            proto = spec.type(proto_id, cache=False)
            type_name = self._fmt.type_name
            for i, p in enumerate(proto.params):
                if p.type_id == 0:  # the "..." of a variadic function
                    entry.details.append(f"{INDENT}...")
                    continue
                entry.details.append(f"{INDENT}{type_name(p.type)} {p.name or f'arg{i}'}")
            if proto.return_type_id != 0:
                entry.details.append(f"{INDENT}{type_name(proto.return_type)} retval")
        return entry

    @staticmethod
    def _fentry_problem(proto, max_args: int) -> str:  # noqa: ANN001 (a btf FuncProto)
        """Why a trampoline would refuse this function, or ''."""
        Kind, sizeof, skip = _btf_layout()  # noqa: N806
        if proto.variadic:
            return "fentry cannot attach: variadic"
        regs = 0
        for p in proto.params:
            t = skip(p.type)
            if t.kind in (Kind.STRUCT, Kind.UNION):
                size = sizeof(t)
                if size > MAX_STRUCT_ARG_SIZE:
                    return f"fentry cannot attach: {p.name or 'an argument'} is a {size}-byte struct by value"
                regs += max(1, -(-size // 8))
            else:
                regs += 1
        if regs > max_args:
            return f"fentry cannot attach: {regs} argument registers > {max_args}"
        if proto.return_type_id and skip(proto.return_type).kind in (Kind.STRUCT, Kind.UNION):
            return "fentry cannot attach: returns a struct by value"
        return ""

    # iter

    def _iterators(self, pattern: ProbePattern) -> Iterator[Entry]:
        """``iter:NAME``; with -v the context's fields, as bpftrace -lv prints them: the parameters of
        ``bpf_iter_NAME`` after ``meta``."""
        spec = self.spec
        for name, func_id in iterators(spec).items():
            if not pattern.matches(name):
                continue
            entry = Entry(f"iter:{name}")
            if self.verbose:
                params = spec.type(spec.type(func_id).type_id).params[1:]  # type: ignore[attr-defined]
                entry.details = [f"{INDENT}{self._fmt.type_name(p.type)} {p.name}" for p in params]
            yield entry

    # rawtracepoint / tp_btf

    def _raw_tracepoints(self, pattern: ProbePattern) -> Iterator[Entry]:
        from btf import Kind

        name_rx = b"btf_trace_" + pattern.name_regex()
        for module, spec in self.btf_modules(pattern.module):
            if spec is self._spec:
                ids = spec.ids_matching(name_rx, (Kind.TYPEDEF,))
            else:
                rx = re.compile(name_rx)
                ids = [i for i in spec.ids_of_kind(Kind.TYPEDEF) if rx.fullmatch(spec.name(i).encode())]
            by_name = {spec.name(i)[len("btf_trace_"):]: i for i in reversed(ids)}
            prefix = "rawtracepoint:" if module == VMLINUX else f"rawtracepoint:{module}:"
            for name in sorted(by_name):
                entry = Entry(prefix + name)
                if self.verbose:
                    entry.details = self._raw_tracepoint_args(spec, name, by_name[name])
                yield entry

    def _raw_tracepoint_args(self, spec: Spec, name: str, typedef_id: int) -> list[str]:
        """``btf_trace_NAME`` is ``void (*)(void *__data, ARGS)``: ARGS's types,
        with names from ``__bpf_trace_CLASS(void *__data, ARGS)``."""
        from btf import Kind
        from btf.layout import skip

        proto = skip(spec.type(typedef_id).type, (Kind.TYPEDEF, Kind.PTR))  # type: ignore[attr-defined]
        if proto.kind != Kind.FUNC_PROTO:
            return []
        params = proto.params[1:]  # type: ignore[attr-defined]
        names = self._bpf_trace_names(spec, name, tuple(p.type_id for p in params))
        type_name = self._fmt.type_name
        return [f"{INDENT}{type_name(p.type)} {names[i] if names else f'arg{i}'}"
                for i, p in enumerate(params)]

    # Functions the kernel generates per tracepoint, whose parameters repeat
    # the tracepoint's prototype with names: __traceiter_NAME (5.10+, one per
    # event), __probestub_NAME (6.5+), __bpf_trace_CLASS (one per class).
    _NAMED_PROTO_PREFIXES = ("__traceiter_", "__probestub_", "__bpf_trace_")

    def _bpf_trace_names(self, spec: Spec, name: str, signature: tuple[int, ...]) -> list[str] | None:
        """Parameter names for a raw tracepoint: from a generated function for
        this event whose types agree, else from the one ``__bpf_trace_CLASS``
        whose parameter types are exactly these (None when there is no
        single answer: several classes share the types but not the names)."""
        for prefix in self._NAMED_PROTO_PREFIXES:
            func_id = self._funcs_named(spec, prefix).get(name)
            if func_id is not None:
                params = spec.type(func_id).type.params[1:]  # type: ignore[attr-defined]
                if tuple(p.type_id for p in params) == signature:
                    return [p.name for p in params]
        key = id(spec)
        by_signature = self._bpf_trace_by_signature.get(key)
        if by_signature is None:
            by_signature = {}
            for func_id in self._funcs_named(spec, "__bpf_trace_").values():
                params = spec.type(func_id).type.params[1:]  # type: ignore[attr-defined]
                sig = tuple(p.type_id for p in params)
                names = [p.name for p in params]
                by_signature[sig] = names if by_signature.get(sig, names) == names else None
            self._bpf_trace_by_signature[key] = by_signature
        return by_signature.get(signature)

    def _funcs_named(self, spec: Spec, prefix: str) -> dict[str, int]:
        """FUNC ids of ``PREFIX<rest>`` by ``rest``: one string-table search."""
        from btf import Kind

        key = (id(spec), prefix)
        found = self._prefixed_funcs.get(key)
        if found is None:
            if spec is self._spec:
                ids = spec.ids_matching(re.escape(prefix.encode()) + rb"[^\x00]*", (Kind.FUNC,))
            else:
                ids = [i for i in spec.ids_of_kind(Kind.FUNC) if spec.name(i).startswith(prefix)]
            found = {}
            for func_id in ids:
                found.setdefault(spec.name(func_id)[len(prefix):], func_id)
            self._prefixed_funcs[key] = found
        return found

    # tracepoint

    def _tracepoints(self, pattern: ProbePattern) -> Iterator[Entry]:
        tracefs = self.tracefs()
        if tracefs is None:
            yield from self._tracepoints_from_btf(pattern)
            return
        events = sorted(e for e in tracefs.available_events() if pattern.matches(e))
        for event in events:
            entry = Entry(f"tracepoint:{event}")
            if self.verbose:
                category, _, name = event.partition(":")
                try:
                    decls = tracefs.field_decls(category, name)
                except OSError as e:
                    self.warn(f"{tracefs.path('events', '*', '*', 'format')} unreadable "
                              f"({_errno_name(e)}); tracepoint fields from BTF trace_event_raw_* structs")
                    entry.details = self._tracepoint_fields_from_btf(name)
                else:
                    entry.details = [INDENT + d for d in decls]
            yield entry

    def _tracepoints_from_btf(self, pattern: ProbePattern) -> Iterator[Entry]:
        """Without tracefs, categories are unknown: BTF knows each event's name
        (``btf_trace_NAME``) and, for events that are their own class, the
        record layout (``trace_event_raw_NAME``).  ``tracepoint:*:NAME`` is a
        valid probe, so that is what we print."""
        from btf import Kind

        self.warn(f"tracefs unavailable ({self._tracefs_why}); tracepoint names from BTF "
                  "(categories unknown, shown as '*'), fields from trace_event_raw_* structs")
        cat_glob, _, name_glob = pattern.target.rpartition(":")
        name_pat = ProbePattern("tracepoint", name_glob)
        spec = self.spec
        ids = spec.ids_matching(b"btf_trace_" + name_pat.name_regex(), (Kind.TYPEDEF,))
        for name in sorted({spec.name(i)[len("btf_trace_"):] for i in ids}):
            entry = Entry(f"tracepoint:*:{name}")
            if self.verbose:
                entry.details = self._tracepoint_fields_from_btf(name)
            yield entry

    def _tracepoint_fields_from_btf(self, name: str) -> list[str]:
        from btf import Kind
        from btf.layout import skip

        spec = self.spec
        ids = spec.ids_named("trace_event_raw_" + name, (Kind.STRUCT,))
        if not ids:
            return [f"{INDENT}// fields unknown: no struct trace_event_raw_{name} in BTF (event of a shared class)"]
        lines = []
        for m in spec.type(ids[0]).members:  # type: ignore[attr-defined]
            if m.name in ("ent", "__data"):
                continue
            t = m.type
            if skip(t).kind == Kind.ARRAY:
                lines.append(f"{INDENT}{self._fmt.declaration(t, m.name)}")
            else:
                lines.append(f"{INDENT}{self._fmt.type_name(t)} {m.name}")
        return lines

    # kprobe / kretprobe

    def kprobes_unavailable(self) -> str:
        """Why this kernel has no kprobes ('' when it has them)."""
        return kprobes_unavailable_reason(self._kallsyms, self.tracefs())

    def _kprobes(self, pattern: ProbePattern) -> Iterator[Entry]:
        reason = self.kprobes_unavailable()
        if reason:
            self.warn(reason)
            return
        traceable = self.traceable_functions(glob_to_regex(pattern.target, rb"[^\s]"))
        for module in sorted(traceable, key=lambda m: (m != VMLINUX, m)):
            if not pattern.matches_module(module):
                continue
            prefix = f"{pattern.kind}:" if module == VMLINUX else f"{pattern.kind}:{module}:"
            for name in sorted(traceable[module]):
                yield Entry(prefix + name)


_LAYOUT = None


def _btf_layout():  # noqa: ANN202 (btf.Kind, btf.layout.sizeof, btf.layout.skip)
    """For _fentry_problem, asked once per prototype (24.6k for 'kfunc:*'):
    two import statements there cost 12 ms, this lookup under 1 ms."""
    global _LAYOUT
    if _LAYOUT is None:
        from btf import Kind
        from btf.layout import sizeof, skip

        _LAYOUT = (Kind, sizeof, skip)
    return _LAYOUT


def _errno_name(e: OSError) -> str:
    import errno

    return errno.errorcode.get(e.errno or 0, e.strerror or str(e))
