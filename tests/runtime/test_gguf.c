/* SPDX-License-Identifier: MIT */
/* GGUF: fixtures written independently by tests/goldens/gen_gguf_fixtures.py
 * (read back against the script's values in mmap and read modes; re-emitted
 * by the writer byte for byte); the writer from fc_tensors; typed getters;
 * one crafted file per validation rule; truncation at every length and
 * byte flips over a valid file; writer errors leave no file. Temporary
 * files live in a mkdtemp directory that the suite removes. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

FCT_SUITE_WITH_TMPDIR(gguf, 2, "fc_gguf_");

/* ---- helpers ------------------------------------------------------------------ */

static const char *P(const char *name) { return fct_path(dir, name); }

static const char *G(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/gguf/%s", FC_GOLDEN_DIR, name);
    return buf;
}

static int dir_count(void)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void expect_status(fc_status got, fc_status want, const char *s1, const char *s2)
{
    const char *m = fc_ctx_error(ctx);
    cr_expect_eq(got, want, "want %s, got %s: %s", fc_status_name(want), fc_status_name(got), m);
    cr_expect_eq(fc_ctx_status(ctx), want);
    if (s1) cr_expect(strstr(m, s1), "message lacks \"%s\": %s", s1, m);
    if (s2) cr_expect(strstr(m, s2), "message lacks \"%s\": %s", s2, m);
    fc_ctx_clear_error(ctx);
}

/* ---- the fixtures ---------------------------------------------------------------- */

static void check_tensor(fc_gguf *g, const char *name, int rank, const int64_t *dim, const double *v, int n)
{
    fc_tensor *t = fc_gguf_tensor(g, name);
    cr_assert(t, "%s: %s", name, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_rank(t), rank, "%s", name);
    for (int a = 0; a < rank; a++) cr_expect_eq(fc_tensor_dim(t, a), dim[a], "%s axis %d", name, a);
    cr_assert_eq(fc_tensor_numel(t), n);
    int64_t idx[8] = {0};
    for (int i = 0; i < n; i++) {
        int64_t r = i;
        for (int a = rank - 1; a >= 0; a--) {
            idx[a] = r % dim[a];
            r /= dim[a];
        }
        cr_expect_eq(fc_tensor_get(t, idx), v[i], "%s[%d]: %g vs %g", name, i, fc_tensor_get(t, idx), v[i]);
    }
    fc_release(t);
}

static void check_reference_v3(int flags)
{
    fc_gguf *g = fc_gguf_open(ctx, G("reference_v3.gguf"), flags);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_version(g), 3);
    cr_expect_eq(fc_gguf_alignment(g), 32);
    cr_expect_eq(fc_gguf_data_offset(g) % 32, 0);
    cr_assert_eq(fc_gguf_kv_count(g), 26);
    cr_expect_str_eq(fc_gguf_kv_key(g, 0), "general.architecture");
    cr_expect_eq(fc_gguf_kv_type(g, 0), FC_GGUF_STR);
    cr_expect_null(fc_gguf_kv_key(g, 26));
    cr_expect_eq(fc_gguf_kv_type(g, -1), -1);
    const char *s;
    size_t len;
    cr_assert_eq(fc_gguf_get_str(g, "general.architecture", &s, &len), FC_OK);
    cr_expect_str_eq(s, "fucina-test");
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    uint64_t u64; int64_t i64; float f32; double f64; int b;
    cr_assert_eq(fc_gguf_get_u8(g, "t.u8", &u8), FC_OK);
    cr_expect_eq(u8, 200);
    cr_assert_eq(fc_gguf_get_i8(g, "t.i8", &i8), FC_OK);
    cr_expect_eq(i8, -100);
    cr_assert_eq(fc_gguf_get_u16(g, "t.u16", &u16), FC_OK);
    cr_expect_eq(u16, 60000);
    cr_assert_eq(fc_gguf_get_i16(g, "t.i16", &i16), FC_OK);
    cr_expect_eq(i16, -30000);
    cr_assert_eq(fc_gguf_get_u32(g, "t.u32", &u32), FC_OK);
    cr_expect_eq(u32, 4000000000u);
    cr_assert_eq(fc_gguf_get_i32(g, "t.i32", &i32), FC_OK);
    cr_expect_eq(i32, -2000000000);
    cr_assert_eq(fc_gguf_get_f32(g, "t.f32", &f32), FC_OK);
    cr_expect_eq(f32, 1.5f);
    cr_assert_eq(fc_gguf_get_bool(g, "t.bool", &b), FC_OK);
    cr_expect_eq(b, 1);
    cr_assert_eq(fc_gguf_get_str(g, "t.str", &s, &len), FC_OK);
    cr_expect_eq(len, 12);
    cr_expect(!memcmp(s, "h\xc3\xa9llo\0world", 13));
    cr_assert_eq(fc_gguf_get_u64(g, "t.u64", &u64), FC_OK);
    cr_expect_eq(u64, ((uint64_t)1 << 63) + 5);
    cr_assert_eq(fc_gguf_get_i64(g, "t.i64", &i64), FC_OK);
    cr_expect_eq(i64, -((int64_t)1 << 62));
    cr_assert_eq(fc_gguf_get_f64(g, "t.f64", &f64), FC_OK);
    cr_expect_eq(f64, -0.1);

    /* arrays of every element type */
    int et;
    uint64_t n;
    const void *d;
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.u8", FC_GGUF_U8, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (uint8_t[]){1, 2, 255}, 3));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.i8", FC_GGUF_I8, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (int8_t[]){-1, 0, 127}, 3));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.u16", FC_GGUF_U16, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (uint16_t[]){1, 65535, 3}, 6));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.i16", FC_GGUF_I16, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (int16_t[]){-32768, 0, 5}, 6));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.u32", FC_GGUF_U32, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (uint32_t[]){7, 8, 9}, 12));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.i32", FC_GGUF_I32, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (int32_t[]){-7, 8, -9}, 12));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.f32", FC_GGUF_F32, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (float[]){0.25f, -1.0f, 3.5f}, 12));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.bool", FC_GGUF_BOOL, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (uint8_t[]){1, 0, 1}, 3));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.u64", FC_GGUF_U64, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (uint64_t[]){UINT64_MAX, 0, 1}, 24));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.i64", FC_GGUF_I64, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (int64_t[]){INT64_MIN, 0, INT64_MAX}, 24));
    cr_assert_eq(fc_gguf_get_arr_data(g, "t.arr.f64", FC_GGUF_F64, &d, &n), FC_OK);
    cr_expect(n == 3 && !memcmp(d, (double[]){1e300, -2.5, 0.0}, 24));
    cr_assert_eq(fc_gguf_get_arr(g, "t.arr.str", &et, &n), FC_OK);
    cr_expect(et == FC_GGUF_STR && n == 3);
    cr_assert_eq(fc_gguf_get_arr_str(g, "t.arr.str", 0, &s, &len), FC_OK);
    cr_expect(len == 1 && !strcmp(s, "a"));
    cr_assert_eq(fc_gguf_get_arr_str(g, "t.arr.str", 1, &s, &len), FC_OK);
    cr_expect(len == 0 && !strcmp(s, ""));
    cr_assert_eq(fc_gguf_get_arr_str(g, "t.arr.str", 2, &s, &len), FC_OK);
    cr_expect_str_eq(s, "\xc3\xbcn\xc3\xaf");
    cr_assert_eq(fc_gguf_get_arr(g, "t.arr.empty", &et, &n), FC_OK);
    cr_expect(et == FC_GGUF_U32 && n == 0);

    /* tensor infos */
    cr_assert_eq(fc_gguf_tensor_count(g), 11);
    fc_gguf_tensor_info ti;
    cr_assert(fc_gguf_tensor_info_at(g, 0, &ti));
    cr_expect_str_eq(ti.name, "f32");
    cr_expect(ti.type == FC_GGML_F32 && !strcmp(ti.type_name, "F32") && ti.n_dims == 2 && ti.ne[0] == 3 &&
              ti.ne[1] == 2 && ti.ne[2] == 1 && ti.nbytes == 24 && ti.offset == 0);
    cr_expect(!fc_gguf_tensor_info_at(g, 11, &ti));
    int64_t k = fc_gguf_find_tensor(g, "blk.0.q8_0");
    cr_assert_eq(k, 8);
    cr_assert(fc_gguf_tensor_info_at(g, k, &ti));
    cr_expect(ti.type == FC_GGML_Q8_0 && ti.nbytes == 68 && ti.offset % 32 == 0 && ti.ne[0] == 32 && ti.ne[1] == 2);
    for (int i = 0; i < 68; i++) cr_expect_eq(((const unsigned char *)ti.data)[i], i % 251);
    cr_assert(fc_gguf_tensor_info_at(g, fc_gguf_find_tensor(g, "blk.0.q4_k"), &ti));
    cr_expect(ti.type == FC_GGML_Q4_K && ti.nbytes == 144 && !strcmp(ti.type_name, "Q4_K"));
    for (int i = 0; i < 144; i++) cr_expect_eq(((const unsigned char *)ti.data)[i], (i * 7) % 256);
    cr_assert(fc_gguf_tensor_info_at(g, fc_gguf_find_tensor(g, "mxfp4"), &ti));
    cr_expect(ti.type == FC_GGML_MXFP4 && ti.nbytes == 17);
    cr_expect_eq(fc_gguf_find_tensor(g, "nope"), -1);

    /* plain tensors, dims reversed to row-major */
    double v[8];
    for (int i = 0; i < 6; i++) v[i] = i * 0.5 - 1;
    check_tensor(g, "f32", 2, (int64_t[]){2, 3}, v, 6);
    check_tensor(g, "f16", 1, (int64_t[]){4}, (double[]){1, -2, 0.5, 65504}, 4);
    check_tensor(g, "bf16", 4, (int64_t[]){2, 1, 1, 2}, (double[]){1, 2, -1, 3}, 4);
    check_tensor(g, "f64", 1, (int64_t[]){2}, (double[]){0.1, -3}, 2);
    check_tensor(g, "i8", 1, (int64_t[]){3}, (double[]){-1, 2, -3}, 3);
    check_tensor(g, "i16", 1, (int64_t[]){2}, (double[]){-300, 300}, 2);
    check_tensor(g, "i32", 2, (int64_t[]){2, 2}, (double[]){-1, 999, 1999, 2999}, 4);
    check_tensor(g, "i64", 1, (int64_t[]){1}, (double[]){-1099511627776.0}, 1);
    fc_gguf_close(g);
}

Test(gguf, reference_v3_mmap) { check_reference_v3(0); }
Test(gguf, reference_v3_read) { check_reference_v3(FC_GGUF_READ); }

Test(gguf, reference_align64_and_v2)
{
    fc_gguf *g = fc_gguf_open(ctx, G("reference_align64.gguf"), 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_alignment(g), 64);
    cr_expect_eq(fc_gguf_data_offset(g) % 64, 0);
    fc_gguf_tensor_info ti;
    cr_assert(fc_gguf_tensor_info_at(g, 1, &ti));
    cr_expect_eq(ti.offset, 64);
    check_tensor(g, "a", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5}, 5);
    check_tensor(g, "b", 1, (int64_t[]){3}, (double[]){-1, -2, -3}, 3);
    fc_gguf_close(g);

    g = fc_gguf_open(ctx, G("reference_v2.gguf"), FC_GGUF_READ);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_version(g), 2);
    uint32_t u;
    cr_assert_eq(fc_gguf_get_u32(g, "t.v2", &u), FC_OK);
    cr_expect_eq(u, 2);
    check_tensor(g, "x", 1, (int64_t[]){2}, (double[]){0.5, 0.25}, 2);
    fc_gguf_close(g);
}

Test(gguf, getter_errors)
{
    fc_gguf *g = fc_gguf_open(ctx, G("reference_v3.gguf"), 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    float f;
    expect_status(fc_gguf_get_f32(g, "t.u8", &f), FC_ERR_DTYPE, "\"t.u8\" is UINT8", "not FLOAT32");
    uint32_t u;
    expect_status(fc_gguf_get_u32(g, "t.missing", &u), FC_ERR_INVALID_ARG, "no key \"t.missing\"", NULL);
    const void *d;
    expect_status(fc_gguf_get_arr_data(g, "t.arr.u8", FC_GGUF_F32, &d, NULL), FC_ERR_DTYPE, "array of UINT8",
                  "not of FLOAT32");
    const char *s;
    expect_status(fc_gguf_get_arr_str(g, "t.arr.str", 3, &s, NULL), FC_ERR_INVALID_ARG, "out of range", NULL);
    expect_status(fc_gguf_get_arr_str(g, "t.arr.u8", 0, &s, NULL), FC_ERR_DTYPE, "not of STRING", NULL);
    expect_status(fc_gguf_get_str(g, "t.arr.str", &s, NULL), FC_ERR_DTYPE, "is ARRAY, not STRING", NULL);
    /* Block types come back as block tensors (test_quant_tensor.c checks them further). */
    fc_tensor *q = fc_gguf_tensor(g, "blk.0.q4_k");
    cr_expect(q && fc_tensor_dtype(q) == FC_Q4_K && fc_tensor_nbytes(q) == 144, "%s", fc_ctx_error(ctx));
    fc_release(q);
    cr_expect_null(fc_gguf_tensor(g, "nope"));
    expect_status(fc_ctx_status(ctx), FC_ERR_INVALID_ARG, "no tensor \"nope\"", NULL);
    fc_gguf_close(g);
}

/* A FIFO (or any non-regular file) is refused at once, naming the path: the
 * open must not block waiting for a writer (the timeout turns a regression
 * into a failure instead of a hang). The loader and the CLI go through here. */
Test(gguf, fifo_refused, .timeout = 10)
{
    cr_assert_eq(mkfifo(P("model.fifo"), 0600), 0, "mkfifo: %s", strerror(errno));
    cr_assert_null(fc_gguf_open(ctx, P("model.fifo"), 0));
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "not a regular file", "model.fifo");
    cr_assert_null(fc_gguf_open(ctx, P("model.fifo"), FC_GGUF_READ));
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "not a regular file", "model.fifo");
    cr_assert_null(fc_llm_model_load(ctx, P("model.fifo")));
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "not a regular file", "model.fifo");
    cr_assert_null(fc_safetensors_open(ctx, P("model.fifo"), 0));
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "not a regular file", "model.fifo");
    cr_assert_eq(unlink(P("model.fifo")), 0);
}

Test(gguf, tensor_outlives_handle)
{
    fc_gguf *g = fc_gguf_open(ctx, G("reference_v3.gguf"), 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    fc_tensor *t = fc_gguf_tensor(g, "f32");
    cr_assert(t);
    fc_gguf_close(g);
    cr_expect_eq(fc_tensor_get(t, (int64_t[]){1, 2}), 1.5);
    fc_release(t);
}

/* ---- the writer ------------------------------------------------------------------ */

/* Re-emit every KV and tensor of a fixture: identical bytes. */
static void reemit(const char *fixture, int flags)
{
    fc_gguf *g = fc_gguf_open(ctx, G(fixture), flags);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w);
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) cr_assert_eq(fc_gguf_writer_copy_kv(w, g, i), FC_OK);
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        cr_assert_eq(fc_gguf_writer_add_raw(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data, ti.nbytes), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_gguf_writer_save(w, P("out.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    fc_gguf_close(g);
    size_t na, nb;
    unsigned char *a = fct_read_file(G(fixture), &na), *b = fct_read_file(P("out.gguf"), &nb);
    cr_assert_eq(na, nb, "%s: %zu vs %zu bytes", fixture, na, nb);
    size_t first = 0;
    while (first < na && a[first] == b[first]) first++;
    cr_expect_eq(first, na, "%s: first difference at byte %zu", fixture, first);
    free(a);
    free(b);
    cr_assert_eq(dir_count(), 1); /* no temporary left */
}

Test(gguf, reemit_identical_bytes)
{
    reemit("reference_v3.gguf", 0);
    reemit("reference_align64.gguf", FC_GGUF_READ);
}

Test(gguf, writer_from_tensors)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w);
    fc_tensor *a = fc_arange(ctx, FC_F32, "x", 12);
    fc_tensor *a3 = fc_reshape(ctx, a, (fc_dim[]){{"p", 2}, {"q", 3}, {"r", 2}}, 3);
    cr_assert(a3, "%s", fc_ctx_error(ctx));
    fc_tensor *s = fc_scalar(ctx, FC_I64, -7);
    fc_tensor *h = fc_full(ctx, FC_BF16, (fc_dim[]){{"r", 3}}, 1, 2.5);
    cr_assert_eq(fc_gguf_set_u32(w, "general.alignment", 16), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "general.name", "w"), FC_OK);
    const char *strs[] = {"x", "yy"};
    cr_assert_eq(fc_gguf_set_arr_str(w, "tok", strs, NULL, 2), FC_OK);
    cr_assert_eq(fc_gguf_set_arr(w, "f", FC_GGUF_F64, (double[]){1, 2}, 2), FC_OK);
    cr_assert_eq(fc_gguf_set_bool(w, "b", 1), FC_OK);
    cr_assert_eq(fc_gguf_writer_add_tensor(w, "a", a3), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_add_tensor(w, "s", s), FC_OK);
    cr_assert_eq(fc_gguf_writer_add_tensor(w, "h", h), FC_OK);
    unsigned char q[34] = {1};
    cr_assert_eq(fc_gguf_writer_add_raw(w, "q", FC_GGML_Q8_0, 1, (int64_t[]){32}, q, 34), FC_OK);
    cr_assert_eq(fc_gguf_writer_save(w, P("w.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);

    fc_gguf *g = fc_gguf_open(ctx, P("w.gguf"), 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_alignment(g), 16);
    fc_gguf_tensor_info ti;
    cr_assert(fc_gguf_tensor_info_at(g, 0, &ti));
    cr_expect(ti.n_dims == 3 && ti.ne[0] == 2 && ti.ne[1] == 3 && ti.ne[2] == 2 && ti.offset == 0);
    cr_assert(fc_gguf_tensor_info_at(g, 1, &ti));
    cr_expect(ti.n_dims == 1 && ti.ne[0] == 1 && ti.type == FC_GGML_I64 && ti.offset == 48);
    cr_assert(fc_gguf_tensor_info_at(g, 2, &ti));
    cr_expect(ti.type == FC_GGML_BF16 && ti.offset == 64);
    cr_assert(fc_gguf_tensor_info_at(g, 3, &ti));
    cr_expect(ti.type == FC_GGML_Q8_0 && ti.offset == 80 && !memcmp(ti.data, q, 34));
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i;
    check_tensor(g, "a", 3, (int64_t[]){2, 3, 2}, v, 12);
    check_tensor(g, "s", 1, (int64_t[]){1}, (double[]){-7}, 1);
    check_tensor(g, "h", 1, (int64_t[]){3}, (double[]){2.5, 2.5, 2.5}, 3);
    const char *str;
    cr_assert_eq(fc_gguf_get_arr_str(g, "tok", 1, &str, NULL), FC_OK);
    cr_expect_str_eq(str, "yy");
    fc_gguf_close(g);
    fc_release(a);
    fc_release(a3);
    fc_release(s);
    fc_release(h);
}

Test(gguf, writer_errors_leave_no_file)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w);
    cr_assert_eq(fc_gguf_set_u32(w, "k", 1), FC_OK);
    expect_status(fc_gguf_set_f32(w, "k", 1), FC_ERR_INVALID_ARG, "duplicate key \"k\"", NULL);
    expect_status(fc_gguf_set_u32(w, "", 1), FC_ERR_INVALID_ARG, "empty", NULL);
    float x[32] = {0};
    cr_assert_eq(fc_gguf_writer_add_raw(w, "t", FC_GGML_F32, 1, (int64_t[]){4}, x, 16), FC_OK);
    expect_status(fc_gguf_writer_add_raw(w, "t", FC_GGML_F32, 1, (int64_t[]){4}, x, 16), FC_ERR_INVALID_ARG,
                  "duplicate tensor name \"t\"", NULL);
    expect_status(fc_gguf_writer_add_raw(w, "u", FC_GGML_F32, 1, (int64_t[]){4}, x, 12), FC_ERR_INVALID_ARG,
                  "12 bytes given", "needs 16");
    expect_status(fc_gguf_writer_add_raw(w, "u", 31, 1, (int64_t[]){4}, x, 16), FC_ERR_INVALID_ARG,
                  "unknown ggml type id 31", NULL);
    expect_status(fc_gguf_writer_add_raw(w, "u", FC_GGML_Q4_0, 1, (int64_t[]){16}, x, 9), FC_ERR_SHAPE,
                  "not a multiple of the type's block size", NULL);
    expect_status(fc_gguf_writer_add_raw(w, "u", FC_GGML_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, x, 4),
                  FC_ERR_INVALID_ARG, "n_dims 5", NULL);
    fc_tensor *b = fc_zeros(ctx, FC_BOOL, (fc_dim[]){{"i", 2}}, 1);
    expect_status(fc_gguf_writer_add_tensor(w, "b", b), FC_ERR_DTYPE, "bool", NULL);
    fc_release(b);
    cr_assert_eq(fc_gguf_set_u32(w, "general.alignment", 48), FC_OK);
    expect_status(fc_gguf_writer_save(w, P("bad.gguf")), FC_ERR_INVALID_ARG, "power of two", NULL);
    cr_expect_eq(dir_count(), 0);
    fc_gguf_writer_free(w);

    w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_u64(w, "general.alignment", 32), FC_OK);
    expect_status(fc_gguf_writer_save(w, P("bad.gguf")), FC_ERR_INVALID_ARG, "must be UINT32", NULL);
    cr_expect_eq(dir_count(), 0);
    /* an unwritable destination: an IO error, nothing left behind */
    fc_gguf_writer_free(w);
    w = fc_gguf_writer_new(ctx);
    fc_status st = fc_gguf_writer_save(w, P("no/such/dir.gguf"));
    expect_status(st, FC_ERR_IO, NULL, NULL);
    cr_expect_eq(dir_count(), 0);
    fc_gguf_writer_free(w);
}

/* ---- malformed files ------------------------------------------------------------- */

typedef struct B {
    unsigned char b[8192];
    size_t n;
} B;

static void put(B *b, const void *p, size_t n)
{
    cr_assert(b->n + n <= sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void u32(B *b, uint32_t v) { put(b, &v, 4); }
static void u64(B *b, uint64_t v) { put(b, &v, 8); }
static void str(B *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void hdr(B *b, uint32_t version, uint64_t n_t, uint64_t n_kv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_t);
    u64(b, n_kv);
}
static void kv_u32(B *b, const char *k, uint32_t v) { str(b, k); u32(b, FC_GGUF_U32); u32(b, v); }
static void tinfo(B *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}
static void pad(B *b, size_t a) { while (b->n % a) b->b[b->n++] = 0; }
static void zeros(B *b, size_t n) { memset(b->b + b->n, 0, n); b->n += n; }

static void expect_bad(const B *b, const char *s1, const char *s2)
{
    fct_write_file(P("bad.gguf"), b->b, b->n);
    for (int mode = 0; mode < 2; mode++) {
        fc_gguf *g = fc_gguf_open(ctx, P("bad.gguf"), mode ? FC_GGUF_READ : 0);
        cr_assert_null(g, "opened a malformed file (want \"%s\")", s1);
        const char *m = fc_ctx_error(ctx);
        cr_expect_eq(fc_ctx_status(ctx), FC_ERR_FORMAT, "want FC_ERR_FORMAT: %s", m);
        cr_expect(strstr(m, "fc_gguf_open") && strstr(m, "bad.gguf"), "message lacks the op or file: %s", m);
        if (s1) cr_expect(strstr(m, s1), "message lacks \"%s\": %s", s1, m);
        if (s2) cr_expect(strstr(m, s2), "message lacks \"%s\": %s", s2, m);
        fc_ctx_clear_error(ctx);
    }
}

/* One valid F32 tensor "t" of ne0 elements with a valid data section. */
static void one_tensor(B *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off, size_t data)
{
    hdr(b, 3, 1, 0);
    tinfo(b, name, nd, ne, type, off);
    pad(b, 32);
    zeros(b, data);
}

Test(gguf, malformed_header_and_kvs)
{
    B b;
    b.n = 0;
    put(&b, "GGUF", 4);
    u32(&b, 3);
    expect_bad(&b, "needs 24", "at byte 0");
    hdr(&b, 3, 0, 0);
    memcpy(b.b, "GGML", 4);
    expect_bad(&b, "magic at byte 0", "not \"GGUF\"");
    hdr(&b, 1, 0, 0);
    expect_bad(&b, "version at byte 4", "v1 (32-bit counts) is not supported");
    hdr(&b, 0, 0, 0);
    expect_bad(&b, "version at byte 4", "0 is not supported");
    hdr(&b, 4, 0, 0);
    expect_bad(&b, "version at byte 4", "4 is not supported");
    hdr(&b, 0x03000000, 0, 0);
    expect_bad(&b, "byte-swapped", NULL);
    hdr(&b, 3, 0, UINT64_MAX);
    expect_bad(&b, "KV count at byte 16", "cannot fit");
    hdr(&b, 3, UINT64_MAX, 0);
    expect_bad(&b, "tensor count at byte 8", "cannot fit");
    hdr(&b, 3, (UINT64_MAX / 33) + 1, 0);
    expect_bad(&b, "tensor count", "cannot fit");
    /* key length over the cap, and past the end */
    hdr(&b, 3, 0, 1);
    u64(&b, (uint64_t)1 << 40);
    zeros(&b, 16);
    expect_bad(&b, "KV 0 key at byte 24", "exceeds the limit");
    hdr(&b, 3, 0, 1);
    u64(&b, 1000);
    zeros(&b, 16);
    expect_bad(&b, "KV 0 key at byte 24", "only 16 bytes left");
    hdr(&b, 3, 0, 1);
    str(&b, "");
    u32(&b, FC_GGUF_U32);
    u32(&b, 0);
    zeros(&b, 8);
    expect_bad(&b, "key is empty", "byte 24");
    hdr(&b, 3, 0, 1);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, FC_GGUF_U8);
    zeros(&b, 8);
    expect_bad(&b, "NUL byte", NULL);
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, 13);
    zeros(&b, 8);
    expect_bad(&b, "value type at byte 33", "13 is not a GGUF value type");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_BOOL);
    put(&b, "\x02", 1);
    expect_bad(&b, "BOOL value at byte 37", "not 0 or 1");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_ARR);
    u32(&b, FC_GGUF_ARR);
    u64(&b, 0);
    expect_bad(&b, "nested arrays", "byte 37");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_ARR);
    u32(&b, 99);
    u64(&b, 0);
    expect_bad(&b, "array element type at byte 37", "99 is not a GGUF value type");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_ARR);
    u32(&b, FC_GGUF_U64);
    u64(&b, (uint64_t)1 << 61);
    zeros(&b, 64);
    expect_bad(&b, "array length at byte 41", "only 64 bytes left");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_ARR);
    u32(&b, FC_GGUF_STR);
    u64(&b, 100);
    zeros(&b, 64);
    expect_bad(&b, "array length", "100 STRING elements");
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, FC_GGUF_STR);
    u64(&b, ((uint64_t)64 << 20) + 1);
    zeros(&b, 8);
    expect_bad(&b, "string value at byte 37", "exceeds the limit of 67108864");
    hdr(&b, 3, 0, 2);
    kv_u32(&b, "a", 1);
    kv_u32(&b, "a", 2);
    expect_bad(&b, "KV 1: duplicate key \"a\"", "first at KV 0");
    hdr(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, FC_GGUF_U64);
    u64(&b, 32);
    expect_bad(&b, "general.alignment", "must be UINT32");
    hdr(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect_bad(&b, "is 48", "power of two");
    hdr(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_bad(&b, "is 0", "power of two");
    hdr(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0x80000000u);
    expect_bad(&b, "is 2147483648", "power of two <= 1048576");
}

Test(gguf, malformed_tensors)
{
    B b;
    uint64_t one[] = {8};
    one_tensor(&b, "", 1, one, FC_GGML_F32, 0, 32);
    expect_bad(&b, "tensor 0 name at byte 24", "empty");
    one_tensor(&b, "0123456789012345678901234567890123456789012345678901234567890123", 1, one, FC_GGML_F32, 0, 32);
    expect_bad(&b, "tensor 0 name", "exceeds the limit of 63");
    one_tensor(&b, "t", 0, one, FC_GGML_F32, 0, 32);
    expect_bad(&b, "tensor \"t\" n_dims at byte 33", "0, must be 1..4");
    one_tensor(&b, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, FC_GGML_F32, 0, 32);
    expect_bad(&b, "n_dims", "5, must be 1..4");
    one_tensor(&b, "t", 2, (uint64_t[]){8, 0}, FC_GGML_F32, 0, 32);
    expect_bad(&b, "tensor \"t\" ne[1] at byte 45", "0, must be 1..INT64_MAX");
    one_tensor(&b, "t", 1, (uint64_t[]){UINT64_MAX}, FC_GGML_F32, 0, 32);
    expect_bad(&b, "ne[0]", "must be 1..INT64_MAX");
    one_tensor(&b, "t", 2, (uint64_t[]){(uint64_t)1 << 62, 4}, FC_GGML_F32, 0, 32);
    expect_bad(&b, "element count overflows int64", NULL);
    one_tensor(&b, "t", 2, (uint64_t[]){(uint64_t)1 << 31, (uint64_t)1 << 31}, FC_GGML_F64, 0, 32);
    expect_bad(&b, "byte size overflows", NULL);
    one_tensor(&b, "t", 1, one, 4, 0, 32);
    expect_bad(&b, "tensor \"t\" type at byte 45", "unknown ggml type id 4");
    one_tensor(&b, "t", 1, one, 31, 0, 32);
    expect_bad(&b, "unknown ggml type id 31", NULL);
    one_tensor(&b, "t", 1, one, 0xFFFFFFFFu, 0, 32);
    expect_bad(&b, "unknown ggml type id 4294967295", NULL);
    one_tensor(&b, "t", 1, (uint64_t[]){32}, FC_GGML_Q4_K, 0, 256);
    expect_bad(&b, "Q4_K, ne[0] 32, block 256", "not a multiple of the type's block size");
    one_tensor(&b, "t", 1, one, FC_GGML_F32, 4, 64);
    expect_bad(&b, "tensor \"t\" offset at byte 49", "4 is not a multiple of the alignment 32");
    one_tensor(&b, "t", 1, one, FC_GGML_F32, 0, 16);
    expect_bad(&b, "expected at least 96 bytes, file has 80", "truncated download");
    one_tensor(&b, "t", 1, one, FC_GGML_F32, UINT64_MAX - 31, 32);
    expect_bad(&b, "past the end of the file", NULL);
    /* the data section itself past the end */
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t", 1, one, FC_GGML_F32, 0);
    expect_bad(&b, "data section at byte 64", "past the end");
    /* two tensors */
    hdr(&b, 3, 2, 0);
    tinfo(&b, "a", 1, one, FC_GGML_F32, 0);
    tinfo(&b, "b", 1, (uint64_t[]){16}, FC_GGML_F32, 0);
    pad(&b, 32);
    zeros(&b, 64);
    expect_bad(&b, "overlap", "\"a\" [0, 32)");
    hdr(&b, 3, 2, 0);
    tinfo(&b, "a", 1, one, FC_GGML_F32, 0);
    tinfo(&b, "a", 1, one, FC_GGML_F32, 32);
    pad(&b, 32);
    zeros(&b, 64);
    expect_bad(&b, "tensor 1 at byte 57", "duplicate tensor name \"a\"");
    /* a tensor info cut short */
    hdr(&b, 3, 1, 0);
    str(&b, "t");
    u32(&b, 4);
    u64(&b, 8);
    u64(&b, 1);
    u64(&b, 1);
    zeros(&b, 4);
    expect_bad(&b, "tensor \"t\" ne[3] at byte 61", "needs 8 bytes, only 4 left");
    /* the same shapes, valid: accepted */
    hdr(&b, 3, 2, 0);
    tinfo(&b, "a", 1, one, FC_GGML_F32, 32);
    tinfo(&b, "b", 1, one, FC_GGML_F32, 0);
    pad(&b, 32);
    zeros(&b, 64);
    fct_write_file(P("ok.gguf"), b.b, b.n);
    fc_gguf *g = fc_gguf_open(ctx, P("ok.gguf"), 0);
    cr_expect(g, "%s", fc_ctx_error(ctx));
    fc_gguf_close(g);
}

/* Every prefix of a valid file is rejected cleanly; flipping any header
 * byte never crashes (ASan in CI) and either opens or fails cleanly. */
Test(gguf, truncation_and_byte_flips)
{
    size_t n;
    unsigned char *full = fct_read_file(G("reference_v3.gguf"), &n);
    for (size_t len = 0; len < n; len++) {
        fct_write_file(P("cut.gguf"), full, len);
        fc_gguf *g = fc_gguf_open(ctx, P("cut.gguf"), len % 2 ? FC_GGUF_READ : 0);
        cr_assert_null(g, "a %zu-byte prefix opened", len);
        fc_status st = fc_ctx_status(ctx);
        cr_assert(st == FC_ERR_FORMAT || st == FC_ERR_IO, "len %zu: %s", len, fc_status_name(st));
        cr_assert(strstr(fc_ctx_error(ctx), "cut.gguf"), "len %zu: %s", len, fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    }
    fc_gguf *g0 = fc_gguf_open(ctx, G("reference_v3.gguf"), 0);
    cr_assert(g0);
    size_t hdr_end = (size_t)fc_gguf_data_offset(g0);
    fc_gguf_close(g0);
    unsigned char *buf = malloc(n);
    int opened = 0;
    static const unsigned char flips[] = {0xFF, 0x01, 0x80};
    for (size_t pos = 0; pos < hdr_end; pos++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(buf, full, n);
            buf[pos] ^= flips[f];
            fct_write_file(P("flip.gguf"), buf, n);
            fc_gguf *g = fc_gguf_open(ctx, P("flip.gguf"), 0);
            if (!g) {
                fc_status st = fc_ctx_status(ctx);
                cr_assert(st == FC_ERR_FORMAT || st == FC_ERR_IO || st == FC_ERR_OOM, "pos %zu: %s", pos,
                          fc_status_name(st));
                cr_assert(fc_ctx_error(ctx)[0]);
                fc_ctx_clear_error(ctx);
                continue;
            }
            opened++;
            /* touch everything the handle exposes */
            for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
                fc_gguf_tensor_info ti;
                cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
                volatile unsigned sum = 0;
                for (uint64_t k = 0; k < ti.nbytes; k++) sum += ((const unsigned char *)ti.data)[k];
                fc_tensor *t = fc_gguf_tensor(g, ti.name);
                if (t) fc_release(t);
                else fc_ctx_clear_error(ctx);
            }
            for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) cr_assert(fc_gguf_kv_key(g, i));
            fc_gguf_close(g);
        }
    }
    cr_expect(opened > 0); /* some flips (values, not structure) leave a valid file */
    free(buf);
    free(full);
}
