// SPDX-License-Identifier: GPL-2.0
/*
 * py-calls: CPython's python:function__entry / function__return(filename,
 * funcname, lineno) probes as a call flow (bcc's uflow): one event per call
 * and return, with its depth.
 *
 * CPython 3.11 fires function__entry only from the eval loop's tracing path
 * (DO_TRACING on RESUME), which it takes while the `line` probe's semaphore
 * is set; so pycore/tools/py_calls.py attaches `line_enable` too, a program
 * that does nothing but hold that semaphore up.
 *
 * Depth is read from the interpreter, not counted: the thread holding the
 * GIL is _PyRuntime.gilstate.tstate_current, and the frames it is running
 * are tstate->cframe->current_frame->previous->... (_PyInterpreterFrame).
 * At both probes the current frame is the one entering or returning, so the
 * length of that chain is its depth, right even when tracing starts in the
 * middle of a run or a frame leaves by an exception. The struct offsets
 * come from pycore/cpython.py (.rodata, set before load); _PyRuntime's
 * address is the probe's ip plus a per-location delta of link-time
 * addresses (the runtime_at map, keyed by the USDT spec id / cookie), so the
 * load bias of a PIE interpreter cancels out.
 *
 * Without a layout (walk_frames == 0) depth is counted per thread from the
 * probes since tracing began, as uflow does.
 */
#include "tools/tools.bpf.h"
#include "pycore_usdt.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define PY_MAX_FRAMES 65536

struct py_call_event {
	__u32 pid;
	__u32 tid;
	__s32 depth;		/* 1: outermost frame; -1: frames unreadable */
	__s32 lineno;
	__u8 is_return;
	__u8 pad[7];
	char filename[160];
	char funcname[64];
};

PYCORE_EVENT(py_call_event);

const volatile __u32 self_tgid = 0;	/* pycore's own process: never traced */
const volatile __u8 walk_frames = 0;
const volatile __u32 off_tstate_current = 0;	/* _PyRuntimeState.gilstate.tstate_current */
const volatile __u32 off_tstate_thread_id = 0;	/* PyThreadState.native_thread_id */
const volatile __u32 off_tstate_cframe = 0;	/* PyThreadState.cframe */
const volatile __u32 off_cframe_frame = 0;	/* _PyCFrame.current_frame */
const volatile __u32 off_frame_previous = 0;	/* _PyInterpreterFrame.previous */

/* Events whose frames could not be read (depth -1), for the end-of-run notice. */
__u64 frames_unread SEC(".bss");

/* USDT spec id (uprobe cookie) -> &_PyRuntime - probe location (link time). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __s64);
} runtime_at SEC(".maps");

/* Counted depth per thread, when there is no layout. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __s32);
} depths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 * 1024 * 1024);
} events SEC(".maps");
PYCORE_RING_EVENT(events, struct py_call_event);

/* The current thread's id in its own pid namespace: what gettid() returned
 * to CPython when it filled native_thread_id. */
static __always_inline __u32 ns_tid(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	int nr = 0;

	bpf_core_read(&nr, sizeof(nr), &pid->numbers[level & 31].nr);
	return nr;
}

struct frame_walk {
	__u64 frame;
	__s32 depth;
};

static long walk_step(__u64 i, void *data)
{
	struct frame_walk *w = data;
	__u64 previous = 0;

	if (!w->frame)
		return 1;
	if (bpf_probe_read_user(&previous, sizeof(previous), (void *)(w->frame + off_frame_previous))) {
		w->depth = -1;
		return 1;
	}
	w->depth = i + 1;	/* not depth++: a constant per step would keep the verifier
				 * from seeing that the callback's states converge */
	w->frame = previous;
	return 0;
}

/* Frames of this thread, the current one included; -1 if they cannot be read. */
static __always_inline __s32 frame_depth(struct pt_regs *ctx)
{
	__u32 cookie = (__u32)bpf_get_attach_cookie(ctx);
	struct frame_walk w = {};
	__u64 tstate = 0, cframe = 0, thread_id = 0;
	__s64 *delta;

	delta = bpf_map_lookup_elem(&runtime_at, &cookie);
	if (!delta)
		return -1;
	if (bpf_probe_read_user(&tstate, sizeof(tstate), (void *)(ctx->ip + *delta + off_tstate_current)) || !tstate)
		return -1;
	/* Only the thread holding the GIL runs bytecode: it must be this one. */
	if (bpf_probe_read_user(&thread_id, sizeof(thread_id), (void *)(tstate + off_tstate_thread_id)) ||
	    thread_id != ns_tid())
		return -1;
	if (bpf_probe_read_user(&cframe, sizeof(cframe), (void *)(tstate + off_tstate_cframe)) || !cframe)
		return -1;
	if (bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(cframe + off_cframe_frame)))
		return -1;
	bpf_loop(PY_MAX_FRAMES, walk_step, &w, 0);
	if (w.frame || w.depth <= 0)	/* deeper than PY_MAX_FRAMES, or unreadable */
		return -1;
	return w.depth;
}

/* Depth counted from the probes (uflow's way): a return shows its entry's depth. */
static __always_inline __s32 counted_depth(__u32 tid, int is_return)
{
	__s32 zero = 0, *d, depth;

	d = bpf_map_lookup_elem(&depths, &tid);
	if (!d) {
		bpf_map_update_elem(&depths, &tid, &zero, BPF_NOEXIST);
		d = bpf_map_lookup_elem(&depths, &tid);
		if (!d)
			return -1;
	}
	if (is_return) {
		depth = *d;
		*d = depth > 0 ? depth - 1 : 0;
	} else {
		depth = ++*d;
	}
	return depth;
}

static __always_inline int emit(struct pt_regs *ctx, int is_return)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct py_call_event *e;
	long file = 0, func = 0, line = 0;
	__s32 depth;

	if (pycore_filtered() || (id >> 32) == self_tgid)
		return 0;
	if (walk_frames) {
		depth = frame_depth(ctx);
		if (depth < 0)
			__sync_fetch_and_add(&frames_unread, 1);
	} else {
		depth = counted_depth(tid, is_return);
	}
	pycore_usdt_arg(ctx, 0, &file);
	pycore_usdt_arg(ctx, 1, &func);
	pycore_usdt_arg(ctx, 2, &line);
	e = pycore_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->tid = tid;
	e->depth = depth;
	e->lineno = line;
	e->is_return = is_return;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_probe_read_user_str(e->filename, sizeof(e->filename), (void *)file);
	bpf_probe_read_user_str(e->funcname, sizeof(e->funcname), (void *)func);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uprobe")
int function_entry(struct pt_regs *ctx)
{
	return emit(ctx, 0);
}

SEC("uprobe")
int function_return(struct pt_regs *ctx)
{
	return emit(ctx, 1);
}

/* Attached to python:line only for its semaphore (see the top). */
SEC("uprobe")
int line_enable(struct pt_regs *ctx)
{
	return 0;
}
