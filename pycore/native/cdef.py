"""The C declarations pycore uses from libbpf and libc, and the generator of
``pycore/native/_ffi.py``.

cffi's ABI mode parses declarations with pycparser, which costs about 100 ms
at every import.  Out-of-line ABI mode parses them once, here, and writes a
small Python module that ``pycore.native.libbpf`` imports instead; no compiler is
involved.  After changing a declaration, run ``python -m pycore.native.cdef``
(a test checks the generated module is current).

Structs passed by pointer are declared with libbpf 1.1's layout, the oldest
we support; libbpf reads ``sz`` to know which fields we filled in.  Symbols
added after 1.1 are declared too and probed with ``pycore.native.libbpf.has``.
"""

from __future__ import annotations

import os

CDEF = """
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int pid_t;

struct bpf_object; struct bpf_program; struct bpf_map; struct bpf_link;
struct ring_buffer; struct btf;

struct bpf_object_open_opts {
    size_t sz;
    const char *object_name;
    bool relaxed_maps;
    const char *pin_root_path;
    __u32 _removed_attach_prog_fd;
    const char *kconfig;
    const char *btf_custom_path;
    char *kernel_log_buf;
    size_t kernel_log_size;
    __u32 kernel_log_level;
};
struct bpf_uprobe_opts {
    size_t sz; size_t ref_ctr_offset; __u64 bpf_cookie; bool retprobe; const char *func_name;
};
struct bpf_kprobe_opts { size_t sz; __u64 bpf_cookie; size_t offset; bool retprobe; };
struct bpf_tracepoint_opts { size_t sz; __u64 bpf_cookie; };
struct bpf_trace_opts { size_t sz; __u64 cookie; };
struct bpf_usdt_opts { size_t sz; __u64 usdt_cookie; };
struct ring_buffer_opts { size_t sz; };
struct bpf_map_batch_opts { size_t sz; __u64 elem_flags; __u64 flags; };

struct bpf_object *bpf_object__open_file(const char *path, const struct bpf_object_open_opts *opts);
struct bpf_object *bpf_object__open_mem(const void *obj_buf, size_t obj_buf_sz,
                                        const struct bpf_object_open_opts *opts);
int bpf_object__load(struct bpf_object *obj);
void bpf_object__close(struct bpf_object *obj);
const char *bpf_object__name(const struct bpf_object *obj);
struct bpf_program *bpf_object__next_program(const struct bpf_object *obj, struct bpf_program *prog);
struct bpf_map *bpf_object__next_map(const struct bpf_object *obj, const struct bpf_map *map);

const char *bpf_program__name(const struct bpf_program *prog);
const char *bpf_program__section_name(const struct bpf_program *prog);
bool bpf_program__autoload(const struct bpf_program *prog);
int bpf_program__set_autoload(struct bpf_program *prog, bool autoload);
int bpf_program__fd(const struct bpf_program *prog);
int bpf_program__type(const struct bpf_program *prog);
int bpf_program__set_attach_target(struct bpf_program *prog, int attach_prog_fd, const char *attach_func_name);
struct bpf_link *bpf_program__attach(const struct bpf_program *prog);
struct bpf_link *bpf_program__attach_trace_opts(const struct bpf_program *prog, const struct bpf_trace_opts *opts);
struct bpf_link *bpf_program__attach_tracepoint_opts(const struct bpf_program *prog, const char *tp_category,
                                                     const char *tp_name, const struct bpf_tracepoint_opts *opts);
struct bpf_link *bpf_program__attach_raw_tracepoint(const struct bpf_program *prog, const char *tp_name);
struct bpf_link *bpf_program__attach_kprobe_opts(const struct bpf_program *prog, const char *func_name,
                                                 const struct bpf_kprobe_opts *opts);
struct bpf_link *bpf_program__attach_uprobe_opts(const struct bpf_program *prog, pid_t pid,
                                                 const char *binary_path, size_t func_offset,
                                                 const struct bpf_uprobe_opts *opts);
struct bpf_link *bpf_program__attach_usdt(const struct bpf_program *prog, pid_t pid, const char *binary_path,
                                          const char *usdt_provider, const char *usdt_name,
                                          const struct bpf_usdt_opts *opts);

int bpf_link__destroy(struct bpf_link *link);
int bpf_link__fd(const struct bpf_link *link);
int bpf_link__pin(struct bpf_link *link, const char *path);
int bpf_link__unpin(struct bpf_link *link);

const char *bpf_map__name(const struct bpf_map *map);
int bpf_map__fd(const struct bpf_map *map);
int bpf_map__type(const struct bpf_map *map);
__u32 bpf_map__key_size(const struct bpf_map *map);
__u32 bpf_map__value_size(const struct bpf_map *map);
__u32 bpf_map__max_entries(const struct bpf_map *map);
int bpf_map__set_max_entries(struct bpf_map *map, __u32 max_entries);
__u32 bpf_map__btf_key_type_id(const struct bpf_map *map);
__u32 bpf_map__btf_value_type_id(const struct bpf_map *map);
void *bpf_map__initial_value(struct bpf_map *map, size_t *psize);
int bpf_map__set_initial_value(struct bpf_map *map, const void *data, size_t size);
bool bpf_map__is_internal(const struct bpf_map *map);
int bpf_map__set_pin_path(struct bpf_map *map, const char *path);
int bpf_map__pin(struct bpf_map *map, const char *path);
int bpf_map__unpin(struct bpf_map *map, const char *path);
const char *bpf_map__pin_path(const struct bpf_map *map);
bool bpf_map__is_pinned(const struct bpf_map *map);
__u32 bpf_map__map_flags(const struct bpf_map *map);
const char *bpf_link__pin_path(const struct bpf_link *link);

/* Pinned objects and the BTF a loaded map carries (pycore.native.pinning, pycore.native.bpffs). */
int bpf_obj_get(const char *pathname);
struct btf *btf__load_from_kernel_by_id(__u32 id);
const void *btf__raw_data(const struct btf *btf, __u32 *size);
void btf__free(struct btf *btf);

int bpf_map_lookup_elem(int fd, const void *key, void *value);
int bpf_map_lookup_elem_flags(int fd, const void *key, void *value, __u64 flags);
int bpf_map_update_elem(int fd, const void *key, const void *value, __u64 flags);
int bpf_map_delete_elem(int fd, const void *key);
int bpf_map_get_next_key(int fd, const void *key, void *next_key);
int bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values,
                         __u32 *count, const struct bpf_map_batch_opts *opts);
int bpf_map_update_batch(int fd, const void *keys, const void *values, __u32 *count,
                         const struct bpf_map_batch_opts *opts);
int bpf_map_delete_batch(int fd, const void *keys, __u32 *count, const struct bpf_map_batch_opts *opts);
int bpf_obj_get_info_by_fd(int bpf_fd, void *info, __u32 *info_len);
int bpf_prog_get_next_id(__u32 start_id, __u32 *next_id);
int bpf_link_get_next_id(__u32 start_id, __u32 *next_id);
int bpf_prog_get_fd_by_id(__u32 id);
int bpf_link_get_fd_by_id(__u32 id);
int bpf_enable_stats(int type);   /* enum bpf_stats_type: BPF_STATS_RUN_TIME = 0 */

/* The prefix of the kernel's struct bpf_prog_info (uapi/linux/bpf.h) up to
 * the run-time statistics (Linux >= 5.1); the kernel copies min(our size,
 * its size), so a prefix is enough.  gpl_compatible:1 is folded into a u32. */
struct bpf_prog_info {
    __u32 type; __u32 id; unsigned char tag[8]; __u32 jited_prog_len; __u32 xlated_prog_len;
    __u64 jited_prog_insns; __u64 xlated_prog_insns; __u64 load_time; __u32 created_by_uid;
    __u32 nr_map_ids; __u64 map_ids; char name[16]; __u32 ifindex; __u32 gpl_compatible;
    __u64 netns_dev; __u64 netns_ino; __u32 nr_jited_ksyms; __u32 nr_jited_func_lens;
    __u64 jited_ksyms; __u64 jited_func_lens; __u32 btf_id; __u32 func_info_rec_size;
    __u64 func_info; __u32 nr_func_info; __u32 nr_line_info; __u64 line_info; __u64 jited_line_info;
    __u32 nr_jited_line_info; __u32 line_info_rec_size; __u32 jited_line_info_rec_size;
    __u32 nr_prog_tags; __u64 prog_tags; __u64 run_time_ns; __u64 run_cnt; __u64 recursion_misses;
};

/* Raw programs, maps and links (bpf.h; pycore.native.program, pycore.link), libbpf 1.1's layouts. */
struct bpf_prog_load_opts {
    size_t sz; int attempts; int expected_attach_type; __u32 prog_btf_fd; __u32 prog_flags;
    __u32 prog_ifindex; __u32 kern_version; __u32 attach_btf_id; __u32 attach_prog_fd;
    __u32 attach_btf_obj_fd; const int *fd_array; const void *func_info; __u32 func_info_cnt;
    __u32 func_info_rec_size; const void *line_info; __u32 line_info_cnt; __u32 line_info_rec_size;
    __u32 log_level; __u32 log_size; char *log_buf;
};
int bpf_prog_load(int prog_type, const char *prog_name, const char *license, const void *insns,
                  size_t insn_cnt, const struct bpf_prog_load_opts *opts);
struct bpf_map_create_opts {
    size_t sz; __u32 btf_fd; __u32 btf_key_type_id; __u32 btf_value_type_id;
    __u32 btf_vmlinux_value_type_id; __u32 inner_map_fd; __u32 map_flags; __u64 map_extra;
    __u32 numa_node; __u32 map_ifindex;
};
int bpf_map_create(int map_type, const char *map_name, __u32 key_size, __u32 value_size,
                   __u32 max_entries, const struct bpf_map_create_opts *opts);
int bpf_map_lookup_and_delete_elem(int fd, const void *key, void *value);
struct bpf_link_create_opts {
    size_t sz; __u32 flags; void *iter_info; __u32 iter_info_len; __u32 target_btf_id;
    union {
        struct { __u64 bpf_cookie; } perf_event;
        struct { __u32 flags; __u32 cnt; const char **syms; const unsigned long *addrs;
                 const __u64 *cookies; } kprobe_multi;
        struct { __u64 cookie; } tracing;
    };
};
int bpf_link_create(int prog_fd, int target_fd, int attach_type, const struct bpf_link_create_opts *opts);
int bpf_link_detach(int link_fd);
int bpf_raw_tracepoint_open(const char *name, int prog_fd);
struct bpf_test_run_opts {
    size_t sz; const void *data_in; void *data_out; __u32 data_size_in; __u32 data_size_out;
    const void *ctx_in; void *ctx_out; __u32 ctx_size_in; __u32 ctx_size_out; __u32 retval;
    int repeat; __u32 duration; __u32 flags; __u32 cpu; __u32 batch_size;
};
int bpf_prog_test_run_opts(int prog_fd, struct bpf_test_run_opts *opts);
/* The kernel's struct bpf_map_info (up to map_extra, Linux 5.16) and a prefix of bpf_link_info
 * (the kernel copies min(sizes); fields it does not have stay zero). */
struct bpf_map_info {
    __u32 type; __u32 id; __u32 key_size; __u32 value_size; __u32 max_entries; __u32 map_flags;
    char name[16]; __u32 ifindex; __u32 btf_vmlinux_value_type_id; __u64 netns_dev; __u64 netns_ino;
    __u32 btf_id; __u32 btf_key_type_id; __u32 btf_value_type_id; __u32 _pad; __u64 map_extra;
};
struct bpf_link_info { __u32 type; __u32 id; __u32 prog_id; };

typedef int (*ring_buffer_sample_fn)(void *ctx, void *data, size_t size);
struct ring_buffer *ring_buffer__new(int map_fd, ring_buffer_sample_fn sample_cb, void *ctx,
                                     const struct ring_buffer_opts *opts);
void ring_buffer__free(struct ring_buffer *rb);
int ring_buffer__poll(struct ring_buffer *rb, int timeout_ms);
int ring_buffer__consume(struct ring_buffer *rb);
int ring_buffer__epoll_fd(const struct ring_buffer *rb);
int ring_buffer__consume_n(struct ring_buffer *rb, size_t n);   /* libbpf >= 1.5 */

typedef int (*libbpf_print_fn_t)(int level, const char *fmt, void *args);
libbpf_print_fn_t libbpf_set_print(libbpf_print_fn_t fn);
int libbpf_num_possible_cpus(void);
int libbpf_probe_bpf_prog_type(int prog_type, const void *opts);
int libbpf_probe_bpf_map_type(int map_type, const void *opts);
int libbpf_major_version(void);
int libbpf_minor_version(void);
"""

LIBC_CDEF = """
int vsnprintf(char *str, size_t size, const char *format, void *ap);
long syscall(long number, ...);   /* perf_event_open (pycore.link.perf_event) */
"""


GENERATED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ffi.py")


def generate() -> str:
    """The source of ``_ffi.py`` for the declarations above."""
    import tempfile

    from cffi import FFI

    builder = FFI()
    builder.cdef(CDEF)
    builder.cdef(LIBC_CDEF)
    builder.set_source("pycore.native._ffi", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "_ffi.py")
        builder.emit_python_code(path)
        with open(path) as f:
            return f.read()


if __name__ == "__main__":
    with open(GENERATED, "w") as out:
        out.write(generate())
    print(f"wrote {GENERATED}")
