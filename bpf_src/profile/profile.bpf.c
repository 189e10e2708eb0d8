// SPDX-License-Identifier: GPL-2.0
/*
 * profile: on-CPU stack sampling for `pycore profile` (pycore/profile/).
 *
 * Attached to one CPU-clock perf event per CPU (HZ samples a second). Each
 * sample is one ring-buffer record: pid, tid, the thread's name, the kernel
 * stack and the user stack (the kernel's frame-pointer walk, as
 * bpf_get_stack gives them) and, for a process whose CPython layout user
 * space registered in `py_procs`, the Python frames of the sampled thread.
 *
 * The Python walk is py-calls' (bpf_src/tools/py_calls.bpf.c) with the
 * offsets of pycore/elf/cpython.py (one place for every version), given per
 * process in `py_procs` (so -a reads 3.11 and 3.13 side by side), extended
 * for a thread that does not hold the GIL (in a syscall, say): its thread
 * state is found on the interpreter's list by native_thread_id. Each frame is
 * recorded as its code object's address, its instruction pointer and one
 * flag byte (3.11's is_entry, 3.12+'s owner); user space reads the code object
 * (name, file, line table) once per code object, so the program reads no
 * strings.
 */
#include "tools/tools.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define MAX_STACK 127
#define MAX_PY 256
#define MAX_THREADS 64
#define RING_SIZE (16 * 1024 * 1024)
#define UCOPY 8192

struct py_frame {
	__u64 code;		/* PyCodeObject * */
	__u64 instr;		/* prev_instr (3.11, 3.12) or instr_ptr (3.13): the instruction running */
	__u32 flags;		/* the frame's byte at py_proc.frame_flags: is_entry (3.11), owner (3.12+) */
	__u32 pad;
};

/* Where one process's CPython keeps its threads and frames: pycore/profile/sampler.py fills it
 * from pycore/elf/cpython.py's layout of that process's version. */
struct py_proc {
	__u64 runtime;			/* the run-time address of _PyRuntime */
	__u16 tstate_current;		/* _PyRuntimeState.gilstate.tstate_current; 0: none (3.12+) */
	__u16 interpreters_head;	/* _PyRuntimeState.interpreters.head */
	__u16 interp_threads_head;	/* PyInterpreterState.threads.head */
	__u16 tstate_next;		/* PyThreadState.next */
	__u16 tstate_thread_id;		/* PyThreadState.native_thread_id */
	__u16 tstate_frame;		/* PyThreadState.cframe (3.11, 3.12) or .current_frame (3.13) */
	__u16 cframe_frame;		/* _PyCFrame.current_frame; NO_CFRAME: tstate_frame is the frame */
	__u16 frame_previous;		/* _PyInterpreterFrame.previous */
	__u16 frame_code;		/* _PyInterpreterFrame.f_code (3.11, 3.12) or .f_executable */
	__u16 frame_instr;		/* _PyInterpreterFrame.prev_instr (3.11, 3.12) or .instr_ptr */
	__u16 frame_flags;		/* _PyInterpreterFrame.is_entry (3.11) or .owner */
	__u16 pad;
};

#define NO_CFRAME 0xffff

struct profile_sample {
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__s32 kstack_len;	/* bytes, or a negative errno */
	__s32 ustack_len;
	__s32 py_status;	/* frames, or -1: no layout, -2: no thread state, -3: unreadable, -4: truncated */
	__u32 n_py;
	__u32 pad;
	char comm[TASK_COMM_LEN];
	__u64 kstack[MAX_STACK];
	__u64 ustack[MAX_STACK];
	__u64 uregs[3];		/* the user ip, sp, bp (for unwinding the copy with .eh_frame) */
	__u32 ucopy_len;	/* bytes of user stack copied from sp */
	__u32 pad2;
	__u8 ucopy[UCOPY];
	struct py_frame py[MAX_PY];
};

PYCORE_EVENT(profile_sample);

const volatile __u32 self_tgid = 0;
const volatile __u8 all_processes = 0;		/* -a: every process but pycore and the idle task */
__u64 samples_taken SEC(".bss");

/* tgid -> where that process's CPython is and its layout (user space fills it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct profile_sample);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_SIZE);
} samples SEC(".maps");
PYCORE_RING_EVENT(samples, struct profile_sample);

/* The current thread's id in its own pid namespace: what CPython stored in native_thread_id. */
static __always_inline __u32 ns_tid(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	int nr = 0;

	bpf_core_read(&nr, sizeof(nr), &pid->numbers[level & 31].nr);
	return nr;
}

struct thread_find {
	__u64 tstate;
	__u64 found;
	__u32 tid;
	__u16 off_thread_id;
	__u16 off_next;
};

static long thread_step(__u64 i, void *data)
{
	struct thread_find *f = data;
	__u64 id = 0;

	if (!f->tstate)
		return 1;
	if (bpf_probe_read_user(&id, sizeof(id), (void *)(f->tstate + f->off_thread_id)))
		return 1;
	if (id == f->tid) {
		f->found = f->tstate;
		return 1;
	}
	if (bpf_probe_read_user(&f->tstate, sizeof(f->tstate), (void *)(f->tstate + f->off_next)))
		f->tstate = 0;
	return 0;
}

/* The sampled thread's PyThreadState: the GIL holder's if it is this thread (3.11 names it),
 * else from the interpreter's list. */
static __always_inline __u64 find_tstate(const struct py_proc *py)
{
	struct thread_find f = { .tid = ns_tid(), .off_thread_id = py->tstate_thread_id,
				 .off_next = py->tstate_next };
	__u64 tstate = 0, id = 0, interp = 0;

	if (py->tstate_current &&
	    !bpf_probe_read_user(&tstate, sizeof(tstate), (void *)(py->runtime + py->tstate_current)) && tstate &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(tstate + py->tstate_thread_id)) && id == f.tid)
		return tstate;
	if (bpf_probe_read_user(&interp, sizeof(interp), (void *)(py->runtime + py->interpreters_head)) || !interp)
		return 0;
	if (bpf_probe_read_user(&f.tstate, sizeof(f.tstate), (void *)(interp + py->interp_threads_head)))
		return 0;
	bpf_loop(MAX_THREADS, thread_step, &f, 0);
	return f.found;
}

struct frame_walk {
	struct profile_sample *s;
	__u64 frame;
	__s32 status;
	__u16 off_code, off_instr, off_previous, off_flags;
};

/* One read per frame: the first FRAME_READ bytes of the _PyInterpreterFrame hold every
 * field used (3.11: f_code 32, previous 48, prev_instr 56, is_entry 68; 3.12 and 3.13:
 * code 0, previous 8, instruction 56, owner 70); four reads a frame made a 220-frame
 * stack cost four times as much. */
#define FRAME_READ 72

static __always_inline __u64 field64(const __u8 *buf, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, buf + (off & 127), sizeof(v));
	return v;
}

static long frame_step(__u64 i, void *data)
{
	struct frame_walk *w = data;
	struct py_frame *pf;
	__u8 buf[FRAME_READ + 64] = {};	/* offsets masked to 0..127: reads stay inside */

	if (!w->frame)
		return 1;
	if (i >= MAX_PY) {
		w->status = -4;
		return 1;
	}
	if (bpf_probe_read_user(buf, FRAME_READ, (void *)w->frame)) {
		w->status = -3;
		return 1;
	}
	pf = &w->s->py[i];
	pf->code = field64(buf, w->off_code);
	pf->instr = field64(buf, w->off_instr);
	pf->flags = buf[w->off_flags & 127];
	pf->pad = 0;
	w->frame = field64(buf, w->off_previous);
	w->s->n_py = i + 1;
	return 0;
}

static __always_inline void python_frames(struct profile_sample *s, __u32 tgid)
{
	struct frame_walk w = { .s = s };
	struct py_proc *py;
	__u64 tstate, cframe = 0;

	s->n_py = 0;
	py = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!py) {
		s->py_status = -1;
		return;
	}
	tstate = find_tstate(py);
	if (!tstate) {
		s->py_status = -2;
		return;
	}
	if (bpf_probe_read_user(&cframe, sizeof(cframe), (void *)(tstate + py->tstate_frame)) || !cframe) {
		s->py_status = -3;
		return;
	}
	if (py->cframe_frame == NO_CFRAME)
		w.frame = cframe;	/* 3.13: PyThreadState.current_frame */
	else if (bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(cframe + py->cframe_frame))) {
		s->py_status = -3;
		return;
	}
	w.off_code = py->frame_code;
	w.off_instr = py->frame_instr;
	w.off_previous = py->frame_previous;
	w.off_flags = py->frame_flags;
	bpf_loop(MAX_PY + 1, frame_step, &w, 0);
	s->py_status = w.status ? w.status : (__s32)s->n_py;
}

/* The user registers (saved at the kernel's entry, or the interrupted ones: the same pt_regs)
 * and the top of the user stack, for an .eh_frame unwinder in user space (pycore/profile/cfi.py):
 * code without frame pointers defeats bpf_get_stack's walk past the leaf. */
static __always_inline void user_stack_copy(struct profile_sample *s)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 sp;

	s->ucopy_len = 0;
	s->pad2 = 0;
	s->uregs[0] = BPF_CORE_READ(regs, ip);
	sp = s->uregs[1] = BPF_CORE_READ(regs, sp);
	s->uregs[2] = BPF_CORE_READ(regs, bp);
	if (!bpf_probe_read_user(s->ucopy, UCOPY, (void *)sp))
		s->ucopy_len = UCOPY;
	else if (!bpf_probe_read_user(s->ucopy, UCOPY / 4, (void *)sp))
		s->ucopy_len = UCOPY / 4;	/* near the top of the stack's mapping */
}

/* The current thread's record: ids, stacks, user stack copy, Python frames (on_sample and on_switch). */
static __always_inline void fill_sample(void *ctx, struct profile_sample *s, __u64 id)
{
	__u32 tgid = id >> 32;

	s->pid = tgid;
	s->tid = (__u32)id;
	s->cpu = bpf_get_smp_processor_id();
	s->pad = 0;
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	s->kstack_len = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
	s->ustack_len = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
	user_stack_copy(s);
	python_frames(s, tgid);
}

/* One record to the ring, cut after its Python frames. */
static __always_inline void send_sample(struct profile_sample *s)
{
	__u32 n = s->n_py;
	__u64 size, wake;

	__sync_fetch_and_add(&samples_taken, 1);
	if (n > MAX_PY)
		n = MAX_PY;
	size = __builtin_offsetof(struct profile_sample, py) + (__u64)n * sizeof(struct py_frame);
	/* No wake-up per sample: user space drains every 100 ms; woken only when the ring is half full. */
	wake = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) > RING_SIZE / 2 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, s, size, wake))
		__sync_fetch_and_add(&pycore_dropped, 1);
}

static __always_inline int profiled(__u32 tgid)
{
	return tgid && tgid != self_tgid && (all_processes || tgid == targ_tgid);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	struct profile_sample *s;

	if (!profiled(id >> 32))
		return 0;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	fill_sample(ctx, s, id);
	send_sample(s);
	return 0;
}

/*
 * --off-cpu: where threads wait.  At sched_switch the thread switching out
 * (prev) is still the current task, so bpf_get_stack, the user registers and
 * bpf_probe_read_user all read it: the same record as on_sample is built then,
 * in the thread's own slot of `waits` with the time.  When the thread is
 * switched in again (next), the record goes to the ring with the wait in
 * `pad` (microseconds).  A thread's stack cannot be read while it is switched
 * out, so the capture is paid at every switch-out of a profiled thread;
 * min_block_us only spares the ring and user space the short waits.
 */
struct offcpu_wait {
	__u64 since;			/* bpf_ktime_get_ns() at the switch-out; 0: not waiting */
	struct profile_sample s;
};

const volatile __u64 min_block_us = 1;
__u64 switch_not_current SEC(".bss");	/* prev was not the current task (never seen) */
__u64 waits_short SEC(".bss");		/* waits under min_block_us, not sent */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 512);	/* user space sizes it: -a needs more threads */
	__type(key, __u32);		/* tid */
	__type(value, struct offcpu_wait);
} waits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_wait);
} wait_init SEC(".maps");	/* zeros: a new thread's slot is made from it */

SEC("?tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 tid = prev->pid, zero = 0;
	struct offcpu_wait *w;
	__u64 now = bpf_ktime_get_ns(), wait;

	if (profiled(prev->tgid)) {
		if ((void *)prev != (void *)bpf_get_current_task_btf()) {
			__sync_fetch_and_add(&switch_not_current, 1);
		} else {
			w = bpf_map_lookup_elem(&waits, &tid);
			if (!w) {
				void *init = bpf_map_lookup_elem(&wait_init, &zero);

				if (init)
					bpf_map_update_elem(&waits, &tid, init, BPF_NOEXIST);
				w = bpf_map_lookup_elem(&waits, &tid);
			}
			if (w) {
				fill_sample(ctx, &w->s, (__u64)prev->tgid << 32 | tid);
				w->since = now;
			}
		}
	}
	tid = next->pid;
	if (!profiled(next->tgid))
		return 0;
	w = bpf_map_lookup_elem(&waits, &tid);
	if (!w || !w->since)
		return 0;
	wait = (now - w->since) / 1000;
	w->since = 0;
	if (wait < min_block_us) {
		__sync_fetch_and_add(&waits_short, 1);
		return 0;
	}
	w->s.pad = wait > 0xffffffff ? 0xffffffff : wait;
	send_sample(&w->s);
	return 0;
}
