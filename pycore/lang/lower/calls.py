"""Lowering of calls: statements (print, printf, exit, clear...) as ring-buffer records, and calls
that have a value (str, ntop, kaddr, ...), dispatched to the lowering of their kind.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.lang.lower.layout import (Action, _align8, LOST_OFF, TAG_PRINTF, TAG_EXIT, TAG_PRINT_MAP, TAG_CLEAR,
                                      TAG_ZERO, TAG_TIME, TAG_PRINT_VALUE, TAG_JOIN, TAG_SYSTEM, TAG_CAT,
                                      TAG_HELPER_ERROR, R0_LENGTH)
from pycore.lang.lower.state import State
from pycore.lang.check.records import AGGREGATES
from pycore.lang.probes import REGS
from pycore.lang.types import INT64, Array, Record, Str, Tuple, Type, Void, is_buffer, width

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def _chars(source: str, line: int, col: int):  # noqa: ANN202 - an iterator of (line, col, char, quoted)
    """The characters of ``source`` from ``line:col`` on (1-based line and column each), and whether
    each is part of a string literal (its quotes too)."""
    lines = source.splitlines()
    quote, esc = False, False
    for ln in range(line - 1, len(lines)):
        text = lines[ln]
        for i in range(col - 1 if ln == line - 1 else 0, len(text)):
            c = text[i]
            if quote:
                esc, quote = (not esc and c == "\\"), quote and (esc or c != '"')
                yield ln + 1, i + 1, c, True
                continue
            quote = c == '"'
            yield ln + 1, i + 1, c, quote


def call_extent(source: str, line: int, col: int) -> tuple[int, int, int, int]:
    """(line, col, end line, end col) of the call starting at ``line:col``: where its closing
    parenthesis is, the column after it (bpftrace's locations: 1-based, the end exclusive)."""
    depth = 0
    for ln, i, c, quoted in _chars(source, line, col):
        if quoted:
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return line, col, ln, i + 1
    return line, col, line, col + 1


def statement_extent(source: str, line: int, col: int) -> tuple[int, int, int, int]:
    """(line, col, end line, end col) of the statement starting at ``line:col``: up to its ``;`` (or
    the ``}`` closing its block) at depth 0, strings skipped, trailing blanks left out."""
    depth, last = 0, (line, col)
    for ln, i, c, quoted in _chars(source, line, col):
        if not quoted:
            if c in "([{":
                depth += 1
            elif c in ")]}" and depth:
                depth -= 1
            elif c in ";)]}":
                break
        if not c.isspace():
            last = (ln, i)
    return line, col, last[0], last[1] + 1


def update_site(source: str, s: A.Stmt) -> tuple[int, int, int, int]:
    """Where bpftrace 0.23.2 places its map-full warning for the map update of statement ``s`` (its
    locations as its lexer makes them): the whole statement (``@m[k] = v``, ``@m[k] += 1``,
    ``@m[k]++``); ``++``/``--`` alone before the map; for an aggregation, its call and whatever
    touches it with no blank between (``@m[k]=count()`` whole, ``@m[k] = count()`` only ``count()``)."""
    line, col = s.pos.line, s.pos.col
    if isinstance(s, A.IncDec) and s.prefix:
        return line, col, line, col + 2
    if isinstance(s, A.Assign) and isinstance(s.value, A.Call) and s.value.name in AGGREGATES:
        _, _, end_line, end_col = call_extent(source, s.value.pos.line, s.value.pos.col)
        start_line, start = s.value.pos.line, s.value.pos.col
        text = source.splitlines()[start_line - 1] if 0 < start_line <= len(source.splitlines()) else ""
        while start > 1 and not text[start - 2].isspace() and (start_line, start) > (line, col):
            start -= 1
        return start_line, start, end_line, end_col
    return statement_extent(source, line, col)


class Calls(State):
    """Calls as statements (output records in the ring buffer) and calls as values."""

    def call_stmt(self, call: A.Call) -> None:
        n = call.name
        e = self.e
        if n in ("fail", "static_assert"):      # checked: where code is made, neither fired
            return
        if n in ("printf", "errorf", "warnf"):
            types = [self.t(a) for a in call.args[1:]]
            extra = () if n == "printf" else ("ERROR" if n == "errorf" else "WARNING", *self._place(call))
            idx = self.layout.action(Action(TAG_PRINTF, call.args[0].value, types, extra))
            self.emit_record(idx, call.args[1:], types, fit=True)
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
            types = [INT64] if call.args else []     # exit(code): the code goes with the record
            idx = self.layout.action(Action(TAG_EXIT, "", types))
            self.emit_record(idx, list(call.args), types)
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
            self.helper_error(call, "map_delete_elem")
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
        elif n in ("signal", "signal_thread"):     # to the process; signal_thread (0.25): the thread
            from pycore.lang.signals import signal_number

            a = call.args[0]
            if isinstance(a, A.Str):
                e.mov_imm(1, signal_number(a.value))
            else:
                self.scalar(a)
                e.mov_reg(1, 0)
            e.call("send_signal" if n == "signal" else "send_signal_thread")
        else:
            self.scalar_or_string(call)

    def _place(self, call: A.Call) -> tuple[str, int, int, str]:
        """(file, line, column, bpftrace's ``file:line:col-end``) of a call: errorf()'s place."""
        line, col = call.pos
        text = self.source.splitlines()[line - 1] if 0 < line <= len(self.source.splitlines()) else ""
        depth, end, quoted, i = 0, 0, False, col - 1
        while i < len(text):     # the call's closing parenthesis, strings skipped
            ch = text[i]
            if quoted:
                i += ch == "\\"
                quoted = ch != '"'
            elif ch == '"':
                quoted = True
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    end = i + 2
                    break
            i += 1
        where = f"{self.filename}:{line}:{col}" + (f"-{end}" if end else "")
        return self.filename, line, col, where

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

    def emit_record(self, idx: int, args: list[A.Expr], types: list[Type], fit: bool = False) -> None:
        """A ring-buffer record: u64 action index, then each argument (8 bytes, or its buffer).

        ``fit`` (printf's records, whose strings the runtime reads up to their NUL): the strings are
        not zeroed first where a helper writes them with their NUL, and a record that ends with such
        a string goes into the ring up to its NUL, not at its full size (a ``str()`` of 1024 bytes
        that holds 20 is a record of ~32 bytes, not ~1 KiB); the runtime pads it back."""
        e = self.e
        size = 8 + sum(width(t) for t in types)
        rec = self.f.region(size)
        used = self.values_into(args, types, rec + 8, fit)
        length: int | None = None
        if used is not None:
            last = size - width(types[-1])          # where the last string starts in the record
            if used == R0_LENGTH:                   # r0: its length with the NUL, or an error (zeroed)
                big, ok = e.label(), e.label()
                e.jmp_imm("jsgt", 0, 0, big)
                e.mov_imm(0, 1)
                e.place(big)
                e.jmp_imm("jle", 0, types[-1].size, ok)   # bounded for the verifier: the ring's read
                e.mov_imm(0, types[-1].size)
                e.place(ok)
                e.alu_imm("add", 0, last)
                length = self.f.slot()
                e.stx(8, 10, length, 0)
            else:
                size = last + used
        e.ld_imm64(0, idx)
        e.stx(8, 8, rec, 0)
        self.output(rec, size, length)

    def helper_error(self, call: A.Call, helper: str) -> None:
        """After a helper call (its result in r0): when it failed (< 0 as an int), a record with the
        code, printed as bpftrace 0.23.2's warning at the call's place (``Can't delete map element
        because it does not exist.``); its check level 1, the default, warns for these helpers."""
        self.helper_error_at(call_extent(self.source, call.pos.line, call.pos.col), helper)

    def helper_error_at(self, where: tuple[int, int, int, int], helper: str) -> None:
        """:meth:`helper_error` at the place ``where`` (line, col, end line, end col)."""
        e = self.e
        ok = e.label()
        e.jmp_imm("jsge", 0, 0, ok)         # r0 as returned; the helpers' errors are small negatives
        idx = self.layout.action(Action(TAG_HELPER_ERROR, self.filename, [INT64], (helper, *where)))
        rec = self.f.region(16)
        e.stx(8, 8, rec + 8, 0)
        e.ld_imm64(0, idx)
        e.stx(8, 8, rec, 0)
        self.output(rec, 16)
        e.place(ok)

    def values_into(self, args: Sequence[A.Expr], types: Sequence[Type], pos: int, fit: bool = False) -> int | None:
        """scratch[pos:] = each value in turn, each :func:`width` bytes: an output record's arguments,
        a tuple's elements. ``fit``: strings not padded where a helper writes their NUL (emit_record);
        then what string_into answers of the last value, when it is such a string (else None)."""
        used = None
        for a, t in zip(args, types):
            used = None
            if fit and type(t) is Str:
                used = self.string_into(a, pos, t.size, pad=False)
            elif is_buffer(t):
                self.string_into(a, pos, t.size)
            elif isinstance(t, (Record, Array)):
                self.address(a)
                self.read_mem(pos, t.size, 0, t.user)
            else:
                self.scalar(a)
                self.e.stx(8, 8, pos, 0)
                self.usym_pid(t, pos)
            pos += width(t)
        return used

    def tuple_element(self, node: A.Field) -> int:
        """``$t.N``: the element's scratch offset; a tuple not in a variable is built into a region first.
        The caller releases the region (``self.f.mark()`` before, ``release`` after)."""
        t = self.t(node.expr)
        assert isinstance(t, Tuple)
        index = self.c.fields[id(node)] if id(node) in self.c.fields else int(node.name)   # a record's by name
        if isinstance(node.expr, A.Var):   # already in scratch: read it in place
            return self.vars_get(node.expr) + t.offsets()[index]
        tmp = self.f.region(_align8(t.size))
        self.string_into(node.expr, tmp, t.size)
        return tmp + t.offsets()[index]

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

    def output(self, rec: int, size: int, length: int | None = None) -> None:
        """ringbuf_output(rec) of ``size`` bytes, or of the size in stack slot ``length`` (bounded by
        emit_record); count a lost event when the ring is full."""
        e = self.e
        e.ld_map(1, self.fds["$ring"])
        self._ptr(2, rec)
        if length is None:
            e.mov_imm(3, size)
        else:
            e.ldx(8, 3, 10, length)
        e.mov_imm(4, 0)
        e.call("ringbuf_output")
        ok = e.label()
        e.jmp_imm("jeq", 0, 0, ok)
        e.ldx(8, 1, 8, LOST_OFF)
        e.alu_imm("add", 1, 1)
        e.stx(8, 8, LOST_OFF, 1)
        e.place(ok)

    # -- calls with values ----------------------------------------------------------------------

    def call_value(self, node: A.Call) -> None:
        e = self.e
        n = node.name
        t = self.t(node)
        if n == "strftime":      # the nanoseconds; the format is the type's, applied when printed
            self.scalar(node.args[1])
            return
        if n == "socket_cookie":     # the pointer as the kernel typed it (a fentry argument): the verifier
            self.scalar(node.args[0])   # checks it is a struct sock (the checker said so)
            e.mov_reg(1, 0)
            e.call("get_socket_cookie")
            return
        if n == "len" and isinstance(node.args[0], (A.Builtin, A.Call)):   # len(ustack), len(kstack)
            st = self.t(node.args[0])
            self.stack_depth(st.user, st.limit)    # type: ignore[attr-defined]
            return
        if n == "len":           # bpf_map_sum_elem_count(&map): the kernel's count of its elements
            ref = node.args[0]
            m = self.layout.maps["@" + ref.name]
            if not m.keys and m.kind == "count":
                e.mov_imm(0, 1)     # a key-less count() always has its one element (bpftrace's array)
                return
            e.ld_map(1, self.fds["@" + ref.name])
            e.call_kfunc(self.c.consts[id(ref)])
            return
        if n == "percpu_kaddr":  # bpf_this_cpu_ptr / bpf_per_cpu_ptr of the variable (its BTF id)
            if len(node.args) == 2:
                self.scalar(node.args[1])
                e.mov_reg(2, 0)
            e.ld_btf_id(1, self.c.consts[id(node.args[0])])
            e.call("per_cpu_ptr" if len(node.args) == 2 else "this_cpu_ptr")
            # the verifier's typed (maybe NULL) pointer made a plain address, as pycore reads through
            # every pointer with bpf_probe_read_kernel: copied through the stack by that helper
            src, dst = self.f.slot(), self.f.slot()
            e.stx(8, 10, src, 0)
            e.st(8, 10, dst, 0)
            e.mov_reg(1, 10)
            e.alu_imm("add", 1, dst)
            e.mov_imm(2, 8)
            e.mov_reg(3, 10)
            e.alu_imm("add", 3, src)
            e.call("probe_read_kernel")
            e.ldx(8, 0, 10, dst)
            return
        if n in ("strerror", "syscall_name", "signal_name"):      # the number; its text is found when printed
            self.scalar(node.args[0])
            return
        if n == "nsecs":
            clock = node.args[0].name
            if clock == "sw_tai":
                self.sw_tai_now()
            else:
                e.call({"monotonic": "ktime_get_ns", "boot": "ktime_get_boot_ns", "tai": "ktime_get_tai_ns"}[clock])
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
            from pycore.lang.check import kernel_address

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
        if n in ("strcontains", "strstr"):
            self.strcontains(node.args[0], node.args[1], position=n == "strstr")
            return
        if n == "memcmp":
            self.memcmp(*node.args)
            return
        if n == "write_user":
            self.write_user(node)
            return
        if n in ("strlen", "strcap"):      # strcap of a string or array is a constant (c.consts)
            self.strlen(node)
            return
        if n == "delete":       # as a value (bpftrace 0.24): 1 when the key was there and is deleted, else 0
            ref = node.args[0]
            m = self.layout.maps["@" + ref.name]
            key = self.key(ref, m)
            e.ld_map(1, self.fds[m.name])
            self._ptr(2, key)
            e.call("map_delete_elem")
            e.test("jeq", 0, 0)
            return
        if n == "find":         # one lookup; when there, the assignment the checker made ($v = @m[k]) from it
            ref = node.args[0]
            m = self.layout.maps["@" + ref.name]
            store = self.c.assigns[id(node)]
            self.map_lookup(m, self.key(ref, m))
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            found = self.f.slot()
            e.stx(8, 10, found, 0)
            self.found[id(store.value)] = found     # (an aggregate's value is read again: per-CPU, combined)
            try:
                self.assign(store)
            finally:
                del self.found[id(store.value)]
            e.mov_imm(0, 1)
            e.place(done)
            return
        if n == "has_key":      # 1 when the key is in the map, else 0
            ref = node.args[0]
            m = self.layout.maps["@" + ref.name]
            self.map_lookup(m, self.key(ref, m))
            done = e.label()
            e.jmp_imm("jeq", 0, 0, done)
            e.mov_imm(0, 1)
            e.place(done)
            return
        if isinstance(t, Str):
            raise self.error(node, f"{n}() is a string here")
        raise self.error(node, f"{n}() has no value")

    def sw_tai_now(self) -> None:
        """r0 = software TAI nanoseconds (bpftrace's sw_tai): boot time plus TAI's distance from it,
        read when the script is compiled (nsecs(sw_tai); tseries' intervals)."""
        self.e.call("ktime_get_boot_ns")
        self.e.ld_imm64(1, tai_offset())
        self.e.alu_reg("add", 0, 1)


_TAI_OFFSET: list[int] = []


def tai_offset() -> int:
    """CLOCK_TAI less CLOCK_BOOTTIME, read once between two readings of the boot clock (bpftrace's
    "triple vdso sandwich"): nsecs(sw_tai) for kernels without bpf_ktime_get_tai_ns (before 6.1)."""
    if not _TAI_OFFSET:
        import time

        best = None
        for _ in range(3):     # the tightest of three sandwiches
            b1 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            tai = time.clock_gettime_ns(time.CLOCK_TAI)
            b2 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            if best is None or b2 - b1 < best[0]:
                best = (b2 - b1, tai - (b1 + b2) // 2)
        _TAI_OFFSET.append(best[1])
    return _TAI_OFFSET[0]


