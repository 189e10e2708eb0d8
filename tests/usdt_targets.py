"""Real USDT and uprobe targets for the tests: a throw-away PostgreSQL 15 server,
the demo binary, small C/C++/Rust programs built here, and objdump as an
independent instruction decoder."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Iterator

PG_BIN = "/usr/lib/postgresql/15/bin"
POSTGRES = f"{PG_BIN}/postgres"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, sockdir: str, port: int, proc: subprocess.Popen) -> None:
        self.sockdir, self.port, self.proc = sockdir, port, proc

    def psql(self, *sql: str) -> str:
        cmd = ["psql", "-X", "-q", "-At", "-h", self.sockdir, "-p", str(self.port), "-U", "postgres",
               "-d", "postgres"]
        for s in sql:
            cmd += ["-c", s]
        return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], capture_output=True, text=True,
                              check=True, timeout=60).stdout


def pg_available() -> bool:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False
    return os.path.exists(POSTGRES) and shutil.which("psql") is not None and shutil.which("runuser") is not None


@contextlib.contextmanager
def pg_server(shared_buffers: str = "16MB") -> Iterator[PgServer]:
    """initdb in a temp dir, start postgres as the postgres user (unix socket in a temp dir,
    TCP on loopback), yield, stop it."""
    tmp = tempfile.mkdtemp(prefix="pycore-pg-")
    os.chmod(tmp, 0o755)
    data, sock = os.path.join(tmp, "data"), os.path.join(tmp, "sock")
    os.mkdir(sock)
    shutil.chown(tmp, "postgres")
    shutil.chown(sock, "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run(as_pg + [f"{PG_BIN}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    port = _free_port()
    proc = subprocess.Popen(as_pg + [POSTGRES, "-D", data, "-k", sock, "-p", str(port),
                                     "-c", "listen_addresses=127.0.0.1", "-c", f"shared_buffers={shared_buffers}",
                                     "-c", "fsync=off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = PgServer(sock, port, proc)
    try:
        for _ in range(200):
            if os.path.exists(os.path.join(sock, f".s.PGSQL.{port}")):
                try:
                    server.psql("select 1")
                    break
                except subprocess.CalledProcessError:
                    pass
            time.sleep(0.1)
        else:
            raise RuntimeError("postgres did not start")
        yield server
    finally:
        subprocess.run(as_pg + [f"{PG_BIN}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def postmaster_pid(server: PgServer) -> int:
    # runuser forks: the postmaster is its child
    out = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else server.proc.pid


# -- a shared library with USDT probes and plain functions, and programs using it --

LIBPC_C = r"""
#include <sys/sdt.h>
long pc_table[8] = {11, 22, 33, 44, 55, 66, 77, 88};

__attribute__((noinline)) int pc_add(int a, int b)
{
	__asm__ volatile("" ::: "memory");
	return a * 3 + b;
}

/* gcc -O2 -fPIC passes pc_table[i] as a SIB operand: -8@(%rax,%rdx,8) */
__attribute__((noinline)) void pc_fire(int i)
{
	DTRACE_PROBE2(pc, sib, pc_table[i], i);
}

/* gcc never picks %ah for an argument; sdt.h takes an explicit spec in asm */
__attribute__((noinline)) void pc_ah(unsigned char c, long tag)
{
	__asm__ __volatile__("movb %b0, %%ah\n\t"
			     STAP_PROBE_ASM(pc, ah, -1@%%ah 1@%%ah 8@%%rdi)
			     : : "q"(c), "D"(tag) : "rax");
}
"""

PC_TARGET_CC = r"""
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <unistd.h>
extern "C" { int pc_add(int, int); void pc_fire(int); void pc_ah(unsigned char, long); }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	char go;
	if (read(0, &go, 1) != 1)	/* wait until the probes are attached */
		return 1;
	long sum = 0;
	int caught = 0;
	for (int i = 0; i < n; i++) {
		try {
			throw std::runtime_error("pycore");
		} catch (const std::exception &) {
			caught++;
		}
		sum += pc_add(i, 1);
		pc_fire(i % 8);
		pc_ah((unsigned char)(0xf0 + i % 16), 1000 + i);
	}
	printf("%d %ld\n", caught, sum);
	return 0;
}
"""


def build_shared_lib_target(d: str) -> tuple[str, str]:
    """Build ``libpc.so`` (USDT probes pc:sib and pc:ah, functions pc_add, pc_fire,
    pc_ah) and ``pc_target`` (C++, throws and catches argv[1] exceptions and calls
    each libpc function once per iteration after reading a byte from stdin)
    in ``d``; returns their paths."""
    lib, target = os.path.join(d, "libpc.so"), os.path.join(d, "pc_target")
    with open(os.path.join(d, "pc.c"), "w") as f:
        f.write(LIBPC_C)
    with open(os.path.join(d, "pc_target.cc"), "w") as f:
        f.write(PC_TARGET_CC)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-o", lib, os.path.join(d, "pc.c")], check=True)
    subprocess.run(["g++", "-O2", "-o", target, os.path.join(d, "pc_target.cc"), f"-L{d}", "-lpc",
                    f"-Wl,-rpath,{d}"], check=True)
    return lib, target


RUST_TARGET_RS = r"""
use std::io::Read;
pub struct Counter { n: u64 }
impl Counter {
    #[inline(never)]
    pub fn bump(&mut self, by: u64) -> u64 { self.n += by; self.n }
}
fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut go = [0u8; 1];
    std::io::stdin().read_exact(&mut go).unwrap();   // wait until the probes are attached
    let mut c = Counter { n: 0 };
    let mut total = 0u64;
    for i in 0..n { total = total.wrapping_add(c.bump(i)); }
    println!("{} {}", c.n, total);
}
"""


def build_rust_target(d: str, mangling: str) -> str:
    """A Rust program (Debian's rustc) calling ``Counter::bump`` argv[1] times
    after reading a byte from stdin, with ``legacy`` or ``v0`` symbol mangling."""
    src, out = os.path.join(d, "counter.rs"), os.path.join(d, f"counter_{mangling}")
    with open(src, "w") as f:
        f.write(RUST_TARGET_RS)
    # rustc 1.63 mangles legacy by default and takes =legacy only with -Z unstable-options
    flags = [] if mangling == "legacy" else ["-C", f"symbol-mangling-version={mangling}"]
    subprocess.run([shutil.which("rustc", path="/usr/bin") or "rustc", "-O", *flags, "-o", out, src],
                   check=True)
    return out


def objdump_offsets(path: str, func: str) -> list[int]:
    """Instruction offsets of ``func`` from binutils' objdump (an independent decoder)."""
    from pycore.elf.symbols import functions

    f = next(f for f in functions(path) if f.name == func)
    out = subprocess.run(["objdump", "-d", f"--start-address={f.address:#x}",
                          f"--stop-address={f.address + f.size:#x}", path],
                         capture_output=True, text=True, check=True).stdout
    return [int(m.group(1), 16) - f.address for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M)]
