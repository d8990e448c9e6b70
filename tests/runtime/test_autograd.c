/* SPDX-License-Identifier: MIT */
/* The autograd core: gradients of a network built from every elementwise,
 * reduction, view and contraction op against PyTorch 1.13
 * (tests/goldens/autograd_core.txt from gen_autograd_goldens.py); central
 * finite differences (fc_gradcheck) per op family in f64, incl. broadcasting
 * by name, positional right-alignment and non-contiguous inputs; the engine
 * (diamonds, shared subexpressions, a 50,000-node chain, bitwise identity on
 * 1 and 2 threads with concurrent branches); state errors (non-scalar without
 * seed, backward twice, a saved tensor modified in place, a bad seed leaving
 * the graph re-runnable); no-grad, detach, custom ops, checkpointing,
 * dropout. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

static fc_ctx *ctx;
#define NAMES(...) ((const char *const[]){__VA_ARGS__})

static void setup(void) { ctx = fct_suite_begin(2); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(autograd, .init = setup, .fini = teardown);

static void expect_close(const fc_tensor *t, const double *want, int64_t n, double tol, const char *what)
{
    cr_assert(t, "%s: NULL (%s)", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_numel(t), n, "%s: %lld elements, want %lld", what, (long long)fc_tensor_numel(t), (long long)n);
    double *v = fct_values(t);
    for (int64_t i = 0; i < n; i++)
        cr_expect(fabs(v[i] - want[i]) <= tol * (1 + fabs(want[i])), "%s[%lld] = %.9g, want %.9g", what, (long long)i,
                  v[i], want[i]);
    free(v);
}

/* ---- PyTorch goldens --------------------------------------------------------- */

static fc_tensor *golden_loss(fc_ctx *c, fc_tensor *x, fc_tensor *w1, fc_tensor *b1, fc_tensor *w2, fc_tensor *t)
{
    fc_tensor *a = fc_linear(c, x, w1, b1); /* [b, h] */
    fc_tensor *h = fc_mul(c, fc_gelu(c, a), fc_sigmoid(c, a));
    h = fc_sub(c, fc_add(c, h, fc_silu(c, a)), fc_mul_scalar(c, fc_softplus(c, a), 0.1));
    h = fc_sub(c, fc_add(c, h, fc_mul(c, fc_tanh(c, a), fc_cos(c, a))), fc_mul_scalar(c, fc_sin(c, a), 0.2));
    fc_tensor *z = fc_linear(c, h, w2, NULL); /* [b, o] */
    fc_tensor *zz = fc_sqr(c, z);
    fc_tensor *parts[17];
    parts[0] = fc_sum(c, fc_mul(c, fc_tanh(c, z), t), FC_NO_AXES);
    parts[1] = fc_mean(c, fc_exp(c, fc_neg(c, zz)), FC_NO_AXES);
    parts[2] = fc_sum(c, fc_var(c, z, FC_AXES("b"), 1), FC_NO_AXES);
    parts[3] = fc_sum(c, fc_logsumexp(c, z, FC_AXES("o")), FC_NO_AXES);
    parts[4] = fc_sum(c, fc_max(c, z, FC_AXES("o")), FC_NO_AXES);
    parts[5] = fc_norm(c, h, FC_NO_AXES);
    parts[6] = fc_sum(c, fc_div(c, z, fc_add_scalar(c, zz, 1.0)), FC_NO_AXES);
    parts[7] = fc_sum(c, fc_clamp(c, z, -0.5, 0.5), FC_NO_AXES);
    parts[8] = fc_mul_scalar(c, fc_sum(c, fc_cumsum(c, z, "o"), FC_NO_AXES), 0.1);
    parts[9] = fc_sum(c, fc_sqrt(c, fc_add_scalar(c, zz, 1.0)), FC_NO_AXES);
    parts[10] = fc_mean(c, fc_log(c, fc_add_scalar(c, zz, 1.0)), FC_NO_AXES);
    parts[11] = fc_mul_scalar(c, fc_sum(c, fc_abs(c, z), FC_NO_AXES), 0.05);
    parts[12] = fc_mul_scalar(c, fc_sum(c, fc_relu(c, z), FC_NO_AXES), 0.3);
    parts[13] = fc_sub(c, fc_sum(c, fc_maximum(c, z, t), FC_NO_AXES),
                       fc_sum(c, fc_minimum(c, z, fc_mul_scalar(c, t, 0.5)), FC_NO_AXES));
    parts[14] = fc_sum(c, fc_where(c, fc_compare_scalar(c, FC_GT, z, 0.0), z, fc_mul_scalar(c, z, 0.5)), FC_NO_AXES);
    parts[15] = fc_sum(c, fc_add(c, fc_rsqrt(c, fc_add_scalar(c, zz, 2.0)),
                                 fc_scalar_binary(c, FC_DIV, 1.0, fc_add_scalar(c, z, 3.0))), FC_NO_AXES);
    /* z.T.reshape(2, 6)[:, 1:4] ** 2 */
    fc_tensor *zt = fc_permute(c, z, FC_AXES("o", "b"));
    fc_tensor *r = fc_reshape(c, zt, FC_SHAPE({"p", 2}, {"q", 6}));
    parts[16] = fc_sum(c, fc_sqr(c, fc_narrow(c, r, "q", 1, 3)), FC_NO_AXES);
    fc_tensor *loss = parts[0];
    for (int i = 1; i < 17; i++) loss = fc_add(c, loss, parts[i]);
    return loss;
}

Test(autograd, matches_pytorch_on_the_core_ops)
{
    fct_goldens g = fct_golden_load("autograd_core.txt");
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "x"), FC_F32, NAMES("b", "in")));
    fc_tensor *w1 = fct_variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "w1"), FC_F32, NAMES("h", "in")));
    fc_tensor *b1 = fct_variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "b1"), FC_F32, NAMES("h")));
    fc_tensor *w2 = fct_variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "w2"), FC_F32, NAMES("o", "h")));
    fc_tensor *t = fct_golden_tensor(ctx, fct_golden_get(&g, "t"), FC_F32, NAMES("b", "o"));
    fc_tensor *loss = golden_loss(ctx, x, w1, b1, w2, t);
    cr_assert(loss, "%s", fc_ctx_error(ctx));
    expect_close(loss, fct_golden_get(&g, "loss")->v, 1, 1e-5, "loss");
    cr_assert_eq(fc_backward(ctx, loss), FC_OK, "%s", fc_ctx_error(ctx));
    const char *names[4] = {"grad_x", "grad_w1", "grad_b1", "grad_w2"};
    fc_tensor *vars[4] = {x, w1, b1, w2};
    for (int i = 0; i < 4; i++) {
        fc_tensor *gr = fc_grad(ctx, vars[i]);
        cr_assert(gr, "%s: no gradient", names[i]);
        cr_expect_eq(fc_tensor_dtype(gr), FC_F32);
        for (int d = 0; d < fc_tensor_rank(gr); d++)
            cr_expect_str_eq(fc_tensor_axis(gr, d), fc_tensor_axis(vars[i], d), "%s: axis order", names[i]);
        const fct_golden *e = fct_golden_get(&g, names[i]);
        expect_close(gr, e->v, e->n, 2e-5, names[i]);
    }
    fc_scope_end(ctx, sc);
    fct_golden_free(&g);
}

/* ---- finite differences per op family (f64) --------------------------------- */

typedef fc_tensor *(*unary_fn)(fc_ctx *, fc_tensor *);

static fc_tensor *unary_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    return fct_weighted_sum(c, ((unary_fn)(uintptr_t)u)(c, in[0]), 11, 0.5, 1.5);
}

static void check_grad(fc_loss_fn f, void *user, fc_tensor *const *in, int n, const char *what)
{
    fc_status st = fc_gradcheck(ctx, f, user, in, n, NULL);
    cr_expect_eq(st, FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}

Test(autograd, unary_ops_by_finite_differences)
{
    static const struct { const char *name; unary_fn f; double lo, hi; } ops[] = {
        {"neg", fc_neg, -2, 2}, {"abs", fc_abs, 0.2, 2}, {"sqr", fc_sqr, -2, 2}, {"sqrt", fc_sqrt, 0.5, 3},
        {"rsqrt", fc_rsqrt, 0.5, 3}, {"recip", fc_recip, 0.5, 3}, {"exp", fc_exp, -2, 2}, {"log", fc_log, 0.3, 3},
        {"sin", fc_sin, -3, 3}, {"cos", fc_cos, -3, 3}, {"tanh", fc_tanh, -2, 2}, {"sigmoid", fc_sigmoid, -3, 3},
        {"silu", fc_silu, -3, 3}, {"gelu", fc_gelu, -3, 3}, {"gelu_erf", fc_gelu_erf, -3, 3},
        {"relu", fc_relu, 0.2, 2}, {"softplus", fc_softplus, -3, 3},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        fc_scope sc = fc_scope_begin(ctx);
        /* Ops without an f64 arm (the transcendental ones are f32/f16/bf16
         * kernels) are checked in f32, with f32 tolerances. */
        fc_tensor *t = fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"r", 3}, {"c", 4}), 100 + k, ops[k].lo, ops[k].hi);
        if (!ops[k].f(ctx, t)) {
            fc_ctx_clear_error(ctx);
            t = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"r", 3}, {"c", 4}), 100 + k, ops[k].lo, ops[k].hi);
        }
        if (k % 2) t = fc_transpose(ctx, fc_contiguous(ctx, fc_permute(ctx, t, FC_AXES("c", "r"))), "c", "r");
        fc_tensor *x = fc_detach(ctx, t);
        fct_variable(ctx, x);
        fc_tensor *in[1] = {x};
        check_grad(unary_loss, (void *)(uintptr_t)ops[k].f, in, 1, ops[k].name);
        fc_scope_end(ctx, sc);
    }
}

typedef struct bin_case { fc_binary_op op; int scalar; double s; } bin_case;

static fc_tensor *binary_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    const bin_case *b = u;
    fc_tensor *y;
    if (b->scalar == 1) y = fc_binary_scalar(c, b->op, in[0], b->s);
    else if (b->scalar == 2) y = fc_scalar_binary(c, b->op, b->s, in[0]);
    else y = fc_binary(c, b->op, in[0], in[n - 1]);
    return fct_weighted_sum(c, y, 12, 0.5, 1.5);
}

Test(autograd, binary_ops_broadcast_by_name_and_from_the_right)
{
    for (int op = FC_ADD; op <= FC_MIN; op++) {
        fc_scope sc = fc_scope_begin(ctx);
        /* By name: a[b, i] op b[i, k] -> [b, i, k]; b's gradient sums over "b". */
        fc_tensor *a = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"b", 3}, {"i", 4}), 1, 0.5, 2));
        fc_tensor *b = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"i", 4}, {"k", 2}), 2, 0.5, 2));
        bin_case bc = {(fc_binary_op)op, 0, 0};
        fc_tensor *in[2] = {a, b};
        check_grad(binary_loss, &bc, in, 2, "binary by name");
        /* Size-1 axis of a named operand broadcasts (and sums back). */
        fc_tensor *c1 = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"b", 1}, {"i", 4}), 3, 0.5, 2));
        fc_tensor *in2[2] = {a, c1};
        check_grad(binary_loss, &bc, in2, 2, "binary size-1 axis");
        /* Positional operands align from the right: [3, 4] op [4]. */
        fc_tensor *p = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({NULL, 3}, {NULL, 4}), 4, 0.5, 2));
        fc_tensor *q = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({NULL, 4}), 5, 0.5, 2));
        fc_tensor *in3[2] = {p, q};
        check_grad(binary_loss, &bc, in3, 2, "binary positional");
        /* Scalar forms. */
        bin_case s1 = {(fc_binary_op)op, 1, 1.25}, s2 = {(fc_binary_op)op, 2, 1.25};
        check_grad(binary_loss, &s1, in, 1, "x op s");
        check_grad(binary_loss, &s2, in, 1, "s op x");
        fc_scope_end(ctx, sc);
    }
}

static fc_tensor *self_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    /* max(x, x) splits the gradient evenly: each side 1/2, total 1. */
    return fct_weighted_sum(c, fc_add(c, fc_maximum(c, in[0], in[0]), fc_mul(c, in[0], in[0])), 13, 0.5, 1.5);
}

Test(autograd, ties_and_repeated_operands)
{
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"i", 5}), 7, -1, 1));
    fc_tensor *in[1] = {x};
    check_grad(self_loss, NULL, in, 1, "max(x, x) + x*x");
    fc_release(x);
}

typedef struct red_case { int kind; const char *const *axes; int n; } red_case;

static fc_tensor *reduce_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    const red_case *r = u;
    fc_tensor *x = in[0], *y = NULL;
    switch (r->kind) {
    case 0: y = fc_sum(c, x, r->axes, r->n); break;
    case 1: y = fc_mean(c, x, r->axes, r->n); break;
    case 2: y = fc_max(c, x, r->axes, r->n); break;
    case 3: y = fc_min(c, x, r->axes, r->n); break;
    case 4: y = fc_var(c, x, r->axes, r->n, 1); break;
    case 5: y = fc_var(c, x, r->axes, r->n, 0); break;
    case 6: y = fc_norm(c, x, r->axes, r->n); break;
    case 7: y = fc_logsumexp(c, x, r->axes, r->n); break;
    default: y = fc_cumsum(c, x, r->axes[0]); break;
    }
    return fct_weighted_sum(c, y, 14, 0.5, 1.5);
}

Test(autograd, reductions_over_named_axes)
{
    static const char *const ax_b[] = {"b"}, *const ax_ik[] = {"i", "k"};
    for (int kind = 0; kind <= 8; kind++) {
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"b", 3}, {"i", 4}, {"k", 2}), 20 + kind, -2, 2));
        fc_tensor *xp = fc_detach(ctx, fc_permute(ctx, fc_clone(ctx, fc_permute(ctx, x, FC_AXES("k", "b", "i"))),
                                                  FC_AXES("b", "i", "k")));
        fct_variable(ctx, xp);
        red_case r1 = {kind, ax_b, 1}, r2 = {kind, ax_ik, 2}, r3 = {kind, NULL, 0};
        fc_tensor *in[1] = {x}, *inp[1] = {xp};
        check_grad(reduce_loss, &r1, in, 1, "reduce b");
        if (kind != 8) {
            check_grad(reduce_loss, &r2, in, 1, "reduce i,k");
            check_grad(reduce_loss, &r3, inp, 1, "reduce all (strided)");
        }
        fc_scope_end(ctx, sc);
    }
}

static fc_tensor *views_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *x = in[0]; /* [a=4, b=6] */
    fc_tensor *y = fc_narrow(c, x, "b", 1, 4);                          /* [a, b=4] */
    y = fc_split_axis(c, y, "b", FC_SHAPE({"b1", 2}, {"b2", 2}));       /* [a, b1, b2] */
    y = fc_transpose(c, y, "a", "b2");                                  /* [b2, b1, a] */
    y = fc_merge_axes(c, y, FC_AXES("b2", "b1"), "m");                  /* [m=4, a=4], copy */
    y = fc_rename(c, y, "a", "z");
    y = fc_unsqueeze(c, y, "one", 1);
    y = fc_broadcast_to(c, y, FC_SHAPE({"m", 4}, {"one", 3}, {"z", 4}));
    fc_tensor *s = fc_select(c, fc_squeeze(c, fc_narrow(c, fc_clone(c, x), "a", 2, 1), "a"), "b", 5);
    y = fc_mul(c, fc_reshape(c, y, FC_SHAPE({"f", 48})), s);
    return fct_weighted_sum(c, y, 15, 0.5, 1.5);
}

Test(autograd, views)
{
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"a", 4}, {"b", 6}), 30, -1, 1));
    fc_tensor *in[1] = {x};
    check_grad(views_loss, NULL, in, 1, "views");
    fc_release(x);
}

static fc_tensor *cube_fwd_for_shape_test(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    return fc_mul(c, fc_sqr(c, in[0]), in[0]);
}

static fc_tensor *positional_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    /* p[_0=3, _1=4] permuted to [_1, _0] keeps its names: the gradient must
     * come back by name (not renamed by position); the sum with a
     * positional [_0=3] aligns from the right, by position. */
    fc_tensor *t = fc_permute(c, in[0], FC_AXES("_1", "_0"));
    fc_tensor *y = fc_mul(c, fc_sin(c, t), in[1]);
    return fct_weighted_sum(c, fc_contiguous(c, y), 23, 0.5, 1.5);
}

Test(autograd, positional_operands)
{
    fc_tensor *p = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({NULL, 3}, {NULL, 4}), 150, -1, 1));
    fc_tensor *q = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({NULL, 3}), 151, -1, 1));
    fc_tensor *in[2] = {p, q};
    check_grad(positional_loss, NULL, in, 2, "permuted positional");
    fc_release(p);
    fc_release(q);
}

static int bad_bwd(fc_ctx *c, void *u, fc_tensor *const *in, int n, fc_tensor *out, fc_tensor *g, fc_tensor **gin)
{
    (void)u;
    (void)in;
    (void)n;
    (void)out;
    gin[0] = fc_sum(c, g, FC_AXES("j")); /* drops an axis: the wrong shape */
    return gin[0] != NULL;
}

Test(autograd, a_wrong_gradient_shape_is_an_error)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"i", 2}, {"j", 3}), 160, -1, 1));
    fc_custom_op op = {"bad", cube_fwd_for_shape_test, bad_bwd, NULL};
    fc_tensor *y = fc_custom(ctx, &op, &x, 1);
    cr_expect_neq(fc_backward(ctx, fc_sum(ctx, y, FC_NO_AXES)), FC_OK);
    cr_expect(strstr(fc_ctx_error(ctx), "gave a gradient"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx, sc);
}

static fc_tensor *select_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *x = in[0], *y = in[1];
    fc_tensor *m = fc_compare_scalar(c, FC_GT, x, 0.0);
    fc_tensor *r = fc_where(c, m, fc_mul(c, x, y), fc_sin(c, y));
    r = fc_add(c, r, fc_masked_fill(c, fc_exp(c, x), fc_compare_scalar(c, FC_LT, y, -0.3), 2.0));
    r = fc_add(c, r, fc_clamp(c, fc_mul(c, x, y), -0.25, 0.25));
    r = fc_add(c, r, fc_cast(c, fc_cast(c, fc_sqr(c, x), FC_F32), FC_F64));
    return fct_weighted_sum(c, r, 16, 0.5, 1.5);
}

Test(autograd, where_masked_fill_clamp_cast)
{
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"i", 6}, {"j", 5}), 40, -1, 1));
    fc_tensor *y = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"j", 5}), 41, -1, 1));
    fc_tensor *in[2] = {x, y};
    /* f32 round trip inside: loose enough for one f32 rounding of x^2. */
    fc_gradcheck_opts o = {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-4};
    cr_expect_eq(fc_gradcheck(ctx, select_loss, NULL, in, 2, &o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x);
    fc_release(y);
}

static fc_tensor *contract_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *a = in[0], *b = in[1], *w = in[2];                      /* a[bt, m, k], b[bt, k, n], w[o, n] */
    fc_tensor *y = fc_einsum(c, a, b, FC_AXES("bt", "m", "n"));          /* batched contraction */
    y = fc_linear(c, y, w, NULL);                                       /* [bt, m, o] */
    y = fc_add(c, y, fc_dot(c, a, fc_sum(c, b, FC_AXES("n")), "k"));    /* [bt, m] broadcast */
    fc_tensor *p = fc_einsum(c, a, w, FC_AXES("m", "o"));                /* a's bt, k summed first */
    y = fc_add(c, y, p);
    fc_tensor *mm = fc_matmul(c, fc_rename_all(c, a, FC_AXES("_0", "_1", "_2")),
                              fc_rename_all(c, b, FC_AXES("_0", "_1", "_2")));
    return fc_add(c, fct_weighted_sum(c, y, 17, 0.5, 1.5), fct_weighted_sum(c, mm, 18, 0.5, 1.5));
}

Test(autograd, contractions_f32)
{
    fc_tensor *a = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"bt", 2}, {"m", 3}, {"k", 5}), 50, -1, 1));
    fc_tensor *b = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"bt", 2}, {"k", 5}, {"n", 4}), 51, -1, 1));
    fc_tensor *w = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"o", 3}, {"n", 4}), 52, -1, 1));
    fc_tensor *in[3] = {a, b, w};
    fc_gradcheck_opts o = {.eps = 1e-2, .atol = 2e-3, .rtol = 2e-3}; /* the loss is quadratic: large eps is exact */
    cr_expect_eq(fc_gradcheck(ctx, contract_loss, NULL, in, 3, &o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(a);
    fc_release(b);
    fc_release(w);
}

static fc_tensor *gated_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    fc_tensor *y = u ? fc_geglu(c, in[0], in[1]) : fc_swiglu(c, in[0], in[1]);
    return fct_weighted_sum(c, y, 19, 0.5, 1.5);
}

Test(autograd, gated_activations_f32)
{
    fc_tensor *a = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"t", 3}, {"f", 4}), 60, -2, 2));
    fc_tensor *b = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"t", 3}, {"f", 4}), 61, -2, 2));
    fc_tensor *in[2] = {a, b};
    fc_gradcheck_opts o = {.eps = 1e-2, .atol = 1e-3, .rtol = 1e-2};
    for (int geglu = 0; geglu < 2; geglu++) {
        cr_expect_eq(fc_gradcheck(ctx, gated_loss, geglu ? (void *)1 : NULL, in, 2, &o), FC_OK, "%s: %s",
                     geglu ? "geglu" : "swiglu", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    }
    fc_release(a);
    fc_release(b);
}

/* ---- the engine ----------------------------------------------------------------- */

Test(autograd, diamond_and_shared_subexpression)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_from_data(ctx, FC_F64, FC_SHAPE({"i", 2}), (double[]){0.5, -1.5}, 16));
    /* y = sin(x) * exp(x) + x*x: x reaches y through four paths. */
    fc_tensor *s = fc_sin(ctx, x), *e = fc_exp(ctx, x);
    fc_tensor *y = fc_sum(ctx, fc_add(ctx, fc_mul(ctx, s, e), fc_mul(ctx, x, x)), FC_NO_AXES);
    cr_assert_eq(fc_backward(ctx, y), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tensor *g = fc_grad(ctx, x);
    double want[2];
    for (int i = 0; i < 2; i++) {
        double v = i ? -1.5 : 0.5;
        want[i] = cos(v) * exp(v) + sin(v) * exp(v) + 2 * v;
    }
    expect_close(g, want, 2, 1e-15, "diamond");
    /* A second graph accumulates into the same gradient. */
    fc_tensor *y2 = fc_sum(ctx, fc_mul_scalar(ctx, x, 3.0), FC_NO_AXES);
    cr_assert_eq(fc_backward(ctx, y2), FC_OK, "%s", fc_ctx_error(ctx));
    double want2[2] = {want[0] + 3, want[1] + 3};
    expect_close(fc_grad(ctx, x), want2, 2, 1e-15, "accumulated");
    /* The snapshot taken before is unchanged. */
    expect_close(g, want, 2, 1e-15, "earlier snapshot");
    fc_zero_grad(ctx, x);
    cr_expect_null(fc_grad(ctx, x));
    fc_scope_end(ctx, sc);
}

Test(autograd, a_50000_node_chain_runs_and_frees)
{
    fc_pool_stats before = fc_ctx_pool_stats(ctx);
    fc_tensor *x = fct_variable(ctx, fc_scalar(ctx, FC_F32, 1.0));
    fc_tensor *cur = fc_retain(x);
    for (int i = 0; i < 50000; i++) {
        fc_tensor *nx = fc_add_scalar(ctx, cur, 1e-3);
        fc_release(cur);
        cur = nx;
        cr_assert(cur, "%s", fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_backward(ctx, cur), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tensor *g = fc_grad(ctx, x);
    cr_expect_eq(fc_tensor_item(g), 1.0);
    fc_release(g);
    /* Dropping the end frees the whole chain without deep recursion. */
    fc_release(cur);
    fc_release(x);
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, before.tensors_live);
}

Test(autograd, state_errors_and_a_rerunnable_graph)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"i", 3}), 70, -1, 1));
    fc_tensor *y = fc_exp(ctx, fc_mul(ctx, x, x)); /* non-scalar */
    cr_expect_eq(fc_backward(ctx, y), FC_ERR_SHAPE);
    cr_expect(strstr(fc_ctx_error(ctx), "not a one-element output"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* A wrong seed is rejected before anything runs ... */
    fc_tensor *bad = fc_full(ctx, FC_F32, FC_SHAPE({"j", 3}), 1.0);
    cr_expect_eq(fc_backward_with(ctx, y, bad), FC_ERR_SHAPE);
    cr_expect(strstr(fc_ctx_error(ctx), "does not match"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* ... so the graph still runs with a right one, once. */
    fc_tensor *seed = fc_full(ctx, FC_F32, FC_SHAPE({"i", 3}), 1.0);
    cr_expect_eq(fc_backward_with(ctx, y, seed), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_backward_with(ctx, y, seed), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "already consumed"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* A saved output modified in place. */
    fc_tensor *e = fc_exp(ctx, x);
    fc_tensor *l = fc_sum(ctx, e, FC_NO_AXES);
    cr_assert_eq(fc_fill(ctx, e, 0.0), FC_OK);
    cr_expect_eq(fc_backward(ctx, l), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "modified in place"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    /* A constant output; an integer variable; a non-leaf variable. */
    fc_tensor *k = fc_full(ctx, FC_F32, FC_SHAPE({"i", 1}), 2.0);
    cr_expect_eq(fc_backward(ctx, k), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_requires_grad(ctx, fc_zeros(ctx, FC_I32, FC_SHAPE({"i", 2})), 1), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_requires_grad(ctx, y, 1), FC_ERR_STATE);
    cr_expect(strstr(fc_ctx_error(ctx), "not a leaf"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx, sc);
}

Test(autograd, no_grad_and_detach)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"i", 3}), 80, -1, 1));
    fc_no_grad_begin();
    fc_no_grad_begin();
    cr_expect(!fc_grad_enabled());
    fc_tensor *a = fc_exp(ctx, x);
    fc_no_grad_end();
    cr_expect(!fc_grad_enabled());
    fc_no_grad_end();
    cr_expect(fc_grad_enabled());
    cr_expect(!fc_tensor_requires_grad(a), "an op under no-grad recorded");
    fc_tensor *d = fc_detach(ctx, x);
    cr_expect(!fc_tensor_requires_grad(fc_exp(ctx, d)));
    cr_expect(fc_tensor_requires_grad(fc_exp(ctx, x)));
    cr_expect(fc_tensor_is_leaf(x));
    cr_expect(!fc_tensor_is_leaf(fc_exp(ctx, x)));
    fc_scope_end(ctx, sc);
}

/* Two heavy independent branches (so a 2-thread pass runs them side by side)
 * and many small ones feeding shared nodes. */
static void branchy_grads(fc_ctx *c, fc_tensor **out_ga, fc_tensor **out_gb)
{
    fc_tensor *a = fct_variable(c, fc_rand_uniform(c, FC_F32, FC_SHAPE({"m", 192}, {"k", 160}), 90, -1, 1));
    fc_tensor *b = fct_variable(c, fc_rand_uniform(c, FC_F32, FC_SHAPE({"k", 160}, {"n", 176}), 91, -1, 1));
    fc_scope sc = fc_scope_begin(c);
    fc_tensor *p = fc_tanh(c, fc_einsum(c, a, b, FC_AXES("m", "n")));
    fc_tensor *q = fc_sigmoid(c, fc_einsum(c, fc_sin(c, a), fc_cos(c, b), FC_AXES("m", "n")));
    fc_tensor *r = fc_einsum(c, fc_exp(c, fc_mul_scalar(c, a, 0.1)), fc_sqr(c, b), FC_AXES("m", "n"));
    fc_tensor *s = fc_add(c, fc_add(c, fc_mul(c, p, q), fc_mul(c, q, r)), fc_mul(c, r, p));
    fc_tensor *l = fc_sum(c, fc_add(c, s, fc_mean(c, fc_sqr(c, s), FC_AXES("n"))), FC_NO_AXES);
    cr_assert_eq(fc_backward(c, l), FC_OK, "%s", fc_ctx_error(c));
    fc_scope_end(c, sc);
    *out_ga = fc_grad(c, a);
    *out_gb = fc_grad(c, b);
    fc_release(a);
    fc_release(b);
}

Test(autograd, gradients_do_not_depend_on_the_thread_count)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_tensor *ga[2], *gb[2];
    for (int i = 0; i < 2; i++) branchy_grads(p.c[i], &ga[i], &gb[i]);
    fct_expect_bits(p.c[0], ga[0], p.c[1], ga[1], "grad a, 1 vs 2 threads");
    fct_expect_bits(p.c[0], gb[0], p.c[1], gb[1], "grad b, 1 vs 2 threads");
    for (int i = 0; i < 2; i++) {
        fc_release(ga[i]);
        fc_release(gb[i]);
    }
    fct_ctx_pair_end(&p);
}

/* ---- custom ops, checkpointing, dropout, mixed precision ------------------------- */

static fc_tensor *cube_fwd(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    return fc_mul(c, fc_sqr(c, in[0]), in[0]);
}

static int cube_bwd(fc_ctx *c, void *u, fc_tensor *const *in, int n, fc_tensor *out, fc_tensor *g, fc_tensor **gin)
{
    (void)n;
    (void)out;
    double k = u ? *(const double *)u : 3.0; /* 3 is right; anything else is a wrong VJP */
    gin[0] = fc_mul(c, g, fc_mul_scalar(c, fc_sqr(c, in[0]), k));
    return gin[0] != NULL;
}

static fc_tensor *custom_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    fc_custom_op op = {"cube", cube_fwd, cube_bwd, u};
    return fct_weighted_sum(c, fc_sin(c, fc_custom(c, &op, in, 1)), 21, 0.5, 1.5);
}

Test(autograd, custom_ops_and_gradcheck_catches_a_wrong_vjp)
{
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F64, FC_SHAPE({"i", 4}), 100, -1, 1));
    fc_tensor *in[1] = {x};
    check_grad(custom_loss, NULL, in, 1, "custom cube");
    double wrong = 2.9;
    cr_expect_eq(fc_gradcheck(ctx, custom_loss, &wrong, in, 1, NULL), FC_ERR_STATE, "a wrong custom VJP passed gradcheck");
    cr_expect(strstr(fc_ctx_error(ctx), "finite differences"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x);
}

static fc_tensor *block(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)u;
    (void)n;
    fc_tensor *h = fc_gelu(c, fc_linear(c, in[0], in[1], NULL));
    return fc_add(c, fc_linear(c, h, in[2], NULL), in[0]); /* residual: x reaches the output twice */
}

static void block_grads(int checkpointed, fc_tensor **g)
{
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"t", 5}, {"d", 8}), 110, -1, 1));
    fc_tensor *w1 = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"h", 16}, {"d", 8}), 111, -1, 1));
    fc_tensor *w2 = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"d", 8}, {"h", 16}), 112, -1, 1));
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *in[3] = {fc_exp(ctx, x), w1, w2}; /* the block's input is itself a result */
    fc_tensor *y = checkpointed ? fc_checkpoint(ctx, block, NULL, in, 3) : block(ctx, NULL, in, 3);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_backward(ctx, fct_weighted_sum(ctx, fc_tanh(ctx, y), 22, 0.5, 1.5)), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, sc);
    g[0] = fc_grad(ctx, x);
    g[1] = fc_grad(ctx, w1);
    g[2] = fc_grad(ctx, w2);
    fc_release(x);
    fc_release(w1);
    fc_release(w2);
}

Test(autograd, checkpointing_gives_the_same_bits)
{
    fc_tensor *plain[3], *ck[3];
    block_grads(0, plain);
    block_grads(1, ck);
    for (int i = 0; i < 3; i++) {
        fct_expect_bits(ctx, plain[i], ctx, ck[i], "checkpointed gradient");
        fc_release(plain[i]);
        fc_release(ck[i]);
    }
}

Test(autograd, dropout_regenerates_its_mask)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"r", 64}, {"c", 50}), 120, 1, 2));
    fc_tensor *y = fc_dropout(ctx, x, 0.25, 77);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_backward(ctx, fc_sum(ctx, y, FC_NO_AXES)), FC_OK, "%s", fc_ctx_error(ctx));
    double *xv = fct_values(x), *yv = fct_values(y), *gv = fct_values(fc_grad(ctx, x));
    int dropped = 0;
    for (int i = 0; i < 64 * 50; i++) {
        float scale = (float)(1.0 / 0.75);
        if (yv[i] == 0) {
            dropped++;
            cr_expect_eq(gv[i], 0.0, "dropped element %d has gradient %g", i, gv[i]);
        } else {
            cr_expect_eq((float)yv[i], (float)xv[i] * scale, "kept element %d", i);
            cr_expect_eq((float)gv[i], scale, "kept element %d gradient %g", i, gv[i]);
        }
    }
    /* 3200 draws at p = 0.25: 800 expected, sd ~24.5. */
    cr_expect(dropped > 650 && dropped < 950, "dropped %d of 3200", dropped);
    /* Same seed, same mask; another seed, another. */
    double *y2 = fct_values(fc_dropout(ctx, x, 0.25, 77)), *y3 = fct_values(fc_dropout(ctx, x, 0.25, 78));
    cr_expect(memcmp(yv, y2, sizeof(double) * 3200) == 0);
    cr_expect(memcmp(yv, y3, sizeof(double) * 3200) != 0);
    cr_expect_null(fc_dropout(ctx, x, 1.0, 1));
    cr_expect(strstr(fc_ctx_error(ctx), "outside [0, 1)"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    free(xv);
    free(yv);
    free(gv);
    free(y2);
    free(y3);
    fc_scope_end(ctx, sc);
}

Test(autograd, half_precision_variables_get_f32_gradients)
{
    fc_scope sc = fc_scope_begin(ctx);
    for (int k = 0; k < 2; k++) {
        fc_dtype dt = k ? FC_BF16 : FC_F16;
        fc_tensor *w = fct_variable(ctx, fc_cast(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"i", 6}), 130, -1, 1), dt));
        fc_tensor *y = fc_sum(ctx, fc_sqr(ctx, fc_cast(ctx, w, FC_F32)), FC_NO_AXES);
        cr_assert_eq(fc_backward(ctx, y), FC_OK, "%s", fc_ctx_error(ctx));
        fc_tensor *g = fc_grad(ctx, w);
        cr_assert(g);
        cr_expect_eq(fc_tensor_dtype(g), FC_F32);
        double *wv = fct_values(w), *gv = fct_values(g);
        for (int i = 0; i < 6; i++) cr_expect_eq(gv[i], 2 * wv[i], "%s[%d]", fc_dtype_name(dt), i);
        free(wv);
        free(gv);
    }
    fc_scope_end(ctx, sc);
}

Test(autograd, a_training_step_in_a_scope_frees_its_graph)
{
    fc_tensor *w = fct_variable(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"o", 4}, {"i", 3}), 140, -1, 1));
    fc_tensor *x = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"b", 5}, {"i", 3}), 141, -1, 1);
    uint64_t live = fc_ctx_pool_stats(ctx).tensors_live;
    for (int step = 0; step < 3; step++) {
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *l = fc_mean(ctx, fc_sqr(ctx, fc_tanh(ctx, fc_linear(ctx, x, w, NULL))), FC_NO_AXES);
        cr_assert_eq(fc_backward(ctx, l), FC_OK, "%s", fc_ctx_error(ctx));
        fc_scope_end(ctx, sc);
        cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, live + 1, "step %d: only the gradient stays", step);
    }
    fc_release(w);
    fc_release(x);
}
