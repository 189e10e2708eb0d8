"""Lowering of values wider than a register, written into a scratch region: strings, inet/mac/buf
values, aggregates copied whole, tuples; comparisons of their bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pycore.lang import ast as A
from pycore.lang.check import is_literal
from pycore.lang.lower.layout import R0_LENGTH, ZERO_STORES, _align8
from pycore.lang.lower.state import State
from pycore.lang.probes import CtxField
from pycore.lang.types import (Array, Inet, Int, Ptr, Record, Str, Tuple, Type, element_order, is_aggregate, is_buffer,
                               width)


class Strings(State):
    """Values built into scratch regions (zeroed first, so keys built from them hash alike)."""

    def zero(self, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = 0 (rounded up to words): stores, or for more than ZERO_STORES words
        bpf_probe_read_kernel(dst, size, NULL), which fails and so memsets dst (the kernel's documented
        behaviour, which bpftrace 0.23.2 uses above 512 bytes): 5 instructions for a string of 1024 bytes
        where stores take 128. Clobbers r0-r5."""
        e = self.e
        n = _align8(size)
        if n <= 8 * ZERO_STORES:
            for i in range(0, n, 8):
                e.st(8, 8, dst + i, 0)
            return
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.mov_imm(2, n)
        e.mov_imm(3, 0)
        e.call("probe_read_kernel")

    def cut_words(self, dst: int, size: int, end: int = 0) -> None:
        """A string copied by whole words, cut at ``size`` bytes: NULs from scratch[dst+size-1] to the
        end of its word (or on to ``end``'s), so that the cut string is one map key whatever followed
        the cut in its source."""
        for i in range(size - 1, _align8(size)):
            self.e.st(1, 8, dst + i, 0)
        if _align8(size) < _align8(end):
            self.zero(dst + _align8(size), _align8(end) - _align8(size))

    def copy_words(self, base: int, off: int, dst: int, nbytes: int) -> None:
        """scratch[dst:dst+nbytes] = nbytes (rounded up to words) at register ``base`` + ``off``: a
        variable's home (base r8, the scratch region) or a map value (base r0). More than ZERO_STORES
        words: one bpf_probe_read_kernel (a memcpy; 6 instructions for 1024 bytes, not 256), which
        clobbers r0-r5."""
        n = _align8(nbytes)
        if n > 8 * ZERO_STORES:
            self.e.mov_reg(3, base)
            if off:
                self.e.alu_imm("add", 3, off)
            self.read_mem(dst, n, 3, False)
            return
        for i in range(0, n, 8):
            self.e.ldx(8, 1, base, off + i)
            self.e.stx(8, 8, dst + i, 1)

    def either_into(self, node: A.Ternary, into: Callable[[A.Expr], None]) -> None:
        """A ternary's value built by ``into`` from whichever side its condition picks."""
        e = self.e
        other, done = e.label(), e.label()
        self.scalar(node.cond)
        e.jmp_imm("jeq", 0, 0, other)
        into(node.then)
        e.ja(done)
        e.place(other)
        into(node.else_)
        e.place(done)

    def strcontains(self, hay: A.Expr, needle: A.Expr, position: bool = False) -> None:
        """r0 = 1 when ``needle`` occurs in ``hay`` (both up to their first NUL), else 0; with
        ``position`` (strstr(), bpftrace 0.25), r0 = where it first occurs, else -1.

        The haystack is built in scratch and searched at each position, a
        bounded loop unrolled (bpftrace does the same in LLVM IR); a literal
        needle is compared as immediates, another one read from scratch.
        """
        e = self.e
        ht, nt = self.t(hay), self.t(needle)
        a = self.f.region(ht.size)
        self.string_into(hay, a, ht.size)
        literal = needle.value.encode() if isinstance(needle, A.Str) else None
        missing = -1 if position else 0
        if literal == b"":
            e.mov_imm(0, 0 if position else 1)        # the empty string is in every string, at 0
            return
        if literal is not None and len(literal) > ht.size - 1:
            e.mov_imm(0, missing)                     # longer than any string the haystack can hold
            return
        if literal is None:
            b = self.f.region(nt.size)
            self.string_into(needle, b, nt.size)
        done, end = e.label(), e.label()
        for i in range(ht.size):
            miss, found = e.label(), e.label()
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
            e.place(found)
            e.mov_imm(0, i if position else 1)
            e.ja(end)
            e.place(miss)
            e.ldx(1, 1, 8, a + i)
            e.jmp_imm("jeq", 1, 0, done)            # the haystack ended: not found
        e.place(done)
        e.mov_imm(0, missing)
        e.place(end)

    def strlen(self, call: A.Call) -> None:
        """r0 = strlen(x): the length of the string ``x`` (up to its NUL), or of the string a char
        pointer points to, up to max_strlen characters (bpftrace 0.25's strlen()).

        One bpf_probe_read_*_str does the counting: it returns the length with the NUL. A string is
        built in scratch with a NUL after its last byte and read onto itself (every byte copied is the
        byte already there); a pointer's string is read into scratch, max_strlen + 1 bytes at most."""
        e = self.e
        node = call.args[0]
        t = self.t(node)
        if isinstance(t, Str):
            a = self.f.region(t.size + 1)
            self.string_into(node, a, t.size)
            e.st(1, 8, a + t.size, 0)
            e.mov_reg(3, 8)
            e.alu_imm("add", 3, a)
            size, helper = t.size + 1, "probe_read_kernel_str"
        else:
            size = self.c.limits[id(call)]
            a = self.f.region(size)
            self.scalar(node)
            e.mov_reg(3, 0)
            user = getattr(t, "user", False) or self._user(node)
            helper = "probe_read_user_str" if user else ("probe_read_kernel_str" if t.spec else "probe_read_str")
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, a)
        e.mov_imm(2, size)
        e.call(helper)
        ok = e.label()
        e.jmp_imm("jsgt", 0, 0, ok)                 # an unreadable pointer: length 0
        e.mov_imm(0, 1)
        e.place(ok)
        e.alu_imm("sub", 0, 1)

    def write_user(self, call: A.Call) -> None:
        """r0 = write_user(dst, src, len) (bpftrace 0.26, --unsafe): 1 when bpf_probe_write_user wrote
        ``len`` bytes of the string or array ``src`` (built in scratch) at the user address ``dst``."""
        e = self.e
        dst, src, _ = call.args
        st = self.t(src)
        a = self.f.region(st.size)
        if isinstance(st, Str):
            self.string_into(src, a, st.size)
        else:
            self.aggregate_into(src, a, st.size)
        self.scalar(dst)
        e.mov_reg(1, 0)
        e.mov_reg(2, 8)
        e.alu_imm("add", 2, a)
        e.mov_imm(3, self._const(call.args[2]))
        e.call("probe_write_user")
        e.test("jeq", 0, 0)

    def inet_into(self, node: A.Expr, dst: int) -> None:
        """scratch[dst:dst+24] = an inet value: the address family, then the address bytes (bpftrace's
        layout); or a mac value (family 0, then six bytes); or a buffer (its length, then its bytes)."""
        e = self.e
        node = self.c.typeinfo.get(id(node), node)     # typeinfo(x): the record it stands for
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
            self.either_into(node, lambda side: self.inet_into(side, dst))
            return
        if isinstance(node, A.Var):
            self.copy_words(8, self.vars_get(node), dst, size)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            self.lookup_ref(node, m)
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            self.copy_words(0, 0, dst, size)
            e.place(done)
            return
        if isinstance(node, A.Unary) and node.op == "*":       # *(&$tuple): the bytes where it points
            self.scalar(node.operand)
            self.read_mem(dst, size, 0, bool(getattr(self.t(node.operand), "user", False)))
            return
        raise self.error(node, "an inet value comes from ntop(), a mac value from macaddr(), a buffer from buf(), "
                               "a tuple from (a, b, ...)")

    def tuple_into(self, node: A.Expr, dst: int, target: Tuple) -> None:
        """scratch[dst:] = the tuple or record ``node`` laid out as ``target``: a variable's type, wider
        where another assignment's string was longer (bpftrace 0.23.2 widens), a record's fields in
        the order the variable first had. A literal's elements are written in place, in the order they
        are written (their side effects so ordered); another tuple value is built in its own layout
        and moved element by element."""
        src = self.t(node)
        assert isinstance(src, Tuple)
        if src == target:
            self.inet_into(node, dst)
            return
        self.zero(dst, _align8(target.size))
        order, offsets = element_order(src, target), target.offsets()
        if isinstance(node, A.Tuple):
            for x, j in zip(node.elems, order):
                self.element_into(x, dst + offsets[j], target.elems[j])
            return
        mark = self.f.mark()
        tmp = self.f.region(_align8(src.size))
        self.inet_into(node, tmp)
        self._relayout(tmp, src, dst, target)
        self.f.release(mark)

    def element_into(self, x: A.Expr, at: int, t: Type) -> None:
        """One element of a tuple literal into its place, as ``t`` (its place's type)."""
        if isinstance(t, Tuple) and isinstance(self.t(x), Tuple):
            self.tuple_into(x, at, t)
        elif is_buffer(t):
            self.string_into(x, at, t.size)
        elif isinstance(t, (Record, Array)):
            self.address(x)
            self.read_mem(at, t.size, 0, t.user)
        else:
            self.scalar(x)
            self.e.stx(8, 8, at, 0)

    def _relayout(self, src_at: int, src: Tuple, dst_at: int, dst: Tuple) -> None:
        """Move a tuple's elements from its own layout to ``dst``'s (zeroed), as the checker merged them."""
        s_off, d_off = src.offsets(), dst.offsets()
        for i, j in enumerate(element_order(src, dst)):
            a, b = src.elems[i], dst.elems[j]
            if isinstance(a, Tuple) and a != b:
                self._relayout(src_at + s_off[i], a, dst_at + d_off[j], b)
            else:
                self.copy_words(8, src_at + s_off[i], dst_at + d_off[j], min(width(a), width(b)))

    def copy_tuple_element(self, node: A.Field, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = a string, inet or tuple element of a tuple."""
        e = self.e
        mark = self.f.mark()
        self.copy_words(8, self.tuple_element(node), dst, min(size, self.t(node).size))
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

    def string_into(self, node: A.Expr, dst: int, size: int, pad: bool = True) -> int | None:
        """scratch[dst:dst+size] = the string ``node``, NUL-terminated and zero-padded.

        ``pad=False`` (a printf record's string, read up to its NUL): where a helper writes the string
        and its NUL (str(), comm, a char array or a tracepoint's string) the bytes after the NUL are
        left as they were, not zeroed; then the answer says how many bytes count: R0_LENGTH (r0
        holds the helper's result: the length with the NUL, or an error, the buffer then zeroed by
        the kernel) or a number. None: all ``size``."""
        t = self.t(node)
        if isinstance(t, Inet):
            self.inet_into(node, dst)
            return None
        if isinstance(node, A.Call) and node.name == "str_concat":    # its sources first: $p = str_concat($p, x)
            self.str_concat_into(node, dst, size)
            return None
        if isinstance(node, A.Call) and node.name == "comm" and node.args:
            self.comm_of_pid_into(node, dst, size)
            return None
        if not pad and type(t) is Str:
            used = self.string_unpadded(node, dst, size)
            if used != 0:
                return used
        self.zero(dst, size)
        self._string_padded(node, t, dst, size)
        return None

    def string_unpadded(self, node: A.Expr, dst: int, size: int) -> int | None:
        """The string ``node`` into scratch[dst:] by a helper that writes its NUL, the bytes after it not
        zeroed: what string_into answers (R0_LENGTH or a length); 0 where no such helper writes it."""
        e = self.e
        if isinstance(node, A.Builtin) and node.name == "comm":
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, min(16, size))
            e.call("get_current_comm")      # writes all of its bytes, NUL-padded
            return min(16, size)
        if isinstance(node, A.Call) and node.name == "str" and not isinstance(self.t(node.args[0]), Str) \
                and not isinstance(node.args[0], A.Positional):
            self.str_call(node, dst, size)
            return R0_LENGTH
        if isinstance(node, A.Field) and isinstance(node.expr, A.Builtin) and node.expr.name == "args":
            self.ctx_string(self.c.target.args[node.name], dst, size)
            return R0_LENGTH
        return 0

    def _string_padded(self, node: A.Expr, t, dst: int, size: int) -> None:  # noqa: ANN001
        """The rest of string_into, into a zeroed scratch[dst:dst+size]."""
        e = self.e
        if self._is_tuple_field(node):
            self.copy_tuple_element(node, dst, size)
            if size < _align8(t.size) and not is_aggregate(t):
                self.cut_words(dst, size)
            return
        if is_aggregate(t) and not isinstance(node, A.Var):
            self.aggregate_into(node, dst, min(size, t.size))
            return
        if isinstance(node, A.Str) or (isinstance(node, A.Positional)):
            if isinstance(node, A.Str):
                data = node.value.encode()
            else:
                from pycore.lang.check import Checker

                data = Checker(lambda: None, self.params).positional_text(node).encode()
            self.bytes_into(data[: size - 1], dst)
            return
        if isinstance(node, A.Builtin) and node.name == "comm":
            e.mov_reg(1, 8)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, min(16, size))
            e.call("get_current_comm")
            return
        if isinstance(node, A.Builtin) and node.name in ("func", "probe", "probetype"):
            from pycore.lang.check.builtins import probetype

            text = {"func": self.c.target.func, "probe": self.c.target.probe}.get(node.name) or probetype(self.c.block)
            self.bytes_into(text.encode()[: size - 1], dst)
            return
        if isinstance(node, A.Var):
            self.copy_words(8, self.vars_get(node), dst, min(t.size, size))
            if size < _align8(t.size):
                self.cut_words(dst, size)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            self.lookup_ref(node, m)
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
            self.either_into(node, lambda side: self.string_into(side, dst, size))
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

    def comm_of_pid_into(self, node: A.Call, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = comm(pid) (bpftrace 0.25): the task bpf_task_from_pid finds (a
        reference, kept on the stack while its comm is copied, then released), or "N/A" when there is
        no such process (as upstream's, which also warns)."""
        e = self.e
        from_pid, release, comm_at = self.c.kfuncs[id(node)]
        self.zero(dst, size)
        self.scalar(node.args[0])
        e.mov_reg(1, 0)
        e.call_kfunc(from_pid)
        missing, done = e.label(), e.label()
        e.jmp_imm("jeq", 0, 0, missing)
        task = self.f.slot()
        e.stx(8, 10, task, 0)
        e.mov_reg(3, 0)
        e.alu_imm("add", 3, comm_at)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.mov_imm(2, min(16, size - 1))
        e.call("probe_read_kernel")
        e.ldx(8, 1, 10, task)
        e.call_kfunc(release)
        e.ja(done)
        e.place(missing)
        for i, ch in enumerate(b"N/A"[:size - 1]):
            e.st(1, 8, dst + i, ch)
        e.place(done)

    def str_concat_into(self, node: A.Call, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = str_concat(a, b): a copied with bpf_probe_read_kernel_str (which says
        its length), then b at that length, in what is left of the size (both NUL-terminated)."""
        e = self.e
        a, b = node.args
        asz, bsz = self.t(a).size, self.t(b).size
        mark = self.f.mark()
        ta, tb = self.f.region(asz), self.f.region(bsz)
        self.string_into(a, ta, asz)
        self.string_into(b, tb, bsz)
        self.zero(dst, size)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.mov_imm(2, min(asz, size))
        e.mov_reg(3, 8)
        e.alu_imm("add", 3, ta)
        e.call("probe_read_kernel_str")     # r0 = a's length + 1, or an error
        ok, clamp = e.label(), e.label()
        e.jmp_imm("jsgt", 0, 0, ok)
        e.mov_imm(0, 1)
        e.place(ok)
        e.alu_imm("sub", 0, 1)              # a's length, bounded for the verifier
        e.jmp_imm("jle", 0, min(asz, size) - 1, clamp)
        e.mov_imm(0, min(asz, size) - 1)
        e.place(clamp)
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, dst)
        e.alu_reg("add", 1, 0)
        e.mov_imm(2, size)
        e.alu_reg("sub", 2, 0)
        e.mov_reg(3, 8)
        e.alu_imm("add", 3, tb)
        e.call("probe_read_kernel_str")
        self.f.release(mark)

    def aggregate_into(self, node: A.Expr, dst: int, size: int) -> None:
        """scratch[dst:dst+size] = a struct or array value, byte for byte: from a map's value, from either
        side of a ternary, else from where it lives in memory (kernel or user, as it was reached)."""
        e = self.e
        if id(node) in self.c.blobs:      # known when checked: pton()'s bytes
            self.bytes_into(self.c.blobs[id(node)][:size], dst)
            return
        if isinstance(node, A.Var):
            self.copy_words(8, self.vars_get(node), dst, size)
            return
        if isinstance(node, A.MapRef):
            m = self.layout.maps["@" + node.name]
            self.lookup_ref(node, m)
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            self.read_mem(dst, size, 0, False)
            e.place(done)
            return
        if isinstance(node, A.Ternary):
            self.either_into(node, lambda side: self.aggregate_into(side, dst, size))
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
        differ = e.label()
        for off in range(0, size, 8):
            e.ldx(8, 1, 8, a + off)
            e.ldx(8, 2, 8, b + off)
            e.jmp_reg("jne", 1, 2, differ)
        self.equality(differ, negate)
        self.f.release(mark)

    def memcmp(self, left: A.Expr, right: A.Expr, count: A.Expr) -> None:
        """r0 = memcmp(left, right, count) (bpftrace 0.25): the difference of the first bytes that
        differ, as signed chars, else 0. Both values' bytes go to scratch first, as upstream's macro
        copies them to variables (an integer's are its own size's, low byte first); a count known
        at run time stops at the smaller value's end."""
        e = self.e
        mark = self.f.mark()
        places = []
        for x in (left, right):
            t = self.t(x)
            at = self.f.region(_align8(t.size))
            if isinstance(t, (Int, Ptr)):
                self.scalar(x)
                e.stx(8, 8, at, 0)
            else:
                self.string_into(x, at, t.size)
            places.append(at)
        limit = min(self.t(left).size, self.t(right).size)
        slot = None
        if not isinstance(count, (A.Int, A.Positional)):     # as the checker: else a constant
            slot = self.f.slot()
            self.scalar(count)
            within = e.label()
            e.jmp_imm("jle", 0, limit, within)     # unsigned: a negative count is past the end too
            e.mov_imm(0, limit)
            e.place(within)
            e.stx(8, 10, slot, 0)
        loop, differ, equal, done = e.label(), e.label(), e.label(), e.label()
        e.mov_reg(1, 8)
        e.alu_imm("add", 1, places[0])
        e.mov_reg(2, 8)
        e.alu_imm("add", 2, places[1])
        e.mov_imm(3, 0)
        e.place(loop)
        if slot is None:
            e.jmp_imm("jge", 3, self._const(count), equal)
        else:
            e.ldx(8, 4, 10, slot)
            e.jmp_reg("jge", 3, 4, equal)
        e.ldx(1, 4, 1, 0)
        e.ldx(1, 5, 2, 0)
        e.jmp_reg("jne", 4, 5, differ)
        for r in (1, 2, 3):
            e.alu_imm("add", r, 1)
        e.ja(loop)
        e.place(differ)
        for r in (4, 5):                  # as C's (int)char: sign-extended
            self.extend(r, 1, True)
        e.mov_reg(0, 4)
        e.alu_reg("sub", 0, 5)
        e.ja(done)
        e.place(equal)
        e.mov_imm(0, 0)
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
            cut = self.t(node).size     # str(s, n): n bytes with the NUL
            if cut < min(size, at.size):
                self.cut_words(dst, cut, min(size, at.size))
            return
        limit = min(size, self.t(node).size)     # str(x, 5) read into a longer place: still 4 characters
        if len(node.args) == 2 and not isinstance(node.args[1], (A.Int, A.Positional)):
            self.scalar(node.args[1])      # n bytes with the NUL (bpftrace 0.21+)
            lim = self.f.slot()
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
