"""What the running kernel (and libbpf) can do, measured rather than guessed.

Kernel versions do not tell: sandboxes and distribution configs remove
features that the version number promises (this project's host kernel is
6.18 yet refuses fentry and has no kprobes).  So attach-type checks are
real trials, as libbpf-tools' ``fentry_can_attach`` does: load one tiny
program from ``features.bpf.o`` (one program per check, the others left
unloaded so one refused type cannot fail the rest), attach it, trigger it,
and read back what it saw.

Tools pick their attach method from a :class:`Features` instance::

    features = Features()
    if features.fentry: ...            # a Result, true when ok
    elif features.tp_btf: ...

Results are cached on the instance (there is no global state); call
:meth:`Features.detect` to run every check, e.g. for ``pycore features``.
"""

from __future__ import annotations

import errno
import os
from dataclasses import asdict, dataclass
from typing import Callable

__all__ = ["Result", "Features", "CHECKS", "kfunc_allowed"]

# enum feature_check in bpf_src/features.bpf.c
_FEAT_FENTRY, _FEAT_FEXIT, _FEAT_KPROBE, _FEAT_TP_BTF, _FEAT_COOKIE = 1, 2, 3, 4, 5
_COOKIE = 0x5EED_C0DE_0001_2345
_BPF_MAP_TYPE_RINGBUF = 27
_BPF_STATS_RUN_TIME = 0
_ENOTSUPP = 524  # kernel-internal, leaks to user space from BPF syscalls

BTF_VMLINUX = "/sys/kernel/btf/vmlinux"
REF_CTR_FORMAT = "/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset"
KPROBE_PMU = "/sys/bus/event_source/devices/kprobe/type"
SECURITYFS = "/sys/kernel/security"
LOCKDOWN = SECURITYFS + "/lockdown"
TRAMPOLINE_TARGET = "vfs_read"  # in every kernel's BTF; fentry/fexit/kprobe trials attach here


@dataclass(frozen=True)
class Result:
    """One check: ``ok`` and a one-line ``detail`` (what was tried, the error, what to do).

    ``error`` is the symbolic errno of a failed trial (``"EPERM"``), ``value``
    a measured value where there is one (kernel release, lockdown mode).
    A Result is true when ok, so ``if features.fentry:`` reads naturally.
    """

    name: str
    ok: bool
    detail: str
    error: str | None = None
    value: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        del d["name"]
        return d


# name -> one-line description, in report order
CHECKS: dict[str, str] = {
    "kernel": "kernel release",
    "libbpf": "libbpf version and newer symbols",
    "btf": "kernel BTF (/sys/kernel/btf/vmlinux)",
    "ringbuf": "BPF ring buffer map",
    "tp_btf": "tp_btf (BTF-typed tracepoints) attach",
    "fentry": "fentry attach (BPF trampoline)",
    "fexit": "fexit attach (BPF trampoline)",
    "kprobes": "kprobe attach",
    "cookies": "BPF attach cookies (bpf_get_attach_cookie)",
    "uprobe_ref_ctr": "uprobe reference counters (USDT semaphores)",
    "tracefs": "tracefs mounted and readable",
    "filter_functions": "tracefs available_filter_functions readable",
    "lockdown": "kernel lockdown mode",
    "bpf_stats": "BPF run-time statistics (bpf_enable_stats)",
}


class _Check:
    """Attribute access to a cached check: ``features.fentry``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, inst: Features | None, owner: type) -> Result:
        if inst is None:
            return self  # type: ignore[return-value]
        return inst.check(self.name)


class Features:
    """Lazily measured features of this kernel; each check runs at most once per instance.

    ``mount``: as root, mount tracefs and securityfs at their standard places
    when they are not mounted (the checks for them would fail otherwise).
    """

    kernel = _Check()
    libbpf = _Check()
    btf = _Check()
    ringbuf = _Check()
    tp_btf = _Check()
    fentry = _Check()
    fexit = _Check()
    kprobes = _Check()
    cookies = _Check()
    uprobe_ref_ctr = _Check()
    tracefs = _Check()
    filter_functions = _Check()
    lockdown = _Check()
    bpf_stats = _Check()

    def __init__(self, *, mount: bool = True) -> None:
        self.mount = mount
        self._results: dict[str, Result] = {}

    def check(self, name: str) -> Result:
        """The result of check ``name`` (one of :data:`CHECKS`), measured on first use."""
        if name not in CHECKS:
            raise KeyError(f"unknown feature {name!r}; known: {', '.join(CHECKS)}")
        result = self._results.get(name)
        if result is None:
            probe: Callable[[], Result] = getattr(self, "_probe_" + name)
            try:
                result = probe()
            except Exception as exc:  # never let one check break the report (or print a traceback)
                result = Result(name, False, f"check failed: {type(exc).__name__}: {exc}",
                                _errno_name(getattr(exc, "errno", None)))
            self._results[name] = result
        return result

    def detect(self) -> dict[str, Result]:
        """Run every check (cached); name -> Result in report order."""
        return {name: self.check(name) for name in CHECKS}

    # -- static facts -------------------------------------------------------

    def _probe_kernel(self) -> Result:
        u = os.uname()
        return Result("kernel", True, f"Linux {u.release} {u.machine} ({u.version})", value=u.release)

    def _probe_libbpf(self) -> Result:
        from pycore.native import libbpf as L

        major, minor = L.version()
        version = f"{major}.{minor}"
        try:
            consume_n = L.has("ring_buffer__consume_n")
        except Exception:  # out-of-line cffi raises ffi.error, not AttributeError, for a missing symbol
            consume_n = False
        if consume_n:
            newer = "ring_buffer__consume_n: yes"
        else:
            newer = "ring_buffer__consume_n: no (needs a libbpf newer than this; ring_buffer__consume is used)"
        return Result("libbpf", True, f"libbpf {version}; {newer}", value=version)

    def _probe_btf(self) -> Result:
        try:
            size = os.stat(BTF_VMLINUX).st_size
        except FileNotFoundError:
            return Result("btf", False, f"no {BTF_VMLINUX} (kernel built without CONFIG_DEBUG_INFO_BTF): "
                          "CO-RE needs a BTF file for this kernel, pass btf_custom_path= (e.g. from BTFHub)",
                          "ENOENT")
        try:
            modules = len([n for n in os.listdir(os.path.dirname(BTF_VMLINUX)) if n != "vmlinux"])
        except OSError:
            modules = 0
        return Result("btf", True, f"{BTF_VMLINUX}, {size / 1e6:.1f} MB; "
                      + (f"{modules} module BTF files" if modules else "no module BTF"))

    def _probe_uprobe_ref_ctr(self) -> Result:
        if os.path.exists(REF_CTR_FORMAT):
            return Result("uprobe_ref_ctr", True, f"{REF_CTR_FORMAT} exists: USDT semaphores are "
                          "incremented by the kernel while attached")
        return Result("uprobe_ref_ctr", False, f"no {REF_CTR_FORMAT} (needs Linux >= 4.20): USDT probes "
                      "guarded by a semaphore will not fire unless the semaphore is set by hand", "ENOENT")

    def _probe_ringbuf(self) -> Result:
        from pycore.native import libbpf as L

        ret = L.lib.libbpf_probe_bpf_map_type(_BPF_MAP_TYPE_RINGBUF, L.ffi.NULL)
        if ret > 0:
            return Result("ringbuf", True, "libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF) created one")
        if ret == 0:
            return Result("ringbuf", False, "BPF_MAP_TYPE_RINGBUF not supported (needs Linux >= 5.8): "
                          "tools would need perf buffers")
        return Result("ringbuf", False, f"libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF): "
                      f"{L.error_text(ret)}", _errno_name(-ret))

    # -- filesystems ----------------------------------------------------------

    def _probe_tracefs(self) -> Result:
        from pycore.kernel.tracefs import TRACEFS, _is_tracefs, find_tracefs

        was_mounted = _is_tracefs(TRACEFS)
        fs, why = find_tracefs(mount=self.mount)
        if fs is None:
            return Result("tracefs", False, f"{why}: as root, mount -t tracefs nodev {TRACEFS}", value=None)
        try:
            fs.read_bytes("events", "syscalls", "sys_enter_getpid", "id")
            readable = "events/*/id readable"
        except OSError as exc:
            return Result("tracefs", False, f"{fs.root}: events/syscalls/sys_enter_getpid/id: "
                          f"{os.strerror(exc.errno or 0)}", _errno_name(exc.errno), fs.root)
        how = "" if was_mounted or fs.root != TRACEFS else " (mounted now by pycore)"
        return Result("tracefs", True, f"{fs.root}{how}; {readable}", value=fs.root)

    def _probe_filter_functions(self) -> Result:
        tracefs = self.tracefs
        if not tracefs:
            return Result("filter_functions", False, "no tracefs (see tracefs)", "ENOENT")
        path = os.path.join(tracefs.value or "", "available_filter_functions")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError as exc:
            advice = ("ftrace function tracing is blocked here; kfuncs are listed from BTF instead"
                      if exc.errno == errno.EPERM else "kfuncs are listed from BTF instead")
            return Result("filter_functions", False, f"read {path}: {_errno_name(exc.errno)}: {advice}",
                          _errno_name(exc.errno))
        return Result("filter_functions", True, f"{path} readable")

    def _probe_lockdown(self) -> Result:
        mounted_now = ""
        if not os.path.exists(LOCKDOWN) and self.mount and os.geteuid() == 0 and os.path.isdir(SECURITYFS) \
                and not os.listdir(SECURITYFS):
            if _mount("securityfs", SECURITYFS) is None:
                mounted_now = " (securityfs mounted now by pycore)"
        try:
            with open(LOCKDOWN) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return Result("lockdown", True, f"no {LOCKDOWN} (securityfs not mounted or no lockdown LSM): "
                          "assuming none", value="unknown")
        except OSError as exc:
            return Result("lockdown", True, f"read {LOCKDOWN}: {_errno_name(exc.errno)}: assuming none",
                          _errno_name(exc.errno), "unknown")
        mode = next((w[1:-1] for w in text.split() if w.startswith("[")), text)
        if mode == "confidentiality":
            return Result("lockdown", False, "confidentiality: the kernel refuses bpf_probe_read_kernel and "
                          "kernel-memory reads; most tracing tools will not work" + mounted_now, value=mode)
        meaning = {"none": "no restrictions",
                   "integrity": "kernel memory may be read, not written (bpf_probe_write_user refused)"}
        return Result("lockdown", True, f"{mode}: {meaning.get(mode, text)}{mounted_now}", value=mode)

    # -- syscalls -------------------------------------------------------------

    def _probe_bpf_stats(self) -> Result:
        from pycore.native import libbpf as L

        fd = L.lib.bpf_enable_stats(_BPF_STATS_RUN_TIME)
        if fd < 0:
            return Result("bpf_stats", False, f"bpf_enable_stats(BPF_STATS_RUN_TIME): {L.error_text(fd)} "
                          "(needs Linux >= 5.8 and CAP_SYS_ADMIN)", _errno_name(-fd))
        os.close(fd)
        try:
            with open("/proc/sys/kernel/bpf_stats_enabled") as f:
                sysctl = f.read().strip()
        except OSError:
            sysctl = "?"
        return Result("bpf_stats", True, "bpf_enable_stats(BPF_STATS_RUN_TIME) works: run_time_ns/run_cnt "
                      f"are counted while a tool holds the fd (sysctl kernel.bpf_stats_enabled={sysctl})")

    # -- trial loads ----------------------------------------------------------

    def _probe_tp_btf(self) -> Result:
        return self._trial("tp_btf", "feat_tp_btf", _FEAT_TP_BTF, lambda p: p.attach(), os.getpid)

    def _probe_fentry(self) -> Result:
        return self._trial("fentry", "feat_fentry", _FEAT_FENTRY, lambda p: p.attach(), _read_a_file)

    def _probe_fexit(self) -> Result:
        return self._trial("fexit", "feat_fexit", _FEAT_FEXIT, lambda p: p.attach(), _read_a_file)

    def _probe_kprobes(self) -> Result:
        return self._trial("kprobes", "feat_kprobe", _FEAT_KPROBE,
                           lambda p: p.attach_kprobe(TRAMPOLINE_TARGET), _read_a_file)

    def _probe_cookies(self) -> Result:
        self.tracefs  # noqa: B018 - the tracepoint attach needs tracefs mounted
        return self._trial("cookies", "feat_cookie", _FEAT_COOKIE,
                           lambda p: p.attach_tracepoint("syscalls", "sys_enter_getpid", cookie=_COOKIE),
                           os.getpid, expect=_COOKIE)

    def _trial(self, name: str, program: str, check: int, attach: Callable, trigger: Callable[[], object],
               expect: int | None = None) -> Result:
        """Load only ``program`` of features.bpf.o, attach it, trigger it and read what it saw."""
        from pycore.errors import BpfError
        from pycore.native.object import BpfObject
        from pycore.native.shipped import object_path

        with BpfObject(object_path("features")) as obj:
            prog = obj.programs[program]
            for p in obj.programs.values():
                p.autoload = p is prog
            tried = f"trial {prog.section.lstrip('?')}"
            try:
                obj.load()
            except BpfError as exc:
                return Result(name, False, f"{tried}: load: {self._why(name, exc)}", _errno_name(exc.errno))
            try:
                attach(prog)
            except BpfError as exc:
                return Result(name, False, f"{tried}: load ok, attach: {self._why(name, exc)}",
                              _errno_name(exc.errno))
            for _ in range(3):
                trigger()
            seen = _lookup_seen(obj, check)
        if expect is not None:
            if seen == expect:
                return Result(name, True, f"{tried}: attach cookie {expect:#x} read back by bpf_get_attach_cookie")
            return Result(name, False, f"{tried}: attached, but bpf_get_attach_cookie gave "
                          f"{'nothing' if seen is None else hex(seen)} instead of {expect:#x}")
        if seen is None:
            return Result(name, True, f"{tried}: loaded and attached (no event seen during the trial)")
        return Result(name, True, f"{tried}: loaded, attached and fired")

    def _why(self, name: str, exc: BaseException) -> str:
        """The error of a failed trial, with what it means on this kernel."""
        err = getattr(exc, "errno", 0) or 0
        what = f"{_errno_name(err)}"
        if name in ("fentry", "fexit"):
            if err == errno.EPERM:
                blocked = self.filter_functions.error == "EPERM"
                return (what + ": the kernel refuses BPF trampolines (fentry/fexit) despite our capabilities"
                        + ("; this sandbox blocks ftrace (available_filter_functions is EPERM too)" if blocked
                           else " (lockdown, an LSM or a sandbox blocking ftrace)")
                        + "; tools fall back to tp_btf/tracepoints, or run on a full kernel")
            if err in (_ENOTSUPP, errno.EOPNOTSUPP, errno.ENOTSUP):
                return what + ": no BPF trampoline on this kernel/arch (x86_64 needs >= 5.5, arm64 >= 6.0)"
            if err == errno.ESRCH:
                return what + f": {TRAMPOLINE_TARGET} not found in the kernel's BTF"
        if name == "kprobes":
            if not os.path.exists(KPROBE_PMU) and not _kprobe_events_exist():
                return (what + ": no kprobe PMU and no kprobe_events in tracefs: the kernel was built "
                        "without CONFIG_KPROBES; use fentry or tracepoints")
        if name == "cookies" and err == errno.EINVAL:
            return what + ": bpf_get_attach_cookie or attach cookies unsupported (needs Linux >= 5.15)"
        return what + f": {exc}"


def _lookup_seen(obj, check: int) -> int | None:
    from pycore.native import libbpf as L

    key = L.ffi.new("__u32[2]", [os.getpid(), check])
    value = L.ffi.new("__u64 *")
    if L.lib.bpf_map_lookup_elem(obj.maps["seen"].fd, key, value) != 0:
        return None
    return int(value[0])


def _read_a_file() -> None:
    """A read(2), which goes through vfs_read, the fentry/fexit/kprobe trial target."""
    fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.read(fd, 512)
    finally:
        os.close(fd)


def _kprobe_events_exist() -> bool:
    return any(os.path.exists(os.path.join(d, "kprobe_events"))
               for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"))


def _errno_name(err: int | None) -> str | None:
    if not err:
        return None
    from pycore.errors import describe_errno

    return describe_errno(err)[0]


def _mount(fstype: str, target: str) -> str | None:
    """mount -t FSTYPE nodev TARGET; an error message, or None on success."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.mount(b"nodev", target.encode(), fstype.encode(), 0, None) != 0:
        return f"mount -t {fstype} {target}: {os.strerror(ctypes.get_errno())}"
    return None


def kfunc_allowed(name: str, btf_id: int, prog_type: int) -> bool:
    """Whether a program of ``prog_type`` may call the kfunc ``name`` (its vmlinux BTF id), as
    bpftrace's ``kfunc_allowed()`` asks the kernel (BPFfeature::kfunc_allowed): a program of the call
    alone is loaded, and only the verifier's "calling kernel function NAME is not allowed" says no.
    Any other refusal is about the two-instruction program, not the kfunc (a tracing program with
    no attach target, a void kfunc's unset r0), and answers yes, as upstream's check does."""
    from pycore.asm import builders as B
    from pycore.asm import opcodes as op
    from pycore.asm.insn import Insn
    from pycore.errors import BpfError
    from pycore.native.program import load_program

    insns = [Insn(op.JMP | op.CALL, 0, op.PSEUDO_KFUNC_CALL, 0, btf_id), B.exit()]
    try:
        load_program(insns, prog_type, name="kfunc_allowed").close()
    except BpfError as e:
        return not any(f"calling kernel function {name} is not allowed" in line for line in e.log)
    return True
