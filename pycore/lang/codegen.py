"""Lowering: one checked probe body to BPF instructions, no compiler involved.

The generated code is deliberately plain, so that the verifier can follow
it and a reader of ``pycore trace -v`` can too:

* ``r9`` holds the context, ``r8`` this CPU's scratch buffer (a per-CPU
  array value, looked up once at entry), ``r6``/``r7`` survive helper calls
  for map values; ``r0``-``r5`` are free between statements.
* A scalar expression leaves its value in ``r0``; an operand that must
  survive the other side's evaluation is spilled to an 8-byte stack slot.
* Strings, map keys, values and event records live in the scratch buffer
  (the 512-byte stack would not hold a script's strings); a string
  expression is written into a destination region, zeroed first, so keys
  built from strings hash the same whatever garbage preceded them.
* Output (printf, print, exit, time, clear...) is a record in the ring
  buffer: a u64 tag, then the arguments, each 8 bytes or a whole string;
  the runtime formats it.  A full ring counts a lost event.
* Aggregations go to per-CPU hash maps (count, sum, min, max, avg, stats,
  hist, lhist: the runtime adds the CPUs up); plain ``@m = v`` to a hash.

Integer semantics are bpftrace's: 64-bit arithmetic, narrower fields sign-
or zero-extended when read, signed comparison and shift only when both
sides are signed.

Over 600 lines and one module on purpose for now: it is one concept (one
tree walk that emits a program) whose parts (expressions, strings, maps,
output records) call each other at every level; splitting it into mixins is
noted as work to do once the language surface settles.
"""

from __future__ import annotations

import struct

from pycore.lang import ast as A
from pycore.lang.checker import AGGREGATES, USER_PROBES, Checked, MapInfo, is_literal, member_offset
from pycore.lang.errors import CheckError
from pycore.lang.probes import PT_REGS, REGS, CtxField
from pycore.lang.types import (Array, Buffer, Inet, Int, Ptr, Record, Stack, Str, Tuple, Type, Void, from_btf, is_aggregate,
                               is_buffer, width)
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pycore.lang.emit import Emitter

__all__ = ["Layout", "Action", "generate", "SCRATCH_SIZE", "TAG_EXIT", "TAG_PRINT_MAP", "TAG_CLEAR",
           "TAG_ZERO", "TAG_TIME", "TAG_PRINT_VALUE", "TAG_PRINTF"]

SCRATCH_SIZE = 16384         # per-CPU work area: strings, keys, values, records
LOST_OFF = 0                 # scratch[0:8]: events this CPU could not put in the ring
MAX_STACK = 512
BPF_ANY, BPF_NOEXIST = 0, 1
BPF_F_USER_STACK = 1 << 8

# record tags: what the runtime does with a ring-buffer record
TAG_PRINTF, TAG_EXIT, TAG_PRINT_MAP, TAG_CLEAR, TAG_ZERO, TAG_TIME, TAG_PRINT_VALUE, TAG_JOIN = range(8)
TAG_SYSTEM, TAG_CAT = 8, 9


@record
class Action:
    """One output statement: its tag, and what the runtime needs to format its record."""

    tag: int
    text: str = ""                                   # printf/time format, map name, system command
    args: list[Type] = field(default_factory=list)   # argument types in record order
    extra: tuple = ()


@record
class Layout:
    """What every program of a script shares: maps by name, actions by index, constant strings."""

    maps: dict[str, MapInfo]
    actions: list[Action] = field(default_factory=list)
    stack_maps: dict[tuple[bool, int], str] = field(default_factory=dict)
    cpid: int = 0                      # the -c command's pid (the cpid builtin)

    def action(self, a: Action) -> int:
        for i, old in enumerate(self.actions):
            if old == a:
                return i
        self.actions.append(a)
        return len(self.actions) - 1


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


class _Frame:
    """Stack slots (8 bytes, below r10) and scratch regions (above r8), handed out like a stack."""

    def __init__(self, gen: _Gen) -> None:
        self.gen = gen
        self.stack = 0            # bytes used below r10
        self.scratch = 8          # bytes used in the scratch buffer (0..8: the lost counter)

    def slot(self) -> int:
        self.stack += 8
        if self.stack > MAX_STACK:
            raise self.gen.error(None, "the probe needs more than 512 bytes of stack: simplify its expressions")
        return -self.stack

    def region(self, size: int) -> int:
        off = self.scratch
        self.scratch += _align8(size)
        if self.scratch > SCRATCH_SIZE:
            raise self.gen.error(None, f"the probe needs more than {SCRATCH_SIZE} bytes of strings and records")
        return off

    def mark(self) -> tuple[int, int]:
        return self.stack, self.scratch

    def release(self, mark: tuple[int, int]) -> None:
        self.stack, self.scratch = mark


class _Gen:
    """Emits one program: one (probe block, target) pair."""

    def __init__(self, checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
                 params: tuple[str, ...], source: tuple[str, str]) -> None:
        self.c = checked
        self.layout = layout
        self.e = emit
        self.fds = fds           # map name -> fd ("@x", "$scratch", "$ring", "$start", "$stack:k:127")
        self.params = params
        self.filename, self.source = source
        self.f = _Frame(self)
        self.vars: dict[str, int] = {}   # $x -> stack slot (ints) or scratch region (strings)
        self.exit_label = emit.label()
        self._loops: list[tuple[Any, Any]] = []   # (top, end) labels of the while loops around a statement

    def error(self, node: A.Node | None, message: str) -> CheckError:
        pos = node.pos if node is not None else self.c.block.pos
        return CheckError(message, pos.line, pos.col, self.filename, self.source)

    def t(self, node: A.Expr) -> Type:
        return self.c.types[id(node)]

    # -- program -------------------------------------------------------------------------------

    def program(self) -> None:
        e = self.e
        e.mov_reg(9, 1)
        # r8 = &scratch[0] (this CPU's)
        slot = self.f.slot()
        e.st(8, 10, slot, 0)
        e.ld_map(1, self.fds["$scratch"])
        e.mov_reg(2, 10)
        e.alu_imm("add", 2, slot)
        e.call("map_lookup_elem")
        e.jmp_imm("jeq", 0, 0, self.exit_label)
        e.mov_reg(8, 0)
        if self.c.target.kind == "iter":    # the call that ends a walk has no object (ctx->task is NULL):
            walking = e.label()              # it ends the script, after every record of the walk
            e.ldx(8, 0, 9, 8)
            e.jmp_imm("jne", 0, 0, walking)
            self.emit_record(self.layout.action(Action(TAG_EXIT)), [], [])
            e.ja(self.exit_label)
            e.place(walking)
        # every variable starts at zero, as in bpftrace: one assigned on one path only, or only
        # after an exit(), reads 0 elsewhere (not what an earlier expression left in its slot)
        for name, t in self.c.variables.items():
            home = self.var_home(name, t)
            if is_buffer(t):
                for off in range(0, _align8(t.size), 8):
                    e.st(8, 8, home + off, 0)
            else:
                e.st(8, 10, home, 0)
        block = self.c.block
        if block.predicate is not None:
            e.mark(block.predicate)
            self.scalar(block.predicate)
            e.jmp_imm("jeq", 0, 0, self.exit_label)
        self.stmts(block.body)
        e.place(self.exit_label)
        e.mov_imm(0, 0)
        e.exit()

    # -- statements ------------------------------------------------------------------------------

    def stmts(self, body: list[A.Stmt]) -> bool:
        """Emit a body; False when no path falls through its end (exit(), return, break, continue on
        every path). What follows such a statement never runs, and the verifier refuses code that
        cannot run, so it is not emitted."""
        for s in body:
            mark = self.f.mark()
            falls_through = self.stmt(s)
            # keep what variables took; hand back the rest
            self.f.release((max(mark[0], self._var_stack), max(mark[1], self._var_scratch)))
            if not falls_through:
                return False
        return True

    _var_stack = 8
    _var_scratch = 8

    def stmt(self, s: A.Stmt) -> bool:
        """Emit one statement; False when control never comes out of its end."""
        e = self.e
        e.mark(s)
        if isinstance(s, A.ExprStmt):
            if isinstance(s.expr, A.Call):
                self.call_stmt(s.expr)
                return s.expr.name != "exit"
            self.scalar_or_string(s.expr)
        elif isinstance(s, A.Assign):
            self.assign(s)
        elif isinstance(s, A.IncDec):
            self.incdec(s.target, 1 if s.op == "++" else -1)   # alone: its value is not needed
        elif isinstance(s, A.If):
            else_l, end_l = e.label(), e.label()
            self.scalar(s.cond)
            e.jmp_imm("jeq", 0, 0, else_l)
            then_falls = self.stmts(s.then)
            if s.else_ and then_falls:
                e.ja(end_l)
            e.place(else_l)
            if not s.else_:
                return True
            else_falls = self.stmts(s.else_)
            e.place(end_l)
            return then_falls or else_falls
        elif isinstance(s, A.While):
            top, end = e.label(), e.label()
            e.place(top)
            self.scalar(s.cond)
            e.jmp_imm("jeq", 0, 0, end)
            self._loops.append((top, end))
            if self.stmts(s.body):
                e.ja(top)
            self._loops.pop()
            e.place(end)
        elif isinstance(s, A.Unroll):
            n = self._const(s.count)
            for _ in range(n):
                if not self.stmts(s.body):
                    return False
        elif isinstance(s, A.Block):
            return self.stmts(s.body)
        elif isinstance(s, A.Return):
            e.ja(self.exit_label)
            return False
        elif isinstance(s, A.Break):
            e.ja(self._loops[-1][1])
            return False
        elif isinstance(s, A.Continue):
            e.ja(self._loops[-1][0])
            return False
        else:
            raise self.error(s, f"unsupported statement {type(s).__name__}")
        return True

    def _const(self, node: A.Expr) -> int:
        from pycore.lang.checker import Checker

        ch = Checker(lambda: None, self.params)
        return ch.constant(self.c, node)

    def var_home(self, name: str, t: Type) -> int:
        """A variable's stack slot (scalars) or scratch region (strings), made on first use."""
        home = self.vars.get(name)
        if home is None:
            if is_buffer(t):
                home = self.f.region(t.size)
                self._var_scratch = self.f.scratch
            else:
                home = self.f.slot()
                self._var_stack = self.f.stack
            self.vars[name] = home
        return home

    def assign(self, s: A.Assign) -> None:
        e = self.e
        target, value = s.target, s.value
        if isinstance(target, A.Var):
            t = self.c.variables[target.name]
            home = self.var_home(target.name, t)
            if is_buffer(t):
                self.string_into(value, home, t.size)
                return
            self.scalar(value)
            if s.op != "=":
                e.mov_reg(1, 0)
                self.scale(1, self.step(t))    # $p += n: n steps of the pointee
                e.ldx(8, 0, 10, home)
                self.alu(s.op[:-1], 0, 1, signed=getattr(t, "signed", True))
            e.stx(8, 10, home, 0)
            return
        m = self.layout.maps["@" + target.name]
        if isinstance(value, A.Call) and value.name in AGGREGATES:
            self.aggregate(target, m, value)
            return
        if s.op != "=":
            self.scalar(value)
            if s.op in ("+=", "-="):
                if s.op == "-=":
                    e.alu_imm("neg", 0, 0)
                self.map_add(target, m, from_reg=True)
                return
            # other compound ops: read, combine, write
            tmp = self.f.slot()
            e.stx(8, 10, tmp, 0)
            self.map_read(target, m)
            e.ldx(8, 1, 10, tmp)
            self.alu(s.op[:-1], 0, 1, signed=True)
            self.map_write_reg(target, m)
            return
        if m.kind == "str":
            key = self.key(target, m)
            val = self.f.region(m.value.size)
            self.string_into(value, val, m.value.size)
            self.map_update(m, key, val, BPF_ANY)
            return
        self.scalar(value)
        self.map_write_reg(target, m)

    def incdec(self, target: A.Expr, delta: int, value: str = "") -> None:
        """``x++``/``--x``; ``value`` "old" or "new" leaves that value in r0 (the expression forms).

        A pointer variable steps by its pointee's size. A map's statement form adds atomically;
        its expression form reads, adds and writes, as bpftrace does."""
        e = self.e
        if isinstance(target, A.Var):
            t = self.c.variables[target.name]
            home = self.var_home(target.name, t)
            e.ldx(8, 0, 10, home)
            if value == "old":
                e.mov_reg(1, 0)
            e.alu_imm("add", 0, delta * self.step(t))
            e.stx(8, 10, home, 0)
            if value == "old":
                e.mov_reg(0, 1)
            return
        m = self.layout.maps["@" + target.name]
        if not value:
            e.mov_imm(0, delta)
            self.map_add(target, m, from_reg=True)
            return
        old = self.f.slot()
        self.map_read(target, m)
        e.stx(8, 10, old, 0)
        e.alu_imm("add", 0, delta)
        self.map_write_reg(target, m)
        e.ldx(8, 0, 10, old)
        if value == "new":
            e.alu_imm("add", 0, delta)

    @staticmethod
    def step(t: Type) -> int:
        """What one step of ``t`` is in bytes: the pointee's size for a typed pointer (C's rule,
        bpftrace's too: ``(uint32 *)p + 1`` is 4 bytes on), else 1."""
        if isinstance(t, Ptr) and t.target and t.spec is not None:
            from btf.layout import sizeof

            return sizeof(t.spec.type(t.target)) or 1
        return 1

    # -- maps ------------------------------------------------------------------------------------

    def key(self, ref: A.MapRef, m: MapInfo, extra: int = 0) -> int:
        """Build ``ref``'s key in scratch (plus ``extra`` trailing bytes); returns its offset."""
        e = self.e
        size = m.key_size + extra
        off = self.f.region(size)
        if not ref.keys:
            e.st(8, 8, off, 0)
            return off
        pos = off
        for k, kt in zip(ref.keys, m.keys or ()):
            if is_buffer(kt):
                self.string_into(k, pos, kt.size)
            else:
                self.scalar(k)
                e.stx(8, 8, pos, 0)
                self.usym_pid(kt, pos)
            pos += width(kt)
        return off

    def usym_pid(self, t: Type, pos: int) -> None:
        """After a usym address stored at scratch[pos], its process's pid (what names it at print time)."""
        if isinstance(t, Int) and t.display == "usym":
            self.e.call("get_current_pid_tgid")
            self.e.alu_imm("rsh", 0, 32)
            self.e.stx(8, 8, pos + 8, 0)

    def _ptr(self, reg: int, off: int) -> None:
        """reg = r8 + off (a pointer into scratch)."""
        self.e.mov_reg(reg, 8)
        if off:
            self.e.alu_imm("add", reg, off)

    def map_update(self, m: MapInfo, key: int, val: int, flags: int) -> None:
        e = self.e
        e.ld_map(1, self.fds[m.name])
        self._ptr(2, key)
        self._ptr(3, val)
        e.mov_imm(4, flags)
        e.call("map_update_elem")

    def map_lookup(self, m: MapInfo, key: int) -> None:
        e = self.e
        e.ld_map(1, self.fds[m.name])
        self._ptr(2, key)
        e.call("map_lookup_elem")

    def map_write_reg(self, ref: A.MapRef, m: MapInfo) -> None:
        """@m[k] = r0."""
        tmp = self.f.slot()
        self.e.stx(8, 10, tmp, 0)
        key = self.key(ref, m)
        val = self.f.region(width(m.value) if m.value is not None else 8)
        self.e.ldx(8, 0, 10, tmp)
        self.e.stx(8, 8, val, 0)
        if m.value is not None:
            self.usym_pid(m.value, val)
        self.map_update(m, key, val, BPF_ANY)

    def map_read(self, ref: A.MapRef, m: MapInfo) -> None:
        """r0 = @m[k], or 0 when absent."""
        e = self.e
        key = self.key(ref, m)
        self.map_lookup(m, key)
        done = e.label()
        e.jmp_imm("jeq", 0, 0, done)
        e.ldx(8, 0, 0, 0)
        e.place(done)

    def map_add(self, ref: A.MapRef, m: MapInfo, from_reg: bool) -> None:
        """@m[k] += r0 (inserting r0 when absent); per-CPU maps need no atomics."""
        e = self.e
        tmp = self.f.slot()
        e.stx(8, 10, tmp, 0)
        key = self.key(ref, m)
        self._add_at(m, key, tmp, 0)

    def _add_at(self, m: MapInfo, key: int, delta_slot: int, word: int, nwords: int = 1,
                init: list[tuple[int, int | None]] | None = None) -> None:
        """value[word] += stack[delta_slot]; when the key is new, insert ``init`` words (slot or None: 0)."""
        e = self.e
        self.map_lookup(m, key)
        have, done = e.label(), e.label()
        e.jmp_imm("jne", 0, 0, have)
        val = self.f.region(8 * nwords)
        for i in range(nwords):
            src = (init[i][1] if init else (delta_slot if i == word else None))
            if src is None:
                e.st(8, 8, val + 8 * i, 0)
            else:
                e.ldx(8, 1, 10, src)
                e.stx(8, 8, val + 8 * i, 1)
        self.map_update(m, key, val, BPF_NOEXIST)
        e.ja(done)
        e.place(have)
        e.ldx(8, 1, 0, 8 * word)
        e.ldx(8, 2, 10, delta_slot)
        e.alu_reg("add", 1, 2)
        e.stx(8, 0, 8 * word, 1)
        e.place(done)

    def aggregate(self, ref: A.MapRef, m: MapInfo, call: A.Call) -> None:
        e = self.e
        n = call.name
        if n == "count":
            e.mov_imm(0, 1)
            self.map_add(ref, m, True)
            return
        self.scalar(call.args[0])
        v = self.f.slot()
        e.stx(8, 10, v, 0)
        if n == "sum":
            key = self.key(ref, m)
            self._add_at(m, key, v, 0)
        elif n in ("avg", "stats"):
            one = self.f.slot()
            e.st(8, 10, one, 1)
            key = self.key(ref, m)
            # value: [count, total]
            self._add_at(m, key, one, 0, 2, [(0, one), (1, v)])
            self._add_existing(m, key, v, 1)
        elif n in ("min", "max"):
            key = self.key(ref, m)
            self.map_lookup(m, key)
            have, done, store = e.label(), e.label(), e.label()
            e.jmp_imm("jne", 0, 0, have)
            val = self.f.region(16)
            e.ldx(8, 1, 10, v)
            e.stx(8, 8, val, 1)
            e.st(8, 8, val + 8, 1)
            self.map_update(m, key, val, BPF_ANY)
            e.ja(done)
            e.place(have)
            e.ldx(8, 1, 10, v)
            e.ldx(8, 2, 0, 8)           # set?
            e.jmp_imm("jeq", 2, 0, store)
            e.ldx(8, 2, 0, 0)
            # keep the old value unless the new one is smaller (min) / larger (max): signed, as bpftrace
            e.jmp_reg("jsge" if n == "min" else "jsle", 1, 2, done)
            e.place(store)
            e.stx(8, 0, 0, 1)
            e.st(8, 0, 8, 1)
            e.place(done)
        elif n in ("hist", "lhist"):
            e.ldx(8, 0, 10, v)
            if n == "hist":
                self.log2_bucket()
            else:
                lo, hi, step = m.lhist
                self.linear_bucket(lo, hi, step)
            b = self.f.slot()
            e.stx(8, 10, b, 0)
            key = self.key(ref, m, extra=8)
            e.ldx(8, 0, 10, b)
            e.stx(8, 8, key + m.key_size, 0)
            one = self.f.slot()
            e.st(8, 10, one, 1)
            self._add_at(m, key, one, 0)
        else:
            raise self.error(call, f"{n}() is not supported here")

    def _add_existing(self, m: MapInfo, key: int, delta_slot: int, word: int) -> None:
        """value[word] += delta, only when the key exists (its insert already counted it)."""
        e = self.e
        # the insert path of _add_at stored [1, v]; an existing entry got count += 1 only
        # so add v to the total here when the entry existed before: look it up again
        self.map_lookup(m, key)
        done = e.label()
        e.jmp_imm("jeq", 0, 0, done)
        e.ldx(8, 1, 0, 0)
        e.jmp_imm("jeq", 1, 1, done)     # count == 1: just inserted with its total
        e.ldx(8, 1, 0, 8 * word)
        e.ldx(8, 2, 10, delta_slot)
        e.alu_reg("add", 1, 2)
        e.stx(8, 0, 8 * word, 1)
        e.place(done)

    def log2_bucket(self) -> None:
        """r0 = hist bucket of r0: 0 negative, 1 zero, 2 + floor(log2 v) above."""
        e = self.e
        neg, zero, done = e.label(), e.label(), e.label()
        e.jmp_imm("jslt", 0, 0, neg)
        e.jmp_imm("jeq", 0, 0, zero)
        e.mov_imm(1, 0)             # r1 = floor(log2 v), by halving steps
        for shift in (32, 16, 8, 4, 2, 1):
            skip = e.label()
            e.mov_reg(2, 0)
            e.alu_imm("rsh", 2, shift)
            e.jmp_imm("jeq", 2, 0, skip)
            e.mov_reg(0, 2)
            e.alu_imm("add", 1, shift)
            e.place(skip)
        e.mov_reg(0, 1)
        e.alu_imm("add", 0, 2)
        e.ja(done)
        e.place(neg)
        e.mov_imm(0, 0)
        e.ja(done)
        e.place(zero)
        e.mov_imm(0, 1)
        e.place(done)

    def linear_bucket(self, lo: int, hi: int, step: int) -> None:
        """r0 = lhist bucket of r0: 0 below lo, 1 + (v - lo) / step inside, the last at hi and up."""
        e = self.e
        below, above, done = e.label(), e.label(), e.label()
        e.ld_imm64(1, lo)
        e.jmp_reg("jslt", 0, 1, below)
        e.ld_imm64(1, hi)
        e.jmp_reg("jsge", 0, 1, above)
        e.ld_imm64(1, lo)
        e.alu_reg("sub", 0, 1)
        e.ld_imm64(1, step)
        e.alu_reg("div", 0, 1)
        e.alu_imm("add", 0, 1)
        e.ja(done)
        e.place(below)
        e.mov_imm(0, 0)
        e.ja(done)
        e.place(above)
        e.mov_imm(0, (hi - lo) // step + 1)
        e.place(done)

    # -- calls as statements -----------------------------------------------------------------------

    def call_stmt(self, call: A.Call) -> None:
        n = call.name
        e = self.e
        if n == "printf":
            types = [self.t(a) for a in call.args[1:]]
            idx = self.layout.action(Action(TAG_PRINTF, call.args[0].value, types))
            self.emit_record(idx, call.args[1:], types)
        elif n == "print":
            a0 = call.args[0]
            if isinstance(a0, A.MapRef) and not a0.keys and self.t(a0) == Void():
                extra = tuple(self._const(a) for a in call.args[1:])
                idx = self.layout.action(Action(TAG_PRINT_MAP, "@" + a0.name, [], extra))
                self.emit_record(idx, [], [])
            elif isinstance(a0, A.Builtin) and a0.name == "args":
                self.print_args(a0)
            else:
                t = self.t(a0)
                if isinstance(t, Record):
                    idx = self.layout.action(Action(TAG_PRINT_VALUE, "", [t]))
                    self.emit_record(idx, [a0], [t])
                else:
                    idx = self.layout.action(Action(TAG_PRINT_VALUE, "", [t]))
                    self.emit_record(idx, [a0], [t])
        elif n == "exit":
            idx = self.layout.action(Action(TAG_EXIT))
            self.emit_record(idx, [], [])
            e.ja(self.exit_label)
        elif n in ("clear", "zero"):
            idx = self.layout.action(Action(TAG_CLEAR if n == "clear" else TAG_ZERO, "@" + call.args[0].name))
            self.emit_record(idx, [], [])
        elif n == "time":
            fmt = call.args[0].value if call.args else "%H:%M:%S\n"
            idx = self.layout.action(Action(TAG_TIME, fmt))
            self.emit_record(idx, [], [])
        elif n == "delete":
            ref = call.args[0]
            m = self.layout.maps["@" + ref.name]
            key = self.key(ref, m)
            e.ld_map(1, self.fds[m.name])
            self._ptr(2, key)
            e.call("map_delete_elem")
        elif n == "join":
            idx = self.layout.action(Action(TAG_JOIN, call.args[1].value if len(call.args) > 1 else " "))
            self.emit_join(idx, call.args[0])
        elif n in ("system", "cat"):
            types = [self.t(a) for a in call.args[1:]]
            idx = self.layout.action(Action(TAG_SYSTEM if n == "system" else TAG_CAT, call.args[0].value, types))
            self.emit_record(idx, call.args[1:], types)
        elif n == "override":     # the probed function returns this instead of running (kprobe, --unsafe)
            self.scalar(call.args[0])
            e.mov_reg(2, 0)
            e.mov_reg(1, 9)
            e.call("override_return")
        elif n == "signal":
            a = call.args[0]
            sig = _SIGNALS.get(a.value, 0) if isinstance(a, A.Str) else self._const(a)
            e.mov_imm(1, sig)
            e.call("send_signal")
        else:
            self.scalar_or_string(call)

    def print_args(self, node: A.Builtin) -> None:
        """print(args): the whole context record (tracepoint fields or function arguments)."""
        tgt = self.c.target
        fields = list(tgt.args.values())
        types: list[Type] = [f.type for f in fields]
        idx = self.layout.action(Action(TAG_PRINT_VALUE, "args", types, tuple(f.name for f in fields)))
        size = 8 + sum(width(t) for t in types)
        rec = self.f.region(size)
        self.e.ld_imm64(0, idx)
        self.e.stx(8, 8, rec, 0)
        pos = rec + 8
        for f in fields:
            if isinstance(f.type, Str):
                self.ctx_string(f, pos, f.type.size)
                pos += _align8(f.type.size)
            elif isinstance(f.type, Array):
                self.e.mov_reg(0, 9)
                self.e.alu_imm("add", 0, f.offset)
                self.read_mem(pos, f.type.size, 0, False)
                pos += width(f.type)
            else:
                self.ctx_load(f)
                self.e.stx(8, 8, pos, 0)
                pos += 8
        self.output(rec, size)

    def emit_record(self, idx: int, args: list[A.Expr], types: list[Type]) -> None:
        """A ring-buffer record: u64 action index, then each argument (8 bytes, or its buffer)."""
        size = 8 + sum(width(t) for t in types)
        rec = self.f.region(size)
        self.values_into(args, types, rec + 8)
        self.e.ld_imm64(0, idx)
        self.e.stx(8, 8, rec, 0)
        self.output(rec, size)

    def values_into(self, args: Sequence[A.Expr], types: Sequence[Type], pos: int) -> None:
        """scratch[pos:] = each value in turn, each :func:`width` bytes: an output record's arguments,
        a tuple's elements."""
        for a, t in zip(args, types):
            if is_buffer(t):
                self.string_into(a, pos, t.size)
            elif isinstance(t, (Record, Array)):
                self.address(a)
                self.read_mem(pos, t.size, 0, t.user)
            else:
                self.scalar(a)
                self.e.stx(8, 8, pos, 0)
                self.usym_pid(t, pos)
            pos += width(t)

    def tuple_element(self, node: A.Field) -> int:
        """``$t.N``: the element's scratch offset; a tuple not in a variable is built into a region first.
        The caller releases the region (``self.f.mark()`` before, ``release`` after)."""
        t = self.t(node.expr)
        assert isinstance(t, Tuple)
        if isinstance(node.expr, A.Var):   # already in scratch: read it in place
            return self.vars_get(node.expr) + t.offsets()[int(node.name)]
        tmp = self.f.region(_align8(t.size))
        self.string_into(node.expr, tmp, t.size)
        return tmp + t.offsets()[int(node.name)]

    def _is_tuple_field(self, node: A.Expr) -> bool:
        return isinstance(node, A.Field) and isinstance(self.t(node.expr), Tuple)

    def emit_join(self, idx: int, arr: A.Expr) -> None:
        """join(argv): up to 16 user strings of 64 bytes from a char ** (execve's argv)."""
        e = self.e
        n, width = 16, 64
        size = 8 + n * width
        rec = self.f.region(size)
        self.scalar(arr)
        base = self.f.slot()
        e.stx(8, 10, base, 0)
        for i in range(n):
            e.st(8, 8, rec + 8 + i * width, 0)
        for i in range(n):
            p = self.f.slot()
            # p = argv[i]
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, rec + 8 + i * width)   # temporarily read the pointer into the slot's buffer
            e.mov_imm(2, 8)
            e.ldx(8, 3, 10, base)
            e.alu_imm("add", 3, 8 * i)
            e.call("probe_read_user")
            e.ldx(8, 3, 8, rec + 8 + i * width)
            e.stx(8, 10, p, 3)
            e.st(8, 8, rec + 8 + i * width, 0)
            skip = e.label()
            e.jmp_imm("jeq", 3, 0, skip)
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, rec + 8 + i * width)
            e.mov_imm(2, width)
            e.call("probe_read_user_str")
            e.place(skip)
        e.ld_imm64(0, idx)
        e.stx(8, 8, rec, 0)
        self.output(rec, size)

    def output(self, rec: int, size: int) -> None:
        """ringbuf_output(rec); count a lost event when the ring is full."""
        e = self.e
        e.ld_map(1, self.fds["$ring"])
        self._ptr(2, rec)
        e.mov_imm(3, size)
        e.mov_imm(4, 0)
        e.call("ringbuf_output")
        ok = e.label()
        e.jmp_imm("jeq", 0, 0, ok)
        e.ldx(8, 1, 8, LOST_OFF)
        e.alu_imm("add", 1, 1)
        e.stx(8, 8, LOST_OFF, 1)
        e.place(ok)

    # -- expressions -------------------------------------------------------------------------------

    def scalar_or_string(self, node: A.Expr) -> None:
        t = self.t(node)
        if is_buffer(t):
            mark = self.f.mark()
            self.string_into(node, self.f.region(t.size), t.size)
            self.f.release(mark)
        elif isinstance(t, (Void, Record, Array)):
            pass
        else:
            self.scalar(node)

    def alu(self, op: str, dst: int, src: int, signed: bool) -> None:
        ops = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "&": "and", "|": "or",
               "^": "xor", "<<": "lsh", ">>": "arsh" if signed else "rsh"}
        self.e.alu_reg(ops[op], dst, src)

    def scalar(self, node: A.Expr) -> None:
        """r0 = the value of an integer or pointer expression."""
        e = self.e
        t = self.t(node)
        if id(node) in self.c.consts:    # known when checked: an enum value, a macro, cgroupid(), sizeof()
            e.ld_imm64(0, self.c.consts[id(node)]) if not -2**31 <= self.c.consts[id(node)] < 2**31 \
                else e.mov_imm(0, self.c.consts[id(node)])
        elif id(node) in self.c.ip_relative:    # uaddr() in a relocated binary: where the probe runs, plus
            e.ldx(8, 0, 9, PT_REGS["rip"])    # the symbol's distance from the probed instruction
            e.alu_imm("add", 0, self.c.ip_relative[id(node)])
        elif isinstance(node, A.Int):
            e.ld_imm64(0, node.value) if not -2**31 <= node.value < 2**31 else e.mov_imm(0, node.value)
        elif isinstance(node, A.Positional):
            from pycore.lang.checker import Checker

            v = Checker(lambda: None, self.params).positional(node)
            if not isinstance(v, int):
                raise self.error(node, f"${node.index} is {v!r}, not a number (use str(${node.index}))")
            e.ld_imm64(0, v)
        elif isinstance(node, A.Builtin):
            self.builtin(node)
        elif isinstance(node, A.Var):
            e.ldx(8, 0, 10, self.vars_get(node))
        elif isinstance(node, A.MapRef):
            self.map_read(node, self.layout.maps["@" + node.name])
        elif isinstance(node, A.Binary):
            self.binary(node)
        elif isinstance(node, A.Unary):
            if node.op == "*":
                if isinstance(self.t(node.operand), Int):   # an address as an integer: where the probe runs
                    self.scalar(node.operand)
                    self.read_at_r0(8, self.c.target.kind in USER_PROBES)
                    return
                self.load_typed(node.operand, 0, t, deref=True)
                return
            self.scalar(node.operand)
            if node.op == "-":
                e.alu_imm("neg", 0, 0)
            elif node.op == "~":
                e.alu_imm("xor", 0, -1)
            elif node.op == "!":
                yes, done = e.label(), e.label()
                e.jmp_imm("jeq", 0, 0, yes)
                e.mov_imm(0, 0)
                e.ja(done)
                e.place(yes)
                e.mov_imm(0, 1)
                e.place(done)
        elif isinstance(node, A.Ternary):
            other, done = e.label(), e.label()
            self.scalar(node.cond)
            e.jmp_imm("jeq", 0, 0, other)
            self.scalar(node.then)
            e.ja(done)
            e.place(other)
            self.scalar(node.else_)
            e.place(done)
        elif isinstance(node, A.Cast):
            self.scalar(node.expr)
            if isinstance(t, Int) and t.size < 8:
                self.extend(0, t.size, t.signed)
        elif isinstance(node, A.Field):
            self.field(node)
        elif isinstance(node, A.Index):
            self.index(node)
        elif isinstance(node, A.Call):
            self.call_value(node)
        elif isinstance(node, A.IncDec):
            self.incdec(node.target, 1 if node.op == "++" else -1, "new" if node.prefix else "old")
        else:
            raise self.error(node, f"cannot compute {type(node).__name__} here")

    def vars_get(self, node: A.Var) -> int:
        home = self.vars.get(node.name)
        if home is None:
            raise self.error(node, f"${node.name} is used before it is assigned")
        return home

    def extend(self, reg: int, size: int, signed: bool) -> None:
        if size >= 8:
            return
        bits = 64 - 8 * size
        self.e.alu_imm("lsh", reg, bits)
        self.e.alu_imm("arsh" if signed else "rsh", reg, bits)

    def binary(self, node: A.Binary) -> None:
        e = self.e
        op = node.op
        lt, rt = self.t(node.left), self.t(node.right)
        if op in ("&&", "||"):
            short, done = e.label(), e.label()
            self.scalar(node.left)
            e.jmp_imm("jeq" if op == "&&" else "jne", 0, 0, short)
            self.scalar(node.right)
            e.jmp_imm("jeq", 0, 0, short if op == "&&" else done)
            e.mov_imm(0, 1)
            e.ja(done)
            e.place(short)
            e.mov_imm(0, 0 if op == "&&" else 1)
            e.place(done)
            if op == "||":
                # r0 != 0 from the right side falls to 'done' with its value: normalise
                pass
            return
        if isinstance(lt, Str) and isinstance(rt, Str):
            self.string_compare(node.left, node.right, op == "!=")
            return
        if is_aggregate(lt) or isinstance(lt, Buffer):
            self.bytes_equal(node.left, node.right, op == "!=")
            return
        self.scalar(node.left)
        slot = self.f.slot()
        e.stx(8, 10, slot, 0)
        self.scalar(node.right)
        e.mov_reg(1, 0)
        e.ldx(8, 0, 10, slot)
        signed = getattr(lt, "signed", False) and getattr(rt, "signed", False)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            jmp = {"==": "jeq", "!=": "jne", "<": "jslt" if signed else "jlt", "<=": "jsle" if signed else "jle",
                   ">": "jsgt" if signed else "jgt", ">=": "jsge" if signed else "jge"}[op]
            yes, done = e.label(), e.label()
            e.jmp_reg(jmp, 0, 1, yes)
            e.mov_imm(0, 0)
            e.ja(done)
            e.place(yes)
            e.mov_imm(0, 1)
            e.place(done)
            return
        if isinstance(lt, Ptr) and op in ("+", "-") and isinstance(rt, Int):
            self.scale(1, self.step(lt))
        elif isinstance(rt, Ptr) and op == "+" and isinstance(lt, Int):
            self.scale(0, self.step(rt))
        self.alu(op, 0, 1, signed)

    def scale(self, reg: int, by: int) -> None:
        if by != 1:
            self.e.alu_imm("mul", reg, by)

    def string_compare(self, left: A.Expr, right: A.Expr, negate: bool, limit: int | None = None) -> None:
        """r0 = (left == right) over their bytes up to the first NUL (or ``limit``)."""
        e = self.e
        lt, rt = self.t(left), self.t(right)
        n = min(lt.size, rt.size) if limit is None else limit
        a = self.f.region(lt.size)
        self.string_into(left, a, lt.size)
        b = self.f.region(rt.size)
        self.string_into(right, b, rt.size)
        differ, same, done = e.label(), e.label(), e.label()
        for i in range(n):
            e.ldx(1, 1, 8, a + i)
            e.ldx(1, 2, 8, b + i)
            e.jmp_reg("jne", 1, 2, differ)
            e.jmp_imm("jeq", 1, 0, same)
        e.ja(same)
        e.place(differ)
        e.mov_imm(0, 1 if negate else 0)
        e.ja(done)
        e.place(same)
        e.mov_imm(0, 0 if negate else 1)
        e.place(done)

    # builtins and context

    def builtin(self, node: A.Builtin) -> None:
        e = self.e
        n = node.name
        tgt = self.c.target
        if n in ("pid", "tid"):
            e.call("get_current_pid_tgid")
            if n == "pid":
                e.alu_imm("rsh", 0, 32)
            else:
                self.extend(0, 4, False)
        elif n in ("uid", "gid", "username"):   # username: the uid, named when printed
            e.call("get_current_uid_gid")
            if n == "gid":
                e.alu_imm("rsh", 0, 32)
            else:
                self.extend(0, 4, False)
        elif n == "nsecs":
            e.call("ktime_get_ns")
        elif n == "elapsed":
            e.call("ktime_get_ns")
            e.mov_reg(6, 0)
            slot = self.f.slot()
            e.st(8, 10, slot, 0)
            e.ld_map(1, self.fds["$start"])
            e.mov_reg(2, 10)
            e.alu_imm("add", 2, slot)
            e.call("map_lookup_elem")
            zero = e.label()
            e.jmp_imm("jeq", 0, 0, zero)
            e.ldx(8, 1, 0, 0)
            e.alu_reg("sub", 6, 1)
            e.place(zero)
            e.mov_reg(0, 6)
        elif n == "cpu":
            e.call("get_smp_processor_id")
        elif n == "cpid":
            e.mov_imm(0, self.layout.cpid)
        elif n == "curtask":
            e.call("get_current_task")
        elif n == "rand":
            e.call("get_prandom_u32")
        elif n == "cgroup":
            e.call("get_current_cgroup_id")
        elif n == "numaid":
            e.call("get_numa_node_id")
        elif n == "jiffies":
            e.call("jiffies64")
        elif n == "retval":
            self.ctx_load(tgt.retval)
        elif n.startswith("sarg") and n[4:].isdigit():
            # a stack argument (x86-64: above the return address at sp), read where the probe runs
            e.ldx(8, 0, 9, REGS["sp"])
            e.alu_imm("add", 0, 8 * (int(n[4:]) + 1))
            self.read_at_r0(8, tgt.kind in USER_PROBES)
        elif n.startswith("arg") and n[3:].isdigit():
            i = int(n[3:])
            if tgt.usdt_args:
                self.usdt_arg(i)
            else:
                self.ctx_load(tgt.argn[i])
        elif n in ("kstack", "ustack"):
            self.stack_id(n == "ustack", 127)
        elif n == "ctx":
            e.mov_reg(0, 9)
        elif n in ("func", "probe"):
            raise self.error(node, f"{n} is a string here: print it, or compare it with ==")
        else:
            raise self.error(node, f"{n} has no integer value")

    def ctx_load(self, f: CtxField) -> None:
        """r0 = a field of the context, extended to 64 bits."""
        self.e.ldx(f.size if f.size in (1, 2, 4, 8) else 8, 0, 9, f.offset)
        t = f.type
        if isinstance(t, Int) and f.size < 8:
            self.extend(0, f.size, f.signed)

    def usdt_arg(self, i: int) -> None:
        """r0 = USDT argument i at this location, from its note's spec (register, memory or constant)."""
        e = self.e
        a = self.c.target.usdt_args[i]
        if a.kind == "const":
            e.ld_imm64(0, a.value)
        elif a.kind == "reg":
            e.ldx(8, 0, 9, PT_REGS[a.reg])
            if a.shift:
                e.alu_imm("rsh", 0, 8 * a.shift)
        elif a.kind in ("mem", "sib"):
            e.ldx(8, 3, 9, PT_REGS[a.reg])
            if a.kind == "sib":
                e.ldx(8, 1, 9, PT_REGS[a.index])
                if a.scale != 1:
                    e.alu_imm("mul", 1, a.scale)
                e.alu_reg("add", 3, 1)
            if a.offset:
                e.alu_imm("add", 3, a.offset)
            tmp = self.f.region(8)
            e.st(8, 8, tmp, 0)
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, tmp)
            e.mov_imm(2, a.size)
            e.call("probe_read_user")
            e.ldx(8, 0, 8, tmp)
        else:
            raise self.error(self.c.block, f"USDT argument {a.text!r} ({a.kind}) is not supported by pycore trace yet")
        if a.size < 8:
            self.extend(0, a.size, a.signed)

    def stack_id(self, user: bool, limit: int) -> None:
        e = self.e
        name = self.layout.stack_maps.setdefault((user, limit), f"$stack:{'u' if user else 'k'}:{limit}")
        e.mov_reg(1, 9)
        e.ld_map(2, self.fds[name])
        e.mov_imm(3, BPF_F_USER_STACK if user else 0)
        e.call("get_stackid")
        if user:
            # key a user stack with the pid too: its addresses mean something only in that process
            e.mov_reg(6, 0)
            e.call("get_current_pid_tgid")
            e.alu_imm("rsh", 0, 32)
            e.alu_imm("lsh", 0, 32)
            self.extend(6, 4, False)
            e.alu_reg("or", 0, 6)

    # memory

    def read_mem(self, dst: int, size: int, src_reg: int, user: bool) -> None:
        """scratch[dst:dst+size] = *(src_reg) via bpf_probe_read_{kernel,user}."""
        e = self.e
        e.mov_reg(3, src_reg)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.mov_imm(2, size)
        e.call("probe_read_user" if user else "probe_read_kernel")

    def address(self, node: A.Expr) -> None:
        """r0 = the address of an lvalue in memory (a record, a field of one, an array element)."""
        e = self.e
        if isinstance(node, A.Unary) and node.op == "*":
            self.scalar(node.operand)
            return
        if isinstance(node, A.Field) and isinstance(node.expr, A.Builtin) and node.expr.name == "args" \
                and not self.c.target.args[node.name].data_loc and self.c.target.kind == "tracepoint":
            e.mov_reg(0, 9)                 # a tracepoint field lives in the context record
            e.alu_imm("add", 0, self.c.target.args[node.name].offset)
            return
        if isinstance(node, A.Field):
            base_t = self.t(node.expr)
            if isinstance(base_t, Ptr):
                self.scalar(node.expr)
                rec = from_btf(base_t.spec, base_t.target, user=base_t.user)
            else:
                self.address(node.expr)
                rec = base_t
            off, _, _ = member_offset(rec.spec, rec, node.name)
            if off:
                e.alu_imm("add", 0, off)
            return
        if isinstance(node, A.Index):
            bt = self.t(node.expr)
            if isinstance(bt, Ptr):
                self.scalar(node.expr)
                elem = self.t(node)
                esize = getattr(elem, "size", 8) or 8
            else:
                self.address(node.expr)
                esize = bt.elem_size
            slot = self.f.slot()
            e.stx(8, 10, slot, 0)
            self.scalar(node.index)
            if esize != 1:
                e.alu_imm("mul", 0, esize)
            e.ldx(8, 1, 10, slot)
            e.alu_reg("add", 0, 1)
            return
        if isinstance(node, A.Builtin) and node.name == "curtask":
            self.scalar(node)
            return
        t = self.t(node)
        if isinstance(node, A.Var) and is_aggregate(t):     # a struct or array copied into a variable
            e.mov_reg(0, 8)
            e.alu_imm("add", 0, self.vars_get(node))
            return
        if isinstance(t, Ptr):
            self.scalar(node)
            return
        raise self.error(node, "this value is not in memory")

    def load_typed(self, node: A.Expr, reg: int, t: Type, deref: bool = False) -> None:
        """r0 = the integer at the address of ``node`` (or what ``node`` points to, when ``deref``)."""
        if deref:
            self.scalar(node)
        else:
            self.address(node)
        size = t.size if isinstance(t, Int) else 8
        via = self.c.types.get(id(node)) if deref else None     # *p: where the pointer itself points
        user = bool(via.user) if isinstance(via, Ptr) else getattr(t, "user", False) or self._user(node)
        self.read_at_r0(size, user)
        if isinstance(t, Int):
            self.extend(0, size, t.signed)

    def read_at_r0(self, size: int, user: bool) -> None:
        """r0 = the ``size`` bytes at address r0, through a zeroed scratch word (bpf_probe_read_*)."""
        tmp = self.f.region(8)
        self.e.st(8, 8, tmp, 0)
        self.read_mem(tmp, size, 0, user)
        self.e.ldx(size if size in (1, 2, 4, 8) else 8, 0, 8, tmp)

    def _user(self, node: A.Expr) -> bool:
        """Whether the memory ``node`` names is user memory: as the nearest pointer it is reached through
        says (``args->rqtp->tv_sec``: the syscall's user pointer), kernel memory when it is reached in a
        variable's copy of a struct or array (the program's own), else as the outermost record says."""
        outer = None
        while isinstance(node, (A.Field, A.Index, A.Unary)):
            node = node.expr if not isinstance(node, A.Unary) else node.operand
            t = self.c.types.get(id(node))
            if isinstance(node, A.Var) and is_aggregate(t):
                return False          # the variable's copy lives in the program's own (kernel) memory
            if isinstance(t, Ptr):
                return bool(t.user)
            if hasattr(t, "user"):
                outer = t
        return bool(outer.user) if outer is not None else False  # type: ignore[union-attr]

    def field(self, node: A.Field) -> None:
        e = self.e
        base = node.expr
        t = self.t(node)
        if self._is_tuple_field(node):
            mark = self.f.mark()
            pos = self.tuple_element(node)
            e.ldx(8, 0, 8, pos)
            self.f.release(mark)
            return
        if isinstance(base, A.Builtin) and base.name == "args":
            f = self.c.target.args[node.name]
            if f.data_loc:
                raise self.error(node, f"args.{node.name} is a string: use str(args.{node.name})")
            self.ctx_load(f)
            return
        if isinstance(t, (Record, Array)):
            self.address(node)
            return
        base_t = self.t(base)
        rec = from_btf(base_t.spec, base_t.target, user=base_t.user) if isinstance(base_t, Ptr) else base_t
        off, bit, bits = member_offset(rec.spec, rec, node.name)
        if bits:
            # a bitfield: read its bytes, shift and mask
            nbytes = (bit + bits + 7) // 8
            load = 1 if nbytes == 1 else 2 if nbytes == 2 else 4 if nbytes <= 4 else 8
            self.address(base) if not isinstance(base_t, Ptr) else self.scalar(base)
            if off:
                e.alu_imm("add", 0, off)
            tmp = self.f.region(8)
            e.st(8, 8, tmp, 0)
            self.read_mem(tmp, load, 0, rec.user if isinstance(base_t, Ptr) else self._user(node))
            e.ldx(load, 0, 8, tmp)
            if bit:
                e.alu_imm("rsh", 0, bit)
            e.ld_imm64(1, (1 << bits) - 1)
            e.alu_reg("and", 0, 1)
            return
        self.load_typed(node, 0, t)

    def index(self, node: A.Index) -> None:
        t = self.t(node)
        bt = self.t(node.expr)
        if isinstance(bt, Str):
            off = self.f.region(bt.size)
            self.string_into(node.expr, off, bt.size)
            self.scalar(node.index)
            raise self.error(node, "indexing a string is not supported yet")
        self.load_typed(node, 0, t)

    # calls with values

    def call_value(self, node: A.Call) -> None:
        e = self.e
        n = node.name
        t = self.t(node)
        if n == "strftime":      # the nanoseconds; the format is the type's, applied when printed
            self.scalar(node.args[1])
            return
        if n == "cgroup_path":   # the id; its paths are found when printed
            self.scalar(node.args[0])
            return
        if n in ("ksym", "usym"):
            self.scalar(node.args[0])
            if n == "usym":
                e.mov_reg(6, 0)
                e.call("get_current_pid_tgid")
                e.alu_imm("rsh", 0, 32)
                slot = self.f.slot()
                e.stx(8, 10, slot, 0)
                e.mov_reg(0, 6)
            return
        if n == "kaddr":
            from pycore.lang.checker import kernel_address

            addr = kernel_address(node.args[0].value)
            if addr is None:
                raise self.error(node, f"kaddr: no kernel symbol {node.args[0].value!r}")
            e.ld_imm64(0, addr)
            return
        if n == "reg":
            e.ldx(8, 0, 9, REGS[node.args[0].value])
            return
        if n in ("uptr", "kptr"):   # the same address; only its type says where it points
            self.scalar(node.args[0])
            return
        if n == "bswap":   # a byte has no order to reverse: only the zero-extension
            self.scalar(node.args[0])
            if t.size == 1:
                e.alu_imm("and", 0, 0xFF)
            else:
                e.bswap(0, 8 * t.size)
            return
        if n in ("kstack", "ustack"):
            self.stack_id(n == "ustack", t.limit)
            return
        if n == "strncmp":
            self.string_compare(node.args[0], node.args[1], True, self._const(node.args[2]))
            return
        if n == "strcontains":
            self.strcontains(node.args[0], node.args[1])
            return
        if isinstance(t, Str):
            raise self.error(node, f"{n}() is a string here")
        raise self.error(node, f"{n}() has no value")

    def strcontains(self, hay: A.Expr, needle: A.Expr) -> None:
        """r0 = 1 when ``needle`` occurs in ``hay`` (both up to their first NUL), else 0.

        The haystack is built in scratch and searched at each position, a
        bounded loop unrolled (bpftrace does the same in LLVM IR); a literal
        needle is compared as immediates, another one read from scratch.
        """
        e = self.e
        ht, nt = self.t(hay), self.t(needle)
        a = self.f.region(ht.size)
        self.string_into(hay, a, ht.size)
        literal = needle.value.encode() if isinstance(needle, A.Str) else None
        if literal == b"":
            e.mov_imm(0, 1)                           # the empty string is in every string
            return
        if literal is not None and len(literal) > ht.size - 1:
            e.mov_imm(0, 0)                           # longer than any string the haystack can hold
            return
        if literal is None:
            b = self.f.region(nt.size)
            self.string_into(needle, b, nt.size)
        found, done, end = e.label(), e.label(), e.label()
        for i in range(ht.size):
            miss = e.label()
            if literal is not None:
                if len(literal) > ht.size - 1 - i:
                    break                             # cannot fit before the buffer's last byte
                for j, ch in enumerate(literal):
                    e.ldx(1, 1, 8, a + i + j)
                    e.jmp_imm("jne", 1, ch, miss)
                e.ja(found)
            else:
                for j in range(min(nt.size, ht.size - i)):
                    e.ldx(1, 2, 8, b + j)
                    e.jmp_imm("jeq", 2, 0, found)    # the whole needle matched
                    e.ldx(1, 1, 8, a + i + j)
                    e.jmp_reg("jne", 1, 2, miss)
                if nt.size <= ht.size - i:
                    e.ja(found)                       # a needle as long as its buffer matched
            e.place(miss)
            e.ldx(1, 1, 8, a + i)
            e.jmp_imm("jeq", 1, 0, done)            # the haystack ended: not found
        e.place(done)
        e.mov_imm(0, 0)
        e.ja(end)
        e.place(found)
        e.mov_imm(0, 1)
        e.place(end)

    def inet_into(self, node: A.Expr, dst: int) -> None:
        """scratch[dst:dst+24] = an inet value: the address family, then the address bytes (bpftrace's
        layout); or a mac value (family 0, then six bytes); or a buffer (its length, then its bytes)."""
        e = self.e
        size = _align8(self.t(node).size)
        for i in range(0, size, 8):
            e.st(8, 8, dst + i, 0)
        if isinstance(node, A.Call) and node.name == "buf":
            self.buf_call(node, dst)
            return
        if isinstance(node, A.Tuple):
            self.values_into(node.elems, [self.t(x) for x in node.elems], dst)
            return
        if self._is_tuple_field(node):
            self.copy_tuple_element(node, dst, size)
            return
        if isinstance(node, A.Call) and node.name == "macaddr":
            arg = node.args[0]
            at = self.t(arg)
            if isinstance(at, Ptr):
                self.scalar(arg)
            else:
                self.address(arg)
            self.read_mem(dst + 8, 6, 0, getattr(at, "user", False) or self._user(arg))
            return
        if isinstance(node, A.Call) and node.name == "ntop":
            arg = node.args[-1]
            at = self.t(arg)
            if len(node.args) == 2:
                self.scalar(node.args[0])
                e.stx(8, 8, dst, 0)
            else:
                e.st(8, 8, dst, 10 if isinstance(at, (Str, Array)) and at.size == 16 else 2)  # AF_INET6 / AF_INET
            if isinstance(at, (Int, Ptr)):
                self.scalar(arg)
                e.stx(4, 8, dst + 8, 0)                 # the low 32 bits, as bpftrace stores them
            elif isinstance(at, Array):
                self.aggregate_into(arg, dst + 8, at.size)
            else:
                self.address(arg)
                self.read_mem(dst + 8, at.size, 0, getattr(at, "user", False) or self._user(arg))
            return
        if isinstance(node, A.Ternary):
            other, done = e.label(), e.label()
            self.scalar(node.cond)
            e.jmp_imm("jeq", 0, 0, other)
            self.inet_into(node.then, dst)
            e.ja(done)
            e.place(other)
            self.inet_into(node.else_, dst)
            e.place(done)
            return
        if isinstance(node, A.Var):
            home = self.vars_get(node)
            for i in range(0, size, 8):
                e.ldx(8, 1, 8, home + i)
                e.stx(8, 8, dst + i, 1)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            key = self.key(node, m)
            self.map_lookup(m, key)
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            for i in range(0, size, 8):
                e.ldx(8, 1, 0, i)
                e.stx(8, 8, dst + i, 1)
            e.place(done)
            return
        raise self.error(node, "an inet value comes from ntop(), a mac value from macaddr(), a buffer from buf(), "
                               "a tuple from (a, b, ...)")

    def copy_tuple_element(self, node: A.Field, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = a string, inet or tuple element of a tuple."""
        e = self.e
        mark = self.f.mark()
        pos = self.tuple_element(node)
        for i in range(0, _align8(min(size, self.t(node).size)), 8):
            e.ldx(8, 1, 8, pos + i)
            e.stx(8, 8, dst + i, 1)
        self.f.release(mark)

    def buf_call(self, node: A.Call, dst: int) -> None:
        """scratch[dst:] = buf(data[, length]): the length read (8 bytes), then that many bytes.

        The length is the array's size, or the constant given, or the expression's value clamped to
        0..STRING_SIZE (so the verifier can bound the read), and never more than a string's or an
        array's own size; a string is read from where it is built."""
        e = self.e
        arg = node.args[0]
        at = self.t(arg)
        cap = self.t(node).size - 8
        if isinstance(at, (Str, Array)):
            cap = min(cap, at.size)    # never past the string or array (bpftrace 0.17 reads on)
        if len(node.args) == 1:
            length: int | None = cap
        elif is_literal(node.args[1]):
            length = min(self._const(node.args[1]), cap)
        else:
            length = None
            self.scalar(node.args[1])
            ok = e.label()
            e.jmp_imm("jle", 0, cap, ok)     # unsigned: a negative length is cap too
            e.mov_imm(0, cap)
            e.place(ok)
            e.stx(8, 8, dst, 0)
        if length is not None:
            e.st(8, 8, dst, length)
        mark = self.f.mark()
        user = False
        if isinstance(at, Str):
            tmp = self.f.region(at.size)
            self.string_into(arg, tmp, at.size)
            e.mov_reg(0, 8)
            e.alu_imm("add", 0, tmp)
        elif isinstance(at, Ptr):
            self.scalar(arg)
            user = at.user
        else:
            self.address(arg)
            user = self._user(arg)
        e.mov_reg(3, 0)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst + 8)
        if length is None:
            # the length stored above, clamped again: a value loaded from the scratch map is
            # unbounded to the verifier, and the read's size must be bounded
            e.ldx(8, 2, 8, dst)
            ok = e.label()
            e.jmp_imm("jle", 2, cap, ok)
            e.mov_imm(2, cap)
            e.place(ok)
        else:
            e.mov_imm(2, length)
        e.call("probe_read_user" if user else "probe_read_kernel")
        self.f.release(mark)

    # strings

    def string_into(self, node: A.Expr, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = the string ``node``, NUL-terminated and zero-padded."""
        e = self.e
        t = self.t(node)
        if isinstance(t, Inet):
            self.inet_into(node, dst)
            return
        for i in range(0, _align8(size), 8):
            e.st(8, 8, dst + i, 0)
        if self._is_tuple_field(node):
            self.copy_tuple_element(node, dst, size)
            if size < _align8(t.size) and not is_aggregate(t):
                e.st(1, 8, dst + size - 1, 0)
            return
        if is_aggregate(t) and not isinstance(node, A.Var):
            self.aggregate_into(node, dst, min(size, t.size))
            return
        if isinstance(node, A.Str) or (isinstance(node, A.Positional)):
            if isinstance(node, A.Str):
                data = node.value.encode()
            else:
                from pycore.lang.checker import Checker

                data = Checker(lambda: None, self.params).positional_text(node).encode()
            data = data[: size - 1]
            for i in range(0, len(data), 8):
                chunk = data[i:i + 8].ljust(8, b"\0")
                e.ld_imm64(1, struct.unpack("<q", chunk)[0])
                e.stx(8, 8, dst + i, 1)
            return
        if isinstance(node, A.Builtin) and node.name == "comm":
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, min(16, size))
            e.call("get_current_comm")
            return
        if isinstance(node, A.Builtin) and node.name in ("func", "probe"):
            text = self.c.target.func if node.name == "func" else self.c.target.probe
            data = text.encode()[: size - 1]
            for i in range(0, len(data), 8):
                e.ld_imm64(1, struct.unpack("<q", data[i:i + 8].ljust(8, b"\0"))[0])
                e.stx(8, 8, dst + i, 1)
            return
        if isinstance(node, A.Var):
            home = self.vars_get(node)
            for i in range(0, min(_align8(t.size), _align8(size)), 8):
                e.ldx(8, 1, 8, home + i)
                e.stx(8, 8, dst + i, 1)
            if size < _align8(t.size):
                e.st(1, 8, dst + size - 1, 0)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            key = self.key(node, m)
            self.map_lookup(m, key)
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            e.mov_reg(3, 0)
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, min(size, m.value.size))
            e.call("probe_read_kernel_str")
            e.place(done)
            return
        if isinstance(node, A.Ternary):
            other, done = e.label(), e.label()
            self.scalar(node.cond)
            e.jmp_imm("jeq", 0, 0, other)
            self.string_into(node.then, dst, size)
            e.ja(done)
            e.place(other)
            self.string_into(node.else_, dst, size)
            e.place(done)
            return
        if isinstance(node, A.Call) and node.name == "str":
            self.str_call(node, dst, size)
            return
        if isinstance(node, A.Call) and node.name == "path":
            # bpf_d_path(path, buf, size): the kernel writes the path, NUL-terminated
            arg = node.args[0]
            if isinstance(self.t(arg), Ptr):
                self.scalar(arg)
            else:
                self.address(arg)
            e.mov_reg(1, 0)
            e.mov_reg(2, 8)
            e.alu_imm("add", 2, dst)
            e.mov_imm(3, size)
            e.call("d_path")
            return
        if isinstance(node, A.Field) and isinstance(node.expr, A.Builtin) and node.expr.name == "args":
            f = self.c.target.args[node.name]
            self.ctx_string(f, dst, size)
            return
        if isinstance(t, Str):
            # a char array in memory (a struct field): copy it
            self.address(node)
            e.mov_reg(3, 0)
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, size)
            e.call("probe_read_user_str" if self._user(node) else "probe_read_kernel_str")
            return
        raise self.error(node, f"{t} is not a string")

    def aggregate_into(self, node: A.Expr, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = a struct or array value, byte for byte: from a map's value, from either
        side of a ternary, else from where it lives in memory (kernel or user, as it was reached)."""
        e = self.e
        if id(node) in self.c.blobs:      # known when checked: pton()'s bytes
            self.bytes_into(self.c.blobs[id(node)][:size], dst)
            return
        if isinstance(node, A.Var):
            home = self.vars_get(node)
            for i in range(0, _align8(size), 8):
                e.ldx(8, 1, 8, home + i)
                e.stx(8, 8, dst + i, 1)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            key = self.key(node, m)
            self.map_lookup(m, key)
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            self.read_mem(dst, size, 0, False)
            e.place(done)
            return
        if isinstance(node, A.Ternary):
            other, done = e.label(), e.label()
            self.scalar(node.cond)
            e.jmp_imm("jeq", 0, 0, other)
            self.aggregate_into(node.then, dst, size)
            e.ja(done)
            e.place(other)
            self.aggregate_into(node.else_, dst, size)
            e.place(done)
            return
        self.address(node)
        self.read_mem(dst, size, 0, self._user(node))

    def bytes_into(self, data: bytes, dst: int) -> None:
        """scratch[dst:] = constant bytes, eight at a time (the rest of the last word zero)."""
        for i in range(0, len(data), 8):
            self.e.ld_imm64(1, struct.unpack("<q", data[i:i + 8].ljust(8, b"\0"))[0])
            self.e.stx(8, 8, dst + i, 1)

    def bytes_equal(self, left: A.Expr, right: A.Expr, negate: bool) -> None:
        """r0 = (left == right) over every byte: arrays, structs and buffers, as bpftrace compares them."""
        e = self.e
        t = self.t(left)
        size = width(t)
        mark = self.f.mark()
        a, b = self.f.region(size), self.f.region(size)
        self.string_into(left, a, t.size)
        self.string_into(right, b, t.size)
        differ, done = e.label(), e.label()
        for off in range(0, size, 8):
            e.ldx(8, 1, 8, a + off)
            e.ldx(8, 2, 8, b + off)
            e.jmp_reg("jne", 1, 2, differ)
        e.mov_imm(0, 0 if negate else 1)
        e.ja(done)
        e.place(differ)
        e.mov_imm(0, 1 if negate else 0)
        e.place(done)
        self.f.release(mark)

    def ctx_string(self, f: CtxField, dst: int, size: int) -> None:
        """A string field of the context: a tracepoint char array, or a __data_loc string."""
        e = self.e
        if f.data_loc:
            e.ldx(4, 3, 9, f.offset)
            e.ld_imm64(1, 0xFFFF)
            e.alu_reg("and", 3, 1)
            e.alu_reg("add", 3, 9)
        else:
            e.mov_reg(3, 9)
            e.alu_imm("add", 3, f.offset)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.mov_imm(2, min(size, f.type.size) if not f.data_loc else size)
        e.call("probe_read_kernel_str")

    def str_call(self, node: A.Call, dst: int, size: int) -> None:
        """str(ptr[, n]): a NUL-terminated string read from kernel or user memory."""
        e = self.e
        arg = node.args[0]
        at = self.t(arg)
        if isinstance(at, Str):
            self.string_into(arg, dst, size)
            return
        limit = size
        if len(node.args) == 2 and not isinstance(node.args[1], (A.Int, A.Positional)):
            self.scalar(node.args[1])
            lim = self.f.slot()
            e.alu_imm("add", 0, 1)
            e.stx(8, 10, lim, 0)
        else:
            lim = None
        self.scalar(arg)
        e.mov_reg(3, 0)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        if lim is not None:
            e.ldx(8, 2, 10, lim)
            clamp, ok = e.label(), e.label()
            e.jmp_imm("jgt", 2, limit, clamp)
            e.jmp_imm("jgt", 2, 0, ok)
            e.place(clamp)
            e.mov_imm(2, limit)
            e.place(ok)
        else:
            e.mov_imm(2, limit)
        user = getattr(at, "user", False)
        e.call("probe_read_user_str" if user else ("probe_read_kernel_str" if isinstance(at, Ptr) and at.spec else "probe_read_str"))


_SIGNALS = {"SIGTERM": 15, "SIGKILL": 9, "SIGINT": 2, "SIGUSR1": 10, "SIGUSR2": 12, "SIGSTOP": 19,
            "SIGCONT": 18, "SIGHUP": 1, "SIGQUIT": 3, "SIGABRT": 6}


def generate(checked: Checked, layout: Layout, emit: Emitter, fds: dict[str, int],
             params: tuple[str, ...] = (), source: tuple[str, str] = ("", "")) -> None:
    """Emit the program for one (probe block, target) pair into ``emit``."""
    _Gen(checked, layout, emit, fds, params, source).program()
