"""User-space binaries: ELF files, their symbols, USDT notes, interpreters.

- :mod:`~pycore.elf.file`: the ELF view the others share (segments, sections; malformed input is an :class:`~pycore.errors.ElfError`)
- :mod:`~pycore.elf.symbols`: functions, demangling, ``FUNC+OFF`` checks, uprobe attach
- :mod:`~pycore.elf.stapsdt`: ``.note.stapsdt`` notes and their argument specs
- :mod:`~pycore.elf.usdt`: USDT probes of a file or process, attached with pycore's own argument reader
- :mod:`~pycore.elf.cpython`: CPython's frame layouts, for py-calls
- :mod:`~pycore.elf.debugfile`: a binary's separate debug file (build id, ``.gnu_debuglink``)
- :mod:`~pycore.elf.dwarf`: a binary's DWARF: functions' parameters and named types as split BTF,
  ``bpftrace -lv``'s parameter lines, a whole-file index cached by build id
  (:mod:`~pycore.elf.dwarfbtf` converts DIEs, :mod:`~pycore.elf.dwarfscan` reads them fast for the index)

May import: :mod:`pycore.errors`, :mod:`btf`, :mod:`pycore.native`, :mod:`pycore.kernel`.
"""
