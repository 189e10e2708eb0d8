"""Signal names as ``signal()`` and ``signal_thread()`` take them, with bpftrace's rules, and the
text ``signal_name(sig)`` gives.

bpftrace (0.23.2's ``signal_name_to_num``) knows these 28 names, case-insensitively, with or without
``SIG``; a name that starts with ``S`` is taken as already prefixed, so ``"STOP"`` is no signal there
and none here either.  The numbers are this machine's (Python's :mod:`signal`), as bpftrace's are its
libc's.
"""

from __future__ import annotations

import signal as _signal

__all__ = ["signal_name", "signal_number"]

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


#: strsignal(3)'s text for 0 to 64, as bpftrace 0.26's ``signal_name()`` copies it from its table
#: (src/stdlib/strings/signal.h): glibc's words, 32 and 33 "Unknown" (the C library's own real-time
#: signals), then "Real-time signal 0" to 30.  Fixed text, not this libc's: the value bpftrace prints.
_TEXTS = ("Unknown signal 0", "Hangup", "Interrupt", "Quit", "Illegal instruction", "Trace/breakpoint trap",
          "Aborted", "Bus error", "Floating point exception", "Killed", "User defined signal 1",
          "Segmentation fault", "User defined signal 2", "Broken pipe", "Alarm clock", "Terminated",
          "Stack fault", "Child exited", "Continued", "Stopped (signal)", "Stopped", "Stopped (tty input)",
          "Stopped (tty output)", "Urgent I/O condition", "CPU time limit exceeded", "File size limit exceeded",
          "Virtual timer expired", "Profiling timer expired", "Window changed", "I/O possible", "Power failure",
          "Bad system call", "Unknown signal 32", "Unknown signal 33",
          *(f"Real-time signal {n}" for n in range(31)))


def signal_name(sig: int) -> str:
    """``signal_name(sig)``'s text (bpftrace 0.26): the signal's description, "N/A" past 0-64. The
    number is taken as bpftrace's ``(int32)sig``: its low 32 bits, signed."""
    sig &= 0xFFFFFFFF
    return _TEXTS[sig] if sig < len(_TEXTS) else "N/A"
