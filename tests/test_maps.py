"""pycore.native.maps and pycore.native.globals on a real load of test_maps.bpf.o (getpid triggers it)."""

from __future__ import annotations

import os

import pytest

from conftest import require_root
from pycore.errors import BpfError
from pycore.native.object import BpfObject
from pycore.native.shipped import object_path

CALLS = 3
ADD = 5


@pytest.fixture(scope="module")
def obj():
    require_root()
    o = BpfObject(object_path("test_maps"))
    g = o.globals
    assert g["target_tgid"] == 0 and g["add_amount"] == 1 and g["data_counter"] == 42
    g["target_tgid"] = os.getpid()
    g["add_amount"] = ADD
    o.load()
    o.programs["tm_getpid"].attach()
    o.globals["bss_input"] = 99  # after load: through the mmap, seen by the program
    for _ in range(CALLS):
        os.getpid()
    o.detach()
    yield o
    o.close()


def test_hash_struct_key_value(obj) -> None:
    m = obj.maps["hash"]
    key = m.key_codec.cls(tgid=os.getpid(), slot=7)
    v = m[key]
    assert v.count == CALLS * ADD and v.neg == -5 and v.color.name == "TM_BLUE"
    assert v.comm == open("/proc/self/comm").read().strip()[:15]
    assert v.raw == b"\x01\x02\x00\xff"
    assert (v.inner.a, v.inner.b, v.inner.c) == (7, -2, os.getpid())
    assert (v.flag_a, v.flag_b, v.flag_c, v.sbits) == (1, 5, 0xABC, -3)
    assert v.u.word == 0x04030201 and v.u.bytes == b"\x01\x02\x03\x04"
    assert v.anon_a == 0x1122334455667788 and (v.x, v.y) == (3, 4)
    assert v.ok is True and v.shorts == [10, 20, 30] and v.ptr == 0xDEADBEEF and (v.f, v.d) == (1.5, -2.5)
    # every spelling of a key
    assert m[(os.getpid(), 7)] == m[{"tgid": os.getpid(), "slot": 7}] == m[m.encode_key(key)] == v
    assert key in m and (os.getpid(), 8) not in m and len(m) == 1
    assert list(m) == [key] and m.items() == [(key, v)] and m.values() == [v]
    assert m.get((1, 1)) is None and m.get((1, 1), "x") == "x"
    with pytest.raises(KeyError):
        m[(1, 1)]


def test_hash_write_delete_clear(obj) -> None:
    m = obj.maps["lru"]
    assert m[os.getpid()] == m.value_codec.cls(a=7, b=-2, c=os.getpid())
    m[1] = {"a": 1, "b": -1}
    m[2] = m.value_codec.cls(a=2, b=2, c=2)
    m.update({3: (3, 3, 3), 4: b"\x04\0\x04\0\x04\0\0\0"})
    assert m[1].b == -1 and m[3].c == 3 and m[4] == m.value_codec.cls(4, 4, 4)
    del m[1]
    assert 1 not in m and len(m) == 4
    with pytest.raises(KeyError):
        del m[1]
    m.clear()
    assert len(m) == 0 and m.items() == []


def test_array(obj) -> None:
    m = obj.maps["array"]
    assert len(m) == 4 and list(m) == [0, 1, 2, 3]
    assert m[1].count == CALLS * ADD and m[0].count == 0
    m[2] = m[1]
    assert m[2] == m[1]
    with pytest.raises(BpfError, match="test_maps.bpf.o: map array: delete"):
        del m[0]
    with pytest.raises(BpfError, match="map array"):
        m[9] = m[1]


def test_percpu(obj) -> None:
    ncpus = obj.maps["pcpu_array"].ncpus
    pa = obj.maps["pcpu_array"]
    assert len(pa[0]) == ncpus and pa.sum(0) == CALLS and pa.summed() == {0: CALLS, 1: 0}
    ph = obj.maps["pcpu_hash"]  # 12-byte values: 16 per CPU
    key = (os.getpid(), 7)
    total = ph.sum(key)
    assert total.a == CALLS and len(ph[key]) == ncpus
    lp = obj.maps["lru_pcpu"]  # 4-byte values: 8 per CPU
    assert lp.sum(os.getpid()) == CALLS
    lp[5] = list(range(ncpus))
    assert lp[5] == list(range(ncpus)) and lp.summed()[5] == sum(range(ncpus))
    lp[6] = 2  # one value for every CPU
    assert lp[6] == [2] * ncpus
    with pytest.raises(TypeError, match="not per-CPU"):
        obj.maps["hash"].sum(key)


def test_batch_reported(obj) -> None:
    m = obj.maps["pcpu_hash"]
    m.items()
    assert m.batch_used is True  # 6.18 has batch ops for hash maps
    assert obj.maps["array"].values() and obj.maps["array"].batch_used is not None


def test_raw_map_without_btf(obj) -> None:
    m = obj.maps["raw"]
    assert m.key_codec is None and m.value_codec is None
    m[1] = b"12345678"
    m[b"\2\0\0\0"] = 7
    assert m[1] == b"12345678" and m[2] == b"\7" + b"\0" * 7
    assert sorted(m) == [b"\1\0\0\0", b"\2\0\0\0"]
    with pytest.raises(ValueError, match="map raw: value is 3 bytes"):
        m[3] = b"abc"
    with pytest.raises(TypeError, match="no BTF"):
        m[3] = 1.5


def test_globals_after_load(obj) -> None:
    g = obj.globals
    assert g["calls"] == CALLS and g["data_counter"] == 42 + CALLS and g["bss_echo"] == 99
    assert g["data_name"] == "hello" and g["data_inner"].b == -1 and g["ro_color"].name == "TM_RED"
    assert g["target_tgid"] == os.getpid() and g.section("add_amount") == ".rodata"
    g["data_name"] = "bye"
    assert g["data_name"] == "bye"
    g["calls"] = 0
    assert obj.globals["calls"] == 0
    with pytest.raises(ValueError, match="const volatile"):
        g["target_tgid"] = 1
    with pytest.raises(KeyError, match=r"known: .*add_amount \(\.rodata\)"):
        g["nope"]


def test_ringbuf_not_dict_like() -> None:
    require_root()
    with BpfObject(object_path("selftest")) as o:
        o.programs["selftest_fexit_fget"].autoload = False
        o.load()
        with pytest.raises(TypeError, match="ringbuf"):
            o.maps["events"][0]
        assert o.maps["syscall_counts"].items() == []
