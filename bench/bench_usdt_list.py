"""``pycore list -vv usdt:postgres`` vs ``readelf -n`` on the same binary:
whole process (start-up included), one run each, median of a few; wall time
and peak RSS of the child (ru_maxrss from wait4)."""

from __future__ import annotations

import os
import statistics
import sys
import time

POSTGRES = "/usr/lib/postgresql/15/bin/postgres"
PYCORE = os.path.join(os.path.dirname(sys.executable), "pycore")


def measure(argv: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvp(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return wall, ru.ru_maxrss / 1024


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for label, argv in (("pycore list -vv", [PYCORE, "list", "-vv", f"usdt:{POSTGRES}"]),
                        ("readelf -n", ["readelf", "-n", POSTGRES])):
        samples = [measure(argv) for _ in range(runs)]
        wall = statistics.median(s[0] for s in samples)
        rss = statistics.median(s[1] for s in samples)
        print(f"{label:<18} {wall * 1000:8.1f} ms  {rss:6.1f} MiB peak  (median of {runs})")


if __name__ == "__main__":
    main()
