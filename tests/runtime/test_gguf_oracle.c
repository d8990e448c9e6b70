/* SPDX-License-Identifier: MIT */
/* GGUF parity with ggml's own codec (the oracle, oracle/ggml_oracle.h):
 *   - the same content written by our writer and by ggml's gguf_write_to_file
 *     gives identical bytes (every KV type, arrays, string arrays, plain and
 *     block tensors with padding);
 *   - with a custom general.alignment, ggml reads our file at our offsets
 *     (ggml's own writer ignores that KV: see custom_alignment);
 *   - ggml's reader opens our file and sees the same keys, values, tensor
 *     names, types and offsets;
 *   - our reader opens ggml's file and sees the same content.
 * Skipped with a message when the oracle is absent. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct_golden.h"
#include "fucina/fucina.h"
#include "ggml_oracle.h"

/* The slice of ggml's ABI used here (ggml/include/ggml.h, gguf.h). */
struct ggml_context;
struct ggml_tensor;
struct gguf_context;
struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
struct gguf_init_params {
    bool no_alloc;
    struct ggml_context **ctx;
};
enum { GG_U8, GG_I8, GG_U16, GG_I16, GG_U32, GG_I32, GG_F32, GG_BOOL, GG_STR, GG_ARR, GG_U64, GG_I64, GG_F64 };

static struct {
    struct ggml_context *(*init)(struct ggml_init_params);
    void (*free)(struct ggml_context *);
    struct ggml_tensor *(*new_tensor)(struct ggml_context *, int type, int n_dims, const int64_t *ne);
    struct ggml_tensor *(*set_name)(struct ggml_tensor *, const char *);
    void *(*get_data)(const struct ggml_tensor *);
    size_t (*nbytes)(const struct ggml_tensor *);
    struct gguf_context *(*empty)(void);
    struct gguf_context *(*from_file)(const char *, struct gguf_init_params);
    void (*gfree)(struct gguf_context *);
    void (*u8)(struct gguf_context *, const char *, uint8_t);
    void (*i8)(struct gguf_context *, const char *, int8_t);
    void (*u16)(struct gguf_context *, const char *, uint16_t);
    void (*i16)(struct gguf_context *, const char *, int16_t);
    void (*u32)(struct gguf_context *, const char *, uint32_t);
    void (*i32)(struct gguf_context *, const char *, int32_t);
    void (*f32)(struct gguf_context *, const char *, float);
    void (*u64)(struct gguf_context *, const char *, uint64_t);
    void (*i64)(struct gguf_context *, const char *, int64_t);
    void (*f64)(struct gguf_context *, const char *, double);
    void (*bool_)(struct gguf_context *, const char *, bool);
    void (*str)(struct gguf_context *, const char *, const char *);
    void (*arr)(struct gguf_context *, const char *, int type, const void *, size_t);
    void (*arr_str)(struct gguf_context *, const char *, const char **, size_t);
    void (*add_tensor)(struct gguf_context *, const struct ggml_tensor *);
    bool (*write)(const struct gguf_context *, const char *, bool only_meta);
    int64_t (*n_kv)(const struct gguf_context *);
    int64_t (*find_key)(const struct gguf_context *, const char *);
    uint32_t (*get_u32)(const struct gguf_context *, int64_t);
    const char *(*get_str)(const struct gguf_context *, int64_t);
    int64_t (*n_tensors)(const struct gguf_context *);
    const char *(*tensor_name)(const struct gguf_context *, int64_t);
    int (*tensor_type)(const struct gguf_context *, int64_t);
    size_t (*tensor_offset)(const struct gguf_context *, int64_t);
    size_t (*data_offset)(const struct gguf_context *);
} G;

static fc_ctx *ctx;
static char dir[256];

static void load(void)
{
    const char *why;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
#define SYM(field, name)                                                   \
    do {                                                                   \
        *(void **)&G.field = fco_ggml_sym(name);                           \
        if (!G.field) cr_skip_test("ggml oracle lacks %s", name);          \
    } while (0)
    SYM(init, "ggml_init");
    SYM(free, "ggml_free");
    SYM(new_tensor, "ggml_new_tensor");
    SYM(set_name, "ggml_set_name");
    SYM(get_data, "ggml_get_data");
    SYM(nbytes, "ggml_nbytes");
    SYM(empty, "gguf_init_empty");
    SYM(from_file, "gguf_init_from_file");
    SYM(gfree, "gguf_free");
    SYM(u8, "gguf_set_val_u8");
    SYM(i8, "gguf_set_val_i8");
    SYM(u16, "gguf_set_val_u16");
    SYM(i16, "gguf_set_val_i16");
    SYM(u32, "gguf_set_val_u32");
    SYM(i32, "gguf_set_val_i32");
    SYM(f32, "gguf_set_val_f32");
    SYM(u64, "gguf_set_val_u64");
    SYM(i64, "gguf_set_val_i64");
    SYM(f64, "gguf_set_val_f64");
    SYM(bool_, "gguf_set_val_bool");
    SYM(str, "gguf_set_val_str");
    SYM(arr, "gguf_set_arr_data");
    SYM(arr_str, "gguf_set_arr_str");
    SYM(add_tensor, "gguf_add_tensor");
    SYM(write, "gguf_write_to_file");
    SYM(n_kv, "gguf_get_n_kv");
    SYM(find_key, "gguf_find_key");
    SYM(get_u32, "gguf_get_val_u32");
    SYM(get_str, "gguf_get_val_str");
    SYM(n_tensors, "gguf_get_n_tensors");
    SYM(tensor_name, "gguf_get_tensor_name");
    SYM(tensor_type, "gguf_get_tensor_type");
    SYM(tensor_offset, "gguf_get_tensor_offset");
    SYM(data_offset, "gguf_get_data_offset");
#undef SYM
}

static void setup(void)
{
    char err[256];
    ctx = fc_ctx_new(NULL, err, sizeof err);
    cr_assert_not_null(ctx, "%s", err);
    fct_tmpdir(dir, sizeof dir, "gguf_oracle");
}

static void teardown(void)
{
    fct_rm_tree(dir);
    fc_ctx_free(ctx);
}

TestSuite(gguf_oracle, .init = setup, .fini = teardown);

/* One tensor of the shared content: ggml type, dims (GGUF order), bytes. */
typedef struct spec {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    size_t bytes;
} spec;

static const spec tensors[] = {
    {"token_embd.weight", 0 /* F32 */, 2, {5, 3}, 5 * 3 * 4},
    {"blk.0.attn_q.weight", 1 /* F16 */, 2, {7, 2}, 7 * 2 * 2},
    {"blk.0.ffn_up.weight", 2 /* Q4_0 */, 2, {64, 3}, 2 * 3 * 18},
    {"blk.0.ffn_down.weight", 8 /* Q8_0 */, 2, {32, 5}, 5 * 34},
    {"blk.0.attn_k.weight", 12 /* Q4_K */, 2, {256, 2}, 2 * 144},
    {"blk.0.attn_v.weight", 14 /* Q6_K */, 1, {512}, 2 * 210},
    {"positions", 26 /* I32 */, 1, {7}, 7 * 4},
    {"scale", 30 /* BF16 */, 3, {3, 1, 2}, 6 * 2},
};
#define N_TENSORS (sizeof tensors / sizeof tensors[0])

static unsigned char *payload(size_t i)
{
    unsigned char *p = malloc(tensors[i].bytes);
    cr_assert_not_null(p);
    uint64_t s = 0x9E3779B97F4A7C15ull * (i + 1);
    for (size_t j = 0; j < tensors[i].bytes; j++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[j] = (unsigned char)(s >> 24);
    }
    return p;
}

static const int32_t ints[] = {1, -2, 3, 1 << 30};
static const float floats[] = {0.5f, -1.25f, 3e-38f};
static const char *const strs[] = {"<|im_start|>", "", "h\xc3\xa9llo", "Ġthe"};

/* The same KVs through both writers; alignment 0 = default. */
static void ours_kvs(fc_gguf_writer *w, uint32_t alignment)
{
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "qwen3"), FC_OK);
    if (alignment) cr_assert_eq(fc_gguf_set_u32(w, "general.alignment", alignment), FC_OK);
    cr_assert_eq(fc_gguf_set_u8(w, "t.u8", 200), FC_OK);
    cr_assert_eq(fc_gguf_set_i8(w, "t.i8", -100), FC_OK);
    cr_assert_eq(fc_gguf_set_u16(w, "t.u16", 60000), FC_OK);
    cr_assert_eq(fc_gguf_set_i16(w, "t.i16", -30000), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, "t.u32", 4000000000u), FC_OK);
    cr_assert_eq(fc_gguf_set_i32(w, "t.i32", -2000000000), FC_OK);
    cr_assert_eq(fc_gguf_set_f32(w, "t.f32", 1.5e-7f), FC_OK);
    cr_assert_eq(fc_gguf_set_u64(w, "t.u64", 18000000000000000000ull), FC_OK);
    cr_assert_eq(fc_gguf_set_i64(w, "t.i64", -9000000000000000000ll), FC_OK);
    cr_assert_eq(fc_gguf_set_f64(w, "t.f64", -2.5e300), FC_OK);
    cr_assert_eq(fc_gguf_set_bool(w, "t.bool", 1), FC_OK);
    cr_assert_eq(fc_gguf_set_arr(w, "t.arr_i32", FC_GGUF_I32, ints, 4), FC_OK);
    cr_assert_eq(fc_gguf_set_arr(w, "t.arr_f32", FC_GGUF_F32, floats, 3), FC_OK);
    cr_assert_eq(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", strs, NULL, 4), FC_OK);
}

static void ggml_kvs(struct gguf_context *g, uint32_t alignment)
{
    G.str(g, "general.architecture", "qwen3");
    if (alignment) G.u32(g, "general.alignment", alignment);
    G.u8(g, "t.u8", 200);
    G.i8(g, "t.i8", -100);
    G.u16(g, "t.u16", 60000);
    G.i16(g, "t.i16", -30000);
    G.u32(g, "t.u32", 4000000000u);
    G.i32(g, "t.i32", -2000000000);
    G.f32(g, "t.f32", 1.5e-7f);
    G.u64(g, "t.u64", 18000000000000000000ull);
    G.i64(g, "t.i64", -9000000000000000000ll);
    G.f64(g, "t.f64", -2.5e300);
    G.bool_(g, "t.bool", true);
    G.arr(g, "t.arr_i32", GG_I32, ints, 4);
    G.arr(g, "t.arr_f32", GG_F32, floats, 3);
    G.arr_str(g, "tokenizer.ggml.tokens", (const char **)strs, 4);
}

/* Writes the content with both writers; returns our path, ggml's in *theirs. */
static void write_both(uint32_t alignment, size_t n_t, char *ours, char *theirs)
{
    unsigned char *data[N_TENSORS];
    for (size_t i = 0; i < n_t; i++) data[i] = payload(i);

    snprintf(ours, 512, "%s", fct_path(dir, "ours.gguf"));
    snprintf(theirs, 512, "%s", fct_path(dir, "ggml.gguf"));

    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    ours_kvs(w, alignment);
    for (size_t i = 0; i < n_t; i++)
        cr_assert_eq(fc_gguf_writer_add_raw(w, tensors[i].name, tensors[i].type, tensors[i].n_dims, tensors[i].ne,
                                            data[i], tensors[i].bytes),
                     FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_save(w, ours), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);

    struct ggml_context *gctx = G.init((struct ggml_init_params){16 << 20, NULL, false});
    cr_assert_not_null(gctx);
    struct gguf_context *g = G.empty();
    ggml_kvs(g, alignment);
    for (size_t i = 0; i < n_t; i++) {
        struct ggml_tensor *t = G.new_tensor(gctx, (int)tensors[i].type, tensors[i].n_dims, tensors[i].ne);
        G.set_name(t, tensors[i].name);
        cr_assert_eq(G.nbytes(t), tensors[i].bytes, "%s: ggml says %zu bytes", tensors[i].name, G.nbytes(t));
        memcpy(G.get_data(t), data[i], tensors[i].bytes);
        G.add_tensor(g, t);
    }
    cr_assert(G.write(g, theirs, false), "ggml could not write %s", theirs);
    G.gfree(g);
    G.free(gctx);
    for (size_t i = 0; i < n_t; i++) free(data[i]);
}

static void same_bytes(uint32_t alignment, size_t n_t)
{
    char ours[512], theirs[512];
    write_both(alignment, n_t, ours, theirs);
    size_t na, nb;
    unsigned char *a = fct_read_file(ours, &na), *b = fct_read_file(theirs, &nb);
    size_t first = 0;
    while (first < na && first < nb && a[first] == b[first]) first++;
    cr_expect(na == nb && first == na, "alignment %u, %zu tensors: %zu bytes (ours) vs %zu (ggml), first difference at %zu",
              alignment, n_t, na, nb, first);
    free(a);
    free(b);
}

Test(gguf_oracle, writer_bytes_identical_to_ggml)
{
    load();
    same_bytes(0, N_TENSORS);
    same_bytes(0, 0); /* metadata only */
    same_bytes(0, 1);
}

/* A custom general.alignment: ggml's writer keeps padding to 32 (its
 * context's alignment is only taken from the KV when a file is read), so its
 * file contradicts its own KV and both readers reject it; ours pads to the KV
 * and ggml reads it with the same offsets. */
Test(gguf_oracle, custom_alignment)
{
    load();
    char ours[512], theirs[512];
    write_both(64, N_TENSORS, ours, theirs);
    struct gguf_context *g = G.from_file(ours, (struct gguf_init_params){true, NULL});
    cr_assert_not_null(g, "ggml rejected our 64-aligned file");
    fc_gguf *mine = fc_gguf_open(ctx, ours, 0);
    cr_assert_not_null(mine, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_alignment(mine), 64u);
    cr_expect_eq(G.data_offset(g), fc_gguf_data_offset(mine));
    for (int64_t i = 0; i < (int64_t)N_TENSORS; i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(mine, i, &ti));
        cr_expect_eq(ti.offset % 64, 0u);
        cr_expect_eq(G.tensor_offset(g, i), ti.offset, "%s", ti.name);
    }
    fc_gguf_close(mine);
    G.gfree(g);

    cr_expect_null(fc_gguf_open(ctx, theirs, 0), "ggml's 32-padded file claiming alignment 64 was accepted");
    cr_expect(strstr(fc_ctx_error(ctx), "not a multiple of the alignment 64"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    g = G.from_file(theirs, (struct gguf_init_params){true, NULL});
    cr_expect_null(g, "ggml accepted its own inconsistent file");
    if (g) G.gfree(g);
}

Test(gguf_oracle, ggml_reads_our_file)
{
    load();
    char ours[512], theirs[512];
    write_both(0, N_TENSORS, ours, theirs);
    struct gguf_context *g = G.from_file(ours, (struct gguf_init_params){true, NULL});
    cr_assert_not_null(g, "ggml rejected our file");
    cr_expect_eq(G.n_kv(g), 15);
    int64_t k = G.find_key(g, "t.u32");
    cr_assert_geq(k, 0);
    cr_expect_eq(G.get_u32(g, k), 4000000000u);
    k = G.find_key(g, "general.architecture");
    cr_assert_geq(k, 0);
    cr_expect_str_eq(G.get_str(g, k), "qwen3");
    cr_assert_eq(G.n_tensors(g), (int64_t)N_TENSORS);
    fc_gguf *mine = fc_gguf_open(ctx, ours, 0);
    cr_assert_not_null(mine, "%s", fc_ctx_error(ctx));
    cr_expect_eq(G.data_offset(g), fc_gguf_data_offset(mine));
    for (int64_t i = 0; i < (int64_t)N_TENSORS; i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(mine, i, &ti));
        cr_expect_str_eq(G.tensor_name(g, i), ti.name);
        cr_expect_eq((uint32_t)G.tensor_type(g, i), ti.type, "%s", ti.name);
        cr_expect_eq(G.tensor_offset(g, i), ti.offset, "%s", ti.name);
    }
    fc_gguf_close(mine);
    G.gfree(g);
}

Test(gguf_oracle, we_read_ggml_file)
{
    load();
    char ours[512], theirs[512];
    write_both(0, N_TENSORS, ours, theirs);
    fc_gguf *g = fc_gguf_open(ctx, theirs, FC_GGUF_READ);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_alignment(g), 32u);
    uint64_t u64v = 0;
    cr_expect_eq(fc_gguf_get_u64(g, "t.u64", &u64v), FC_OK);
    cr_expect_eq(u64v, 18000000000000000000ull);
    double f64v = 0;
    cr_expect_eq(fc_gguf_get_f64(g, "t.f64", &f64v), FC_OK);
    cr_expect_eq(f64v, -2.5e300);
    const char *s;
    size_t len;
    cr_expect_eq(fc_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 2, &s, &len), FC_OK);
    cr_expect(len == strlen(strs[2]) && !memcmp(s, strs[2], len));
    cr_assert_eq(fc_gguf_tensor_count(g), (int64_t)N_TENSORS);
    for (size_t i = 0; i < N_TENSORS; i++) {
        int64_t at = fc_gguf_find_tensor(g, tensors[i].name);
        cr_assert_geq(at, 0, "%s missing", tensors[i].name);
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, at, &ti));
        cr_expect_eq(ti.type, tensors[i].type);
        cr_expect_eq(ti.nbytes, tensors[i].bytes);
        unsigned char *want = payload(i);
        cr_expect(!memcmp(ti.data, want, tensors[i].bytes), "%s: bytes differ", tensors[i].name);
        free(want);
    }
    fc_gguf_close(g);
}
