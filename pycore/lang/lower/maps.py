"""Lowering of map accesses: keys built in scratch, reads, writes, adds, aggregations, hist buckets.
"""

from __future__ import annotations

from errno import E2BIG, EEXIST, ENOMEM

from pycore.lang import ast as A
from pycore.lang.check import MapInfo
from pycore.lang.check.records import READ_AGGREGATES
from pycore.lang.lower.layout import BPF_ANY, BPF_NOEXIST
from pycore.lang.lower.state import State
from pycore.lang.types import Int, Tuple, Type, is_buffer, width


_POSSIBLE_CPUS: int | None = None


def possible_cpus() -> int:
    """How many CPUs the kernel may have (the per-CPU maps' slots): the highest of
    /sys/devices/system/cpu/possible, plus one, as libbpf counts them."""
    global _POSSIBLE_CPUS
    if _POSSIBLE_CPUS is None:
        try:
            with open("/sys/devices/system/cpu/possible") as f:
                text = f.read().strip()
            _POSSIBLE_CPUS = max(int(r.split("-")[-1]) for r in text.split(",")) + 1
        except (OSError, ValueError):
            import os

            _POSSIBLE_CPUS = os.cpu_count() or 1
    return _POSSIBLE_CPUS


def _kernel_release_text() -> str:
    import os

    return os.uname().release


def _kernel_release() -> tuple[int, int]:
    """The running kernel's (major, minor)."""
    import re

    m = re.match(r"(\d+)\.(\d+)", _kernel_release_text())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


class Maps(State):
    """Map keys and values: plain hashes for ``@m = v``, per-CPU hashes for aggregations."""

    def key(self, ref: A.MapRef, m: MapInfo, extra: int = 0) -> int:
        """Build ``ref``'s key in scratch (plus ``extra`` trailing bytes); returns its offset."""
        e = self.e
        size = m.key_size + extra
        off = self.f.region(size)
        if not ref.keys:
            e.st(8, 8, off, 0)
            return off
        if len(ref.keys) == 1 and isinstance(self.t(ref.keys[0]), Tuple) and len(m.keys or ()) != 1:
            self._tuple_key(ref.keys[0], m, off, size)
            return off
        pos = off
        for k, kt in zip(ref.keys, m.keys or ()):
            if isinstance(kt, Tuple) and isinstance(self.t(k), Tuple):
                self.tuple_into(k, pos, kt)         # laid out as the map's key: widened, a record's order
            elif is_buffer(kt):
                self.string_into(k, pos, kt.size)
            else:
                self.scalar(k)
                e.stx(8, 8, pos, 0)
                self.usym_pid(kt, pos)
            pos += width(kt)
        return off

    def _tuple_key(self, k: A.Expr, m: MapInfo, off: int, size: int) -> None:
        """``@m[$t]``: the tuple built aside, then each element copied to its place in the key (a string
        of the key may be longer than the tuple's: the rest zero)."""
        tt = self.t(k)
        mark = self.f.mark()
        tmp = self.f.region(tt.size)
        self.string_into(k, tmp, tt.size)
        self.zero(off, size)
        pos = off
        for src, et, kt in zip(tt.offsets(), tt.elems, m.keys or ()):
            if isinstance(et, Tuple) and isinstance(kt, Tuple) and et != kt:
                self.zero(pos, width(kt))
                self._relayout(tmp + src, et, pos, kt)
            else:
                self.copy_words(8, tmp + src, pos, min(width(et), width(kt)))
            pos += width(kt)
        self.f.release(mark)

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
        """Update the map; a new key the full map refused (-E2BIG, or -ENOMEM) is counted in this map's
        scratch counter (what ``pycore trace`` warns of and ``serve`` exports). A success costs one
        branch; r0 keeps the helper's result."""
        e = self.e
        e.ld_map(1, self.fds[m.name])
        self._ptr(2, key)
        self._ptr(3, val)
        e.mov_imm(4, flags)
        e.call("map_update_elem")
        done, full = e.label(), e.label()
        e.jmp_imm("jeq", 0, 0, done)
        e.jmp_imm("jeq", 0, -E2BIG, full)
        e.jmp_imm("jne", 0, -ENOMEM, done)      # -EEXIST: another CPU inserted the key meanwhile
        e.place(full)
        off = self.layout.refused_off(m.name)
        e.ldx(8, 1, 8, off)
        e.alu_imm("add", 1, 1)
        e.stx(8, 8, off, 1)
        if self.update_site is not None:    # bpftrace 0.23.2's warning at the statement, each time
            kept = self.f.slot()
            e.stx(8, 10, kept, 0)
            self.helper_error_at(self.update_site, "map_update_elem")
            e.ldx(8, 0, 10, kept)
        e.place(done)

    def map_lookup(self, m: MapInfo, key: int) -> None:
        e = self.e
        e.ld_map(1, self.fds[m.name])
        self._ptr(2, key)
        e.call("map_lookup_elem")

    def lookup_ref(self, ref: A.MapRef, m: MapInfo) -> None:
        """r0 = the address of ``ref``'s value, or NULL: looked up, or the one find() looked up (its
        key computed once, its value the one it found however other CPUs change the map meanwhile)."""
        found = self.found.get(id(ref))
        if found is not None:
            self.e.ldx(8, 0, 10, found)
            return
        self.map_lookup(m, self.key(ref, m))

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
        if m.kind in READ_AGGREGATES:
            self.aggregate_read(ref, m)
            return
        self.lookup_ref(ref, m)
        done = e.label()
        e.jmp_imm("jeq", 0, 0, done)
        e.ldx(8, 0, 0, 0)
        e.place(done)

    def aggregate_read(self, ref: A.MapRef, m: MapInfo) -> None:
        """r0 = the value of a count, sum, min, max or avg map's key, as bpftrace 0.21+ reads it: its
        per-CPU values combined (``bpf_map_lookup_percpu_elem`` for each possible CPU, kernel 5.19+),
        0 when the key is absent; an average is the total divided by the count, truncated toward zero
        as the printed one is. (A plain lookup would give this CPU's value, and an avg's count.)"""
        e = self.e
        if _kernel_release() < (5, 19):
            raise self.error(ref, f"reading {m.name}, a {m.kind}() map, as a value needs Linux 5.19 or newer "
                                  f"(bpf_map_lookup_percpu_elem), as in bpftrace; this kernel is {_kernel_release_text()}")
        self.aggregate_at(ref, m, self.key(ref, m))

    def aggregate_at(self, ref: A.MapRef, m: MapInfo, key: int) -> None:
        """r0 = the combined value of the key at scratch[key] (as :meth:`aggregate_read`)."""
        e = self.e
        if _kernel_release() < (5, 19):
            raise self.error(ref, f"reading {m.name}, a {m.kind}() map, as a value needs Linux 5.19 or newer "
                                  f"(bpf_map_lookup_percpu_elem), as in bpftrace; this kernel is {_kernel_release_text()}")
        i, acc, aux = self.f.slot(), self.f.slot(), self.f.slot()
        e.st(8, 10, i, 0)
        e.st(8, 10, acc, 0)    # the sum, the total, or the min/max so far
        e.st(8, 10, aux, 0)    # avg: the count; min/max: whether acc is set
        top, end, nxt = e.label(), e.label(), e.label()
        e.place(top)
        e.ldx(8, 3, 10, i)
        e.jmp_imm("jge", 3, possible_cpus(), end)
        e.ld_map(1, self.fds[m.name])
        self._ptr(2, key)
        e.call("map_lookup_percpu_elem")
        e.jmp_imm("jeq", 0, 0, end)     # no such key (on CPU 0: on none)
        if m.kind in ("count", "sum"):
            e.ldx(8, 1, 0, 0)
            e.ldx(8, 2, 10, acc)
            e.alu_reg("add", 1, 2)
            e.stx(8, 10, acc, 1)
        elif m.kind == "avg":        # the value is [count, total]
            e.ldx(8, 1, 0, 0)
            e.ldx(8, 2, 10, aux)
            e.alu_reg("add", 1, 2)
            e.stx(8, 10, aux, 1)
            e.ldx(8, 1, 0, 8)
            e.ldx(8, 2, 10, acc)
            e.alu_reg("add", 1, 2)
            e.stx(8, 10, acc, 1)
        else:                        # min, max: [value, set]; a CPU that never set it has set == 0
            take = e.label()
            e.ldx(8, 1, 0, 8)
            e.jmp_imm("jeq", 1, 0, nxt)
            e.ldx(8, 1, 0, 0)
            e.ldx(8, 2, 10, aux)
            e.jmp_imm("jeq", 2, 0, take)
            e.ldx(8, 2, 10, acc)
            e.jmp_reg("jsge" if m.kind == "min" else "jsle", 1, 2, nxt)   # signed, as the updates compare
            e.place(take)
            e.stx(8, 10, acc, 1)
            e.st(8, 10, aux, 1)
        e.place(nxt)
        e.ldx(8, 1, 10, i)
        e.alu_imm("add", 1, 1)
        e.stx(8, 10, i, 1)
        e.ja(top)
        e.place(end)
        e.ldx(8, 0, 10, acc)
        if m.kind == "avg":          # total / count toward zero; a count of 0 (no key) divides to 0
            e.ldx(8, 1, 10, aux)
            neg, done = e.label(), e.label()
            e.jmp_imm("jslt", 0, 0, neg)
            e.alu_reg("div", 0, 1)
            e.ja(done)
            e.place(neg)
            e.alu_imm("neg", 0, 0)
            e.alu_reg("div", 0, 1)
            e.alu_imm("neg", 0, 0)
            e.place(done)

    def map_add(self, ref: A.MapRef, m: MapInfo, from_reg: bool) -> None:
        """@m[k] += r0 (inserting r0 when absent); per-CPU maps need no atomics."""
        e = self.e
        tmp = self.f.slot()
        e.stx(8, 10, tmp, 0)
        key = self.key(ref, m)
        self._add_at(m, key, [(0, tmp)])

    def _add_at(self, m: MapInfo, key: int, adds: list[tuple[int, int]], nwords: int = 1) -> None:
        """value[word] += stack[slot] for each (word, slot) of ``adds``; a new key is inserted with
        those words (the others 0).

        Another CPU can insert the same new key between our lookup and our insert (BPF_NOEXIST:
        -EEXIST); the value is then looked up again and added to, so no count is lost.  bpftrace 0.23.2
        loses it, and warns "File exists" (vfsstat.bt in the 6.12 VM)."""
        e = self.e
        self.map_lookup(m, key)
        have, done = e.label(), e.label()
        e.jmp_imm("jne", 0, 0, have)
        val = self.f.region(8 * nwords)
        slots = dict(adds)
        for i in range(nwords):
            if i in slots:
                e.ldx(8, 1, 10, slots[i])
                e.stx(8, 8, val + 8 * i, 1)
            else:
                e.st(8, 8, val + 8 * i, 0)
        self.map_update(m, key, val, BPF_NOEXIST)
        e.jmp_imm("jne", 0, -EEXIST, done)
        self.map_lookup(m, key)
        e.jmp_imm("jeq", 0, 0, done)        # (deleted again at once: dropped)
        e.place(have)
        for word, slot in adds:
            e.ldx(8, 1, 0, 8 * word)
            e.ldx(8, 2, 10, slot)
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
            self._add_at(m, key, [(0, v)])
        elif n in ("avg", "stats"):
            one = self.f.slot()
            e.st(8, 10, one, 1)
            key = self.key(ref, m)
            # value: [count, total], both added to at once: this CPU's slot of a key that another CPU
            # inserted is [0, 0] (a per-CPU map), and a second look-up keyed on "count == 1" once lost
            # the first value each CPU added (avg 20 for 10, 20, 30, 40 on two CPUs; bpftrace 25)
            self._add_at(m, key, [(0, one), (1, v)], 2)
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
                self.log2_bucket(m.log2_k)
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
            self._add_at(m, key, [(0, one)])
        elif n == "tseries":
            self.tseries(ref, m, v)
        else:
            raise self.error(call, f"{n}() is not supported here")

    def tseries(self, ref: A.MapRef, m: MapInfo, v: int) -> None:
        """@m[k] = tseries(stack[v], interval, num[, agg]) (bpftrace 0.24), as upstream's codegen: the
        interval's number (epoch) is software TAI nanoseconds / interval, its bucket epoch % num after
        the key; the bucket's value is [value, meta, epoch], per CPU. A bucket last set in an earlier
        epoch starts again (for an aggregation); meta is the time of the last value (none), whether a
        value is set (min, max) or how many were added (avg). User space keeps each bucket's latest
        epoch over the CPUs (runtime.tseries_bucket)."""
        e = self.e
        interval, num, agg = m.tseries  # type: ignore[misc]
        now, epoch = self.f.slot(), self.f.slot()
        self.sw_tai_now()  # type: ignore[attr-defined]   # (Calls')
        e.stx(8, 10, now, 0)
        e.ld_imm64(1, interval)
        e.alu_reg("div", 0, 1)
        e.stx(8, 10, epoch, 0)
        key = self.key(ref, m, extra=8)
        e.ldx(8, 0, 10, epoch)
        e.ld_imm64(1, num)
        e.alu_reg("mod", 0, 1)
        e.stx(8, 8, key + m.key_size, 0)
        fresh = self.f.slot()
        e.st(8, 10, fresh, 0)
        self.map_lookup(m, key)
        have, merge = e.label(), e.label()
        e.jmp_imm("jne", 0, 0, have)
        val = self.f.region(24)          # a new bucket: [0, 0, epoch]
        e.st(8, 8, val, 0)
        e.st(8, 8, val + 8, 0)
        e.ldx(8, 1, 10, epoch)
        e.stx(8, 8, val + 16, 1)
        e.st(8, 10, fresh, 1)
        e.mov_reg(0, 8)
        e.alu_imm("add", 0, val)
        e.ja(merge)
        e.place(have)
        if agg:                          # another epoch's bucket: cleared
            e.ldx(8, 1, 0, 16)
            e.ldx(8, 2, 10, epoch)
            e.jmp_reg("jeq", 1, 2, merge)
            e.st(8, 0, 0, 0)
            e.st(8, 0, 8, 0)
        e.place(merge)
        e.ldx(8, 1, 10, v)
        if agg in ("sum", "avg"):
            e.ldx(8, 2, 0, 0)
            e.alu_reg("add", 2, 1)
            e.stx(8, 0, 0, 2)
            if agg == "avg":
                e.ldx(8, 2, 0, 8)
                e.alu_imm("add", 2, 1)
                e.stx(8, 0, 8, 2)
        elif agg in ("min", "max"):
            store, kept = e.label(), e.label()
            e.ldx(8, 2, 0, 8)
            e.jmp_imm("jeq", 2, 0, store)
            e.ldx(8, 2, 0, 0)
            signed = m.value is not None and getattr(m.value, "signed", True)
            keep = {("min", True): "jsge", ("min", False): "jge", ("max", True): "jsle", ("max", False): "jle"}
            e.jmp_reg(keep[(agg, signed)], 1, 2, kept)
            e.place(store)
            e.stx(8, 0, 0, 1)
            e.place(kept)
            e.st(8, 0, 8, 1)
        else:                            # the last value, and when it was set
            e.stx(8, 0, 0, 1)
            e.ldx(8, 1, 10, now)
            e.stx(8, 0, 8, 1)
        e.ldx(8, 1, 10, epoch)
        e.stx(8, 0, 16, 1)
        done = e.label()
        e.ldx(8, 1, 10, fresh)
        e.jmp_imm("jeq", 1, 0, done)
        self.map_update(m, key, val, BPF_ANY)
        e.place(done)

    def log2_bucket(self, k: int = 0) -> None:
        """r0 = hist bucket of r0: 0 negative, 1 zero, 2 + floor(log2 v) above; with ``k``, bpftrace's
        2**k buckets per power of 2 (v + 1 up to 2**k - 1, then 1 + (l + 1 << k) + the k bits after
        the leading 1, l being its position less k)."""
        if k:
            self._log2_split_bucket(k)
            return
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

    def _log2_split_bucket(self, k: int) -> None:
        e = self.e
        mask = (1 << k) - 1
        neg, small, done = e.label(), e.label(), e.label()
        e.jmp_imm("jslt", 0, 0, neg)
        e.jmp_imm("jle", 0, mask, small)
        e.mov_reg(3, 0)             # n0
        e.mov_imm(1, 0)             # r1 = floor(log2 n), by halving steps
        for shift in (32, 16, 8, 4, 2, 1):
            skip = e.label()
            e.mov_reg(2, 0)
            e.alu_imm("rsh", 2, shift)
            e.jmp_imm("jeq", 2, 0, skip)
            e.mov_reg(0, 2)
            e.alu_imm("add", 1, shift)
            e.place(skip)
        e.alu_imm("sub", 1, k)      # l
        e.mov_reg(0, 3)
        e.alu_reg("rsh", 0, 1)
        e.alu_imm("and", 0, mask)   # the k bits after the leading 1
        e.alu_imm("add", 1, 1)
        e.alu_imm("lsh", 1, k)
        e.alu_reg("add", 0, 1)
        e.alu_imm("add", 0, 1)
        e.ja(done)
        e.place(small)
        e.alu_imm("add", 0, 1)
        e.ja(done)
        e.place(neg)
        e.mov_imm(0, 0)
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
