"""Whether this process may load and attach BPF programs.

Checked up front so that commands can say so in one line instead of
failing deep inside libbpf with EPERM.  Tracing needs CAP_BPF and
CAP_PERFMON (Linux >= 5.8) or, on any kernel, CAP_SYS_ADMIN.
"""

from __future__ import annotations

__all__ = ["CAP_SYS_ADMIN", "CAP_PERFMON", "CAP_BPF", "effective_capabilities", "missing_privileges"]

CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39

_NAMES = {CAP_SYS_ADMIN: "CAP_SYS_ADMIN", CAP_PERFMON: "CAP_PERFMON", CAP_BPF: "CAP_BPF"}


def effective_capabilities(status: str = "/proc/self/status") -> int:
    """The CapEff bit mask of this process (0 if it cannot be read)."""
    try:
        with open(status) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def missing_privileges(capeff: int | None = None) -> str | None:
    """None if we can trace; otherwise a one-line explanation for the user."""
    caps = effective_capabilities() if capeff is None else capeff

    def has(cap: int) -> bool:
        return bool(caps >> cap & 1)

    if has(CAP_SYS_ADMIN) or (has(CAP_BPF) and has(CAP_PERFMON)):
        return None
    held = [name for cap, name in sorted(_NAMES.items()) if has(cap)]
    missing = [_NAMES[cap] for cap in (CAP_BPF, CAP_PERFMON) if not has(cap)]
    return ("needs root, or CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN): missing " + ", ".join(missing)
            + "; this process has " + (", ".join(held) if held else "none of them") + " (run it with sudo)")
