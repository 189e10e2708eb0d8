"""pycore trace in the kernel VMs (tests/vm): probes on one place fire in the order bpftrace fires them
(kfunc, kretfunc, kprobe, kretprobe pairs), and iter:task / iter:task_file side by side with bpftrace
0.17, which runs iterators on Debian's kernels (not on the host, whose feature check it fails)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.test_trace_kernel import bpftrace, ok, pycore

kernel = pytest.mark.kernel

WRITE_SRC = "#include <unistd.h>\nint main(void) { write(-1, \"x\", 1); write(-1, \"x\", 1); return 0; }\n"


@pytest.fixture(scope="module")
def write_twice(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("order")
    (d / "g.c").write_text(WRITE_SRC)
    subprocess.run(["gcc", "-o", str(d / "g"), str(d / "g.c")], check=True)
    return str(d / "g")


@kernel
@pytest.mark.parametrize("kind", ["kfunc", "kretfunc", "kprobe", "kretprobe"])
def test_two_probes_on_one_function_fire_in_script_order(kind, write_twice):
    """Two blocks on ksys_write fire in the order bpftrace 0.17 fires them (pycore/lang/runtime.py's
    attach_order: a trampoline's and a kprobe's programs run newest first)."""
    func = "ksys_write"
    program = " ".join(f'{kind}:{func} /pid == cpid/ {{ printf("{kind}{i}\\n"); }}' for i in (1, 2))
    ours = [json.loads(line)["data"].strip() for line in ok(pycore("-f", "json", "-e", program, "-c", write_twice))
            .splitlines() if '"printf"' in line]
    theirs = [json.loads(line)["data"].strip() for line in ok(bpftrace("-f", "json", "-e", program, "-c", write_twice))
              .splitlines() if '"printf"' in line]
    # bpftrace 0.17 fires kretfunc blocks in reverse, the others in the script's order
    assert ours == theirs == ([f"{kind}2", f"{kind}1"] if kind == "kretfunc" else [f"{kind}1", f"{kind}2"]) * 2, \
        (ours, theirs)


@kernel
def test_iterators_side_by_side():
    """iter:task and iter:task_file as bpftrace 0.17 runs them: the same held process's task and files."""
    # the held process outlives the test whatever the load (it is killed at the end): under load 13 the
    # two tracers of both programs took more than the 60 s it used to sleep, and the second found no task
    held = subprocess.Popen(["/usr/bin/python3", "-c", "import os, sys, time; f = open('/proc/version');"
                             " os.dup2(f.fileno(), 42); print('ready', flush=True); time.sleep(3600)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline() == "ready\n"
        for program in (f'iter:task /ctx->task->tgid == {held.pid}/ {{ printf("%s %d\\n", ctx->task->comm, '
                        'ctx->task->tgid); }',
                        f'iter:task_file /ctx->task->tgid == {held.pid} && ctx->fd == 42/ {{ printf("%d %s\\n", '
                        'ctx->fd, str(ctx->file->f_path.dentry->d_name.name)); }'):
            ours, theirs = ok(pycore("-e", program)), ok(bpftrace("-e", program))
            assert ours == theirs and ours.strip(), (ours, theirs)
    finally:
        held.kill()
        held.wait()
