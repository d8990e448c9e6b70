/* SPDX-License-Identifier: MIT */
/* The tensor core: shapes and names, views, scopes, the buffer pool, errors,
 * casting rules, random tensors. References are direct index arithmetic and
 * the casting rules as written in fucina/dtype.h. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

static fc_ctx *ctx;

static void setup(void) { ctx = fct_suite_begin(2); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(tensor, .init = setup, .fini = teardown);

static fc_tensor *iota(fc_dtype dt, const fc_dim *dims, int rank)
{
    fc_tensor *t = fc_empty(ctx, dt, dims, rank);
    int64_t n = fc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)i;
        if (dt == FC_F32) ((float *)fc_tensor_data(t))[i] = v;
    }
    return t;
}

Test(tensor, shapes_and_names)
{
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"batch", 32}, {"in", 784}));
    cr_assert(x);
    char buf[128];
    cr_expect_str_eq(fc_tensor_describe(x, buf, sizeof buf), "f32[batch=32, in=784]");
    cr_expect_eq(fc_tensor_size(x, "in"), 784);
    cr_expect_eq(fc_tensor_size(x, "out"), 0);
    cr_expect_eq(fc_tensor_axis_index(x, "batch"), 0);
    cr_expect_eq(fc_tensor_numel(x), 32 * 784);
    cr_expect(fc_tensor_is_contiguous(x));
    fc_release(x);
    int64_t sz[3] = {2, 3, 4};
    fc_tensor *p = fc_empty_pos(ctx, FC_I32, 3, sz);
    cr_expect_str_eq(fc_tensor_describe(p, buf, sizeof buf), "i32[_0=2, _1=3, _2=4]");
    fc_release(p);
    fc_tensor *s = fc_scalar(ctx, FC_F64, 2.5);
    cr_expect_eq(fc_tensor_rank(s), 0);
    cr_expect_eq(fc_tensor_item(s), 2.5);
    fc_release(s);
}

Test(tensor, shape_errors_name_the_axis)
{
    cr_expect_null(fc_zeros(ctx, FC_F32, FC_SHAPE({"batch", 3}, {"in", 0})));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_SHAPE);
    cr_expect(strstr(fc_ctx_error(ctx), "\"in\"") && strstr(fc_ctx_error(ctx), "fc_empty"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 3}, {"a", 2})));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_AXIS);
    cr_expect(strstr(fc_ctx_error(ctx), "twice"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_zeros(ctx, FC_F32, FC_SHAPE({"bad name", 3})));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_AXIS);
    fc_ctx_clear_error(ctx);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_expect_null(fc_empty_pos(ctx, FC_F32, 9, nine));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_SHAPE);
    cr_expect(strstr(fc_ctx_error(ctx), "rank 9"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* The first error is kept; a NULL operand adds nothing. */
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 3}));
    cr_expect_null(fc_narrow(ctx, x, "b", 0, 1));
    char first[512];
    snprintf(first, sizeof first, "%s", fc_ctx_error(ctx));
    cr_expect(strstr(first, "no axis \"b\"") && strstr(first, "f32[a=3]"), "%s", first);
    cr_expect_null(fc_narrow(ctx, x, "a", 2, 5));
    cr_expect_null(fc_exp(ctx, NULL));
    cr_expect_str_eq(fc_ctx_error(ctx), first);
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
    fc_release(x);
}

Test(tensor, views_index_like_the_parent)
{
    fc_tensor *x = iota(FC_F32, FC_SHAPE({"a", 4}, {"b", 5}, {"c", 6}));
    fc_tensor *n = fc_narrow(ctx, x, "b", 1, 3);
    fc_tensor *s = fc_select(ctx, n, "c", -1);
    fc_tensor *p = fc_permute(ctx, x, FC_AXES("c", "a", "b"));
    fc_tensor *t = fc_transpose(ctx, x, "a", "c");
    cr_assert(n && s && p && t);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
            int64_t idx[2] = {i, j};
            cr_expect_eq(fc_tensor_get(s, idx), (double)(i * 30 + (j + 1) * 6 + 5));
        }
    for (int64_t c = 0; c < 6; c++)
        for (int64_t a = 0; a < 4; a++)
            for (int64_t b = 0; b < 5; b++) {
                int64_t ip[3] = {c, a, b}, it[3] = {c, b, a};
                double want = (double)(a * 30 + b * 6 + c);
                cr_expect_eq(fc_tensor_get(p, ip), want);
                cr_expect_eq(fc_tensor_get(t, it), want);
            }
    cr_expect(!fc_tensor_is_contiguous(p));
    /* A view keeps the storage alive after the parent is released. */
    fc_release(x);
    int64_t i0[2] = {3, 2};
    cr_expect_eq(fc_tensor_get(s, i0), (double)(3 * 30 + 3 * 6 + 5));
    fc_tensor *c = fc_contiguous(ctx, p);
    cr_expect(fc_tensor_is_contiguous(c));
    float out[120];
    cr_expect_eq(fc_tensor_read(ctx, p, out, sizeof out), FC_OK);
    cr_expect_eq(memcmp(out, fc_tensor_data(c), sizeof out), 0);
    fc_release(c); fc_release(n); fc_release(s); fc_release(p); fc_release(t);
}

Test(tensor, broadcast_reshape_strided)
{
    fc_tensor *x = iota(FC_F32, FC_SHAPE({"d", 3}));
    fc_tensor *b = fc_broadcast_to(ctx, x, FC_SHAPE({"n", 4}, {"d", 3}));
    cr_assert(b);
    cr_expect_eq(fc_tensor_stride(b, 0), 0);
    int64_t idx[2] = {3, 2};
    cr_expect_eq(fc_tensor_get(b, idx), 2.0);
    cr_expect_null(fc_broadcast_to(ctx, x, FC_SHAPE({"n", 4}, {"d", 5})));
    cr_expect(strstr(fc_ctx_error(ctx), "\"d\""), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_tensor *m = iota(FC_F32, FC_SHAPE({"r", 4}, {"c", 6}));
    fc_tensor *r = fc_reshape(ctx, m, FC_SHAPE({"x", 2}, {"y", 12}));
    cr_assert(r);
    cr_expect_eq(fc_tensor_data(r), fc_tensor_data(m), "a contiguous reshape is a view");
    fc_tensor *tr = fc_transpose(ctx, m, "r", "c");
    fc_tensor *r2 = fc_reshape(ctx, tr, FC_SHAPE({"z", 24}));
    cr_assert(r2);
    int64_t i1[1] = {1};
    cr_expect_eq(fc_tensor_get(r2, i1), 6.0, "non-contiguous reshape copies in logical order");
    cr_expect_null(fc_reshape(ctx, m, FC_SHAPE({"z", 25})));
    fc_ctx_clear_error(ctx);
    int64_t st[2] = {1, 1}; /* sliding windows of 3 over 24 elements */
    fc_tensor *w = fc_as_strided(ctx, m, FC_SHAPE({"win", 22}, {"k", 3}), st, 0);
    cr_assert(w);
    int64_t iw[2] = {21, 2};
    cr_expect_eq(fc_tensor_get(w, iw), 23.0);
    cr_expect_null(fc_as_strided(ctx, m, FC_SHAPE({"win", 23}, {"k", 3}), st, 0));
    cr_expect(strstr(fc_ctx_error(ctx), "storage"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(b); fc_release(m); fc_release(r); fc_release(tr); fc_release(r2); fc_release(w);
}

Test(tensor, axis_names)
{
    fc_tensor *x = iota(FC_F32, FC_SHAPE({"seq", 4}, {"hd", 6}));
    fc_tensor *s = fc_split_axis(ctx, x, "hd", FC_SHAPE({"head", 2}, {"d", 3}));
    cr_assert(s);
    cr_expect_eq(fc_tensor_rank(s), 3);
    int64_t i[3] = {2, 1, 2};
    cr_expect_eq(fc_tensor_get(s, i), (double)(2 * 6 + 1 * 3 + 2));
    fc_tensor *m = fc_merge_axes(ctx, s, FC_AXES("head", "d"), "hd2");
    cr_assert(m);
    cr_expect_eq(fc_tensor_data(m), fc_tensor_data(x));
    /* Merging axes that are not adjacent in memory copies. */
    fc_tensor *t = fc_permute(ctx, s, FC_AXES("seq", "d", "head"));
    fc_tensor *mt = fc_merge_axes(ctx, t, FC_AXES("d", "head"), "dh");
    cr_assert(mt);
    int64_t j[2] = {1, 1}; /* d=0, head=1 */
    cr_expect_eq(fc_tensor_get(mt, j), (double)(6 + 3));
    cr_expect_null(fc_merge_axes(ctx, s, FC_AXES("seq", "d"), "bad"));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_AXIS);
    fc_ctx_clear_error(ctx);
    fc_tensor *u = fc_unsqueeze(ctx, x, "one", 1);
    cr_expect_eq(fc_tensor_dim(u, 1), 1);
    fc_tensor *q = fc_squeeze(ctx, u, "one");
    cr_expect_eq(fc_tensor_rank(q), 2);
    cr_expect_null(fc_squeeze(ctx, x, "seq"));
    fc_ctx_clear_error(ctx);
    fc_tensor *rn = fc_rename(ctx, x, "seq", "time");
    cr_expect_eq(fc_tensor_size(rn, "time"), 4);
    cr_expect_null(fc_rename(ctx, x, "seq", "hd"));
    cr_expect(strstr(fc_ctx_error(ctx), "already has an axis \"hd\""), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(s); fc_release(m); fc_release(t); fc_release(mt);
    fc_release(u); fc_release(q); fc_release(rn);
}

static int hook_calls;
static void hook(void *user, void *data) { (void)data; hook_calls += *(int *)user; }

Test(tensor, wrap_release_hook_runs_once_after_last_view)
{
    static float buf[12];
    int one = 1;
    hook_calls = 0;
    fc_tensor *w = fc_wrap(ctx, FC_F32, FC_SHAPE({"a", 3}, {"b", 4}), buf, sizeof buf, hook, &one);
    cr_assert(w);
    fc_tensor *v = fc_narrow(ctx, w, "b", 1, 2);
    fc_release(w);
    cr_expect_eq(hook_calls, 0);
    fc_release(v);
    cr_expect_eq(hook_calls, 1);
    cr_expect_null(fc_wrap(ctx, FC_F32, FC_SHAPE({"a", 4}, {"b", 4}), buf, sizeof buf, hook, &one));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_SHAPE);
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_wrap(ctx, FC_F32, FC_SHAPE({"a", 2}), (char *)buf + 1, 8, hook, &one));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    cr_expect_eq(hook_calls, 1);
}

Test(tensor, pool_reuses_the_same_address)
{
    fc_tensor *a = fc_empty(ctx, FC_F32, FC_SHAPE({"n", 1000}));
    void *p = fc_tensor_data(a);
    fc_release(a);
    fc_tensor *b = fc_empty(ctx, FC_F32, FC_SHAPE({"n", 1000}));
    cr_expect_eq(fc_tensor_data(b), p, "LIFO reuse hands back the same buffer");
    fc_release(b);
    /* A steady-state loop allocates nothing new. */
    fc_tensor *x = fc_full(ctx, FC_F32, FC_SHAPE({"r", 64}, {"c", 100}), 1.5);
    for (int it = 0; it < 3; it++) { /* warm up */
        fc_scope s = fc_scope_begin(ctx);
        fc_sum(ctx, fc_exp(ctx, fc_add(ctx, x, x)), FC_AXES("c"));
        fc_scope_end(ctx, s);
    }
    fc_pool_stats before = fc_ctx_pool_stats(ctx);
    for (int it = 0; it < 100; it++) {
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *y = fc_sum(ctx, fc_exp(ctx, fc_add(ctx, x, x)), FC_AXES("c"));
        cr_assert(y);
        fc_scope_end(ctx, s);
    }
    fc_pool_stats after = fc_ctx_pool_stats(ctx);
    cr_expect_eq(after.allocs, before.allocs, "steady state allocated %llu buffers",
                 (unsigned long long)(after.allocs - before.allocs));
    cr_expect_gt(after.hits, before.hits + 200);
    fc_release(x);
}

Test(tensor, pool_cap_and_trim)
{
    char err[128];
    fc_ctx_options o = {.threads = 1, .pool_cap_bytes = FC_POOL_OFF};
    fc_ctx *c2 = fc_ctx_new(&o, err, sizeof err);
    cr_assert(c2);
    fc_tensor *a = fc_empty(c2, FC_F32, FC_SHAPE({"n", 4096}));
    fc_release(a);
    fc_pool_stats s = fc_ctx_pool_stats(c2);
    cr_expect_eq(s.bytes_cached, 0);
    cr_expect_eq(s.frees, 1);
    fc_ctx_free(c2);
    fc_tensor *b = fc_empty(ctx, FC_F32, FC_SHAPE({"n", 4096}));
    fc_release(b);
    cr_expect_gt(fc_ctx_pool_stats(ctx).bytes_cached, 0);
    fc_ctx_pool_trim(ctx);
    cr_expect_eq(fc_ctx_pool_stats(ctx).bytes_cached, 0);
}

Test(tensor, scopes_release_and_keep)
{
    uint64_t live0 = fc_ctx_pool_stats(ctx).tensors_live;
    fc_scope outer = fc_scope_begin(ctx);
    fc_tensor *kept = NULL;
    {
        fc_scope inner = fc_scope_begin(ctx);
        fc_tensor *x = fc_full(ctx, FC_F32, FC_SHAPE({"n", 8}), 2.0);
        fc_tensor *y = fc_mul(ctx, fc_add(ctx, x, x), x);
        kept = fc_keep(ctx, y); /* moves to the outer scope */
        fc_scope_end(ctx, inner);
    }
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, live0 + 1);
    int64_t i[1] = {5};
    cr_expect_eq(fc_tensor_get(kept, i), 8.0);
    fc_keep(ctx, kept); /* now the caller owns it */
    fc_scope_end(ctx, outer);
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, live0 + 1);
    fc_release(kept);
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, live0);
    fc_scope bad = {7};
    fc_scope_end(ctx, bad);
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
}

Test(tensor, casting_rules)
{
    const double in[] = {NAN, 1e10, -1e10, 3.99, -3.99, 255.5, -0.5, INFINITY, -INFINITY};
    fc_tensor *x = fc_from_data(ctx, FC_F64, FC_SHAPE({"n", 9}), in, sizeof in);
    fc_tensor *u8 = fc_cast(ctx, x, FC_U8), *i32 = fc_cast(ctx, x, FC_I32), *bo = fc_cast(ctx, x, FC_BOOL);
    fc_tensor *i64 = fc_cast(ctx, x, FC_I64);
    cr_assert(u8 && i32 && bo && i64);
    const uint8_t want_u8[] = {0, 255, 0, 3, 0, 255, 0, 255, 0};
    const int32_t want_i32[] = {0, INT32_MAX, INT32_MIN, 3, -3, 255, 0, INT32_MAX, INT32_MIN};
    const uint8_t want_b[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t want_i64[] = {0, 10000000000LL, -10000000000LL, 3, -3, 255, 0, INT64_MAX, INT64_MIN};
    cr_expect_arr_eq(fc_tensor_data(u8), want_u8, sizeof want_u8);
    cr_expect_arr_eq(fc_tensor_data(i32), want_i32, sizeof want_i32);
    cr_expect_arr_eq(fc_tensor_data(bo), want_b, sizeof want_b);
    cr_expect_arr_eq(fc_tensor_data(i64), want_i64, sizeof want_i64);
    /* Integer -> integer saturates without going through double. */
    const int64_t big[] = {INT64_MAX, (1LL << 53) + 1, -300, 300};
    fc_tensor *bi = fc_from_data(ctx, FC_I64, FC_SHAPE({"n", 4}), big, sizeof big);
    fc_tensor *bi8 = fc_cast(ctx, bi, FC_I8), *bi32 = fc_cast(ctx, bi, FC_I32), *bi64 = fc_cast(ctx, bi32, FC_I64);
    const int8_t want_i8[] = {127, 127, -128, 127};
    cr_expect_arr_eq(fc_tensor_data(bi8), want_i8, sizeof want_i8);
    const int64_t want_back[] = {INT32_MAX, INT32_MAX, -300, 300};
    cr_expect_arr_eq(fc_tensor_data(bi64), want_back, sizeof want_back);
    /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is just above an f16 tie and
     * must round up; through f32 it would land on the tie and round to even (1.0). */
    const double tie[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40};
    fc_tensor *t = fc_from_data(ctx, FC_F64, FC_SHAPE({"n", 2}), tie, sizeof tie);
    fc_tensor *h = fc_cast(ctx, t, FC_F16), *bh = fc_cast(ctx, t, FC_BF16);
    cr_expect_eq(((fc_f16 *)fc_tensor_data(h))[0].bits, 0x3c01, "got %04x", ((fc_f16 *)fc_tensor_data(h))[0].bits);
    cr_expect_eq(((fc_bf16 *)fc_tensor_data(bh))[1].bits, 0x3f81, "got %04x", ((fc_bf16 *)fc_tensor_data(bh))[1].bits);
    fc_release(x); fc_release(u8); fc_release(i32); fc_release(bo); fc_release(i64);
    fc_release(bi); fc_release(bi8); fc_release(bi32); fc_release(bi64);
    fc_release(t); fc_release(h); fc_release(bh);
}

Test(tensor, random_is_counter_based)
{
    fc_tensor *a = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"n", 1000}), 42, -1, 1);
    fc_tensor *b = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"r", 10}, {"c", 100}), 42, -1, 1);
    fc_tensor *c = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"n", 1000}), 43, -1, 1);
    cr_expect_eq(memcmp(fc_tensor_data(a), fc_tensor_data(b), 4000), 0);
    cr_expect_neq(memcmp(fc_tensor_data(a), fc_tensor_data(c), 4000), 0);
    double mean = 0;
    for (int i = 0; i < 1000; i++) {
        float v = ((float *)fc_tensor_data(a))[i];
        cr_assert(v >= -1 && v < 1);
        mean += v;
    }
    cr_expect(fabs(mean / 1000) < 0.1);
    fc_tensor *g = fc_rand_normal(ctx, FC_F64, FC_SHAPE({"n", 20000}), 7, 1.0, 2.0);
    double m = 0, v = 0;
    for (int i = 0; i < 20000; i++) m += ((double *)fc_tensor_data(g))[i];
    m /= 20000;
    for (int i = 0; i < 20000; i++) v += pow(((double *)fc_tensor_data(g))[i] - m, 2);
    v /= 20000;
    cr_expect(fabs(m - 1.0) < 0.05 && fabs(sqrt(v) - 2.0) < 0.05, "mean %g std %g", m, sqrt(v));
    fc_release(a); fc_release(b); fc_release(c); fc_release(g);
}

/* A default context made with the environment variable var set to value
 * (unset again after). */
static fc_ctx *ctx_with_env(const char *var, const char *value, char *err, size_t len)
{
    setenv(var, value, 1);
    fc_ctx *c = fc_ctx_new(NULL, err, len);
    unsetenv(var);
    return c;
}

Test(tensor, bad_fucina_spin_us_fails_the_context)
{
    char err[256] = "";
    fc_ctx *c = ctx_with_env("FUCINA_SPIN_US", "1ms", err, sizeof err);
    cr_expect_null(c);
    cr_expect(strstr(err, "FUCINA_SPIN_US") && strstr(err, "1ms"), "%s", err);
    c = ctx_with_env("FUCINA_SPIN_US", "0", err, sizeof err);
    cr_assert(c, "%s", err);
    fc_ctx_free(c);
}

Test(tensor, bad_fucina_threads_fails_the_context)
{
    char err[256] = "";
    fc_ctx *c = ctx_with_env("FUCINA_THREADS", "two", err, sizeof err);
    cr_expect_null(c);
    cr_expect(strstr(err, "FUCINA_THREADS") && strstr(err, "two"), "%s", err);
    fc_ctx_options o = {.threads = -3};
    cr_expect_null(fc_ctx_new(&o, err, sizeof err));
    cr_expect(strstr(err, "threads"), "%s", err);
    c = ctx_with_env("FUCINA_THREADS", "1", err, sizeof err);
    cr_assert(c, "%s", err);
    cr_expect_eq(fc_ctx_threads(c), 1);
    fc_ctx_free(c);
}

/* The allocator hooks see every buffer the pool takes and returns. */
static long hook_allocs, hook_frees;
static void *counting_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    hook_allocs++;
    return aligned_alloc(align, (size + align - 1) / align * align);
}
static void counting_free(void *user, void *p, size_t size)
{
    (void)user; (void)size;
    hook_frees++;
    free(p);
}

Test(tensor, allocator_hooks)
{
    char err[128];
    fc_allocator a = {counting_alloc, counting_free, NULL};
    fc_ctx_options o = {.threads = 1, .allocator = &a};
    fc_ctx *c = fc_ctx_new(&o, err, sizeof err);
    cr_assert(c);
    fc_tensor *x = fc_zeros(c, FC_F32, FC_SHAPE({"n", 100}));
    fc_tensor *y = fc_exp(c, x);
    cr_expect_eq(hook_allocs, 2);
    fc_release(x);
    fc_release(y);
    fc_ctx_free(c);
    cr_expect_eq(hook_frees, 2);
}

/* Scopes belong to the thread that opened them: a second thread's tensors
 * (made while the first thread has a scope open) are not adopted by it. */
#include <pthread.h>

static void *other_thread(void *arg)
{
    fc_tensor **out = arg;
    fc_tensor *a = fc_full(ctx, FC_F32, FC_SHAPE({"r", 8}, {"k", 16}), 1.0);
    fc_tensor *b = fc_full(ctx, FC_F32, FC_SHAPE({"c", 4}, {"k", 16}), 2.0);
    fc_scope s = fc_scope_begin(ctx); /* this thread's own scope */
    fc_tensor *tmp = fc_dot(ctx, a, b, "k");
    *out = fc_keep(ctx, fc_mul_scalar(ctx, tmp, 0.5));
    fc_scope_end(ctx, s);
    fc_release(a);
    fc_release(b);
    return NULL;
}

Test(tensor, scopes_are_per_thread)
{
    fc_scope mine = fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 4}));
    fc_tensor *theirs = NULL;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, other_thread, &theirs), 0);
    pthread_join(th, NULL);
    cr_assert(theirs, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, mine); /* releases x only */
    (void)x;
    int64_t i[2] = {7, 3};
    cr_expect_eq(fc_tensor_get(theirs, i), 16.0);
    fc_release(theirs);
    /* Another thread cannot end my scope. */
    fc_scope s2 = fc_scope_begin(ctx);
    fc_scope_end(ctx, (fc_scope){s2.id + 1000});
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx, s2);
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
}

/* NULL arrays with a non-zero count: refused as their siblings refuse them
 * (they used to be dereferenced). */
Test(tensor, empty_pos_null_sizes_with_rank)
{
    cr_expect_null(fc_empty_pos(ctx, FC_F32, 2, NULL));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_empty_pos", "NULL");
    fc_tensor *t = fc_empty_pos(ctx, FC_F32, 0, NULL); /* rank 0 needs no sizes */
    cr_expect(t, "%s", fc_ctx_error(ctx));
    fc_release(t);
}

Test(tensor, get_null_index_with_rank)
{
    fc_tensor *t = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 2}, {"b", 3}));
    cr_expect(isnan(fc_tensor_get(t, NULL)), "NaN, as for an index out of range");
    fc_tensor *s = fc_scalar(ctx, FC_F32, 1.5);
    cr_expect_eq(fc_tensor_get(s, NULL), 1.5, "rank 0 needs no index");
    fc_release(s);
    fc_release(t);
}

Test(tensor, describe_null_buffer_with_length)
{
    fc_tensor *t = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 2}));
    cr_expect_null(fc_tensor_describe(t, NULL, 64));
    cr_expect_null(fc_tensor_describe(NULL, NULL, 64));
    char b[4] = "xyz";
    cr_expect_eq(fc_tensor_describe(t, b, 0), b, "len 0: nothing written");
    cr_expect_str_eq(b, "xyz");
    fc_release(t);
}
