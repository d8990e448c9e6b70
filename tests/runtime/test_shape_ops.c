/* SPDX-License-Identifier: MIT */
/* Structure and index ops: concat, stack, split, pad, repeat, flip,
 * get_rows, index_select, gather, scatter_add, set_slice, topk, argsort.
 * References: direct index arithmetic, round trips (concat/split,
 * flip/flip), PyTorch goldens (tests/goldens/structure_index.txt, from
 * gen_structure_goldens.py), contiguous copies of strided inputs, 1 vs 2
 * threads, every error path, no leaked handles. */
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
TestSuite(shape, .init = setup, .fini = teardown);

static void expect_golden(const fc_tensor *t, const fct_golden *e, double tol)
{
    cr_assert(t, "%s: NULL result (%s)", e->name, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_numel(t), e->n, "%s: %lld elements, want %lld", e->name, (long long)fc_tensor_numel(t),
                 (long long)e->n);
    for (int i = 0; i < e->rank; i++) cr_assert_eq(fc_tensor_dim(t, i), e->dim[i], "%s: axis %d", e->name, i);
    double *v = fct_values(t);
    for (int64_t i = 0; i < e->n; i++) {
        if (isnan(e->v[i])) {
            cr_expect(isnan(v[i]), "%s[%lld] = %g, want nan", e->name, (long long)i, v[i]);
            continue;
        }
        cr_expect(v[i] == e->v[i] || fabs(v[i] - e->v[i]) <= tol * (1 + fabs(e->v[i])), "%s[%lld] = %.9g, want %.9g", e->name,
                  (long long)i, v[i], e->v[i]);
    }
    free(v);
}

/* Bytes of a tensor in row-major order. */
static void *bytes_of(fc_ctx *c, const fc_tensor *t)
{
    size_t n = fc_tensor_nbytes(t);
    void *b = malloc(n ? n : 1);
    cr_assert_eq(fc_tensor_read(c, t, b, n), FC_OK);
    return b;
}

static void expect_same(fc_ctx *c1, const fc_tensor *a, fc_ctx *c2, const fc_tensor *b, const char *what)
{
    cr_assert(a && b, "%s: NULL (%s / %s)", what, fc_ctx_error(c1), fc_ctx_error(c2));
    cr_assert_eq(fc_tensor_nbytes(a), fc_tensor_nbytes(b), "%s: sizes differ", what);
    cr_assert_eq(fc_tensor_rank(a), fc_tensor_rank(b), "%s: ranks differ", what);
    for (int i = 0; i < fc_tensor_rank(a); i++) {
        cr_assert_eq(fc_tensor_dim(a, i), fc_tensor_dim(b, i), "%s: axis %d", what, i);
        cr_assert_str_eq(fc_tensor_axis(a, i), fc_tensor_axis(b, i), "%s: axis %d", what, i);
    }
    void *x = bytes_of(c1, a), *y = bytes_of(c2, b);
    cr_expect(memcmp(x, y, fc_tensor_nbytes(a)) == 0, "%s: contents differ", what);
    free(x);
    free(y);
}

static void expect_error(fc_status st, const char *op, const char *axis)
{
    fct_expect_error(ctx, st, op, axis);
}

/* f32 [a=A, b=B] with value 100*i + j (or an offset). */
static fc_tensor *grid(const char *an, int64_t A, const char *bn, int64_t B, float base)
{
    fc_dim dims[2] = {{an, A}, {bn, B}};
    fc_tensor *t = fc_empty(ctx, FC_F32, dims, 2);
    float *p = fc_tensor_data(t);
    for (int64_t i = 0; i < A; i++)
        for (int64_t j = 0; j < B; j++) p[i * B + j] = base + (float)(100 * i + j);
    return t;
}

static double at2(const fc_tensor *t, int64_t i, int64_t j) { return fc_tensor_get(t, (int64_t[]){i, j}); }

/* ---- concat / stack / split --------------------------------------------- */

Test(shape, concat_by_name_and_split_round_trip)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = grid("r", 2, "c", 3, 0);
    fc_tensor *b = grid("r", 4, "c", 3, 1000);
    /* c listed first in the third operand: aligned by name. */
    fc_tensor *c0 = grid("c", 3, "r", 1, 5000);
    fc_tensor *parts[3] = {a, b, c0};
    fc_tensor *y = fc_concat(ctx, parts, 3, "r");
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_size(y, "r"), 7);
    cr_assert_str_eq(fc_tensor_axis(y, 0), "r");
    for (int64_t j = 0; j < 3; j++) {
        for (int64_t i = 0; i < 2; i++) cr_expect_eq(at2(y, i, j), at2(a, i, j));
        for (int64_t i = 0; i < 4; i++) cr_expect_eq(at2(y, 2 + i, j), at2(b, i, j));
        cr_expect_eq(at2(y, 6, j), at2(c0, j, 0));
    }
    fc_tensor *out[3];
    cr_assert_eq(fc_split(ctx, y, "r", (int64_t[]){2, 4, 1}, 3, out), FC_OK);
    fc_tensor *back = fc_concat(ctx, out, 3, "r");
    expect_same(ctx, back, ctx, y, "concat(split(y))");
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) cr_expect_eq(at2(out[1], i, j), at2(b, i, j));
    /* Concat along c of a transposed (non-contiguous) view equals concat of a copy. */
    fc_tensor *bt = fc_transpose(ctx, grid("c", 3, "r", 4, 7), "c", "r");
    fc_tensor *bc = fc_clone(ctx, bt);
    fc_tensor *p1[2] = {b, bt}, *p2[2] = {b, bc};
    expect_same(ctx, fc_concat(ctx, p1, 2, "c"), ctx, fc_concat(ctx, p2, 2, "c"), "strided concat");
    fc_scope_end(ctx, s);
}

Test(shape, concat_every_dtype)
{
    fc_scope s = fc_scope_begin(ctx);
    for (int dt = 0; dt < FC_DTYPE_PLAIN_COUNT; dt++) {
        fc_tensor *a = fc_arange(ctx, (fc_dtype)dt, "n", 3);
        fc_tensor *b = fc_full(ctx, (fc_dtype)dt, FC_SHAPE({"n", 2}), 1);
        fc_tensor *y = fc_concat(ctx, (fc_tensor *[]){a, b}, 2, "n");
        cr_assert(y, "%s", fc_ctx_error(ctx));
        cr_expect_eq(fc_tensor_dtype(y), dt);
        double want[5] = {0, 1, 2, 1, 1};
        if (dt == FC_BOOL) want[2] = 1;
        double *v = fct_values(y);
        for (int i = 0; i < 5; i++) cr_expect_eq(v[i], want[i], "%s [%d]", fc_dtype_name((fc_dtype)dt), i);
        free(v);
    }
    fc_scope_end(ctx, s);
}

Test(shape, concat_errors)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = grid("r", 2, "c", 3, 0);
    fc_tensor *b = grid("r", 2, "c", 4, 0);
    fc_tensor *h = fc_zeros(ctx, FC_F64, FC_SHAPE({"r", 2}, {"c", 3}));
    fc_tensor *q = grid("r", 2, "q", 3, 0);
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){a, a}, 2, "nope"));
    expect_error(FC_ERR_AXIS, "fc_concat", "nope");
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){a, b}, 2, "r"));
    expect_error(FC_ERR_SHAPE, "fc_concat", "\"c\"");
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){a, h}, 2, "r"));
    expect_error(FC_ERR_DTYPE, "fc_concat", "\"r\"");
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){a, q}, 2, "r"));
    expect_error(FC_ERR_AXIS, "fc_concat", "\"c\"");
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){a, NULL}, 2, "r"));
    cr_expect_eq(fc_ctx_status(ctx), FC_OK, "a NULL operand records nothing");
    cr_expect_null(fc_concat(NULL, (fc_tensor *[]){a}, 1, "r"));
    fc_tensor *out[2] = {a, a};
    cr_expect_eq(fc_split(ctx, a, "c", (int64_t[]){1, 1}, 2, out), FC_ERR_SHAPE);
    cr_expect_null(out[0]);
    cr_expect_null(out[1]);
    expect_error(FC_ERR_SHAPE, "fc_split", "\"c\"");
    cr_expect_eq(fc_split(ctx, a, "x", (int64_t[]){1, 1}, 2, out), FC_ERR_AXIS);
    expect_error(FC_ERR_AXIS, "fc_split", "x");
    fc_scope_end(ctx, s);
}

Test(shape, stack)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = grid("r", 2, "c", 3, 0);
    fc_tensor *b = fc_transpose(ctx, grid("c", 3, "r", 2, 10), "c", "r"); /* [r, c] view, strided */
    fc_tensor *y = fc_stack(ctx, (fc_tensor *[]){a, b}, 2, "k", 1);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_rank(y), 3);
    cr_expect_str_eq(fc_tensor_axis(y, 1), "k");
    cr_expect_eq(fc_tensor_size(y, "k"), 2);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++) {
            cr_expect_eq(fc_tensor_get(y, (int64_t[]){i, 0, j}), at2(a, i, j));
            cr_expect_eq(fc_tensor_get(y, (int64_t[]){i, 1, j}), at2(b, i, j));
        }
    cr_expect_null(fc_stack(ctx, (fc_tensor *[]){a, b}, 2, "r", 0));
    expect_error(FC_ERR_AXIS, "fc_stack", "\"r\"");
    cr_expect_null(fc_stack(ctx, (fc_tensor *[]){a, grid("r", 3, "c", 3, 0)}, 2, "k", 0));
    expect_error(FC_ERR_SHAPE, "fc_stack", "\"r\"");
    cr_expect_null(fc_stack(ctx, (fc_tensor *[]){a}, 1, "k", 3));
    expect_error(FC_ERR_SHAPE, "fc_stack", "\"k\"");
    fc_scope_end(ctx, s);
}

/* ---- pad / repeat / flip ------------------------------------------------- */

Test(shape, pad_repeat_flip)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = grid("r", 2, "c", 3, 0);
    fc_tensor *p = fc_pad(ctx, a, "c", 2, 1, -7.5);
    cr_assert(p, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_size(p, "c"), 6);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 6; j++)
            cr_expect_eq(at2(p, i, j), (j < 2 || j >= 5) ? -7.5 : at2(a, i, j - 2));
    fc_tensor *r = fc_repeat(ctx, a, "r", 3);
    cr_assert_eq(fc_tensor_size(r, "r"), 6);
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = 0; j < 3; j++) cr_expect_eq(at2(r, i, j), at2(a, i % 2, j));
    fc_tensor *f = fc_flip(ctx, a, "c");
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++) cr_expect_eq(at2(f, i, j), at2(a, i, 2 - j));
    expect_same(ctx, fc_flip(ctx, f, "c"), ctx, a, "flip twice");
    /* Strided input equals its contiguous copy. */
    fc_tensor *v = fc_transpose(ctx, grid("c", 4, "r", 5, 3), "c", "r");
    fc_tensor *vc = fc_clone(ctx, v);
    expect_same(ctx, fc_flip(ctx, v, "r"), ctx, fc_flip(ctx, vc, "r"), "strided flip");
    expect_same(ctx, fc_pad(ctx, v, "r", 1, 2, 0), ctx, fc_pad(ctx, vc, "r", 1, 2, 0), "strided pad");
    expect_same(ctx, fc_repeat(ctx, v, "c", 2), ctx, fc_repeat(ctx, vc, "c", 2), "strided repeat");
    /* Every dtype: pad value converted by the casting rules. */
    for (int dt = 0; dt < FC_DTYPE_PLAIN_COUNT; dt++) {
        fc_tensor *x = fc_arange(ctx, (fc_dtype)dt, "n", 2);
        fc_tensor *y = fc_pad(ctx, x, "n", 1, 1, 300);
        cr_assert(y, "%s", fc_ctx_error(ctx));
        double *w = fct_values(y);
        double pv = fc_tensor_item(fc_scalar(ctx, (fc_dtype)dt, 300));
        cr_expect_eq(w[0], pv, "%s", fc_dtype_name((fc_dtype)dt));
        cr_expect_eq(w[1], 0);
        cr_expect_eq(w[2], 1);
        cr_expect_eq(w[3], pv);
        free(w);
        fc_tensor *z = fc_flip(ctx, fc_repeat(ctx, x, "n", 2), "n");
        double *u = fct_values(z);
        cr_expect(u[0] == 1 && u[1] == 0 && u[2] == 1 && u[3] == 0, "%s", fc_dtype_name((fc_dtype)dt));
        free(u);
    }
    cr_expect_null(fc_pad(ctx, a, "z", 1, 1, 0));
    expect_error(FC_ERR_AXIS, "fc_pad", "\"z\"");
    cr_expect_null(fc_pad(ctx, a, "c", -1, 1, 0));
    expect_error(FC_ERR_SHAPE, "fc_pad", "\"c\"");
    cr_expect_null(fc_repeat(ctx, a, "c", 0));
    expect_error(FC_ERR_SHAPE, "fc_repeat", "\"c\"");
    cr_expect_null(fc_flip(ctx, a, "zz"));
    expect_error(FC_ERR_AXIS, "fc_flip", "zz");
    fc_scope_end(ctx, s);
}

/* ---- get_rows / index_select ---------------------------------------------- */

Test(shape, get_rows_matches_loops)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *table = grid("vocab", 10, "d", 4, 0);
    int32_t ids32[6] = {3, 0, 9, 3, 5, 1};
    fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"s", 3}), ids32, sizeof ids32);
    fc_tensor *y = fc_get_rows(ctx, table, ids);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_rank(y), 3);
    cr_expect_str_eq(fc_tensor_axis(y, 0), "b");
    cr_expect_str_eq(fc_tensor_axis(y, 1), "s");
    cr_expect_str_eq(fc_tensor_axis(y, 2), "d");
    for (int64_t b = 0; b < 2; b++)
        for (int64_t t = 0; t < 3; t++)
            for (int64_t d = 0; d < 4; d++)
                cr_expect_eq(fc_tensor_get(y, (int64_t[]){b, t, d}), at2(table, ids32[b * 3 + t], d));
    /* i64 ids, rank-0 ids, strided table, every dtype. */
    int64_t ids64[3] = {9, 9, 2};
    fc_tensor *i64 = fc_from_data(ctx, FC_I64, FC_SHAPE({"s", 3}), ids64, sizeof ids64);
    fc_tensor *tt = fc_transpose(ctx, grid("d", 4, "vocab", 10, 0), "d", "vocab");
    fc_tensor *ttc = fc_clone(ctx, tt);
    expect_same(ctx, fc_get_rows(ctx, tt, i64), ctx, fc_get_rows(ctx, ttc, i64), "strided table");
    fc_tensor *one = fc_scalar(ctx, FC_I64, 7);
    fc_tensor *r0 = fc_get_rows(ctx, table, one);
    cr_assert_eq(fc_tensor_rank(r0), 1);
    for (int64_t d = 0; d < 4; d++) cr_expect_eq(fc_tensor_get(r0, &d), at2(table, 7, d));
    for (int dt = 0; dt < FC_DTYPE_PLAIN_COUNT; dt++) {
        fc_tensor *x = fc_arange(ctx, (fc_dtype)dt, "vocab", 2);
        fc_tensor *z = fc_get_rows(ctx, x, fc_from_data(ctx, FC_I32, FC_SHAPE({"s", 3}), (int32_t[]){1, 0, 1}, 12));
        cr_assert(z, "%s", fc_ctx_error(ctx));
        double *v = fct_values(z);
        cr_expect(v[0] == 1 && v[1] == 0 && v[2] == 1, "%s", fc_dtype_name((fc_dtype)dt));
        free(v);
    }
    /* index_select along the inner axis. */
    fc_tensor *sel = fc_index_select(ctx, table, "d", fc_from_data(ctx, FC_I64, FC_SHAPE({"j", 5}),
                                                                    (int64_t[]){3, 3, 0, 1, 2}, 40));
    cr_assert(sel, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_size(sel, "d"), 5);
    int64_t pick[5] = {3, 3, 0, 1, 2};
    for (int64_t i = 0; i < 10; i++)
        for (int64_t j = 0; j < 5; j++) cr_expect_eq(at2(sel, i, j), at2(table, i, pick[j]));
    /* Errors, checked before anything is written. */
    fc_tensor *bad = fc_from_data(ctx, FC_I32, FC_SHAPE({"s", 2}), (int32_t[]){1, 10}, 8);
    cr_expect_null(fc_get_rows(ctx, table, bad));
    expect_error(FC_ERR_INVALID_ARG, "fc_get_rows", "\"vocab\"");
    fc_tensor *neg = fc_from_data(ctx, FC_I64, FC_SHAPE({"s", 1}), (int64_t[]){-1}, 8);
    cr_expect_null(fc_get_rows(ctx, table, neg));
    expect_error(FC_ERR_INVALID_ARG, "fc_get_rows", "\"vocab\"");
    cr_expect_null(fc_get_rows(ctx, table, fc_zeros(ctx, FC_F32, FC_SHAPE({"s", 2}))));
    expect_error(FC_ERR_DTYPE, "fc_get_rows", "\"vocab\"");
    cr_expect_null(fc_get_rows(ctx, table, fc_zeros(ctx, FC_I32, FC_SHAPE({"d", 2}))));
    expect_error(FC_ERR_AXIS, "fc_get_rows", "\"d\"");
    cr_expect_null(fc_index_select(ctx, table, "d", bad));
    expect_error(FC_ERR_INVALID_ARG, "fc_index_select", "\"d\"");
    cr_expect_null(fc_index_select(ctx, table, "e", neg));
    expect_error(FC_ERR_AXIS, "fc_index_select", "\"e\"");
    cr_expect_null(fc_index_select(ctx, table, "d", ids));
    expect_error(FC_ERR_SHAPE, "fc_index_select", "\"d\"");
    fc_scope_end(ctx, s);
}

/* ---- gather / scatter_add -------------------------------------------------- */

Test(shape, gather_scatter_goldens)
{
    fct_goldens g = fct_golden_load("structure_index.txt");
    fc_scope s = fc_scope_begin(ctx);
    const char *abc[3] = {"a", "b", "c"};
    fc_tensor *t = fct_golden_tensor(ctx, fct_golden_get(&g, "gather.t"), FC_F32, abc);
    fc_tensor *idx = fct_golden_tensor(ctx, fct_golden_get(&g, "gather.idx"), FC_I64, abc);
    expect_golden(fc_gather(ctx, t, "b", idx), fct_golden_get(&g, "gather.out"), 0);
    fc_tensor *idx32 = fct_golden_tensor(ctx, fct_golden_get(&g, "gather.idx"), FC_I32, abc);
    expect_golden(fc_gather(ctx, t, "b", idx32), fct_golden_get(&g, "gather.out"), 0);
    /* idx with its axes in another order: the result has idx's order. */
    fc_tensor *idxp = fc_permute(ctx, idx, FC_AXES("c", "a", "b"));
    fc_tensor *gp = fc_gather(ctx, t, "b", idxp);
    cr_assert(gp, "%s", fc_ctx_error(ctx));
    cr_expect_str_eq(fc_tensor_axis(gp, 0), "c");
    expect_golden(fc_permute(ctx, gp, FC_AXES("a", "b", "c")), fct_golden_get(&g, "gather.out"), 0);

    const char *ab[2] = {"a", "b"};
    fc_tensor *st = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.t"), FC_F32, ab);
    fc_tensor *si = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.idx"), FC_I64, ab);
    fc_tensor *ss = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.src"), FC_F32, ab);
    expect_golden(fc_scatter_add(ctx, st, "a", si, ss), fct_golden_get(&g, "scatter.out"), 0);
    fc_tensor *st2 = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter2.t"), FC_F32, ab);
    fc_tensor *si2 = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter2.idx"), FC_I32, ab);
    fc_tensor *ss2 = fct_golden_tensor(ctx, fct_golden_get(&g, "scatter2.src"), FC_F32, ab);
    expect_golden(fc_scatter_add(ctx, st2, "b", si2, ss2), fct_golden_get(&g, "scatter2.out"), 0);
    /* f64 and a strided src give the same sums. */
    fc_tensor *ssT = fc_transpose(ctx, fc_clone(ctx, fc_transpose(ctx, ss2, "a", "b")), "b", "a");
    expect_same(ctx, fc_scatter_add(ctx, st2, "b", si2, ssT), ctx, fc_scatter_add(ctx, st2, "b", si2, ss2),
                "strided src");
    expect_golden(fc_scatter_add(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.t"), FC_F64, ab), "a", si,
                                 fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.src"), FC_F64, ab)),
                  fct_golden_get(&g, "scatter.out"), 1e-6);

    /* Errors. */
    cr_expect_null(fc_gather(ctx, t, "z", idx));
    expect_error(FC_ERR_AXIS, "fc_gather", "\"z\"");
    cr_expect_null(fc_gather(ctx, t, "b", fc_full(ctx, FC_I64, FC_SHAPE({"a", 1}, {"b", 1}, {"c", 1}), 5)));
    expect_error(FC_ERR_INVALID_ARG, "fc_gather", "\"b\"");
    cr_expect_null(fc_gather(ctx, t, "b", fc_zeros(ctx, FC_I64, FC_SHAPE({"a", 4}, {"b", 1}, {"c", 1}))));
    expect_error(FC_ERR_SHAPE, "fc_gather", "\"a\"");
    cr_expect_null(fc_gather(ctx, t, "b", fc_zeros(ctx, FC_I64, FC_SHAPE({"a", 1}, {"b", 1}))));
    expect_error(FC_ERR_AXIS, "fc_gather", "\"c\"");
    cr_expect_null(fc_gather(ctx, t, "b", fc_zeros(ctx, FC_U8, FC_SHAPE({"a", 1}, {"b", 1}, {"c", 1}))));
    expect_error(FC_ERR_DTYPE, "fc_gather", "\"b\"");
    cr_expect_null(fc_scatter_add(ctx, st, "a", fc_full(ctx, FC_I32, FC_SHAPE({"a", 1}, {"b", 1}), 4), ss));
    expect_error(FC_ERR_INVALID_ARG, "fc_scatter_add", "\"a\"");
    cr_expect_null(
        fc_scatter_add(ctx, st, "a", si, fct_golden_tensor(ctx, fct_golden_get(&g, "scatter.src"), FC_F64, ab)));
    expect_error(FC_ERR_DTYPE, "fc_scatter_add", "\"a\"");
    cr_expect_null(fc_scatter_add(ctx, st, "a", si, fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 5}, {"b", 3}))));
    expect_error(FC_ERR_SHAPE, "fc_scatter_add", "\"a\"");
    cr_expect_null(fc_scatter_add(ctx, st, "q", si, ss));
    expect_error(FC_ERR_AXIS, "fc_scatter_add", "\"q\"");
    fc_scope_end(ctx, s);
    fct_golden_free(&g);
}

Test(shape, scatter_add_integer_and_half)
{
    fc_scope s = fc_scope_begin(ctx);
    /* Integers wrap like PyTorch; bool is or; f16 rounds each addition. */
    fc_tensor *t = fc_from_data(ctx, FC_I8, FC_SHAPE({"n", 2}), (int8_t[]){120, 0}, 2);
    fc_tensor *ix = fc_from_data(ctx, FC_I32, FC_SHAPE({"n", 3}), (int32_t[]){0, 0, 1}, 12);
    fc_tensor *src = fc_from_data(ctx, FC_I8, FC_SHAPE({"n", 3}), (int8_t[]){5, 5, -3}, 3);
    fc_tensor *y = fc_scatter_add(ctx, t, "n", ix, src);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_get(y, (int64_t[]){0}), (double)(int8_t)(120 + 10 - 256));
    cr_expect_eq(fc_tensor_get(y, (int64_t[]){1}), -3);
    fc_tensor *h = fc_full(ctx, FC_F16, FC_SHAPE({"n", 1}), 2048);
    fc_tensor *hs = fc_full(ctx, FC_F16, FC_SHAPE({"n", 3}), 1);
    fc_tensor *hy = fc_scatter_add(ctx, h, "n", fc_zeros(ctx, FC_I64, FC_SHAPE({"n", 3})), hs);
    /* 2048 + 1 rounds back to 2048 in f16, three times. */
    cr_expect_eq(fc_tensor_item(hy), 2048);
    fc_scope_end(ctx, s);
}

/* ---- set_slice ---------------------------------------------------------------- */

Test(shape, set_slice)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *d = grid("r", 4, "c", 5, 0);
    fc_tensor *ref = fc_clone(ctx, d);
    fc_tensor *src = grid("c", 5, "r", 2, 1000); /* other axis order */
    uint32_t v0 = 0;
    cr_assert_eq(fc_set_slice(ctx, d, "r", 1, src), FC_OK, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 5; j++)
            cr_expect_eq(at2(d, i, j), (i == 1 || i == 2) ? at2(src, j, i - 1) : at2(ref, i, j));
    /* src without the axis: one index; broadcast over c from size 1. */
    fc_tensor *row = fc_full(ctx, FC_F32, FC_SHAPE({"c", 1}), -1);
    cr_assert_eq(fc_set_slice(ctx, d, "r", -1, row), FC_OK, "%s", fc_ctx_error(ctx));
    for (int64_t j = 0; j < 5; j++) cr_expect_eq(at2(d, 3, j), -1);
    /* Overlapping src: shift rows down by one. */
    fc_tensor *ov = fc_narrow(ctx, d, "r", 0, 3);
    fc_tensor *before = fc_clone(ctx, ov);
    cr_assert_eq(fc_set_slice(ctx, d, "r", 1, ov), FC_OK);
    for (int64_t i = 1; i < 4; i++)
        for (int64_t j = 0; j < 5; j++) cr_expect_eq(at2(d, i, j), at2(before, i - 1, j));
    (void)v0;
    /* Errors leave dst untouched. */
    fc_tensor *keep = fc_clone(ctx, d);
    cr_expect_eq(fc_set_slice(ctx, d, "r", 3, src), FC_ERR_SHAPE);
    expect_error(FC_ERR_SHAPE, "fc_set_slice", "\"r\"");
    cr_expect_eq(fc_set_slice(ctx, d, "x", 0, src), FC_ERR_AXIS);
    expect_error(FC_ERR_AXIS, "fc_set_slice", "\"x\"");
    cr_expect_eq(fc_set_slice(ctx, d, "r", 0, fc_zeros(ctx, FC_F64, FC_SHAPE({"r", 1}))), FC_ERR_DTYPE);
    expect_error(FC_ERR_DTYPE, "fc_set_slice", "\"r\"");
    cr_expect_eq(fc_set_slice(ctx, d, "r", 0, fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 1}, {"c", 3}))), FC_ERR_SHAPE);
    expect_error(FC_ERR_SHAPE, "fc_set_slice", "\"c\"");
    expect_same(ctx, d, ctx, keep, "dst after failed set_slice");
    fc_scope_end(ctx, s);
}

/* ---- topk / argsort -------------------------------------------------------------- */

Test(shape, sort_goldens)
{
    fct_goldens g = fct_golden_load("structure_index.txt");
    fc_scope s = fc_scope_begin(ctx);
    const char *rn[2] = {"r", "n"};
    fc_tensor *x = fct_golden_tensor(ctx, fct_golden_get(&g, "sort.x"), FC_F32, rn);
    expect_golden(fc_argsort(ctx, x, "n", 0), fct_golden_get(&g, "sort.argsort0"), 0);
    expect_golden(fc_argsort(ctx, x, "n", 1), fct_golden_get(&g, "sort.argsort1"), 0);
    fc_tensor *xd = fct_golden_tensor(ctx, fct_golden_get(&g, "sort.x"), FC_F64, rn);
    expect_golden(fc_argsort(ctx, xd, "n", 1), fct_golden_get(&g, "sort.argsort1"), 0);
    fc_tensor *v = NULL, *ix = NULL;
    cr_assert_eq(fc_topk(ctx, x, "n", 9, 1, &v, &ix), FC_OK);
    expect_golden(v, fct_golden_get(&g, "sort.sorted1"), 0);
    expect_golden(ix, fct_golden_get(&g, "sort.argsort1"), 0);
    /* Transposed input: same answer along the named axis. */
    fc_tensor *xt = fc_clone(ctx, fc_transpose(ctx, x, "r", "n"));
    expect_golden(fc_permute(ctx, fc_argsort(ctx, xt, "n", 0), FC_AXES("r", "n")), fct_golden_get(&g, "sort.argsort0"), 0);

    fc_tensor *y = fct_golden_tensor(ctx, fct_golden_get(&g, "topk.x"), FC_F32, rn);
    for (int largest = 0; largest < 2; largest++) {
        char vn[32], in[32];
        snprintf(vn, sizeof vn, "topk.values%d", largest);
        snprintf(in, sizeof in, "topk.indices%d", largest);
        cr_assert_eq(fc_topk(ctx, y, "n", 5, largest, &v, &ix), FC_OK, "%s", fc_ctx_error(ctx));
        cr_expect_eq(fc_tensor_dtype(ix), FC_I64);
        expect_golden(v, fct_golden_get(&g, vn), 0);
        expect_golden(ix, fct_golden_get(&g, in), 0);
    }
    /* Integers beyond 2^53 keep their exact order. */
    int64_t big[4] = {INT64_MAX, INT64_MAX - 1, INT64_MIN, -1};
    fc_tensor *bi = fc_from_data(ctx, FC_I64, FC_SHAPE({"n", 4}), big, sizeof big);
    fc_tensor *bs = fc_argsort(ctx, bi, "n", 0);
    int64_t got[4];
    fc_tensor_read(ctx, bs, got, sizeof got);
    cr_expect(got[0] == 2 && got[1] == 3 && got[2] == 1 && got[3] == 0);
    /* Every dtype sorts [2, 0, 1]. */
    for (int dt = 0; dt < FC_DTYPE_PLAIN_COUNT; dt++) {
        if (dt == FC_BOOL) continue;
        fc_tensor *z = fc_flip(ctx, fc_arange(ctx, (fc_dtype)dt, "n", 3), "n");
        fc_tensor *o = fc_argsort(ctx, z, "n", 0);
        fc_tensor_read(ctx, o, got, 24);
        cr_expect(got[0] == 2 && got[1] == 1 && got[2] == 0, "%s", fc_dtype_name((fc_dtype)dt));
    }
    cr_expect_eq(fc_topk(ctx, x, "n", 10, 1, &v, &ix), FC_ERR_SHAPE);
    cr_expect_null(v);
    cr_expect_null(ix);
    expect_error(FC_ERR_SHAPE, "fc_topk", "\"n\"");
    cr_expect_eq(fc_topk(ctx, x, "m", 1, 1, &v, NULL), FC_ERR_AXIS);
    expect_error(FC_ERR_AXIS, "fc_topk", "\"m\"");
    cr_expect_null(fc_argsort(ctx, x, "m", 0));
    expect_error(FC_ERR_AXIS, "fc_argsort", "\"m\"");
    fc_scope_end(ctx, s);
    fct_golden_free(&g);
}

Test(shape, broadcast_inputs_equal_contiguous_copies)
{
    fc_scope s = fc_scope_begin(ctx);
    /* Stride-0 views: a row broadcast over r, a column broadcast over c. */
    fc_tensor *row = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 3, 0, 1);
    fc_tensor *bx = fc_broadcast_to(ctx, row, FC_SHAPE({"r", 4}, {"c", 6}));
    fc_tensor *cx = fc_clone(ctx, bx);
    cr_assert(bx && cx, "%s", fc_ctx_error(ctx));
    expect_same(ctx, fc_concat(ctx, (fc_tensor *[]){bx, cx}, 2, "r"), ctx, fc_concat(ctx, (fc_tensor *[]){cx, cx}, 2, "r"), "concat");
    expect_same(ctx, fc_flip(ctx, bx, "c"), ctx, fc_flip(ctx, cx, "c"), "flip");
    expect_same(ctx, fc_repeat(ctx, bx, "r", 2), ctx, fc_repeat(ctx, cx, "r", 2), "repeat");
    expect_same(ctx, fc_argsort(ctx, bx, "c", 1), ctx, fc_argsort(ctx, cx, "c", 1), "argsort");
    fc_tensor *idx = fc_from_data(ctx, FC_I64, FC_SHAPE({"r", 4}, {"c", 2}), (int64_t[]){5, 0, 1, 1, 2, 3, 4, 4}, 64);
    expect_same(ctx, fc_gather(ctx, bx, "c", idx), ctx, fc_gather(ctx, cx, "c", idx), "gather");
    fc_tensor *bidx = fc_broadcast_to(ctx, fc_from_data(ctx, FC_I32, FC_SHAPE({"c", 2}), (int32_t[]){3, 3}, 8),
                                      FC_SHAPE({"r", 4}, {"c", 2}));
    fc_tensor *src = fc_broadcast_to(ctx, fc_full(ctx, FC_F32, FC_SHAPE({"c", 1}), 0.5), FC_SHAPE({"r", 4}, {"c", 2}));
    expect_same(ctx, fc_scatter_add(ctx, bx, "c", bidx, src), ctx,
                fc_scatter_add(ctx, cx, "c", fc_clone(ctx, bidx), fc_clone(ctx, src)), "scatter_add");
    fc_tensor *ids = fc_rename_all(ctx, bidx, FC_AXES("p", "q"));
    expect_same(ctx, fc_get_rows(ctx, bx, ids), ctx, fc_get_rows(ctx, cx, fc_clone(ctx, ids)), "get_rows");
    expect_same(ctx, fc_index_select(ctx, bx, "r", fc_arange(ctx, FC_I64, "j", 3)), ctx,
                fc_index_select(ctx, cx, "r", fc_arange(ctx, FC_I64, "j", 3)), "index_select");
    fc_scope_end(ctx, s);
}

/* ---- 1 vs 2 threads on sizes that run in parallel ------------------------------------ */

static fc_tensor *index_tensor(fc_ctx *c, fc_dtype dt, const fc_dim *dims, int rank, int64_t mod, int64_t mul)
{
    fc_tensor *t = fc_empty(c, dt, dims, rank);
    int64_t n = fc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = (i * mul + i / 3) % mod;
        if (dt == FC_I32) ((int32_t *)fc_tensor_data(t))[i] = (int32_t)v;
        else ((int64_t *)fc_tensor_data(t))[i] = v;
    }
    return t;
}

#define N_RUN 10

static void run_all(fc_ctx *c, fc_tensor **out)
{
    fc_tensor *x = fc_rand_normal(c, FC_F32, FC_SHAPE({"r", 300}, {"n", 700}), 11, 0, 1);
    fc_tensor *xt = fc_transpose(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"n", 700}, {"r", 300}), 12, 0, 1), "n", "r");
    fc_tensor *table = fc_rand_normal(c, FC_BF16, FC_SHAPE({"vocab", 1000}, {"d", 128}), 13, 0, 1);
    out[0] = fc_concat(c, (fc_tensor *[]){x, xt}, 2, "r");
    out[1] = fc_flip(c, xt, "n");
    out[2] = fc_argsort(c, xt, "n", 1);
    fc_topk(c, x, "r", 7, 0, &out[3], &out[4]);
    out[5] = fc_get_rows(c, table, index_tensor(c, FC_I32, FC_SHAPE({"b", 4}, {"s", 500}), 1000, 7919));
    out[6] = fc_gather(c, xt, "n", index_tensor(c, FC_I64, FC_SHAPE({"r", 300}, {"n", 500}), 700, 31));
    out[7] = fc_scatter_add(c, fc_zeros(c, FC_F32, FC_SHAPE({"r", 300}, {"n", 100})), "n",
                            index_tensor(c, FC_I64, FC_SHAPE({"n", 700}, {"r", 300}), 100, 17), xt);
    out[8] = fc_index_select(c, xt, "n", index_tensor(c, FC_I32, FC_SHAPE({"j", 400}), 700, 13));
    out[9] = fc_pad(c, fc_stack(c, (fc_tensor *[]){x, xt}, 2, "k", 2), "n", 3, 5, 1.5);
}

Test(shape, one_and_two_threads_agree)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_ctx *c1 = p.c[0], *c2 = p.c[1];
    fc_tensor *a[N_RUN], *b[N_RUN];
    run_all(c1, a);
    run_all(c2, b);
    for (int i = 0; i < N_RUN; i++) {
        char what[32];
        snprintf(what, sizeof what, "op %d", i);
        expect_same(c1, a[i], c2, b[i], what);
    }
    /* The scattered sums equal a sequential reference. */
    fc_tensor *xt = fc_transpose(c1, fc_rand_normal(c1, FC_F32, FC_SHAPE({"n", 700}, {"r", 300}), 12, 0, 1), "n", "r");
    fc_tensor *ix = index_tensor(c1, FC_I64, FC_SHAPE({"n", 700}, {"r", 300}), 100, 17);
    const int64_t *iv = fc_tensor_data(ix);
    for (int64_t r = 0; r < 300; r += 37) {
        float acc[100] = {0};
        for (int64_t j = 0; j < 700; j++) acc[iv[j * 300 + r]] += (float)fc_tensor_get(xt, (int64_t[]){r, j});
        for (int64_t k = 0; k < 100; k++) cr_expect_eq(fc_tensor_get(a[7], (int64_t[]){r, k}), acc[k], "row %lld", (long long)r);
    }
    fct_ctx_pair_end(&p);
}

Test(shape, no_leaks_on_errors)
{
    uint64_t l = fc_ctx_pool_stats(ctx).tensors_live;
    fc_tensor *t = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 3}, {"b", 4}));
    fc_tensor *bad = fc_full(ctx, FC_I64, FC_SHAPE({"a", 3}, {"b", 4}), 9);
    fc_tensor *v = NULL, *ix = NULL, *parts[2];
    cr_expect_null(fc_gather(ctx, t, "b", bad));
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_scatter_add(ctx, t, "b", bad, t));
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_get_rows(ctx, t, bad));
    fc_ctx_clear_error(ctx);
    cr_expect_neq(fc_topk(ctx, t, "b", 5, 1, &v, &ix), FC_OK);
    fc_ctx_clear_error(ctx);
    cr_expect_neq(fc_split(ctx, t, "b", (int64_t[]){3, 3}, 2, parts), FC_OK);
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){t, bad}, 2, "a"));
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, l + 2);
    /* And the outputs of successful calls are owned by the caller. */
    cr_assert_eq(fc_split(ctx, t, "b", (int64_t[]){1, 3}, 2, parts), FC_OK);
    cr_assert_eq(fc_topk(ctx, t, "b", 2, 1, &v, &ix), FC_OK);
    fc_release(parts[0]);
    fc_release(parts[1]);
    fc_release(v);
    fc_release(ix);
    fc_release(t);
    fc_release(bad);
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, l);
}

/* ---- NULL name lists with a non-zero count --------------------------------- */
/* Refused with FC_ERR_INVALID_ARG naming the op, as a NULL shape is; they used
 * to be dereferenced. */

Test(shape, permute_null_order_with_count)
{
    fc_tensor *t = grid("a", 2, "b", 3, 0);
    cr_expect_null(fc_permute(ctx, t, NULL, 2));
    expect_error(FC_ERR_INVALID_ARG, "fc_permute", "NULL");
    fc_release(t);
}

Test(shape, rename_all_null_names_with_count)
{
    fc_tensor *t = grid("a", 2, "b", 3, 0);
    cr_expect_null(fc_rename_all(ctx, t, NULL, 2));
    expect_error(FC_ERR_INVALID_ARG, "fc_rename_all", "NULL");
    fc_release(t);
}

Test(shape, merge_axes_null_axes_with_count)
{
    fc_tensor *t = grid("a", 2, "b", 3, 0);
    cr_expect_null(fc_merge_axes(ctx, t, NULL, 2, "ab"));
    expect_error(FC_ERR_INVALID_ARG, "fc_merge_axes", "NULL");
    fc_release(t);
}
