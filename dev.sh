#!/usr/bin/env bash
# pycore developer entry point. Run as root on Debian 12.
#
#   ./dev.sh demo    set up, then run the main job: pycore list -v 'kfunc:vfs_*',
#                    then the fget-crack tool on a command that opens a crack file
#   ./dev.sh test    set up, then run the whole test suite: host tests (extra
#                    arguments go to that pytest) and beside them the kernel-marked
#                    tests in QEMU on Debian's 6.1 and 6.12 kernels; fails if either fails
#   ./dev.sh setup   set up only
#   ./dev.sh vm-test set up (plus QEMU, kmod, virtme-ng), then run the kernel-marked
#                    tests in Debian kernels under QEMU: python -m tests.vm.run ARGS
#   ./dev.sh grammar set up, then regenerate pycore/lang/grammar_tables.py from
#                    pycore/lang/grammar.lark (after every grammar change)
#   ./dev.sh bpftrace-0.23 ARGS  run the reference bpftrace 0.23.2 (Debian 13's) with ARGS,
#                    in a Debian 13 root built once (mmdebstrap) and cached in
#                    $PYCORE_TRIXIE_ROOT (default ~/.cache/pycore/trixie-root)
#
# Setup is idempotent and quick when already done:
#   - apt-get install the Debian packages below that are missing (apt-get update
#     first only when the package lists are missing or stale);
#   - create .venv with the machine's python3 (python3-venv installed if needed);
#   - pip install -e '.[test]' (scikit-build-core compiles bpf_src/ into
#     pycore/bpf/*.bpf.o); skipped when the build inputs (and the list of
#     Python modules) have not changed since the last install (stamp in
#     .venv/.pycore-build-stamp);
#   - mount tracefs on /sys/kernel/tracing if it is not mounted;
#   - fetch speedscope's npm package into ~/.cache/pycore (tests/speedscope_pkg.py).
# Environment: PYTHON=/path/to/python3 to choose the interpreter for .venv.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")"
ROOT=$PWD
VENV=$ROOT/.venv
STAMP=$VENV/.pycore-build-stamp
APT_PACKAGES=(clang llvm libbpf-dev libbpf1 bpftool bpftrace pkg-config cmake make
              gcc g++ rustc systemtap-sdt-dev binutils postgresql-15 python3.11 python3.11-dev)   # USDT demo, targets (C++, Rust), readelf; CPython headers (py-calls offsets test)
APT_PACKAGES+=(iproute2 nftables)   # net-drops tests: namespaces, veth pairs, an nft drop rule
APT_PACKAGES+=(python3-venv)   # tests/test_agent_template.py: the template installed into a clean venv
APT_PACKAGES+=(libc6-dev)   # /usr/include: pycore trace reads a script's #include'd macros (AF_INET), tests compile C
APT_PACKAGES+=(libc6-dbg)   # libc's separate DWARF (/usr/lib/debug/.build-id): pycore list -v and args of libc functions, side by side with bpftrace (tests/test_dwarf.py, bench/bench_dwarf.py)
APT_PACKAGES+=(prometheus)   # tests/test_serve_script.py: promtool check metrics on pycore serve --script's exposition, a real Prometheus scraping it
APT_PACKAGES+=(golang-go)   # go tool pprof reads pycore profile's .pb.gz (tests/test_profile.py)
APT_PACKAGES+=(chromium)    # Playwright drives Debian's chromium (executable_path) over pycore profile's .html flame graph
APT_PACKAGES+=(systemd util-linux)   # tests/test_systemd_unit.py: systemd-analyze verify/security of examples/systemd's unit; unshare, setpriv make its sandbox (PID 1 need not be systemd)
APT_PACKAGES+=(openssl)   # tests/test_serve_web.py: the CA, server and client certificates of pycore serve --web.config.file
VM_APT_PACKAGES=(qemu-system-x86 kmod busybox-static)   # vm-test only: QEMU, depmod, initramfs
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

say() { printf '[dev.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@";
    elif command -v sudo >/dev/null; then sudo "$@";
    else die "need root to run: $*"; fi
}

is_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

apt_lists_fresh() {
    # package lists exist and were refreshed less than a day ago
    [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n1)" ]
}

apt_install() {
    local missing=() p
    for p in "$@"; do is_installed "$p" || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "apt-get install: ${missing[*]}"
    if ! apt_lists_fresh; then
        say "apt-get update"
        as_root apt-get update -q </dev/null
    fi
    if ! as_root apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
        say "install failed; refreshing package lists and retrying"
        as_root apt-get update -q </dev/null
        as_root apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
    fi
}

pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    # Debian's own interpreter first (python3-venv can fix its venv module),
    # then whatever python3 is on PATH.
    if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; return; fi
    command -v python3 || die "python3 not found"
}

python_ok() {  # python >= 3.11
    "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

build_inputs_hash() {
    # everything that changes what pip/CMake build: metadata, build script, BPF sources
    { sha256sum pyproject.toml CMakeLists.txt pycore/cmake/*.cmake
      find bpf_src examples/usdt-passwd -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z | xargs -0 -r sha256sum
      # the editable install lists the package's modules by name: a module added or removed needs a reinstall
      find pycore btf -name '*.py' -o -name '*.lark' | sort
      "$VENV/bin/python" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
}

ensure_vmlinux_h() {
    [ -s bpf_src/vmlinux.h ] && return 0
    say "bpf_src/vmlinux.h missing: generating it from /sys/kernel/btf/vmlinux with our BTF reader"
    local tmp
    tmp=$(mktemp bpf_src/.vmlinux.h.XXXXXX)
    if "$PY" -m btf dump /sys/kernel/btf/vmlinux --format c >"$tmp"; then
        mv "$tmp" bpf_src/vmlinux.h
    else
        rm -f "$tmp"
        die "could not generate bpf_src/vmlinux.h (python -m btf dump ... --format c)"
    fi
}

drop_old_distribution() {
    # The distribution was named "pycore" before it became pycore-bpf (PyPI's "pycore" is another
    # project). pip sees two projects and leaves the old one installed, with its editable import hook.
    # Remove its files that pycore-bpf does not also own (bin/pycore, pycore/bpf/ are both's), then it.
    "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md, shutil
try:
    old = md.distribution("pycore")
except md.PackageNotFoundError:
    raise SystemExit
info = old._path  # its .dist-info directory (importlib.metadata's PathDistribution)
new = {f.locate() for f in md.distribution("pycore-bpf").files or ()}
for f in old.files or ():
    path = f.locate()
    if path not in new and path.is_file() and path.parent != info:
        path.unlink()
shutil.rmtree(info)
print("[dev.sh] removed the stale 'pycore' distribution (now pycore-bpf)")
EOF
}

setup() {
    local t0=$SECONDS
    apt_install "${APT_PACKAGES[@]}"

    PY=$(pick_python)
    python_ok "$PY" || die "$PY is older than Python 3.11"

    if [ -x "$VENV/bin/python" ] && ! python_ok "$VENV/bin/python"; then
        say "removing broken .venv"
        rm -rf "$VENV"
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
            [ "$PY" = /usr/bin/python3 ] || die "$PY lacks the venv/ensurepip modules"
            apt_install python3-venv
        fi
        say "creating .venv with $PY ($("$PY" -V 2>&1))"
        rm -rf "$VENV"
        "$PY" -m venv "$VENV"
    fi

    ensure_vmlinux_h

    local want have=""
    want=$(build_inputs_hash)
    [ -f "$STAMP" ] && have=$(cat "$STAMP")
    if [ "$want" != "$have" ] || ! "$VENV/bin/python" -c \
            'import pycore.native.shipped as o; o.object_path("selftest")' >/dev/null 2>&1; then
        say "pip install -e '.[test]' (builds bpf_src/ into pycore/bpf/)"
        rm -f "$STAMP"
        "$VENV/bin/python" -m pip install --progress-bar off -e '.[test]' </dev/null
        drop_old_distribution
        echo "$want" >"$STAMP"
        "$VENV/bin/python" -c 'import pycore.native.shipped as o; print("[dev.sh] BPF objects:", ", ".join(str(o.object_path(n)) for n in o.available_objects()))' >&2
    fi

    if ! grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; then
        say "mounting tracefs on /sys/kernel/tracing"
        as_root mount -t tracefs nodev /sys/kernel/tracing
    fi
    # speedscope's npm package (its file-format schema and built app) for pycore profile's speedscope
    # test, into ~/.cache/pycore once, checked against the registry's sha512 (tests/speedscope_pkg.py)
    "$VENV/bin/python" -m tests.speedscope_pkg >/dev/null || say "speedscope's npm package not fetched (the test will try again)"
    say "setup done in $((SECONDS - t0)) s"
}

vm_setup() {
    # prerequisites of the kernel VM tests (tests/vm); not part of setup()
    apt_install "${VM_APT_PACKAGES[@]}"
    if [ ! -x "$VENV/bin/vng" ]; then
        say "pip install virtme-ng (into .venv)"
        "$VENV/bin/python" -m pip install --progress-bar off virtme-ng </dev/null
    fi
}

# The reference bpftrace 0.23.2: Debian 13 (trixie)'s package, in a root of its own built once by
# mmdebstrap (~20 s, ~400 MB) and reused (READY stamp; a lock keeps two builders apart). Its
# home is the invoking user's own ~/.cache, not $XDG_CACHE_HOME (the tests point that at a
# directory of each run's own: the root must outlive runs).
trixie_root() {
    if [ -n "${PYCORE_TRIXIE_ROOT:-}" ]; then echo "$PYCORE_TRIXIE_ROOT"; return; fi
    local home
    home=$(getent passwd "$(id -u)" | cut -d: -f6)
    echo "${home:-$HOME}/.cache/pycore/trixie-root"
}

debian_mirror() {
    # the first URIs: of the machine's deb822 sources (deb.debian.org on a stock Debian 12)
    local uri
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | grep -v -- '-security' | head -n1)
    echo "${uri:-http://deb.debian.org/debian}"
}

# Besides bpftrace: Debian 13's python3.13 and its headers, for pycore profile's CPython 3.13 tests
# (tests/test_profile_cpython.py); a root built before they were added gets them installed once.
TRIXIE_PACKAGES=bpftrace,python3.13,libpython3.13-dev

trixie_complete() {
    [ -f "$1/READY" ] && [ -x "$1/usr/bin/python3.13" ] && [ -f "$1/usr/include/python3.13/internal/pycore_runtime.h" ]
}

trixie_build() {
    local dir=$1
    trixie_complete "$dir" && return 0
    mkdir -p "$(dirname "$dir")"
    exec 9>"$dir.lock"
    flock 9
    if [ -f "$dir/READY" ] && ! trixie_complete "$dir"; then
        say "installing ${TRIXIE_PACKAGES//,/ } into the Debian 13 root $dir"
        cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
        if ! unshare -m --propagation private sh -c '
                d=$1; shift
                for m in proc dev sys; do mount --rbind "/$m" "$d/$m" || exit 125; done
                chroot "$d" sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends $*"
            ' sh "$dir" ${TRIXIE_PACKAGES//,/ } </dev/null >&2; then
            exec 9>&-
            die "apt-get install in the Debian 13 root failed"
        fi
    fi
    if [ ! -f "$dir/READY" ]; then
        apt_install mmdebstrap
        local mirror tmp
        mirror=$(debian_mirror)
        tmp="$dir.tmp.$$"
        rm -rf "$dir" "$tmp"
        say "building a Debian 13 root with ${TRIXIE_PACKAGES//,/ } in $dir (mmdebstrap, mirror $mirror)"
        if ! as_root mmdebstrap --quiet --variant=apt --include="$TRIXIE_PACKAGES" trixie "$tmp" "$mirror" </dev/null >&2; then
            rm -rf "$tmp"
            exec 9>&-
            die "mmdebstrap of Debian 13 failed"
        fi
        mv "$tmp" "$dir"
        chroot "$dir" bpftrace --version >"$dir/READY"
        say "ready: $(cat "$dir/READY")"
    fi
    exec 9>&-
}

bpftrace_023() {
    # bpftrace 0.23.2 with ARGS: /proc, /dev, /sys bound (rbind) into the root, in a mount
    # namespace of its own (unshare -m) so that nothing stays mounted when it ends
    local dir
    dir=$(trixie_root)
    trixie_build "$dir" >&2
    exec unshare -m --propagation private sh -c '
        d=$1; shift
        ulimit -l unlimited 2>/dev/null
        for m in proc dev sys; do mount --rbind "/$m" "$d/$m" || exit 125; done
        exec chroot "$d" bpftrace "$@"' sh "$dir" "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    setup)
        setup ;;
    demo)
        setup
        say "pycore list -v 'kfunc:vfs_*'"
        "$VENV/bin/pycore" list -v 'kfunc:vfs_*'
        say "pycore run fget-crack -c CMD  (CMD opens a file named libcrack-demo.so)"
        exec "$VENV/bin/pycore" run fget-crack \
            -c "sh -c 'd=\$(mktemp -d); touch \$d/libcrack-demo.so; exec 3<\$d/libcrack-demo.so; rm -r \$d'" ;;
    test)
        # The whole suite: host tests, and beside them the kernel-marked tests in QEMU on
        # Debian's 6.1 and 6.12 kernels (tests/vm): the host tests keep about one of the two
        # CPUs busy, a VM under TCG the other; one VM runs beside them, two once they end.
        # Both must pass. The VMs' log goes to build/vm/run.log, printed after the host tests.
        setup
        vm_setup
        mkdir -p build/vm
        rm -f build/vm/host.rc
        say "kernel tests in QEMU (6.1, 6.12) start beside the host tests (log: build/vm/run.log)"
        "$VENV/bin/python" -m tests.vm.run --host-xml build/vm/host.xml --host-done build/vm/host.rc \
            </dev/null >build/vm/run.log 2>&1 &
        vm_pid=$! host_pid= tail_pid=
        # Interrupted (Ctrl-C, or SIGTERM from a CI timeout), SIGTERM to both: pytest takes it as
        # Ctrl-C (tests/conftest.py: its fixtures end what the tests started; a script's background
        # job ignores SIGINT), the runner stops its VMs. bash runs a trap only between commands, so
        # each long step runs in the background and is waited for (wait returns at once on a
        # signal): in the foreground it would hold the trap back until it ended.
        trap 'kill -TERM $host_pid $tail_pid "$vm_pid" 2>/dev/null; wait $host_pid "$vm_pid"; exit 130' INT TERM
        say "pytest -m 'not kernel' (host kernel $(uname -r))"
        set +e
        "$VENV/bin/python" -m pytest -p no:cacheprovider -m "not kernel" \
            --junitxml=build/vm/host.xml "$@" </dev/null &
        host_pid=$!
        wait "$host_pid"
        host_rc=$? host_pid=
        echo "$host_rc" > build/vm/host.rc
        say "host pytest exit code: $host_rc"
        say "kernel tests in QEMU (6.1, 6.12): build/vm/run.log"
        tail -n +1 --pid="$vm_pid" -f build/vm/run.log &
        tail_pid=$!
        wait "$vm_pid"
        vm_rc=$?
        wait "$tail_pid"
        trap - INT TERM
        say "kernel-VM exit code: $vm_rc"
        [ "$host_rc" -eq 0 ] && [ "$vm_rc" -eq 0 ]
        exit $? ;;
    grammar)
        # the trace language's parser tables: lark's LALR parser for the grammar, as literals
        # for pycore/lang/lalr.py (which says why)
        setup
        out=pycore/lang/grammar_tables.py
        "$VENV/bin/python" -m pycore.lang.lalr pycore/lang/grammar.lark > "$out.tmp"
        mv "$out.tmp" "$out"
        say "wrote $out" ;;
    bpftrace-0.23)
        bpftrace_023 "$@" ;;
    trixie-root)
        # build (once) the Debian 13 root only, print its path
        dir=$(trixie_root); trixie_build "$dir"; echo "$dir" ;;
    vm-test)
        setup
        vm_setup
        exec "$VENV/bin/python" -m tests.vm.run "$@" </dev/null ;;
    *)
        usage ;;
esac
