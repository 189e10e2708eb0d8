"""pycore's exceptions: what failed, on which object/program, and why."""

from __future__ import annotations

import errno as _errno
import os


# libbpf's own error numbers (libbpf.h, enum libbpf_errno).
LIBBPF_ERRORS = {
    4000: ("LIBBPF_ERRNO__LIBELF", "something wrong in libelf"),
    4001: ("LIBBPF_ERRNO__FORMAT", "not a valid BPF ELF object"),
    4002: ("LIBBPF_ERRNO__KVERSION", "kernel version section missing or wrong"),
    4003: ("LIBBPF_ERRNO__ENDIAN", "object's byte order does not match the host"),
    4004: ("LIBBPF_ERRNO__INTERNAL", "libbpf internal error"),
    4005: ("LIBBPF_ERRNO__RELOC", "relocation failed"),
    4006: ("LIBBPF_ERRNO__LOAD", "program load failed"),
    4007: ("LIBBPF_ERRNO__VERIFY", "rejected by the kernel verifier"),
    4008: ("LIBBPF_ERRNO__PROG2BIG", "program too big"),
    4009: ("LIBBPF_ERRNO__KVER", "incorrect kernel version"),
    4010: ("LIBBPF_ERRNO__PROGTYPE", "kernel does not support this program type"),
    4011: ("LIBBPF_ERRNO__WRNGPID", "wrong pid in netlink message"),
    4012: ("LIBBPF_ERRNO__INVSEQ", "invalid netlink sequence"),
    4013: ("LIBBPF_ERRNO__NLPARSE", "netlink parse error"),
}


def describe_errno(err: int) -> tuple[str, str]:
    """(symbolic name, text) for a kernel or libbpf error number."""
    err = abs(err)
    if err in LIBBPF_ERRORS:
        return LIBBPF_ERRORS[err]
    return _errno.errorcode.get(err, f"errno {err}"), os.strerror(err)


class PycoreError(Exception):
    """Base of pycore's errors; ``str()`` is a one-line message fit for users."""


class BpfError(PycoreError, OSError):
    """A libbpf or kernel call failed.

    ``errno`` is the positive error number; ``log`` the tail of libbpf's and
    the verifier's output captured during the call, if any.
    """

    def __init__(self, what: str, err: int, log: list[str] | None = None, hint: str = "") -> None:
        err = abs(err) or _errno.EINVAL
        name, text = describe_errno(err)
        message = f"{what}: {name}: {text}"
        if hint:
            message += f" ({hint})"
        OSError.__init__(self, err, message)
        self.what = what
        self.log = log or []
        self.message = message

    def __str__(self) -> str:
        return self.message

    def verifier_tail(self, lines: int = 20) -> str:
        """The last lines of the verifier log, if the failure produced one."""
        # libbpf prints the whole verifier log as one message: split it into lines first
        log = "\n".join(self.log).splitlines()
        for i, line in enumerate(log):
            if "BEGIN PROG LOAD LOG" in line:
                end = next((j for j in range(i + 1, len(log)) if "END PROG LOAD LOG" in log[j]), len(log))
                return "\n".join(log[i + 1:end][-lines:])
        return "\n".join(log[-lines:])


class ElfError(PycoreError, ValueError):
    """An executable or library that cannot be read as needed: missing, not ELF, malformed, no such symbol."""


class FeatureMissing(PycoreError):
    """The running kernel lacks something a probe or tool needs."""

    def __init__(self, feature: str, advice: str) -> None:
        super().__init__(f"this kernel cannot {feature}: {advice}")
        self.feature = feature
        self.advice = advice


class PinError(PycoreError):
    """Pinned state that cannot be used: a pin directory off bpffs, an unreadable pin, ..."""


class PinMismatch(PinError, ValueError):
    """A map pinned by an earlier build whose layout differs from this object's map.

    ``map`` is the map's name, ``path`` the pin, ``differences`` what differs
    (pinned first, e.g. ``value size 16 != 24``), ``pin_dir`` the directory
    to clean.
    """

    def __init__(self, message: str, map: str, path: str, differences: list[str], pin_dir: str) -> None:
        super().__init__(message)
        self.map = map
        self.path = path
        self.differences = differences
        self.pin_dir = pin_dir


class BuildError(PycoreError):
    """A BPF object could not be built: no compiler, no headers, no BTF, or the compiler refused the source.

    Raised by the build helper (:mod:`pycore.build`, build time only); it lives here with the rest of
    the tree so that ``pycore.BuildError`` is importable without importing the build helper."""


class Closed(PycoreError, ValueError):
    """A session, object, map, ring buffer or link used after ``close()``: one error for all of them,
    naming the public object (``ToolSession fget-crack is closed``), never an internal map of it."""

    def __init__(self, what: str, action: str = "") -> None:
        super().__init__(f"{what} is closed" + (f" (cannot {action})" if action else ""))
        self.what = what
