"""A workload that makes and drops code objects all the time, for tests/test_profile.py: each round
compiles a module with a function and a class, runs them, and lets them go (freed at once).

    python3.11 tests/profile_churn.py SECONDS
"""
import sys, time
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    src = f"def g{n}():\n    x = 0\n    for i in range(300):\n        x += i\n    return x\ng{n}()\nclass K{n}:\n    def m(self):\n        return [str(i) for i in range(50)]\nK{n}().m()\n"
    exec(compile(src, f"<gen{n}>", "exec"), {})
    n += 1
