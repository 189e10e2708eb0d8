"""Lowering of for loops: ``for ($kv : @m)`` with ``bpf_for_each_map_elem`` (Linux 5.13) and
``for ($i : a..b)`` with ``bpf_loop`` (5.17), each body a BPF-to-BPF callback, as bpftrace does.

A callback is a function of its own, with its own stack frame (r10) and with none of the caller's
registers. What the body needs comes through the one pointer the helper hands it, the caller's frame
pointer (``callback_ctx``): from the caller's stack it takes r8 (this CPU's scratch buffer) and r9
(the probe's context), which the caller saved there, and the script's integer variables, which it
copies to the same offsets of its own frame, so the body is lowered as any other code is; it copies
them back when the iteration ends. Strings, tuples and the loop's ``$kv`` live in scratch, which both
frames share. A callback returns 0 for the next element (the body's end, ``continue``), 1 to stop
(``break``); ``return`` and ``exit()`` also set a flag in the caller's frame, which ends the probe
once the helper returns. Callbacks are emitted after the program's end, one BPF function each.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check.records import READ_AGGREGATES
from pycore.lang.lower.layout import _Frame
from pycore.lang.lower.state import State
from pycore.lang.types import Tuple


class Loops(State):
    """``for`` statements: the call at the loop, and the callback emitted later (:meth:`emit_pending`)."""

    def for_loop(self, s: A.ForMap | A.ForRange) -> None:
        e, f = self.e, self.f
        from pycore.lang.lower.maps import _kernel_release, _kernel_release_text

        need, helper = ((5, 13), "bpf_for_each_map_elem") if isinstance(s, A.ForMap) else ((5, 17), "bpf_loop")
        if _kernel_release() < need:
            raise self.error(s, f"for loops need Linux {need[0]}.{need[1]} or newer ({helper}), as in bpftrace; "
                                f"this kernel is {_kernel_release_text()}")
        save8, save9, stop = f.slot(), f.slot(), f.slot()
        start = f.slot() if isinstance(s, A.ForRange) else 0
        inside = list(A.walk(A.Block(s.body)))
        stops = any(isinstance(n, A.Return) or isinstance(n, A.Call) and n.name == "exit" for n in inside)
        # 'return N' in the body (a test probe's verdict): the callback leaves N here, and stop 2
        value = f.slot() if any(isinstance(n, A.Return) and n.value is not None for n in inside) else 0
        skip = e.label()
        if isinstance(s, A.ForRange):
            self.scalar(s.start)
            e.stx(8, 10, start, 0)
            self.scalar(s.end)
            e.ldx(8, 1, 10, start)
            e.alu_reg("sub", 0, 1)
            e.alu_imm("lsh", 0, 32)        # the count as a signed 32-bit number, as bpftrace's
            e.alu_imm("arsh", 0, 32)
            e.jmp_imm("jsle", 0, 0, skip)  # none (an end at or before the start)
            e.mov_reg(1, 0)
        else:
            e.ld_map(1, self.fds["@" + s.map.name])
        e.stx(8, 10, save8, 8)
        e.stx(8, 10, save9, 9)
        if stops:
            e.st(8, 10, stop, 0)
        callback = e.label()
        e.ld_func(2, callback)
        e.mov_reg(3, 10)
        e.mov_imm(4, 0)
        e.call("for_each_map_elem" if isinstance(s, A.ForMap) else "loop")
        if stops:
            e.ldx(8, 0, 10, stop)
            e.jmp_imm("jeq", 0, 1, self.exit_label)
            if value:
                e.jmp_imm("jne", 0, 2, skip)
                e.ldx(8, 0, 10, value)
                e.ja(self.return_label)
        e.place(skip)
        frame = _Frame(self)
        frame.stack, frame.scratch = self._var_end, f.scratch
        self._pending.append((s, callback, frame, dict(self.vars), self._var_end,
                              (save8, save9, stop, start, value)))

    def emit_pending(self) -> None:
        """Emit the callbacks of the loops met so far (and of the loops in them), after the program."""
        while self._pending:
            self._callback(*self._pending.pop(0))

    def _callback(self, s: A.ForMap | A.ForRange, label: object, frame: _Frame, vars_: dict[str, int],
                  caller_end: int, slots: tuple[int, int, int, int, int]) -> None:
        e = self.e
        save8, save9, stop, start, value = slots
        self.f, self.vars = frame, vars_
        e.func(f"loop_{len(e.funcs)}")
        e.place(label)
        e.mark(s)
        ctx = 4 if isinstance(s, A.ForMap) else 2      # (map, key, value, ctx) or (index, ctx)
        t = self.c.loops[id(s)]
        var = self.vars[self.c.var_key(s.decl)]   # its home, made with the others' (copied as they are)
        home = frame.slot()
        e.stx(8, 10, home, ctx)
        e.ldx(8, 8, ctx, save8)
        e.ldx(8, 9, ctx, save9)
        copied = range(-16, -caller_end - 1, -8)     # the variables' slots (-8 is the prologue's key)
        for off in copied:
            e.ldx(8, 0, ctx, off)
            e.stx(8, 10, off, 0)
        if isinstance(s, A.ForRange):
            e.ldx(8, 0, ctx, start)
            e.alu_reg("add", 0, 1)
            e.stx(8, 10, var, 0)
        else:
            assert isinstance(t, Tuple)
            m = self.layout.maps["@" + s.map.name]
            ksize, voff = m.key_size, t.offsets()[1]
            for off in range(0, ksize, 8):
                e.ldx(8, 0, 2, off)
                e.stx(8, 8, var + off, 0)
            if m.kind in READ_AGGREGATES:          # all CPUs' values, as bpftrace 0.21+ reads them
                self.aggregate_at(s.map, m, var)
                e.stx(8, 8, var + voff, 0)
            else:
                for off in range(0, t.size - voff, 8):
                    e.ldx(8, 0, 3, off)
                    e.stx(8, 8, var + voff + off, 0)
        self._var_end = caller_end
        self._var_stack, self._var_scratch = frame.stack, frame.scratch
        nxt, brk, stopping, returning = e.label(), e.label(), e.label(), e.label()
        self.exit_label, self.return_label = stopping, returning
        self._loops = [(nxt, brk)]
        falls = self.stmts(s.body)

        def used(label: object) -> bool:
            return any(getattr(i, "target", None) is label for i in e.items)

        def leave(result: int) -> None:
            if copied:
                e.ldx(8, 1, 10, home)
                for off in copied:
                    e.ldx(8, 0, 10, off)
                    e.stx(8, 1, off, 0)
            e.mov_imm(0, result)
            e.exit()

        if falls or used(nxt):
            e.place(nxt)
            leave(0)
        if used(brk):
            e.place(brk)
            leave(1)
        if used(stopping):
            e.place(stopping)
            e.ldx(8, 1, 10, home)
            e.st(8, 1, stop, 1)
            leave(1)
        if used(returning):         # 'return N': N (in r0) and stop 2 in the caller's frame
            e.place(returning)
            e.ldx(8, 1, 10, home)
            e.stx(8, 1, value, 0)
            e.st(8, 1, stop, 2)
            leave(1)
