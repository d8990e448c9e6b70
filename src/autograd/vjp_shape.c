/* VJPs of the shape ops (to be written; each reports itself as not differentiable yet). */
#include "autograd/vjp.h"

int fca_vjp_concat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_pad(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_repeat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_flip(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_get_rows(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_index_select(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_gather(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_scatter_add(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_topk(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

