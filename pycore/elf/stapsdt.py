"""SystemTap SDT (USDT) notes and their argument specs.

``sys/sdt.h`` records each probe as an ELF note (owner ``stapsdt``, type 3)
in ``.note.stapsdt``: three addresses (the probe's location, the link-time
address of ``.stapsdt.base``, the semaphore or 0) followed by three strings
(provider, name, argument specs such as ``-4@-140(%rbp) 8@%rax``).

Parsing is pure (bytes and strings in, tuples out) so that it can be fuzzed;
:func:`parse_notes` and :func:`parse_arg` raise :class:`UsdtError` and
nothing else.  The argument syntax is the GNU assembler's AT&T operands that
``sdt.h`` asks the compiler to fill in (the ``"nor"`` constraint), so every
x86-64 form gcc and clang emit is covered: registers of every width,
``off(%reg)``, SIB ``off(%base,%index,scale)``, ``$imm`` and ``%rip``-relative
globals ``sym+off(%rip)``.
"""

from __future__ import annotations

import re
import struct

from pycore.errors import ElfError
from pycore.record import field, record  # not dataclasses: pycore trace's uprobes import it (bench_trace --only dwarf)

__all__ = ["UsdtError", "Arg", "Note", "parse_notes", "parse_args", "parse_arg",
           "REGISTERS", "NT_STAPSDT"]

NT_STAPSDT = 3
MAX_ARGS = 12


class UsdtError(ElfError):
    """A USDT note, argument spec, probe or target that cannot be used (one line)."""


# x86-64 register names -> (canonical 64-bit register, byte shift within it).
# %ah..%dh are bits 8..15 of their register: shift 1.
REGISTERS: dict[str, tuple[str, int]] = {}
for _r in ("ax", "bx", "cx", "dx"):
    for _n in (f"r{_r}", f"e{_r}", _r, f"{_r[0]}l"):
        REGISTERS[_n] = (f"r{_r}", 0)
    REGISTERS[f"{_r[0]}h"] = (f"r{_r}", 1)
for _r in ("si", "di", "bp", "sp"):
    for _n in (f"r{_r}", f"e{_r}", _r, f"{_r}l"):
        REGISTERS[_n] = (f"r{_r}", 0)
for _i in range(8, 16):
    for _sfx in ("", "d", "w", "b", "l"):  # %r8b and %r8l both spell the low byte
        REGISTERS[f"r{_i}{_sfx}"] = (f"r{_i}", 0)
REGISTERS["rip"] = ("rip", 0)
REGISTERS["eip"] = ("rip", 0)
del _r, _n, _i, _sfx


@record(frozen=True)
class Arg:
    """One decoded argument spec.

    ``kind`` is ``const`` (``value``), ``reg`` (``reg``), ``mem`` (memory at
    ``offset(reg)``), ``sib`` (memory at ``offset(reg,index,scale)``) or
    ``rip`` (memory at ``symbol+offset`` relative to %rip, i.e. a global).
    ``reg``/``index`` are canonical 64-bit names (``rax``, ``r12``);
    ``shift`` is 1 for %ah-style high-byte registers.
    """

    text: str
    size: int
    signed: bool
    kind: str
    reg: str = ""
    shift: int = 0
    offset: int = 0
    index: str = ""
    scale: int = 1
    symbol: str = ""
    value: int = 0

    def describe(self) -> str:
        """``4-byte signed, memory at -140(%rbp)``: what bcc's tplist -vv says, shorter."""
        what = f"{self.size}-byte {'signed' if self.signed else 'unsigned'}"
        if self.kind == "const":
            where = f"constant {self.value}"
        elif self.kind == "reg":
            where = f"register %{self.reg}" + (" bits 8-15" if self.shift else "")
        elif self.kind == "mem":
            where = f"memory at %{self.reg}{self.offset:+d}"
        elif self.kind == "sib":
            where = f"memory at %{self.reg}+%{self.index}*{self.scale}{self.offset:+d}"
        else:
            where = f"memory at global {self.symbol}{self.offset:+d}" if self.symbol \
                else f"memory at %rip{self.offset:+d}"
        return f"{what}, {where}"


@record(frozen=True)
class Note:
    """One probe location as recorded: addresses are link-time virtual addresses."""

    provider: str
    name: str
    location: int
    base: int
    semaphore: int
    args_text: str
    args: tuple[Arg, ...] = field(default=())


_INT = r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)"
_SYM = r"[A-Za-z_.$][A-Za-z0-9_.$@]*"
_RE_REG = re.compile(r"%([a-z0-9]+)")
_RE_IMM = re.compile(rf"\$({_INT})")
_RE_MEM = re.compile(rf"({_INT})?\(%([a-z0-9]+)\)")
_RE_SIB = re.compile(rf"({_INT})?\((%[a-z0-9]+)?,%([a-z0-9]+)(?:,({_INT}))?\)")
# sym, sym+off, sym-off, off+sym, off (%rip)
_RE_RIP = re.compile(rf"(?:({_SYM})({_INT})?|({_INT})\+({_SYM})|({_INT}))\(%rip\)")


def _int(text: str) -> int:
    return int(text, 0) if not re.fullmatch(r"[-+]?0\d+", text) else int(text, 10)


def _reg(name: str, spec: str) -> tuple[str, int]:
    try:
        return REGISTERS[name]
    except KeyError:
        raise UsdtError(f"argument {spec!r}: unknown register %{name}") from None


def parse_arg(spec: str) -> Arg:
    """Decode one ``SIZE@OPERAND`` spec (``-4@-140(%rbp)``, ``8@%rax``, ...)."""
    if not isinstance(spec, str):
        raise UsdtError(f"argument spec must be a string, not {type(spec).__name__}")
    m = re.fullmatch(r"(-?)(\d{1,2})@(.+)", spec)
    if m is None:
        # sdt.h without a size prefix (very old gcc): assume a signed long
        if not spec or "@" in spec:
            raise UsdtError(f"argument {spec!r}: expected SIZE@OPERAND, e.g. 8@%rax")
        signed, size, op = True, 8, spec
    else:
        signed, size, op = m.group(1) == "-", int(m.group(2)), m.group(3)
        if size not in (1, 2, 4, 8):
            raise UsdtError(f"argument {spec!r}: size {size} is not 1, 2, 4 or 8")
    common = {"text": spec, "size": size, "signed": signed}
    try:
        if (r := _RE_IMM.fullmatch(op)):
            return Arg(kind="const", value=_int(r.group(1)), **common)
        if (r := _RE_REG.fullmatch(op)):
            reg, shift = _reg(r.group(1), spec)
            if reg == "rip":
                raise UsdtError(f"argument {spec!r}: %rip itself is not a probe argument")
            return Arg(kind="reg", reg=reg, shift=shift, **common)
        if (r := _RE_RIP.fullmatch(op)):
            if r.group(1):
                sym, off = r.group(1), _int(r.group(2)) if r.group(2) else 0
            elif r.group(4):
                sym, off = r.group(4), _int(r.group(3))
            else:
                sym, off = "", _int(r.group(5))
            return Arg(kind="rip", symbol=sym, offset=off, **common)
        if (r := _RE_MEM.fullmatch(op)):
            reg, shift = _reg(r.group(2), spec)
            if shift or reg == "rip":
                raise UsdtError(f"argument {spec!r}: %{r.group(2)} cannot address memory")
            return Arg(kind="mem", reg=reg, offset=_int(r.group(1)) if r.group(1) else 0, **common)
        if (r := _RE_SIB.fullmatch(op)):
            base = _reg(r.group(2)[1:], spec)[0] if r.group(2) else ""
            index = _reg(r.group(3), spec)[0]
            scale = _int(r.group(4)) if r.group(4) else 1
            if scale not in (1, 2, 4, 8):
                raise UsdtError(f"argument {spec!r}: scale {scale} is not 1, 2, 4 or 8")
            if "rip" in (base, index) or index == "rsp":
                raise UsdtError(f"argument {spec!r}: invalid base or index register")
            return Arg(kind="sib", reg=base, index=index, scale=scale,
                       offset=_int(r.group(1)) if r.group(1) else 0, **common)
    except ValueError as e:  # int() of something the regexes let through
        if isinstance(e, UsdtError):
            raise
        raise UsdtError(f"argument {spec!r}: {e}") from None
    raise UsdtError(f"argument {spec!r}: operand {op!r} is not a register, memory or $constant")


def parse_args(text: str) -> tuple[Arg, ...]:
    """All specs of one probe (space-separated)."""
    specs = text.split()
    if len(specs) > MAX_ARGS:
        raise UsdtError(f"{len(specs)} arguments in {text[:60]!r}... (USDT allows at most {MAX_ARGS})")
    return tuple(parse_arg(s) for s in specs)


def _cstr(data: bytes, pos: int, what: str) -> tuple[str, int]:
    end = data.find(b"\0", pos)
    if end < 0:
        raise UsdtError(f"truncated stapsdt note: {what} has no terminating NUL")
    try:
        return data[pos:end].decode("ascii"), end + 1
    except UnicodeDecodeError:
        raise UsdtError(f"malformed stapsdt note: {what} is not ASCII") from None


def parse_notes(data: bytes, elfclass: int = 64, little_endian: bool = True,
                decode_args: bool = True) -> list[Note]:
    """Every ``stapsdt`` note in the raw contents of a ``.note.stapsdt`` section.

    Notes of other owners or types are skipped, as readelf does.  With
    ``decode_args`` the specs are parsed too (raising on a bad one).
    """
    if elfclass not in (32, 64):
        raise UsdtError(f"ELF class {elfclass} is neither 32 nor 64")
    end = "<" if little_endian else ">"
    addr_fmt = end + ("QQQ" if elfclass == 64 else "III")
    addr_size = struct.calcsize(addr_fmt)
    notes: list[Note] = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 12:
            raise UsdtError(f"truncated note header at offset {pos:#x} ({n - pos} bytes left)")
        namesz, descsz, ntype = struct.unpack_from(end + "III", data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        next_at = desc_at + ((descsz + 3) & ~3)
        if desc_at + descsz > n:
            raise UsdtError(f"truncated note at offset {pos:#x}: needs {desc_at + descsz - pos} bytes, "
                            f"{n - pos} left")
        owner = data[name_at:name_at + namesz].rstrip(b"\0")
        pos = next_at
        if owner != b"stapsdt" or ntype != NT_STAPSDT:
            continue
        desc = data[desc_at:desc_at + descsz]
        if len(desc) < addr_size:
            raise UsdtError(f"truncated stapsdt note at offset {name_at - 12:#x}: "
                            f"{len(desc)}-byte descriptor")
        location, base, sema = struct.unpack_from(addr_fmt, desc, 0)
        provider, p = _cstr(desc, addr_size, "provider")
        name, p = _cstr(desc, p, "probe name")
        args_text, p = _cstr(desc, p, "argument specs") if p < len(desc) else ("", p)
        if not provider or not name:
            raise UsdtError(f"malformed stapsdt note at offset {name_at - 12:#x}: empty provider or name")
        args = parse_args(args_text) if decode_args else ()
        notes.append(Note(provider, name, location, base, sema, args_text, args))
    return notes
