"""BPF helper ids (uapi ``enum bpf_func_id``) that tracing programs call.

Ids are ABI: the kernel only appends.  ``tests/test_asm.py`` checks every
one against ``enum bpf_func_id`` of the running kernel's BTF.  Names are the
enum's without ``BPF_FUNC_``; :func:`helper_name` gives the verifier's
spelling (``bpf_map_lookup_elem``).
"""

from __future__ import annotations

import enum

__all__ = ["Helper", "helper_name"]


class Helper(enum.IntEnum):
    """A helper id, as ``call`` takes it (``call(Helper.map_lookup_elem)``)."""

    map_lookup_elem = 1
    map_update_elem = 2
    map_delete_elem = 3
    probe_read = 4
    ktime_get_ns = 5
    trace_printk = 6
    get_prandom_u32 = 7
    get_smp_processor_id = 8
    tail_call = 12
    get_current_pid_tgid = 14
    get_current_uid_gid = 15
    get_current_comm = 16
    perf_event_read = 22
    perf_event_output = 25
    get_stackid = 27
    get_current_task = 35
    probe_write_user = 36
    get_numa_node_id = 42
    probe_read_str = 45
    get_socket_cookie = 46
    override_return = 58
    get_stack = 67
    get_current_cgroup_id = 80
    map_push_elem = 87
    map_pop_elem = 88
    map_peek_elem = 89
    send_signal = 109
    probe_read_user = 112
    probe_read_kernel = 113
    probe_read_user_str = 114
    probe_read_kernel_str = 115
    send_signal_thread = 117
    jiffies64 = 118
    get_ns_current_pid_tgid = 120
    get_current_ancestor_cgroup_id = 123
    ktime_get_boot_ns = 125
    ringbuf_output = 130
    ringbuf_reserve = 131
    ringbuf_submit = 132
    ringbuf_discard = 133
    ringbuf_query = 134
    get_task_stack = 141
    d_path = 147
    copy_from_user = 148
    snprintf_btf = 149
    per_cpu_ptr = 153
    this_cpu_ptr = 154
    get_current_task_btf = 158
    ktime_get_coarse_ns = 160
    for_each_map_elem = 164
    snprintf = 165
    get_func_ip = 173
    get_attach_cookie = 174
    task_pt_regs = 175
    get_branch_snapshot = 176
    trace_vprintk = 177
    find_vma = 180
    loop = 181
    strncmp = 182
    get_func_arg = 183
    get_func_ret = 184
    get_func_arg_cnt = 185
    copy_from_user_task = 191
    map_lookup_percpu_elem = 195
    ktime_get_tai_ns = 208


_NAMES = {h.value: f"bpf_{h.name}" for h in Helper}


def helper_name(helper_id: int) -> str | None:
    """The verifier's name for a helper id (``bpf_map_lookup_elem``), None for one we do not list."""
    return _NAMES.get(helper_id)
