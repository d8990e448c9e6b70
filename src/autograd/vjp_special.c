/* SPDX-License-Identifier: MIT */
/* VJPs of dropout, custom ops and checkpointed blocks. */
#include "fucina/autograd.h"
#include "fucina/nn.h"
#include "autograd/vjp.h"

int fca_vjp_dropout(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    /* The same mask, regenerated from (seed, index): the gradient has the
     * output's shape and order, which are the input's. */
    gin[0] = fca_as_grad(ctx, fc_dropout(ctx, g, n->p.d[0], (uint64_t)n->p.i[0]), n->in[0]);
    return gin[0] != NULL;
}

static int same_named_shape(const fc_tensor *a, const fc_tensor *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++) {
        int j = fc_tensor_axis_index(b, a->axis[i]);
        if (j < 0 || b->dim[j] != a->dim[i]) return 0;
    }
    return 1;
}

int fca_vjp_custom(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    const fc_custom_op *op = (const fc_custom_op *)n->p.raw;
    fc_tensor *raw[64] = {0};
    if (n->n_in > 64) return fca_not_differentiable(ctx, n);
    if (!op->backward(ctx, op->user, n->in, n->n_in, n->saved[0], g, raw)) {
        if (fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, FC_ERR_STATE, "fc_backward: custom op %s's backward failed", n->name);
        return 0;
    }
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    for (int i = 0; i < n->n_in; i++) {
        if (!n->needs[i]) continue;
        if (!raw[i]) {
            fc_fail(ctx, FC_ERR_STATE, "fc_backward: custom op %s gave no gradient for input %d", n->name, i);
            return 0;
        }
        if (!same_named_shape(raw[i], n->in[i]) || !fc_dtype_is_float(raw[i]->dtype)) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_backward: custom op %s gave a gradient %s for input %d, which is %s", n->name,
                    fct_describe(raw[i], d1, sizeof d1), i, fct_describe(n->in[i], d2, sizeof d2));
            return 0;
        }
        gin[i] = fca_sum_to(ctx, raw[i], n->in[i]);
        if (!gin[i]) return 0;
    }
    return 1;
}

int fca_vjp_checkpoint(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_block_fn block = (fc_block_fn)(uintptr_t)n->p.i[0];
    void *user = n->p.ptr[1];
    fc_tensor *xs[64] = {0};
    if (n->n_in > 64) return fca_not_differentiable(ctx, n);
    /* Fresh variables over the same memory: the recomputed graph ends there. */
    for (int i = 0; i < n->n_in; i++) {
        xs[i] = fc_detach(ctx, n->in[i]);
        if (!xs[i]) return 0;
        if (n->needs[i] && fc_requires_grad(ctx, xs[i], 1) != FC_OK) return 0;
    }
    /* The engine runs VJPs with recording off; the recompute records. */
    fcg_enable();
    fc_tensor *y = block(ctx, user, xs, n->n_in);
    fcg_disable();
    if (!y) return 0;
    if (!fc_tensor_requires_grad(y)) {
        fc_fail(ctx, FC_ERR_STATE, "fc_backward: the checkpointed block's output does not depend on its inputs");
        return 0;
    }
    if (fc_backward_with(ctx, y, g) != FC_OK) return 0;
    for (int i = 0; i < n->n_in; i++) {
        if (!n->needs[i]) continue;
        gin[i] = fc_grad(ctx, xs[i]);
        if (!gin[i]) gin[i] = fca_zeros_like(ctx, n->in[i]); /* the block ignored this input */
        if (!gin[i]) return 0;
    }
    return 1;
}
