"""pycore.native.codec on the BTF of the shipped test_maps.bpf.o: every shape, both ways."""

from __future__ import annotations

import dataclasses
import enum
import struct

import pytest

from pycore.native.codec import UnsupportedType, decoder_for
from pycore.native.object import BpfObject
from pycore.native.shipped import object_path

from btf.kinds import Kind


@pytest.fixture(scope="module")
def spec():
    with BpfObject(object_path("test_maps")) as obj:
        yield obj.btf


def sample(spec):
    c = decoder_for(spec, "tm_value")
    V = c.cls
    return c, V(count=15, neg=-5, color="TM_BLUE", comm="python", raw=b"\x01\x02\x00\xff",
                inner={"a": 7, "b": -2, "c": 1234}, flag_a=1, flag_b=5, flag_c=0xABC, sbits=-3,
                u={"word": 0x04030201}, anon_a=0x1122334455667788, x=3, y=4, ok=True,
                shorts=[10, 20, 30], ptr=0xDEADBEEF, f=1.5, d=-2.5)


def test_dataclass_generated(spec) -> None:
    c = decoder_for(spec, "struct tm_value")
    assert c.size == 104 and c.cls.__name__ == "TmValue"
    assert dataclasses.is_dataclass(c.cls) and hasattr(c.cls, "__slots__")
    names = [f.name for f in dataclasses.fields(c.cls)]
    assert names == ["count", "neg", "color", "comm", "raw", "inner", "flag_a", "flag_b", "flag_c", "sbits",
                     "u", "anon_a", "anon_b", "x", "y", "ok", "shorts", "ptr", "f", "d"]
    assert decoder_for(spec, "tm_value") is c  # one codec, one class per type
    z = c.cls()
    assert z.count == 0 and z.comm == "" and z.raw == b"\0" * 4 and z.inner == decoder_for(spec, "tm_inner").cls()


def test_decode_every_shape(spec) -> None:
    c, v = sample(spec)
    raw = c.encode(v)
    # the layout C gives it, written by hand once here as the oracle
    assert raw[0:8] == struct.pack("<Q", 15)
    assert raw[8:16] == struct.pack("<iI", -5, 40)
    assert raw[16:32] == b"python" + b"\0" * 10
    assert raw[32:44] == b"\x01\x02\x00\xff" + struct.pack("<HhI", 7, -2, 1234)
    assert struct.unpack_from("<I", raw, 44)[0] == 1 | 5 << 1 | 0xABC << 4 | (-3 & 0x1F) << 16
    d = c.decode(raw)
    assert d.count == 15 and d.neg == -5
    color = decoder_for(spec, "tm_color").decode(struct.pack("<I", 40))
    assert isinstance(color, enum.IntEnum) and color.name == "TM_BLUE" and d.color is color
    assert d.comm == "python" and d.raw == b"\x01\x02\x00\xff"
    assert (d.inner.a, d.inner.b, d.inner.c) == (7, -2, 1234)
    assert (d.flag_a, d.flag_b, d.flag_c, d.sbits) == (1, 5, 0xABC, -3)
    assert d.u.word == 0x04030201 and d.u.bytes == b"\x01\x02\x03\x04"  # union: every member
    assert d.anon_a == 0x1122334455667788 and d.anon_b == [0x55667788, 0x11223344]  # anonymous union
    assert (d.x, d.y) == (3, 4)  # anonymous struct
    assert d.ok is True and d.shorts == [10, 20, 30] and d.ptr == 0xDEADBEEF
    assert d.f == 1.5 and d.d == -2.5
    assert c.encode(d) == raw  # round trip through the dataclass


def test_unknown_enum_value_and_text(spec) -> None:
    c = decoder_for(spec, "tm_value")
    raw = bytearray(c.size)
    raw[12:16] = struct.pack("<I", 77)
    raw[16:32] = "héllo\xff".encode("utf-8")[:7] + b"\xff" + b"\0" * 8
    v = c.decode(raw)
    assert v.color == 77 and type(v.color) is int
    assert v.comm == "héllo\ufffd\ufffd"


def test_ints_and_names(spec) -> None:
    u32 = decoder_for(spec, "__u32")
    assert u32.size == 4 and u32.decode(b"\xff\xff\xff\xff") == 0xFFFFFFFF and u32.cls is None
    assert u32.encode(7) == b"\x07\0\0\0"
    with pytest.raises(ValueError):
        u32.encode(-1 << 40)
    key = decoder_for(spec, "tm_key")
    assert key.encode({"tgid": 1, "slot": 2}) == key.encode((1, 2)) == key.encode(key.cls(1, 2))
    with pytest.raises(ValueError, match="no field nope"):
        key.encode({"nope": 1})
    with pytest.raises(KeyError):
        decoder_for(spec, "no_such_type")


def test_unsupported(spec) -> None:
    func = spec.ids_of_kind(Kind.FUNC)[0]
    with pytest.raises(UnsupportedType, match="function"):
        decoder_for(spec, func)


def test_decode_many_and_iter(spec) -> None:
    c, v = sample(spec)
    raw = c.encode(v)
    assert c.decode_many(raw * 3, 3) == [c.decode(raw)] * 3
    # ring buffer shape: 8-byte header, payload padded to 8
    hdr = struct.pack("<II", c.size, 0)
    rec = hdr + raw + bytes(-c.size % 8)
    stride = len(rec)
    assert c.decode_many(rec * 4, 4, stride, offset=8) == [c.decode(raw)] * 4
    s = struct.Struct("=II" + c.leaf_format + f"{stride - 8 - c.size}x")
    assert list(c.decode_iter(s.iter_unpack(rec * 2), start=2)) == [c.decode(raw)] * 2
    assert c.struct_format.startswith("=") and struct.calcsize(c.struct_format) == c.size


def test_numpy_dtype(spec) -> None:
    np = pytest.importorskip("numpy")
    c, v = sample(spec)
    raw = c.encode(v) * 2
    dt = c.numpy_dtype()
    assert dt.itemsize == c.size
    arr = np.frombuffer(raw, dtype=dt)
    assert arr["count"].tolist() == [15, 15] and arr["comm"][0] == b"python"
    assert arr["inner"]["b"][1] == -2 and arr["anon_b"][0].tolist() == [0x55667788, 0x11223344]
    assert arr["f"][0] == 1.5 and arr["shorts"][1].tolist() == [10, 20, 30]


def test_decode_many_large_batch(spec) -> None:
    """The batch path (GC paused over 1000 objects) decodes every record.
    Its speed is measured in bench/ringbuf.py, not asserted here."""
    key = decoder_for(spec, "tm_key")  # 8 bytes, two ints
    inner = decoder_for(spec, "tm_inner")
    n = 5_000
    buf = b"".join(key.encode((i, 2 * i)) for i in range(n))
    out = key.decode_many(buf, n)
    assert len(out) == n and out[0] == key.decode(buf) and out[-1] == key.decode(buf, 8 * (n - 1))
    assert inner.decode_many(inner.encode((1, -1, 3)) * 2, 2)[1].b == -1
