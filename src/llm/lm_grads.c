/* SPDX-License-Identifier: MIT */
/* Fucina llm: a global batch's gradient summed over micro-batches, in one
 * order on one process or a chain of ranks (lm_grads.h says why). */
#include "llm/lm_grads.h"

#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/ops.h"

#define LOSS_BYTES 8 /* a slot's loss sum, ahead of its floats (keeps them aligned) */

static size_t slot_bytes(const lm_grads *g)
{
    return LOSS_BYTES + (size_t)g->total * sizeof(float);
}
static unsigned char *slot(const lm_grads *g, int i)
{
    return g->buf + (size_t)i * slot_bytes(g);
}
static float *slot_grad(const lm_grads *g, int i)
{
    return (float *)(void *)(slot(g, i) + LOSS_BYTES);
}

static double slot_loss(const lm_grads *g, int i)
{
    double v;
    memcpy(&v, slot(g, i), sizeof v);
    return v;
}

static void set_slot_loss(const lm_grads *g, int i, double v)
{
    memcpy(slot(g, i), &v, sizeof v);
}

/* Plain adds, element by element: the bits are the same whatever the
 * compiler vectorizes (no reassociation across elements). */
static void add_into(float *dst, const float *src, int64_t n)
{
    for (int64_t k = 0; k < n; k++) dst[k] += src[k];
}

int lm_grads_init(fc_ctx *ctx, lm_grads *g, fc_tensor *const *params, int n, int per_rank, int rank)
{
    memset(g, 0, sizeof *g);
    g->params = params;
    g->n = n;
    g->per_rank = per_rank;
    g->sums_as_it_goes = rank == 0;
    g->off = malloc((size_t)(n + 1) * sizeof *g->off);
    if (!g->off) goto oom;
    for (int i = 0; i < n; i++) {
        if (fc_tensor_dtype(params[i]) != FC_F32) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_train: parameter %d is not f32", i);
            lm_grads_free(g);
            return -1;
        }
        g->off[i] = g->total;
        g->total += fc_tensor_numel(params[i]);
    }
    g->off[n] = g->total;
    /* slot 0, and (ranks after the first) the rank's own micro-batches */
    g->buf = malloc((size_t)(g->sums_as_it_goes ? 1 : 1 + per_rank) * slot_bytes(g));
    if (!g->buf) goto oom;
    return 0;
oom:
    lm_grads_free(g);
    fc_fail(ctx, FC_ERR_OOM, "fc_lm_train: out of memory for the gradient sums");
    return -1;
}

void lm_grads_free(lm_grads *g)
{
    free(g->off);
    free(g->buf);
    memset(g, 0, sizeof *g);
}

/* The first rank sums into slot 0 as it goes; the others keep each
 * micro-batch until their predecessor's sum arrives. */
static int take_into(fc_ctx *ctx, lm_grads *g, float *dst, int add)
{
    int rc = 0;
    for (int i = 0; i < g->n && rc == 0; i++) {
        const int64_t n = g->off[i + 1] - g->off[i];
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *t = fc_grad(ctx, g->params[i]);
        if (t && !fc_tensor_is_contiguous(t)) t = fc_contiguous(ctx, t);
        if (t && fc_tensor_dtype(t) != FC_F32) t = fc_cast(ctx, t, FC_F32);
        if (!t && fc_ctx_status(ctx) != FC_OK)
            rc = -1;
        else if (!t && !add)
            memset(dst + g->off[i], 0, (size_t)n * sizeof(float));
        else if (t && add)
            add_into(dst + g->off[i], fc_tensor_data(t), n);
        else if (t)
            memcpy(dst + g->off[i], fc_tensor_data(t), (size_t)n * sizeof(float));
        fc_scope_end(ctx, sc);
        fc_zero_grad(ctx, g->params[i]);
    }
    return rc;
}

int lm_grads_take(fc_ctx *ctx, lm_grads *g, int i, double loss_sum)
{
    if (g->sums_as_it_goes) {
        if (take_into(ctx, g, slot_grad(g, 0), i > 0)) return -1;
        set_slot_loss(g, 0, (i > 0 ? slot_loss(g, 0) : 0.0) + loss_sum);
        return 0;
    }
    if (take_into(ctx, g, slot_grad(g, 1 + i), 0)) return -1;
    set_slot_loss(g, 1 + i, loss_sum);
    return 0;
}

/* Every parameter's gradient := its part of slot 0. */
static int set_grads(fc_ctx *ctx, const lm_grads *g)
{
    int rc = 0;
    const float *sum = slot_grad(g, 0);
    for (int i = 0; i < g->n && rc == 0; i++) {
        const fc_tensor *p = g->params[i];
        fc_dim dims[FC_MAX_RANK];
        const int r = fc_tensor_rank(p);
        for (int d = 0; d < r; d++) dims[d] = (fc_dim){fc_tensor_axis(p, d), fc_tensor_dim(p, d)};
        fc_scope sc = fc_scope_begin(ctx);
        const int64_t n = g->off[i + 1] - g->off[i];
        fc_tensor *t = fc_from_data(ctx, FC_F32, dims, r, sum + g->off[i], (size_t)n * sizeof(float));
        if (!t || fc_set_grad(ctx, g->params[i], t) != FC_OK) rc = -1;
        fc_scope_end(ctx, sc);
    }
    return rc;
}

int lm_grads_finish(fc_ctx *ctx, lm_grads *g, const fc_lm_parallel *par, double *loss_sum)
{
    const int rank = par ? par->rank : 0, size = par ? par->size : 1;
    const size_t bytes = slot_bytes(g);
    if (rank > 0) {
        if (par->recv(par->user, rank - 1, slot(g, 0), bytes)) {
            fc_fail(ctx, FC_ERR_IO, "fc_lm_train: rank %d: receiving the gradient sum from rank %d failed", rank,
                    rank - 1);
            return -1;
        }
        double loss = slot_loss(g, 0);
        for (int i = 0; i < g->per_rank; i++) {
            add_into(slot_grad(g, 0), slot_grad(g, 1 + i), g->total);
            loss += slot_loss(g, 1 + i);
        }
        set_slot_loss(g, 0, loss);
    }
    if (rank < size - 1 && par->send(par->user, rank + 1, slot(g, 0), bytes)) {
        fc_fail(ctx, FC_ERR_IO, "fc_lm_train: rank %d: sending the gradient sum to rank %d failed", rank, rank + 1);
        return -1;
    }
    if (size > 1 && par->broadcast(par->user, size - 1, slot(g, 0), bytes)) {
        fc_fail(ctx, FC_ERR_IO, "fc_lm_train: rank %d: the broadcast of the total gradient from rank %d failed", rank,
                size - 1);
        return -1;
    }
    *loss_sum = slot_loss(g, 0);
    return set_grads(ctx, g);
}
