// SPDX-License-Identifier: GPL-2.0
/* fmod_ret where the verifier allows it (error-injectable functions and every
 * security_* hook).  For the test's own process, security_task_getsid()
 * returns `forced` (an -errno) instead of running, so getsid() fails. */
#include "pycore.bpf.h"

const volatile __u32 target_tgid = 0;
const volatile int forced = 0;

SEC("fmod_ret/security_task_getsid")
int BPF_PROG(force_getsid, struct task_struct *p, int ret)
{
	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;		/* 0: let the hook run */
	return forced;		/* non-zero: skip it and return this */
}

char LICENSE[] SEC("license") = "GPL";
