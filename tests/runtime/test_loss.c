/* SPDX-License-Identifier: MIT */
/* Losses: cross_entropy against PyTorch 1.13 (ignore_index, label
 * smoothing, every reduction, class axis first / middle / last, f16 and bf16
 * logits) and mse (broadcast by name and from the right), from
 * tests/goldens/structure_loss.txt (gen_structure_goldens.py); strided
 * inputs equal contiguous ones bit for bit; 1 and 2 threads agree; errors. */
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
TestSuite(loss, .init = setup, .fini = teardown);

static void expect_golden(const fc_tensor *t, const fct_golden *e, double tol, const char *what)
{
    cr_assert(t, "%s: NULL result (%s)", what, fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_dtype(t), FC_F32, "%s: losses are f32", what);
    cr_assert_eq(fc_tensor_numel(t), e->n, "%s: %lld elements, want %lld", what, (long long)fc_tensor_numel(t),
                 (long long)e->n);
    cr_assert_eq(fc_tensor_rank(t), e->rank, "%s: rank", what);
    double *v = fct_values(t);
    for (int64_t i = 0; i < e->n; i++) {
        if (isnan(e->v[i])) {
            cr_expect(isnan(v[i]), "%s[%lld] = %g, want nan", what, (long long)i, v[i]);
            continue;
        }
        cr_expect(v[i] == e->v[i] || fabs(v[i] - e->v[i]) <= tol * (1 + fabs(e->v[i])), "%s[%lld] = %.9g, want %.9g", what,
                  (long long)i, v[i], e->v[i]);
    }
    free(v);
}

static void expect_error(fc_status st, const char *op, const char *axis)
{
    fct_expect_error(ctx, st, op, axis);
}

/* ---- cross entropy ----------------------------------------------------------- */

static const char *const red_names[3] = {"mean", "sum", "none"};
static const float smoothing[3] = {0.0f, 0.1f, 0.35f};

Test(loss, cross_entropy_goldens)
{
    fct_goldens g = fct_golden_load("structure_loss.txt");
    fc_scope s = fc_scope_begin(ctx);
    struct { const char *name; const char *ax[3]; int rank; const char *tax[2]; } cases[3] = {
        {"ce0", {"n", "c"}, 2, {"n"}},
        {"ce1", {"b", "c", "s"}, 3, {"b", "s"}},
        {"ce2", {"c", "n"}, 2, {"n"}},
    };
    for (int ci = 0; ci < 3; ci++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s.logits", cases[ci].name);
        fc_tensor *x = fct_golden_tensor(ctx, fct_golden_get(&g, nm), FC_F32, cases[ci].ax);
        snprintf(nm, sizeof nm, "%s.targets", cases[ci].name);
        fc_tensor *t64 = fct_golden_tensor(ctx, fct_golden_get(&g, nm), FC_I64, cases[ci].tax);
        fc_tensor *t32 = fct_golden_tensor(ctx, fct_golden_get(&g, nm), FC_I32, cases[ci].tax);
        snprintf(nm, sizeof nm, "%s.meta", cases[ci].name);
        int64_t ignore = (int64_t)fct_golden_get(&g, nm)->v[1];
        /* A strided copy of the logits: classes no longer contiguous. */
        fc_tensor *xs = fc_transpose(ctx, fc_clone(ctx, fc_transpose(ctx, x, cases[ci].ax[0], cases[ci].ax[1])),
                                     cases[ci].ax[1], cases[ci].ax[0]);
        for (int li = 0; li < 3; li++) {
            for (int ri = 0; ri < 3; ri++) {
                fc_ce_options o = {.reduction = (fc_reduction)ri, .label_smoothing = smoothing[li],
                                   .ignore_index = ignore, .set_ignore_index = 1};
                snprintf(nm, sizeof nm, "%s.ls%d.%s", cases[ci].name, li, red_names[ri]);
                const fct_golden *want = fct_golden_get(&g, nm);
                fc_tensor *y = fc_cross_entropy(ctx, x, t64, "c", &o);
                expect_golden(y, want, 2e-6, nm);
                expect_golden(fc_cross_entropy(ctx, x, t32, "c", &o), want, 2e-6, nm);
                fct_expect_bits(ctx, fc_cross_entropy(ctx, xs, t64, "c", &o), ctx, y, "strided logits");
                if (ignore == -100) { /* the default ignore index */
                    fc_ce_options d = {.reduction = (fc_reduction)ri, .label_smoothing = smoothing[li]};
                    fct_expect_bits(ctx, fc_cross_entropy(ctx, x, t64, "c", &d), ctx, y, "default ignore index");
                }
            }
        }
    }
    /* NULL options: mean, no smoothing, ignore -100. */
    const char *nc[2] = {"n", "c"}, *n1[1] = {"n"};
    fc_tensor *x = fct_golden_tensor(ctx, fct_golden_get(&g, "ce0.logits"), FC_F32, nc);
    fc_tensor *t = fct_golden_tensor(ctx, fct_golden_get(&g, "ce0.targets"), FC_I64, n1);
    expect_golden(fc_cross_entropy(ctx, x, t, "c", NULL), fct_golden_get(&g, "ce0.ls0.mean"), 2e-6, "NULL options");
    /* f16 / bf16 logits, computed in f32. */
    fc_tensor *h = fct_golden_tensor(ctx, fct_golden_get(&g, "ce_f16.logits"), FC_F16, nc);
    fc_tensor *ht = fct_golden_tensor(ctx, fct_golden_get(&g, "ce_f16.targets"), FC_I64, n1);
    expect_golden(fc_cross_entropy(ctx, h, ht, "c", &(fc_ce_options){.label_smoothing = 0.1f}),
                  fct_golden_get(&g, "ce_f16.mean"), 2e-6, "f16");
    fc_tensor *bh = fct_golden_tensor(ctx, fct_golden_get(&g, "ce_bf16.logits"), FC_BF16, nc);
    expect_golden(fc_cross_entropy(ctx, bh, ht, "c", &(fc_ce_options){.label_smoothing = 0.1f}),
                  fct_golden_get(&g, "ce_bf16.mean"), 2e-6, "bf16");
    fc_scope_end(ctx, s);
    fct_golden_free(&g);
}

Test(loss, cross_entropy_all_ignored_and_target_order)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", 2}, {"s", 3}, {"v", 5}), 1, 0, 1);
    fc_tensor *t = fc_full(ctx, FC_I64, FC_SHAPE({"b", 2}, {"s", 3}), -100);
    cr_expect(isnan(fc_tensor_item(fc_cross_entropy(ctx, x, t, "v", NULL))), "all ignored: mean is NaN");
    cr_expect_eq(fc_tensor_item(fc_cross_entropy(ctx, x, t, "v", &(fc_ce_options){.reduction = FC_REDUCE_SUM})), 0);
    fc_tensor *none = fc_cross_entropy(ctx, x, t, "v", &(fc_ce_options){.reduction = FC_REDUCE_NONE, .label_smoothing = 0.5f});
    double *v = (double[6]){0};
    for (int64_t i = 0; i < 6; i++) v[i] = fc_tensor_get(none, (int64_t[]){i / 3, i % 3});
    for (int i = 0; i < 6; i++) cr_expect_eq(v[i], 0);
    /* Ignoring class 0 explicitly (0 is a valid class otherwise). */
    fc_tensor *t0 = fc_zeros(ctx, FC_I32, FC_SHAPE({"s", 3}, {"b", 2}));
    cr_expect(isnan(fc_tensor_item(fc_cross_entropy(ctx, x, t0, "v", &(fc_ce_options){.set_ignore_index = 1}))));
    cr_expect(!isnan(fc_tensor_item(fc_cross_entropy(ctx, x, t0, "v", NULL))));
    /* Targets listing their axes in another order than the logits. */
    int64_t tv[6] = {0, 4, 2, 1, 3, 3};
    fc_tensor *tb = fc_from_data(ctx, FC_I64, FC_SHAPE({"b", 2}, {"s", 3}), tv, sizeof tv);
    fc_tensor *tsw = fc_clone(ctx, fc_transpose(ctx, tb, "b", "s"));
    fc_ce_options o = {.reduction = FC_REDUCE_NONE};
    fc_tensor *y1 = fc_cross_entropy(ctx, x, tb, "v", &o), *y2 = fc_cross_entropy(ctx, x, tsw, "v", &o);
    cr_assert(y1 && y2, "%s", fc_ctx_error(ctx));
    cr_expect_str_eq(fc_tensor_axis(y2, 0), "b");
    fct_expect_bits(ctx, y1, ctx, y2, "target axis order");
    /* NONE is -log_softmax at the target. */
    for (int64_t b = 0; b < 2; b++)
        for (int64_t q = 0; q < 3; q++) {
            double m = -INFINITY, z = 0;
            for (int64_t c = 0; c < 5; c++) m = fmax(m, fc_tensor_get(x, (int64_t[]){b, q, c}));
            for (int64_t c = 0; c < 5; c++) z += exp(fc_tensor_get(x, (int64_t[]){b, q, c}) - m);
            double want = -(fc_tensor_get(x, (int64_t[]){b, q, tv[b * 3 + q]}) - m - log(z));
            cr_expect(fabs(fc_tensor_get(y1, (int64_t[]){b, q}) - want) < 1e-5);
        }
    fc_scope_end(ctx, s);
}

Test(loss, cross_entropy_errors)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"n", 4}, {"v", 5}), 1, 0, 1);
    fc_tensor *t = fc_from_data(ctx, FC_I64, FC_SHAPE({"n", 4}), (int64_t[]){0, 1, 5, 2}, 32);
    cr_expect_null(fc_cross_entropy(ctx, x, t, "v", NULL));
    expect_error(FC_ERR_INVALID_ARG, "fc_cross_entropy", "\"v\"");
    fc_tensor *ok = fc_from_data(ctx, FC_I64, FC_SHAPE({"n", 4}), (int64_t[]){0, 1, 4, 2}, 32);
    cr_expect_null(fc_cross_entropy(ctx, x, ok, "class", NULL));
    expect_error(FC_ERR_AXIS, "fc_cross_entropy", "class");
    cr_expect_null(fc_cross_entropy(ctx, fc_zeros(ctx, FC_F64, FC_SHAPE({"n", 4}, {"v", 5})), ok, "v", NULL));
    expect_error(FC_ERR_DTYPE, "fc_cross_entropy", "\"v\"");
    cr_expect_null(fc_cross_entropy(ctx, x, fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 4})), "v", NULL));
    expect_error(FC_ERR_DTYPE, "fc_cross_entropy", "\"v\"");
    cr_expect_null(fc_cross_entropy(ctx, x, fc_zeros(ctx, FC_I64, FC_SHAPE({"n", 3})), "v", NULL));
    expect_error(FC_ERR_SHAPE, "fc_cross_entropy", "\"n\"");
    cr_expect_null(fc_cross_entropy(ctx, x, fc_zeros(ctx, FC_I64, FC_SHAPE({"m", 4})), "v", NULL));
    expect_error(FC_ERR_AXIS, "fc_cross_entropy", "\"m\"");
    cr_expect_null(fc_cross_entropy(ctx, x, fc_zeros(ctx, FC_I64, FC_SHAPE({"n", 4}, {"v", 5})), "v", NULL));
    expect_error(FC_ERR_AXIS, "fc_cross_entropy", "\"v\"");
    cr_expect_null(fc_cross_entropy(ctx, x, fc_scalar(ctx, FC_I64, 0), "v", NULL));
    expect_error(FC_ERR_AXIS, "fc_cross_entropy", "\"n\"");
    cr_expect_null(fc_cross_entropy(ctx, x, ok, "v", &(fc_ce_options){.label_smoothing = 1.5f}));
    expect_error(FC_ERR_INVALID_ARG, "fc_cross_entropy", "\"v\"");
    cr_expect_null(fc_cross_entropy(ctx, x, ok, "v", &(fc_ce_options){.reduction = (fc_reduction)7}));
    expect_error(FC_ERR_INVALID_ARG, "fc_cross_entropy", "\"v\"");
    cr_expect_null(fc_cross_entropy(ctx, x, NULL, "v", NULL));
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx, s);
}

Test(loss, broadcast_logits_equal_contiguous_copy)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *row = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"v", 7}), 9, 0, 2);
    fc_tensor *bx = fc_broadcast_to(ctx, row, FC_SHAPE({"n", 5}, {"v", 7}));
    fc_tensor *t = fc_from_data(ctx, FC_I64, FC_SHAPE({"n", 5}), (int64_t[]){0, 6, 3, -100, 2}, 40);
    for (int ri = 0; ri < 3; ri++) {
        fc_ce_options o = {.reduction = (fc_reduction)ri, .label_smoothing = 0.25f};
        fct_expect_bits(ctx, fc_cross_entropy(ctx, bx, t, "v", &o), ctx, fc_cross_entropy(ctx, fc_clone(ctx, bx), t, "v", &o),
                    "broadcast logits");
    }
    fc_scope_end(ctx, s);
}

/* ---- mse ----------------------------------------------------------------------- */

Test(loss, mse_goldens_and_errors)
{
    fct_goldens g = fct_golden_load("structure_loss.txt");
    fc_scope s = fc_scope_begin(ctx);
    const char *rc[2] = {"r", "c"}, *c1[1] = {"c"};
    fc_tensor *a = fct_golden_tensor(ctx, fct_golden_get(&g, "mse.a"), FC_F32, rc);
    fc_tensor *b = fct_golden_tensor(ctx, fct_golden_get(&g, "mse.b"), FC_F32, c1);
    fc_tensor *c = fct_golden_tensor(ctx, fct_golden_get(&g, "mse.c"), FC_F32, rc);
    /* Positional operands align from the right. */
    const char *pa[2] = {NULL, NULL}, *pb[1] = {NULL};
    fc_tensor *ap = fct_golden_tensor(ctx, fct_golden_get(&g, "mse.a"), FC_F32, pa);
    fc_tensor *bp = fct_golden_tensor(ctx, fct_golden_get(&g, "mse.b"), FC_F32, pb);
    fc_tensor *cs = fc_transpose(ctx, fc_clone(ctx, fc_transpose(ctx, c, "r", "c")), "c", "r");
    for (int ri = 0; ri < 3; ri++) {
        char nm[64];
        snprintf(nm, sizeof nm, "mse.ab.%s", red_names[ri]);
        expect_golden(fc_mse(ctx, a, b, (fc_reduction)ri), fct_golden_get(&g, nm), 1e-6, nm);
        expect_golden(fc_mse(ctx, ap, bp, (fc_reduction)ri), fct_golden_get(&g, nm), 1e-6, nm);
        snprintf(nm, sizeof nm, "mse.ac.%s", red_names[ri]);
        expect_golden(fc_mse(ctx, a, c, (fc_reduction)ri), fct_golden_get(&g, nm), 1e-6, nm);
        fct_expect_bits(ctx, fc_mse(ctx, a, cs, (fc_reduction)ri), ctx, fc_mse(ctx, a, c, (fc_reduction)ri), "strided mse");
    }
    /* b first: the result has b's axes, then a's. */
    fc_tensor *ba = fc_mse(ctx, b, a, FC_REDUCE_NONE);
    cr_assert(ba);
    cr_expect_str_eq(fc_tensor_axis(ba, 0), "c");
    cr_expect_null(fc_mse(ctx, a, fc_zeros(ctx, FC_F32, FC_SHAPE({"c", 3})), FC_REDUCE_MEAN));
    expect_error(FC_ERR_SHAPE, "fc_mse", "\"c\"");
    cr_expect_null(fc_mse(ctx, a, fc_zeros(ctx, FC_F16, FC_SHAPE({"c", 4})), FC_REDUCE_MEAN));
    expect_error(FC_ERR_DTYPE, "fc_mse", NULL);
    fc_scope_end(ctx, s);
    fct_golden_free(&g);
}

/* ---- threads ---------------------------------------------------------------------- */

Test(loss, one_and_two_threads_agree)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_ctx *c1 = p.c[0], *c2 = p.c[1];
    fc_tensor *r[2][6];
    for (int k = 0; k < 2; k++) {
        fc_ctx *c = p.c[k];
        fc_tensor *x = fc_rand_normal(c, FC_F32, FC_SHAPE({"n", 1500}, {"v", 301}), 5, 0, 3);
        fc_tensor *xh = fc_rand_normal(c, FC_BF16, FC_SHAPE({"v", 301}, {"n", 1500}), 6, 0, 3);
        fc_tensor *t = fc_empty(c, FC_I32, FC_SHAPE({"n", 1500}));
        int32_t *tp = fc_tensor_data(t);
        for (int i = 0; i < 1500; i++) tp[i] = i % 7 == 0 ? -100 : (i * 37) % 301;
        fc_ce_options o = {.label_smoothing = 0.2f};
        r[k][0] = fc_cross_entropy(c, x, t, "v", &o);
        r[k][1] = fc_cross_entropy(c, xh, t, "v", &(fc_ce_options){.reduction = FC_REDUCE_NONE});
        r[k][2] = fc_cross_entropy(c, xh, t, "v", &(fc_ce_options){.reduction = FC_REDUCE_SUM});
        fc_tensor *y = fc_rand_normal(c, FC_F32, FC_SHAPE({"v", 301}, {"n", 1500}), 7, 0, 1);
        r[k][3] = fc_mse(c, x, y, FC_REDUCE_MEAN);
        r[k][4] = fc_mse(c, x, y, FC_REDUCE_NONE);
        r[k][5] = fc_mse(c, xh, fc_rand_normal(c, FC_BF16, FC_SHAPE({"n", 1500}), 8, 0, 1), FC_REDUCE_SUM);
    }
    for (int i = 0; i < 6; i++) {
        char what[32];
        snprintf(what, sizeof what, "loss %d", i);
        fct_expect_bits(c1, r[0][i], c2, r[1][i], what);
    }
    fct_ctx_pair_end(&p);
}
