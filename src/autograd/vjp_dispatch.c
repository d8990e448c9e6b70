/* SPDX-License-Identifier: MIT */
/* From a record's op id to its VJP: an exhaustive switch, so a new op id in
 * tensor/grad_record.h does not compile until it has a VJP here. */
#include "autograd/vjp.h"

int fca_vjp(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    switch (n->op) {
    case FCG_UNARY: return fca_vjp_unary(ctx, n, g, gin);
    case FCG_BINARY: return fca_vjp_binary(ctx, n, g, gin);
    case FCG_BINARY_SCALAR: return fca_vjp_binary_scalar(ctx, n, g, gin);
    case FCG_SCALAR_BINARY: return fca_vjp_scalar_binary(ctx, n, g, gin);
    case FCG_GATED: return fca_vjp_gated(ctx, n, g, gin);
    case FCG_CAST: return fca_vjp_cast(ctx, n, g, gin);
    case FCG_WHERE: return fca_vjp_where(ctx, n, g, gin);
    case FCG_MASKED_FILL: return fca_vjp_masked_fill(ctx, n, g, gin);
    case FCG_CLAMP: return fca_vjp_clamp(ctx, n, g, gin);
    case FCG_REDUCE: return fca_vjp_reduce(ctx, n, g, gin);
    case FCG_CUMSUM: return fca_vjp_cumsum(ctx, n, g, gin);
    case FCG_EINSUM: return fca_vjp_einsum(ctx, n, g, gin);
    case FCG_VIEW: return fca_vjp_view(ctx, n, g, gin);
    case FCG_COPY: return fca_vjp_copy(ctx, n, g, gin);
    case FCG_SOFTMAX: return fca_vjp_softmax(ctx, n, g, gin);
    case FCG_LOG_SOFTMAX: return fca_vjp_log_softmax(ctx, n, g, gin);
    case FCG_RMSNORM: return fca_vjp_rmsnorm(ctx, n, g, gin);
    case FCG_RMSNORM_RESIDUAL: return fca_vjp_rmsnorm_residual(ctx, n, g, gin);
    case FCG_LAYERNORM: return fca_vjp_layernorm(ctx, n, g, gin);
    case FCG_ROPE: return fca_vjp_rope(ctx, n, g, gin);
    case FCG_ATTENTION: return fca_vjp_attention(ctx, n, g, gin);
    case FCG_CONCAT: return fca_vjp_concat(ctx, n, g, gin);
    case FCG_PAD: return fca_vjp_pad(ctx, n, g, gin);
    case FCG_REPEAT: return fca_vjp_repeat(ctx, n, g, gin);
    case FCG_FLIP: return fca_vjp_flip(ctx, n, g, gin);
    case FCG_GET_ROWS: return fca_vjp_get_rows(ctx, n, g, gin);
    case FCG_INDEX_SELECT: return fca_vjp_index_select(ctx, n, g, gin);
    case FCG_GATHER: return fca_vjp_gather(ctx, n, g, gin);
    case FCG_SCATTER_ADD: return fca_vjp_scatter_add(ctx, n, g, gin);
    case FCG_TOPK: return fca_vjp_topk(ctx, n, g, gin);
    case FCG_CROSS_ENTROPY: return fca_vjp_cross_entropy(ctx, n, g, gin);
    case FCG_MSE: return fca_vjp_mse(ctx, n, g, gin);
    case FCG_CONV1D: return fca_vjp_conv1d(ctx, n, g, gin);
    case FCG_CONV_TRANSPOSE1D: return fca_vjp_conv_transpose1d(ctx, n, g, gin);
    case FCG_DROPOUT: return fca_vjp_dropout(ctx, n, g, gin);
    case FCG_CUSTOM: return fca_vjp_custom(ctx, n, g, gin);
    case FCG_CHECKPOINT: return fca_vjp_checkpoint(ctx, n, g, gin);
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_backward: unknown record op %d (%s)", (int)n->op, n->name);
    return 0;
}
