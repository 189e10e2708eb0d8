"""Checking of what a probe and the command line give a script: builtins (pid, comm, curtask, ctx,
retval, argN, args.NAME), registers, uaddr(), positional parameters, and identifiers that name
an enum constant of BTF or a macro of the script's head.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check.records import USER_PROBES, Checked
from pycore.lang.check.state import State
from pycore.lang.errors import close_matches
from pycore.lang.probes import Target
from pycore.lang.types import BOOL, COMM, INT64, UINT64, Enum, Int, Ptr, Stack, Str, Username, Type, Void


_BUILTIN_TYPES: dict[str, Type] = {
    "pid": UINT64, "tid": UINT64, "uid": UINT64, "gid": UINT64, "nsecs": UINT64, "elapsed": UINT64,
    "cpu": UINT64, "comm": COMM, "cgroup": UINT64, "rand": UINT64, "jiffies": UINT64, "numaid": UINT64,
    "username": Username(),
}


#: Probes whose ``func`` is bpftrace's ksym type (0.23.2: kprobes and fentry). A uprobe's stays the
#: function's name, a string: bpftrace's usym names it only while its process lives and not at all for a
#: static function only a debug file names, where pycore's string always does.
_KERNEL_FUNC_KINDS = frozenset({"kprobe", "kretprobe", "kfunc", "kretfunc"})
_OTHER_BUILTINS = ("ncpus", "usermode", "func", "probe", "probetype", "curtask", "retval", "args", "kstack", "ustack", "cpid", "ctx",
                   "has_cpid")


class Builtins(State):
    """Names the probe gives a script: builtins, args, ctx, retval, argN, registers, uaddr;
    positional parameters; enum constants and macros."""

    def positional(self, e: A.Positional) -> int | str:
        """``$N`` as a number when its text is one (C's spelling: 16, 0x10, 020, -5), else its text;
        ``$#`` the count. A missing parameter reads as 0 (and "" in str()), as in bpftrace."""
        if e.index == 0:
            return len(self.params)
        if e.index > len(self.params):
            return 0
        text = self.params[e.index - 1]
        n = c_integer(text)
        return text if n is None else n

    def positional_text(self, e: A.Positional) -> str:
        """``str($N)``: the parameter as given ("0x10" stays "0x10"), "" when missing."""
        if e.index == 0:
            return str(len(self.params))
        return self.params[e.index - 1] if e.index <= len(self.params) else ""

    def args_field(self, c: Checked, e: A.Field) -> Type:
        c.types[id(e.expr)] = Void()
        f = c.target.args.get(e.name)
        if f is None:
            known = list(c.target.args)
            near = close_matches(e.name, known, n=1)
            if not known and c.target.kind in ("uprobe", "uretprobe"):
                raise self.error(e, f"{c.target.probe} has no args{self._why_no_args(c.target)} (use arg0, arg1, ...)")
            hint = f" (did you mean {near[0]!r}?)" if near else f" (it has: {', '.join(known) or 'none'})"
            raise self.error(e, f"{c.target.probe} has no argument {e.name!r}{hint}")
        if f.pointee and isinstance(f.type, Ptr) and not f.type.target:
            word, _, rest = f.pointee.partition(" ")
            from btf.kinds import Kind

            ids = self.types_spec().ids_named(rest, (Kind.STRUCT,) if word == "struct" else (Kind.UNION,))
            if ids:
                return Ptr(ids[0], f.type.user, self.spec)
        return f.type

    def builtin(self, c: Checked, e: A.Builtin) -> Type:
        name = e.name
        tgt = c.target
        if name in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[name]
        if name == "ncpus":     # bpftrace 0.24: the possible CPUs (the lowering writes the number)
            return UINT64
        if name == "usermode":  # bpftrace 0.24: 1 when the probe fired in user mode (x86-64's cs & 3)
            from pycore.lang.probes import PROG_KPROBE, PROG_PERF_EVENT

            if tgt.kind in ("BEGIN", "END"):
                c.consts[id(e)] = 1
            elif tgt.prog_type not in (PROG_KPROBE, PROG_PERF_EVENT):
                c.consts[id(e)] = 0      # no registers (tracepoints, fentry, iter): bpftrace folds it to 0
            return Int(1, False)
        if name == "has_cpid":
            # bpftrace 0.25's standard library: whether there is a -c command, as its docs say ("true iff
            # cpid is available"); upstream's macro reads `__builtin_cpid == 0`, the opposite (to 0.26.1)
            c.consts[id(e)] = 1 if self.cpid else 0
            return BOOL
        if name == "cpid":
            if not self.cpid:
                raise self.error(e, "cpid is the pid of the -c command: run with -c CMD")
            return UINT64
        if name == "func" and tgt.kind in _KERNEL_FUNC_KINDS:   # bpftrace's ksym: an address, named when
            return Int(8, False, "ksym")                      # printed (one map can hold it and ksym())
        if name in ("func", "probe"):
            return Str(max(len((tgt.func if name == "func" else tgt.probe).encode()) + 1, 8))
        if name == "probetype":
            return Str(max(len(probetype(c.block).encode()) + 1, 8))
        if name == "curtask":
            from btf.kinds import Kind

            ids = self.types_spec().ids_named("task_struct", (Kind.STRUCT,))   # a declared one hides the kernel's
            return Ptr(ids[0] if ids else 0, False, self.spec)
        if name == "ctx":
            return self.ctx(e, tgt)
        if name == "retval":
            if tgt.retval is None:
                raise self.error(e, f"retval is only known in return probes (kretfunc, kretprobe, uretprobe), not in {tgt.probe}")
            return tgt.retval.type
        if name == "args":
            if not tgt.args:
                raise self.error(e, f"{tgt.probe} has no args{self._why_no_args(tgt)} (use arg0, arg1, ...)")
            return Void()
        if name in ("kstack", "ustack"):
            return Stack(name == "ustack", mode=self.stack_mode())
        if name.startswith("sarg") and name[4:].isdigit():
            if tgt.kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe"):
                raise self.error(e, f"The {name} builtin can only be used with 'kprobes' and 'uprobes' probes")
            return INT64
        if name.startswith("arg") and name[3:].isdigit():
            i = int(name[3:])
            if tgt.kind in ("kfunc", "kretfunc", "tracepoint"):
                raise self.error(e, f"{tgt.kind} probes name their arguments: use args.NAME "
                                    f"({', '.join(tgt.args) or 'none'})")
            if i >= len(tgt.argn):
                raise self.error(e, f"{tgt.probe} has {len(tgt.argn)} argument(s): no {name}")
            return tgt.argn[i].type
        value = self.named_constant(e, name)
        if value is not None:
            c.consts[id(e)] = value
            enum_id = self._enum_of.get(name)
            if enum_id:     # an enum's constant: printed by its name, as bpftrace 0.21+
                return Enum(8, value < 0, enum_id=enum_id, spec=self.spec)
            return INT64
        from pycore.lang.newer import identifier_feature

        later = identifier_feature(name)
        if later is not None:
            raise self.error(e, later)
        near = close_matches(name, [*_BUILTIN_TYPES, *_OTHER_BUILTINS], n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        where = "nor an enum value in this kernel's BTF"
        if self.has_head:
            missing = self._macros.missing if self._macros is not None else []
            where = ("an enum value in this kernel's BTF, nor a macro of the script's #define and #include lines"
                     + (f" (not found here: {', '.join(missing)})" if missing else ""))
        raise self.error(e, f"unknown identifier {name!r}: not a builtin, {where}{hint}")

    @staticmethod
    def _why_no_args(tgt: Target) -> str:
        """Why a uprobe has no typed args: its binary has no DWARF (and which package would give it)."""
        if tgt.kind not in ("uprobe", "uretprobe"):
            return ""
        path = tgt.attach[1]
        if tgt.debug is not None:
            return f": {path}'s DWARF does not describe {tgt.func}"
        from pycore.elf.debugfile import debug_package_hint

        return f": {path} has no DWARF debug info; {debug_package_hint(path)}"

    def ctx(self, e: A.Builtin, tgt: Target) -> Type:
        """``ctx``: the probe's context, a ``struct pt_regs *`` in the probes that have registers, as in
        bpftrace 0.17 (which refuses it in tracepoints: their fields are ``args``)."""
        from btf.kinds import Kind

        if tgt.kind == "tracepoint":
            raise self.error(e, "Use args instead of ctx in tracepoint")
        if tgt.kind == "iter":     # struct bpf_iter__task: ctx->task, ctx->meta (task_file: ->fd, ->file)
            ids = self.spec.ids_named(f"bpf_iter__{tgt.func}", (Kind.STRUCT,))
            return Ptr(ids[0] if ids else 0, False, self.spec)
        if tgt.kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "usdt"):
            raise self.error(e, f"ctx is the registers of kprobe, uprobe and usdt probes; {tgt.kind} probes have none "
                                "(use args)")
        ids = self.spec.ids_named("pt_regs", (Kind.STRUCT,))
        return Ptr(ids[0] if ids else 0, False, self.spec)

    def named_constant(self, node: A.Node, name: str) -> int | None:
        """A C enum constant of the kernel's BTF (``TCP_CLOSE``), else an integer macro of the script's
        head (``AF_INET``), as bpftrace reads them; None if neither."""
        if name in self._named:      # a wildcard's every target checks the block again
            return self._named[name]
        value = self._named[name] = self._named_constant(node, name)
        return value

    def _named_constant(self, node: A.Node, name: str) -> int | None:
        if not name.isidentifier():
            return None
        found = self.spec.enumerator(name)      # a scan of BTF's enums: 3-25 ms
        if found is not None:
            self._enum_of[name] = found[0]
            return found[1]
        if not self.has_head:
            return None
        from pycore.lang.macros import MacroError

        try:
            value = self.head_macros().value(name)
        except MacroError as err:   # glibc's '#define MSG_PEEK MSG_PEEK' names its header's enum constant
            found = self._header_enumerator(name)
            if found is None:
                raise self.error(node, str(err)) from None
            return found
        return value if value is not None else self._header_enumerator(name)

    def _header_enumerator(self, name: str) -> int | None:
        """An enum constant of the script's #include'd headers (read as declarations), or None."""
        if not self.program.includes or self.declared() is None:
            return None
        found = self.spec.enumerator(name)
        if found is not None:
            self._enum_of[name] = found[0]
        return None if found is None else found[1]

    def uaddr(self, c: Checked, e: A.Call) -> Type:
        """``uaddr("sym")``: a pointer to a symbol of the probed binary, typed by the symbol's size.

        In a position-independent binary (a PIE, a library) the symbol moves with the load base,
        which bpftrace 0.17 ignores (it reads the link-time address: zeros). Here the probe knows
        where it runs: the address is the probe's instruction pointer plus the symbol's distance
        from the probed instruction, so it is right in every process. A uretprobe's instruction
        pointer is in the caller, so there it needs a binary that is not relocated."""
        from pycore.elf.symbols import data_symbol
        from pycore.errors import ElfError

        tgt = c.target
        if len(e.args) != 1 or not isinstance(e.args[0], A.Str):
            raise self.error(e, 'uaddr("symbol") takes one string literal')
        if tgt.kind not in USER_PROBES:
            raise self.error(e, f"uaddr can only be used with uprobes and usdt probes, not {tgt.kind}")
        name, path = e.args[0].value, tgt.attach[1]
        try:
            sym = data_symbol(path, name)
        except ElfError as err:
            raise self.error(e.args[0], f"uaddr: {err}") from None
        if sym is None:
            raise self.error(e.args[0], f"uaddr: no symbol {name!r} in {path}")
        if not sym.relocated:
            c.consts[id(e)] = sym.address
        elif tgt.kind == "uretprobe" or not tgt.vaddr:
            raise self.error(e, f"uaddr({name!r}): {path} is position independent and a {tgt.kind}'s instruction "
                                "pointer does not say where it is loaded; read it in a uprobe")
        else:
            c.ip_relative[id(e)] = sym.address - tgt.vaddr
        ctype = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}.get(sym.size, "uint8")
        return Ptr(self.btf_type(e, ctype), True, self.spec)

    def reg(self, c: Checked, e: A.Call) -> Type:
        """reg("ip"): a register of the probed context, where the context is a ``pt_regs``."""
        from pycore.lang.probes import REGS

        args = e.args
        if len(args) != 1 or not isinstance(args[0], A.Str):
            raise self.error(e, 'reg() takes a register name: reg("ip")')
        kind = c.target.kind
        if kind not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "profile"):
            raise self.error(e, f'reg can not be used with "{kind}" probes')
        if args[0].value not in REGS:
            near = close_matches(args[0].value, list(REGS), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (registers: {', '.join(REGS)})"
            raise self.error(args[0], f"'{args[0].value}' is not a valid register on this architecture{hint}")
        return UINT64


def c_integer(text: str) -> int | None:
    """A positional parameter's number as bpftrace 0.17 reads one (C's strtoll, base 0, the whole
    text, within int64): "16", "0x10", "020" (octal), " -5"; None for "1e3", "1_000", "12abc"."""
    import re

    m = re.fullmatch(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        return None
    digits = m.group(2)
    value = int(digits, 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") else 10)
    value = -value if m.group(1) == "-" else value
    return value if -2**63 <= value < 2**63 else None


def probetype(block: A.ProbeBlock) -> str:
    """The ``probetype`` builtin (0.25): the type of the block's first probe, as bpftrace names it
    (``begin``, ``end`` and ``self`` are ``special``; fentry and fexit their own names)."""
    kind = block.probes[0].kind if block.probes else ""
    return {"BEGIN": "special", "END": "special", "self": "special", "kfunc": "fentry",
            "kretfunc": "fexit"}.get(kind, kind or "none")
