"""print-args FUNC: bpftrace's ``print(args)`` for any kernel function with BTF::

    { .file = 0xffff88a79ffa6900, .buf = 0x7f77b8ff9730, .count = 8, .pos = 0xffffc900268f7ef8 }

One precompiled fentry program, retargeted at FUNC with set_attach_target()
before load; the arguments arrive raw and are named and formatted here from
the kernel's BTF.  ``--deref ARG`` also copies the struct that argument
points to (its size from BTF, passed as .rodata) and prints its fields,
nested structs included.  Needs fentry: there is no general fallback (a
tracepoint only exists where the kernel put one).
"""

from __future__ import annotations

import struct
import dataclasses
from typing import Any

from pycore.tools.api import Method, Option, OptionError, Tool


def _strip(t: Any) -> Any:
    from btf.kinds import Kind

    while t.kind in (Kind.TYPEDEF, Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG):
        t = t.type
    return t


def format_value(t: Any, data: bytes, off: int = 0) -> str:
    """A value of BTF type ``t`` at ``data[off:]``, as bpftrace's print() writes it."""
    from btf.kinds import Kind

    t = _strip(t)
    k = t.kind
    if k == Kind.PTR:
        return hex(int.from_bytes(data[off:off + 8], "little"))
    if k == Kind.INT:
        return str(int.from_bytes(data[off:off + t.size], "little", signed=t.signed if hasattr(t, "signed")
                                  else bool(getattr(t, "encoding", 0) & 1)))
    if k in (Kind.ENUM, Kind.ENUM64):
        v = int.from_bytes(data[off:off + t.size], "little")
        return next((e.name for e in t.values if e.value == v), str(v))
    if k == Kind.STRUCT:
        parts = []
        for m in t.members:
            if m.bitfield_size:
                word = int.from_bytes(data[off + m.bit_offset // 8 // 8 * 8:][:8], "little")
                v = word >> (m.bit_offset % 64) & ((1 << m.bitfield_size) - 1)
                parts.append(f".{m.name} = {v}")
            elif m.name:
                parts.append(f".{m.name} = {format_value(m.type, data, off + m.bit_offset // 8)}")
        return "{ " + ", ".join(parts) + " }"
    if k == Kind.ARRAY:
        elem = _strip(t.spec.type(t.type_id))
        size = getattr(elem, "size", 0)
        if elem.kind == Kind.INT and size == 1:
            raw = data[off:off + t.nelems]
            return '"' + raw.split(b"\0", 1)[0].decode(errors="replace") + '"'
        if not size:
            return "[]"
        return "[" + ", ".join(format_value(elem, data, off + i * size) for i in range(min(t.nelems, 16))) + "]"
    return ""  # unions and the rest: bpftrace prints them empty too


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Event:
    """One call: the raw 64-bit arguments, and the bytes *ARG points to: one event (``struct args_event``), as ``open_tool`` yields it."""

    pid: int = 0
    nargs: int = 0
    args: list[int] = dataclasses.field(default_factory=lambda: [0] * 16)
    deref_len: int = 0
    pad: int = 0
    deref: bytes = bytes(4096)


class PrintArgs(Tool):
    name = "print-args"
    description = "print(args) of any kernel function with BTF (fentry), optionally *ARG's struct"
    object = "print_args"
    methods = (Method("fentry/FUNC", ("print_args_entry",), "fentry"),)
    event = "args_event"
    event_type = Event

    options = (
        Option("func", str, help="kernel function (from BTF)", positional=True, metavar="FUNC"),
        Option("deref", str, help="also print the struct this pointer argument points to", metavar="ARG"),
    )

    def configure(self, obj, method: Method) -> None:
        import btf
        from btf.kinds import Kind

        spec = btf.load_kernel_spec()
        ids = spec.ids_named(self.args.func, (Kind.FUNC,))
        if not ids:
            raise OptionError(self.name, "func", f"option 'func': {self.args.func} is not in this kernel's BTF",
                              f"{self.args.func} is not in this kernel's BTF")
        self.params = spec.type(spec.type(ids[0]).type_id).params
        self.deref_type = None
        if self.args.deref:
            names = [p.name for p in self.params]
            if self.args.deref not in names:
                raise self.options[1].error(self.name, f"is {self.args.deref!r}, which is no argument of "
                                                       f"{self.args.func} (it has {', '.join(names)})")
            i = names.index(self.args.deref)
            ptr = _strip(self.params[i].type)
            if ptr.kind != Kind.PTR:
                raise self.options[1].error(self.name, f"is {self.args.deref!r}, which is not a pointer")
            self.deref_type = _strip(ptr.type)
            obj.globals["deref_arg"] = i
            obj.globals["deref_size"] = getattr(self.deref_type, "size", 0)
        obj.programs["print_args_entry"].set_attach_target(self.args.func)

    def format_event(self, ev: Any) -> str:
        raw = b"".join(struct.pack("<Q", a) for a in ev.args)
        line = "{ " + ", ".join(f".{p.name} = {format_value(p.type, raw, 8 * i)}"
                                for i, p in enumerate(self.params)) + " }"
        if self.deref_type is not None and ev.deref_len:
            line += "\n" + format_value(self.deref_type, bytes(ev.deref[:ev.deref_len]))
        return line

    def event_json(self, ev: Any) -> dict[str, Any]:
        return {"pid": ev.pid, "args": {p.name: ev.args[i] for i, p in enumerate(self.params)}}


TOOL = PrintArgs
