"""The precompiled cffi module matches the declarations it was generated from."""

from pycore.native import libbpf
from pycore.native import cdef as libbpf_cdef


def test_generated_module_is_current() -> None:
    with open(libbpf_cdef.GENERATED) as f:
        committed = f.read()
    assert committed == libbpf_cdef.generate(), "run: python -m pycore.native.cdef"


def test_struct_layouts_match_libbpf_1_1() -> None:
    # Sizes of libbpf 1.1's option structs on x86-64 (from /usr/include/bpf/libbpf.h).
    ffi = libbpf.ffi
    assert ffi.sizeof("struct bpf_object_open_opts") == 80
    assert ffi.offsetof("struct bpf_object_open_opts", "btf_custom_path") == 48
    assert ffi.sizeof("struct bpf_uprobe_opts") == 40
    assert ffi.sizeof("struct bpf_kprobe_opts") == 32


def test_has_probes_symbols() -> None:
    assert libbpf.has("ring_buffer__poll")
    assert not libbpf.has("no_such_libbpf_symbol")


def test_bpf_prog_info_prefix_matches_kernel_btf() -> None:
    """Our prefix of struct bpf_prog_info (pycore.native.progstats) has the kernel's offsets."""
    import os

    import pytest

    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("no kernel BTF")
    from btf import Spec

    with open("/sys/kernel/btf/vmlinux", "rb") as f:
        spec = Spec(f.read())
    kernel = {m.name: m.bit_offset // 8 for m in spec.type(spec.ids_named("bpf_prog_info")[0]).members}
    ffi = libbpf.ffi
    for name, _ in ffi.typeof("struct bpf_prog_info").fields:
        assert ffi.offsetof("struct bpf_prog_info", name) == kernel[name], name
    assert kernel["run_cnt"] == 200
