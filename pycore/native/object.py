"""BpfObject: a CO-RE object file opened, configured, loaded and attached.

Modelled on libbpf-rs: a few wrappers that own native resources (object,
links) and release them deterministically, on ``close()``, at the end of a
``with`` block, or at interpreter exit.  Every failure raises
:class:`pycore.errors.BpfError` naming the object, program and section.
"""

from __future__ import annotations

import errno
import os
import threading
import weakref

from pycore.native import libbpf as L
from pycore.errors import BpfError, Closed
from pycore.native.libbpf import MAP_TYPE_NAMES, PROG_TYPE_NAMES  # noqa: F401 (re-exported)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import btf

ffi, lib = L.ffi, L.lib

def _check_ptr(ptr, what: str, log: list[str] | None = None, hint: str = ""):
    if ptr == ffi.NULL:
        raise BpfError(what, ffi.errno, log, hint)
    return ptr


def _check(ret: int, what: str, log: list[str] | None = None, hint: str = "") -> int:
    if ret < 0:
        raise BpfError(what, -ret, log, hint)
    return ret


def _check_btf(data: bytes, name: str) -> None:
    """Read the object's .BTF with our bounds-checked reader before libbpf sees it.

    libbpf 1.1's bpf_object__open_mem crashes the process on some malformed
    BTF (a VAR's type id past the end, found by tests/test_skel_fuzz.py).
    Decoding every type costs 0.3 ms for a small object and 3 ms for the
    largest pycore ships.
    """
    from btf.elf import ElfObject
    from btf.errors import BtfError

    try:
        elf = ElfObject(data, name)
        section = elf.section(".BTF")
        btf_bytes = elf.contents(section) if section is not None else None
    except BtfError:
        return  # not an ELF we can read: libelf, under libbpf, says so (LIBBPF_ERRNO__FORMAT)
    if btf_bytes is None:
        return  # libbpf opens objects without BTF (a program that needs it fails at load)
    from btf import Spec
    from btf.check import check_references

    try:
        check_references(Spec(btf_bytes))
    except BtfError as exc:
        raise BpfError(f"open BPF object {name}", errno.EINVAL,
                       hint=f"malformed BTF: {exc}; rebuild it (pycore build)") from None


class Link:
    """An attachment of a program; detached by :meth:`close` (or the end of a ``with`` block), as
    everything else of pycore is; :meth:`destroy`, libbpf's word, is the same call."""

    def __init__(self, ptr, description: str) -> None:
        self._ptr = ptr
        self.description = description

    @property
    def fd(self) -> int:
        self._require()
        return lib.bpf_link__fd(self._ptr)

    def pin(self, path: str) -> None:
        """Keep the link (and its program) attached past this process, until ``path`` is unlinked."""
        self._require()
        _check(lib.bpf_link__pin(self._ptr, path.encode()), f"pin {self.description} at {path}")

    @property
    def pin_path(self) -> str | None:
        """Where :meth:`pin` (or ``pin_links``) pinned it; None if not pinned."""
        self._require()
        p = lib.bpf_link__pin_path(self._ptr)
        return None if p == ffi.NULL else ffi.string(p).decode()

    def unpin(self) -> None:
        self._require()
        _check(lib.bpf_link__unpin(self._ptr), f"unpin {self.description}")

    def close(self) -> None:
        """Detach (unless pinned) and free; safe to call twice."""
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            lib.bpf_link__destroy(ptr)

    destroy = close   # libbpf's name, kept for callers written before close()

    @property
    def attached(self) -> bool:
        return self._ptr is not None

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self) -> None:
        if self._ptr is None:
            raise Closed(f"{self.description}: the link")

    def __repr__(self) -> str:
        return f"<Link {self.description}{'' if self._ptr is not None else ' (closed)'}>"


class Program:
    """One BPF program of an object (a SEC() function)."""

    def __init__(self, obj: BpfObject, ptr) -> None:
        self._obj = obj
        self._ptr = ptr
        self.name = ffi.string(lib.bpf_program__name(ptr)).decode()
        self.section = ffi.string(lib.bpf_program__section_name(ptr)).decode()

    def __repr__(self) -> str:
        return f"<Program {self.name} SEC({self.section!r})>"

    @property
    def fd(self) -> int:
        return lib.bpf_program__fd(self._ptr)

    @property
    def type(self) -> str:
        t = lib.bpf_program__type(self._ptr)
        return PROG_TYPE_NAMES.get(t, str(t))

    @property
    def autoload(self) -> bool:
        return bool(lib.bpf_program__autoload(self._ptr))

    @autoload.setter
    def autoload(self, value: bool) -> None:
        self._obj._require_open("set autoload")
        _check(lib.bpf_program__set_autoload(self._ptr, bool(value)), self._what("set autoload"))

    def set_attach_target(self, func: str) -> None:
        """Retarget an fentry/fexit/tp_btf program before load (e.g. ``fexit/fget`` -> ``fget_raw``)."""
        self._obj._require_open("set attach target")
        import errno

        ret = lib.bpf_program__set_attach_target(self._ptr, 0, func.encode())
        _check(ret, self._what(f"set attach target {func}"),
               hint=f"{func} does not exist in this kernel's BTF" if ret == -errno.ESRCH else "")

    def _what(self, action: str) -> str:
        return f"{self._obj.name}: program {self.name} (SEC {self.section}): {action}"

    def _link(self, ptr, action: str, log: list[str], hint: str = "") -> Link:
        _check_ptr(ptr, self._what(action), log, hint)
        link = Link(ptr, f"{self.name} {action}")
        self._obj._links.append(link)
        pinning = self._obj._pinning
        if pinning is not None and pinning.links:
            pinning.pin_link(link, self.name)
        return link

    def _attaching(self, action: str):
        self._obj._require_loaded(action)
        return L.Capture()

    def attach(self) -> Link:
        """Attach as the section name says (``tp_btf/sched_switch``, ``fexit/fget`` ...)."""
        with self._attaching("attach") as log:
            ptr = lib.bpf_program__attach(self._ptr)
        return self._link(ptr, "attach", log)

    def attach_trace(self, cookie: int = 0) -> Link:
        """fentry, fexit, fmod_ret or tp_btf, at the target given by the section."""
        opts = ffi.new("struct bpf_trace_opts *", {"sz": ffi.sizeof("struct bpf_trace_opts"), "cookie": cookie})
        with self._attaching("attach") as log:
            ptr = lib.bpf_program__attach_trace_opts(self._ptr, opts)
        return self._link(ptr, "attach", log)

    def attach_tracepoint(self, category: str, name: str, cookie: int = 0) -> Link:
        opts = ffi.new("struct bpf_tracepoint_opts *",
                       {"sz": ffi.sizeof("struct bpf_tracepoint_opts"), "bpf_cookie": cookie})
        with self._attaching(f"attach tracepoint {category}:{name}") as log:
            ptr = lib.bpf_program__attach_tracepoint_opts(self._ptr, category.encode(), name.encode(), opts)
        return self._link(ptr, f"attach tracepoint {category}:{name}", log)

    def attach_raw_tracepoint(self, name: str) -> Link:
        with self._attaching(f"attach raw tracepoint {name}") as log:
            ptr = lib.bpf_program__attach_raw_tracepoint(self._ptr, name.encode())
        return self._link(ptr, f"attach raw tracepoint {name}", log)

    def attach_kprobe(self, func: str, retprobe: bool = False, offset: int = 0, cookie: int = 0) -> Link:
        opts = ffi.new("struct bpf_kprobe_opts *", {"sz": ffi.sizeof("struct bpf_kprobe_opts"),
                                                    "bpf_cookie": cookie, "offset": offset, "retprobe": retprobe})
        kind = "kretprobe" if retprobe else "kprobe"
        with self._attaching(f"attach {kind} {func}") as log:
            ptr = lib.bpf_program__attach_kprobe_opts(self._ptr, func.encode(), opts)
        hint = "" if os.path.exists("/sys/kernel/tracing/kprobe_events") or \
            os.path.exists("/sys/kernel/debug/tracing/kprobe_events") else "the kernel has no kprobes (CONFIG_KPROBES)"
        return self._link(ptr, f"attach {kind} {func}", log, hint)

    def attach_uprobe(self, binary: str, symbol: str | None = None, offset: int = 0, pid: int = -1,
                      retprobe: bool = False, ref_ctr_offset: int = 0, cookie: int = 0) -> Link:
        """A uprobe at ``symbol`` (+``offset``) or at file ``offset`` in ``binary``; all processes unless ``pid``."""
        func = ffi.new("char[]", symbol.encode()) if symbol else ffi.NULL
        opts = ffi.new("struct bpf_uprobe_opts *", {"sz": ffi.sizeof("struct bpf_uprobe_opts"),
                                                    "ref_ctr_offset": ref_ctr_offset, "bpf_cookie": cookie,
                                                    "retprobe": retprobe, "func_name": func})
        where = f"{binary}:{symbol or hex(offset)}" + (f"+{offset:#x}" if symbol and offset else "")
        kind = "uretprobe" if retprobe else "uprobe"
        with self._attaching(f"attach {kind} {where}") as log:
            ptr = lib.bpf_program__attach_uprobe_opts(self._ptr, pid, binary.encode(), offset, opts)
        return self._link(ptr, f"attach {kind} {where}", log)

    def attach_usdt(self, binary: str, provider: str, name: str, pid: int = -1, cookie: int = 0) -> Link:
        """libbpf's own USDT attach (argument forms libbpf 1.1 understands)."""
        opts = ffi.new("struct bpf_usdt_opts *", {"sz": ffi.sizeof("struct bpf_usdt_opts"), "usdt_cookie": cookie})
        what = f"attach usdt {binary}:{provider}:{name}"
        with self._attaching(what) as log:
            ptr = lib.bpf_program__attach_usdt(self._ptr, pid, binary.encode(), provider.encode(),
                                               name.encode(), opts)
        return self._link(ptr, what, log)


class BpfObject:
    """A BPF object file: open (configure), :meth:`load`, attach, :meth:`close`.

    ``source`` is a path or the object's bytes.  ``btf_custom_path`` points
    CO-RE at a BTF file for kernels without /sys/kernel/btf/vmlinux.

    State across restarts and upgrades (opt-in; :mod:`pycore.native.pinning`):
    ``pin_dir`` is a directory on bpffs (created if needed) where maps are
    pinned and, at the next load, reused when their layout matches;
    ``pin_maps`` chooses which (default: those the C source declares
    ``__uint(pinning, LIBBPF_PIN_BY_NAME)``; True: all but the globals; or a
    list of names, added to those); ``pin_links=True`` pins every link so
    that the programs keep running while the agent is down.  Without
    ``pin_dir`` nothing is pinned.
    """

    def __init__(self, source: str | os.PathLike[str] | bytes, *, name: str | None = None,
                 btf_custom_path: str | None = None, kconfig: str | None = None,
                 pin_dir: str | os.PathLike[str] | None = None,
                 pin_maps: bool | Iterable[str] | None = None, pin_links: bool = False) -> None:
        self._lock = threading.RLock()
        self._links: list[Link] = []
        self._loaded = False
        self._pinning: Pinning | None = None
        if pin_dir is None and (pin_maps or pin_links):
            raise ValueError("pin_maps and pin_links need pin_dir (a directory on bpffs, e.g. /sys/fs/bpf/myagent)")
        if pin_dir is not None:
            from pycore.native.bpffs import require_bpffs

            pin_dir = require_bpffs(os.fspath(pin_dir), "pin_dir")
        self._spec: btf.Spec | None = None
        self._globals: Globals | None = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data = bytes(source)
            self.path = None
            self.name = name or "<bytes>"
        else:
            self.path = os.fspath(source)
            self.name = name or os.path.basename(self.path)
            try:
                with open(self.path, "rb") as f:
                    self._data = f.read()
            except OSError as exc:
                raise BpfError(f"open {self.path}", exc.errno or 2) from None
        keep = []  # cdata that must outlive the call

        def cstr(s: str | None):
            if s is None:
                return ffi.NULL
            c = ffi.new("char[]", s.encode())
            keep.append(c)
            return c

        opts = ffi.new("struct bpf_object_open_opts *")
        opts.sz = ffi.sizeof("struct bpf_object_open_opts")
        opts.object_name = cstr(name or os.path.splitext(os.path.splitext(self.name)[0])[0])
        opts.btf_custom_path = cstr(btf_custom_path)
        opts.kconfig = cstr(kconfig)
        _check_btf(self._data, self.name)
        self._buf = ffi.from_buffer(self._data)
        with L.Capture() as log:
            ptr = lib.bpf_object__open_mem(self._buf, len(self._data), opts)
        _check_ptr(ptr, f"open BPF object {self.name}", log, self._open_hint(log))
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _close_native, ptr, self._links)
        self.programs: dict[str, Program] = {}
        prog = lib.bpf_object__next_program(ptr, ffi.NULL)
        while prog != ffi.NULL:
            p = Program(self, prog)
            self.programs[p.name] = p
            prog = lib.bpf_object__next_program(ptr, prog)
        from pycore.native.maps import Map  # maps import the codec; only objects with maps need it

        self.maps: dict[str, Map] = {}
        m = lib.bpf_object__next_map(ptr, ffi.NULL)
        while m != ffi.NULL:
            mp = Map(self, m)
            self.maps[mp.name] = mp
            m = lib.bpf_object__next_map(ptr, m)
        if pin_dir is not None:
            from pycore.native.pinning import Pinning

            self._pinning = Pinning(self, pin_dir, pin_maps, pin_links)
        else:  # pinning is asked for: forget the paths libbpf derived from LIBBPF_PIN_BY_NAME declarations
            for mp in self.maps.values():
                if lib.bpf_map__pin_path(mp._ptr) != ffi.NULL:
                    lib.bpf_map__set_pin_path(mp._ptr, ffi.NULL)

    @staticmethod
    def _open_hint(log: list[str]) -> str:
        text = " ".join(log)
        if "not an ELF" in text or "elf" in text.lower() and "fail" in text.lower():
            return "not a valid BPF ELF object"
        return ""

    # -- state ----------------------------------------------------------

    def _require_open(self, action: str) -> None:
        if self._ptr is None:
            raise Closed(f"object {self.name}", action)
        if self._loaded:
            raise ValueError(f"{self.name}: cannot {action} after load")

    def _require_loaded(self, action: str) -> None:
        if self._ptr is None:
            raise Closed(f"object {self.name}", action)
        if not self._loaded:
            raise ValueError(f"{self.name}: cannot {action} before load()")

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @property
    def btf(self) -> btf.Spec:
        """The object's own BTF (its event structs, globals, map types)."""
        if self._spec is None:
            from btf import Spec
            from btf.elf import btf_section

            self._spec = Spec(btf_section(self._data, self.name))
        return self._spec

    @property
    def pin_dir(self) -> str | None:
        """The bpffs directory this object pins to (None: it pins nothing)."""
        return self._pinning.dir if self._pinning is not None else None

    def unpin(self) -> list[str]:
        """Remove this object's pins (maps, links) and its pin directory if that leaves it empty.

        The maps and links themselves live on while this object holds them;
        returns the paths removed.
        """
        return self._pinning.unpin() if self._pinning is not None else []

    # -- globals ----------------------------------------------------------

    @property
    def globals(self) -> Globals:
        """``const volatile`` (.rodata) and .bss/.data variables by name (built once)."""
        if self._globals is None:
            from pycore.native.globals import Globals

            self._globals = Globals(self)
        return self._globals

    # -- lifecycle --------------------------------------------------------

    def load(self) -> BpfObject:
        """Create maps, relocate (CO-RE) and load every autoload program."""
        with self._lock:
            self._require_open("load")
            if self._pinning is not None:
                self._pinning.prepare()  # refuses pinned maps that do not match, before anything loads
            with L.Capture() as log:
                ret = lib.bpf_object__load(self._ptr)
            if ret < 0:
                prog = self._failed_program(log)
                what = f"load {self.name}" + (f": program {prog.name} (SEC {prog.section})" if prog else "")
                raise BpfError(what, -ret, log, self._load_hint(-ret, prog, log))
            self._loaded = True
        return self

    def _failed_program(self, log: list[str]) -> Program | None:
        for line in log:
            for p in self.programs.values():
                if f"prog '{p.name}'" in line and ("fail" in line or "error" in line or "invalid" in line):
                    return p
        return None

    @staticmethod
    def _load_hint(err: int, prog: Program | None, log: list[str]) -> str:
        import errno

        section = prog.section if prog else ""
        if err == errno.EPERM and section.split("/")[0] in ("fentry", "fexit", "fmod_ret", "fentry.s", "fexit.s"):
            return "this kernel refuses fentry/fexit programs; use a tp_btf or tracepoint fallback"
        if err == errno.EPERM:
            return "needs root or CAP_BPF+CAP_PERFMON"
        if err == errno.ESRCH or any("failed to find kernel BTF type ID" in line for line in log):
            return "the attach target does not exist in this kernel's BTF"
        if any("BEGIN PROG LOAD LOG" in line for line in log):
            return "rejected by the verifier"
        if any("couldn't reuse pinned map" in line for line in log):
            return "a pinned map does not match this object: 'pycore pins DIR --remove' or a new pin_dir"
        return ""

    def attach(self) -> list[Link]:
        """Attach every loaded program whose section says where (auto-attach)."""
        links = []
        for p in self.programs.values():
            if p.autoload:
                links.append(p.attach())
        return links

    def detach(self) -> None:
        with self._lock:
            for link in self._links:
                link.close()
            self._links.clear()

    @property
    def links(self) -> list[Link]:
        return [link for link in self._links if link.attached]

    def close(self) -> None:
        """Detach every link and free the object; safe from any thread, twice."""
        with self._lock:
            if self._ptr is None:
                return
            self._ptr = None
            for m in self.maps.values():
                m._closed()
            self._finalizer()

    def __enter__(self) -> BpfObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else "loaded" if self._loaded else "open"
        return f"<BpfObject {self.name} {state}>"


def _close_native(ptr, links: list[Link]) -> None:
    for link in links:
        link.close()
    links.clear()
    lib.bpf_object__close(ptr)


if TYPE_CHECKING:
    from collections.abc import Iterable

    from pycore.native.globals import Globals
    from pycore.native.pinning import Pinning
