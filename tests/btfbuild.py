"""The tests' BTF assembler is the package's writer (:mod:`btf.writer`)."""

from btf.writer import Writer as Builder

__all__ = ["Builder"]
