"""Unwinding a copied user stack with the call frame information of ``.eh_frame``.

Code built without frame pointers (Debian's python3.11, most distributions'
libraries) leaves the kernel's frame-pointer walk lost past the leaf.  The
BPF program also copies the top of the user stack with the user registers
(ip, sp, bp); here each frame's rule is looked up in its file's
``.eh_frame`` (through ``.eh_frame_hdr``'s sorted table, one FDE parsed at a
time and kept), the CFA computed from sp or bp, and the return address and
the caller's bp read from the copy: what perf's ``--call-graph dwarf`` does.
x86-64 only (registers 6 rbp, 7 rsp, 16 the return address).  Anything not
understood (a CFA expression, an address outside the copy) ends the walk.
"""

from __future__ import annotations

import bisect
import struct

from pycore.profile.symbols import ByIdentity

__all__ = ["END", "STOPS", "Cfi", "cfi_for", "unwind"]

_RBP, _RSP, _RA = 6, 7, 16


def _uleb(d: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = d[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _sleb(d: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = d[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if b & 0x40:
                v -= 1 << shift
            return v, i


def _ptr(d: bytes, i: int, enc: int, addr: int) -> tuple[int, int]:
    """A DW_EH_PE-encoded pointer at d[i] (``addr``: the link-time address of d[0])."""
    fmt = enc & 0x0F
    if fmt == 0x0B:
        v, n = struct.unpack_from("<i", d, i)[0], 4
    elif fmt == 0x03:
        v, n = struct.unpack_from("<I", d, i)[0], 4
    elif fmt in (0x00, 0x04):
        v, n = struct.unpack_from("<Q", d, i)[0], 8
    elif fmt == 0x0C:
        v, n = struct.unpack_from("<q", d, i)[0], 8
    elif fmt == 0x02:
        v, n = struct.unpack_from("<H", d, i)[0], 2
    elif fmt == 0x0A:
        v, n = struct.unpack_from("<h", d, i)[0], 2
    elif fmt == 0x01:
        return _uleb(d, i)
    elif fmt == 0x09:
        return _sleb(d, i)
    else:
        raise ValueError(f"pointer encoding {enc:#x}")
    if enc & 0x70 == 0x10:          # pcrel
        v += addr + i
    return v, i + n


class Cfi:
    """One file's ``.eh_frame``: the rule for a link-time pc as (cfa register, cfa offset,
    return address offset from the CFA, rbp offset from the CFA or None)."""

    def __init__(self, frame: bytes, frame_addr: int, hdr: bytes, hdr_addr: int) -> None:
        self.frame, self.frame_addr = frame, frame_addr
        self.starts: list[int] = []
        self.fdes: list[int] = []
        self._rules: dict[int, list] = {}
        self._cies: dict[int, tuple] = {}
        if len(hdr) < 4 or hdr[0] != 1:
            return
        eh_enc, count_enc, table_enc = hdr[1], hdr[2], hdr[3]
        i = 4
        _, i = _ptr(hdr, i, eh_enc, hdr_addr)
        count, i = _ptr(hdr, i, count_enc, hdr_addr)
        if table_enc != 0x3B:       # datarel | sdata4: what every linker writes
            return
        rows = struct.unpack_from(f"<{2 * count}i", hdr, i)
        self.starts = [hdr_addr + rows[2 * k] for k in range(count)]
        self.fdes = [hdr_addr + rows[2 * k + 1] - frame_addr for k in range(count)]

    def _cie(self, off: int) -> tuple:
        cie = self._cies.get(off)
        if cie is None:
            d = self.frame
            length = struct.unpack_from("<I", d, off)[0]
            end = off + 4 + length
            i = off + 8
            i += 1                                   # version
            aug_end = d.index(b"\0", i)
            aug = d[i:aug_end].decode()
            i = aug_end + 1
            code_align, i = _uleb(d, i)
            data_align, i = _sleb(d, i)
            _ra, i = _uleb(d, i)
            enc = 0
            if aug.startswith("z"):
                n, i = _uleb(d, i)
                j = i
                for c in aug[1:]:
                    if c == "R":
                        enc = d[j]
                        j += 1
                    elif c == "P":
                        penc = d[j]
                        _, j = _ptr(d, j + 1, penc, self.frame_addr)
                    elif c == "L":
                        j += 1
                i += n
            cie = self._cies[off] = (code_align, data_align, enc, d[i:end], aug.startswith("z"))
        return cie

    def rule(self, pc: int) -> tuple[int, int, int, int | None] | None:
        k = bisect.bisect_right(self.starts, pc) - 1
        if k < 0:
            return None
        rows = self._rules.get(k)
        if rows is None:
            try:
                rows = self._rules[k] = self._parse(self.fdes[k])
            except (ValueError, IndexError, struct.error):
                rows = self._rules[k] = []
        if not rows or not rows[0][0] <= pc < rows[-1][0]:
            return None
        idx = bisect.bisect_right([r[0] for r in rows], pc) - 1
        return rows[idx][1]

    def _parse(self, off: int) -> list:
        """The FDE at ``off`` run into rows: (pc, rule) sorted, the last row's pc the end."""
        d = self.frame
        length = struct.unpack_from("<I", d, off)[0]
        end = off + 4 + length
        cie_ptr = struct.unpack_from("<I", d, off + 4)[0]
        code_align, data_align, enc, init, zaug = self._cie(off + 4 - cie_ptr)
        i = off + 8
        start, i = _ptr(d, i, enc, self.frame_addr)
        size, i = _ptr(d, i, enc & 0x0F, self.frame_addr)
        if zaug:
            n, i = _uleb(d, i)
            i += n
        state = {"cfa": (_RSP, 8), _RA: -8, _RBP: None}
        initial = dict(state)
        rows: list = []
        loc = start
        stack: list = []

        def emit() -> None:
            cfa = state["cfa"]
            rule = None if cfa is None else (cfa[0], cfa[1], state[_RA], state[_RBP])
            if rows and rows[-1][0] == loc:
                rows[-1] = (loc, rule)
            else:
                rows.append((loc, rule))

        for prog, is_init in ((init, True), (d[i:end], False)):
            j = 0
            while j < len(prog):
                op = prog[j]
                j += 1
                hi, low = op & 0xC0, op & 0x3F
                if hi == 0x40:
                    emit()
                    loc += low * code_align
                elif hi == 0x80:
                    v, j = _uleb(prog, j)
                    if low in (_RA, _RBP):
                        state[low] = v * data_align
                elif hi == 0xC0:
                    if low in (_RA, _RBP):
                        state[low] = initial[low]
                elif op == 0x00:
                    pass
                elif op in (0x02, 0x03, 0x04):
                    emit()
                    n = {0x02: 1, 0x03: 2, 0x04: 4}[op]
                    loc += int.from_bytes(prog[j:j + n], "little") * code_align
                    j += n
                elif op in (0x05, 0x11):
                    reg, j = _uleb(prog, j)
                    v, j = (_uleb if op == 0x05 else _sleb)(prog, j)
                    if reg in (_RA, _RBP):
                        state[reg] = v * data_align
                elif op in (0x06, 0x07, 0x08):
                    reg, j = _uleb(prog, j)
                    if reg in (_RA, _RBP):
                        state[reg] = initial[reg] if op == 0x06 else None
                elif op == 0x09:
                    reg, j = _uleb(prog, j)
                    _, j = _uleb(prog, j)
                    if reg in (_RA, _RBP):
                        state[reg] = None
                elif op == 0x0A:
                    stack.append(dict(state))
                elif op == 0x0B:
                    state = stack.pop() if stack else state
                elif op == 0x0C:
                    reg, j = _uleb(prog, j)
                    v, j = _uleb(prog, j)
                    state["cfa"] = (reg, v)
                elif op == 0x0D:
                    reg, j = _uleb(prog, j)
                    state["cfa"] = (reg, state["cfa"][1] if state["cfa"] else 0)
                elif op == 0x0E:
                    v, j = _uleb(prog, j)
                    state["cfa"] = (state["cfa"][0] if state["cfa"] else _RSP, v)
                elif op == 0x12:
                    reg, j = _uleb(prog, j)
                    v, j = _sleb(prog, j)
                    state["cfa"] = (reg, v * data_align)
                elif op == 0x13:
                    v, j = _sleb(prog, j)
                    state["cfa"] = (state["cfa"][0] if state["cfa"] else _RSP, v * data_align)
                elif op == 0x0F:
                    n, j = _uleb(prog, j)
                    j += n
                    state["cfa"] = None                  # an expression: not followed
                elif op in (0x10, 0x16):
                    reg, j = _uleb(prog, j)
                    n, j = _uleb(prog, j)
                    j += n
                    if reg in (_RA, _RBP):
                        state[reg] = None
                elif op in (0x14, 0x15):
                    reg, j = _uleb(prog, j)
                    _, j = (_uleb if op == 0x14 else _sleb)(prog, j)
                    if reg in (_RA, _RBP):
                        state[reg] = None
                elif op == 0x2E:
                    _, j = _uleb(prog, j)
                elif op == 0x2F:
                    reg, j = _uleb(prog, j)
                    v, j = _uleb(prog, j)
                    if reg in (_RA, _RBP):
                        state[reg] = -v * data_align
                else:
                    raise ValueError(f"CFA op {op:#x}")
            if is_init:
                initial = dict(state)
        emit()
        loc = start + size
        rows.append((loc, None))
        return rows


def _read_cfi(path: str) -> Cfi | None:
    from pycore.elf.file import ElfFile

    try:
        with ElfFile(path) as f:
            frame, hdr = f.elf.get_section_by_name(".eh_frame"), f.elf.get_section_by_name(".eh_frame_hdr")
            if frame is None or hdr is None:
                return None
            return Cfi(frame.data(), frame["sh_addr"], hdr.data(), hdr["sh_addr"])
    except Exception:  # noqa: BLE001 - a file we cannot read unwinds nothing: the walk stops there
        return None


_CFIS: ByIdentity[Cfi | None] = ByIdentity(_read_cfi, 128)


def cfi_for(path: str) -> Cfi | None:
    """``path``'s .eh_frame, read once per file version, whatever path it is reached by."""
    return _CFIS(path)


#: why :func:`unwind` stopped short of the outermost frame (``END``: it did not; the others are the
#: failures pycore serve --profile counts, pycore_profile_unwind_failures_total{reason="native_..."})
END = "end"
STOPS = ("no_mapping", "no_cfi", "cfa_rule", "outside_copy", "not_outwards", "depth_limit")


def _rule_at(locate, key: int):  # noqa: ANN001, ANN202
    """The .eh_frame rule of the code at ``key``, or why there is none (no_mapping, no_cfi)."""
    where = locate(key)
    if where is None:
        return "no_mapping"                    # the vDSO, a JIT, anonymous memory
    cfi = cfi_for(where[0])
    rule = cfi.rule(where[1]) if cfi is not None else None
    return "no_cfi" if rule is None else rule


def unwind(locate, ip: int, sp: int, bp: int, stack: bytes, limit: int = 127,  # noqa: ANN001
           rules: dict | None = None) -> tuple[list[int], str]:
    """Return addresses from ``ip`` outwards and why the walk ended (:data:`END`, the outermost frame,
    or one of :data:`STOPS`).  ``locate(addr)`` gives (path, link-time address) or None; ``stack`` is
    the copy of user memory from ``sp``; ``rules``, the process's pc -> rule (or stop) found so far
    (kept by the caller while the process's mappings stay: an off-CPU profile unwinds thousands of
    records a second through the same few pcs)."""
    base, pcs, pc = sp, [ip], ip
    for depth in range(limit):
        key = pc if depth == 0 else pc - 1
        rule = rules.get(key) if rules is not None else None
        if rule is None:
            rule = _rule_at(locate, key)
            if rules is not None:
                rules[key] = rule
        if isinstance(rule, str):
            return pcs, rule
        reg, off, ra_off, bp_off = rule
        if reg == _RSP:
            cfa = sp + off
        elif reg == _RBP:
            cfa = bp + off
        else:
            return pcs, "cfa_rule"

        def read(addr: int) -> int | None:
            k = addr - base
            return struct.unpack_from("<Q", stack, k)[0] if 0 <= k <= len(stack) - 8 else None

        if ra_off is None:
            return pcs, END                    # the return address undefined: _start, a thread's start
        ra = read(cfa + ra_off)
        if ra is None:
            return pcs, "outside_copy"
        if not ra:
            return pcs, END
        if bp_off is not None:
            new_bp = read(cfa + bp_off)
            if new_bp is None:
                return pcs, "outside_copy"
            bp = new_bp
        if cfa <= sp:
            return pcs, "not_outwards"
        sp, pc = cfa, ra
        pcs.append(ra)
    return pcs, "depth_limit"
