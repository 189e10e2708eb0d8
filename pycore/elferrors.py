"""Errors from reading ELF files that users point pycore at.

pyelftools trusts a file's tables: on a corrupt one it fails with whatever
its parsing ran into (ELFError, a negative seek's OSError, struct.error,
IndexError, KeyError, UnicodeDecodeError, ...), and much of its reading is
lazy, so the failure can come long after the file was opened.  For pycore a
corrupt executable or library is bad input, reported in one line with exit
status 2, so every read of such a file runs under :func:`elf_errors`.
(tests/test_elf_fuzz.py mutates real binaries to keep this true.)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager

from .stapsdt import UsdtError

__all__ = ["elf_errors"]


@contextmanager
def elf_errors(path: str) -> Iterator[None]:
    """Turn what reading ``path`` with pyelftools raises into :class:`UsdtError`."""
    from elftools.common.exceptions import ELFError

    try:
        yield
    except UsdtError:
        raise
    except OSError as e:
        if e.filename is not None:      # open() itself: missing, not allowed, a directory
            raise UsdtError(f"{path}: {e.strerror}") from None
        # a seek or read at an offset the file's tables made up (seek(-1): EINVAL)
        raise UsdtError(f"{path}: malformed ELF: {e.strerror or e} while reading it") from None
    except (ELFError, struct.error, ValueError, KeyError, IndexError, OverflowError, RecursionError) as e:
        raise UsdtError(f"{path}: malformed ELF: {e}"[:300]) from None
