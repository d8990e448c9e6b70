/* SPDX-License-Identifier: MIT */
/* Helpers the VJPs share: dtype and shape plumbing for gradients. */
#include <math.h>
#include <string.h>

#include "autograd/vjp.h"

fc_tensor *fca_as(fc_ctx *ctx, fc_tensor *t, fc_dtype dt)
{
    if (!t) return NULL;
    return t->dtype == dt ? t : fc_cast(ctx, t, dt);
}

fc_tensor *fca_as_grad(fc_ctx *ctx, fc_tensor *t, const fc_tensor *like)
{
    return fca_as(ctx, t, fcg_grad_dtype(like->dtype));
}

static int all_positional(const fc_tensor *t)
{
    for (int i = 0; i < t->rank; i++)
        if (!fc_axis_is_positional(t->axis[i])) return 0;
    return 1;
}

static int axis_in(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == name) return i;
    return -1;
}

fc_tensor *fca_sum_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x)
{
    if (!g) return NULL;
    g = fca_as_grad(ctx, g, x);
    if (!g) return NULL;
    /* Sum the axes x lacks, and those where x has size 1 but g does not. */
    const char *drop[FC_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < g->rank; i++) {
        int j = axis_in(x, g->axis[i]);
        if (j < 0 || (x->dim[j] == 1 && g->dim[i] != 1)) drop[nd++] = g->axis[i];
    }
    if (nd) g = fc_sum(ctx, g, drop, nd);
    if (!g) return NULL;
    /* Put back x's size-1 axes, then x's order. */
    for (int j = 0; j < x->rank; j++)
        if (axis_in(g, x->axis[j]) < 0) {
            g = fc_unsqueeze(ctx, g, x->axis[j], g->rank);
            if (!g) return NULL;
        }
    int same = g->rank == x->rank;
    for (int j = 0; same && j < x->rank; j++) same = g->axis[j] == x->axis[j];
    if (!same && x->rank > 0) g = fc_permute(ctx, g, (const char *const *)x->axis, x->rank);
    return g;
}

fc_tensor *fca_reduce_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x)
{
    if (!g) return NULL;
    if (all_positional(g) && all_positional(x) && g->rank >= x->rank) {
        /* The forward aligned these from the right, by position: g's
         * leading axes are new, and g's axis (lead + i) stands for x's
         * axis i whatever the names say. */
        int lead = g->rank - x->rank;
        const char *drop[FC_MAX_RANK];
        for (int i = 0; i < lead; i++) drop[i] = g->axis[i];
        if (lead) g = fc_sum(ctx, g, drop, lead);
        if (g && x->rank > 0) g = fc_rename_all(ctx, g, (const char *const *)x->axis, x->rank);
    }
    return fca_sum_to(ctx, g, x);
}

fc_tensor *fca_expand_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x)
{
    if (!g) return NULL;
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = (fc_dim){x->axis[i], x->dim[i]};
    return fc_broadcast_to(ctx, g, dims, x->rank);
}

fc_tensor *fca_zeros_like(fc_ctx *ctx, const fc_tensor *x)
{
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = (fc_dim){x->axis[i], x->dim[i]};
    return fc_zeros(ctx, fcg_grad_dtype(x->dtype), dims, x->rank);
}

fc_tensor *fca_const(fc_ctx *ctx, fc_dtype dt, double v) { return fc_scalar(ctx, dt, v); }

int64_t fca_count(const fc_tensor *x, const char *const *axes, int n)
{
    int64_t c = 1;
    for (int k = 0; k < n; k++) {
        int i = axis_in(x, axes[k]);
        if (i >= 0) c *= x->dim[i];
    }
    return c;
}

fc_tensor *fca_map(fc_ctx *ctx, fc_tensor *x, double (*f)(double))
{
    fc_dtype gd = fcg_grad_dtype(x->dtype);
    fc_tensor *c = fc_contiguous(ctx, fca_as(ctx, x, gd));
    if (!c) return NULL;
    fc_tensor *y = fct_alloc_like(ctx, gd, c);
    if (!y) return NULL;
    int64_t n = fct_numel(c);
    if (gd == FC_F64) {
        const double *s = (const double *)fct_ptr(c);
        double *d = (double *)fct_ptr(y);
        for (int64_t i = 0; i < n; i++) d[i] = f(s[i]);
    } else {
        const float *s = (const float *)fct_ptr(c);
        float *d = (float *)fct_ptr(y);
        for (int64_t i = 0; i < n; i++) d[i] = (float)f((double)s[i]);
    }
    return y;
}

int fca_not_differentiable(fc_ctx *ctx, fcg_node *n)
{
    fc_fail(ctx, FC_ERR_STATE, "fc_backward: %s has no gradient implementation yet", n->name);
    return 0;
}
