"""What a generated skeleton (``pycore skel``) subclasses: a thin typed face over BpfObject and RingBuffer.

A generated module declares, for one object, a :class:`Skeleton` subclass
and one namespace class per part (``progs``, ``maps``, ``rodata``, ``bss``,
``data``, ``rings``) whose attributes are descriptors typed with the object's
BTF: :class:`Var` (a global), :class:`MapAttr` (a :class:`TypedMap`),
:class:`RingAttr` (a :class:`TypedRing`), :class:`ProgAttr` (a Program).
The descriptors give mypy the types; at run time they check the types of
what is assigned (TypeError) and a namespace names what exists when asked
for what does not (AttributeError). Loading, globals, maps and rings are
BpfObject's, Globals', Map's and RingBuffer's own: nothing is loaded twice.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Generic, Self, TypeVar, overload

from pycore.native.maps import Map
from pycore.native.object import BpfObject, Link, Program
from pycore.native.ringbuf import RingBuffer

TYPE_CHECKING = False

__all__ = ["Skeleton", "Namespace", "Section", "Var", "ProgAttr", "MapAttr", "PlainMapAttr", "RingAttr",
           "TypedMap", "PerCpuMap", "TypedRing"]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
E = TypeVar("E")


def _type_names(types: tuple[type, ...]) -> str:
    return " | ".join(t.__name__ for t in types)


def _check(value: object, types: tuple[type, ...], what: str) -> None:
    if types and not isinstance(value, types):
        raise TypeError(f"{what} is {_type_names(types)}, not {type(value).__name__} ({value!r:.60})")


class Namespace:
    """One part of a skeleton (``skel.maps``, ``skel.rodata`` ...): its attributes are the object's names."""

    __slots__ = ("_skel_",)
    _PART: ClassVar[str] = ""
    _skel_: Skeleton

    def __init__(self, skel: Skeleton) -> None:
        object.__setattr__(self, "_skel_", skel)

    @classmethod
    def names(cls) -> list[str]:
        """The attribute names this part has, in the object's order."""
        return _attr_names(cls)

    def _unknown(self, name: str) -> AttributeError:
        skel = self._skel_
        return AttributeError(f"{type(skel).__name__}.{self._PART} has no {name!r} ({skel.obj.name}); "
                              f"it has: {', '.join(_attr_names(type(self))) or 'nothing'}")

    if not TYPE_CHECKING:  # mypy: a misspelled name must stay an error, not Any
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            raise self._unknown(name)

    def __setattr__(self, name: str, value: object) -> None:
        if name not in _attr_names(type(self)):
            raise self._unknown(name)
        object.__setattr__(self, name, value)  # a Var's __set__, or AttributeError for read-only ones

    def __dir__(self) -> list[str]:
        return _attr_names(type(self))

    def __repr__(self) -> str:
        return f"<{type(self._skel_).__name__}.{self._PART}: {', '.join(_attr_names(type(self)))}>"


def _attr_names(cls: type) -> list[str]:
    """The generated attributes of a namespace class (a C name may shadow ``names()``; this stays)."""
    return [n for c in reversed(cls.__mro__) for n, v in vars(c).items()
            if isinstance(v, (Var, ProgAttr, MapAttr, PlainMapAttr, RingAttr))]


class Section(Namespace):
    """A data section's variables: ``.rodata`` (set before load), ``.bss``/``.data`` (live after load)."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        """Every variable of the section and its value."""
        return {n: getattr(self, n) for n in _attr_names(type(self))}


class Var(Generic[T]):
    """A global variable of the object: reads and writes go through ``BpfObject.globals``."""

    __slots__ = ("name", "types", "__orig_class__")

    def __init__(self, name: str, *types: type) -> None:
        self.name = name
        self.types = types

    @overload
    def __get__(self, ns: None, owner: type) -> Var[T]: ...
    @overload
    def __get__(self, ns: Section, owner: type) -> T: ...

    def __get__(self, ns: Section | None, owner: type) -> Var[T] | T:
        if ns is None:
            return self
        value: T = ns._skel_.obj.globals[self.name]
        return value

    def __set__(self, ns: Section, value: T) -> None:
        _check(value, self.types, f"{ns._PART}.{self.name}")
        ns._skel_.obj.globals[self.name] = value


class ProgAttr:
    """A program of the object (:class:`pycore.native.object.Program`)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, ns: None, owner: type) -> ProgAttr: ...
    @overload
    def __get__(self, ns: Namespace, owner: type) -> Program: ...

    def __get__(self, ns: Namespace | None, owner: type) -> ProgAttr | Program:
        return self if ns is None else ns._skel_.obj.programs[self.name]

    def __set__(self, ns: Namespace, value: object) -> None:
        raise AttributeError(f"progs.{self.name} is read-only")


class MapAttr(Generic[K, V]):
    """A map of the object, as a :class:`TypedMap` (or :class:`PerCpuMap`) made once per skeleton."""

    __slots__ = ("name", "key_types", "value_types", "percpu", "__orig_class__")

    def __init__(self, name: str, key_types: tuple[type, ...], value_types: tuple[type, ...],
                 percpu: bool = False) -> None:
        self.name = name
        self.key_types = key_types
        self.value_types = value_types
        self.percpu = percpu

    @overload
    def __get__(self, ns: None, owner: type) -> MapAttr[K, V]: ...
    @overload
    def __get__(self, ns: Namespace, owner: type) -> TypedMap[K, V]: ...

    def __get__(self, ns: Namespace | None, owner: type) -> MapAttr[K, V] | TypedMap[K, V]:
        if ns is None:
            return self
        cache = ns._skel_._maps_made
        m: TypedMap[K, V] | None = cache.get(self.name)
        if m is None:
            cls = PerCpuMap if self.percpu else TypedMap
            m = cache[self.name] = cls(ns._skel_.obj.maps[self.name], self.key_types, self.value_types)
        return m

    def __set__(self, ns: Namespace, value: object) -> None:
        raise AttributeError(f"maps.{self.name} is read-only")


class PerCpuMapAttr(MapAttr[K, V]):
    """A per-CPU map of the object, typed as a :class:`PerCpuMap` (``lookup_percpu``, ``items_percpu``)
    so mypy accepts what per-CPU maps add; generated skeletons use it for every per-CPU map."""

    __slots__ = ()

    def __init__(self, name: str, key_types: tuple[type, ...], value_types: tuple[type, ...]) -> None:
        super().__init__(name, key_types, value_types, percpu=True)

    @overload
    def __get__(self, ns: None, owner: type) -> PerCpuMapAttr[K, V]: ...
    @overload
    def __get__(self, ns: Namespace, owner: type) -> PerCpuMap[K, V]: ...

    def __get__(self, ns: Namespace | None, owner: type) -> PerCpuMapAttr[K, V] | PerCpuMap[K, V]:
        m = super().__get__(ns, owner)
        assert ns is None or isinstance(m, PerCpuMap)
        return m  # type: ignore[return-value]


class PlainMapAttr:
    """A map with no key -> value contents (a ring buffer, a perf event array ...): the :class:`Map` itself."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, ns: None, owner: type) -> PlainMapAttr: ...
    @overload
    def __get__(self, ns: Namespace, owner: type) -> Map: ...

    def __get__(self, ns: Namespace | None, owner: type) -> PlainMapAttr | Map:
        return self if ns is None else ns._skel_.obj.maps[self.name]

    def __set__(self, ns: Namespace, value: object) -> None:
        raise AttributeError(f"maps.{self.name} is read-only")


class RingAttr(Generic[E]):
    """A ring buffer map of the object, as a :class:`TypedRing` of its event class."""

    __slots__ = ("name", "event", "__orig_class__")

    def __init__(self, name: str, event: str) -> None:
        self.name = name
        self.event = event  # "struct exec_event", looked up in the object's BTF

    @overload
    def __get__(self, ns: None, owner: type) -> RingAttr[E]: ...
    @overload
    def __get__(self, ns: Namespace, owner: type) -> TypedRing[E]: ...

    def __get__(self, ns: Namespace | None, owner: type) -> RingAttr[E] | TypedRing[E]:
        if ns is None:
            return self
        skel = ns._skel_
        r: TypedRing[E] | None = skel._rings_made.get(self.name)
        if r is None:
            r = skel._rings_made[self.name] = TypedRing(skel, self.name, self.event)
        return r

    def __set__(self, ns: Namespace, value: object) -> None:
        raise AttributeError(f"rings.{self.name} is read-only")


class TypedMap(Generic[K, V]):
    """A map with typed keys and values (ints, or the skeleton's dataclasses); ``.map`` is the :class:`Map`."""

    __slots__ = ("map", "key_types", "value_types")

    def __init__(self, m: Map, key_types: tuple[type, ...], value_types: tuple[type, ...]) -> None:
        self.map = m
        self.key_types = key_types
        self.value_types = value_types

    @property
    def name(self) -> str:
        name: str = self.map.name
        return name

    def _key(self, key: object) -> bytes:
        _check(key, self.key_types, f"maps.{self.map.name} key")
        return self.map.encode_key(key)

    def _value(self, value: object) -> bytes:
        _check(value, self.value_types, f"maps.{self.map.name} value")
        return self.map.encode_value(value)

    def lookup(self, key: K) -> V | None:
        """The value at ``key``, None if there is none."""
        raw = self.map.lookup_raw(self._key(key))
        return None if raw is None else self.map.decode_value(raw)

    def update(self, key: K, value: V, flags: int = 0) -> None:
        """Write ``value`` at ``key`` (flags: 0 any, 1 BPF_NOEXIST, 2 BPF_EXIST)."""
        self.map._dict_like()
        self.map.update_raw(self._key(key), self._value(value), flags)

    def delete(self, key: K) -> bool:
        """Remove ``key``; False if it was not there (array elements cannot be deleted)."""
        return self.map.delete_raw(self._key(key))

    def items(self) -> list[tuple[K, V]]:
        return self.map.items()

    def keys(self) -> list[K]:
        return list(self.map.keys())

    def values(self) -> list[V]:
        return self.map.values()

    def clear(self) -> None:
        self.map.clear()

    def __getitem__(self, key: K) -> V:
        v = self.lookup(key)
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key: K, value: V) -> None:
        self.update(key, value)

    def __delitem__(self, key: K) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return self.lookup(key) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.map)

    def __repr__(self) -> str:
        return (f"<TypedMap {self.map.name} {self.map.type_name} "
                f"{_type_names(self.key_types)} -> {_type_names(self.value_types)}>")


class PerCpuMap(TypedMap[K, V]):
    """A per-CPU map: a value per possible CPU (``lookup`` gives the list; ``sum``/``summed`` add them up)."""

    __slots__ = ()

    def lookup_percpu(self, key: K) -> list[V] | None:
        raw = self.map.lookup_raw(self._key(key))
        return None if raw is None else self.map.decode_value(raw)

    def lookup(self, key: K) -> V | None:
        """The CPUs' values at ``key`` added up (numbers, and structs field by field); None if none."""
        values = self.lookup_percpu(key)
        return None if values is None else self.map.sum(key)

    def update(self, key: K, value: V | list[V], flags: int = 0) -> None:
        """One value for every CPU, or a list of one value per CPU."""
        for v in value if isinstance(value, list) else [value]:
            _check(v, self.value_types, f"maps.{self.map.name} value")
        self.map._dict_like()
        self.map.update_raw(self._key(key), self.map.encode_value(value), flags)

    def items(self) -> list[tuple[K, V]]:
        return list(self.map.summed().items())

    def values(self) -> list[V]:
        return list(self.map.summed().values())

    def items_percpu(self) -> list[tuple[K, list[V]]]:
        return self.map.items()


class TypedRing(Generic[E]):
    """A ring buffer's events as the skeleton's dataclass (the RingBuffer is made at first use, after load)."""

    __slots__ = ("_skel", "name", "event", "_ring")

    def __init__(self, skel: Skeleton, name: str, event: str) -> None:
        self._skel = skel
        self.name = name
        self.event = event
        self._ring: RingBuffer | None = None

    @property
    def ring(self) -> RingBuffer:
        """The :class:`RingBuffer` (read_batch, async iteration, fileno ...)."""
        if self._ring is None:
            obj = self._skel.obj
            if not obj.loaded:
                raise ValueError(f"{obj.name}: rings.{self.name}: load() first")
            event: str | int = int(self.event[1:]) if self.event.startswith("#") else self.event
            self._ring = RingBuffer(obj, self.name, event=event)
        return self._ring

    def events(self, timeout: float | None = None) -> Iterator[E]:
        """Events as they come; ends after ``timeout`` seconds without one (None: never)."""
        return self.ring.events(timeout)

    def poll(self, callback: Callable[[E], object], timeout: float | None = None) -> int:
        """Call ``callback`` for each event available (waiting up to ``timeout``); returns how many."""
        return self.ring.poll(callback, timeout)

    def consume(self, max_events: int | None = None) -> list[E]:
        """Events available now, without waiting."""
        return self.ring.consume(max_events)

    @property
    def lost(self) -> int | None:
        """Reservations that failed (pycore_reserve's count, for every ring of the object)."""
        return self.ring.lost

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()
            self._ring = None

    def __repr__(self) -> str:
        return f"<TypedRing {self.name} of {self.event}>"


class Skeleton:
    """Base of generated skeletons: ``Counter.open()`` -> set ``rodata`` -> ``load()`` -> ``attach()``.

    ``obj`` is the :class:`BpfObject` underneath (every BpfObject method
    works on it). ``close()`` (or the end of a ``with`` block) closes the
    rings and the object, detaching everything not pinned.
    """

    #: the object's file name, looked for beside the generated module by :meth:`open`
    OBJECT: ClassVar[str] = ""
    #: part name -> namespace class (generated)
    _PARTS: ClassVar[dict[str, type[Namespace]]] = {}
    #: "struct exec_event" / "enum kind" / "#12" (anonymous) -> the generated class for it
    _TYPES: ClassVar[dict[str, type]] = {}
    #: programs whose section names where they attach (the rest: progs.NAME.attach_uprobe() ...)
    _AUTO_ATTACH: ClassVar[tuple[str, ...]] = ()

    obj: BpfObject

    def __init__(self, obj: BpfObject) -> None:
        self.obj = obj
        self._maps_made: dict[str, TypedMap[Any, Any]] = {}
        self._rings_made: dict[str, TypedRing[Any]] = {}
        for part, ns_cls in self._PARTS.items():
            setattr(self, part, ns_cls(self))

    @classmethod
    def default_path(cls) -> pathlib.Path:
        """``OBJECT`` beside the module that defines the skeleton."""
        module = sys.modules[cls.__module__]
        return pathlib.Path(module.__file__ or ".").resolve().with_name(cls.OBJECT)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **bpfobject_kwargs: Any) -> Self:
        """Open (not load) the object: ``path`` or :meth:`default_path`; keyword arguments go to
        :class:`BpfObject` (``pin_dir``, ``pin_maps``, ``pin_links``, ``btf_custom_path`` ...)."""
        obj = BpfObject(cls.default_path() if path is None else path, **bpfobject_kwargs)
        try:
            cls._bind(obj)
            return cls(obj)
        except BaseException:
            obj.close()
            raise

    @classmethod
    def _bind(cls, obj: BpfObject) -> None:
        """Make the codec decode to the generated classes (checked against the object's BTF)."""
        if not cls._TYPES:
            return
        from btf.kinds import Kind

        from pycore.native.codec import codec_registry

        spec = obj.btf
        kinds = {"struct": (Kind.STRUCT,), "union": (Kind.UNION,), "enum": (Kind.ENUM, Kind.ENUM64)}
        ids: dict[int, type] = {}
        for key, klass in cls._TYPES.items():
            if key.startswith("#"):
                tid = int(key[1:])
                ok = tid < len(spec) + spec.first_id and spec.kind(tid) in (Kind.STRUCT, Kind.UNION, Kind.ENUM,
                                                                         Kind.ENUM64) and not spec.name(tid)
                found = [tid] if ok else []
            else:
                kind, _, name = key.partition(" ")
                found = spec.ids_named(name, kinds[kind])
            if not found:
                raise ValueError(f"{obj.name} has no BTF {key} that the skeleton {cls.__name__} was generated "
                                 f"with: regenerate it (pycore skel {obj.name})")
            ids[found[0]] = klass
        try:
            reg = codec_registry(spec)
            reg.use_classes(ids)
            for tid in ids:  # checked now, at open, rather than at the first event
                t = spec.type(tid)
                reg.enum_class(t) if t.kind in (Kind.ENUM, Kind.ENUM64) else reg.composite(t)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{obj.name} does not match the skeleton {cls.__name__}: {exc}; "
                             f"regenerate it (pycore skel {obj.name})") from None

    # -- lifecycle ------------------------------------------------------------

    def load(self) -> Self:
        """Create the maps (``rodata`` is frozen from here), relocate and load the programs."""
        self.obj.load()
        return self

    def attach(self) -> list[Link]:
        """Attach every loaded program whose section says where; the others (bare ``uprobe``,
        ``usdt`` ...) are attached by hand: ``skel.progs.NAME.attach_uprobe(...)``."""
        links = []
        for name in self._AUTO_ATTACH:
            p = self.obj.programs[name]
            if p.autoload:
                links.append(p.attach())
        return links

    def close(self) -> None:
        """Close the rings and the object (links detached unless pinned); safe twice."""
        for ring in self._rings_made.values():
            ring.close()
        self.obj.close()

    @property
    def loaded(self) -> bool:
        return self.obj.loaded

    @property
    def closed(self) -> bool:
        return self.obj.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    if not TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):
                raise AttributeError(name)
            raise AttributeError(f"{type(self).__name__} ({self.OBJECT}) has no {name!r}; it has: "
                                 f"{', '.join(self._PARTS)}, obj, load, attach, close")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.obj!r}>"
