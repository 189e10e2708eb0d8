"""perf_event_open, and a BPF program attached to a perf event.

Tracepoints, kprobes, uprobes and sampling events (profile, interval) are
all perf events; a program is attached to one as libbpf does it
(``bpf_program__attach_perf_event_opts``): by ``bpf_link_create(prog,
perf_fd, BPF_PERF_EVENT)`` where the kernel has perf links (Linux >= 5.15;
detached by closing the link), else by ``PERF_EVENT_IOC_SET_BPF``; either
way the event is then enabled with ``PERF_EVENT_IOC_ENABLE``.

``struct perf_event_attr`` is packed here at its version-5 size (112 bytes,
Linux >= 4.17): the kernel accepts any size it knows, and the fields after
are ones we never set.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from pycore.errors import BpfError
from pycore.native import libbpf as L
from pycore.native.libbpf import AttachType
from pycore.record import record

__all__ = ["PerfEventAttr", "perf_event_open", "attach_bpf", "PERF_TYPE_HARDWARE", "PERF_TYPE_SOFTWARE",
           "PERF_TYPE_TRACEPOINT", "PERF_TYPE_BREAKPOINT", "PERF_COUNT_SW_CPU_CLOCK", "PERF_COUNT_SW_TASK_CLOCK", "PERF_FLAG_FD_CLOEXEC",
           "ATTR_SIZE"]

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT, PERF_TYPE_HW_CACHE, PERF_TYPE_RAW = 0, 1, 2, 3, 4
PERF_TYPE_BREAKPOINT = 5
PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK = 0, 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE = 0x2400, 0x2401
PERF_EVENT_IOC_SET_BPF = 0x40042408           # _IOW('$', 8, __u32)
ATTR_SIZE = 112                               # PERF_ATTR_SIZE_VER5

# attr flag bits (the bitfield word at offset 40)
FLAG_DISABLED, FLAG_INHERIT, FLAG_EXCLUDE_USER, FLAG_EXCLUDE_KERNEL, FLAG_FREQ = 1 << 0, 1 << 1, 1 << 4, 1 << 5, 1 << 10

# __NR_perf_event_open per architecture
_SYSCALL = {"x86_64": 298, "aarch64": 241, "arm64": 241, "riscv64": 241, "loongarch64": 241, "ppc64le": 319,
            "ppc64": 319, "s390x": 331, "i686": 336, "i386": 336, "armv7l": 364, "mips64": 5292}

_ATTR = struct.Struct("<IIQQQQQIIQQ")     # type .. config2: the fields we set, 72 bytes
_perf_link: bool | None = None            # whether this kernel has BPF_PERF_EVENT links (None: not tried)


@record
class PerfEventAttr:
    """The fields of ``struct perf_event_attr`` a tracer sets.

    ``config1``/``config2`` are ``kprobe_func``/``probe_offset`` for the
    kprobe and uprobe PMUs: ``config1`` may be ``bytes`` (a function name or
    path), kept alive and passed by address while the event is opened.
    """

    type: int
    config: int = 0
    sample_period: int = 0          # or sample_freq, with freq=True
    freq: bool = False
    sample_type: int = 0
    flags: int = 0                  # FLAG_* bits besides freq
    wakeup_events: int = 0
    config1: int | bytes = 0
    config2: int = 0
    bp_type: int = 0                # PERF_TYPE_BREAKPOINT: HW_BREAKPOINT_R/W/X (config1: address, config2: length)

    def pack(self, config1_address: int = 0) -> bytes:
        """The 112-byte attr (``config1_address`` replaces a bytes ``config1``)."""
        config1 = config1_address if isinstance(self.config1, bytes) else self.config1
        flags = self.flags | (FLAG_FREQ if self.freq else 0)
        head = _ATTR.pack(self.type, ATTR_SIZE, self.config, self.sample_period, self.sample_type, 0, flags,
                          self.wakeup_events, self.bp_type, config1, self.config2)
        return head + bytes(ATTR_SIZE - len(head))


def perf_event_open(attr: PerfEventAttr, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC, *, what: str = "") -> int:
    """A perf event fd (the caller owns it); BpfError naming ``what`` on failure."""
    machine = os.uname().machine   # what platform.machine() returns, without importing platform (~2 ms)
    nr = _SYSCALL.get(machine)
    if nr is None:
        raise BpfError(f"{what or 'perf_event_open'}: perf_event_open", errno.ENOSYS,
                       hint=f"no syscall number known for {machine}")
    ffi = L.ffi
    name = ffi.new("char[]", attr.config1) if isinstance(attr.config1, bytes) else ffi.NULL
    raw = ffi.new("char[]", attr.pack(int(ffi.cast("uintptr_t", name))))
    fd = L.libc.syscall(ffi.cast("long", nr), ffi.cast("void *", raw), ffi.cast("int", pid), ffi.cast("int", cpu),
                        ffi.cast("int", group_fd), ffi.cast("unsigned long", flags))
    if fd < 0:
        err = ffi.errno
        raise BpfError(f"{what or 'perf event'}: perf_event_open (pid {pid}, cpu {cpu})", err, hint=_open_hint(err))
    return int(fd)


def _open_hint(err: int) -> str:
    if err == errno.EACCES or err == errno.EPERM:
        return "needs CAP_PERFMON or root (see /proc/sys/kernel/perf_event_paranoid)"
    if err == errno.ENOENT:
        return "no such event, function or file"
    if err == errno.EMFILE:
        return "too many open files (ulimit -n)"
    return ""


def attach_bpf(prog_fd: int, perf_fd: int, *, cookie: int = 0, what: str = "") -> int | None:
    """Run ``prog_fd`` on the event's hits; returns the bpf_link fd, or None when attached by ioctl.

    With an ioctl attachment the perf fd holds the program: closing it detaches.
    """
    global _perf_link
    link_fd = None
    if _perf_link is not False and L.has("bpf_link_create"):
        opts = L.ffi.new("struct bpf_link_create_opts *", {"sz": L.ffi.sizeof("struct bpf_link_create_opts")})
        opts.perf_event.bpf_cookie = cookie
        ret = L.lib.bpf_link_create(prog_fd, perf_fd, AttachType.PERF_EVENT, opts)
        if ret >= 0:
            _perf_link = True
            link_fd = ret
        elif _perf_link is None and -ret in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS, 524):
            _perf_link = False   # a kernel before 5.15: the old way, from now on
        else:
            raise BpfError(f"{what}: bpf_link_create(BPF_PERF_EVENT)", -ret, hint=_attach_hint(-ret))
    if link_fd is None:
        if cookie:
            raise BpfError(f"{what}: attach with a BPF cookie", errno.EOPNOTSUPP,
                           hint="cookies need perf links (Linux >= 5.15)")
        try:
            fcntl.ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, prog_fd)
        except OSError as exc:
            raise BpfError(f"{what}: ioctl(PERF_EVENT_IOC_SET_BPF)", exc.errno or errno.EINVAL,
                           hint=_attach_hint(exc.errno or 0)) from None
    try:
        fcntl.ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0)
    except OSError as exc:
        if link_fd is not None:
            os.close(link_fd)
        raise BpfError(f"{what}: ioctl(PERF_EVENT_IOC_ENABLE)", exc.errno or errno.EINVAL) from None
    return link_fd


def _attach_hint(err: int) -> str:
    if err == errno.EINVAL:
        return "the program's type does not match the event (kprobe/uprobe: kprobe, tracepoint: tracepoint, " \
               "sampling: perf_event)"
    if err == errno.EEXIST:
        return "a program is already attached to this event"
    return ""
