// SPDX-License-Identifier: GPL-2.0
/*
 * test_maps.bpf.c - maps of every dict-like type, filled with known values,
 * for the tests of pycore.maps, pycore.codec and pycore.globals.
 *
 * tracepoint/syscalls/sys_enter_getpid, for the process whose tgid is in the
 * .rodata constant target_tgid (0 = nobody), on each getpid():
 *   - bumps `calls` (.bss) and `data_counter` (.data, starts at 42);
 *   - writes a struct tm_value of known contents, with count = calls *
 *     add_amount, into `hash` {tgid, 7}, `array` [1] and the LRU map;
 *   - counts in the per-CPU maps (sum over CPUs = number of calls).
 * `bss_input` is written by user space after load and copied into
 * `bss_echo`, to check writes through the mmaped .bss.
 * The struct types carry every shape the codec handles: nested struct, char
 * and byte arrays, enum, bitfields, named and anonymous unions and structs,
 * bool, pointer, float.
 */
#include "pycore.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum tm_color {
	TM_RED = 1,
	TM_GREEN = 2,
	TM_BLUE = 40,
};

struct tm_key {
	__u32 tgid;
	__u32 slot;
};

struct tm_inner {
	__u16 a;
	__s16 b;
	__u32 c;
};

struct tm_value {
	__u64 count;
	__s32 neg;
	enum tm_color color;
	char comm[TASK_COMM_LEN];
	__u8 raw[4];
	struct tm_inner inner;
	__u32 flag_a : 1, flag_b : 3, flag_c : 12;
	__s32 sbits : 5;
	union {
		__u32 word;
		__u8 bytes[4];
	} u;
	union {			/* anonymous: members read as v.anon_a */
		__u64 anon_a;
		__u32 anon_b[2];
	};
	struct {		/* anonymous struct */
		__u16 x;
		__u16 y;
	};
	bool ok;
	__u16 shorts[3];
	void *ptr;
	float f;
	double d;
};

/* 12 bytes: per-CPU values are padded to 16 */
struct tm_triple {
	__u32 a, b, c;
};

/* a typical 32-byte event, for decode benchmarks */
struct tm_event32 {
	__u32 pid;
	__u32 tgid;
	__u64 ts;
	__u64 value;
	__u32 cpu;
	__s32 ret;
};
struct tm_event32 _tm_event32_btf = {};	/* forces its BTF into the object */

const volatile __u32 target_tgid = 0;
const volatile __u64 add_amount = 1;
const volatile enum tm_color ro_color = TM_RED;

__u64 calls = 0;		/* .bss */
__u32 bss_input = 0;		/* .bss: set by user space after load */
__u32 bss_echo = 0;		/* .bss */
__u64 data_counter = 42;	/* .data */
char data_name[8] = "hello";	/* .data */
struct tm_inner data_inner = { .a = 1, .b = -1, .c = 3 };	/* .data */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct tm_key);
	__type(value, struct tm_value);
} hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct tm_inner);
} lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct tm_value);
} array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} pcpu_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, struct tm_key);
	__type(value, struct tm_triple);
} pcpu_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} lru_pcpu SEC(".maps");

/* no BTF key/value types: raw bytes */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__uint(key_size, 4);
	__uint(value_size, 8);
} raw SEC(".maps");

/* log2 histogram slots, filled by user space in the tests */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

/* a template in .rodata would be nicer, but filling it field by field keeps
 * every store visible to the verifier and to the reader */
static __always_inline void fill(struct tm_value *v, __u32 tgid)
{
	__builtin_memset(v, 0, sizeof(*v));
	v->count = calls * add_amount;
	v->neg = -5;
	v->color = TM_BLUE;
	bpf_get_current_comm(v->comm, sizeof(v->comm));
	v->raw[0] = 1;
	v->raw[1] = 2;
	v->raw[2] = 0;
	v->raw[3] = 0xff;
	v->inner.a = 7;
	v->inner.b = -2;
	v->inner.c = tgid;
	v->flag_a = 1;
	v->flag_b = 5;
	v->flag_c = 0xabc;
	v->sbits = -3;
	v->u.word = 0x04030201;
	v->anon_a = 0x1122334455667788ULL;
	v->x = 3;
	v->y = 4;
	v->ok = 1;
	v->shorts[0] = 10;
	v->shorts[1] = 20;
	v->shorts[2] = 30;
	v->ptr = (void *)0xdeadbeefUL;
	*(__u32 *)&v->f = 0x3fc00000;			/* 1.5f */
	*(__u64 *)&v->d = 0xc004000000000000ULL;	/* -2.5 */
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int tm_getpid(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct tm_key key = { .tgid = tgid, .slot = 7 };
	struct tm_triple *t, one = { 1, 2, 3 };
	struct tm_value *v;
	__u32 zero = 0, idx = 1, *n, n1 = 1;
	__u64 *c;

	if (target_tgid == 0 || tgid != target_tgid)
		return 0;
	__sync_fetch_and_add(&calls, 1);
	data_counter += 1;
	bss_echo = bss_input;

	v = bpf_map_lookup_elem(&array, &idx);
	if (!v)
		return 0;
	fill(v, tgid);
	bpf_map_update_elem(&hash, &key, v, BPF_ANY);
	bpf_map_update_elem(&lru, &tgid, &v->inner, BPF_ANY);

	c = bpf_map_lookup_elem(&pcpu_array, &zero);
	if (c)
		*c += 1;
	t = bpf_map_lookup_elem(&pcpu_hash, &key);
	if (t)
		t->a += 1;
	else
		bpf_map_update_elem(&pcpu_hash, &key, &one, BPF_NOEXIST);
	n = bpf_map_lookup_elem(&lru_pcpu, &tgid);
	if (n)
		*n += 1;
	else
		bpf_map_update_elem(&lru_pcpu, &tgid, &n1, BPF_NOEXIST);
	return 0;
}
