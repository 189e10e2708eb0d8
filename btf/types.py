"""The BTF type model: one small class per kind.

Objects are created by :class:`btf.spec.Spec` only when a type is asked for.
References to other types are kept as ids and resolved on access (``.type``),
so decoding one struct does not decode the graph behind it.
"""

from __future__ import annotations


from .kinds import INT_BOOL, INT_CHAR, INT_SIGNED, Kind

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Iterator

    from .spec import Spec


class Type:
    """Common to every kind: where it lives and what it is called."""

    __slots__ = ("spec", "id", "name")
    kind: Kind = Kind.UNKN

    def __init__(self, spec: Spec, type_id: int, name: str) -> None:
        self.spec = spec
        self.id = type_id
        self.name = name

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<{type(self).__name__}{name} id={self.id}>"


class Void(Type):
    __slots__ = ()
    kind = Kind.UNKN


class _Ref(Type):
    """A kind whose record carries one type id."""

    __slots__ = ("type_id",)

    def __init__(self, spec: Spec, type_id: int, name: str, ref: int) -> None:
        super().__init__(spec, type_id, name)
        self.type_id = ref

    @property
    def type(self) -> Type:
        return self.spec.type(self.type_id)


class Int(Type):
    __slots__ = ("size", "encoding", "bit_offset", "bits")
    kind = Kind.INT

    def __init__(self, spec: Spec, type_id: int, name: str, size: int, word: int) -> None:
        super().__init__(spec, type_id, name)
        self.size = size
        self.encoding = (word >> 24) & 0x0F
        self.bit_offset = (word >> 16) & 0xFF
        self.bits = word & 0xFF

    @property
    def signed(self) -> bool:
        return bool(self.encoding & INT_SIGNED)

    @property
    def is_char(self) -> bool:
        return bool(self.encoding & INT_CHAR)

    @property
    def is_bool(self) -> bool:
        return bool(self.encoding & INT_BOOL)


class Pointer(_Ref):
    __slots__ = ()
    kind = Kind.PTR


class Array(Type):
    __slots__ = ("type_id", "index_type_id", "nelems")
    kind = Kind.ARRAY

    def __init__(self, spec: Spec, type_id: int, elem: int, index: int, nelems: int) -> None:
        super().__init__(spec, type_id, "")
        self.type_id = elem
        self.index_type_id = index
        self.nelems = nelems

    @property
    def type(self) -> Type:
        return self.spec.type(self.type_id)


class Member:
    """A struct or union member; offsets are in bits."""

    __slots__ = ("spec", "name", "type_id", "bit_offset", "bitfield_size")

    def __init__(self, spec: Spec, name: str, type_id: int, bit_offset: int, bitfield_size: int) -> None:
        self.spec = spec
        self.name = name
        self.type_id = type_id
        self.bit_offset = bit_offset
        self.bitfield_size = bitfield_size

    @property
    def type(self) -> Type:
        return self.spec.type(self.type_id)

    def __repr__(self) -> str:
        bf = f":{self.bitfield_size}" if self.bitfield_size else ""
        return f"<Member {self.name!r}{bf} type={self.type_id} off={self.bit_offset}>"


class Composite(Type):
    __slots__ = ("size", "members")

    def __init__(self, spec: Spec, type_id: int, name: str, size: int, members: list[Member]) -> None:
        super().__init__(spec, type_id, name)
        self.size = size
        self.members = members

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members)


class Struct(Composite):
    __slots__ = ()
    kind = Kind.STRUCT


class Union(Composite):
    __slots__ = ()
    kind = Kind.UNION


class EnumValue:
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: int) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"<EnumValue {self.name}={self.value}>"


class Enum(Type):
    __slots__ = ("size", "signed", "values")
    kind = Kind.ENUM

    def __init__(self, spec: Spec, type_id: int, name: str, size: int, signed: bool,
                 values: list[EnumValue]) -> None:
        super().__init__(spec, type_id, name)
        self.size = size
        self.signed = signed
        self.values = values


class Enum64(Enum):
    __slots__ = ()
    kind = Kind.ENUM64


class Fwd(Type):
    __slots__ = ("is_union",)
    kind = Kind.FWD

    def __init__(self, spec: Spec, type_id: int, name: str, is_union: bool) -> None:
        super().__init__(spec, type_id, name)
        self.is_union = is_union


class Typedef(_Ref):
    __slots__ = ()
    kind = Kind.TYPEDEF


class Volatile(_Ref):
    __slots__ = ()
    kind = Kind.VOLATILE


class Const(_Ref):
    __slots__ = ()
    kind = Kind.CONST


class Restrict(_Ref):
    __slots__ = ()
    kind = Kind.RESTRICT


class TypeTag(_Ref):
    """``__attribute__((btf_type_tag("NAME")))``; ``name`` is the tag."""

    __slots__ = ()
    kind = Kind.TYPE_TAG


class Func(_Ref):
    """A function; ``type`` is its FuncProto."""

    __slots__ = ("linkage",)
    kind = Kind.FUNC

    def __init__(self, spec: Spec, type_id: int, name: str, proto: int, linkage: int) -> None:
        super().__init__(spec, type_id, name, proto)
        self.linkage = linkage


class Param:
    __slots__ = ("spec", "name", "type_id")

    def __init__(self, spec: Spec, name: str, type_id: int) -> None:
        self.spec = spec
        self.name = name
        self.type_id = type_id

    @property
    def type(self) -> Type:
        return self.spec.type(self.type_id)

    def __repr__(self) -> str:
        return f"<Param {self.name!r} type={self.type_id}>"


class FuncProto(Type):
    __slots__ = ("return_type_id", "params")
    kind = Kind.FUNC_PROTO

    def __init__(self, spec: Spec, type_id: int, ret: int, params: list[Param]) -> None:
        super().__init__(spec, type_id, "")
        self.return_type_id = ret
        self.params = params

    @property
    def return_type(self) -> Type:
        return self.spec.type(self.return_type_id)

    @property
    def variadic(self) -> bool:
        """C ``...``: BTF ends the parameter list with a nameless void."""
        return bool(self.params) and self.params[-1].type_id == 0 and not self.params[-1].name


class Var(_Ref):
    __slots__ = ("linkage",)
    kind = Kind.VAR

    def __init__(self, spec: Spec, type_id: int, name: str, ref: int, linkage: int) -> None:
        super().__init__(spec, type_id, name, ref)
        self.linkage = linkage


class VarSecinfo:
    __slots__ = ("spec", "type_id", "offset", "size")

    def __init__(self, spec: Spec, type_id: int, offset: int, size: int) -> None:
        self.spec = spec
        self.type_id = type_id
        self.offset = offset
        self.size = size

    @property
    def type(self) -> Type:
        return self.spec.type(self.type_id)


class Datasec(Type):
    __slots__ = ("size", "vars")
    kind = Kind.DATASEC

    def __init__(self, spec: Spec, type_id: int, name: str, size: int, vars: list[VarSecinfo]) -> None:
        super().__init__(spec, type_id, name)
        self.size = size
        self.vars = vars


class Float(Type):
    __slots__ = ("size",)
    kind = Kind.FLOAT

    def __init__(self, spec: Spec, type_id: int, name: str, size: int) -> None:
        super().__init__(spec, type_id, name)
        self.size = size


class DeclTag(_Ref):
    """A tag on a declaration; ``component_idx`` -1 for the whole type."""

    __slots__ = ("component_idx",)
    kind = Kind.DECL_TAG

    def __init__(self, spec: Spec, type_id: int, name: str, ref: int, component_idx: int) -> None:
        super().__init__(spec, type_id, name, ref)
        self.component_idx = component_idx


QUALIFIERS = (Kind.CONST, Kind.VOLATILE, Kind.RESTRICT, Kind.TYPE_TAG)
