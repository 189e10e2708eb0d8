"""Generate a skeleton's two files from an object, whole or not at all."""

from __future__ import annotations

import os
import tempfile

from pycore.skel.errors import SkelError
from pycore.skel.model import SkelModel, build_model, check_elf, object_stem


def default_output(object_path: str) -> str:
    """``counter_skel.py`` (in the current directory) for ``dir/counter.bpf.o``."""
    return object_stem(object_path) + "_skel.py"


def model_of(object_path: str, class_name: str | None = None, rings: list[str] | None = None,
             bytes_maps: list[str] | None = None) -> SkelModel:
    """Read the object (not load it) and build its model; SkelError says what stands in the way."""
    try:
        with open(object_path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SkelError(f"cannot read {object_path}: {exc.strerror}") from None
    check_elf(data, object_path)
    from pycore.native.object import BpfObject

    from btf.errors import BtfError

    with BpfObject(data, name=os.path.basename(object_path)) as obj:
        try:
            return build_model(obj, object_path, class_name, rings, bytes_maps)
        except BtfError as exc:
            raise SkelError(f"{object_path}: malformed BTF: {exc}; rebuild it (pycore build)") from None
        except RecursionError:
            raise SkelError(f"{object_path}: malformed BTF: types that contain themselves without end; "
                            "rebuild it (pycore build)") from None


def generate(object_path: str, output: str | None = None, class_name: str | None = None,
             rings: list[str] | None = None, bytes_maps: list[str] | None = None) -> tuple[str, str]:
    """Write OUT.py and OUT.pyi for the object; returns their paths. Nothing is written unless both are made."""
    from pycore.skel.render import render

    out = output or default_output(object_path)
    if not out.endswith(".py"):
        raise SkelError(f"-o {out}: the skeleton is a Python module: give a name ending in .py")
    stem = os.path.basename(out)[:-3]
    if not stem.isidentifier():
        raise SkelError(f"-o {out}: {stem!r} cannot be imported as a module name")
    model = model_of(object_path, class_name, rings, bytes_maps)
    texts = {out: render(model), out + "i": render(model, stub=True)}
    for text in texts.values():
        compile(text, out, "exec")  # a generator bug must not leave a module that cannot import
    directory = os.path.dirname(os.path.abspath(out))
    temps: list[tuple[str, str]] = []
    try:
        for path, text in texts.items():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path), suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as exc:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise SkelError(f"cannot write {out}: {exc.strerror}") from None
    return out, out + "i"
