"""agent-template: a pycore agent that brings its own BPF program.

counter.bpf.c (beside this file in the source tree) is compiled at build time
by pycore_add_bpf_object() into counter.bpf.o, with its typed skeleton
counter_skel.py; both are installed in this package. The agent needs no
compiler at run time, only pycore and the kernel.
"""

__version__ = "0.1.0"
