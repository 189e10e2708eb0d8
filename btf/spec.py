"""Spec: a parsed BTF blob, indexed in two passes and decoded lazily.

Pass one walks the type section once and records where each type's record
starts (an ``array`` of word offsets): no names, no objects.  Pass two is on
demand: ``spec.type(id)`` decodes one record into a :mod:`btf.types` object
and caches it; names come from the string table only then.  The first three
words of every record (name offset, info, size or type) are gathered into
columns in C the first time a search needs them; :attr:`Spec.words`,
:attr:`Spec.offsets` and the column methods are public for readers that walk
every record, as :mod:`btf.cdump` does.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_left
from operator import itemgetter

from . import indexcache
from . import types as T
from .errors import BtfError
from .kinds import MAX_KIND, Kind, record_words
from .strings import StringTable

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

MAGIC = 0xEB9F
_HEADER = struct.Struct("<HBBI")          # magic, version, flags, hdr_len
_SECTIONS = struct.Struct("<IIII")        # type_off, type_len, str_off, str_len
MIN_HEADER_LEN = _HEADER.size + _SECTIONS.size
VMLINUX_PATH = "/sys/kernel/btf/vmlinux"


def glob_pattern(glob: str) -> bytes:
    """A shell-style wildcard (``*``, ``?``) as a pattern for :meth:`Spec.ids_matching`."""
    import re  # 1.2 ms to import, for the searches that need it only

    parts = []
    for ch in glob:
        if ch == "*":
            parts.append(b"[^\x00]*")
        elif ch == "?":
            parts.append(b"[^\x00]")
        else:
            parts.append(re.escape(ch.encode()))
    return b"".join(parts)


_GATHER_CHUNK = 2048  # records picked at a time (see Spec._gather)


class _Steps(dict):
    """Info word -> the length in words of a record with that info word.
    An invalid kind steps past any end, so that the walk stops there."""

    def __missing__(self, info: int) -> int:
        step = self[info] = record_words(info)
        return step


def _to_signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


class Spec:
    """A BTF blob: types by id, by name and by kind.

    ``base`` is the spec a split BTF (kernel module BTF) is layered on: ids
    and string offsets continue from the base's.
    """

    def __init__(self, data: bytes | memoryview, base: Spec | None = None, cache: bool = False) -> None:
        """Parse ``data``; with ``cache``, pass one's result is kept on disk
        (see :mod:`btf.indexcache`) for blobs big enough to be worth it."""
        self.base = base
        # split BTF of declared types (btf.writer): look-ups by name find this
        # blob's own types before the base's, as a declaration hides the kernel's
        self.shadows = False
        self._first_id = len(base) if base is not None else 1
        self._cache: dict[int, T.Type] = {}
        self._names: Sequence[int] | None = None
        self._infos: Sequence[int] | None = None
        self._sizes: Sequence[int] | None = None
        self._raw_types: bytes | None = None
        # a memoryview is parsed as it is (the spec copies the sections it
        # keeps); anything else is copied once, so that it cannot change
        self._parse(data if isinstance(data, memoryview) else bytes(data), cache)

    # -- construction -------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], base: Spec | None = None, cache: bool = True) -> Spec:
        """Raw BTF (``/sys/kernel/btf/*``) or an ELF object's ``.BTF`` section."""
        mapped = _mapped_sysfs(path)
        if mapped is not None:  # parsed in place: the spec copies what it keeps
            with mapped, memoryview(mapped) as view:
                return cls(view, base, cache)
        data = read_file(path)
        if data[:4] == b"\x7fELF":
            from .elf import btf_section  # 5 ms to import (typing, NamedTuples): only for ELF input

            data = btf_section(data, str(path))
        return cls(data, base, cache)

    def _parse(self, data: bytes, cache: bool) -> None:
        if len(data) < MIN_HEADER_LEN:
            raise BtfError(f"BTF is {len(data)} bytes, shorter than its {MIN_HEADER_LEN}-byte header", 0)
        magic, version, flags, hdr_len = _HEADER.unpack_from(data)
        order = "<"
        if magic != MAGIC:
            magic, version, flags, hdr_len = struct.unpack_from(">HBBI", data)
            if magic != MAGIC:
                raise BtfError(f"bad BTF magic {data[:2].hex()}", 0)
            order = ">"
        if version != 1:
            raise BtfError(f"unsupported BTF version {version}", 2)
        if hdr_len < MIN_HEADER_LEN or hdr_len > len(data):
            raise BtfError(f"bad header length {hdr_len}", 4)
        # Newer kernels may append header fields; we size the header from hdr_len.
        type_off, type_len, str_off, str_len = struct.unpack_from(order + "IIII", data, _HEADER.size)
        self.byteorder = "little" if order == "<" else "big"
        self.header_len = hdr_len
        t_start, s_start = hdr_len + type_off, hdr_len + str_off
        if t_start + type_len > len(data) or type_off % 4 or type_len % 4:
            raise BtfError(f"type section {type_off}+{type_len} does not fit a {len(data)}-byte blob", 8)
        if s_start + str_len > len(data):
            raise BtfError(f"string section {str_off}+{str_len} does not fit a {len(data)}-byte blob", 16)
        if str_len == 0 and self.base is None:
            raise BtfError("empty string section", 16)
        self._type_start = t_start
        self.strings = StringTable(bytes(data[s_start:s_start + str_len]),
                                   self.base.strings if self.base is not None else None, s_start)
        words = array("I")
        with memoryview(data) as view:  # no 3 MB slice copy on the way
            words.frombytes(view[t_start:t_start + type_len])
        native = "<" if sys.byteorder == "little" else ">"
        if order != native:
            words.byteswap()
        self._words = words
        key = None
        if cache and len(data) >= indexcache.MIN_BLOB:
            key = indexcache.digest(data[:hdr_len], words)
            cached = indexcache.load(key, words)
            if cached is not None:
                self._offsets, self._names, self._infos, self._sizes = cached
                return
        self._offsets = self._index(words)
        if key is not None:
            self._names, self._infos, self._sizes = self._gather(0, 1, 2)
            indexcache.store(key, self._offsets, self._names, self._infos, self._sizes)

    def _index(self, words: array) -> array:
        """Pass one: the word offset of every type record.

        A record's length depends only on its info word, and vmlinux has a
        few hundred distinct info words among 126k types, so the step is
        memoised per info word: this loop is the whole cost of opening BTF.
        """
        offsets = array("I")
        append = offsets.append
        steps = _Steps()
        i = 0
        stop = len(words)
        with memoryview(words) as view, view[1:] as infos:  # a record's info is its second word
            try:
                while i < stop:
                    append(i)
                    i += steps[infos[i]]
            except IndexError:  # a header cut short by the end of the section
                pass
        if i != stop:
            raise self._walk_error(words, offsets)
        return offsets

    def _walk_error(self, words: array, offsets: array) -> BtfError:
        """Why a walk did not end at the end of the type section."""
        last = offsets[-1]
        type_id = self._first_id + len(offsets) - 1
        where = self._type_start + last * 4
        if last + 1 < len(words):
            kind = (words[last + 1] >> 24) & 0x1F
            if kind == 0 or kind > MAX_KIND:
                return BtfError(f"type {type_id} has unknown kind {kind}", where)
        return BtfError(f"type {type_id} runs past the end of the type section", where)

    # -- lookups ------------------------------------------------------

    def __len__(self) -> int:
        """Number of type ids, void (id 0) included."""
        return self._first_id + len(self._offsets)

    def type(self, type_id: int, cache: bool = True) -> T.Type:
        """The type with this id, decoded on first use.

        ``cache=False`` decodes without keeping the object: for walks over
        tens of thousands of functions that are looked at once.
        """
        cached = self._cache.get(type_id)
        if cached is not None:
            return cached
        if type_id < self._first_id:
            if self.base is not None:
                return self.base.type(type_id, cache)
            if type_id == 0:
                t: T.Type = T.Void(self, 0, "void")
                self._cache[0] = t
                return t
        if not 0 <= type_id - self._first_id < len(self._offsets):
            raise BtfError(f"no type with id {type_id} (have {len(self)})")
        t = self._decode(type_id, cache)
        if cache:
            self._cache[type_id] = t
        return t

    __getitem__ = type

    def __iter__(self) -> Iterator[T.Type]:
        """This spec's own types, in id order (void and base types excluded)."""
        for type_id in range(self._first_id, len(self)):
            yield self.type(type_id)

    @property
    def first_id(self) -> int:
        return self._first_id

    def kind(self, type_id: int) -> Kind:
        """A type's kind, without decoding it."""
        if type_id < self._first_id:
            return self.base.kind(type_id) if self.base is not None else Kind.UNKN
        try:
            info = self._words[self._offsets[type_id - self._first_id] + 1]
        except IndexError:
            raise BtfError(f"no type with id {type_id} (have {len(self)})") from None
        return Kind((info >> 24) & 0x1F)

    def name(self, type_id: int) -> str:
        """A type's name, without decoding the rest of it."""
        if type_id < self._first_id:
            return self.base.name(type_id) if self.base is not None else ""
        try:
            name_off = self._words[self._offsets[type_id - self._first_id]]
        except IndexError:
            raise BtfError(f"no type with id {type_id} (have {len(self)})") from None
        return self.strings.get(name_off)  # not kept: searches read thousands of names once

    def ids_named(self, name: str, kinds: Iterable[Kind] | None = None) -> list[int]:
        """Ids of every type called ``name`` (optionally of the given kinds)."""
        found = self.base.ids_named(name, kinds) if self.base is not None else []
        # Not local=True: split BTF names its types with the base's strings too.
        own = self._ids_with_names(self.strings.offsets_of(name), kinds)
        return own + found if self.shadows else found + own

    def enumerator(self, name: str) -> tuple[int, int] | None:
        """(enum type id, value) of the first enum constant called ``name`` (C's
        ``TCP_CLOSE``), or None.  A name that is no string of this BTF is refused by
        one search of the string section; otherwise each enum's value records are
        read in place, without decoding the types."""
        if self.base is not None and not self.shadows:
            found = self.base.enumerator(name)
            if found is not None:
                return found
        wanted = set(self.strings.offsets_of(name))
        if not wanted:
            return self.base.enumerator(name) if self.base is not None and self.shadows else None
        w, offsets, first = self._words, self._offsets, self._first_id
        for i, info in enumerate(self.info_column()):
            kind = (info >> 24) & 0x1F
            if kind != Kind.ENUM and kind != Kind.ENUM64:
                continue
            step = 2 if kind == Kind.ENUM else 3
            p = offsets[i] + 3
            for q in range(p, p + step * (info & 0xFFFF), step):
                if w[q] in wanted:
                    v = w[q + 1] if kind == Kind.ENUM else w[q + 1] | (w[q + 2] << 32)
                    return first + i, _to_signed(v, 32 * (step - 1)) if info >> 31 else v
        return self.base.enumerator(name) if self.base is not None and self.shadows else None

    def ids_matching(self, pattern: bytes, kinds: Iterable[Kind] | None = None) -> list[int]:
        """Ids of the types whose whole name matches a bytes regular expression.

        The pattern must not match NUL (use ``[^\\x00]`` where ``.`` is meant;
        :func:`glob_pattern` translates shell wildcards).
        """
        found = self.base.ids_matching(pattern, kinds) if self.base is not None else []
        own = self._ids_with_names(self.strings.offsets_matching(pattern), kinds)
        return own + found if self.shadows else found + own

    def _ids_with_names(self, wanted: list[int], kinds: Iterable[Kind] | None) -> list[int]:
        """This spec's own ids whose name_off is in ``wanted``."""
        if not wanted:
            return []
        first = self._first_id
        if len(wanted) <= 16 and self._names is not None:
            names = self._names
            ids = []
            for off in wanted:
                idx = -1
                while True:
                    try:
                        idx = names.index(off, idx + 1)
                    except ValueError:
                        break
                    ids.append(first + idx)
            ids.sort()
        elif len(wanted) <= 16:
            # Few names: find each name_off's bytes in the type section (memmem
            # speed) and keep hits that start a record.  Members and params
            # with the same name are hits too; bisect tells them apart.
            offsets = self._offsets
            haystack = self._type_bytes()
            ids = []
            for off in wanted:
                needle = off.to_bytes(4, sys.byteorder)
                pos = haystack.find(needle)
                while pos >= 0:
                    if pos % 4 == 0:
                        word = pos // 4
                        idx = bisect_left(offsets, word)
                        if idx < len(offsets) and offsets[idx] == word:
                            ids.append(first + idx)
                    pos = haystack.find(needle, pos + 1)
            ids.sort()
        else:
            names = self.name_column()
            wanted_set = set(wanted)
            ids = [first + i for i, off in enumerate(names) if off in wanted_set]
        if kinds is not None:
            kinds = set(kinds)
            words, offsets = self._words, self._offsets
            ids = [i for i in ids if (words[offsets[i - first] + 1] >> 24) & 0x1F in kinds]
        return ids

    def ids_of_kind(self, *kinds: Kind) -> list[int]:
        """Ids of this spec's own types of the given kinds."""
        wanted = set(kinds)
        first = self._first_id
        return [first + i for i, info in enumerate(self.info_column()) if (info >> 24) & 0x1F in wanted]

    def find(self, name: str, kind: Kind | None = None) -> T.Type:
        """The first type called ``name`` (of ``kind``); KeyError if none."""
        ids = self.ids_named(name, None if kind is None else (kind,))
        if not ids:
            what = f"{kind.name.lower()} {name}" if kind is not None else name
            raise KeyError(f"no BTF type {what!r}")
        return self.type(ids[0])

    # -- columns: every record at once -----------------------------------

    @property
    def words(self) -> array:
        """The type section as 32-bit words in this machine's byte order.
        The spec's own array, not a copy: read it, do not change it."""
        return self._words

    @property
    def offsets(self) -> array:
        """Where each of this spec's own records starts in :attr:`words`
        (in words), in id order from :attr:`first_id`.  Not a copy either."""
        return self._offsets

    def name_column(self) -> Sequence[int]:
        """Each own record's first word, in id order: its name's offset in
        :attr:`strings`."""
        if self._names is None:
            self._names = self._gather(0)[0]
        return self._names

    def info_column(self) -> Sequence[int]:
        """Each own record's second word, its info: kind in bits 24-28,
        vlen in bits 0-15, kflag in bit 31."""
        if self._infos is None:
            self._infos = self._gather(1)[0]
        return self._infos

    def size_column(self) -> Sequence[int]:
        """Each own record's third word: its size, or the type it refers to."""
        if self._sizes is None:
            self._sizes = self._gather(2)[0]
        return self._sizes

    def _gather(self, *shifts: int) -> list[array]:
        """Word ``shift`` of every record at ``offsets``, as an array per
        shift: a tuple of 126k Python ints would cost 4.5 MB where the array
        costs 0.5 MB.

        An itemgetter of the record offsets picks them in one C call, from a
        view shifted by that many words: three times faster than mapping an
        index function.  It picks a chunk of records at a time, so that the
        ints of one chunk are freed before the next is picked and the same
        few pages serve them all (all 126k at once are 10 MB of fresh memory
        to fault in: 3.5k faults, which cost as much as the picking on a VM).
        """
        offsets = self._offsets
        columns = [array("I") for _ in shifts]
        with memoryview(self._words) as view:
            views = [view[shift:] for shift in shifts]
            try:
                for at in range(0, len(offsets), _GATHER_CHUNK):
                    chunk = offsets[at:at + _GATHER_CHUNK]
                    if len(chunk) == 1:  # an itemgetter of one item returns no tuple
                        for column, shifted in zip(columns, views):
                            column.append(shifted[chunk[0]])
                        continue
                    pick = itemgetter(*chunk)
                    for column, shifted in zip(columns, views):
                        column.extend(pick(shifted))
            finally:
                for shifted in views:
                    shifted.release()
        return columns

    def _type_bytes(self) -> bytes:
        if self._raw_types is None:
            self._raw_types = self._words.tobytes()
        return self._raw_types

    # -- pass two: decoding one record --------------------------------

    def _decode(self, type_id: int, keep_strings: bool = True) -> T.Type:
        w = self._words
        off = self._offsets[type_id - self._first_id]
        name_off, info, size_or_type = w[off], w[off + 1], w[off + 2]
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kflag = info >> 31
        lookup = self.strings.lookup if keep_strings else self.strings.get
        name = lookup(name_off)
        p = off + 3
        if kind == Kind.INT:
            return T.Int(self, type_id, name, size_or_type, w[p])
        if kind == Kind.PTR:
            return T.Pointer(self, type_id, name, size_or_type)
        if kind == Kind.ARRAY:
            return T.Array(self, type_id, w[p], w[p + 1], w[p + 2])
        if kind in (Kind.STRUCT, Kind.UNION):
            members = []
            for q in range(p, p + 3 * vlen, 3):
                moff = w[q + 2]
                if kflag:
                    members.append(T.Member(self, lookup(w[q]), w[q + 1], moff & 0xFFFFFF, moff >> 24))
                else:
                    members.append(T.Member(self, lookup(w[q]), w[q + 1], moff, 0))
            cls = T.Struct if kind == Kind.STRUCT else T.Union
            return cls(self, type_id, name, size_or_type, members)
        if kind == Kind.ENUM:
            values = [T.EnumValue(lookup(w[q]), _to_signed(w[q + 1], 32) if kflag else w[q + 1])
                      for q in range(p, p + 2 * vlen, 2)]
            return T.Enum(self, type_id, name, size_or_type, bool(kflag), values)
        if kind == Kind.ENUM64:
            values = []
            for q in range(p, p + 3 * vlen, 3):
                v = w[q + 1] | (w[q + 2] << 32)
                values.append(T.EnumValue(lookup(w[q]), _to_signed(v, 64) if kflag else v))
            return T.Enum64(self, type_id, name, size_or_type, bool(kflag), values)
        if kind == Kind.FWD:
            return T.Fwd(self, type_id, name, bool(kflag))
        if kind == Kind.TYPEDEF:
            return T.Typedef(self, type_id, name, size_or_type)
        if kind == Kind.VOLATILE:
            return T.Volatile(self, type_id, name, size_or_type)
        if kind == Kind.CONST:
            return T.Const(self, type_id, name, size_or_type)
        if kind == Kind.RESTRICT:
            return T.Restrict(self, type_id, name, size_or_type)
        if kind == Kind.TYPE_TAG:
            return T.TypeTag(self, type_id, name, size_or_type)
        if kind == Kind.FUNC:
            return T.Func(self, type_id, name, size_or_type, vlen)
        if kind == Kind.FUNC_PROTO:
            params = [T.Param(self, lookup(w[q]), w[q + 1]) for q in range(p, p + 2 * vlen, 2)]
            return T.FuncProto(self, type_id, size_or_type, params)
        if kind == Kind.VAR:
            return T.Var(self, type_id, name, size_or_type, w[p])
        if kind == Kind.DATASEC:
            secinfo = [T.VarSecinfo(self, w[q], w[q + 1], w[q + 2]) for q in range(p, p + 3 * vlen, 3)]
            return T.Datasec(self, type_id, name, size_or_type, secinfo)
        if kind == Kind.FLOAT:
            return T.Float(self, type_id, name, size_or_type)
        if kind == Kind.DECL_TAG:
            return T.DeclTag(self, type_id, name, size_or_type, _to_signed(w[p], 32))
        raise BtfError(f"type {type_id} has unknown kind {kind}", self._type_start + off * 4)


SYSFS_BTF = "/sys/kernel/btf/"


def _map_sysfs(fd: int, size: int) -> mmap.mmap | None:
    """A private read-only mapping of the kernel's own BTF: kernels since
    6.16 allow one, and it takes a twentieth of the time of the 1,300
    page-sized reads sysfs hands out otherwise (as libbpf 1.6 does).  Only
    for sysfs, whose contents cannot shrink under the mapping (a file cut
    short while mapped would kill the process with SIGBUS)."""
    try:
        return mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    except (OSError, ValueError):  # older kernels refuse the mapping
        return None


def _mapped_sysfs(path: str | os.PathLike[str]) -> mmap.mmap | None:
    """:func:`_map_sysfs` for a path under /sys/kernel/btf, or None."""
    if not os.fspath(path).startswith(SYSFS_BTF):
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        return _map_sysfs(fd, size) if size else None
    finally:
        os.close(fd)


def read_file(path: str | os.PathLike[str], prefix: bytes = b"") -> bytes:
    """Read a whole file into one preallocated buffer, after ``prefix``.

    sysfs BTF hands out a page or so per read where it cannot be mapped
    (before 6.16; :meth:`Spec.from_file` maps it where it can); growing and
    joining chunks costs five times more than reading into place.  Files
    that report no size (procfs, tracefs) are read in big chunks.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if not size:
            # procfs/tracefs fill a big read: 1 MiB chunks and one join peak
            # at twice the file, where a doubling buffer and its copy reach 3x.
            chunks = [prefix]
            while True:
                got = os.read(fd, 1 << 20)
                if not got:
                    return b"".join(chunks)
                chunks.append(got)
        n = len(prefix)
        buf = bytearray(n + size + 1)
        buf[:n] = prefix
        view = memoryview(buf)
        while True:
            if n == len(buf):
                view.release()  # a bytearray with a live view cannot grow
                buf.extend(bytes(len(buf)))  # the file grew
                view = memoryview(buf)
            got = os.readv(fd, [view[n:]])
            if not got:
                break
            n += got
        view.release()
        del buf[n:]
        return bytes(buf)
    finally:
        os.close(fd)


def load_kernel_spec(path: str = VMLINUX_PATH) -> Spec:
    """The running kernel's BTF; the caller keeps it (there is no global cache)."""
    if not os.path.exists(path):
        raise BtfError(f"{path} is missing: this kernel was built without CONFIG_DEBUG_INFO_BTF")
    return Spec.from_file(path)


def load_module_spec(module: str, base: Spec | None = None) -> Spec:
    """A kernel module's split BTF from /sys/kernel/btf/MODULE, on top of vmlinux."""
    return Spec.from_file(os.path.join("/sys/kernel/btf", module), base or load_kernel_spec())
