"""How long each kernel test takes in a VM, so that each VM takes the longest tests first.

``python -m tests.vm.durations [OUT]`` records the junit files of a ``tests.vm.run`` (default
``build/vm``) into ``durations.json`` here: seconds by kernel series and node id, merged over what
is there. The guest orders its kernel's queue by them (tests/vm/queue.py: the kernel's series in
``PYCORE_VM_SERIES``), and the runner reads them to judge which kernel has most work left. A few
tests are long (exercise 4: 108 to 118 s, a side-by-side tool up to 107 s), most take a few
seconds: taken last, a long one would keep one VM running minutes after its siblings ended.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")


def load() -> dict[str, dict[str, float]]:
    try:
        return json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return {}


def nodeid(classname: str, name: str) -> str:
    """A junit testcase's pytest node id: ``tests.test_x[.Class]`` + name -> ``tests/test_x.py[::Class]::name``."""
    parts = classname.split(".")
    first = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "::".join(["/".join(parts[:first + 1]) + ".py", *parts[first + 1:], name])


def record(out: Path, table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``table`` with the times of every VM run under ``out`` (RELEASE[+N]/junit.xml) put in."""
    for junit in sorted(out.glob("*/junit.xml")):
        release = junit.parent.name.split("+deb")[0].split("+")[0]
        series = ".".join(release.split(".")[:2])
        times = table.setdefault(series, {})
        for case in ET.parse(junit).iter("testcase"):     # (a skipped test too: it takes no time there)
            times[nodeid(case.get("classname", ""), case.get("name", ""))] = round(float(case.get("time", 0)), 1)
    return table


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    table = record(Path(args[0] if args else "build/vm"), load())
    TABLE.write_text(json.dumps({k: dict(sorted(v.items())) for k, v in sorted(table.items())}, indent=1) + "\n")
    print(f"{TABLE}: " + ", ".join(f"{k} {len(v)} tests, {sum(v.values()):.0f} s" for k, v in sorted(table.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
