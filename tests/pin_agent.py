"""A small agent for tests/test_pins.py, run as its own process (and killed with SIGKILL).

    python tests/pin_agent.py OBJECT PIN_DIR TGID [--pin-maps NAME,...] [--pin-links]

Loads pycore's shipped OBJECT (test_pin_v1, v2, v3) with ``pin_dir``, counts
the system calls of process TGID, and prints one JSON line once attached:
which maps it reused, which it pinned where, and its links (id, pin).  Then
each ``read`` line on stdin prints the maps' contents as one JSON line.  A
PycoreError (a refused pinned map) is printed as one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from pycore import BpfObject, object_path
from pycore.errors import PycoreError
from pycore.native.objinfo import fdinfo


def contents(obj: BpfObject) -> dict[str, object]:
    out: dict[str, object] = {"stats": [{"calls": s.calls, "last_ns": s.last_ns}
                                        for s in (obj.maps["stats"][i] for i in range(4))]}
    for name in ("by_tid", "seen"):
        if name in obj.maps:
            out[name] = {str(k): v for k, v in obj.maps[name].items()}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("object")
    ap.add_argument("pin_dir")
    ap.add_argument("tgid", type=int)
    ap.add_argument("--pin-maps", default=None)
    ap.add_argument("--pin-links", action="store_true")
    args = ap.parse_args()
    try:
        obj = BpfObject(object_path(args.object), pin_dir=args.pin_dir, pin_links=args.pin_links,
                        pin_maps=args.pin_maps.split(",") if args.pin_maps else None)
        obj.globals["target_tgid"] = args.tgid
        obj.load()
        links = obj.attach()
    except PycoreError as exc:
        print(f"pin_agent: {exc}", file=sys.stderr)
        return 2
    hello = {"reused": sorted(n for n, m in obj.maps.items() if m.reused),
             "pinned": {n: m.pin_path for n, m in obj.maps.items() if m.pin_path},
             "links": [{"id": int(fdinfo(link.fd)["link_id"]), "pin": link.pin_path} for link in links]}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if line.strip() == "read":
            print(json.dumps(contents(obj)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
