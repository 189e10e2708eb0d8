"""A systemd service unit's sandbox, made with the kernel's own mechanisms where PID 1 is not systemd.

``parse(text)`` reads a unit file as systemd does (sections, ``Key=value``, a key given again adds to
it, an empty value resets it, ``#``/``;`` comments, ``\\`` continuations). ``python -m
tests.systemd_unit CONFIG.json``, run as root inside ``unshare --mount --uts``, sets up what the unit's
[Service] says and execs its ExecStart, so that the process pytest started is the service itself:

- ProtectSystem=strict: every mount read-only but /dev, /proc, /sys, the private /tmp and /var/tmp,
  the cache directory and ReadWritePaths= (each bound onto itself first);
- ProtectHome=yes: /home, /root, /run/user empty and inaccessible (mode 000, read-only tmpfs);
- the paths the test's ExecStart needs of the host (CONFIG's ``expose``: this clone and its venv),
  opened before anything is hidden and bound back read-only at their own names where PrivateTmp= or
  ProtectHome= hid them (tests/reach.py; the directories on the way made 0755 in /tmp, 0111 in
  /root and /home), so that the clone may lie anywhere;
- PrivateTmp=yes: fresh tmpfs on /tmp and /var/tmp; PrivateDevices=yes: a tmpfs /dev holding null,
  zero, full, random, urandom, tty, pts, shm; ProtectKernelModules=yes: /usr/lib/modules
  inaccessible; ProtectKernelLogs=yes: /proc/kmsg inaccessible; ProtectControlGroups=yes:
  /sys/fs/cgroup read-only; ProtectHostname=yes: the UTS namespace of ``unshare --uts``;
- CacheDirectory=NAME: /var/cache/NAME (a tmpfs on /var/cache, the test's directory bound there),
  $CACHE_DIRECTORY; Environment=; LimitMEMLOCK=; UMask=; WorkingDirectory / ;
- CapabilityBoundingSet=, AmbientCapabilities=, NoNewPrivileges=, User=/Group=: ``setpriv``;
- RestrictAddressFamilies=, SystemCallArchitectures=native, RestrictNamespaces=yes,
  LockPersonality=yes: a seccomp filter of the same rules (seccomp_program), installed last.

RestrictRealtime=, RestrictSUIDSGID=, ProtectClock=, RemoveIPC= (more seccomp rules, cgroup device
rules, IPC clean-up) are not made here: ``systemd-analyze verify`` checks them (SECCOMP_ONLY lists
them; a key neither made nor listed fails the test).
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import shlex
import subprocess
import sys

from tests import reach

# Made by main() below.
REALISED = {
    "ExecStart", "ExecReload", "ProtectSystem", "ReadWritePaths", "ProtectHome", "PrivateTmp", "PrivateDevices",
    "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectHostname",
    "CacheDirectory", "CacheDirectoryMode", "Environment", "LimitMEMLOCK", "UMask",
    "CapabilityBoundingSet", "AmbientCapabilities", "NoNewPrivileges", "User", "Group",
    "RestrictAddressFamilies", "SystemCallArchitectures", "RestrictNamespaces", "LockPersonality",
}
# Seccomp filters, cgroup device rules, IPC clean-up and the manager's own settings: checked by
# systemd-analyze verify (and scored by systemd-analyze security), not made here.
SECCOMP_ONLY = {"RestrictRealtime", "RestrictSUIDSGID", "ProtectClock", "RemoveIPC", "Type", "Restart"}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # systemd's


def parse(text: str) -> dict[str, dict[str, list[str]]]:
    """{section: {key: [values in order]}}; a key set empty starts its list again, as systemd does."""
    units: dict[str, dict[str, list[str]]] = {}
    section = None
    lines = iter(text.splitlines())
    for line in lines:
        while line.endswith("\\"):
            line = line[:-1] + " " + next(lines, "")
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = units.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        if section is None or not sep:
            raise ValueError(f"not a unit file line: {line!r}")
        values = section.setdefault(key.strip(), [])
        if value.strip():
            values.append(value.strip())
        else:
            values.clear()
    return units


def service_of(text: str) -> dict[str, list[str]]:
    return parse(text)["Service"]


def words(service: dict[str, list[str]], key: str) -> list[str]:
    return [w for v in service.get(key, []) for w in shlex.split(v)]


def caps(service: dict[str, list[str]], key: str) -> list[str]:
    """A capability list as setpriv spells it: CAP_SYS_PTRACE -> sys_ptrace."""
    return [w.lower().removeprefix("cap_") for w in words(service, key)]


def _yes(service: dict[str, list[str]], key: str) -> bool:
    v = service.get(key, ["no"])[-1].lower()
    return v in {"yes", "true", "on", "1", "strict", "full"}


def _mount(*argv: str) -> None:
    subprocess.run(["mount", *argv], check=True)


def _inaccessible(path: str, kept: list[tuple[str, int]]) -> None:
    """``path`` empty and inaccessible, as systemd makes it; a kept path below it (``expose``) gets its
    mount point there, and the directories on the way to it are left for traversal only (mode 0111:
    no listing them without CAP_DAC_READ_SEARCH, which the unit does not have)."""
    if os.path.isdir(path) and any(reach.under(k, path) for k, _ in kept):
        _mount("-t", "tmpfs", "-o", "mode=111,size=4k", "tmpfs", path)
        reach.mount_points(path, kept, 0o111)
        _mount("-o", "remount,bind,ro", path)
    elif os.path.isdir(path):
        _mount("-t", "tmpfs", "-o", "ro,mode=000,size=4k", "tmpfs", path)
    elif os.path.exists(path):
        _mount("--bind", "/dev/.inaccessible", path)


def _mountpoints() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].encode().decode("unicode_escape") for line in f]


def _under(path: str, tops: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


# Classic BPF for seccomp (linux/filter.h, linux/seccomp.h), x86-64 only.
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
AUDIT_ARCH_X86_64 = 0xC000003E
NR = {"socket": 41, "clone": 56, "personality": 135, "unshare": 272, "setns": 308, "clone3": 435}
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
ARG0 = 16   # seccomp_data: nr, arch, instruction_pointer, args[6] (the low half of args[0] on x86-64)


def seccomp_program(service: dict[str, list[str]]) -> list[tuple[int, int, int, int]]:
    """What systemd's seccomp filter does for RestrictAddressFamilies= (socket()'s family),
    SystemCallArchitectures=native (x86-64 only: no i386, no x32), RestrictNamespaces=yes (unshare,
    setns, clone with a CLONE_NEW* flag: EPERM; clone3: ENOSYS, so libc falls back to clone) and
    LockPersonality=yes (personality() other than PER_LINUX or a query: EPERM), as (code, jt, jf, k)."""
    import socket as so

    prog: list[tuple[int, object, object, int]] = []   # jt/jf: a label, or 0 (the next)
    labels: dict[str, int] = {}

    def op(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k))

    if service.get("SystemCallArchitectures", [""])[-1] == "native":
        op(LD_ABS, 4)
        op(JEQ, AUDIT_ARCH_X86_64, 0, "kill")
        op(LD_ABS, 0)
        op(JGE, 0x40000000, "eperm", 0)          # the x32 ABI's numbers
    op(LD_ABS, 0)
    if service.get("RestrictAddressFamilies"):
        op(JEQ, NR["socket"], "families", 0)
    if _yes(service, "RestrictNamespaces"):
        op(JEQ, NR["unshare"], "eperm", 0)
        op(JEQ, NR["setns"], "eperm", 0)
        op(JEQ, NR["clone"], "clone", 0)
        op(JEQ, NR["clone3"], "enosys", 0)
    if _yes(service, "LockPersonality"):
        op(JEQ, NR["personality"], "personality", 0)
    op(RET, ALLOW)
    if service.get("RestrictAddressFamilies"):
        labels["families"] = len(prog)
        op(LD_ABS, ARG0)
        for name in words(service, "RestrictAddressFamilies"):
            op(JEQ, int(getattr(so, name)), "allow", 0)
        op(RET, ERRNO | 97)                     # EAFNOSUPPORT
    labels["clone"] = len(prog)
    op(LD_ABS, ARG0)
    op(JSET, CLONE_NEW, "eperm", "allow")
    labels["personality"] = len(prog)
    op(LD_ABS, ARG0)
    op(JEQ, 0xFFFFFFFF, "allow", 0)
    op(JEQ, 0, "allow", "eperm")
    for label, k in (("allow", ALLOW), ("eperm", ERRNO | 1), ("enosys", ERRNO | 38), ("kill", KILL_PROCESS)):
        labels[label] = len(prog)
        op(RET, k)

    def to(i: int, j: object) -> int:
        return j if isinstance(j, int) else labels[str(j)] - i - 1

    return [(code, to(i, jt), to(i, jf), k) for i, (code, jt, jf, k) in enumerate(prog)]


def install_seccomp(program: list[tuple[int, int, int, int]]) -> None:
    import ctypes

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                    ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*(SockFilter(*ins) for ins in program))
    fprog = SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:   # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        sys.exit(f"systemd_unit: seccomp: {os.strerror(ctypes.get_errno())}")


def main(config_path: str) -> None:
    """Realise the unit of CONFIG (the unit's text, the cache directory to bind, the argv to run in
    place of ExecStart's, the host paths that argv needs: ``expose``) in this mount namespace, then
    exec it.

    The cache directory and the ``expose`` paths (this clone's venv and package, the scripts; with a
    unit naming /usr/local/bin/pycore and /etc/pycore/scripts nothing would need it) are opened first:
    wherever the clone lies, under /tmp or /root too, PrivateTmp= and ProtectHome= cannot hide them.
    Each ``expose`` path that they would hide is bound back read-only at its own name, on a mount
    point made in the fresh /tmp or the inaccessible /root (as BindReadOnlyPaths= would), so the
    file system is the unit's plus these paths."""
    with open(config_path) as f:
        config = json.load(f)
    service = parse(config["unit"])["Service"]
    unknown = set(service) - REALISED - SECCOMP_ONLY
    if unknown:
        sys.exit(f"systemd_unit: the unit sets {sorted(unknown)}, which this test neither makes nor lists")
    _mount("--make-rprivate", "/")
    writable: list[str] = []
    cache_fd = os.open(config["cache_dir"], os.O_PATH | os.O_DIRECTORY)
    kept = reach.keep(config.get("expose", []))
    covered: list[str] = []

    if _yes(service, "PrivateDevices"):   # as systemd does: the few device nodes made anew
        nodes = {name: os.stat(f"/dev/{name}") for name in ("null", "zero", "full", "random", "urandom", "tty")}
        _mount("-t", "tmpfs", "-o", "mode=755,nosuid,noexec", "tmpfs", "/dev")
        for name, st in nodes.items():
            os.mknod(f"/dev/{name}", st.st_mode, st.st_rdev)
            os.chmod(f"/dev/{name}", st.st_mode & 0o7777)
        os.mkdir("/dev/pts")
        _mount("-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=620", "devpts", "/dev/pts")
        os.symlink("pts/ptmx", "/dev/ptmx")
        os.mkdir("/dev/shm")
        _mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", "/dev/shm")
        for i, name in enumerate(("stdin", "stdout", "stderr")):
            os.symlink(f"/proc/self/fd/{i}", f"/dev/{name}")
        os.symlink("/proc/self/fd", "/dev/fd")
        os.close(os.open("/dev/.inaccessible", os.O_CREAT | os.O_WRONLY, 0))   # bound over files made inaccessible
        os.chmod("/dev/.inaccessible", 0)
    elif _yes(service, "ProtectKernelLogs"):
        sys.exit("systemd_unit: ProtectKernelLogs= without PrivateDevices= is not made here")

    if _yes(service, "PrivateTmp"):
        for d in ("/tmp", "/var/tmp"):
            _mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", d)
            reach.mount_points(d, kept, 0o755)
            writable.append(d)
            covered.append(d)
    if _yes(service, "ProtectHome"):
        for d in ("/home", "/root", "/run/user"):
            _inaccessible(d, kept)
            covered.append(d)
    if _yes(service, "ProtectKernelModules"):
        for d in ("/usr/lib/modules", "/lib/modules"):
            if os.path.isdir(d) and not os.path.islink(d):
                _inaccessible(d, [])
    if _yes(service, "ProtectKernelLogs"):
        _inaccessible("/proc/kmsg", [])
    env = {"PATH": DEFAULT_PATH}
    for name in words(service, "CacheDirectory"):
        path = f"/var/cache/{name}"
        if not os.path.isdir(path):  # a mount point for the test's directory, in this namespace only
            _mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/var/cache")
            os.mkdir(path)
        reach.bind(cache_fd, path)
        os.chmod(path, int(service.get("CacheDirectoryMode", ["0755"])[-1], 8))
        writable.append(path)
        env["CACHE_DIRECTORY"] = path
    for path in words(service, "ReadWritePaths"):
        path = path.lstrip("-")
        _mount("--bind", path, path)
        writable.append(path)
    reach.expose(kept, covered, readonly=True)
    reach.release(kept)
    os.close(cache_fd)
    if service.get("ProtectSystem", ["no"])[-1] == "strict":
        for mp in _mountpoints():
            if not _under(mp, ["/proc", "/sys", "/dev", *writable]):
                _mount("-o", "remount,bind,ro", mp)
    if _yes(service, "ProtectControlGroups") and os.path.ismount("/sys/fs/cgroup"):
        _mount("-o", "remount,bind,ro", "/sys/fs/cgroup")

    for value in service.get("Environment", []):
        for word in shlex.split(value):
            key, _, v = word.partition("=")
            env[key] = v
    for value in service.get("LimitMEMLOCK", []):
        n = resource.RLIM_INFINITY if value == "infinity" else int(value)
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (n, n))
        except ValueError:  # a container without CAP_SYS_RESOURCE: kernels >= 5.11 do not count it for BPF
            hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
            print(f"systemd_unit: LimitMEMLOCK={value} not made: this container cannot raise RLIMIT_MEMLOCK "
                  f"above {hard} bytes (kept)", file=sys.stderr, flush=True)
    if "UMask" in service:
        os.umask(int(service["UMask"][-1], 8))
    os.chdir("/")

    setpriv = ["setpriv"]
    if "CapabilityBoundingSet" in service:
        bounding = caps(service, "CapabilityBoundingSet")
        setpriv.append("--bounding-set=" + ",".join(["-all", *(f"+{c}" for c in bounding)]))
    ambient = caps(service, "AmbientCapabilities")
    if ambient:
        setpriv += ["--inh-caps=" + ",".join(["-all", *(f"+{c}" for c in ambient)]),
                    "--ambient-caps=" + ",".join(["-all", *(f"+{c}" for c in ambient)])]
    if "User" in service:
        user = pwd.getpwnam(service["User"][-1])
        group = service.get("Group", [str(user.pw_gid)])[-1]
        setpriv += [f"--reuid={user.pw_uid}", f"--regid={group}", "--init-groups"]
        env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name)
    if _yes(service, "NoNewPrivileges"):
        setpriv.append("--no-new-privs")
    install_seccomp(seccomp_program(service))   # last: setpriv and the command run under it
    os.execvpe("setpriv", [*setpriv, "--", *config["argv"]], env)


if __name__ == "__main__":
    main(sys.argv[1])
