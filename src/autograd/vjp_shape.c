/* SPDX-License-Identifier: MIT */
/* VJPs of the structure and index ops. An op that only moves values has a
 * gradient that moves them back: concat and stack hand each operand its
 * stretch (narrow / select), pad drops the padding, repeat sums the copies,
 * flip flips. An op that picks values by index adds the gradient into zeros
 * at the picked positions (get_rows, index_select, gather, topk), and
 * scatter_add passes the gradient to its destination and gathers it for its
 * source. Repeated indices accumulate in index order, one output element at
 * a time, so the sums do not depend on the thread count (the same order as
 * fc_scatter_add). */
#include <stdio.h>

#include "autograd/vjp.h"


int fca_vjp_concat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    const char *axis = n->p.axes[0];
    int stack = n->p.i[0] == 1;
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        fc_tensor *x = n->in[i];
        int64_t len = stack ? 1 : fc_tensor_size(x, axis);
        if (n->needs[i]) {
            fc_tensor *part = stack ? fc_select(ctx, g, axis, i) : fc_narrow(ctx, g, axis, off, len);
            if (!(gin[i] = fca_sum_to(ctx, part, x))) return 0;
        }
        off += len;
    }
    return 1;
}

int fca_vjp_pad(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    const char *axis = n->p.axes[0];
    gin[0] = fca_sum_to(ctx, fc_narrow(ctx, g, axis, n->p.i[0], fc_tensor_size(x, axis)), x);
    return gin[0] != NULL;
}

/* A name for a scratch axis that t does not have: base, or base with a
 * number appended. */
static const char *scratch_axis(const fc_tensor *t, const char *base, char *buf, size_t len)
{
    snprintf(buf, len, "%s", base);
    for (int k = 1; fc_tensor_axis_index(t, buf) >= 0; k++) snprintf(buf, len, "%s%d", base, k);
    return buf;
}

int fca_vjp_repeat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    const char *axis = n->p.axes[0];
    char buf[FC_AXIS_NAME_MAX + 1];
    /* The result's axis is `times` copies of x's axis one after another:
     * split it into (copy, axis) and sum over the copies. */
    const char *copy = scratch_axis(g, "repeat_copy", buf, sizeof buf);
    fc_dim parts[2] = {{copy, n->p.i[0]}, {axis, fc_tensor_size(x, axis)}};
    fc_tensor *s = fc_sum(ctx, fc_split_axis(ctx, g, axis, parts, 2), &copy, 1);
    gin[0] = fca_sum_to(ctx, s, x);
    return gin[0] != NULL;
}

int fca_vjp_flip(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    gin[0] = fca_sum_to(ctx, fc_flip(ctx, g, n->p.axes[0]), n->in[0]);
    return gin[0] != NULL;
}

/* ---- adding gradient rows into zeros by index --------------------------------
 * dst [R, D] (contiguous, gradient dtype) += src [N, D] (contiguous, same
 * dtype) row by row: dst[idx[i]] += src[i] for i = 0..N-1 in that order.
 * The columns are split among the threads; each element is summed in index
 * order whatever the split, so the bits do not depend on the thread count
 * (and equal fc_scatter_add's, which adds in the same order). */

typedef struct rows_job {
    char *dst;
    const char *src;
    const int64_t *idx;
    int64_t n, d, per_chunk;
    int f64;
} rows_job;

static void rows_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const rows_job *j = arg;
    int64_t c0 = c * j->per_chunk, c1 = c0 + j->per_chunk;
    if (c1 > j->d) c1 = j->d;
    if (j->f64) {
        double *d = (double *)(void *)j->dst;
        const double *s = (const double *)(const void *)j->src;
        for (int64_t i = 0; i < j->n; i++) {
            double *dr = d + j->idx[i] * j->d;
            const double *sr = s + i * j->d;
            for (int64_t k = c0; k < c1; k++) dr[k] += sr[k];
        }
    } else {
        float *d = (float *)(void *)j->dst;
        const float *s = (const float *)(const void *)j->src;
        for (int64_t i = 0; i < j->n; i++) {
            float *dr = d + j->idx[i] * j->d;
            const float *sr = s + i * j->d;
            for (int64_t k = c0; k < c1; k++) dr[k] += sr[k];
        }
    }
}

/* dst, src and idx64 as above; idx64 is i64, contiguous, already range
 * checked by the forward (and unchanged since: the engine checks versions). */
static int add_rows(fc_ctx *ctx, fc_tensor *dst, fc_tensor *src, fc_tensor *idx64)
{
    if (!dst || !src || !idx64) return 0;
    int64_t n = fct_numel(idx64), d = n ? fct_numel(src) / n : 0;
    rows_job j = {fct_ptr(dst), fct_ptr(src), (const int64_t *)(const void *)fct_ptr(idx64), n, d, d,
                  dst->dtype == FC_F64};
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || n * d < FCT_PARALLEL_MIN_ELEMWISE || d < 2 * 64) {
        rows_chunk(&j, 0, 0);
        return 1;
    }
    /* Column blocks of at least 64 elements (whole cache lines mostly). */
    int64_t chunks = (int64_t)threads * 4;
    j.per_chunk = (d + chunks - 1) / chunks;
    if (j.per_chunk < 64) j.per_chunk = 64;
    fc_workers_run(fc_ctx_workers(ctx), (d + j.per_chunk - 1) / j.per_chunk, rows_chunk, &j);
    return 1;
}

/* Zeros of the gradient dtype of x with x's axes reordered so that `first`
 * comes first (the others keep x's order). */
static fc_tensor *zeros_axis_first(fc_ctx *ctx, const fc_tensor *x, const char *first)
{
    fc_dim dims[FC_MAX_RANK];
    int a = fc_tensor_axis_index(x, first), r = 1;
    dims[0] = (fc_dim){x->axis[a], x->dim[a]};
    for (int i = 0; i < x->rank; i++)
        if (i != a) dims[r++] = (fc_dim){x->axis[i], x->dim[i]};
    return fc_zeros(ctx, fcg_grad_dtype(x->dtype), dims, x->rank);
}

int fca_vjp_get_rows(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *table = n->in[0], *ids = n->in[1];
    /* g is [ids axes..., table axes 1..] in that order: row i of it (ids in
     * row-major order) is the gradient of table row ids[i]. */
    fc_tensor *z = fca_zeros_like(ctx, table);
    if (!add_rows(ctx, z, fc_contiguous(ctx, g), fc_contiguous(ctx, fca_as(ctx, ids, FC_I64)))) return 0;
    gin[0] = z;
    return 1;
}

int fca_vjp_index_select(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *idx = n->in[1];
    const char *axis = n->p.axes[0];
    /* With the axis moved first, index_select is a get_rows. */
    fc_tensor *z = zeros_axis_first(ctx, x, axis);
    if (!z) return 0;
    const char *order[FC_MAX_RANK];
    for (int i = 0; i < z->rank; i++) order[i] = z->axis[i];
    fc_tensor *gp = fc_contiguous(ctx, fc_permute(ctx, g, order, z->rank));
    if (!add_rows(ctx, z, gp, fc_contiguous(ctx, fca_as(ctx, idx, FC_I64)))) return 0;
    gin[0] = fca_sum_to(ctx, z, x);
    return gin[0] != NULL;
}

int fca_vjp_gather(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *idx = n->in[1];
    /* g has idx's named shape: scatter it back, adding repeats in index order. */
    gin[0] = fc_scatter_add(ctx, fca_zeros_like(ctx, x), n->p.axes[0], idx, g);
    return gin[0] != NULL;
}

int fca_vjp_scatter_add(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *idx = n->in[1], *src = n->in[2];
    if (n->needs[0] && !(gin[0] = fca_sum_to(ctx, g, x))) return 0;
    if (!n->needs[2]) return 1;
    /* src[q] went to g's position q with the axis replaced by idx[q]. */
    fc_tensor *r = fc_gather(ctx, g, n->p.axes[0], idx);
    if (!r) return 0;
    int same = 1;
    for (int i = 0; i < src->rank; i++) same &= fc_tensor_size(r, src->axis[i]) == src->dim[i];
    if (!same) {
        /* src is larger than idx on some axis: the elements idx does not
         * reach were not used and get zeros. */
        fc_tensor *z = fca_zeros_like(ctx, src), *part = z;
        for (int i = 0; part && i < src->rank; i++)
            part = fc_narrow(ctx, part, src->axis[i], 0, fc_tensor_size(r, src->axis[i]));
        if (!part || fc_copy_into(ctx, part, r) != FC_OK) return 0;
        r = z;
    }
    gin[2] = fca_sum_to(ctx, r, src);
    return gin[2] != NULL;
}

int fca_vjp_topk(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *ix = n->saved[0];
    if (!ix) {
        fc_fail(ctx, FC_ERR_STATE, "fc_backward: %s kept no indices for its gradient", n->name);
        return 0;
    }
    /* The indices of one row are distinct: each value's gradient lands on
     * the element it came from, the others get zero. */
    gin[0] = fc_scatter_add(ctx, fca_zeros_like(ctx, x), n->p.axes[0], ix, g);
    return gin[0] != NULL;
}
