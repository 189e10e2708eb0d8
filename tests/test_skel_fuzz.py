"""pycore skel reads objects it did not build: mangled ones get a one-line error, never a traceback or a crash.

Real objects shipped with pycore are cut short and have bytes flipped, most
of them inside the .BTF section (the generator's input), the rest in the ELF
headers. Each mutant goes through ``generate()`` in a child process, so a
crash in native code (libbpf opens the object too) fails the test instead of
killing pytest. The only outcomes allowed: a skeleton whose two files both
compile, or a SkelError/PycoreError with no file written. Seeded, so a
failure reproduces.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pycore.native.shipped import object_path

CHILD = textwrap.dedent(r'''
    import json, os, random, sys, tempfile, traceback
    from btf.elf import ElfObject
    from pycore.errors import PycoreError
    from pycore.skel.generate import generate

    src, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    good = open(src, "rb").read()
    btf = ElfObject(good, src).section(".BTF")
    lo, hi = btf.offset, btf.offset + btf.size
    rng = random.Random(seed)
    out = {"ok": 0, "refused": 0, "bad": []}
    with tempfile.TemporaryDirectory() as d:
        obj, py = os.path.join(d, "m.bpf.o"), os.path.join(d, "m_skel.py")
        for i in range(rounds):
            blob = bytearray(good)
            if i % 5 == 0:
                blob = blob[:rng.randrange(len(blob))]
            else:
                for _ in range(rng.randint(1, 4)):
                    pos = rng.randrange(lo, hi) if rng.random() < 0.8 else rng.randrange(0, 64)
                    if pos < len(blob):
                        blob[pos] = rng.randrange(256)
            open(obj, "wb").write(blob)
            for f in (py, py + "i"):
                if os.path.exists(f):
                    os.unlink(f)
            try:
                generate(obj, py)
                for f in (py, py + "i"):
                    compile(open(f).read(), f, "exec")
                out["ok"] += 1
            except PycoreError as e:
                msg = str(e)
                if "\n" in msg or not msg or os.path.exists(py) or os.path.exists(py + "i"):
                    out["bad"].append(f"round {i}: {msg!r} (or a file was written)")
                out["refused"] += 1
            except Exception:
                out["bad"].append(f"round {i}: " + traceback.format_exc(limit=3))
    print(json.dumps(out))
''')


@pytest.mark.parametrize("name", ["test_ringbuf", "fd_leak", "lock_contention"])
def test_mangled_objects(name: str) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, object_path(name), "1234", "300"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the generator's process died ({proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not result["bad"], "\n".join(result["bad"][:5])
    assert result["refused"] > 0, result   # the mutants did reach the checks


def test_bpfobject_refuses_a_type_id_past_the_end(tmp_path) -> None:
    """The mutant that crashed libbpf 1.1's open: a VAR whose type id is past the last type."""
    import struct

    from btf import Spec
    from btf.elf import ElfObject
    from btf.kinds import Kind

    good = bytearray(open(object_path("test_maps"), "rb").read())
    section = ElfObject(bytes(good), "test_maps").section(".BTF")
    spec = Spec(bytes(good[section.offset:section.offset + section.size]))
    hdr_len, type_off = struct.unpack_from("<II", good, section.offset + 4)
    var = next(t for t in spec if t.kind == Kind.VAR)
    at = section.offset + hdr_len + type_off + 4 * spec.offsets[var.id - spec.first_id] + 8   # the VAR's type
    struct.pack_into("<I", good, at, 0x00B1003E)
    bad = tmp_path / "bad.bpf.o"
    bad.write_bytes(bytes(good))
    code = ("from pycore.native.object import BpfObject\n"
            "from pycore.errors import BpfError\n"
            f"try:\n    BpfObject({str(bad)!r})\nexcept BpfError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"var {var.name} (id {var.id}): type refers to type id {0x00B1003E}" in proc.stdout
    cli = subprocess.run([sys.executable, "-m", "pycore", "skel", str(bad), "-o", str(tmp_path / "b_skel.py")],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert not (tmp_path / "b_skel.py").exists()
