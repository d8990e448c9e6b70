/* VJPs of the loss ops (to be written; each reports itself as not differentiable yet). */
#include "autograd/vjp.h"

int fca_vjp_cross_entropy(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_mse(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_conv1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_conv_transpose1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

