/* SPDX-License-Identifier: MIT */
/* Custom differentiable ops and activation checkpointing: both run a
 * forward with recording off and attach one record whose VJP calls back
 * (the user's backward, or the block again with recording on). */
#include <string.h>

#include "fucina/autograd.h"
#include "autograd/vjp.h"

/* A fresh header over r's memory for the caller, r itself dropped: so a
 * forward that returns one of its inputs still gets a record of its own. */
static fc_tensor *fresh_result(fc_ctx *ctx, fc_tensor *r)
{
    if (!r) return NULL;
    fc_tensor *y = fct_view(ctx, r);
    fc_discard(ctx, r);
    return y;
}

fc_tensor *fc_custom(fc_ctx *ctx, const fc_custom_op *op, fc_tensor *const *in, int n_in)
{
    if (!ctx) return NULL;
    if (!op || !op->forward || !op->backward || n_in < 1 || n_in > 64 || !in)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_custom: needs forward, backward and 1..64 inputs");
    for (int i = 0; i < n_in; i++) if (!in[i]) return NULL;
    const char *name = op->name ? op->name : "fc_custom";
    fcg_disable();
    fc_tensor *r = op->forward(ctx, op->user, in, n_in);
    fcg_enable();
    fc_tensor *y = fresh_result(ctx, r);
    if (!y) {
        if (fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, FC_ERR_STATE, "fc_custom: %s's forward returned NULL", name);
        return NULL;
    }
    fcg_node *nd = fcg_record(ctx, y, FCG_CUSTOM, name, in, n_in);
    if (nd) {
        _Static_assert(sizeof(fc_custom_op) <= sizeof nd->p.raw, "fc_custom_op fits the record");
        memcpy(nd->p.raw, op, sizeof *op);
        fcg_save_output(ctx, nd, 0, y);
    }
    return y;
}

fc_tensor *fc_checkpoint(fc_ctx *ctx, fc_block_fn block, void *user, fc_tensor *const *in, int n_in)
{
    if (!ctx) return NULL;
    if (!block || n_in < 1 || n_in > 64 || !in)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_checkpoint: needs a block and 1..64 inputs");
    for (int i = 0; i < n_in; i++) if (!in[i]) return NULL;
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *r = fc_retain(block(ctx, user, in, n_in));
    fc_scope_end(ctx, sc);
    fcg_enable();
    if (!r) return NULL;
    fc_tensor *y = fct_view(ctx, r);
    fc_release(r);
    fcg_node *nd = fcg_record(ctx, y, FCG_CHECKPOINT, "fc_checkpoint", in, n_in);
    if (nd) {
        nd->p.i[0] = (int64_t)(uintptr_t)block;
        nd->p.ptr[1] = user;
    }
    return y;
}
