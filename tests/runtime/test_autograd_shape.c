/* SPDX-License-Identifier: MIT */
/* Gradients of the structure, index, loss and convolution ops: central
 * finite differences (fc_gradcheck) per op, in f64 where the forward takes
 * f64 (structure and index ops) and in f32 otherwise (losses, convolutions),
 * with non-contiguous variables, operands in other axis orders and repeated
 * indices; PyTorch 1.13's float64 gradients of sum(out * weights)
 * (tests/goldens/autograd_shape.txt from gen_autograd_shape_goldens.py);
 * bitwise-identical gradients on 1 and 2 threads for the index ops with
 * repeated indices and for cross entropy; errors (in-place changes to saved
 * indices and operands, fc_set_slice, bad forwards) without leaks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

static fc_ctx *ctx;
#define NAMES(...) ((const char *const[]){__VA_ARGS__})

static void setup(void) { ctx = fct_suite_begin(2); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(autograd_shape, .init = setup, .fini = teardown);

static fc_tensor *add(fc_ctx *c, fc_tensor *a, fc_tensor *b) { return a ? fc_add(c, a, b) : b; }

/* fc_gradcheck, after checking that one backward pass gives every input a
 * gradient of exactly its named shape (axis order and sizes) and its
 * gradient dtype. */
static void check(fc_loss_fn f, void *user, fc_tensor *const *in, int n, const fc_gradcheck_opts *o, const char *what)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *l = f(ctx, user, in, n);
    cr_assert(l, "%s: %s", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_backward(ctx, l), FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    for (int i = 0; i < n; i++) {
        fc_tensor *g = fc_grad(ctx, in[i]);
        cr_assert(g, "%s: input %d has no gradient", what, i);
        cr_expect_eq(fc_tensor_dtype(g), fc_tensor_dtype(in[i]) == FC_F64 ? FC_F64 : FC_F32, "%s: input %d dtype", what, i);
        cr_assert_eq(fc_tensor_rank(g), fc_tensor_rank(in[i]), "%s: input %d rank", what, i);
        for (int d = 0; d < fc_tensor_rank(g); d++) {
            cr_expect_str_eq(fc_tensor_axis(g, d), fc_tensor_axis(in[i], d), "%s: input %d axis %d", what, i, d);
            cr_expect_eq(fc_tensor_dim(g, d), fc_tensor_dim(in[i], d), "%s: input %d axis %d size", what, i, d);
        }
        fc_zero_grad(ctx, in[i]);
    }
    fc_scope_end(ctx, sc);
    fc_status st = fc_gradcheck(ctx, f, user, in, n, o);
    cr_expect_eq(st, FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}

/* A leaf that is a non-contiguous view: `names` (the view's order) over a
 * normal sample stored in the reverse axis order. */
static fc_tensor *strided_var(fc_dtype dt, const fc_dim *dims, int rank, uint64_t seed)
{
    fc_dim rev[8];
    const char *order[8];
    for (int i = 0; i < rank; i++) {
        rev[i] = dims[rank - 1 - i];
        order[i] = dims[i].name;
    }
    fc_tensor *base = fc_rand_normal(ctx, dt, rev, rank, seed, 0, 1);
    fc_tensor *v = fc_permute(ctx, base, order, rank);
    cr_assert(v && !fc_tensor_is_contiguous(v), "%s", fc_ctx_error(ctx));
    return fct_variable(ctx, v);
}

static fc_tensor *ids_tensor(fc_ctx *c, fc_dtype dt, const fc_dim *dims, int rank, const int64_t *v)
{
    fc_tensor *t = fc_empty(c, dt, dims, rank);
    cr_assert(t, "%s", fc_ctx_error(c));
    int64_t n = fc_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == FC_I32) ((int32_t *)fc_tensor_data(t))[i] = (int32_t)v[i];
        else ((int64_t *)fc_tensor_data(t))[i] = v[i];
    }
    return t;
}

/* ---- structure ops (f64) ------------------------------------------------------ */

static fc_tensor *join_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *a = in[0], *b = in[1], *d = in[2]; /* a [i=2, j=3], b [j=4, i=2] strided, d [i=2, j=1] */
    /* The same variable twice: both stretches add up. */
    fc_tensor *l = fct_weighted_sum(c, fc_concat(c, (fc_tensor *[]){a, b, d, a}, 4, "j"), 1, 0.5, 1.5);
    fc_tensor *bn = fc_narrow(c, b, "j", 1, 3);
    l = add(c, l, fct_weighted_sum(c, fc_stack(c, (fc_tensor *[]){a, bn, a}, 3, "s", 1), 2, 0.5, 1.5));
    fc_tensor *parts[3];
    cr_assert_eq(fc_split(c, b, "j", (const int64_t[]){1, 2, 1}, 3, parts), FC_OK, "%s", fc_ctx_error(c));
    l = add(c, l, fct_weighted_sum(c, fc_mul(c, parts[0], parts[0]), 3, 0.5, 1.5));
    l = add(c, l, fct_weighted_sum(c, fc_exp(c, parts[2]), 4, 0.5, 1.5));
    /* parts[1] unused: its stretch of b gets no gradient from the split.
     * (The parts belong to fc_gradcheck's scope.) */
    return l;
}

Test(autograd_shape, concat_stack_split)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *in[3] = {
        fct_variable(ctx, fc_rand_normal(ctx, FC_F64, FC_SHAPE({"i", 2}, {"j", 3}), 1, 0, 1)),
        strided_var(FC_F64, FC_SHAPE({"j", 4}, {"i", 2}), 2),
        fct_variable(ctx, fc_rand_normal(ctx, FC_F64, FC_SHAPE({"i", 2}, {"j", 1}), 3, 0, 1)),
    };
    check(join_loss, NULL, in, 3, NULL, "concat/stack/split");
    fc_scope_end(ctx, sc);
}

static fc_tensor *move_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *x = in[0]; /* [i=3, j=4], strided */
    fc_tensor *l = fct_weighted_sum(c, fc_pad(c, x, "j", 1, 2, 0.5), 5, 0.5, 1.5);
    l = add(c, l, fct_weighted_sum(c, fc_repeat(c, x, "i", 3), 6, 0.5, 1.5));
    l = add(c, l, fct_weighted_sum(c, fc_flip(c, x, "j"), 7, 0.5, 1.5));
    l = add(c, l, fct_weighted_sum(c, fc_flip(c, fc_repeat(c, fc_pad(c, fc_sqr(c, x), "i", 2, 0, 1.0), "j", 2), "i"), 8, 0.5, 1.5));
    return l;
}

Test(autograd_shape, pad_repeat_flip)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = strided_var(FC_F64, FC_SHAPE({"i", 3}, {"j", 4}), 10);
    check(move_loss, NULL, &x, 1, NULL, "pad/repeat/flip");
    fc_scope_end(ctx, sc);
}

/* ---- index ops (f64, repeated indices) ------------------------------------------- */

static fc_tensor *rows_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    fc_tensor *const *ix = u; /* ids [b=2, s=3] i64, one id (rank 0) i32, idx [m=6] i32 */
    fc_tensor *table = in[0], *x = in[1];
    fc_tensor *l = fct_weighted_sum(c, fc_get_rows(c, table, ix[0]), 11, 0.5, 1.5);
    l = add(c, l, fct_weighted_sum(c, fc_get_rows(c, table, ix[1]), 12, 0.5, 1.5));
    l = add(c, l, fct_weighted_sum(c, fc_index_select(c, x, "n", ix[2]), 13, 0.5, 1.5));
    return l;
}

Test(autograd_shape, get_rows_and_index_select_with_repeated_indices)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *ix[3] = {
        ids_tensor(ctx, FC_I64, FC_SHAPE({"b", 2}, {"s", 3}), (const int64_t[]){4, 0, 4, 1, 4, 0}),
        ids_tensor(ctx, FC_I32, FC_SCALAR, (const int64_t[]){4}),
        ids_tensor(ctx, FC_I32, FC_SHAPE({"m", 6}), (const int64_t[]){4, 0, 4, 2, 4, 1}),
    };
    /* The rows axis comes first in the (strided) table. */
    fc_tensor *in[2] = {strided_var(FC_F64, FC_SHAPE({"v", 5}, {"d", 3}), 20),
                        strided_var(FC_F64, FC_SHAPE({"a", 3}, {"n", 5}, {"c", 2}), 21)};
    check(rows_loss, ix, in, 2, NULL, "get_rows/index_select");
    fc_scope_end(ctx, sc);
}

static fc_tensor *pick_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    fc_tensor *const *ix = u;
    fc_tensor *x = in[0], *t = in[1], *src = in[2];
    fc_tensor *l = fct_weighted_sum(c, fc_gather(c, x, "j", ix[0]), 21, 0.5, 1.5);
    l = add(c, l, fct_weighted_sum(c, fc_scatter_add(c, t, "j", ix[1], src), 22, 0.5, 1.5));
    fc_tensor *v = NULL, *id = NULL;
    cr_assert_eq(fc_topk(c, x, "j", 3, 1, &v, &id), FC_OK, "%s", fc_ctx_error(c));
    l = add(c, l, fct_weighted_sum(c, v, 23, 0.5, 1.5));
    /* Values only: the record computes the indices it needs itself. */
    fc_tensor *v2 = NULL;
    cr_assert_eq(fc_topk(c, x, "i", 2, 0, &v2, NULL), FC_OK, "%s", fc_ctx_error(c));
    l = add(c, l, fct_weighted_sum(c, v2, 24, 0.5, 1.5));
    return l;
}

Test(autograd_shape, gather_scatter_add_topk)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* gather idx in another axis order than x, with repeats; scatter_add
     * idx smaller than src along j (src's last column is never read). */
    fc_tensor *ix[2] = {
        ids_tensor(ctx, FC_I64, FC_SHAPE({"j", 5}, {"i", 3}), (const int64_t[]){0, 3, 3, 3, 3, 1, 1, 0, 2, 2, 2, 2, 0, 1, 3}),
        ids_tensor(ctx, FC_I32, FC_SHAPE({"i", 3}, {"j", 5}), (const int64_t[]){1, 1, 0, 3, 1, 2, 2, 2, 0, 0, 3, 0, 1, 3, 3}),
    };
    fc_tensor *in[3] = {strided_var(FC_F64, FC_SHAPE({"i", 3}, {"j", 4}), 30),
                        fct_variable(ctx, fc_rand_normal(ctx, FC_F64, FC_SHAPE({"i", 3}, {"j", 4}), 31, 0, 1)),
                        strided_var(FC_F64, FC_SHAPE({"i", 3}, {"j", 6}), 32)};
    check(pick_loss, ix, in, 3, NULL, "gather/scatter_add/topk");
    /* The unread column of src gets an exact zero. */
    fc_tensor *l = pick_loss(ctx, ix, in, 3);
    cr_assert_eq(fc_backward(ctx, l), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tensor *gs = fc_grad(ctx, in[2]);
    cr_assert(gs);
    for (int64_t i = 0; i < 3; i++) cr_expect_eq(fc_tensor_get(gs, (const int64_t[]){i, 5}), 0.0);
    cr_expect_str_eq(fc_tensor_axis(gs, 1), "j");
    fc_scope_end(ctx, sc);
}

/* ---- losses (f32) ----------------------------------------------------------------- */

typedef struct ce_case { fc_tensor *targets; const char *axis; fc_ce_options o; } ce_case;

static fc_tensor *ce_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    const ce_case *k = u;
    return fct_weighted_sum(c, fc_cross_entropy(c, in[0], k->targets, k->axis, &k->o), 40, 0.5, 1.5);
}

Test(autograd_shape, cross_entropy_every_option)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* Class axis in the middle, targets in another order than the logits;
     * a strided f32 variable. */
    fc_tensor *x = strided_var(FC_F32, FC_SHAPE({"n", 3}, {"c", 5}, {"s", 2}), 41);
    /* ig = 0: the default ignore index -100; ig = 1: class 2 (ignored
     * targets that are real classes). */
    fc_tensor *t[2] = {ids_tensor(ctx, FC_I64, FC_SHAPE({"s", 2}, {"n", 3}), (const int64_t[]){0, 2, 4, 2, -100, 1}),
                       ids_tensor(ctx, FC_I64, FC_SHAPE({"s", 2}, {"n", 3}), (const int64_t[]){0, 2, 4, 2, 3, 1})};
    for (int red = 0; red < 3; red++)
        for (int ls = 0; ls < 2; ls++)
            for (int ig = 0; ig < 2; ig++) {
                ce_case k = {t[ig], "c", {.reduction = (fc_reduction)red, .label_smoothing = ls ? 0.15f : 0.0f,
                                          .ignore_index = 2, .set_ignore_index = ig}};
                char what[64];
                snprintf(what, sizeof what, "cross_entropy red %d smoothing %d ignore %d", red, ls, ig);
                check(ce_loss, &k, &x, 1, NULL, what);
            }
    /* Class axis first, a rank-0 target (one row). */
    fc_tensor *x1 = fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 42, 0, 2));
    ce_case k1 = {ids_tensor(ctx, FC_I32, FC_SCALAR, (const int64_t[]){3}), "c", {.label_smoothing = 0.3f}};
    check(ce_loss, &k1, &x1, 1, NULL, "cross_entropy one row");
    /* Positional names, classes last. */
    fc_tensor *xp = fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({NULL, 4}, {NULL, 3}), 43, 0, 2));
    ce_case kp = {ids_tensor(ctx, FC_I64, FC_SHAPE({NULL, 4}), (const int64_t[]){2, 0, 1, 1}), "_1",
                  {.reduction = FC_REDUCE_NONE, .label_smoothing = 0.1f}};
    check(ce_loss, &kp, &xp, 1, NULL, "cross_entropy positional");
    fc_scope_end(ctx, sc);
}

Test(autograd_shape, cross_entropy_all_ignored_gives_zero_gradient)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"n", 3}, {"c", 4}), 44, 0, 1));
    fc_tensor *t = ids_tensor(ctx, FC_I64, FC_SHAPE({"n", 3}), (const int64_t[]){-100, -100, -100});
    fc_tensor *l = fc_cross_entropy(ctx, x, t, "c", &(fc_ce_options){.label_smoothing = 0.1f});
    cr_assert(l && isnan(fc_tensor_item(l)));
    cr_assert_eq(fc_backward(ctx, l), FC_OK, "%s", fc_ctx_error(ctx));
    double *v = fct_values(fc_grad(ctx, x));
    for (int i = 0; i < 12; i++) cr_expect_eq(v[i], 0.0, "[%d] = %g", i, v[i]);
    free(v);
    fc_scope_end(ctx, sc);
}

/* f16 and bf16 logits get f32 gradients, the same bits as f32 logits
 * holding the same values (the forward computes in f32 either way). */
Test(autograd_shape, cross_entropy_half_logits)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *t = ids_tensor(ctx, FC_I32, FC_SHAPE({"n", 4}), (const int64_t[]){1, 0, 7, 3});
    fc_dtype dts[2] = {FC_F16, FC_BF16};
    for (int k = 0; k < 2; k++) {
        fc_tensor *h = fct_variable(ctx, fc_rand_normal(ctx, dts[k], FC_SHAPE({"c", 8}, {"n", 4}), 45, 0, 2));
        fc_tensor *f = fct_variable(ctx, fc_cast(ctx, fc_detach(ctx, h), FC_F32));
        fc_ce_options o = {.label_smoothing = 0.1f, .ignore_index = 7, .set_ignore_index = 1};
        cr_assert_eq(fc_backward(ctx, fct_weighted_sum(ctx, fc_cross_entropy(ctx, h, t, "c", &o), 46, 0.5, 1.5)), FC_OK, "%s",
                     fc_ctx_error(ctx));
        cr_assert_eq(fc_backward(ctx, fct_weighted_sum(ctx, fc_cross_entropy(ctx, f, t, "c", &o), 46, 0.5, 1.5)), FC_OK, "%s",
                     fc_ctx_error(ctx));
        fc_tensor *gh = fc_grad(ctx, h), *gf = fc_grad(ctx, f);
        cr_assert(gh && gf);
        cr_expect_eq(fc_tensor_dtype(gh), FC_F32);
        cr_expect_str_eq(fc_tensor_axis(gh, 0), "c");
        fct_expect_bits(ctx, gh, ctx, gf, dts[k] == FC_F16 ? "f16 logits" : "bf16 logits");
    }
    fc_scope_end(ctx, sc);
}

static fc_tensor *mse_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    return fct_weighted_sum(c, fc_mse(c, in[0], in[1], (fc_reduction)(intptr_t)u), 50, 0.5, 1.5);
}

Test(autograd_shape, mse_broadcast_by_name_and_from_the_right)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* By name: b [j] against a [i, j] (strided), and b2 [k, i] adding an axis. */
    fc_tensor *named[2] = {strided_var(FC_F32, FC_SHAPE({"i", 3}, {"j", 4}), 51),
                           fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"j", 4}), 52, 0, 1))};
    fc_tensor *named2[2] = {named[0], fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"k", 2}, {"i", 3}), 53, 0, 1))};
    /* Positional: [4] against [3, 4] aligns from the right; [3, 1] broadcasts. */
    fc_tensor *pos[2] = {fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({NULL, 3}, {NULL, 1}), 54, 0, 1)),
                         fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({NULL, 4}), 55, 0, 1))};
    for (int red = 0; red < 3; red++) {
        void *u = (void *)(intptr_t)red;
        check(mse_loss, u, named, 2, NULL, "mse by name");
        check(mse_loss, u, named2, 2, NULL, "mse new axis");
        check(mse_loss, u, pos, 2, NULL, "mse positional");
    }
    fc_scope_end(ctx, sc);
}

/* ---- convolutions (f32) ------------------------------------------------------------ */

typedef struct conv_case { int transpose; fc_conv1d_options o; fc_conv_transpose1d_options t; } conv_case;

static fc_tensor *conv_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    const conv_case *k = u;
    fc_tensor *b = n > 2 ? in[2] : NULL;
    fc_tensor *y = k->transpose ? fc_conv_transpose1d(c, in[0], in[1], b, &k->t) : fc_conv1d(c, in[0], in[1], b, &k->o);
    return fct_weighted_sum(c, y, 60, 0.5, 1.5);
}

/* The loss is linear in each operand, so a large step is exact up to
 * rounding. */
static const fc_gradcheck_opts conv_tol = {.eps = 1e-2, .atol = 2e-3, .rtol = 2e-3};

Test(autograd_shape, conv1d)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* x in [t, b, c] order (strided), weight in [k, c, c_out] order. */
    fc_tensor *in[3] = {strided_var(FC_F32, FC_SHAPE({"t", 9}, {"b", 2}, {"c", 4}), 61),
                        strided_var(FC_F32, FC_SHAPE({"k", 3}, {"c", 2}, {"c_out", 6}), 62),
                        fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 6}), 63, 0, 1))};
    conv_case k = {0, {.stride = 2, .padding = {1, 2}, .dilation = 2, .groups = 2}, {0}};
    check(conv_loss, &k, in, 3, &conv_tol, "conv1d grouped");
    /* The last two inputs feed no window (stride 4); no bias, no batch
     * axis, custom axis names. */
    fc_tensor *in2[2] = {fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"ch", 3}, {"time", 14}), 64, 0, 1)),
                         fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"o", 2}, {"ch", 3}, {"tap", 4}), 65, 0, 1))};
    conv_case k2 = {0, {.channel_axis = "ch", .time_axis = "time", .out_axis = "o", .kernel_axis = "tap", .stride = 4},
                    {0}};
    check(conv_loss, &k2, in2, 2, &conv_tol, "conv1d tail");
    /* Depthwise with two batch axes. */
    fc_tensor *in3[3] = {fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", 2}, {"c", 3}, {"e", 2}, {"t", 7}), 66, 0, 1)),
                         fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 3}, {"c", 1}, {"k", 3}), 67, 0, 1)),
                         fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 3}), 68, 0, 1))};
    conv_case k3 = {0, {.padding = {2, 0}, .groups = 3}, {0}};
    check(conv_loss, &k3, in3, 3, &conv_tol, "conv1d depthwise causal");
    fc_scope_end(ctx, sc);
}

Test(autograd_shape, conv_transpose1d)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *in[3] = {strided_var(FC_F32, FC_SHAPE({"c", 4}, {"b", 2}, {"t", 5}), 71),
                        strided_var(FC_F32, FC_SHAPE({"c", 4}, {"k", 3}, {"c_out", 3}), 72),
                        fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c_out", 6}), 73, 0, 1))};
    conv_case k = {1, {0}, {.stride = 2, .padding = {1, 2}, .output_padding = 1, .dilation = 2, .groups = 2}};
    check(conv_loss, &k, in, 3, &conv_tol, "conv_transpose1d grouped");
    /* output_padding >= stride (dilation 3): the plain convolution of the
     * gradient is longer than x and is cut. */
    fc_tensor *in2[2] = {fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", 1}, {"c", 2}, {"t", 6}), 74, 0, 1)),
                         fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 2}, {"c_out", 3}, {"k", 2}), 75, 0, 1))};
    conv_case k2 = {1, {0}, {.stride = 1, .padding = {1, 1}, .output_padding = 2, .dilation = 3}};
    check(conv_loss, &k2, in2, 2, &conv_tol, "conv_transpose1d output_padding");
    fc_scope_end(ctx, sc);
}

/* ---- PyTorch goldens --------------------------------------------------------------- */

static fct_goldens G;

static fc_tensor *gload(const char *key, fc_dtype dt, const char *const *names)
{
    return fct_golden_tensor(ctx, fct_golden_get(&G, key), dt, names);
}

/* sum(y * <op>.wt), the weight laid out with `names` (torch's order). */
static fc_tensor *gloss(const char *op, fc_tensor *y, const char *const *names)
{
    cr_assert(y, "%s: %s", op, fc_ctx_error(ctx));
    char key[64];
    snprintf(key, sizeof key, "%s.wt", op);
    fc_tensor *w = gload(key, fc_tensor_dtype(y), names);
    return fc_sum(ctx, fc_mul(ctx, y, w), FC_NO_AXES);
}

static void run_backward(const char *op, fc_tensor *l)
{
    cr_assert(l, "%s: %s", op, fc_ctx_error(ctx));
    cr_assert_eq(fc_backward(ctx, l), FC_OK, "%s: %s", op, fc_ctx_error(ctx));
}

/* x's gradient against <op>.g_<name>: x's axes and order, and dtype. */
static void expect_grad(const char *op, const char *name, fc_tensor *x, double tol)
{
    char key[64];
    snprintf(key, sizeof key, "%s.g_%s", op, name);
    const fct_golden *e = fct_golden_get(&G, key);
    fc_tensor *g = fc_grad(ctx, x);
    cr_assert(g, "%s: no gradient", key);
    cr_expect_eq(fc_tensor_dtype(g), fc_tensor_dtype(x) == FC_F64 ? FC_F64 : FC_F32, "%s: dtype", key);
    cr_assert_eq(fc_tensor_rank(g), fc_tensor_rank(x), "%s: rank", key);
    for (int d = 0; d < fc_tensor_rank(g); d++)
        cr_expect_str_eq(fc_tensor_axis(g, d), fc_tensor_axis(x, d), "%s: axis order", key);
    for (int d = 0; d < e->rank; d++) cr_assert_eq(fc_tensor_dim(g, d), e->dim[d], "%s: size of axis %d", key, d);
    double *v = fct_values(g);
    for (int64_t i = 0; i < e->n; i++)
        cr_expect(fabs(v[i] - e->v[i]) <= tol * (1 + fabs(e->v[i])), "%s[%lld] = %.17g, want %.17g", key, (long long)i,
                  v[i], e->v[i]);
    free(v);
}

static fc_tensor *gvar(const char *key, fc_dtype dt, const char *const *names) { return fct_variable(ctx, gload(key, dt, names)); }

Test(autograd_shape, structure_and_index_ops_match_pytorch)
{
    G = fct_golden_load("autograd_shape.txt");
    fc_scope sc = fc_scope_begin(ctx);
    const double tol = 1e-13;
    const char *const *ij = NAMES("i", "j");
    {
        fc_tensor *a = gvar("concat.a", FC_F64, ij), *b = gvar("concat.b", FC_F64, ij);
        run_backward("concat", gloss("concat", fc_concat(ctx, (fc_tensor *[]){a, b}, 2, "j"), ij));
        expect_grad("concat", "a", a, tol);
        expect_grad("concat", "b", b, tol);
    }
    {
        fc_tensor *a = gvar("stack.a", FC_F64, ij), *b = gvar("stack.b", FC_F64, ij);
        run_backward("stack", gloss("stack", fc_stack(ctx, (fc_tensor *[]){a, b}, 2, "s", 1), NAMES("i", "s", "j")));
        expect_grad("stack", "a", a, tol);
        expect_grad("stack", "b", b, tol);
    }
    {
        fc_tensor *x = gvar("pad.x", FC_F64, ij);
        run_backward("pad", gloss("pad", fc_pad(ctx, x, "j", 1, 2, 0.5), ij));
        expect_grad("pad", "x", x, tol);
        x = gvar("repeat.x", FC_F64, ij);
        run_backward("repeat", gloss("repeat", fc_repeat(ctx, x, "j", 3), ij));
        expect_grad("repeat", "x", x, tol);
        x = gvar("flip.x", FC_F64, ij);
        run_backward("flip", gloss("flip", fc_flip(ctx, x, "i"), ij));
        expect_grad("flip", "x", x, tol);
    }
    {
        fc_tensor *table = gvar("get_rows.table", FC_F64, NAMES("v", "d"));
        fc_tensor *ids = gload("get_rows.ids", FC_I64, NAMES("b", "s"));
        run_backward("get_rows", gloss("get_rows", fc_get_rows(ctx, table, ids), NAMES("b", "s", "d")));
        expect_grad("get_rows", "table", table, tol);
        const char *const *anc = NAMES("a", "n", "c");
        fc_tensor *x = gvar("index_select.x", FC_F64, anc);
        fc_tensor *idx = gload("index_select.idx", FC_I32, NAMES("m"));
        run_backward("index_select", gloss("index_select", fc_index_select(ctx, x, "n", idx), anc));
        expect_grad("index_select", "x", x, tol);
    }
    {
        fc_tensor *x = gvar("gather.x", FC_F64, ij);
        run_backward("gather", gloss("gather", fc_gather(ctx, x, "j", gload("gather.idx", FC_I64, ij)), ij));
        expect_grad("gather", "x", x, tol);
        fc_tensor *t = gvar("scatter_add.t", FC_F64, ij), *src = gvar("scatter_add.src", FC_F64, ij);
        fc_tensor *y = fc_scatter_add(ctx, t, "j", gload("scatter_add.idx", FC_I64, ij), src);
        run_backward("scatter_add", gloss("scatter_add", y, ij));
        expect_grad("scatter_add", "t", t, tol);
        expect_grad("scatter_add", "src", src, tol);
        x = gvar("topk.x", FC_F64, ij);
        fc_tensor *v = NULL;
        cr_assert_eq(fc_topk(ctx, x, "j", 3, 1, &v, NULL), FC_OK);
        run_backward("topk", gloss("topk", v, ij));
        expect_grad("topk", "x", x, tol);
        x = gvar("topk_min.x", FC_F64, ij);
        cr_assert_eq(fc_topk(ctx, x, "i", 2, 0, &v, NULL), FC_OK);
        run_backward("topk_min", gloss("topk_min", v, ij));
        expect_grad("topk_min", "x", x, tol);
    }
    fc_scope_end(ctx, sc);
    fct_golden_free(&G);
}

Test(autograd_shape, losses_and_convolutions_match_pytorch)
{
    G = fct_golden_load("autograd_shape.txt");
    fc_scope sc = fc_scope_begin(ctx);
    /* f32 forward and gradient against float64 PyTorch. */
    const double tol = 2e-6;
    static const char *const reds[3] = {"mean", "sum", "none"};
    fc_tensor *t = gload("ce.t", FC_I64, NAMES("n", "s"));
    for (int red = 0; red < 3; red++)
        for (int ls = 0; ls < 2; ls++) {
            char op[32];
            snprintf(op, sizeof op, "ce_%s_%d", reds[red], ls * 2);
            fc_tensor *x = gvar("ce.x", FC_F32, NAMES("n", "c", "s"));
            fc_ce_options o = {.reduction = (fc_reduction)red, .label_smoothing = ls ? 0.2f : 0.0f, .ignore_index = 2,
                               .set_ignore_index = 1};
            fc_tensor *y = fc_cross_entropy(ctx, x, t, "c", &o);
            run_backward(op, gloss(op, y, red == 2 ? NAMES("n", "s") : NULL));
            /* label_smoothing is an f32 option: 0.2f is not 0.2. */
            expect_grad(op, "x", x, ls ? 1e-6 : tol);
        }
    {
        fc_tensor *x = gvar("ce_last.x", FC_F32, NAMES("n", "c"));
        fc_tensor *y = fc_cross_entropy(ctx, x, gload("ce_last.t", FC_I64, NAMES("n")), "c",
                                        &(fc_ce_options){.label_smoothing = 0.1f});
        run_backward("ce_last", gloss("ce_last", y, NULL));
        expect_grad("ce_last", "x", x, 1e-6);
    }
    for (int red = 0; red < 3; red++) {
        char op[32];
        snprintf(op, sizeof op, "mse_%s", reds[red]);
        char ka[40], kb[40];
        snprintf(ka, sizeof ka, "%s.a", op);
        snprintf(kb, sizeof kb, "%s.b", op);
        fc_tensor *a = gvar(ka, FC_F32, NAMES("i", "j")), *b = gvar(kb, FC_F32, NAMES("j"));
        run_backward(op, gloss(op, fc_mse(ctx, a, b, (fc_reduction)red), red == 2 ? NAMES("i", "j") : NULL));
        expect_grad(op, "a", a, tol);
        expect_grad(op, "b", b, tol);
    }
    const char *const *bct = NAMES("b", "c", "t");
    {
        fc_tensor *x = gvar("conv1d.x", FC_F32, bct), *w = gvar("conv1d.wt_", FC_F32, NAMES("c_out", "c", "k"));
        fc_tensor *b = gvar("conv1d.b", FC_F32, NAMES("c_out"));
        fc_conv1d_options o = {.stride = 2, .padding = {1, 2}, .dilation = 2, .groups = 2};
        run_backward("conv1d", gloss("conv1d", fc_conv1d(ctx, x, w, b, &o), bct));
        expect_grad("conv1d", "x", x, tol);
        expect_grad("conv1d", "wt_", w, tol);
        expect_grad("conv1d", "b", b, tol);
        x = gvar("conv1d_tail.x", FC_F32, bct);
        w = gvar("conv1d_tail.wt_", FC_F32, NAMES("c_out", "c", "k"));
        run_backward("conv1d_tail", gloss("conv1d_tail", fc_conv1d(ctx, x, w, NULL, &(fc_conv1d_options){.stride = 4}), bct));
        expect_grad("conv1d_tail", "x", x, tol);
        expect_grad("conv1d_tail", "wt_", w, tol);
    }
    {
        fc_tensor *x = gvar("tconv.x", FC_F32, bct), *w = gvar("tconv.wt_", FC_F32, NAMES("c", "c_out", "k"));
        fc_tensor *b = gvar("tconv.b", FC_F32, NAMES("c_out"));
        fc_conv_transpose1d_options o = {.stride = 2, .padding = {1, 1}, .output_padding = 1, .dilation = 2, .groups = 2};
        run_backward("tconv", gloss("tconv", fc_conv_transpose1d(ctx, x, w, b, &o), bct));
        expect_grad("tconv", "x", x, tol);
        expect_grad("tconv", "wt_", w, tol);
        expect_grad("tconv", "b", b, tol);
        x = gvar("tconv_op.x", FC_F32, bct);
        w = gvar("tconv_op.wt_", FC_F32, NAMES("c", "c_out", "k"));
        fc_conv_transpose1d_options o2 = {.stride = 1, .padding = {1, 1}, .output_padding = 2, .dilation = 3};
        run_backward("tconv_op", gloss("tconv_op", fc_conv_transpose1d(ctx, x, w, NULL, &o2), bct));
        expect_grad("tconv_op", "x", x, tol);
        expect_grad("tconv_op", "wt_", w, tol);
    }
    fc_scope_end(ctx, sc);
    fct_golden_free(&G);
}

/* ---- threads ---------------------------------------------------------------------------- */

/* Sizes past the ops' parallel thresholds, with many repeated indices. */
static void thread_grads(fc_ctx *c, fc_tensor **out)
{
    fc_tensor *table = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"v", 50}, {"d", 512}), 80, 0, 1));
    int64_t idv[300];
    for (int i = 0; i < 300; i++) idv[i] = (i * 7919) % 50;
    fc_tensor *ids = ids_tensor(c, FC_I64, FC_SHAPE({"n", 300}), idv);
    fc_tensor *x = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"a", 64}, {"b", 128}), 81, 0, 1));
    fc_tensor *src = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"a", 64}, {"b", 1024}), 82, 0, 1));
    fc_tensor *idx = fc_empty(c, FC_I32, FC_SHAPE({"a", 64}, {"b", 1024}));
    int32_t *ip = fc_tensor_data(idx);
    for (int i = 0; i < 64 * 1024; i++) ip[i] = (int32_t)((i * 131) % 128);
    fc_tensor *logits = fct_variable(c, fc_rand_normal(c, FC_BF16, FC_SHAPE({"k", 301}, {"r", 256}), 83, 0, 3));
    int64_t tv[256];
    for (int i = 0; i < 256; i++) tv[i] = i % 9 == 0 ? -100 : (i * 37) % 301;
    fc_tensor *tg = ids_tensor(c, FC_I64, FC_SHAPE({"r", 256}), tv);

    fc_tensor *l = fct_weighted_sum(c, fc_get_rows(c, table, ids), 84, 0.5, 1.5);
    l = fc_add(c, l, fct_weighted_sum(c, fc_index_select(c, table, "d", idx ? fc_select(c, idx, "a", 0) : NULL), 85, 0.5, 1.5));
    l = fc_add(c, l, fct_weighted_sum(c, fc_gather(c, x, "b", idx), 86, 0.5, 1.5));
    l = fc_add(c, l, fct_weighted_sum(c, fc_scatter_add(c, x, "b", idx, src), 87, 0.5, 1.5));
    fc_tensor *ce = fc_cross_entropy(c, logits, tg, "k", &(fc_ce_options){.label_smoothing = 0.1f});
    l = fc_add(c, l, fc_mul_scalar(c, ce, 3.0));
    cr_assert_eq(fc_backward(c, l), FC_OK, "%s", fc_ctx_error(c));
    out[0] = fc_grad(c, table);
    out[1] = fc_grad(c, x);
    out[2] = fc_grad(c, src);
    out[3] = fc_grad(c, logits);
}

Test(autograd_shape, gradients_do_not_depend_on_the_thread_count)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_tensor *g[2][4];
    for (int k = 0; k < 2; k++) thread_grads(p.c[k], g[k]);
    static const char *const what[4] = {"get_rows + index_select", "gather + scatter_add (t)", "scatter_add (src)",
                                        "cross_entropy"};
    for (int i = 0; i < 4; i++) fct_expect_bits(p.c[0], g[0][i], p.c[1], g[1][i], what[i]);
    fct_ctx_pair_end(&p);
}

/* ---- errors -------------------------------------------------------------------------------- */

Test(autograd_shape, errors)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *table = fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"v", 4}, {"d", 3}), 90, 0, 1));
    /* Indices changed in place after the forward: refused before anything runs. */
    fc_tensor *ids = ids_tensor(ctx, FC_I32, FC_SHAPE({"n", 3}), (const int64_t[]){3, 1, 3});
    fc_tensor *l = fc_sum(ctx, fc_get_rows(ctx, table, ids), FC_NO_AXES);
    cr_assert_eq(fc_fill(ctx, ids, 0.0), FC_OK);
    cr_expect_eq(fc_backward(ctx, l), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "fc_get_rows") && strstr(fc_ctx_error(ctx), "modified in place"), "%s",
              fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* topk's indices handed out and changed. */
    fc_tensor *v = NULL, *ix = NULL;
    cr_assert_eq(fc_topk(ctx, table, "d", 2, 1, &v, &ix), FC_OK);
    l = fc_sum(ctx, v, FC_NO_AXES);
    cr_assert_eq(fc_fill(ctx, ix, 0.0), FC_OK);
    cr_expect_eq(fc_backward(ctx, l), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "fc_topk") && strstr(fc_ctx_error(ctx), "modified in place"), "%s",
              fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* fc_set_slice is in place: it records nothing, and writing into an
     * operand a record kept is caught by the version check. */
    fc_tensor *x = fct_variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"i", 2}, {"j", 3}), 91, 0, 1));
    fc_tensor *dst = fc_zeros(ctx, FC_F32, FC_SHAPE({"i", 2}, {"j", 5}));
    cr_assert_eq(fc_set_slice(ctx, dst, "j", 1, x), FC_OK);
    cr_expect(!fc_tensor_requires_grad(dst));
    fc_tensor *pd = fc_pad(ctx, x, "j", 1, 1, 0.0);
    l = fc_sum(ctx, pd, FC_NO_AXES);
    cr_assert_eq(fc_set_slice(ctx, x, "j", 0, fc_zeros(ctx, FC_F32, FC_SHAPE({"i", 2}, {"j", 1}))), FC_OK);
    cr_expect_eq(fc_backward(ctx, l), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "fc_pad") && strstr(fc_ctx_error(ctx), "modified in place"), "%s",
              fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* Failing forwards with variables record nothing and leak nothing. */
    fc_tensor *x64 = fct_variable(ctx, fc_zeros(ctx, FC_F64, FC_SHAPE({"i", 2}, {"j", 3})));
    cr_expect_null(fc_concat(ctx, (fc_tensor *[]){x, x64}, 2, "j"));
    fct_expect_error(ctx, FC_ERR_DTYPE, "fc_concat", "j");
    cr_expect_null(fc_gather(ctx, x, "j", ids_tensor(ctx, FC_I64, FC_SHAPE({"i", 2}, {"j", 1}), (const int64_t[]){0, 3})));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_gather", "j");
    cr_expect_null(fc_conv1d(ctx, fc_rename(ctx, x64, "i", "c"), fc_zeros(ctx, FC_F32, FC_SHAPE({"c_out", 1}, {"c", 2}, {"k", 1})),
                             NULL, &(fc_conv1d_options){.time_axis = "j"}));
    fct_expect_error(ctx, FC_ERR_DTYPE, "fc_conv1d", NULL);
    cr_expect_null(fc_cross_entropy(ctx, x, ids_tensor(ctx, FC_I64, FC_SHAPE({"i", 2}), (const int64_t[]){0, 7}), "j", NULL));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_cross_entropy", "j");
    fc_tensor *parts[2];
    cr_expect_eq(fc_split(ctx, x, "j", (const int64_t[]){1, 1}, 2, parts), FC_ERR_SHAPE);
    cr_expect(parts[0] == NULL && parts[1] == NULL);
    fct_expect_error(ctx, FC_ERR_SHAPE, "fc_split", "j");
    fc_scope_end(ctx, sc);
}
