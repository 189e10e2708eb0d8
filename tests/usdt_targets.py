"""Real USDT targets for the tests: a throw-away PostgreSQL 15 server, the demo binary."""

from __future__ import annotations

import contextlib
import os
import pwd
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
