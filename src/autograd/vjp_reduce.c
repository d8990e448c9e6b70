/* SPDX-License-Identifier: MIT */
/* VJPs of reductions, cumsum and contractions. A reduction's gradient is
 * the output gradient broadcast back over the reduced axes, times the
 * reduction's local derivative; a contraction's gradient is two more
 * contractions (lowered to GEMM like the forward). */
#include "autograd/vjp.h"

int fca_vjp_reduce(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    fc_dtype gd = g->dtype;
    fc_tensor *X = fca_as(ctx, x, gd);
    const char *const *axes = n->p.axes;
    int na = n->p.n_axes;
    double count = (double)fca_count(x, axes, na);
    fc_tensor *G = fca_expand_to(ctx, g, x), *r = NULL;
    switch ((fcg_reduce_kind)n->p.i[0]) {
    case FCG_RED_SUM: r = G; break;
    case FCG_RED_MEAN: r = fc_mul_scalar(ctx, G, 1.0 / count); break;
    case FCG_RED_MAX: case FCG_RED_MIN: { /* split evenly among the elements equal to the extreme */
        fc_tensor *Y = fca_expand_to(ctx, fca_as(ctx, n->saved[0], gd), x);
        fc_tensor *hit = fc_cast(ctx, fc_compare(ctx, FC_EQ, X, Y), gd);
        fc_tensor *cnt = fc_sum(ctx, hit, axes, na);
        r = fc_mul(ctx, hit, fca_expand_to(ctx, fc_div(ctx, g, cnt), x));
        break;
    }
    case FCG_RED_VAR: {
        fc_tensor *mean = fca_expand_to(ctx, fc_mean(ctx, X, axes, na), x);
        double denom = count - (double)n->p.i[1];
        r = fc_mul(ctx, G, fc_mul_scalar(ctx, fc_sub(ctx, X, mean), 2.0 / denom));
        break;
    }
    case FCG_RED_NORM: { /* x / ||x||, and 0 where the norm is 0 (PyTorch's subgradient) */
        fc_tensor *Y = fca_as(ctx, n->saved[0], gd);
        fc_tensor *q = fc_masked_fill(ctx, fc_div(ctx, g, Y), fc_compare_scalar(ctx, FC_EQ, Y, 0.0), 0.0);
        r = fc_mul(ctx, fca_expand_to(ctx, q, x), X);
        break;
    }
    case FCG_RED_LSE: {
        fc_tensor *Y = fca_expand_to(ctx, fca_as(ctx, n->saved[0], gd), x);
        r = fc_mul(ctx, G, fc_exp(ctx, fc_sub(ctx, X, Y)));
        break;
    }
    }
    gin[0] = fca_sum_to(ctx, r, x);
    return gin[0] != NULL;
}

int fca_vjp_cumsum(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    const char *axis = n->p.axes[0];
    gin[0] = fca_sum_to(ctx, fc_flip(ctx, fc_cumsum(ctx, fc_flip(ctx, g, axis), axis), axis), n->in[0]);
    return gin[0] != NULL;
}

static int has_axis(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == name) return 1;
    return 0;
}

/* d/dx of einsum(x, other) given the output gradient g: einsum(g, other)
 * onto x's axes that g or other has; x's axes in neither were summed away
 * by the forward and come back as a broadcast. */
static fc_tensor *einsum_grad(fc_ctx *ctx, fc_tensor *g, fc_tensor *other, fc_tensor *x)
{
    const char *keep[FC_MAX_RANK];
    int nk = 0;
    for (int i = 0; i < x->rank; i++)
        if (has_axis(g, x->axis[i]) || has_axis(other, x->axis[i])) keep[nk++] = x->axis[i];
    fc_tensor *r = fc_einsum(ctx, g, other, keep, nk);
    if (!r) return NULL;
    if (nk < x->rank) r = fca_expand_to(ctx, r, x);
    return fca_sum_to(ctx, r, x);
}

int fca_vjp_einsum(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *a = n->in[0], *b = n->in[1];
    /* The GEMM takes an f32 left operand and an f32/f16/bf16 right one. */
    fc_tensor *A = fca_as(ctx, a, FC_F32);
    if (n->needs[0] && !(gin[0] = einsum_grad(ctx, g, b, a))) return 0;
    if (n->needs[1] && !(gin[1] = einsum_grad(ctx, g, A, b))) return 0;
    return 1;
}

int fca_vjp_copy(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    gin[0] = fca_sum_to(ctx, g, n->in[0]);
    return gin[0] != NULL;
}

int fca_vjp_view(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = (fc_dim){x->axis[i], x->dim[i]};
    switch ((fcg_view_kind)n->p.i[0]) {
    case FCG_V_NARROW: case FCG_V_SELECT: { /* the gradient lands in the selected part of zeros */
        fc_tensor *z = fca_zeros_like(ctx, x);
        fc_tensor *part = n->p.i[0] == FCG_V_NARROW ? fc_narrow(ctx, z, n->p.axes[0], n->p.i[1], n->p.i[2])
                                                    : fc_select(ctx, z, n->p.axes[0], n->p.i[1]);
        if (!part || fc_copy_into(ctx, part, g) != FC_OK) return 0;
        gin[0] = z;
        return 1;
    }
    case FCG_V_PERMUTE: case FCG_V_BROADCAST: /* both keep names: back by name */
        gin[0] = fca_sum_to(ctx, g, x);
        return gin[0] != NULL;
    case FCG_V_RESHAPE:
        gin[0] = fca_as_grad(ctx, fc_reshape(ctx, g, dims, x->rank), x);
        return gin[0] != NULL;
    case FCG_V_RENAME:
        gin[0] = x->rank ? fc_rename_all(ctx, g, (const char *const *)x->axis, x->rank) : g;
        gin[0] = fca_as_grad(ctx, gin[0], x);
        return gin[0] != NULL;
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_backward: unknown view kind %lld", (long long)n->p.i[0]);
    return 0;
}
