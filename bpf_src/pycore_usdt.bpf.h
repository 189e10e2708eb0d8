/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pycore_usdt.bpf.h - USDT argument reader driven by specs computed in Python.
 *
 * pycore attaches USDT probes as plain uprobes (one per location) whose BPF
 * cookie is a spec id; pycore/usdt.py writes, for that id, how to fetch each
 * argument into pycore_usdt_specs. Unlike libbpf 1.1's usdt.bpf.h this covers
 * SIB operands and %rip-relative globals (read at ip + delta, where delta was
 * computed from link-time addresses, so the load bias cancels out).
 *
 * pt_regs slots are given as byte offsets into struct pt_regs, the x86-64
 * ptrace layout (a stable ABI); they are read with bpf_probe_read_kernel so
 * the verifier accepts a variable offset.
 *
 * Include after pycore.bpf.h; programs are SEC("uprobe") and call
 * pycore_usdt_arg(ctx, n, &val) (0 on success) and pycore_usdt_arg_cnt(ctx).
 */
#ifndef PYCORE_USDT_BPF_H
#define PYCORE_USDT_BPF_H

#define PYCORE_USDT_MAX_ARGS 12
#define PYCORE_USDT_NO_REG 0xffff

enum pycore_usdt_arg_kind {
	PYCORE_USDT_CONST = 0,	/* value = offset */
	PYCORE_USDT_REG = 1,	/* value = reg >> (8 * shift) */
	PYCORE_USDT_MEM = 2,	/* value = *(reg + offset) */
	PYCORE_USDT_SIB = 3,	/* value = *(reg + index * scale + offset) */
	PYCORE_USDT_IP_REL = 4,	/* value = *(ip + offset) */
};

struct pycore_usdt_arg {
	__s64 offset;
	__u16 reg_off;
	__u16 idx_off;
	__u8 kind;
	__u8 size;
	__u8 is_signed;
	__u8 shift;
	__u8 scale;
	__u8 pad[7];
};

struct pycore_usdt_spec {
	__u32 cnt;
	__u32 pad;
	struct pycore_usdt_arg args[PYCORE_USDT_MAX_ARGS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pycore_usdt_spec);
} pycore_usdt_specs SEC(".maps");

static __always_inline struct pycore_usdt_spec *pycore_usdt_spec(void *ctx)
{
	__u32 id = (__u32)bpf_get_attach_cookie(ctx);

	return bpf_map_lookup_elem(&pycore_usdt_specs, &id);
}

static __always_inline int pycore_usdt_arg_cnt(void *ctx)
{
	struct pycore_usdt_spec *spec = pycore_usdt_spec(ctx);

	return spec ? (int)spec->cnt : -1;
}

static __always_inline __u64 pycore_usdt_reg(void *ctx, __u16 off)
{
	__u64 v = 0;

	if (off == PYCORE_USDT_NO_REG || off > sizeof(struct pt_regs) - sizeof(__u64))
		return 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + off);
	return v;
}

/* Argument n (0-based) of the probe that fired, sign- or zero-extended. */
static __always_inline int pycore_usdt_arg(void *ctx, __u64 n, long *res)
{
	struct pycore_usdt_spec *spec = pycore_usdt_spec(ctx);
	struct pycore_usdt_arg *a;
	__u64 val = 0, addr;
	int err = 0, bits;

	if (!spec)
		return -2; /* ENOENT: not attached through pycore.usdt */
	if (n >= PYCORE_USDT_MAX_ARGS || n >= spec->cnt)
		return -7; /* E2BIG */
	a = &spec->args[n];
	switch (a->kind) {
	case PYCORE_USDT_CONST:
		val = a->offset;
		break;
	case PYCORE_USDT_REG:
		val = pycore_usdt_reg(ctx, a->reg_off) >> (8 * (a->shift & 7));
		break;
	case PYCORE_USDT_MEM:
	case PYCORE_USDT_SIB:
	case PYCORE_USDT_IP_REL:
		if (a->kind == PYCORE_USDT_IP_REL)
			addr = pycore_usdt_reg(ctx, offsetof(struct pt_regs, ip));
		else
			addr = pycore_usdt_reg(ctx, a->reg_off);
		if (a->kind == PYCORE_USDT_SIB)
			addr += pycore_usdt_reg(ctx, a->idx_off) * a->scale;
		addr += a->offset;
		switch (a->size) {
		case 1: { __u8 v; err = bpf_probe_read_user(&v, 1, (void *)addr); val = v; break; }
		case 2: { __u16 v; err = bpf_probe_read_user(&v, 2, (void *)addr); val = v; break; }
		case 4: { __u32 v; err = bpf_probe_read_user(&v, 4, (void *)addr); val = v; break; }
		default: err = bpf_probe_read_user(&val, 8, (void *)addr); break;
		}
		if (err)
			return err;
		break;
	default:
		return -22; /* EINVAL */
	}
	bits = 64 - 8 * (a->size & 15);
	if (bits > 0 && bits < 64) {
		val <<= bits;
		if (a->is_signed)
			val = (__u64)((__s64)val >> bits);
		else
			val >>= bits;
	}
	*res = (long)val;
	return 0;
}

#endif /* PYCORE_USDT_BPF_H */
