"""Lowering of statements: the program's prologue, blocks, if/while, assignments, ++/-- and variables.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check import AGGREGATES
from pycore.lang.lower.calls import update_site
from pycore.lang.lower.layout import Action, _align8, BPF_ANY, TAG_EXIT
from pycore.lang.lower.state import State
from pycore.lang.types import Ptr, Tuple, Type, is_buffer


class Statements(State):
    """The program's entry and its statements: variables live in stack slots (integers) or scratch regions."""

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
        self._var_end = self._var_stack     # the slots a loop's callback copies (pycore.lang.lower.loops)
        block = self.c.block
        if block.predicate is not None:
            e.mark(block.predicate)
            self.scalar(block.predicate)
            e.jmp_imm("jeq", 0, 0, self.exit_label)
        self.stmts(block.body)
        e.place(self.exit_label)
        e.mov_imm(0, 0)
        e.place(self.return_label)
        e.exit()
        self.emit_pending()

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
        elif isinstance(s, (A.Assign, A.IncDec)):
            if isinstance(s.target, A.MapRef):
                self.update_site = update_site(self.source, s)
            try:
                if isinstance(s, A.Assign):
                    self.assign(s)
                else:
                    self.incdec(s.target, 1 if s.op == "++" else -1)   # alone: its value is not needed
            finally:
                self.update_site = None
        elif isinstance(s, A.If) and id(s) in self.c.comptime:    # if comptime: the branch chosen
            return self.stmts(s.then if self.c.comptime[id(s)] else (s.else_ or []))
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
        elif isinstance(s, (A.ForMap, A.ForRange)):
            self.for_loop(s)
        elif isinstance(s, A.Block):
            return self.stmts(s.body)
        elif isinstance(s, A.Let):
            # 'let $x;' alone emits nothing: the prologue zeroed $x, and (as in bpftrace 0.23) a 'let $x;'
            # in a loop's body does not zero it again on the next pass
            if s.value is not None:
                self.assign(A.Assign(s.var, "=", s.value, pos=s.pos))
        elif isinstance(s, A.Return):
            if s.value is None:
                e.ja(self.exit_label)
            else:               # (never in a for loop's callback: the checker refuses it there)
                self.scalar(s.value)
                e.ja(self.return_label)
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
        from pycore.lang.check import Checker

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
            key = self.c.var_key(target)
            t = self.c.variables[key]
            home = self.var_home(key, t)
            if isinstance(t, Tuple) and self.t(value) != t:    # widened, or a record in another order
                self.tuple_into(value, home, t)
                return
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
                self.scale(0, self.step(m.value))    # a pointer steps by its pointee's size
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
            if isinstance(m.value, Tuple) and self.t(value) != m.value:    # widened, or a record reordered
                self.tuple_into(value, val, m.value)
            else:
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
            key = self.c.var_key(target)
            t = self.c.variables[key]
            home = self.var_home(key, t)
            e.ldx(8, 0, 10, home)
            if value == "old":
                e.mov_reg(1, 0)
            e.alu_imm("add", 0, delta * self.step(t))
            e.stx(8, 10, home, 0)
            if value == "old":
                e.mov_reg(0, 1)
            return
        m = self.layout.maps["@" + target.name]
        delta *= self.step(m.value)     # a pointer steps by its pointee's size
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
