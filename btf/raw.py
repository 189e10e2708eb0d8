"""``bpftool btf dump file FILE format raw``, line for line.

Kept byte-identical to bpftool (v7.1, libbpf 1.1) so that a diff against
bpftool is a test of the whole reader: every field of every record shows up
in this format.
"""

from __future__ import annotations

from . import types as T
from .kinds import Kind

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import TextIO

    from .spec import Spec

# bpftool's btf_kind_str[]: the kind names it prints.
KIND_NAMES = {k: k.name for k in Kind}
KIND_NAMES[Kind.UNKN] = "UNKNOWN"

_INT_ENCODINGS = {0: "(none)", 1: "SIGNED", 2: "CHAR", 4: "BOOL"}
_FUNC_LINKAGE = {0: "static", 1: "global", 2: "extern"}
_VAR_LINKAGE = {0: "static", 1: "global", 2: "extern"}


def _name(name: str) -> str:
    # bpftool prints "(anon)" for name offset 0.  Our types keep the string,
    # not the offset, so an offset pointing at some other empty string (no
    # compiler emits one) would print "(anon)" here but '' in bpftool.
    return name or "(anon)"


def format_type(spec: Spec, t: T.Type) -> str:
    """One type's record as bpftool prints it, without the final newline."""
    k = t.kind
    head = f"[{t.id}] {KIND_NAMES[k]} '{_name(t.name)}'"
    if k == Kind.INT:
        assert isinstance(t, T.Int)
        enc = _INT_ENCODINGS.get(t.encoding, "UNKN")
        return f"{head} size={t.size} bits_offset={t.bit_offset} nr_bits={t.bits} encoding={enc}"
    if k in (Kind.PTR, Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPEDEF, Kind.TYPE_TAG):
        return f"{head} type_id={t.type_id}"  # type: ignore[attr-defined]
    if k == Kind.ARRAY:
        assert isinstance(t, T.Array)
        return f"{head} type_id={t.type_id} index_type_id={t.index_type_id} nr_elems={t.nelems}"
    if k in (Kind.STRUCT, Kind.UNION):
        assert isinstance(t, T.Composite)
        lines = [f"{head} size={t.size} vlen={len(t.members)}"]
        for m in t.members:
            line = f"\t'{_name(m.name)}' type_id={m.type_id} bits_offset={m.bit_offset}"
            if m.bitfield_size:
                line += f" bitfield_size={m.bitfield_size}"
            lines.append(line)
        return "\n".join(lines)
    if k in (Kind.ENUM, Kind.ENUM64):
        assert isinstance(t, T.Enum)
        enc = "SIGNED" if t.signed else "UNSIGNED"
        lines = [f"{head} encoding={enc} size={t.size} vlen={len(t.values)}"]
        suffix = ("LL" if t.signed else "ULL") if k == Kind.ENUM64 else ""
        for v in t.values:
            lines.append(f"\t'{_name(v.name)}' val={v.value}{suffix}")
        return "\n".join(lines)
    if k == Kind.FWD:
        assert isinstance(t, T.Fwd)
        return f"{head} fwd_kind={'union' if t.is_union else 'struct'}"
    if k == Kind.FUNC:
        assert isinstance(t, T.Func)
        return f"{head} type_id={t.type_id} linkage={_FUNC_LINKAGE.get(t.linkage, '(unknown)')}"
    if k == Kind.FUNC_PROTO:
        assert isinstance(t, T.FuncProto)
        lines = [f"{head} ret_type_id={t.return_type_id} vlen={len(t.params)}"]
        for p in t.params:
            lines.append(f"\t'{_name(p.name)}' type_id={p.type_id}")
        return "\n".join(lines)
    if k == Kind.VAR:
        assert isinstance(t, T.Var)
        # The comma is bpftool's.
        return f"{head} type_id={t.type_id}, linkage={_VAR_LINKAGE.get(t.linkage, '(unknown)')}"
    if k == Kind.DATASEC:
        assert isinstance(t, T.Datasec)
        lines = [f"{head} size={t.size} vlen={len(t.vars)}"]
        count = len(spec)
        for v in t.vars:
            line = f"\ttype_id={v.type_id} offset={v.offset} size={v.size}"
            if v.type_id < count:
                line += f" ({KIND_NAMES[spec.kind(v.type_id)]} '{_name(spec.name(v.type_id))}')"
            lines.append(line)
        return "\n".join(lines)
    if k == Kind.FLOAT:
        assert isinstance(t, T.Float)
        return f"{head} size={t.size}"
    if k == Kind.DECL_TAG:
        assert isinstance(t, T.DeclTag)
        return f"{head} type_id={t.type_id} component_idx={t.component_idx}"
    return head


def dump_raw(spec: Spec, out: TextIO) -> None:
    """Every type of ``spec`` (not its base's, for split BTF) in id order."""
    batch: list[str] = []
    for t in spec:
        batch.append(format_type(spec, t))
        if len(batch) >= 4096:
            batch.append("")
            out.write("\n".join(batch))
            batch = []
    if batch:
        batch.append("")
        out.write("\n".join(batch))
