"""Checking of function calls: printf's format against its arguments, print, output and map
functions, str/buf/ntop/pton/kaddr and the rest of bpftrace's functions, with their types.
"""

from __future__ import annotations

from collections.abc import Callable

from pycore.lang import ast as A
from pycore.lang.check.records import AGGREGATES, PRINT_ONLY, Checked, MapInfo
from pycore.lang.check.state import State
from pycore.lang.check.types import _C_INTS
from pycore.lang.errors import close_matches
from pycore.lang.types import (BOOL, INT64, STRING_SIZE, UINT64, USYM, Array, Bool, Buffer, Enum, Inet, Int, Mac, Ptr, Record, Stack,
                               Str, Strerror, SignalName, SyscallName, TextInt, Timestamp, CgroupPath, Tuple, Type, Username,
                               Void, from_btf, type_name)


_NO_VALUE_CALLS = {"printf", "errorf", "warnf", "print", "exit", "delete", "clear", "zero", "time", "join", "system", "signal", "signal_thread", "cat",
                   "override", "fail", "static_assert"}


_CLOCKS = ("monotonic", "boot", "tai", "sw_tai")


# the probes whose programs may call bpf_send_signal(_thread) (bpftrace 0.23.2's list)
_SIGNAL_KINDS = ("kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "tracepoint", "profile", "kfunc", "kretfunc",
                 "rawtracepoint")


class Calls(State):
    """Function calls: each builtin function's arguments and its value's type."""

    # -- calls -----------------------------------------------------------------------------

    def typeinfo(self, c: Checked, e: A.Call) -> Type:
        """``typeinfo(x)`` (bpftrace 0.25, unstable: 0.26.1 refuses it unless the config says
        ``unstable_typeinfo = enable``): the record ``(btf_id=0, base_type=..., full_type=...)`` of x's
        type as upstream names it (:func:`upstream_type`); x, an expression or a type, is checked and
        never run. The record is a literal the lowering builds (c.typeinfo), and comptime folds its
        strings (Checker.fold)."""
        mode = self.config.others.get("unstable_typeinfo", "error") if self.config is not None else "error"
        if mode == "error":
            raise self.error(e, "typeinfo feature is not enabled by default. To enable this unstable feature, set "
                                "the config flag to enable. unstable_typeinfo=enable (bpftrace 0.26.1's words)")
        if len(e.args) != 1:
            raise self.error(e, "typeinfo() takes one expression or type")
        a = e.args[0]
        t: Type | A.TypeName = self.typeof(c, a) if isinstance(a, A.TypeName) and a.of is not None else a  # type: ignore[assignment]
        if isinstance(t, A.Builtin) and t.name in _C_INTS:
            t = Int(*_C_INTS[t.name])
        elif isinstance(t, A.TypeName):
            target, spec = self.named_type(c, t, t.name)
            for _ in range(t.pointer_depth):
                target = self._pointer_to(target, spec)
            t = from_btf(spec, target)
        elif isinstance(t, A.Expr):
            t = self.expr(c, t)
        base, full = upstream_type(t)  # type: ignore[arg-type]
        record = A.Tuple((A.Int(0, pos=e.pos), A.Str(base, pos=e.pos), A.Str(full, pos=e.pos)),
                         ("btf_id", "base_type", "full_type"), pos=e.pos)
        c.typeinfo[id(e)] = record
        return self.expr(c, record)

    def call(self, c: Checked, e: A.Call, statement: bool) -> Type:
        n = e.name
        args = e.args
        if n in AGGREGATES:
            raise self.error(e, f"{n}() is assigned to a map: @name = {n}(...)")
        if n in _NO_VALUE_CALLS and not statement and n != "delete":
            raise self.error(e, f"{n}() gives no value")
        if n in ("system", "signal", "signal_thread", "override", "write_user") and not self.unsafe:
            raise self.error(e, f"{n}() is unsafe: {self.unsafe_hint}")
        if n in ("printf", "errorf", "warnf"):     # errorf/warnf (0.24): printf to stderr, with the place
            if not args or not isinstance(args[0], A.Str):
                raise self.error(e, f"{n}() needs a format string first")
            types = [self.expr(c, a) for a in args[1:]]
            for a, t in zip(args[1:], types):
                kind = self.aggregate_map(a)
                if kind:   # bpftrace 0.21+ (and 0.17): "%d specifier expects a value of type int (avg_t supplied)"
                    raise self.error(a, f"printf cannot print a {kind}() map itself (a {kind}_t, as bpftrace "
                                        f"says): give (int64)@{a.name}, or assign it to a variable first")
                if isinstance(t, (Record, Array, Void, Tuple)):
                    raise self.error(a, f"printf cannot print {t}" + (": print() it, or give its elements, $t.0"
                                                                      if isinstance(t, Tuple) else ""))
            from pycore.lang.output import validate_format

            why = validate_format(args[0].value, types, n)
            if why:
                raise self.error(args[0], why)
            return Void()
        if n == "print":
            if not args or len(args) > 3:
                raise self.error(e, "print() takes a map or a value")
            a0 = args[0]
            m = self.maps.get("@" + a0.name) if isinstance(a0, A.MapRef) and a0.keys else None
            if m is not None and m.kind in PRINT_ONLY:     # bpftrace 0.23.2's refusal
                raise self.error(a0, f"Map type {m.kind}_t cannot print the value of individual keys. You must "
                                     f"print the whole map.")
            if isinstance(a0, A.MapRef) and not a0.keys:
                if "@" + a0.name not in self.maps:
                    self.maps["@" + a0.name] = MapInfo("@" + a0.name, pos=a0.pos)
                c.types[id(a0)] = Void()
            else:
                t = self.expr(c, a0)
                if isinstance(t, Void) and not (isinstance(a0, A.Builtin) and a0.name == "args"):
                    raise self.error(a0, "nothing to print")
            return Void()
        if n in ("exit",):    # exit(code): bpftrace 0.21's exit status
            if len(args) > 1:
                raise self.error(e, "exit() takes an optional exit code: exit() or exit(code)")
            for a in args:
                t = self.expr(c, a)
                if not isinstance(t, Int) or isinstance(t, TextInt):
                    raise self.error(a, f"exit() takes an integer exit code, not {t}")
            return Void()
        if n == "has_key":    # bpftrace 0.22's: whether @m holds the key (the parser made it one argument)
            if len(args) != 1 or not isinstance(args[0], A.MapRef) or not args[0].keys:
                raise self.error(e, "has_key() takes a map and a key: has_key(@m, key)")
            keys = self.map_keys(c, args[0])
            self.map_use(args[0], keys)
            c.types[id(args[0])] = Void()
            return INT64
        if n == "find":     # bpftrace 0.25: has_key(@m, k) that also sets $v = @m[k] when it is there
            if len(args) != 2 or not isinstance(args[0], A.MapRef) or not args[0].keys \
                    or not isinstance(args[1], A.Var):
                raise self.error(e, "find() takes a map, a key and a variable: find(@m, key, $v)")
            ref = args[0]
            self.map_use(ref, self.map_keys(c, ref))
            store = A.Assign(args[1], "=", A.MapRef(ref.name, ref.keys, pos=ref.pos), pos=e.pos)
            self.assign(c, store)
            c.assigns[id(e)] = store
            c.types[id(ref)] = Void()
            return BOOL
        if n in ("delete",):
            if len(args) != 1 or not isinstance(args[0], A.MapRef):
                raise self.error(e, "delete() takes a map element: delete(@m[key]) or delete(@m, key)")
            keys = self.map_keys(c, args[0])
            self.map_use(args[0], keys)
            c.types[id(args[0])] = Void()
            return Void() if statement else INT64     # as a value, 1 if deleted, else 0 (bpftrace 0.24)
        if n in ("clear", "zero"):
            if len(args) != 1 or not isinstance(args[0], A.MapRef) or args[0].keys:
                raise self.error(e, f"{n}() takes a whole map: {n}(@m)")
            if "@" + args[0].name not in self.maps:
                self.maps["@" + args[0].name] = MapInfo("@" + args[0].name, pos=args[0].pos)
            c.types[id(args[0])] = Void()
            return Void()
        if n == "time":
            if len(args) > 1 or (args and not isinstance(args[0], A.Str)):
                raise self.error(e, "time() takes an optional format string")
            return Void()
        if n == "str":
            if not 1 <= len(args) <= 2:
                raise self.error(e, "str(pointer[, length])")
            if isinstance(args[0], A.Positional):     # str($1): the parameter's text, whatever it holds, up to
                size = len(self.positional_text(args[0]).encode()) + 1     # max_strlen (as 0.23.2 cuts it)
                t = c.types[id(args[0])] = Str(min(size, self.config.max_strlen))
                return t if len(args) == 1 else Str(max(1, min(t.size, self.constant(c, args[1]))))
            t = self.expr(c, args[0])
            if isinstance(t, Str) and len(args) == 2:
                # a string cut short: bpftrace 0.26 reads n bytes with the NUL (n - 1 characters), and
                # folds a literal's to n characters (fold_literals.cpp); 0.23.2 refused both
                if _is_runtime(args[1]):
                    raise self.error(args[1], "str(string, n) cuts a string at a constant length n")
                n = self.constant(c, args[1]) + isinstance(args[0], A.Str)
                return Str(max(1, min(t.size, n)))
            if isinstance(t, Str):
                return t
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"str() needs a pointer, not {t}")
            size = self.config.max_strlen     # the config's max_strlen (0.23's default: 1024)
            if len(args) == 2:
                # n bytes with the NUL, n - 1 characters, as bpftrace 0.21+ (0.17 read n characters)
                size = self.constant(c, args[1]) if not _is_runtime(args[1]) else size
                if _is_runtime(args[1]):
                    self.expr(c, args[1])
                size = max(1, min(size, max(1024, self.config.max_strlen)))
            return Str(size)
        if n in ("strncmp",):
            if len(args) != 3:
                raise self.error(e, "strncmp(a, b, n)")
            for a in args[:2]:
                if not isinstance(self.expr(c, a), Str):
                    raise self.error(a, "strncmp() compares strings")
            self.constant(c, args[2])
            return INT64
        if n == "comptime":
            self.comptime_value(c, e)       # (checks its expression once)
            return c.types[id(args[0])]
        if n == "fail":         # bpftrace 0.25: a compile-time error, where the checker reaches it
            if not args or not isinstance(args[0], A.Str):
                raise self.error(e, "first argument to fail() must be a string literal")
            values: list[object] = []
            for a in args[1:]:
                v = a.value if isinstance(a, A.Str) else self.fold(c, a, consts=False) if is_literal(a) else None
                if v is None:
                    raise self.error(a, "fail() arguments need to be literals")
                values.append(v)
            if not self._dead:
                from pycore.lang.output.cformat import format_printf

                raise self.error(e, format_printf(args[0].value, values))
            return Void()
        if n == "static_assert":    # bpftrace 0.25's standard library: if comptime (!cond) { fail(msg); }
            if len(args) != 2 or not isinstance(args[1], A.Str):
                raise self.error(e, "static_assert(condition, \"message\")")
            self.expr(c, args[0])
            v = self.fold(c, args[0], consts=True)
            if v is None:
                raise self.error(args[0], "static_assert()'s condition is not known when the script is checked")
            if not v and not self._dead:
                raise self.error(e, args[1].value)
            return Void()
        if n in ("kfunc_exist", "kfunc_allowed"):    # bpftrace 0.25's: known when the script is checked
            if len(args) != 1 or not isinstance(args[0], A.Str):
                raise self.error(e, f"{n}() accepts a string literal only")
            from btf.kinds import Kind

            found = self.spec.ids_named(args[0].value, (Kind.FUNC,))
            if n == "kfunc_exist" or not found:
                c.consts[id(e)] = int(bool(found))
            else:
                from pycore.kernel.features import kfunc_allowed

                c.consts[id(e)] = int(kfunc_allowed(args[0].value, found[0], c.target.prog_type))
            return BOOL
        if n == "memcmp":       # bpftrace 0.25's standard library
            if len(args) != 3:
                raise self.error(e, "memcmp(left, right, count)")
            sizes = []
            for a in args[:2]:
                t = self.expr(c, a)
                if not isinstance(t, (Int, Ptr, Str, Array, Record, Inet)) or not t.size:
                    raise self.error(a, f"memcmp() compares the bytes of a value: not of a {t}")
                sizes.append(t.size)
            if _is_runtime(args[2]):
                if not isinstance(self.expr(c, args[2]), Int):
                    raise self.error(args[2], "memcmp()'s count is an integer")
            else:
                count = self.constant(c, args[2])
                if not 0 <= count <= min(sizes):
                    raise self.error(args[2], f"memcmp() of {count} bytes: its operands have {sizes[0]} and "
                                              f"{sizes[1]} bytes")
            return Int(4, True)
        if n in ("strcontains", "strstr"):     # strstr: bpftrace 0.25's, the needle's first position or -1
            if len(args) != 2:
                raise self.error(e, f"{n}(haystack, needle)")
            hay, needle = (self.expr(c, a) for a in args)
            for a, t in zip(args, (hay, needle)):
                if not isinstance(t, Str):
                    raise self.error(a, f"{n}() takes strings")
            # the search is unrolled: bound its size well below the verifier's limits
            work = hay.size * (len(args[1].value) if isinstance(args[1], A.Str) else needle.size)
            if work > 16384:
                raise self.error(e, f"{n}(): a {hay.size}-byte haystack and a {needle.size}-byte needle "
                                    "are too long to search; shorten them with str(x, n)")
            return INT64
        if n == "write_user":   # bpftrace 0.26's: bpf_probe_write_user(dst, src, len) == 0
            if len(args) != 3:
                raise self.error(e, "write_user(dst, src, len)")
            dst, src = self.expr(c, args[0]), self.expr(c, args[1])
            if not isinstance(dst, (Int, Ptr)):
                raise self.error(args[0], f"write_user() writes to a user address, not {dst}")
            if not isinstance(src, (Str, Array)):
                raise self.error(args[1], f"write_user() writes a string or an array's bytes, not {src}")
            length = self.constant(c, args[2])
            if not 0 < length <= src.size:
                raise self.error(args[2], f"write_user(): {length} bytes from a {src.size}-byte {src}: "
                                          f"write 1 to {src.size}")
            return BOOL
        if n == "typeinfo":
            return self.typeinfo(c, e)
        if n in _TYPE_QUERIES:     # bpftrace 0.25's is_str(x)...: the type of x, known when checked
            if len(args) != 1 or not isinstance(args[0], A.Expr):
                raise self.error(e, f"{n}(expression)")
            t = self.expr(c, args[0])
            c.consts[id(e)] = int(_TYPE_QUERIES[n](args[0], t))
            return BOOL
        if n == "strcap":       # bpftrace 0.25's: a string's or char array's size, a char pointer's strlen
            if len(args) != 1:
                raise self.error(e, "strcap(string)")
            t = self.expr(c, args[0])
            if isinstance(t, Str):
                c.consts[id(e)] = t.size
            elif isinstance(t, Array) and t.elem_size == 1:
                c.consts[id(e)] = t.size
            elif isinstance(t, Ptr):
                c.limits[id(e)] = self.config.max_strlen + 1
            else:
                raise self.error(args[0], "strcap() takes a string, a char array or a char pointer")
            return INT64
        if n == "strlen":       # bpftrace 0.25's: a string's length, or a char pointer's up to max_strlen
            if len(args) != 1:
                raise self.error(e, "strlen(string)")
            if not isinstance(self.expr(c, args[0]), (Str, Ptr)):
                raise self.error(args[0], "strlen() takes a string or a char pointer")
            c.limits[id(e)] = self.config.max_strlen + 1
            return UINT64
        if n == "strftime":
            if len(args) != 2:
                raise self.error(e, f"strftime() requires 2 arguments ({len(args)} provided)")
            if not isinstance(args[0], A.Str):
                raise self.error(args[0], f"strftime() expects a string literal ({self.expr(c, args[0])} provided)")
            t = self.expr(c, args[1])
            if not _integer(t):
                raise self.error(args[1], f"strftime() only supports integer arguments ({t} provided)")
            return Timestamp(fmt=args[0].value)
        if n == "cgroupid":
            if len(args) != 1 or not isinstance(args[0], A.Str):
                raise self.error(e, 'cgroupid("/sys/fs/cgroup/PATH")')
            from pycore.kernel.cgroup import cgroup_id

            try:
                c.consts[id(e)] = cgroup_id(args[0].value)
            except ValueError as err:
                raise self.error(args[0], f"cgroupid: {err}") from None
            except OSError as err:
                raise self.error(args[0], f"cgroupid: {args[0].value}: {err.strerror}") from None
            return UINT64
        if n == "cgroup_path":
            if not 1 <= len(args) <= 2:
                raise self.error(e, f"cgroup_path() requires 1 or 2 arguments ({len(args)} provided)")
            t = self.expr(c, args[0])
            if not _integer(t):
                raise self.error(args[0], f"cgroup_path() only supports integer arguments ({t} provided)")
            if len(args) == 2 and not isinstance(args[1], A.Str):
                raise self.error(args[1], "cgroup_path(): the filter must be a string literal")
            return CgroupPath(filter=args[1].value if len(args) == 2 else "*")
        if n in ("ksym", "usym"):
            if len(args) != 1:
                raise self.error(e, f"{n}(address)")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"{n}() needs an address")
            return USYM if n == "usym" else Int(8, False, n)
        if n == "kaddr":
            if len(args) != 1 or not isinstance(args[0], A.Str):
                raise self.error(e, 'kaddr("symbol")')
            if kernel_address(args[0].value) is None:
                raise self.error(args[0], f"kaddr: no kernel symbol {args[0].value!r} in /proc/kallsyms"
                                          " (or its addresses are hidden: kptr_restrict)")
            return UINT64
        if n == "reg":
            return self.reg(c, e)
        if n == "uaddr":
            return self.uaddr(c, e)
        if n == "pton":
            return self.pton(c, e)
        if n in ("uptr", "kptr"):
            if len(args) != 1:
                raise self.error(e, f"{n}() takes one argument: an address or a pointer")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)):
                raise self.error(args[0], f"{n}() expects an address or a pointer, not {t}")
            user = n == "uptr"
            return Ptr(t.target, user, t.spec) if isinstance(t, Ptr) else Ptr(0, user)
        if n == "bswap":
            if len(args) != 1:
                raise self.error(e, "bswap() takes one integer")
            t = self.expr(c, args[0])
            if not isinstance(t, Int):
                raise self.error(args[0], f"bswap() only supports integer arguments, not {t}")
            return Int(t.size, False)
        if n == "ntop":
            return self.ntop(c, e)
        if n == "buf":
            return self.buf(c, e)
        if n == "macaddr":
            if len(args) != 1:
                raise self.error(e, "macaddr() takes one argument: 6 bytes, or a pointer to them")
            t = self.expr(c, args[0])
            if isinstance(t, (Str, Array)) and t.size != 6:
                raise self.error(args[0], f"macaddr() argument must be 6 bytes in size, not {t.size}")
            if not isinstance(t, (Array, Ptr)):
                raise self.error(args[0], f"macaddr() only supports array or pointer arguments, not {t}")
            return Mac()
        if n in ("kstack", "ustack"):
            limit, mode = 127, self.stack_mode()
            for i, a in enumerate(args):
                if i == 0 and isinstance(a, A.Builtin) and a.name in ("perf", "bpftrace", "raw"):
                    mode = "" if a.name == "bpftrace" else a.name
                    continue
                limit = self.constant(c, a)
                if not 1 <= limit <= 1024:
                    raise self.error(a, f"{n}() takes a limit of 1..1024 frames, not {limit}")
            return Stack(n == "ustack", limit, mode=mode)
        if n == "join":
            if not args:
                raise self.error(e, "join(array[, separator])")
            t = self.expr(c, args[0])
            if not isinstance(t, (Int, Ptr)) or (isinstance(t, Int) and t.display):
                raise self.error(args[0], f"join() only supports int or pointer arguments ({t} provided)")
            return Void()
        if n in ("signal", "signal_thread"):
            return self.signal(c, e)
        if n == "system":
            for a in args:
                self.expr(c, a)
            return Void()
        if n == "override":
            if c.target.kind != "kprobe":
                raise self.error(e, f"override() can only be used in kprobes, not in {c.target.probe}")
            if len(args) != 1 or not isinstance(self.expr(c, args[0]), Int):
                raise self.error(e, "override(integer): the value the probed function returns instead")
            return Void()
        if n == "comm" and len(args) > 1:
            raise self.error(e, f"comm() takes one argument, a pid, or none ({len(args)} provided)")
        if n == "comm" and len(args) == 1:     # bpftrace 0.25: another process's name, by its pid
            from btf.kinds import Kind

            from pycore.lang.probes import PROG_TRACING

            if c.target.prog_type != PROG_TRACING:
                raise self.error(e, "comm(pid) can only be used in fentry, fexit and iter probes (the kernel's "
                                    f"bpf_task_from_pid is for those), not in {c.target.probe}")
            if not _integer(self.expr(c, args[0])):
                raise self.error(args[0], "Only integer supported for comm()'s pid")
            found = [self.spec.ids_named(f, (Kind.FUNC,)) for f in ("bpf_task_from_pid", "bpf_task_release")]
            if not all(found):
                raise self.error(e, "comm(pid) reads the task with the kernel's bpf_task_from_pid (Linux 6.2 and "
                                    "later), which this kernel does not have")
            rec = from_btf(self.spec, self.btf_type(e, "struct task_struct"))
            _, bits = self.member(e, rec, "comm")   # type: ignore[arg-type]
            c.kfuncs[id(e)] = (found[0][0], found[1][0], bits // 8)
            return Str(16)
        if n == "socket_cookie":   # bpftrace 0.24: bpf_get_socket_cookie of a struct sock the kernel typed
            if c.target.kind not in ("kfunc", "kretfunc"):
                raise self.error(e, "socket_cookie() can only be used in fentry and fexit probes (the kernel "
                                    f"takes a typed struct sock pointer there only), not in {c.target.probe}")
            if len(args) != 1:
                raise self.error(e, f"socket_cookie() requires 1 argument ({len(args)} provided)")
            t = self.expr(c, args[0])
            named = type_name(t.spec, t.target) if isinstance(t, Ptr) and t.spec else ""
            if named != "struct sock":
                raise self.error(args[0], "socket_cookie() only supports 'struct sock *' as the argument "
                                          f"({t if named else 'int64' if isinstance(t, Int) else t} provided)")
            return UINT64
        if n == "path":
            if c.target.kind not in ("kfunc", "kretfunc"):
                raise self.error(e, "path() can only be used in kfunc and kretfunc probes (the kernel's bpf_d_path "
                                    f"helper), not in {c.target.probe}")
            t = self.expr(c, args[0]) if 1 <= len(args) <= 2 else None
            spec = getattr(t, "spec", None)
            named = type_name(spec, t.target if isinstance(t, Ptr) else getattr(t, "btf_id", 0)) if spec else ""
            if not isinstance(t, (Ptr, Record)) or named != "struct path":
                raise self.error(e, f"path() expects a struct path or a pointer to one, not {t}")
            if len(args) == 2:      # bpftrace 0.21: path(p, size), the buffer bpf_d_path writes
                size = self.constant(c, args[1])
                if not 1 <= size <= 1024:
                    raise self.error(args[1], f"path(): the size must be 1..1024, not {size}")
                return Str(size)
            return Str(self.config.max_strlen)
        if n == "sizeof":
            c.consts[id(e)] = self.sizeof(c, e)
            return UINT64
        if n == "len":     # bpftrace 0.20: a map's elements, counted by the kernel (Linux 6.6+)
            if len(args) == 1 and isinstance(args[0], (A.Builtin, A.Call)) and args[0].name in ("ustack", "kstack"):
                self.expr(c, args[0])     # bpftrace 0.22: the stack's depth, at most its limit of frames
                return INT64
            if len(args) != 1 or not isinstance(args[0], A.MapRef) or args[0].keys:
                raise self.error(e, "len() takes a whole map: len(@m)")
            if "@" + args[0].name not in self.maps:
                self.maps["@" + args[0].name] = MapInfo("@" + args[0].name, pos=args[0].pos)
            c.types[id(args[0])] = Void()
            from btf.kinds import Kind

            found = self.spec.ids_named("bpf_map_sum_elem_count", (Kind.FUNC,))
            if not found:
                raise self.error(e, "len(@m) counts a map with the kernel's bpf_map_sum_elem_count (Linux 6.6 "
                                    "and later), which this kernel does not have")
            c.consts[id(args[0])] = found[0]
            return INT64
        if n == "str_concat":      # upstream after 0.26: the two strings as one
            if len(args) != 2:
                raise self.error(e, f"str_concat() requires 2 arguments ({len(args)} provided)")
            a, b = (self.expr(c, x) for x in args)
            for x, t in zip(args, (a, b)):
                if not isinstance(t, Str):
                    raise self.error(x, f"str_concat() takes strings, not {t}")
            return Str(min(a.size + b.size - 1, 1024))
        if n == "percpu_kaddr":     # bpftrace 0.22: a per-CPU kernel variable's address, this CPU's or cpu's
            if not 1 <= len(args) <= 2 or not isinstance(args[0], A.Str):
                raise self.error(e, 'percpu_kaddr("symbol"[, cpu])')
            from btf.kinds import Kind

            found = [i for i in self.spec.ids_named(args[0].value, (Kind.VAR,)) if i < self.spec.first_id
                     or self.spec.base is None]
            if not found:
                raise self.error(args[0], f"percpu_kaddr: no per-CPU kernel variable {args[0].value!r} in the "
                                          "kernel's BTF")
            c.consts[id(args[0])] = found[0]
            if len(args) == 2 and not _integer(self.expr(c, args[1])):
                raise self.error(args[1], "percpu_kaddr(): the cpu must be an integer")
            return Ptr(self.btf_type(e, "u64"), False, self.spec)
        if n == "strerror":     # bpftrace 0.21: the number, named by the C library when printed
            if len(args) != 1:
                raise self.error(e, f"strerror() requires 1 argument ({len(args)} provided)")
            t = self.expr(c, args[0])
            if not _integer(t):
                raise self.error(args[0], f"strerror() only supports integer arguments ({t} provided)")
            return Strerror()
        if n in ("syscall_name", "signal_name"):     # bpftrace 0.25, 0.26: the number, named when printed
            if len(args) != 1:
                raise self.error(e, f"{n}() requires 1 argument ({len(args)} provided)")
            t = self.expr(c, args[0])
            if not _integer(t):
                raise self.error(args[0], f"{n}() only supports integer arguments ({t} provided)")
            return SyscallName() if n == "syscall_name" else SignalName()
        if n == "nsecs":        # bpftrace 0.19's clocks: nsecs(monotonic | boot | tai | sw_tai)
            if len(args) != 1 or not isinstance(args[0], A.Builtin) or args[0].name not in _CLOCKS:
                raise self.error(e, "nsecs() takes a clock: nsecs(monotonic), nsecs(boot), nsecs(tai) or "
                                    "nsecs(sw_tai)")
            return UINT64
        if n in ("pid", "tid"):     # bpftrace 0.24's namespaces (pid() itself, init and curr_ns where they
            if len(args) == 1 and isinstance(args[0], A.Builtin) and args[0].name == "curr_ns":   # agree: sugar)
                raise self.error(e, f"{n}(curr_ns): pycore trace runs in a pid namespace other than the initial "
                                    f"one, and reads {n}s in the initial one only: use {n}(init)")
            raise self.error(e, f"{n}() takes a pid namespace: {n}(curr_ns) or {n}(init)")
        if n == "offsetof":
            c.consts[id(e)] = self.offsetof(c, e)
            return UINT64
        if n == "container_of":     # (a well-formed one is rewritten by pycore.lang.sugar)
            raise self.error(e, "container_of() takes a pointer, a type and a member: "
                                "container_of(ptr, struct foo, member)")
        if n == "cat":
            if not args or not isinstance(args[0], A.Str):
                raise self.error(e, "cat() needs a file name (a format string) first")
            types = [self.expr(c, a) for a in args[1:]]
            from pycore.lang.output import validate_format

            why = validate_format(args[0].value, types, "cat")
            if why:
                raise self.error(args[0], why)
            return Void()
        near = close_matches(n, ["printf", "print", "str", "strncmp", "strcontains", "strftime", "cgroupid", "cgroup_path", "path", "override", "ksym", "usym",
                                 "kaddr", "uptr", "kptr", "ntop", "macaddr", "buf", "reg", "bswap", "time", "join", "exit", "delete", "has_key", "clear",
                                 "zero", *AGGREGATES], n=1)
        from pycore.lang.check.builtins import _BUILTIN_TYPES, _OTHER_BUILTINS
        from pycore.lang.newer import function_feature

        later = function_feature(n, n in _BUILTIN_TYPES or n in _OTHER_BUILTINS)
        if later is not None:
            raise self.error(e, later)
        hint = f" (did you mean {near[0]}()?)" if near else ""
        raise self.error(e, f"unknown function {n}(){hint}")

    def signal(self, c: Checked, e: A.Call) -> Type:
        """signal(sig), signal_thread(sig) (0.25): bpftrace 0.23.2's checks, in its words."""
        from pycore.lang.signals import signal_number

        n, args, kind = e.name, e.args, c.target.kind
        if kind not in _SIGNAL_KINDS:
            word = {"kfunc": "fentry", "kretfunc": "fexit"}.get(kind, kind)
            raise self.error(e, f'{n} can not be used with "{word}" probes')
        if not args:
            raise self.error(e, f"{n}() requires at least one argument (0 provided)")
        if len(args) > 1:
            raise self.error(e, f"{n}() takes up to one argument ({len(args)} provided)")
        a = args[0]
        if isinstance(a, A.Str):
            if signal_number(a.value) < 1:
                raise self.error(e, f"{a.value} is not a valid signal")
            return Void()
        t = self.expr(c, a)
        if not isinstance(t, Int) or t.display:
            raise self.error(e, "signal only accepts string literals or integers")
        if isinstance(a, A.Int) and not 1 <= a.value <= 64:
            raise self.error(e, f"{a.value} is not a valid signal, allowed range: [1,64]")
        return Void()

    def pton(self, c: Checked, e: A.Call) -> Type:
        """``pton("10.0.0.1")``: the address's bytes, known when checked (4 for IPv4, 16 for IPv6), an
        array of uint8 as bpftrace's (which refuses IPv4-mapped IPv6 text; it is 16 bytes here)."""
        import socket

        from btf.kinds import Kind

        if len(e.args) != 1 or not isinstance(e.args[0], A.Str):
            raise self.error(e, 'pton() takes one string literal: pton("10.0.0.1")')
        text = e.args[0].value
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                raw = socket.inet_pton(family, text)
                break
            except OSError:
                continue
        else:
            raise self.error(e.args[0], f"pton() expects an IPv4/IPv6 address, got {text!r}")
        c.blobs[id(e)] = raw
        u8 = next((i for i in self.spec.ids_named("u8", (Kind.TYPEDEF,))), 0) or \
            next((i for i in self.spec.ids_named("unsigned char", (Kind.INT,))), 0)
        return Array(u8, len(raw), 1, False, self.spec)

    def buf(self, c: Checked, e: A.Call) -> Type:
        """buf(data[, length]): raw bytes (at most STRING_SIZE) from an array, a pointer or a string, for %r."""
        args = e.args
        if not 1 <= len(args) <= 2:
            raise self.error(e, "buf(data[, length]) takes 1 or 2 arguments")
        t = self.expr(c, args[0])
        if len(args) == 1 and not isinstance(t, Array):
            raise self.error(e, f"buf() expects a length argument for non-array type {t}")
        if not isinstance(t, (Array, Ptr, Str)):
            raise self.error(args[0], f"buf() expects an array, a pointer or a string, not {t}")
        if len(args) == 2:
            if not is_literal(args[1]):
                if not isinstance(self.expr(c, args[1]), Int):
                    raise self.error(args[1], "buf(): the length must be an integer")
            elif self.constant(c, args[1]) < 0:
                raise self.error(args[1], "buf(): the length cannot be negative")
        return Buffer()

    def ntop(self, c: Checked, e: A.Call) -> Type:
        """ntop([af, ]addr): an IPv4 address from an integer, IPv4/IPv6 from 4 or 16 bytes in memory."""
        args = e.args
        if not 1 <= len(args) <= 2:
            raise self.error(e, "ntop([af, ]address) takes 1 or 2 arguments")
        if len(args) == 2 and not isinstance(self.expr(c, args[0]), Int):
            raise self.error(args[0], "ntop(): the address family must be an integer (AF_INET 2, AF_INET6 10)")
        a = args[-1]
        t = self.expr(c, a)
        if isinstance(t, (Str, Array)):
            if t.size not in (4, 16):
                raise self.error(a, f"ntop() argument must be 4 or 16 bytes in size, not {t.size}")
        elif not isinstance(t, (Int, Ptr)):
            raise self.error(a, f"ntop() expects an integer or array argument, got {t}")
        return Inet()


def kernel_address(name: str) -> int | None:
    """kaddr(name): the kernel symbol's address, read once per name."""
    if name not in _KADDR:
        from pycore.kernel.kallsyms import Kallsyms

        try:
            _KADDR[name] = Kallsyms().address(name)
        except OSError:
            _KADDR[name] = None
    return _KADDR[name]


_KADDR: dict[str, int | None] = {}

def upstream_type(t: Type) -> tuple[str, str]:
    """(base type, full type) of ``t`` as upstream's typeinfo() names them (its src/types.cpp: the
    Type's name, and typestr): ``("int", "uint64")``, ``("string", "string[6]")``, ``("pointer",
    "struct task_struct *")``, ``("tuple", "(int64,string[3])")``, ``("record", "record { .a = int64 }")``."""
    if isinstance(t, Bool):
        return "bool", "bool"
    if isinstance(t, Enum):
        name = type_name(t.spec, t.enum_id) if t.spec is not None and t.enum_id else "enum"
        return "int", name if name.startswith("enum ") else f"enum {name}"
    if isinstance(t, Username):
        return "username_t", "username_t"
    if isinstance(t, Ptr):
        pointee = from_btf(t.spec, t.target) if t.spec is not None and t.target else None
        inner = "void" if pointee is None else upstream_type(pointee)[1] if isinstance(pointee, (Int, Ptr)) \
            else type_name(t.spec, t.target)
        return "pointer", f"{inner} *"
    if isinstance(t, Int):
        return "int", f"{'' if t.signed else 'u'}int{t.size * 8}"
    if type(t) is Str:
        return "string", f"string[{t.size}]"
    if isinstance(t, Tuple):
        fields = [upstream_type(x)[1] for x in t.elems]
        if t.names:
            return "record", "record { " + ", ".join(f".{n} = {f}" for n, f in zip(t.names, fields)) + " }"
        return "tuple", "(" + ",".join(fields) + ")"
    if isinstance(t, Stack):
        return ("ustack", "ustack") if t.user else ("kstack", "kstack")
    if isinstance(t, Array) and t.spec is not None:
        elem = from_btf(t.spec, t.elem_id)
        inner = upstream_type(elem)[1] if isinstance(elem, (Int, Ptr)) else type_name(t.spec, t.elem_id)
        return "array", f"{inner}[{t.count}]"
    if isinstance(t, Record) and t.spec is not None:
        return "c_type", type_name(t.spec, t.btf_id)
    if isinstance(t, Inet):
        return "inet", f"inet[{t.size}]"
    return str(t), str(t)


# What upstream's strings are (typeinfo(x).base_type == "string"): pycore keeps strerror(), syscall_name(),
# signal_name() and username as the number, printed as text
_TEXTS = (Strerror, SyscallName, SignalName, Username)


def _integer_type(t: Type) -> bool:
    """An integer as upstream's typeinfo says "int": not a bool, nor a number pycore prints as text."""
    return isinstance(t, Int) and not isinstance(t, (Bool, TextInt))


#: bpftrace 0.25's type queries (its stdlib/meta.bt: typeinfo(x).base_type, and the literal test): name ->
#: the answer for (the argument's node, its type); folded to a constant where checked
_TYPE_QUERIES: dict[str, Callable[[A.Expr, Type], bool]] = {
    "is_str": lambda e, t: isinstance(t, Str) or isinstance(t, _TEXTS),
    "is_ptr": lambda e, t: isinstance(t, Ptr),
    "is_array": lambda e, t: isinstance(t, Array),
    "is_integer": lambda e, t: _integer_type(t),
    "is_unsigned_integer": lambda e, t: _integer_type(t) and not t.signed,   # type: ignore[attr-defined]
    "is_literal": lambda e, t: isinstance(e, (A.Int, A.Str)),
}


def _integer(t: Type) -> bool:
    """An integer that arithmetic takes: not one printed as text (a strftime() timestamp, a cgroup path)."""
    return isinstance(t, Int) and not isinstance(t, TextInt)


def _is_runtime(e: A.Expr) -> bool:
    return not isinstance(e, (A.Int, A.Positional))


def is_literal(e: A.Expr) -> bool:
    """An integer written in the script: ``4``, ``$1``, ``-1`` (a length known when the script is checked)."""
    if isinstance(e, A.Unary) and e.op == "-":
        e = e.operand
    return isinstance(e, (A.Int, A.Positional))


def _fmt_kind(t: Type) -> str:
    """What a printf argument is, for format checking: 'int', 'str' or 'ptr'."""
    if isinstance(t, Str):
        return "str"
    if isinstance(t, Ptr):
        return "ptr"
    return "int"
