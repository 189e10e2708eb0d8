"""Lowering: one checked probe body to BPF instructions, no compiler involved.

The generated code is deliberately plain, so that the verifier can follow
it and a reader of ``pycore trace -v`` can too:

* ``r9`` holds the context, ``r8`` this CPU's scratch buffer (a per-CPU
  array value, looked up once at entry), ``r6``/``r7`` survive helper calls
  for map values; ``r0``-``r5`` are free between statements.
* A scalar expression leaves its value in ``r0``; an operand that must
  survive the other side's evaluation is spilled to an 8-byte stack slot.
* Strings, map keys, values and event records live in the scratch buffer
  (the 512-byte stack would not hold a script's strings); a string
  expression is written into a destination region, zeroed first, so keys
  built from strings hash the same whatever garbage preceded them (a
  printf's string that a helper writes with its NUL is not: the runtime
  reads it up to the NUL).
* Output (printf, print, exit, time, clear...) is a record in the ring
  buffer: a u64 tag, then the arguments, each 8 bytes or a whole string
  (a printf record that ends with a string: up to its NUL); the runtime
  formats it.  A full ring counts a lost event.
* Aggregations go to per-CPU hash maps (count, sum, min, max, avg, stats,
  hist, lhist: the runtime adds the CPUs up); plain ``@m = v`` to a hash.

Integer semantics are bpftrace's: 64-bit arithmetic, narrower fields sign-
or zero-extended when read, signed comparison and shift only when both
sides are signed.

The stage is one tree walk, cut by concern into mixins of :class:`~pycore.lang.lower.gen.Gen`:

* :mod:`~pycore.lang.lower.layout`: what a script's programs share (maps, actions, record
  tags) and the frame of stack slots and scratch regions;
* :mod:`~pycore.lang.lower.statements`: the prologue, statements, assignments, variables;
* :mod:`~pycore.lang.lower.exprs`: scalar expressions, builtins, fields, memory reads;
* :mod:`~pycore.lang.lower.strings`: strings and other values built into scratch;
* :mod:`~pycore.lang.lower.maps`: keys, map reads and writes, aggregations;
* :mod:`~pycore.lang.lower.calls`: output records and calls with values.
"""

from pycore.lang.lower.gen import generate
from pycore.lang.lower.layout import (SCRATCH_SIZE, TAG_CAT, TAG_CLEAR, TAG_EXIT, TAG_JOIN, TAG_PRINT_MAP, TAG_PRINT_VALUE,
                                      TAG_PRINTF, TAG_SYSTEM, TAG_TIME, TAG_ZERO, TAG_HELPER_ERROR, Action, Layout)

__all__ = ["Layout", "Action", "generate", "SCRATCH_SIZE", "TAG_EXIT", "TAG_PRINT_MAP", "TAG_CLEAR", "TAG_ZERO",
           "TAG_TIME", "TAG_PRINT_VALUE", "TAG_PRINTF", "TAG_JOIN", "TAG_SYSTEM", "TAG_CAT", "TAG_HELPER_ERROR"]
