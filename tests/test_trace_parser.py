"""pycore trace's front end: grammar.lark + parser.py -> the ast.py tree, and ScriptError for bad scripts.

The language is bpftrace 0.17's; where this file asserts a behaviour bpftrace
has too, it was checked against /usr/bin/bpftrace -d (its parser's tree).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pycore.lang import ast as A
from pycore.lang import parser as P
from pycore.lang.errors import ScriptError
from pycore.lang.parser import parse, parse_probe

# -- helpers ---------------------------------------------------------------------------------------


def body(src: str) -> list[A.Stmt]:
    return parse(f"BEGIN {{ {src} }}").probes[0].body


def expr(src: str) -> A.Expr:
    stmt = body(f"$_ = {src};")[0]
    assert isinstance(stmt, A.Assign)
    return stmt.value


def error(src: str) -> ScriptError:
    with pytest.raises(ScriptError) as info:
        parse(src)
    return info.value


I, V, B = A.Int, A.Var, A.Builtin


def M(name: str, *keys: A.Expr) -> A.MapRef:
    return A.MapRef(name, tuple(keys))


def C(name: str, *args: A.Expr | A.TypeName) -> A.Call:
    return A.Call(name, tuple(args))


def Bin(op: str, left: A.Expr, right: A.Expr) -> A.Binary:
    return A.Binary(op, left, right)


# -- the scripts that must parse -------------------------------------------------------------------

BRIEF_SCRIPTS = {
    "vfs_unlink": r'''kfunc:vmlinux:vfs_unlink
{
  printf("%s %s\n", comm, str(args.dentry->d_name.name));
}
''',
    "fget": r'''kretfunc:fget
{
  printf("%s %s\n", comm, str(retval->f_path.dentry->d_name.name));
}
''',
    "lock_contention": r'''tracepoint:lock:contention_begin
{
  @[tid, args.lock_addr] = nsecs;
}

tracepoint:lock:contention_end
/@[tid, args.lock_addr] != 0/
{
  $lock_duration = nsecs - @[tid, args.lock_addr];
  if ($lock_duration > 1000*100) { /* block duration threshold time -  100 microsecs */
    printf("contended time: %lld\n", $lock_duration);
  }
  delete(@[tid, args.lock_addr]);
}
''',
}

# The bpftrace one-liner tutorial (docs/tutorial_one_liners.md), lessons 1-12.
TUTORIAL = {
    "hello": r'BEGIN { printf("hello world\n"); }',
    "openat": r'tracepoint:syscalls:sys_enter_openat { printf("%s %s\n", comm, str(args->filename)); }',
    "probe_count": r'tracepoint:syscalls:sys_enter_* { @[probe] = count(); }',
    "syscall_count": r'tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }',
    "read_hist": r'tracepoint:syscalls:sys_exit_read /pid == 18644/ { @bytes = hist(args->ret); }',
    "read_lhist": r'kretprobe:vfs_read { @bytes = lhist(retval, 0, 2000, 200); }',
    "read_time": r'kprobe:vfs_read { @start[tid] = nsecs; } kretprobe:vfs_read /@start[tid]/ '
                 r'{ @ns[comm] = hist(nsecs - @start[tid]); delete(@start[tid]); }',
    "exec": r'tracepoint:sched:sched_process_exec { printf("%s\n", comm); } interval:s:1 { print(@); clear(@); }',
    "per_second": r'tracepoint:raw_syscalls:sys_enter { @syscalls = count(); } '
                  r'interval:s:1 { print(@syscalls); clear(@syscalls); }',
    "profile_kstack": r'profile:hz:99 { @[kstack] = count(); }',
    "profile_ustack": r'profile:hz:99 /pid == 189222/ { @[ustack] = count(); }',
    "sched_switch": r'tracepoint:sched:sched_switch { @[kstack] = count(); }',
    "block_io": r'tracepoint:block:block_rq_issue { @ = hist(args->bytes); }',
    "path.bt": r'''#include <linux/path.h>
#include <linux/dcache.h>

kprobe:vfs_open
{
	printf("open path: %s\n", str(((struct path *)arg0)->dentry->d_name.name));
}
''',
}

# Scripts from bpftrace's tools/ directory (github.com/bpftrace/bpftrace, Apache-2.0), as
# published; xfsdist.bt without its 'config = {...}' line (bpftrace 0.19 syntax).
TOOLS = {
    "tcpconnect.bt": r'''#!/usr/bin/env bpftrace
/*
 * tcpconnect.bt  Trace TCP connect()s.
 *                For Linux, uses bpftrace and eBPF.
 *
 * Copyright (c) 2018 Dale Hamel.
 * Licensed under the Apache License, Version 2.0 (the "License")
 */

#include <linux/socket.h>
#include <net/sock.h>

BEGIN
{
  printf("Tracing tcp connections. Hit Ctrl-C to end.\n");
  printf("%-8s %-8s %-16s ", "TIME", "PID", "COMM");
  printf("%-39s %-6s %-39s %-6s\n", "SADDR", "SPORT", "DADDR", "DPORT");
}

kprobe:tcp_connect
{
  $sk = ((struct sock *) arg0);
  $inet_family = $sk->__sk_common.skc_family;

  if ($inet_family == AF_INET || $inet_family == AF_INET6) {
    if ($inet_family == AF_INET) {
      $daddr = ntop($sk->__sk_common.skc_daddr);
      $saddr = ntop($sk->__sk_common.skc_rcv_saddr);
    } else {
      $daddr = ntop($sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8);
      $saddr = ntop($sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
    }
    $lport = $sk->__sk_common.skc_num;
    $dport = $sk->__sk_common.skc_dport;

    // Destination port is big endian, it must be flipped
    $dport = ($dport >> 8) | (($dport << 8) & 0x00FF00);

    time("%H:%M:%S ");
    printf("%-8d %-16s ", pid, comm);
    printf("%-39s %-6d %-39s %-6d\n", $daddr, $dport, $saddr, $lport);
  }
}
''',
    "biosnoop.bt": r'''#!/usr/local/bin/bpftrace
/*
 * biosnoop.bt   Block I/O tracing tool, showing per I/O latency.
 *               For Linux, uses bpftrace, eBPF.
 *
 * 15-Nov-2017	Brendan Gregg	Created this.
 */

BEGIN
{
	printf("%-12s %-16s %-6s %7s\n", "TIME(ms)", "COMM", "PID", "LAT(ms)");
	@epoch = nsecs;
}

kprobe:blk_account_io_start
{
	@start[arg0] = nsecs;
	@iopid[arg0] = pid;
	@iocomm[arg0] = comm;
}

kprobe:blk_account_io_completion
/@start[arg0] != 0 && @iopid[arg0] != 0 && @iocomm[arg0] != ""/

{
	$now = nsecs;
	printf("%-12u %-16s %-6d %7d\n",
	    ($now - @epoch) / 1000000, @iocomm[arg0], @iopid[arg0],
	    ($now - @start[arg0]) / 1000000);

	delete(@start[arg0]);
	delete(@iopid[arg0]);
	delete(@iocomm[arg0]);
}

END
{
	delete(@epoch);
}
''',
    "runqlat.bt": r'''#!/usr/local/bin/bpftrace
/*
 * runqlat.bt	CPU scheduler run queue latency as a histogram.
 *		For Linux, uses bpftrace, eBPF.
 *
 * Copyright 2018 Netflix, Inc.
 * Licensed under the Apache License, Version 2.0 (the "License")
 */

#include <linux/sched.h>

BEGIN
{
	printf("Tracing CPU scheduler... Hit Ctrl-C to end.\n");
}

tracepoint:sched:sched_wakeup
{
	@qtime[args->pid] = nsecs;
}

tracepoint:sched:sched_wakeup_new
{
	@qtime[args->pid] = nsecs;
}

tracepoint:sched:sched_switch
{
	$TASK_RUNNING = 0;	// from linux/sched.h, workaround for #153
	if (args->prev_state == $TASK_RUNNING) {
		@qtime[args->prev_pid] = nsecs;
	};

	$ns = @qtime[args->next_pid];
	if ($ns) {
		@usecs = hist((nsecs - $ns) / 1000);
	};
	delete(@qtime[args->next_pid]);
}

END
{
	clear(@qtime);
}
''',
    "execsnoop.bt": r'''#!/usr/bin/env bpftrace
/*
 * execsnoop.bt   Trace new processes via exec() syscalls.
 *                For Linux, uses bpftrace and eBPF.
 *
 * 15-Nov-2017	Brendan Gregg	Created this.
 * 11-Sep-2018	   "     "	Switched to use join().
 */

BEGIN
{
	printf("%-10s %-5s %s\n", "TIME(ms)", "PID", "ARGS");
	@trace_start = nsecs;
}

tracepoint:syscalls:sys_enter_execve
{
	printf("%-10u %-5d ", (nsecs - @trace_start) / 1000000, pid);
	join(args->argv);
}
''',
    "biolatency.bt": r'''#!/usr/local/bin/bpftrace
/*
 * biolatency.bt	Block I/O latency as a histogram.
 *			For Linux, uses bpftrace, eBPF.
 */

BEGIN
{
	printf("Tracing block device I/O... Hit Ctrl-C to end.\n");
}

kprobe:blk_account_io_start
{
	@start[arg0] = nsecs;
}

kprobe:blk_account_io_completion
/@start[arg0]/

{
	@usecs = hist((nsecs - @start[arg0]) / 1000);
	delete(@start[arg0]);
}
''',
    "killsnoop.bt": r'''#!/usr/bin/env bpftrace
/*
 * killsnoop	Trace signals issued by the kill() syscall.
 *		For Linux, uses bpftrace and eBPF.
 *
 * Copyright 2018 Netflix, Inc.
 */

BEGIN
{
	printf("Tracing kill() signals... Hit Ctrl-C to end.\n");
	printf("%-15s %7s %-16s %4s %6s %s\n",
		"TIME", "PID", "COMM", "SIG", "TPID", "RESULT");
}

tracepoint:syscalls:sys_enter_kill
{
	@tpid[tid] = args.pid;
	@tsig[tid] = args.sig;
}

tracepoint:syscalls:sys_exit_kill
/@tpid[tid]/
{
	printf("%-15s %7d %-16s %4d %6d %6d\n",
		strftime("%H:%M:%S.%f", nsecs),
		pid, comm, @tsig[tid], @tpid[tid], args.ret);
	delete(@tpid, tid);
	delete(@tsig, tid);
}
''',
    "tcplife.bt": r'''#!/usr/bin/env bpftrace
/*
 * tcplife - Trace TCP session lifespans with connection details.
 *
 * Copyright (c) 2019 Brendan Gregg.
 * Licensed under the Apache License, Version 2.0 (the "License").
 */

#ifndef BPFTRACE_HAVE_BTF
#include <net/tcp_states.h>
#include <net/sock.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#else
#include <sys/socket.h>
#endif

BEGIN
{
	printf("%-5s %-10s %-15s %-5s %-15s %-5s ", "PID", "COMM",
	    "LADDR", "LPORT", "RADDR", "RPORT");
	printf("%5s %5s %s\n", "TX_KB", "RX_KB", "MS");
}

kprobe:tcp_set_state
{
	$sk = (struct sock *)arg0;
	$newstate = arg1;

	/*
	 * This tool includes PID and comm context. From TCP this is best
	 * effort, and may be wrong in some situations.
	 */

	// record first timestamp seen for this socket
	if ($newstate < TCP_FIN_WAIT1 && @birth[$sk] == 0) {
		@birth[$sk] = nsecs;
	}

	// record PID & comm on SYN_SENT
	if ($newstate == TCP_SYN_SENT || $newstate == TCP_LAST_ACK) {
		@skpid[$sk] = pid;
		@skcomm[$sk] = comm;
	}

	// session ended: calculate lifespan and print
	if ($newstate == TCP_CLOSE && @birth[$sk]) {
		$delta_ms = (nsecs - @birth[$sk]) / 1e6;
		$lport = $sk->__sk_common.skc_num;
		$dport = $sk->__sk_common.skc_dport;
		$dport = ($dport >> 8) | (($dport << 8) & 0xff00);
		$tp = (struct tcp_sock *)$sk;
		$pid = @skpid[$sk];
		$comm = @skcomm[$sk];
		if ($comm == "") {
			// not cached, use current task
			$pid = pid;
			$comm = comm;
		}

		$family = $sk->__sk_common.skc_family;
		$saddr = ntop(0);
		$daddr = ntop(0);
		if ($family == AF_INET) {
			$saddr = ntop(AF_INET, $sk->__sk_common.skc_rcv_saddr);
			$daddr = ntop(AF_INET, $sk->__sk_common.skc_daddr);
		} else {
			// AF_INET6
			$saddr = ntop(AF_INET6,
			    $sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
			$daddr = ntop(AF_INET6,
			    $sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8);
		}
		printf("%-5d %-10.10s %-15s %-5d %-15s %-6d ", $pid,
		    $comm, $saddr, $lport, $daddr, $dport);
		printf("%5d %5d %d\n", $tp->bytes_acked / 1024,
		    $tp->bytes_received / 1024, $delta_ms);

		delete(@birth[$sk]);
		delete(@skpid[$sk]);
		delete(@skcomm[$sk]);
	}
}

END
{
	clear(@birth); clear(@skpid); clear(@skcomm);
}
''',
    "vfsstat.bt": r'''#!/usr/bin/env bpftrace
/*
 * vfsstat	Count some VFS calls, with per-second summaries.
 *		For Linux, uses bpftrace and eBPF.
 */

BEGIN
{
	printf("Tracing key VFS calls... Hit Ctrl-C to end.\n");

}

kprobe:vfs_read*,
kprobe:vfs_write*,
kprobe:vfs_fsync,
kprobe:vfs_open,
kprobe:vfs_create
{
	@[func] = count();
}

interval:s:1
{
	time();
	print(@);
	clear(@);
}

END
{
	clear(@);
}
''',
    "gethostlatency.bt": r'''#!/usr/bin/env bpftrace
/*
 * gethostlatency	Trace getaddrinfo/gethostbyname[2] calls.
 *			For Linux, uses bpftrace and eBPF.
 *
 * This uses dynamic tracing of user-level functions and registers, and may
 # need modifications to match your software and processor architecture.
 */

BEGIN
{
	printf("Tracing getaddr/gethost calls... Hit Ctrl-C to end.\n");
	printf("%-9s %-6s %-16s %6s %s\n", "TIME", "PID", "COMM", "LATms",
	    "HOST");
}

uprobe:libc:getaddrinfo,
uprobe:libc:gethostbyname,
uprobe:libc:gethostbyname2
{
	@start[tid] = nsecs;
	@name[tid] = arg0;
}

uretprobe:libc:getaddrinfo,
uretprobe:libc:gethostbyname,
uretprobe:libc:gethostbyname2
/@start[tid]/
{
	$latms = (nsecs - @start[tid]) / 1e6;
	time("%H:%M:%S  ");
	printf("%-6d %-16s %6d %s\n", pid, comm, $latms, str(@name[tid]));
	delete(@start[tid]);
	delete(@name[tid]);
}
''',
    "oomkill.bt": r'''#!/usr/bin/env bpftrace
/*
 * oomkill	Trace OOM killer.
 *		For Linux, uses bpftrace and eBPF.
 */

#ifndef BPFTRACE_HAVE_BTF
#include <linux/oom.h>
#endif

BEGIN
{
	printf("Tracing oom_kill_process()... Hit Ctrl-C to end.\n");
}

kprobe:oom_kill_process
{
	$oc = (struct oom_control *)arg0;
	time("%H:%M:%S ");
	printf("Triggered by PID %d (\"%s\"), ", pid, comm);
	printf("OOM kill of PID %d (\"%s\"), %d pages, loadavg: ",
	    $oc->chosen->pid, $oc->chosen->comm, $oc->totalpages);
	cat("/proc/loadavg");
}
''',
    "xfsdist.bt": r'''#!/usr/bin/env bpftrace
/*
 * xfsdist	Summarize XFS operation latency.
 *		For Linux, uses bpftrace and eBPF.
 */

BEGIN
{
	printf("Tracing XFS operation latency... Hit Ctrl-C to end.\n");
}

kprobe:xfs_file_read_iter,
kprobe:xfs_file_write_iter,
kprobe:xfs_file_open,
kprobe:xfs_file_fsync
{
	@start[tid] = nsecs;
	@name[tid] = func;
}

kretprobe:xfs_file_read_iter,
kretprobe:xfs_file_write_iter,
kretprobe:xfs_file_open,
kretprobe:xfs_file_fsync
/@start[tid]/
{
	@us[@name[tid]] = hist((nsecs - @start[tid]) / 1000);
	delete(@start, tid);
	delete(@name, tid);
}

END
{
	clear(@start);
	clear(@name);
}
''',
    "dcsnoop.bt": r'''#!/usr/bin/env bpftrace
/*
 * dcsnoop	Trace directory entry cache (dcache) lookups.
 *		For Linux, uses bpftrace and eBPF.
 */

#include <linux/fs.h>
#include <linux/sched.h>

// from fs/namei.c:
struct nameidata {
        struct path     path;
        struct qstr     last;
        // [...]
};

BEGIN
{
	printf("Tracing dcache lookups... Hit Ctrl-C to end.\n");
	printf("%-8s %-6s %-16s %1s %s\n", "TIME", "PID", "COMM", "T", "FILE");
}

// comment out this block to avoid showing hits:
kprobe:lookup_fast
{
	$nd = (nameidata *)arg0;
	printf("%-8d %-6d %-16s R %s\n", elapsed / 1000000, pid, comm,
	    str($nd->last.name));
}

kprobe:d_lookup
{
	$name = (qstr *)arg1;
	@fname[tid] = $name->name;
}

kretprobe:d_lookup
/@fname[tid]/
{
	printf("%-8d %-6d %-16s M %s\n", elapsed / 1000000, pid, comm,
	    str(@fname[tid]));
	delete(@fname[tid]);
}
''',
    "loads.bt": r'''#!/usr/bin/env bpftrace
// loads	Prints load averages.
// 		For Linux, uses bpftrace and eBPF.

BEGIN {
  printf("Reading load averages... Hit Ctrl-C to end.\n");
}

interval:1s {
  // See fs/proc/loadavg.c and include/linux/sched/loadavg.h for the
  // following calculations.
  $avenrun = kaddr("avenrun");
  $load1 = *$avenrun;
  $load5 = *($avenrun + 8);
  $load15 = *($avenrun + 16);
  time("%H:%M:%S ");
  printf("load averages: %d.%03d %d.%03d %d.%03d\n",
         $load1 >> 11, (($load1 & ((1 << 11) - 1)) * 1000) >> 11,
         $load5 >> 11, (($load5 & ((1 << 11) - 1)) * 1000) >> 11,
         $load15 >> 11, (($load15 & ((1 << 11) - 1)) * 1000) >> 11);
}
''',
}

ALL_SCRIPTS = {**BRIEF_SCRIPTS, **TUTORIAL, **TOOLS}


@pytest.mark.parametrize("name", sorted(ALL_SCRIPTS))
def test_real_scripts_parse(name: str) -> None:
    program = parse(ALL_SCRIPTS[name], name)
    assert program.probes
    for block in program.probes:
        assert block.probes and all(isinstance(s, A.Stmt) for s in block.body)
    for node in A.walk(program):  # every node has a real position
        if isinstance(node, (A.Node,)):
            assert node.pos.line >= 1 and node.pos.col >= 1, node


def test_lock_contention_tree() -> None:
    p = parse(BRIEF_SCRIPTS["lock_contention"])
    begin, end = p.probes
    assert begin.probes[0].parts == ("lock", "contention_begin")
    key = (B("tid"), A.Field(B("args"), "lock_addr"))
    assert begin.body == [A.Assign(M("", *key), "=", B("nsecs"))]
    assert end.predicate == Bin("!=", M("", *key), I(0))
    assign, if_, delete = end.body
    assert assign == A.Assign(V("lock_duration"), "=", Bin("-", B("nsecs"), M("", *key)))
    assert if_.cond == Bin(">", V("lock_duration"), Bin("*", I(1000), I(100)))
    assert if_.then == [A.ExprStmt(C("printf", A.Str("contended time: %lld\n"), V("lock_duration")))]
    assert if_.else_ is None
    assert delete == A.ExprStmt(C("delete", M("", *key)))
    assert end.pos == A.Pos(6, 1) and end.predicate.pos == A.Pos(7, 2) and if_.pos == A.Pos(10, 3)


def test_vfs_unlink_tree() -> None:
    p = parse(BRIEF_SCRIPTS["vfs_unlink"])
    (spec,) = p.probes[0].probes
    assert (spec.kind, spec.target, spec.parts, spec.text) == ("kfunc", "vmlinux", ("vfs_unlink",),
                                                               "kfunc:vmlinux:vfs_unlink")
    (stmt,) = p.probes[0].body
    name = A.Field(A.Field(A.Field(B("args"), "dentry"), "d_name", arrow=True), "name")
    assert stmt == A.ExprStmt(C("printf", A.Str("%s %s\n"), B("comm"), C("str", name)))


def test_includes_and_preamble() -> None:
    p = parse(TOOLS["tcplife.bt"])
    assert [i.path for i in p.includes] == ["net/tcp_states.h", "net/sock.h", "linux/socket.h", "linux/tcp.h",
                                            "sys/socket.h"]
    assert all(i.system for i in p.includes)
    assert [d.text for d in p.directives] == ["#!/usr/bin/env bpftrace", "#ifndef BPFTRACE_HAVE_BTF", "#else",
                                              "#endif"]
    p = parse('#include "my.h"\n#include <linux/path.h>\nBEGIN {}')
    assert p.includes == [A.Include("my.h", False, '#include "my.h"'),
                          A.Include("linux/path.h", True, "#include <linux/path.h>")]
    assert p.includes[1].pos == A.Pos(2, 1)
    p = parse(TOOLS["dcsnoop.bt"])
    assert len(p.c_definitions) == 1 and p.c_definitions[0].text.startswith("struct nameidata {")
    assert p.c_definitions[0].text.endswith("};")


# -- probes ----------------------------------------------------------------------------------------

PROBES = [
    # text, kind, target, parts, offset
    ("BEGIN", "BEGIN", "", (), None),
    ("END", "END", "", (), None),
    ("interval:s:1", "interval", "", ("s", "1"), None),
    ("interval:ms:100", "interval", "", ("ms", "100"), None),
    ("interval:1s", "interval", "", ("1s",), None),
    ("profile:hz:99", "profile", "", ("hz", "99"), None),
    ("software:cpu-clock:1000000", "software", "", ("cpu-clock", "1000000"), None),
    ("hardware:cache-misses", "hardware", "", ("cache-misses",), None),
    ("kfunc:vfs_read", "kfunc", "", ("vfs_read",), None),
    ("kfunc:vmlinux:vfs_unlink", "kfunc", "vmlinux", ("vfs_unlink",), None),
    ("kretfunc:fget", "kretfunc", "", ("fget",), None),
    ("fentry:vfs_read", "kfunc", "", ("vfs_read",), None),
    ("fexit:vfs_read", "kretfunc", "", ("vfs_read",), None),
    ("kprobe:vfs_read", "kprobe", "", ("vfs_read",), None),
    ("kprobe:vfs_read+16", "kprobe", "", ("vfs_read",), 16),
    ("kprobe:vfs_read+0x10", "kprobe", "", ("vfs_read",), 16),
    ("kprobe:f.isra.0", "kprobe", "", ("f.isra.0",), None),
    ("kretprobe:x", "kretprobe", "", ("x",), None),
    ("tracepoint:syscalls:sys_enter_openat", "tracepoint", "", ("syscalls", "sys_enter_openat"), None),
    ("tracepoint:lock:contention*", "tracepoint", "", ("lock", "contention*"), None),
    ("tracepoint:syscalls:sys_enter_*", "tracepoint", "", ("syscalls", "sys_enter_*"), None),
    ("rawtracepoint:sched_switch", "rawtracepoint", "", ("sched_switch",), None),
    ("uprobe:/bin/bash:readline", "uprobe", "/bin/bash", ("readline",), None),
    ("uretprobe:/bin/bash:readline", "uretprobe", "/bin/bash", ("readline",), None),
    ('uprobe:/path/lib.so:"quoted name"', "uprobe", "/path/lib.so", ("quoted name",), None),
    ('uprobe:/path/lib.so:"a:b, {c}"', "uprobe", "/path/lib.so", ("a:b, {c}",), None),
    ('uprobe:/p:"q\\"uote"', "uprobe", "/p", ('q"uote',), None),
    ("uprobe:./a.out:_Z3fooi", "uprobe", "./a.out", ("_Z3fooi",), None),
    ("uprobe:/bin/x:f+0x10", "uprobe", "/bin/x", ("f",), 16),
    ("uprobe:libc:malloc", "uprobe", "libc", ("malloc",), None),
    ("uprobe:readline", "uprobe", "", ("readline",), None),
    ("usdt:/usr/lib/postgresql/15/bin/postgres:postgresql:query__start", "usdt",
     "/usr/lib/postgresql/15/bin/postgres", ("postgresql", "query__start"), None),
    ("usdt:/path:provider:name", "usdt", "/path", ("provider", "name"), None),
    ("usdt:/path:name", "usdt", "/path", ("name",), None),
    ("kfunc:vfs_*", "kfunc", "", ("vfs_*",), None),
    ("kprobe:vfs_?ead", "kprobe", "", ("vfs_?ead",), None),
    ("kprobe:[abc]*", "kprobe", "", ("[abc]*",), None),
    ("watchpoint:0x1000:8:rw", "watchpoint", "", ("0x1000", "8", "rw"), None),
    ("iter:task", "iter", "", ("task",), None),
    # bpftrace's short names
    ("t:syscalls:sys_enter_read", "tracepoint", "", ("syscalls", "sys_enter_read"), None),
    ("k:vfs_read", "kprobe", "", ("vfs_read",), None),
    ("kr:vfs_read", "kretprobe", "", ("vfs_read",), None),
    ("u:/bin/sh:f", "uprobe", "/bin/sh", ("f",), None),
    ("ur:/bin/sh:f", "uretprobe", "/bin/sh", ("f",), None),
    ("f:vfs_read", "kfunc", "", ("vfs_read",), None),
    ("fr:vfs_read", "kretfunc", "", ("vfs_read",), None),
    ("i:s:1", "interval", "", ("s", "1"), None),
    ("p:hz:99", "profile", "", ("hz", "99"), None),
    ("s:cpu-clock:1000", "software", "", ("cpu-clock", "1000"), None),
    ("h:cache-misses:10", "hardware", "", ("cache-misses", "10"), None),
    ("U:/bin/sh:x", "usdt", "/bin/sh", ("x",), None),
    ("rt:sched_switch", "rawtracepoint", "", ("sched_switch",), None),
    ("w:0x10:8:rw", "watchpoint", "", ("0x10", "8", "rw"), None),
]


@pytest.mark.parametrize("text,kind,target,parts,offset", PROBES, ids=[p[0] for p in PROBES])
def test_probe_forms(text: str, kind: str, target: str, parts: tuple[str, ...], offset: int | None) -> None:
    (spec,) = parse(f"{text} {{ }}").probes[0].probes
    assert (spec.kind, spec.target, spec.parts, spec.offset, spec.text) == (kind, target, parts, offset, text)
    assert spec.pos == A.Pos(1, 1)
    assert parse_probe(text) == spec


def test_several_probes_per_block() -> None:
    for src in ("kprobe:f,kprobe:g,BEGIN { }", "kprobe:f,\nkprobe:g ,\n  BEGIN\n{ }", "kprobe:f, kprobe:g, BEGIN, { }"):
        (block,) = parse(src).probes
        assert [s.text for s in block.probes] == ["kprobe:f", "kprobe:g", "BEGIN"]
    block = parse("kprobe:f,\n  kprobe:g {}").probes[0]
    assert block.probes[1].pos == A.Pos(2, 3)


def test_predicate_and_slash_ambiguity() -> None:
    # a path's '/' belongs to the probe; the predicate comes after whitespace, or right after a bare name
    (b,) = parse("uprobe:/bin/bash:readline /pid == 1/ { }").probes
    assert b.probes[0].target == "/bin/bash" and b.predicate == Bin("==", B("pid"), I(1))
    for src in ("BEGIN/pid/{}", "BEGIN /pid/ {}", "BEGIN\n/pid/\n\n{}", "BEGIN /pid/ // why\n{}",
                "BEGIN /pid/ /* why */ {}"):
        assert parse(src).probes[0].predicate == B("pid"), src
    # inside a predicate, '/' is a division unless a '{' follows it
    assert parse("BEGIN /pid / 2 > 1/ { }").probes[0].predicate == Bin(">", Bin("/", B("pid"), I(2)), I(1))
    # a probe ends at a comment
    assert parse("kprobe:a/*c*/{}").probes[0].probes[0].parts == ("a",)
    assert parse("kprobe:a// c\n{}").probes[0].probes[0].parts == ("a",)


def test_blocks_back_to_back() -> None:
    p = parse("BEGIN{}END{}")
    assert [b.probes[0].kind for b in p.probes] == ["BEGIN", "END"]
    assert parse("BEGIN { $x = 1 } END { }").probes[1].pos == A.Pos(1, 18)


# -- statements ------------------------------------------------------------------------------------


def test_assignments() -> None:
    assert body("$x = 1") == [A.Assign(V("x"), "=", I(1))]
    assert body("@m = 1;") == [A.Assign(M("m"), "=", I(1))]
    assert body("@m[1, 2] = 3;") == [A.Assign(M("m", I(1), I(2)), "=", I(3))]
    assert body("@ = 1;") == [A.Assign(M(""), "=", I(1))]
    assert body("@[comm] = count();") == [A.Assign(M("", B("comm")), "=", C("count"))]
    for op in ("+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="):
        assert body(f"$x {op} 2; @m[1] {op} 3") == [A.Assign(V("x"), op, I(2)), A.Assign(M("m", I(1)), op, I(3))]
    assert body("$x==1") == [A.ExprStmt(Bin("==", V("x"), I(1)))]


def test_incdec() -> None:
    assert body("$x++; $x--; ++$x; --@m[1]; @++; @m[1, 2]++") == [
        A.IncDec(V("x"), "++"), A.IncDec(V("x"), "--"), A.IncDec(V("x"), "++", prefix=True),
        A.IncDec(M("m", I(1)), "--", prefix=True), A.IncDec(M(""), "++"), A.IncDec(M("m", I(1), I(2)), "++")]
    assert expr("$y++") == A.IncDec(V("y"), "++")          # an expression too, as in bpftrace
    assert expr("(uint32)$y++") == A.Cast(A.TypeName("uint32"), A.IncDec(V("y"), "++"))
    s = body("  --$x")[0]
    assert s.pos == A.Pos(1, 11)


def test_if_else_chain() -> None:
    (s,) = body("if ($x) { $a = 1; } else if ($y) { $a = 2 } else { $a = 3; }")
    assert s == A.If(V("x"), [A.Assign(V("a"), "=", I(1))],
                     [A.If(V("y"), [A.Assign(V("a"), "=", I(2))], [A.Assign(V("a"), "=", I(3))])])
    assert body("if (1) {}") == [A.If(I(1), [], None)]
    assert body("if (1) {} else {}") == [A.If(I(1), [], [])]


def test_loops_jumps_blocks() -> None:
    assert body("while ($i < 10) { $i++; if ($i == 5) { break; } continue }") == [
        A.While(Bin("<", V("i"), I(10)), [A.IncDec(V("i"), "++"), A.If(Bin("==", V("i"), I(5)), [A.Break()]),
                                          A.Continue()])]
    assert body("unroll (5) { @c++; }") == [A.Unroll(I(5), [A.IncDec(M("c"), "++")])]
    assert body("unroll($1) {}") == [A.Unroll(A.Positional(1), [])]
    assert body("return;") == [A.Return()]
    assert body("return") == [A.Return()]
    assert body("{ $x = 1; { } }") == [A.Block([A.Assign(V("x"), "=", I(1)), A.Block([])])]


def test_semicolons() -> None:
    # the last statement's ';' is optional; compound statements need none (and may have one)
    assert body("") == []
    assert body("$x = 1") == body("$x = 1;")
    assert body("if (1) { } $x = 1") == [A.If(I(1), []), A.Assign(V("x"), "=", I(1))]
    assert body("if (1) { }; $x = 1;") == [A.If(I(1), []), A.Assign(V("x"), "=", I(1))]
    for bad in ("BEGIN { ; }", "BEGIN { $x = 1;; }", "BEGIN { $x = 1 $y = 2 }", "BEGIN { } ;"):
        with pytest.raises(ScriptError):
            parse(bad)


# -- expressions -----------------------------------------------------------------------------------


def test_literals() -> None:
    assert expr("0") == I(0) and expr("42") == I(42)
    assert expr("0x1F") == I(31) and expr("0X1f") == I(31)
    assert expr("010") == I(8)                 # octal, as bpftrace and C
    assert expr("1_000_000") == I(1000000)
    assert expr("1e6") == I(1000000) and expr("5e0") == I(5)
    assert expr("1u") == I(1) and expr("2ul") == I(2) and expr("3LL") == I(3)
    assert expr("18446744073709551615") == I(2**64 - 1)
    assert expr('"a\\nb\\t\\r\\\\\\"c"') == A.Str('a\nb\t\r\\"c')
    assert expr('"\\x41\\101\\0\\x4g"') == A.Str("AA\0\x04g")
    assert expr('""') == A.Str("")
    assert expr("-1") == A.Unary("-", I(1))


def test_names() -> None:
    assert expr("pid") == B("pid") and expr("arg0") == B("arg0") and expr("curtask") == B("curtask")
    assert expr("$1") == A.Positional(1) and expr("$10") == A.Positional(10)
    assert expr("$#") == A.Positional(0)
    assert expr("$x") == V("x") and expr("@m") == M("m") and expr("@") == M("")
    assert expr("@m[1]") == M("m", I(1)) and expr("@[1, \"a\"]") == M("", I(1), A.Str("a"))
    assert expr("kstack") == B("kstack")
    assert expr("kstack(perf, 5)") == C("kstack", B("perf"), I(5))
    assert expr("ustack(3)") == C("ustack", I(3))
    assert expr("exit()") == C("exit")
    assert expr("sizeof(struct task_struct)") == C("sizeof", A.TypeName("struct task_struct"))
    assert expr("sizeof($x)") == C("sizeof", V("x"))


def test_field_access() -> None:
    dot, arrow = expr("args.filename"), expr("args->filename")
    assert dot == A.Field(B("args"), "filename", arrow=False)
    assert arrow == A.Field(B("args"), "filename", arrow=True)
    assert expr("$t.0") == A.Field(V("t"), "0")
    assert expr("arg0[1][2]") == A.Index(A.Index(B("arg0"), I(1)), I(2))
    assert expr("@m[1].a") == A.Field(M("m", I(1)), "a")
    assert expr("$x->a.b[3]->c") == A.Field(A.Index(A.Field(A.Field(V("x"), "a", True), "b"), I(3)), "c", True)
    assert expr("curtask->mm->arg_start") == A.Field(A.Field(B("curtask"), "mm", True), "arg_start", True)


def test_casts() -> None:
    assert expr("(uint32)x") == A.Cast(A.TypeName("uint32"), B("x"))
    assert expr("(int8)$x") == A.Cast(A.TypeName("int8"), V("x"))
    assert expr("(struct path *)arg0") == A.Cast(A.TypeName("struct path", 1), B("arg0"))
    assert expr("(struct task_struct *)curtask") == A.Cast(A.TypeName("struct task_struct", 1), B("curtask"))
    assert expr("(struct  sock  * *) arg0") == A.Cast(A.TypeName("struct sock", 2), B("arg0"))
    assert expr("(union u *)arg0") == A.Cast(A.TypeName("union u", 1), B("arg0"))
    assert expr("(nameidata *)arg0") == A.Cast(A.TypeName("nameidata", 1), B("arg0"))
    assert expr("(foo)arg0") == A.Cast(A.TypeName("foo"), B("arg0"))
    assert expr("(uint32)-1") == A.Cast(A.TypeName("uint32"), A.Unary("-", I(1)))
    assert expr("(uint64)*$p") == A.Cast(A.TypeName("uint64"), A.Unary("*", V("p")))
    assert expr("(uint32)$y.a") == A.Cast(A.TypeName("uint32"), A.Field(V("y"), "a"))
    assert expr("((struct path *)arg0)->dentry") == A.Field(A.Cast(A.TypeName("struct path", 1), B("arg0")),
                                                            "dentry", True)
    # '(name)' followed by an operator is a parenthesised name, as in bpftrace
    assert expr("(pid) - 1") == Bin("-", B("pid"), I(1))
    assert expr("(pid) * 2") == Bin("*", B("pid"), I(2))
    assert expr("(pid)") == B("pid")
    assert expr("-(uint32)1") == A.Unary("-", A.Cast(A.TypeName("uint32"), I(1)))


def test_unary_ternary_tuple() -> None:
    assert expr("!~-*$x") == A.Unary("!", A.Unary("~", A.Unary("-", A.Unary("*", V("x")))))
    assert expr("$a ? 1 : 2") == A.Ternary(V("a"), I(1), I(2))
    assert expr("$a ? 1 : $b ? 2 : 3") == A.Ternary(V("a"), I(1), A.Ternary(V("b"), I(2), I(3)))
    assert expr("$a || $b ? $c = 1 : 2" if False else "$a || $b ? 1 : 2") == A.Ternary(Bin("||", V("a"), V("b")),
                                                                                        I(1), I(2))
    assert expr("(1, \"a\")") == A.Tuple((I(1), A.Str("a")))
    assert expr("(1, (2, 3))") == A.Tuple((I(1), A.Tuple((I(2), I(3)))))
    assert expr("((1))") == I(1)


PRECEDENCE = [
    ("1 + 2 * 3", Bin("+", I(1), Bin("*", I(2), I(3)))),
    ("1 * 2 + 3", Bin("+", Bin("*", I(1), I(2)), I(3))),
    ("1 - 2 - 3", Bin("-", Bin("-", I(1), I(2)), I(3))),
    ("8 / 4 / 2", Bin("/", Bin("/", I(8), I(4)), I(2))),
    ("1 + 2 << 3", Bin("<<", Bin("+", I(1), I(2)), I(3))),
    ("1 << 2 < 3", Bin("<", Bin("<<", I(1), I(2)), I(3))),
    ("1 < 2 == 3 > 4", Bin("==", Bin("<", I(1), I(2)), Bin(">", I(3), I(4)))),
    ("1 == 2 & 3", Bin("&", Bin("==", I(1), I(2)), I(3))),
    ("1 & 2 ^ 3 | 4", Bin("|", Bin("^", Bin("&", I(1), I(2)), I(3)), I(4))),
    ("1 | 2 && 3", Bin("&&", Bin("|", I(1), I(2)), I(3))),
    ("1 && 2 || 3 && 4", Bin("||", Bin("&&", I(1), I(2)), Bin("&&", I(3), I(4)))),
    ("1 <= 2 != 3 >= 4", Bin("!=", Bin("<=", I(1), I(2)), Bin(">=", I(3), I(4)))),
    ("1 >> 2 % 3", Bin(">>", I(1), Bin("%", I(2), I(3)))),
    ("-1 * 2", Bin("*", A.Unary("-", I(1)), I(2))),
    ("!$a && $b", Bin("&&", A.Unary("!", V("a")), V("b"))),
    ("*$p + 1", Bin("+", A.Unary("*", V("p")), I(1))),
    ("$a ? $b : $c || $d", A.Ternary(V("a"), V("b"), Bin("||", V("c"), V("d")))),
    ("(1 + 2) * 3", Bin("*", Bin("+", I(1), I(2)), I(3))),
    ("1 < 2 < 3", Bin("<", Bin("<", I(1), I(2)), I(3))),
    ("@x[1] + $y.a * args->b", Bin("+", M("x", I(1)), Bin("*", A.Field(V("y"), "a"),
                                                           A.Field(B("args"), "b", True)))),
]


@pytest.mark.parametrize("src,tree", PRECEDENCE, ids=[p[0] for p in PRECEDENCE])
def test_precedence(src: str, tree: A.Expr) -> None:
    assert expr(src) == tree


def test_positions() -> None:
    p = parse("BEGIN {\n  @x[pid] = (uint8)$y + foo(1);\n}")
    (s,) = p.probes[0].body
    assert s.pos == A.Pos(2, 3) and s.target.pos == A.Pos(2, 3) and s.target.keys[0].pos == A.Pos(2, 6)
    plus = s.value
    assert plus.pos == A.Pos(2, 13) and plus.left.pos == A.Pos(2, 13) and plus.left.expr.pos == A.Pos(2, 20)
    assert plus.right.pos == A.Pos(2, 25) and plus.right.args[0].pos == A.Pos(2, 29)
    assert p.probes[0].pos == A.Pos(1, 1)


def test_walk_and_visitor() -> None:
    p = parse(TUTORIAL["read_time"])
    kinds = [type(n).__name__ for n in A.walk(p)]
    assert kinds[:4] == ["Program", "ProbeBlock", "ProbeSpec", "Assign"]
    assert kinds.count("MapRef") == 5

    class Maps(A.Visitor):
        def __init__(self) -> None:
            self.names: list[str] = []

        def visit_MapRef(self, node: A.MapRef) -> None:
            self.names.append(node.name)
            self.generic_visit(node)

    v = Maps()
    v.visit(p)
    assert v.names == ["start", "start", "ns", "start", "start"]


# -- errors ----------------------------------------------------------------------------------------

ERRORS = [
    # script, line, col, width, message part
    ("BEGIN { $x = ; }", 1, 14, 1, "unexpected ';' — expected an expression"),
    ("BEGIN { $x = 1 + }", 1, 18, 1, "unexpected '}' — expected an expression"),
    ('BEGIN { printf("x") printf("y") }', 1, 21, 6, "unexpected name 'printf' — expected ';', '}'"),
    ("BEGIN {\n  $x = 1;\n", 2, 10, 1, "unexpected end of input — expected a statement or '}'"),
    ("BEGIN { $x = (1 + 2; }", 1, 20, 1, "expected ')' or ','"),
    ("BEGIN { if (1) { } else }", 1, 25, 1, "expected '{' or 'if'"),
    ("BEGIN { $x = 1 ? 2; }", 1, 19, 1, "expected ':'"),
    ("BEGIN { } ;", 1, 11, 1, "unexpected ';' — expected a probe"),
    ("", 1, 1, 1, "unexpected end of input — expected a probe"),
    ("BEGIN { $x = \"abc }", 1, 14, 1, "unterminated string"),
    ("BEGIN { $x = \"a\\qb\"; }", 1, 16, 2, "invalid escape '\\q'"),
    ("BEGIN { $x = \"\\400\"; }", 1, 15, 4, "octal escape out of range"),
    ("BEGIN { $x = 08; }", 1, 14, 2, "invalid octal integer '08'"),
    ("BEGIN { $x = 1x; }", 1, 14, 2, "invalid integer '1x'"),
    ("BEGIN { $x = 0x; }", 1, 14, 2, "invalid integer '0x'"),
    ("BEGIN { $x = 1_000_; }", 1, 14, 6, "invalid integer"),
    ("BEGIN { $x = 18446744073709551616; }", 1, 14, 20, "does not fit in 64 bits"),
    ("BEGIN { $x = 1e20; }", 1, 14, 4, "does not fit in 64 bits"),
    ("BEGIN { $x = 'a'; }", 1, 14, 1, "no character literals"),
    ("BEGIN { $x = 1; /* never closed }", 1, 17, 1, "unterminated comment"),
    ("BEGIN { $x = $0; }", 1, 14, 2, "there is no $0"),
    ("BEGIN { $x = 1 ` }", 1, 16, 1, "invalid character '`'"),
    ("foo:bar { }", 1, 1, 3, "unknown probe type 'foo'"),
    ("kprobe { }", 1, 1, 6, "a kprobe probe takes 1 to 2"),
    ("tracepoint:sched { }", 1, 1, 16, "a tracepoint probe takes 2"),
    ("BEGIN:x { }", 1, 1, 7, "a BEGIN probe takes 0"),
    ("kprobe:f/pid == 1/ { }", 1, 1, 12, "put a space between a probe and its /predicate/"),
    ("kretprobe:f+8 { }", 1, 1, 13, "cannot have an offset"),
    ("kprobe:f+8x { }", 1, 1, 11, "invalid offset"),
    ("BEGIN { $x.a = 1; }", 1, 14, 1, "unexpected '='"),
    ("BEGIN {\n\t$x = if;\n}", 2, 7, 2, "keyword 'if'"),
    ("BEGIN { @x[1 = 2; }", 1, 14, 1, "expected ',', ']' or an operator"),
    ("BEGIN { $x = (1,); }", 1, 17, 1, "unexpected ')' — expected an expression"),
    ("#define X 1\nBEGIN { } #include <x>\n", 2, 11, 12, "unexpected preprocessor line '#include <x>'"),
    ("#include linux/path.h\nBEGIN { }", 1, 1, 21, "#include needs <file> or \"file\""),
]


@pytest.mark.parametrize("src,line,col,width,message", ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_errors(src: str, line: int, col: int, width: int, message: str) -> None:
    e = error(src)
    assert (e.line, e.col, e.width) == (line, col, width), e.format()
    assert message in e.message, e.format()
    assert e.filename == "<stdin>"


def test_error_format_has_line_and_caret() -> None:
    e = error('BEGIN {\n\t@x = count()\n\tprintf("%d\\n", 1);\n}')
    text = e.format()
    assert text == ("<stdin>:3:2: error: unexpected name 'printf' — expected ';', '}' or an operator\n"
                    ' printf("%d\\n", 1);\n'
                    " ^~~~~~")
    assert str(e) == "<stdin>:3:2: error: unexpected name 'printf' — expected ';', '}' or an operator"
    e = parse_error_in_file()
    assert e.format().splitlines()[0].startswith("tools/x.bt:1:14: error:")


def parse_error_in_file() -> ScriptError:
    with pytest.raises(ScriptError) as info:
        parse("BEGIN { $x = ; }", "tools/x.bt")
    return info.value


def test_no_parser_exceptions_escape() -> None:
    from pycore.lang.lalr import ParseError

    for src in ("BEGIN { $x = @[; }", "{", "}", "/", "BEGIN /", "BEGIN / pid", "kprobe:", "\0", "BEGIN { \x7f }",
                "BEGIN { (struct", "struct foo {", "$x = 1", "BEGIN { $x = (struct path *); }"):
        try:
            parse(src)
        except ScriptError as e:
            assert not isinstance(e, ParseError)
            assert e.line >= 1 and e.col >= 1
            assert e.format()


def test_deep_nesting() -> None:
    # parens do not add levels; operators do, up to MAX_DEPTH
    assert expr("(" * 5000 + "1" + ")" * 5000) == I(1)
    ok = "- " * (P.MAX_DEPTH - 10) + "1"
    assert isinstance(expr(ok), A.Unary)
    for src in ("- " * 5000 + "1", "1" + " + 1" * 5000, "!" * 100000 + "1", "$a[" * 3000 + "1" + "]" * 3000):
        e = error(f"BEGIN {{ $x = {src}; }}")
        assert "nested too deeply" in e.message
    e = error("BEGIN { " + "if (1) { " * 400 + "}" * 400 + " }")
    assert "nested too deeply" in e.message


# -- the parser's construction and its cache -------------------------------------------------------


def test_cache_dir_must_be_private(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    d = P._cache_dir()
    assert d == str(tmp_path / "pycore") and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o777)
    assert P._cache_dir() is None          # someone else could plant a pickle there
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    assert P._cache_dir() is None


STARTUP = textwrap.dedent('''
    import time
    t0 = time.perf_counter()
    from pycore.lang.parser import parse
    parse("""tracepoint:syscalls:sys_enter_openat
    /comm != "bash"/
    {
      @[comm, str(args.filename)] = count();
    }""")
    print((time.perf_counter() - t0) * 1000)
''')


def _startup(env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", STARTUP], env=env, capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return float(out.stdout)


def test_startup_needs_no_cache_and_no_lark(tmp_path: pytest.TempPathFactory) -> None:
    """The parser is lalr.py over the generated tables: a first run parses with nothing cached
    (not even where the cache directory cannot be made) and imports neither lark nor what lark's
    run time would (typing, dataclasses, logging)."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a directory")
    for cache in (tmp_path / "cache", blocked):
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        code = STARTUP + ("import sys\nheavy = {'lark', 'typing', 'dataclasses', 'logging'} & set(sys.modules)\n"
                          "assert not heavy, heavy\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        print(f"import+construct+parse, nothing cached: {float(out.stdout):.0f} ms")
    assert not (tmp_path / "cache").exists()      # parse() writes nothing; parse_cached keeps trees


def test_generated_tables_are_current() -> None:
    """grammar_tables.py was generated from grammar.lark as it is (the hash in its header;
    './dev.sh grammar' regenerates it), and lalr.py over it parses as a parser lark builds from
    the grammar today: the same trees for every script here, the same errors for broken ones,
    with the same builder calls and lexer callbacks on the way. (lark's state numbers change
    from run to run, so the tables are compared by what they do, not as text.)"""
    import hashlib

    from lark import Lark

    from pycore.lang import grammar_tables, lalr

    shipped = Path(P.__file__).with_name("grammar_tables.py").read_text()
    digest = hashlib.sha256(Path(P._GRAMMAR).read_bytes()).hexdigest()
    assert f"(sha256 {digest})" in shipped.splitlines()[0], "grammar.lark changed: run ./dev.sh grammar"

    class Recording(P._Builder):
        """The builder, noting each call with its children (tokens with their type and position)."""

        def __getattribute__(self, name: str) -> object:
            f = super().__getattribute__(name)
            if name.startswith("_") or not callable(f):
                return f

            def noted(c: list[object]) -> object:
                calls.append((name, [(x.type, str(x), x.line, x.column) if isinstance(x, str) else x for x in c]))
                return f(c)
            return noted

    def probe(tok: object) -> object:
        calls.append(("PROBE", str(tok), tok.line, tok.column))   # type: ignore[attr-defined]
        return P._check_probe(tok)   # type: ignore[arg-type]

    built = Lark(Path(P._GRAMMAR).read_text(), parser="lalr", lexer="contextual", start="program",
                 transformer=Recording(), lexer_callbacks={"PROBE": probe}, maybe_placeholders=True)
    ours = lalr.Parser(grammar_tables, Recording(), {"PROBE": probe})
    broken = ["BEGIN { $x = ; }", "BEGIN { @[; }", "kprobe:f { printf(\"%d\", ) }", "BEGIN /", "BEGIN { if (1) }",
              "BEGIN { ` }", "BEGIN { /* }", "kprobe: { }", "BEGIN { } foo", "BEGIN { exit() } #x", "BEGIN { é }",
              "kprobe:f/pid == 1/ { }", "BEGIN { (struct x *) }", "struct a { int x; }"]
    refused = []
    for text in [*ALL_SCRIPTS.values(), *broken]:
        outcomes = []
        for parser in (built, ours):
            calls: list[object] = []
            try:
                outcome: object = parser.parse(text)
            except P._Fail as e:
                outcome = ("fail", e.message, e.line, e.col)
            except Exception as e:  # noqa: BLE001 - lark's and lalr.py's exception classes differ
                outcome = (type(e).__name__, getattr(e, "line", None), getattr(e, "column", None),
                           getattr(e, "pos_in_stream", None), sorted(getattr(e, "expected", ()) or ()),
                           sorted(getattr(e, "allowed", ()) or ()), sorted(getattr(e, "accepts", ()) or ()))
            outcomes.append((outcome, calls))
        assert outcomes[0] == outcomes[1], text
        if not isinstance(outcomes[0][0], A.Program):
            refused.append(text)
    assert refused == broken


# -- trees kept for the next process (parse_cached) -------------------------------------------------

CACHED_SCRIPT = 'tracepoint:syscalls:sys_enter_openat /pid > 1/ { @[comm, $1] = count(); printf("%s\\n", str(args.filename)); }'


def _trees(cache: Path) -> list[Path]:
    return sorted((cache / "pycore").glob("trace-tree-*.pickle"))


def test_parse_cached_keeps_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pycore.lang import parser as P

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = P.parse_cached(CACHED_SCRIPT)
    [tree] = _trees(tmp_path)
    assert tree.stat().st_mode & 0o777 == 0o600
    assert first == parse(CACHED_SCRIPT)
    # the next parse of the same text is the file's tree, not lark's: no parser is built for it
    monkeypatch.setattr(P, "_PARSER", None)
    monkeypatch.setattr(P, "_parser", lambda: pytest.fail("parsed again"))
    again = P.parse_cached(CACHED_SCRIPT)
    assert again == first and again is not first
    assert [p.pos for p in again.probes] == [p.pos for p in first.probes]
    # another text is another tree
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    P.parse_cached(CACHED_SCRIPT + " END { }")
    assert len(_trees(tmp_path)) == 2


def test_parse_cached_survives_bad_files_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pycore.lang import parser as P

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    P.parse_cached(CACHED_SCRIPT)
    [tree] = _trees(tmp_path)
    for junk in (b"", b"\x80\x05garbage", b"not a pickle at all"):
        tree.write_bytes(junk)
        assert P.parse_cached(CACHED_SCRIPT) == parse(CACHED_SCRIPT)
        assert tree.read_bytes() != junk          # replaced by a good tree
    # a file under this text's name holding another text's tree (a CRC collision), or one written
    # by other parser code (another size or mtime of parser.py, ast.py, the grammar), is a miss
    import pickle

    code, text, _ = pickle.loads(tree.read_bytes())
    assert text == CACHED_SCRIPT
    other = "BEGIN { exit(); }"
    stale_code = tuple((size, mtime + 1) for size, mtime in code)
    for saved in ((code, other, parse(other)), (stale_code, CACHED_SCRIPT, parse(other))):
        tree.write_bytes(pickle.dumps(saved))
        assert P.parse_cached(CACHED_SCRIPT) == parse(CACHED_SCRIPT)
        assert pickle.loads(tree.read_bytes())[:2] == (code, CACHED_SCRIPT)
    # a script that does not parse is the same ScriptError, and leaves no file
    with pytest.raises(ScriptError, match="1:"):
        P.parse_cached("kprobe:f { $x = ; }")
    assert len(_trees(tmp_path)) == 1
    # a cache location that is not ours (world-writable) is not used: parsing still works
    shared = tmp_path / "shared"
    (shared / "pycore").mkdir(parents=True)
    (shared / "pycore").chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert P.parse_cached(CACHED_SCRIPT) == parse(CACHED_SCRIPT)
    assert _trees(shared) == []


def test_parse_cached_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pycore.lang import parser as P

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(P, "_TREE_CACHE_FILES", 3)
    order: list[Path] = []
    for n in range(5):
        before = set(_trees(tmp_path))
        P.parse_cached(f"BEGIN {{ @x = {n}; }}")
        new = set(_trees(tmp_path)) - before
        if n < 3:   # the prune runs at each write; give the first three distinct, ordered times
            [made] = new
            os.utime(made, ns=(10**9 * (n + 1),) * 2)
            order.append(made)
    kept = _trees(tmp_path)
    assert len(kept) == 3
    assert order[0] not in kept and order[1] not in kept and order[2] in kept
