"""``pycore profile``: on-CPU sampling with kernel, native and CPython frames in one stack.

A layer above ``elf``/``kernel``/``link``/``native`` and beside ``tools``
(it imports neither ``tools`` nor ``lang``).  One module per concern:

- :mod:`~pycore.profile.sampler`: the BPF object (``bpf_src/profile/profile.bpf.c``),
  one CPU-clock perf event per CPU, the ring buffer drained into raw samples;
- :mod:`~pycore.profile.pyframes`: CPython code objects read from the target's
  memory, and 3.11's line table (``co_linetable``);
- :mod:`~pycore.profile.cfi`: native stacks unwound with ``.eh_frame`` from a copy
  of the user stack (code without frame pointers);
- :mod:`~pycore.profile.unwind`: raw records counted and turned into named stacks;
- :mod:`~pycore.profile.symbols`: kernel addresses from kallsyms, user ones
  from the process's maps and its ELF files (read through ``/proc/PID/root``);
- :mod:`~pycore.profile.stacks`: frames, the splice of Python frames into the
  native stack, and the :class:`~pycore.profile.stacks.Profile` aggregate;
- the formats, each its own module: :mod:`~pycore.profile.folded`,
  :mod:`~pycore.profile.top`, :mod:`~pycore.profile.pprof`,
  :mod:`~pycore.profile.speedscope`, :mod:`~pycore.profile.html`;
- :mod:`~pycore.profile.session`: ``pycore.profile(...)``, the same inside a Python program.

``pycore.profile`` is both this package and the API's function: the import
system sets the package as the ``profile`` attribute of ``pycore`` once any of
its modules is imported, so the package itself is made callable (its module
class gets a ``__call__`` that is :func:`~pycore.profile.session.profile`)
rather than have ``pycore.profile`` change meaning with what was imported.
"""

import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204 - profile()'s own signature
        from pycore.profile.session import profile

        return profile(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
