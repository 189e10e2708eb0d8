"""Lowering of scalar expressions: operators, builtins, context loads, fields, indexes, addresses and
reads of memory; a scalar's value is left in r0.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.check import USER_PROBES, member_offset
from pycore.lang.lower.layout import BPF_F_USER_STACK, _align8
from pycore.lang.lower.state import State
from pycore.lang.probes import PT_REGS, REGS, CtxField
from pycore.lang.types import (Array, Bool, Buffer, Int, Ptr, Record, Str, Tuple, Type, Void, from_btf, is_aggregate,
                               is_buffer)


class Exprs(State):
    """Scalar expressions into r0; operands that must survive are spilled to stack slots."""

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
            from pycore.lang.check import Checker

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
        elif isinstance(node, A.Unary) and node.op == "&":
            x = node.operand
            if isinstance(x, A.Var):        # its home: a stack slot (a scalar) or scratch (var_home)
                e.mov_reg(0, 8 if is_buffer(self.t(x)) else 10)
                e.alu_imm("add", 0, self.vars_get(x))
            elif isinstance(x, A.MapRef):
                # &@m: the map's struct bpf_map. The verifier allows no arithmetic on a map pointer (a
                # field's offset), so it goes through scratch, a map value: read back, it is a number
                # (storing a pointer in a map needs allow_ptr_leaks, which pycore's privileges give)
                e.ld_map(0, self.fds["@" + x.name])
                at = self.f.region(8)
                e.stx(8, 8, at, 0)
                e.ldx(8, 0, 8, at)
            else:
                self.address(x)
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
                e.test("jeq", 0, 0)
        elif isinstance(node, A.Ternary):
            other, done = e.label(), e.label()
            self.scalar(node.cond)
            e.jmp_imm("jeq", 0, 0, other)
            self.scalar(node.then)
            e.ja(done)
            e.place(other)
            self.scalar(node.else_)
            e.place(done)
        elif isinstance(node, A.Cast) and isinstance(self.t(node.expr), Array):    # (uint64)$bytes: its bytes
            mark = self.f.mark()
            at = self.f.region(8)
            self.e.st(8, 8, at, 0)
            self.aggregate_into(node.expr, at, t.size)     # a variable's, a map's or memory's bytes
            self.e.ldx(t.size if t.size in (1, 2, 4, 8) else 8, 0, 8, at)
            self.f.release(mark)
            if isinstance(t, Int) and t.size < 8:
                self.extend(0, t.size, t.signed)
        elif isinstance(node, A.Cast) and isinstance(t, Bool):    # (bool)x: 1 or 0
            inner = self.t(node.expr)
            if isinstance(inner, Str):          # a string is true when it is not empty
                mark = self.f.mark()
                at = self.f.region(_align8(inner.size))
                self.string_into(node.expr, at, inner.size)
                self.e.ldx(1, 0, 8, at)
                self.f.release(mark)
            else:
                self.scalar(node.expr)
            zero = self.e.label()
            self.e.jmp_imm("jeq", 0, 0, zero)
            self.e.mov_imm(0, 1)
            self.e.place(zero)
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
        home = self.vars.get(self.c.var_key(node))
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
        if id(node) in self.c.merged:
            self.tuple_compare(node, op == "!=")
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
            e.test(jmp, 0, 1, imm=False)
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

    def tuple_compare(self, node: A.Binary, negate: bool) -> None:
        """r0 = (left == right) of two tuples or records (bpftrace 0.25): both laid out as the type the
        checker merged them to (zeroed first, so what no element covers is equal), then compared an
        element at a time: a string up to its NUL, an integer by its 8-byte value, a nested tuple
        alike, anything else byte by byte."""
        e = self.e
        t = self.c.merged[id(node)]
        assert isinstance(t, Tuple)
        mark = self.f.mark()
        a, b = self.f.region(_align8(t.size)), self.f.region(_align8(t.size))
        self.tuple_into(node.left, a, t)
        self.tuple_into(node.right, b, t)
        differ = e.label()
        self._equal_elements(a, b, t, differ)
        self.equality(differ, negate)
        self.f.release(mark)

    def equality(self, differ: object, negate: bool) -> None:
        """r0 = equal (1, or 0 when ``negate``) where the comparison falls through, the other at ``differ``."""
        e = self.e
        done = e.label()
        e.mov_imm(0, 0 if negate else 1)
        e.ja(done)
        e.place(differ)
        e.mov_imm(0, 1 if negate else 0)
        e.place(done)

    def _equal_elements(self, a: int, b: int, t: Tuple, differ: int) -> None:
        e = self.e
        for off, et in zip(t.offsets(), t.elems):
            if isinstance(et, Tuple):
                self._equal_elements(a + off, b + off, et, differ)
            elif type(et) is Str:
                same = e.label()
                for i in range(et.size):
                    e.ldx(1, 1, 8, a + off + i)
                    e.ldx(1, 2, 8, b + off + i)
                    e.jmp_reg("jne", 1, 2, differ)
                    e.jmp_imm("jeq", 1, 0, same)
                e.place(same)
            elif isinstance(et, (Int, Ptr)):
                e.ldx(8, 1, 8, a + off)
                e.ldx(8, 2, 8, b + off)
                e.jmp_reg("jne", 1, 2, differ)
            else:
                for i in range(et.size):
                    e.ldx(1, 1, 8, a + off + i)
                    e.ldx(1, 2, 8, b + off + i)
                    e.jmp_reg("jne", 1, 2, differ)

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
        elif n == "nsecs":      # the boot clock, as bpftrace 0.19+ (0.17: ktime_get_ns, which stops in suspend)
            e.call("ktime_get_boot_ns")
        elif n == "ncpus":      # the possible CPUs, as bpftrace counts them
            from pycore.lang.lower.maps import possible_cpus

            e.mov_imm(0, possible_cpus())
        elif n == "usermode":   # bpftrace 0.24: the pt_regs' code segment is a user one (x86-64)
            e.ldx(8, 0, 9, REGS["cs"])
            e.alu_imm("and", 0, 3)
            e.test("jeq", 0, 3)
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
        elif n == "func" and tgt.kind in ("kprobe", "kretprobe", "kfunc", "kretfunc"):
            self.func_address()
        elif n in ("func", "probe", "probetype"):
            raise self.error(node, f"{n} is a string here: print it, or compare it with ==")
        else:
            raise self.error(node, f"{n} has no integer value")

    def func_address(self) -> None:
        """r0 = the probed kernel function's address, which ``func`` (bpftrace's ksym type) names when
        printed: bpf_get_func_ip, as bpftrace 0.23.2 (kprobes and kretprobes Linux 5.15+, fentry 5.17)."""
        self.e.mov_reg(1, 9)
        self.e.call("get_func_ip")

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

    def stack_depth(self, user: bool, limit: int) -> None:
        """r0 = the stack's frames, at most ``limit``: bpf_get_stack's bytes / 8, as bpftrace 0.22's
        len(stack) counts the frames it took (0 when the kernel gives none)."""
        e = self.e
        mark = self.f.mark()
        buf = self.f.region(8 * limit)
        e.mov_reg(1, 9)
        e.mov_reg(2, 8)
        e.alu_imm("add", 2, buf)
        e.mov_imm(3, 8 * limit)
        e.mov_imm(4, BPF_F_USER_STACK if user else 0)
        e.call("get_stack")
        done = e.label()
        e.jmp_imm("jsgt", 0, 0, done)
        e.mov_imm(0, 0)
        e.place(done)
        e.alu_imm("rsh", 0, 3)
        self.f.release(mark)

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
        if isinstance(node, A.Cast) and isinstance(t, Array):     # (uint8[8])x: the integer's bytes, in scratch
            self.scalar(node.expr)
            at = self.f.region(8)
            e.stx(8, 8, at, 0)
            e.mov_reg(0, 8)
            e.alu_imm("add", 0, at)
            return
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
