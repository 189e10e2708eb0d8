"""The ``.BTF`` section of an ELF object (our ``.bpf.o`` files, vmlinux images)."""

from __future__ import annotations

import io

from .errors import BtfError


def btf_section(data: bytes, name: str = "<bytes>") -> bytes:
    """The raw bytes of the ``.BTF`` section; BtfError if there is none or the ELF is bad."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        section = elf.get_section_by_name(".BTF")
        if section is None:
            raise BtfError(f"{name}: ELF file has no .BTF section (build with clang -g)")
        if section["sh_type"] == "SHT_NOBITS":
            raise BtfError(f"{name}: .BTF section has no contents")
        return section.data()
    except BtfError:
        raise
    except (ELFError, ValueError, KeyError, IndexError, EOFError, OSError) as exc:
        raise BtfError(f"{name}: malformed ELF: {exc}") from None
    except Exception as exc:  # pyelftools raises assorted types on corrupt input
        raise BtfError(f"{name}: malformed ELF: {type(exc).__name__}: {exc}") from None
