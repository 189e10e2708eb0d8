"""Signal names as ``signal()`` and ``signal_thread()`` take them, with bpftrace's rules.

bpftrace (0.23.2's ``signal_name_to_num``) knows these 28 names, case-insensitively, with or without
``SIG``; a name that starts with ``S`` is taken as already prefixed, so ``"STOP"`` is no signal there
and none here either.  The numbers are this machine's (Python's :mod:`signal`), as bpftrace's are its
libc's.
"""

from __future__ import annotations

import signal as _signal

__all__ = ["signal_number"]

_NAMES = ("SIGABRT", "SIGALRM", "SIGBUS", "SIGCHLD", "SIGCONT", "SIGFPE", "SIGHUP", "SIGILL", "SIGINT",
          "SIGKILL", "SIGPIPE", "SIGPOLL", "SIGQUIT", "SIGSEGV", "SIGSTOP", "SIGSYS", "SIGTERM", "SIGTRAP",
          "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGUSR1", "SIGUSR2", "SIGVTALRM", "SIGWINCH", "SIGXCPU",
          "SIGXFSZ")
_NUMBERS = {name: int(getattr(_signal, name)) for name in _NAMES if hasattr(_signal, name)}


def signal_number(name: str) -> int:
    """The signal ``name`` names, or -1."""
    if not name:
        return -1
    name = name.upper()
    if name[0] != "S":
        name = "SIG" + name
    return _NUMBERS.get(name, -1)
