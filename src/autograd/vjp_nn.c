/* VJPs of the nn ops (to be written; each reports itself as not differentiable yet). */
#include "autograd/vjp.h"

int fca_vjp_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_log_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_rmsnorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_rmsnorm_residual(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_layernorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_rope(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

int fca_vjp_attention(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    (void)g;
    (void)gin;
    return fca_not_differentiable(ctx, n);
}

