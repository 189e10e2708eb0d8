"""pycore skel: typed skeletons for every object pycore ships, their golden text, and one used end to end.

- every installed pycore/bpf/*.bpf.o gets a skeleton that imports, opens and
  loads here (objects with fentry/fexit/fmod_ret programs: this host's kernel
  refuses them with EPERM, and that refusal is asserted; the rest of their
  programs then load), whose globals, maps and rings read as the types the
  skeleton declares; in the VMs (-m kernel) those load whole and attach;
- the generated text is compared with tests/golden/skel/NAME_skel.py(i).golden.
  After an intended change, regenerate: PYCORE_REGEN_GOLDEN=1 python -m pytest
  tests/test_skel.py -k golden (and review the diff);
- end to end: the agent template's counter.bpf.c built by pycore build, its
  skeleton set (rodata), loaded, attached, execs triggered, typed events and a
  typed map read;
- mypy --strict passes a correct usage and fails a misspelled map and a wrong
  field type with the messages a user would see;
- the CLI's errors: one line, exit 2, nothing written.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time
import types

import pytest

from pycore.errors import BpfError
from pycore.native.shipped import available_objects, object_path
from pycore.skel import PerCpuMap, Section, Skeleton, TypedMap
from pycore.skel.generate import generate
from tests.conftest import ensure_bpffs, require_root

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "skel"
TEMPLATE_C = ROOT / "examples" / "agent-template" / "src" / "agent_template" / "counter.bpf.c"
OBJECTS = available_objects()
EXTRA_ARGS = {"test_maps": {"bytes_maps": ["raw"]}}  # its `raw` map is declared with key_size/value_size only
FENTRY_FAMILY = ("fentry", "fexit", "fmod_ret", "fentry.s", "fexit.s", "fmod_ret.s")
TIMES: dict[str, float] = {}


def pycore(*args: str | os.PathLike[str], cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pycore", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def import_file(path: pathlib.Path) -> types.ModuleType:
    name = f"_skel_test_{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def skeleton_class(module: types.ModuleType) -> type[Skeleton]:
    found = [v for v in vars(module).values()
             if isinstance(v, type) and issubclass(v, Skeleton) and v is not Skeleton and v.__module__ == module.__name__]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def skel_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Every shipped object copied to one directory with its generated skeleton beside it."""
    d = tmp_path_factory.mktemp("skel")
    assert len(OBJECTS) >= 19, OBJECTS
    for name in OBJECTS:
        shutil.copy(object_path(name), d / f"{name}.bpf.o")
        t0 = time.perf_counter()
        generate(str(d / f"{name}.bpf.o"), str(d / f"{name}_skel.py"), **EXTRA_ARGS.get(name, {}))
        TIMES[name] = time.perf_counter() - t0
    return d


# -- golden text --------------------------------------------------------------------


@pytest.mark.parametrize("name", OBJECTS)
def test_golden(skel_dir: pathlib.Path, name: str) -> None:
    """The text of each skeleton is pinned (PYCORE_REGEN_GOLDEN=1 rewrites tests/golden/skel/)."""
    for suffix in (".py", ".pyi"):
        got = (skel_dir / f"{name}_skel{suffix}").read_text()
        golden = GOLDEN / f"{name}_skel{suffix}.golden"  # not .py: pytest would collect test_*_skel.py
        if os.environ.get("PYCORE_REGEN_GOLDEN") == "1":
            GOLDEN.mkdir(parents=True, exist_ok=True)
            golden.write_text(got)
            continue
        assert golden.is_file(), f"no golden {golden.name}: PYCORE_REGEN_GOLDEN=1 python -m pytest {__file__} -k golden"
        assert got == golden.read_text(), f"{name}_skel{suffix} differs from {golden} (regenerate if intended)"


def test_generation_is_deterministic(skel_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The same object gives the same bytes, whatever the directory, through the CLI too."""
    name = max(OBJECTS, key=lambda n: object_path(n).stat().st_size)
    r = pycore("skel", skel_dir / f"{name}.bpf.o", *(["--bytes-map", "raw"] if name == "test_maps" else []),
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [f"{name}_skel.py", f"{name}_skel.pyi"]
    for suffix in (".py", ".pyi"):
        assert (tmp_path / f"{name}_skel{suffix}").read_bytes() == (skel_dir / f"{name}_skel{suffix}").read_bytes()
    print(f"\ngeneration times (ms): " + ", ".join(f"{n} {t * 1e3:.0f}" for n, t in sorted(TIMES.items())))
    print(f"largest object {name} ({object_path(name).stat().st_size} bytes): {TIMES[name] * 1e3:.0f} ms")
    assert TIMES[name] < 2.0


def test_rings_come_from_the_annotation(skel_dir: pathlib.Path) -> None:
    """Every ring buffer of pycore's own objects is typed by PYCORE_RING_EVENT in its source."""
    for name in OBJECTS:
        text = (skel_dir / f"{name}_skel.py").read_text()
        rings = [line for line in text.splitlines() if "_skel.RingAttr[" in line]
        assert all("from the C annotation" in line for line in rings), rings


# -- every object: import, open, load, read as typed ---------------------------------


def check_typed(value: object, types_: tuple[type, ...], what: str) -> None:
    assert isinstance(value, types_), f"{what}: {value!r} is not {types_}"


@pytest.mark.parametrize("name", OBJECTS)
def test_load_every_skeleton(skel_dir: pathlib.Path, name: str) -> None:
    require_root()
    module = import_file(skel_dir / f"{name}_skel.py")
    cls = skeleton_class(module)
    assert cls.OBJECT == f"{name}.bpf.o"
    skel = cls.open()  # the object beside the module
    try:
        assert skel.obj.path == str(skel_dir / f"{name}.bpf.o") and not skel.loaded
        progs = skel.progs.names()
        assert progs == list(skel.obj.programs)
        refused = [p for p in skel.obj.programs.values() if p.autoload and p.section.split("/")[0] in FENTRY_FAMILY]
        try:
            skel.load()
        except BpfError as exc:
            # this host refuses BPF_PROG_TYPE_TRACING attached to functions (KERNEL-LAB.md)
            assert refused, f"{name}: load failed without fentry/fexit programs: {exc}"
            assert exc.errno == errno.EPERM and "refuses fentry/fexit" in str(exc), exc
            skel.close()
            skel = cls.open()
            for p in refused:
                getattr(skel.progs, p.name).autoload = False
            skel.load()
        assert skel.loaded
        for part in ("rodata", "bss", "data"):
            ns = getattr(skel, part, None)
            if ns is None:
                continue
            assert isinstance(ns, Section)
            for var in ns.names():
                check_typed(getattr(ns, var), type(ns).__dict__[var].types, f"{name}: {part}.{var}")
        if "maps" in cls._PARTS:
            for mname in skel.maps.names():
                m = getattr(skel.maps, mname)
                if isinstance(m, TypedMap):
                    for k, v in m.items():
                        check_typed(k, m.key_types, f"{name}: maps.{mname} key")
                        check_typed(v, m.value_types, f"{name}: maps.{mname} value")
                    if m.map.is_array:  # every index has a value, summed over the CPUs for per-CPU ones
                        assert len(m) == len(m.items()) == m.map.max_entries
                        assert isinstance(m, PerCpuMap) == m.map.percpu
        if "rings" in cls._PARTS:
            for rname in skel.rings.names():
                ring = getattr(skel.rings, rname)
                for ev in ring.consume():  # mapped and readable; events that came already are the skeleton's class
                    assert type(ev).__module__ == module.__name__, ev
                assert ring.lost == 0
    finally:
        skel.close()
    assert skel.closed


# -- end to end: the agent template's program --------------------------------------


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """counter.bpf.o built from the agent template by pycore build, and its skeleton, in one directory."""
    d = tmp_path_factory.mktemp("counter")
    r = pycore("build", TEMPLATE_C, "-o", d / "counter.bpf.o")
    assert r.returncode == 0, r.stderr
    r = pycore("skel", d / "counter.bpf.o", "-o", d / "counter_skel.py")
    assert r.returncode == 0, r.stderr
    return d


def test_end_to_end(counter: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """rodata set, load, attach, execs triggered: typed events, a typed map, a live .bss counter."""
    require_root()
    mod = import_file(counter / "counter_skel.py")
    true = tmp_path / "skel-e2e-true"
    shutil.copy("/bin/true", true)
    with mod.Counter.open() as skel:
        with pytest.raises(TypeError, match=r"rodata.ignore_tgid is int, not str"):
            skel.rodata.ignore_tgid = "me"
        with pytest.raises(AttributeError, match=r"Counter.maps has no 'sycalls'.*it has: .*syscalls"):
            skel.maps.sycalls
        with pytest.raises(AttributeError, match=r"Counter.rodata has no 'ignore_pid'.*it has: ignore_tgid"):
            skel.rodata.ignore_pid = 1
        skel.rodata.ignore_tgid = os.getpid()
        skel.load()
        with pytest.raises(ValueError, match=r"frozen at load; set it before load"):
            skel.rodata.ignore_tgid = 1
        links = skel.attach()
        assert len(links) == 2
        seen_before = skel.bss.execs_seen
        children = []
        for _ in range(3):
            p = subprocess.run([true], check=True)
            children.append(p)
        pids = set()
        deadline = time.monotonic() + 5
        for ev in skel.rings.events.events(timeout=0.5):
            assert isinstance(ev, mod.ExecEvent)
            if ev.filename.endswith("skel-e2e-true"):
                assert isinstance(ev.comm, str) and isinstance(ev.pid, int) and ev.ppid == os.getpid()
                pids.add(ev.pid)
            if len(pids) == 3 or time.monotonic() > deadline:
                break
        assert len(pids) == 3
        assert skel.bss.execs_seen >= seen_before + 3
        assert skel.rings.events.lost == 0
        counts = skel.maps.syscalls
        for pid in pids:
            v = counts.lookup(pid)
            assert isinstance(v, mod.SyscallCount) and v.count > 0, (pid, v)
            assert v.comm == "skel-e2e-true"
        assert counts.lookup(os.getpid()) is None  # ignore_tgid left the agent out
        with pytest.raises(TypeError, match=r"maps.syscalls value is SyscallCount, not int"):
            counts.update(1, 5)  # type: ignore[arg-type]
        counts.update(1, mod.SyscallCount(count=7, comm="x"))
        assert counts[1] == mod.SyscallCount(count=7, comm="x")
        assert counts.delete(1) and counts.lookup(1) is None
    assert skel.closed and not any(link.attached for link in links)


# -- mypy ----------------------------------------------------------------------------------

MYPY_OK = """
from __future__ import annotations

import os

from counter_skel import Counter, ExecEvent, SyscallCount


def main() -> int:
    with Counter.open(pin_dir=None) as skel:
        skel.rodata.ignore_tgid = os.getpid()
        skel.load()
        skel.attach()
        for ev in skel.rings.events.events(timeout=0.1):
            e: ExecEvent = ev
            print(e.filename.upper(), e.pid + 1)
        skel.rings.events.poll(lambda ev: print(ev.comm), timeout=0)
        v: SyscallCount | None = skel.maps.syscalls.lookup(1)
        rows: list[tuple[int, SyscallCount]] = skel.maps.syscalls.items()
        seen: int = skel.bss.execs_seen
        return seen + len(rows) + (v.count if v else 0)
"""

MYPY_BAD = """
from __future__ import annotations

from counter_skel import Counter


def main() -> None:
    with Counter.open() as skel:
        skel.maps.sycalls.lookup(1)
        for ev in skel.rings.events.events():
            ev.pid = "1"
        skel.rodata.ignore_tgid = "me"
        skel.maps.syscalls.update("1", 2)
"""


def run_mypy(directory: pathlib.Path, source: str) -> subprocess.CompletedProcess[str]:
    (directory / "use.py").write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--no-error-summary",
                           "--cache-dir", str(directory / ".mypy_cache"), "use.py"],
                          capture_output=True, text=True, cwd=directory, timeout=300)


def test_mypy_passes_a_correct_use(counter: pathlib.Path, tmp_path: pathlib.Path) -> None:
    for f in ("counter_skel.py", "counter_skel.pyi"):
        shutil.copy(counter / f, tmp_path / f)
    r = run_mypy(tmp_path, MYPY_OK)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_fails_a_wrong_name_and_a_wrong_type(counter: pathlib.Path, tmp_path: pathlib.Path) -> None:
    for f in ("counter_skel.py", "counter_skel.pyi"):
        shutil.copy(counter / f, tmp_path / f)
    r = run_mypy(tmp_path, MYPY_BAD)
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert 'use.py:9: error: "CounterMaps" has no attribute "sycalls"; maybe "syscalls"?' in out, out
    assert 'use.py:11: error: Incompatible types in assignment (expression has type "str", variable has type "int")' in out, out
    assert 'use.py:12: error: Incompatible types in assignment (expression has type "str", variable has type "int")' in out, out
    assert 'use.py:13: error: Argument 1 to "update" of "TypedMap" has incompatible type "str"; expected "int"' in out, out
    assert 'use.py:13: error: Argument 2 to "update" of "TypedMap" has incompatible type "int"; expected "SyscallCount"' in out, out


# -- CLI errors -----------------------------------------------------------------------------


def assert_refused(r: subprocess.CompletedProcess[str], out_dir: pathlib.Path, *phrases: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pycore: error: "), r.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    assert [p.name for p in out_dir.iterdir() if "skel" in p.name] == [], "a file was written"


def test_cli_errors(skel_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    src = skel_dir / "test_ringbuf.bpf.o"
    stripped = tmp_path / "stripped.bpf.o"
    subprocess.run(["llvm-strip", "--remove-section=.BTF", "-o", stripped, src], check=True)
    assert_refused(pycore("skel", stripped, cwd=tmp_path), tmp_path, "has no BTF", "compile with -g")

    text = tmp_path / "notes.bpf.o"
    text.write_text("not an object\n")
    assert_refused(pycore("skel", text, cwd=tmp_path), tmp_path, "is not an ELF file")
    assert_refused(pycore("skel", "/bin/true", cwd=tmp_path), tmp_path, "not a BPF object")
    assert_refused(pycore("skel", tmp_path / "missing.bpf.o", cwd=tmp_path), tmp_path, "cannot read")

    assert_refused(pycore("skel", skel_dir / "test_maps.bpf.o", cwd=tmp_path), tmp_path,
                   "map raw", "not in BTF", "__type(key, ...)", "--bytes-map raw")
    assert_refused(pycore("skel", src, "--ring", "events=struct nosuch", cwd=tmp_path), tmp_path,
                   "no struct or union 'struct nosuch'")
    assert_refused(pycore("skel", src, "--ring", "evnts=struct ringbuf_test_event", cwd=tmp_path), tmp_path,
                   "has no map 'evnts'")
    assert_refused(pycore("skel", src, "-o", tmp_path / "x-y_skel.py", cwd=tmp_path), tmp_path, "cannot be imported")
    assert_refused(pycore("skel", src, "--class", "class", cwd=tmp_path), tmp_path, "not a Python class name")


C_NO_ANNOTATION = r"""
#include "pycore.bpf.h"
struct ev { __u32 pid; };
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } events SEC(".maps");
struct ev *keep __attribute__((unused));
SEC("tracepoint/syscalls/sys_enter_getpid")
int hit(void *ctx) { return 0; }
char LICENSE[] SEC("license") = "GPL";
"""

C_XDP = r"""
#include "pycore.bpf.h"
SEC("xdp")
int pass(struct xdp_md *ctx) { return XDP_PASS; }
SEC("tracepoint/syscalls/sys_enter_getpid")
int hit(void *ctx) { return 0; }
char LICENSE[] SEC("license") = "GPL";
"""


def test_cli_errors_needing_a_build(tmp_path: pathlib.Path) -> None:
    """A ring whose struct nobody names, and a section pycore cannot attach (objects built here)."""
    for name, source in (("noring", C_NO_ANNOTATION), ("xdp", C_XDP)):
        (tmp_path / f"{name}.bpf.c").write_text(source)
        r = pycore("build", tmp_path / f"{name}.bpf.c", "-o", tmp_path / f"{name}.bpf.o")
        assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    out.mkdir()
    assert_refused(pycore("skel", tmp_path / "noring.bpf.o", cwd=out), out,
                   "map events", "which struct the ring buffer carries is unknown", "--ring events=STRUCT",
                   "PYCORE_RING_EVENT(events, struct NAME)")
    r = pycore("skel", tmp_path / "noring.bpf.o", "--ring", "events=ev", cwd=out)
    assert r.returncode == 0, r.stderr
    assert 'RingAttr[Ev] = _skel.RingAttr("events", "struct ev")  # struct ev, from --ring' in (out / "noring_skel.py").read_text()
    assert "--ring events=ev" in (out / "noring_skel.py").read_text()
    for f in out.iterdir():
        f.unlink()
    assert_refused(pycore("skel", tmp_path / "xdp.bpf.o", cwd=out), out,
                   "pycore cannot attach pass (SEC 'xdp')")


# -- typed maps and globals of every shape, a stale skeleton, pinning through open() ------


def test_typed_maps_and_globals(skel_dir: pathlib.Path) -> None:
    """test_maps through its skeleton: nested structs, enums, bitfields, unions, per-CPU sums, .data/.bss live."""
    require_root()
    mod = import_file(skel_dir / "test_maps_skel.py")
    pid = os.getpid()  # once: every getpid() of this process from here on is counted
    comm = pathlib.Path("/proc/self/comm").read_text().strip()
    with mod.TestMaps.open() as skel:
        skel.rodata.target_tgid = pid
        skel.rodata.add_amount = 10
        assert skel.rodata.ro_color == mod.TmColor.TM_RED and type(skel.rodata.ro_color) is mod.TmColor
        skel.load()
        skel.attach()
        skel.bss.bss_input = 99
        for _ in range(3):
            os.getpid()
        assert skel.bss.calls == 3 and skel.bss.bss_echo == 99 and skel.data.data_counter == 45
        assert skel.data.data_name == "hello" and skel.data.data_inner == mod.TmInner(a=1, b=-1, c=3)
        v = skel.maps.hash[mod.TmKey(tgid=pid, slot=7)]
        assert type(v) is mod.TmValue and type(v.inner) is mod.TmInner and type(v.u) is mod.TmValueU
        assert (v.count, v.neg, v.color, v.comm, v.raw) == (30, -5, mod.TmColor.TM_BLUE, comm, b"\x01\x02\x00\xff")
        assert (v.flag_a, v.flag_b, v.flag_c, v.sbits, v.u.word, v.anon_a, v.x, v.y, v.ok, v.shorts, v.ptr, v.f, v.d) == \
            (1, 5, 0xABC, -3, 0x04030201, 0x1122334455667788, 3, 4, True, [10, 20, 30], 0xDEADBEEF, 1.5, -2.5)
        assert skel.maps.lru.lookup(pid) == mod.TmInner(a=7, b=-2, c=pid)
        assert skel.maps.pcpu_array.lookup(0) == 3  # summed over the CPUs
        assert skel.maps.pcpu_hash.lookup(mod.TmKey(pid, 7)) == mod.TmTriple(a=3, b=2, c=3)
        assert dict(skel.maps.lru_pcpu.items()) == {pid: 3}
        per_cpu = skel.maps.pcpu_array.lookup_percpu(0)
        assert per_cpu is not None and sum(per_cpu) == 3 and len(per_cpu) == skel.maps.pcpu_array.map.ncpus
        skel.maps.raw.update(b"\x01\x00\x00\x00", bytes(8))  # --bytes-map raw
        assert skel.maps.raw.lookup(b"\x01\x00\x00\x00") == bytes(8)
        with pytest.raises(TypeError, match=r"maps.hash key is TmKey, not tuple"):
            skel.maps.hash.lookup((1, 7))
        with pytest.raises(TypeError, match=r"data.data_inner is TmInner, not dict"):
            skel.data.data_inner = {"a": 1}
        skel.data.data_inner = mod.TmInner(a=5)
        assert skel.data.data_inner == mod.TmInner(a=5, b=0, c=0)
        with pytest.raises(AttributeError, match=r"'TmValue' object has no attribute 'colour'"):
            v.colour = 1  # slotted dataclasses: no new attributes


def test_stale_skeleton_says_regenerate(skel_dir: pathlib.Path) -> None:
    """A skeleton opened on an object whose BTF differs from the one it was generated from refuses, naming it."""
    v1 = import_file(skel_dir / "test_pin_v1_skel.py")
    with pytest.raises(ValueError, match=r"test_pin_v3.bpf.o does not match the skeleton TestPinV1: .*fields.*"
                                         r"regenerate it \(pycore skel test_pin_v3.bpf.o\)"):
        v1.TestPinV1.open(skel_dir / "test_pin_v3.bpf.o")
    rb = import_file(skel_dir / "test_ringbuf_skel.py")
    with pytest.raises(ValueError, match=r"test_maps.bpf.o has no BTF struct ringbuf_test_ids .*regenerate"):
        rb.TestRingbuf.open(skel_dir / "test_maps.bpf.o")


def test_open_forwards_bpfobject_arguments(skel_dir: pathlib.Path) -> None:
    """pin_dir and pin_maps reach BpfObject: the map is pinned there, and unpinned on request."""
    require_root()
    mod = import_file(skel_dir / "test_pin_v1_skel.py")
    d = f"/sys/fs/bpf/pycore_skel_test_{os.getpid()}"
    ensure_bpffs()
    try:
        with mod.TestPinV1.open(pin_dir=d, pin_maps=True) as skel:
            skel.load()
            assert skel.maps.stats.map.pin_path == f"{d}/stats" and os.path.exists(f"{d}/stats")
            skel.obj.unpin()
        assert not os.path.exists(d)
    finally:
        if os.path.lexists(d):
            from pycore.native import bpffs

            bpffs.remove(d)


C_TWO_EVENTS = r"""
#include "pycore.bpf.h"
struct a_event { __u32 pid; };
struct b_event { __u64 ts; __u32 pid; };
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } events SEC(".maps");
#ifdef ANNOTATE
PYCORE_RING_EVENT(events, struct b_event);
#endif
struct a_event *keep_a __attribute__((unused));
struct b_event *keep_b __attribute__((unused));
SEC("tracepoint/syscalls/sys_enter_getpid")
int hit(void *ctx) { return 0; }
char LICENSE[] SEC("license") = "GPL";
"""


def test_ringbuffer_reads_the_annotation(tmp_path: pathlib.Path) -> None:
    """RingBuffer(obj, map) without event= uses PYCORE_RING_EVENT too, where two *_event structs are ambiguous."""
    require_root()
    from pycore import BpfObject, RingBuffer

    (tmp_path / "two.bpf.c").write_text(C_TWO_EVENTS)
    for name, define in (("plain", []), ("annotated", ["-D", "ANNOTATE"])):
        r = pycore("build", tmp_path / "two.bpf.c", *define, "-o", tmp_path / f"{name}.bpf.o")
        assert r.returncode == 0, r.stderr
    with BpfObject(tmp_path / "annotated.bpf.o") as obj:
        obj.load()
        with RingBuffer(obj, "events") as ring:
            assert ring.codec is not None and ring.codec.name == "b_event"
    with BpfObject(tmp_path / "plain.bpf.o") as obj:
        obj.load()
        with pytest.raises(ValueError, match="several event structs"):
            RingBuffer(obj, "events")


# -- in the VMs: the objects this host refuses, loaded and attached whole ---------------------

FENTRY_OBJECTS = [n for n in OBJECTS if n in ("fget_crack", "print_args", "selftest", "test_fmod_ret", "vfs_unlink",
                                                "vm_smoke")]


@pytest.mark.kernel
@pytest.mark.parametrize("name", FENTRY_OBJECTS)
def test_fentry_skeletons_load_and_attach(skel_dir: pathlib.Path, name: str) -> None:
    """Where the kernel allows fentry/fexit/fmod_ret (Debian's kernels in QEMU), every program loads and every
    program whose section names its target attaches, through the skeleton."""
    require_root()
    cls = skeleton_class(import_file(skel_dir / f"{name}_skel.py"))
    with cls.open() as skel:
        assert any(p.section.split("/")[0] in FENTRY_FAMILY for p in skel.obj.programs.values())
        skel.load()
        links = skel.attach()
        auto = [n for n in cls._AUTO_ATTACH if skel.obj.programs[n].autoload]
        assert len(links) == len(auto) and all(link.attached for link in links)
    assert not any(link.attached for link in links)
