/* SPDX-License-Identifier: MIT */
/* 1-D convolutions against PyTorch 1.13 (tests/goldens/structure_conv.txt,
 * from gen_structure_goldens.py): stride, padding (symmetric and not),
 * dilation, groups (depthwise too), output_padding, bias. Also: axis orders
 * and names chosen by the options, strided inputs, a direct-loop reference,
 * 1 vs 2 threads, every error path, no leaked handles. */
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
TestSuite(conv, .init = setup, .fini = teardown);

/* ---- goldens (format: gen_structure_goldens.py, read by fct_golden.h) ------ */

static fc_tensor *golden_f32(const fct_golden *e, const char *const *names)
{
    return fct_golden_tensor(ctx, e, FC_F32, names);
}

static void expect_golden(const fc_tensor *t, const fct_golden *e, double tol, const char *what)
{
    cr_assert(t, "%s: NULL result (%s)", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_rank(t), e->rank, "%s: rank", what);
    for (int i = 0; i < e->rank; i++)
        cr_assert_eq(fc_tensor_dim(t, i), e->dim[i], "%s: axis %d has %lld, want %lld", what, i,
                     (long long)fc_tensor_dim(t, i), (long long)e->dim[i]);
    double *v = fct_values(t);
    for (int64_t i = 0; i < e->n; i++)
        cr_expect(v[i] == e->v[i] || fabs(v[i] - e->v[i]) <= tol * (1 + fabs(e->v[i])), "%s[%lld] = %.9g, want %.9g", what,
                  (long long)i, v[i], e->v[i]);
    free(v);
}

/* fct_expect_bits, and a and b name their axes alike. */
static void expect_bits(fc_ctx *c1, const fc_tensor *a, fc_ctx *c2, const fc_tensor *b, const char *what)
{
    cr_assert(a && b, "%s: NULL (%s / %s)", what, fc_ctx_error(c1), fc_ctx_error(c2));
    cr_assert_eq(fc_tensor_nbytes(a), fc_tensor_nbytes(b), "%s: sizes differ", what);
    for (int i = 0; i < fc_tensor_rank(a); i++) cr_assert_str_eq(fc_tensor_axis(a, i), fc_tensor_axis(b, i), "%s", what);
    fct_expect_bits(c1, a, c2, b, what);
}

static void expect_error(fc_status st, const char *op, const char *axis)
{
    fct_expect_error(ctx, st, op, axis);
}

#define TOL 2e-5

/* ---- goldens ------------------------------------------------------------------ */

Test(conv, conv1d_goldens)
{
    fct_goldens g = fct_golden_load("structure_conv.txt");
    const char *bct[3] = {"b", "c", "t"}, *wn[3] = {"c_out", "c", "k"}, *on[1] = {"c_out"};
    for (int i = 0;; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "conv%d.params", i);
        const fct_golden *p = fct_golden_find(&g, nm);
        if (!p) {
            cr_expect_gt(i, 5, "too few conv goldens");
            break;
        }
        fc_scope s = fc_scope_begin(ctx);
        fc_conv1d_options o = {.stride = (int64_t)p->v[0], .padding = {(int64_t)p->v[1], (int64_t)p->v[2]},
                               .dilation = (int64_t)p->v[3], .groups = (int64_t)p->v[4]};
        snprintf(nm, sizeof nm, "conv%d.x", i);
        fc_tensor *x = golden_f32(fct_golden_get(&g, nm), bct);
        snprintf(nm, sizeof nm, "conv%d.w", i);
        fc_tensor *w = golden_f32(fct_golden_get(&g, nm), wn);
        fc_tensor *b = NULL;
        if (p->v[6] != 0) {
            snprintf(nm, sizeof nm, "conv%d.b", i);
            b = golden_f32(fct_golden_get(&g, nm), on);
        }
        snprintf(nm, sizeof nm, "conv%d.y", i);
        const fct_golden *want = fct_golden_get(&g, nm);
        fc_tensor *y = fc_conv1d(ctx, x, w, b, &o);
        expect_golden(y, want, TOL, nm);
        /* x as [t, b, c] and a strided weight [k, c, c_out]: same values, x's order. */
        fc_tensor *xp = fc_permute(ctx, x, FC_AXES("t", "b", "c"));
        fc_tensor *wp = fc_permute(ctx, fc_clone(ctx, fc_permute(ctx, w, FC_AXES("k", "c", "c_out"))),
                                   FC_AXES("c", "k", "c_out"));
        fc_tensor *yp = fc_conv1d(ctx, xp, wp, b, &o);
        cr_assert(yp, "%s", fc_ctx_error(ctx));
        cr_expect_str_eq(fc_tensor_axis(yp, 0), "t");
        cr_expect_str_eq(fc_tensor_axis(yp, 2), "c");
        expect_bits(ctx, fc_clone(ctx, fc_permute(ctx, yp, FC_AXES("b", "c", "t"))), ctx, y, "permuted operands");
        fc_scope_end(ctx, s);
    }
    fct_golden_free(&g);
}

Test(conv, conv_transpose1d_goldens)
{
    fct_goldens g = fct_golden_load("structure_conv.txt");
    const char *bct[3] = {"b", "c", "t"}, *wn[3] = {"c", "c_out", "k"}, *on[1] = {"c_out"};
    for (int i = 0;; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "tconv%d.params", i);
        const fct_golden *p = fct_golden_find(&g, nm);
        if (!p) {
            cr_expect_gt(i, 3, "too few conv_transpose goldens");
            break;
        }
        fc_scope s = fc_scope_begin(ctx);
        fc_conv_transpose1d_options o = {.stride = (int64_t)p->v[0],
                                         .padding = {(int64_t)p->v[1], (int64_t)p->v[2]},
                                         .dilation = (int64_t)p->v[3], .groups = (int64_t)p->v[4],
                                         .output_padding = (int64_t)p->v[5]};
        snprintf(nm, sizeof nm, "tconv%d.x", i);
        fc_tensor *x = golden_f32(fct_golden_get(&g, nm), bct);
        snprintf(nm, sizeof nm, "tconv%d.w", i);
        fc_tensor *w = golden_f32(fct_golden_get(&g, nm), wn);
        fc_tensor *b = NULL;
        if (p->v[6] != 0) {
            snprintf(nm, sizeof nm, "tconv%d.b", i);
            b = golden_f32(fct_golden_get(&g, nm), on);
        }
        snprintf(nm, sizeof nm, "tconv%d.y", i);
        fc_tensor *y = fc_conv_transpose1d(ctx, x, w, b, &o);
        expect_golden(y, fct_golden_get(&g, nm), TOL, nm);
        /* A strided x (time not contiguous) equals the contiguous one. */
        fc_tensor *xs = fc_permute(ctx, fc_clone(ctx, fc_permute(ctx, x, FC_AXES("t", "b", "c"))), FC_AXES("b", "c", "t"));
        expect_bits(ctx, fc_conv_transpose1d(ctx, xs, w, b, &o), ctx, y, "strided x");
        fc_scope_end(ctx, s);
    }
    fct_golden_free(&g);
}

/* ---- a direct-loop reference, custom names, no batch axis ------------------------------ */

static double conv_ref(const fc_tensor *x, const fc_tensor *w, int64_t o, int64_t j, int64_t s, int64_t pl,
                       int64_t d, int64_t groups)
{
    int64_t cin = fc_tensor_dim(x, 0), L = fc_tensor_dim(x, 1), K = fc_tensor_dim(w, 2);
    int64_t cin_g = cin / groups, cout_g = fc_tensor_dim(w, 0) / groups, gi = o / cout_g;
    double acc = 0;
    for (int64_t i = 0; i < cin_g; i++)
        for (int64_t k = 0; k < K; k++) {
            int64_t p = j * s + k * d - pl;
            if (p < 0 || p >= L) continue;
            acc += fc_tensor_get(w, (int64_t[]){o, i, k}) * fc_tensor_get(x, (int64_t[]){gi * cin_g + i, p});
        }
    return acc;
}

Test(conv, custom_names_and_reference_loop)
{
    fc_scope s = fc_scope_begin(ctx);
    /* No batch axis; axes named by the options. */
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"ch", 6}, {"time", 40}), 1, 0, 1);
    fc_tensor *w = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"o", 4}, {"ch", 3}, {"tap", 5}), 2, 0, 1);
    fc_conv1d_options o = {.channel_axis = "ch", .time_axis = "time", .out_axis = "o", .kernel_axis = "tap",
                           .stride = 3, .padding = {4, 1}, .dilation = 2, .groups = 2};
    fc_tensor *y = fc_conv1d(ctx, x, w, NULL, &o);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_str_eq(fc_tensor_axis(y, 0), "ch");
    cr_assert_str_eq(fc_tensor_axis(y, 1), "time");
    int64_t lout = (40 + 5 - 2 * 4 - 1) / 3 + 1;
    cr_assert_eq(fc_tensor_dim(y, 1), lout);
    for (int64_t c = 0; c < 4; c++)
        for (int64_t j = 0; j < lout; j++) {
            double want = conv_ref(x, w, c, j, 3, 4, 2, 2);
            double got = fc_tensor_get(y, (int64_t[]){c, j});
            cr_expect(fabs(got - want) < 1e-4 * (1 + fabs(want)), "[%lld, %lld] %g vs %g", (long long)c, (long long)j,
                      got, want);
        }
    /* The transpose is the adjoint of the convolution: <conv(x), z> = <x, convT(z)>
     * for the same weight (when output_padding fills the length back). */
    fc_tensor *z = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"ch", 4}, {"time", lout}), 3, 0, 1);
    fc_tensor *wt = fc_rename(ctx, fc_rename(ctx, w, "o", "tmp"), "ch", "o");
    wt = fc_rename(ctx, wt, "tmp", "ch"); /* {ch: 4 (input of the transpose), o: 3, tap: 5} */
    int64_t full = (lout - 1) * 3 - 4 - 1 + 2 * 4 + 1;
    fc_conv_transpose1d_options ot = {.channel_axis = "ch", .time_axis = "time", .out_axis = "o", .kernel_axis = "tap",
                                      .stride = 3, .padding = {4, 1}, .dilation = 2, .groups = 2,
                                      .output_padding = 40 - full};
    cr_assert(40 - full >= 0 && 40 - full < 3, "test geometry: output_padding %lld", (long long)(40 - full));
    fc_tensor *xt = fc_conv_transpose1d(ctx, z, wt, NULL, &ot);
    cr_assert(xt, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_dim(xt, 1), 40);
    double lhs = 0, rhs = 0;
    for (int64_t c = 0; c < 4; c++)
        for (int64_t j = 0; j < lout; j++) lhs += fc_tensor_get(y, (int64_t[]){c, j}) * fc_tensor_get(z, (int64_t[]){c, j});
    for (int64_t c = 0; c < 6; c++)
        for (int64_t j = 0; j < 40; j++) rhs += fc_tensor_get(x, (int64_t[]){c, j}) * fc_tensor_get(xt, (int64_t[]){c, j});
    cr_expect(fabs(lhs - rhs) < 1e-3 * (1 + fabs(lhs)), "adjoint: %g vs %g", lhs, rhs);
    fc_scope_end(ctx, s);
}

Test(conv, broadcast_input_equals_contiguous_copy)
{
    fc_scope s = fc_scope_begin(ctx);
    /* A batch broadcast with stride 0, and a channel broadcast. */
    fc_tensor *x1 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 4}, {"t", 17}), 5, 0, 1);
    fc_tensor *bx = fc_broadcast_to(ctx, x1, FC_SHAPE({"b", 3}, {"c", 4}, {"t", 17}));
    fc_tensor *x2 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"t", 17}), 6, 0, 1);
    fc_tensor *bc = fc_broadcast_to(ctx, x2, FC_SHAPE({"c", 4}, {"t", 17}));
    fc_tensor *w = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 6}, {"c", 2}, {"k", 3}), 7, 0, 1);
    fc_tensor *wt = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 4}, {"c_out", 3}, {"k", 3}), 8, 0, 1);
    fc_conv1d_options o = {.groups = 2, .padding = {2, 0}, .stride = 2};
    fc_conv_transpose1d_options ot = {.groups = 2, .stride = 2, .output_padding = 1};
    fc_tensor *xs[2] = {bx, bc};
    for (int i = 0; i < 2; i++) {
        fc_tensor *c = fc_clone(ctx, xs[i]);
        expect_bits(ctx, fc_conv1d(ctx, xs[i], w, NULL, &o), ctx, fc_conv1d(ctx, c, w, NULL, &o), "conv1d");
        expect_bits(ctx, fc_conv_transpose1d(ctx, xs[i], wt, NULL, &ot), ctx, fc_conv_transpose1d(ctx, c, wt, NULL, &ot),
                    "conv_transpose1d");
    }
    /* Pointwise (the GEMM reads x directly) with a broadcast batch. */
    fc_tensor *w1 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 5}, {"c", 4}, {"k", 1}), 9, 0, 1);
    expect_bits(ctx, fc_conv1d(ctx, bx, w1, NULL, &(fc_conv1d_options){.stride = 3}), ctx,
                fc_conv1d(ctx, fc_clone(ctx, bx), w1, NULL, &(fc_conv1d_options){.stride = 3}), "pointwise");
    fc_scope_end(ctx, s);
}

/* ---- threads ------------------------------------------------------------------------ */

Test(conv, one_and_two_threads_agree)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_ctx *c1 = p.c[0], *c2 = p.c[1];
    fc_tensor *r[2][2];
    for (int k = 0; k < 2; k++) {
        fc_ctx *c = p.c[k];
        fc_tensor *x = fc_rand_normal(c, FC_F32, FC_SHAPE({"b", 3}, {"c", 64}, {"t", 1000}), 1, 0, 1);
        fc_tensor *w = fc_rand_normal(c, FC_F32, FC_SHAPE({"c_out", 96}, {"c", 32}, {"k", 3}), 2, 0, 0.1);
        fc_tensor *bias = fc_rand_normal(c, FC_F32, FC_SHAPE({"c_out", 96}), 3, 0, 1);
        r[k][0] = fc_conv1d(c, x, w, bias, &(fc_conv1d_options){.padding = {1, 1}, .groups = 2});
        fc_tensor *wt = fc_rand_normal(c, FC_F32, FC_SHAPE({"c", 64}, {"c_out", 48}, {"k", 4}), 4, 0, 0.1);
        r[k][1] = fc_conv_transpose1d(c, x, wt, NULL, &(fc_conv_transpose1d_options){.stride = 2, .padding = {1, 1}});
    }
    expect_bits(c1, r[0][0], c2, r[1][0], "conv1d");
    expect_bits(c1, r[0][1], c2, r[1][1], "conv_transpose1d");
    fct_ctx_pair_end(&p);
}

/* ---- errors --------------------------------------------------------------------------- */

Test(conv, errors)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"b", 2}, {"c", 4}, {"t", 10}));
    fc_tensor *w = fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 6}, {"c", 4}, {"k", 3}));
    fc_tensor *bias = fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 6}));
    cr_assert(fc_conv1d(ctx, x, w, bias, NULL), "%s", fc_ctx_error(ctx));
    cr_expect_null(fc_conv1d(ctx, x, w, bias, &(fc_conv1d_options){.time_axis = "time"}));
    expect_error(FC_ERR_AXIS, "fc_conv1d", "\"time\"");
    cr_expect_null(fc_conv1d(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 6}, {"c", 3}, {"k", 3})), NULL, NULL));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "\"c\"");
    cr_expect_null(fc_conv1d(ctx, x, w, NULL, &(fc_conv1d_options){.groups = 3}));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "\"c\"");
    cr_expect_null(fc_conv1d(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 5}, {"c", 2}, {"k", 3})), NULL,
                             &(fc_conv1d_options){.groups = 2}));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "\"c_out\"");
    cr_expect_null(fc_conv1d(ctx, x, w, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 5})), NULL));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "c_out");
    cr_expect_null(fc_conv1d(ctx, x, w, fc_zeros(ctx, FC_F32, FC_SHAPE({"o", 6})), NULL));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "c_out");
    cr_expect_null(fc_conv1d(ctx, x, w, NULL, &(fc_conv1d_options){.dilation = 5}));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "\"t\"");
    cr_expect_null(fc_conv1d(ctx, x, w, NULL, &(fc_conv1d_options){.stride = -1}));
    expect_error(FC_ERR_INVALID_ARG, "fc_conv1d", "\"t\"");
    cr_expect_null(fc_conv1d(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 6}, {"c", 4})), NULL, NULL));
    expect_error(FC_ERR_SHAPE, "fc_conv1d", "\"k\"");
    cr_expect_null(fc_conv1d(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 6}, {"c", 4}, {"kk", 3})), NULL, NULL));
    expect_error(FC_ERR_AXIS, "fc_conv1d", "\"k\"");
    cr_expect_null(fc_conv1d(ctx, fc_zeros(ctx, FC_F16, FC_SHAPE({"c", 4}, {"t", 10})), w, NULL, NULL));
    expect_error(FC_ERR_DTYPE, "fc_conv1d", "\"c\"");
    cr_expect_null(fc_conv1d(ctx, x, w, NULL, &(fc_conv1d_options){.out_axis = "c"}));
    expect_error(FC_ERR_AXIS, "fc_conv1d", "\"c\"");
    fc_tensor *wt = fc_zeros(ctx, FC_F32, FC_SHAPE({"c", 4}, {"c_out", 3}, {"k", 3}));
    cr_assert(fc_conv_transpose1d(ctx, x, wt, NULL, &(fc_conv_transpose1d_options){.groups = 2, .stride = 2}), "%s",
              fc_ctx_error(ctx));
    cr_expect_null(fc_conv_transpose1d(ctx, x, wt, NULL, &(fc_conv_transpose1d_options){.output_padding = 1}));
    expect_error(FC_ERR_INVALID_ARG, "fc_conv_transpose1d", "\"t\"");
    cr_expect_null(fc_conv_transpose1d(ctx, x, wt, NULL, &(fc_conv_transpose1d_options){.padding = {10, 10}}));
    expect_error(FC_ERR_SHAPE, "fc_conv_transpose1d", "\"t\"");
    cr_expect_null(fc_conv_transpose1d(ctx, x, wt, NULL, &(fc_conv_transpose1d_options){.groups = 3}));
    expect_error(FC_ERR_SHAPE, "fc_conv_transpose1d", "\"c\"");
    cr_expect_null(fc_conv_transpose1d(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 4}, {"c", 6}, {"k", 3})), NULL, NULL));
    expect_error(FC_ERR_SHAPE, "fc_conv_transpose1d", "\"c\"");
    cr_expect_null(fc_conv1d(ctx, x, NULL, NULL, NULL));
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx, s);
}
