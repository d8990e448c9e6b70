/* SPDX-License-Identifier: MIT */
/* VJPs of the elementwise ops: unary, binary (with broadcasting reduced back
 * to each operand by name), scalar forms, gated activations, cast, where,
 * masked fill, clamp. Formulas follow PyTorch 1.13's derivatives.yaml where
 * a choice exists (ties of max/min split the gradient evenly; clamp passes
 * the gradient on the closed interval [lo, hi]; relu passes it where x > 0). */
#include <math.h>

#include "autograd/vjp.h"

#define SQRT_2_OVER_PI 0.7978845608028654
#define GELU_C 0.044715
#define SQRT2 1.4142135623730951
#define TWO_PI 6.283185307179586

static double d_gelu_erf(double x) { return 0.5 * (1.0 + erf(x / SQRT2)) + x * exp(-0.5 * x * x) / sqrt(TWO_PI); }
static double d_abs(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }

/* dy/dx of unary op at X (gradient dtype); Y is the output when the record
 * saved it. */
static fc_tensor *d_unary(fc_ctx *ctx, fc_unary_op op, fc_tensor *X, fc_tensor *Y)
{
    switch (op) {
    case FC_NEG: return fca_const(ctx, X->dtype, -1.0);
    case FC_ABS: return fca_map(ctx, X, d_abs);
    case FC_SQR: return fc_mul_scalar(ctx, X, 2.0);
    case FC_SQRT: return fc_recip(ctx, fc_mul_scalar(ctx, Y, 2.0));
    case FC_RSQRT: return fc_mul_scalar(ctx, fc_mul(ctx, Y, fc_sqr(ctx, Y)), -0.5);
    case FC_RECIP: return fc_neg(ctx, fc_sqr(ctx, Y));
    case FC_EXP: return Y;
    case FC_LOG: return fc_recip(ctx, X);
    case FC_SIN: return fc_cos(ctx, X);
    case FC_COS: return fc_neg(ctx, fc_sin(ctx, X));
    case FC_TANH: return fc_scalar_binary(ctx, FC_SUB, 1.0, fc_sqr(ctx, Y));
    case FC_SIGMOID: return fc_mul(ctx, Y, fc_scalar_binary(ctx, FC_SUB, 1.0, Y));
    case FC_SILU: { /* s (1 + x (1 - s)); one generated pass for f32 */
        if (X->dtype == FC_F32) return fct_act_grad(ctx, FC_SILU, X);
        fc_tensor *s = fc_sigmoid(ctx, X);
        return fc_mul(ctx, s, fc_add_scalar(ctx, fc_mul(ctx, X, fc_scalar_binary(ctx, FC_SUB, 1.0, s)), 1.0));
    }
    case FC_GELU: { /* 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2), t = tanh(c (x + k x^3)); one pass for f32 */
        if (X->dtype == FC_F32) return fct_act_grad(ctx, FC_GELU, X);
        fc_tensor *x2 = fc_sqr(ctx, X);
        fc_tensor *u = fc_mul_scalar(ctx, fc_mul(ctx, X, fc_add_scalar(ctx, fc_mul_scalar(ctx, x2, GELU_C), 1.0)),
                                     SQRT_2_OVER_PI);
        fc_tensor *t = fc_tanh(ctx, u);
        fc_tensor *left = fc_mul_scalar(ctx, fc_add_scalar(ctx, t, 1.0), 0.5);
        fc_tensor *du = fc_mul_scalar(ctx, fc_add_scalar(ctx, fc_mul_scalar(ctx, x2, 3.0 * GELU_C), 1.0), SQRT_2_OVER_PI);
        fc_tensor *right = fc_mul(ctx, fc_mul_scalar(ctx, fc_mul(ctx, X, fc_scalar_binary(ctx, FC_SUB, 1.0, fc_sqr(ctx, t))), 0.5), du);
        return fc_add(ctx, left, right);
    }
    case FC_GELU_ERF: return fca_map(ctx, X, d_gelu_erf);
    case FC_RELU: return fc_cast(ctx, fc_compare_scalar(ctx, FC_GT, X, 0.0), X->dtype);
    case FC_SOFTPLUS: return fc_sigmoid(ctx, X);
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_backward: unknown unary op %d", (int)op);
    return NULL;
}

int fca_vjp_unary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    fc_unary_op op = (fc_unary_op)n->p.i[0];
    fc_tensor *X = fca_as_grad(ctx, x, x);
    fc_tensor *Y = n->saved[0] ? fca_as_grad(ctx, n->saved[0], x) : NULL;
    if (op == FC_RELU) { /* a select, not a product: keeps NaN/inf gradients where x <= 0 out */
        gin[0] = X->dtype == FC_F32 ? fct_relu_grad(ctx, X, g)
                                    : fc_masked_fill(ctx, g, fc_compare_scalar(ctx, FC_LE, X, 0.0), 0.0);
        return gin[0] != NULL;
    }
    gin[0] = fc_mul(ctx, g, d_unary(ctx, op, X, Y));
    return gin[0] != NULL;
}

/* Weight of operand a in max(a, b) (or min): 1 where it wins, 1/2 on ties. */
static fc_tensor *win_weight(fc_ctx *ctx, fc_binary_op op, fc_tensor *A, fc_tensor *B, fc_dtype dt)
{
    fc_tensor *wins = op == FC_MAX ? fc_compare(ctx, FC_GT, A, B) : fc_compare(ctx, FC_LT, A, B);
    fc_tensor *tie = fc_compare(ctx, FC_EQ, A, B);
    return fc_add(ctx, fc_cast(ctx, wins, dt), fc_mul_scalar(ctx, fc_cast(ctx, tie, dt), 0.5));
}

int fca_vjp_binary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *a = n->in[0], *b = n->in[1];
    fc_dtype gd = g->dtype;
    fc_tensor *A = fca_as(ctx, a, gd), *B = fca_as(ctx, b, gd);
    fc_tensor *ga = NULL, *gb = NULL;
    switch ((fc_binary_op)n->p.i[0]) {
    case FC_ADD: ga = g; gb = g; break;
    case FC_SUB: ga = g; gb = n->needs[1] ? fc_neg(ctx, g) : NULL; break;
    case FC_MUL:
        ga = n->needs[0] ? fc_mul(ctx, g, B) : NULL;
        gb = n->needs[1] ? fc_mul(ctx, g, A) : NULL;
        break;
    case FC_DIV: {
        fc_tensor *q = fc_div(ctx, g, B);
        ga = q;
        gb = n->needs[1] ? fc_neg(ctx, fc_mul(ctx, q, fc_div(ctx, A, B))) : NULL;
        break;
    }
    case FC_MAX: case FC_MIN: {
        fc_tensor *w = win_weight(ctx, (fc_binary_op)n->p.i[0], A, B, gd);
        ga = fc_mul(ctx, g, w);
        gb = n->needs[1] ? fc_mul(ctx, g, fc_scalar_binary(ctx, FC_SUB, 1.0, w)) : NULL;
        break;
    }
    }
    if (n->needs[0] && !(gin[0] = fca_reduce_to(ctx, ga, a))) return 0;
    if (n->needs[1] && !(gin[1] = fca_reduce_to(ctx, gb, b))) return 0;
    return 1;
}

/* x op s (scalar_left = 0) or s op x (scalar_left = 1). */
static int scalar_form(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin, int scalar_left)
{
    fc_tensor *x = n->in[0];
    double s = n->p.d[0];
    fc_tensor *X = fca_as(ctx, x, g->dtype), *r = NULL;
    switch ((fc_binary_op)n->p.i[0]) {
    case FC_ADD: r = g; break;
    case FC_SUB: r = scalar_left ? fc_neg(ctx, g) : g; break;
    case FC_MUL: r = fc_mul_scalar(ctx, g, s); break;
    case FC_DIV: /* d(x/s) = 1/s; d(s/x) = -s/x^2 */
        r = scalar_left ? fc_mul(ctx, g, fc_mul_scalar(ctx, fc_recip(ctx, fc_sqr(ctx, X)), -s))
                        : fc_binary_scalar(ctx, FC_DIV, g, s);
        break;
    case FC_MAX: case FC_MIN: /* symmetric in its operands */
        r = fc_mul(ctx, g, win_weight(ctx, (fc_binary_op)n->p.i[0], X, fca_const(ctx, g->dtype, s), g->dtype));
        break;
    }
    gin[0] = fca_sum_to(ctx, r, x);
    return gin[0] != NULL;
}

int fca_vjp_binary_scalar(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    return scalar_form(ctx, n, g, gin, 0);
}

int fca_vjp_scalar_binary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    return scalar_form(ctx, n, g, gin, 1);
}

int fca_vjp_gated(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *a = n->in[0], *b = n->in[1];
    fc_tensor *A = fca_as(ctx, a, g->dtype), *B = fca_as(ctx, b, g->dtype);
    fc_unary_op act = n->p.i[0] ? FC_GELU : FC_SILU;
    if (n->needs[0] && !(gin[0] = fca_reduce_to(ctx, fc_mul(ctx, fc_mul(ctx, g, B), d_unary(ctx, act, A, NULL)), a)))
        return 0;
    if (n->needs[1] && !(gin[1] = fca_reduce_to(ctx, fc_mul(ctx, g, fc_unary(ctx, act, A)), b))) return 0;
    return 1;
}

int fca_vjp_cast(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    gin[0] = fca_sum_to(ctx, g, n->in[0]);
    return gin[0] != NULL;
}

int fca_vjp_where(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *cond = n->in[0];
    fc_tensor *zero = fca_const(ctx, g->dtype, 0.0);
    if (n->needs[1] && !(gin[1] = fca_reduce_to(ctx, fc_where(ctx, cond, g, zero), n->in[1]))) return 0;
    if (n->needs[2] && !(gin[2] = fca_reduce_to(ctx, fc_where(ctx, cond, zero, g), n->in[2]))) return 0;
    return 1;
}

int fca_vjp_masked_fill(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    gin[0] = fca_reduce_to(ctx, fc_masked_fill(ctx, g, n->in[1], 0.0), n->in[0]);
    return gin[0] != NULL;
}

int fca_vjp_clamp(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *X = fca_as(ctx, n->in[0], g->dtype);
    fc_tensor *r = fc_masked_fill(ctx, g, fc_compare_scalar(ctx, FC_LT, X, n->p.d[0]), 0.0);
    r = fc_masked_fill(ctx, r, fc_compare_scalar(ctx, FC_GT, X, n->p.d[1]), 0.0);
    gin[0] = fca_sum_to(ctx, r, n->in[0]);
    return gin[0] != NULL;
}
