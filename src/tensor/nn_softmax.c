/* SPDX-License-Identifier: MIT */
/* Softmax and log-softmax along a named axis.
 *
 * Every row (one index of every other axis, nn_rows.h) goes through the
 * generated f32 row kernels: rows that are f32 and contiguous along the axis
 * (in x and in the row-major result) are handed over in place; others are
 * gathered into a per-worker f32 scratch row (widening f16/bf16 exactly), run
 * there and scattered back (rounding once). Causal masking and sinks build an f32 mask
 * row: the sink becomes one extra element (x = 0, mask = sink logit), so it
 * joins the denominator and is dropped from the output. Rows are
 * independent: any chunking over threads gives the same bits. */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fucina/nn.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/nn_rows.h"
#include "tensor/quant_tensor.h"

/* Elements per op below which softmax stays on one thread (exp per element
 * makes it heavier than an elementwise op). */
#define NN_SOFTMAX_PARALLEL_MIN 16384

enum { OP_X, OP_Y, OP_MASK, OP_SINK, N_OPS };

typedef struct sm_job {
    const fck_table *K;
    int log;
    fc_dtype dt, sink_dt;
    fct_rows R;                         /* rows along the softmax axis, operands OP_* */
    const char *xb;
    char *yb;
    const float *mb;                    /* NULL: no mask */
    const char *sb;                     /* NULL: no sinks */
    float scale;
    int causal;
    int q_out, k_out;                   /* outer index of the query/key axis; -1: the row axis */
    int64_t q_offset;
} sm_job;

static void sm_row(void *arg, const int64_t *idx, const int64_t *off, float *ws)
{
    const sm_job *j = arg;
    const int64_t n = j->R.n, es = (int64_t)fc_dtype_size(j->dt);
    const int64_t *ist = j->R.ist;
    const char *xp = j->xb + off[OP_X] * es;
    char *yp = j->yb + off[OP_Y] * es;
    const int direct = fct_rows_in_place(&j->R, j->dt, OP_X, OP_Y);
    float *xs = ws, *ms = ws + n + 1;

    if (j->log) {
        if (direct) {
            j->K->f32_log_softmax((size_t)n, (const float *)xp, (float *)yp);
            return;
        }
        fct_rows_gather(j->dt, xp, ist[OP_X], n, xs);
        j->K->f32_log_softmax((size_t)n, xs, xs);
        fct_rows_scatter(j->dt, xs, n, yp, ist[OP_Y]);
        return;
    }

    const float *m = j->mb ? j->mb + off[OP_MASK] : NULL;
    const int build_mask = j->causal || j->sb || (m && ist[OP_MASK] != 1);
    if (direct && !build_mask) {
        j->K->f32_softmax((size_t)n, (const float *)xp, m, j->scale, (float *)yp);
        return;
    }
    fct_rows_gather(j->dt, xp, ist[OP_X], n, xs);
    int64_t len = n;
    if (build_mask) {
        if (m)
            for (int64_t i = 0; i < n; i++) ms[i] = m[i * ist[OP_MASK]];
        else
            for (int64_t i = 0; i < n; i++) ms[i] = 0.0f;
        if (j->causal) {
            /* masked when k > q + q_offset */
            if (j->q_out >= 0 && j->k_out >= 0) {
                if (idx[j->k_out] > idx[j->q_out] + j->q_offset)
                    for (int64_t i = 0; i < n; i++) ms[i] = -INFINITY;
            } else if (j->k_out < 0 && j->q_out >= 0) {
                int64_t first = idx[j->q_out] + j->q_offset + 1; /* keys from here on are masked */
                for (int64_t i = first < 0 ? 0 : first; i < n; i++) ms[i] = -INFINITY;
            } else { /* the query axis is the row axis, the key axis an outer one */
                int64_t last = idx[j->k_out] - j->q_offset; /* queries below this are masked */
                for (int64_t i = 0; i < n && i < last; i++) ms[i] = -INFINITY;
            }
        }
        if (j->sb) {
            const char *sp = j->sb + off[OP_SINK] * (int64_t)fc_dtype_size(j->sink_dt);
            xs[n] = 0.0f;
            fct_rows_gather(j->sink_dt, sp, 1, 1, &ms[n]);
            len = n + 1;
        }
        m = ms;
    }
    j->K->f32_softmax((size_t)len, xs, m, j->scale, xs);
    fct_rows_scatter(j->dt, xs, n, yp, ist[OP_Y]);
}

/* Does t broadcast to x by name (every axis of t in x with an equal size,
 * or of size 1), excluding x's axis `skip` (may be NULL)? Records an error. */
static int check_broadcast(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *t, const fc_tensor *x,
                           const char *skip)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i] == 1) continue;
        int found = -1;
        for (int k = 0; k < x->rank; k++)
            if (x->axis[k] == t->axis[i]) found = k;
        if (found < 0 || t->axis[i] == skip) {
            fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" of the %s %s is %s x %s", op, t->axis[i], what,
                    fct_describe(t, d1, sizeof d1), found < 0 ? "not in" : "the softmax axis of",
                    fct_describe(x, d2, sizeof d2));
            return 0;
        }
        if (t->dim[i] != x->dim[found]) {
            fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld in the %s %s and %lld in x %s", op, t->axis[i],
                    (long long)t->dim[i], what, fct_describe(t, d1, sizeof d1), (long long)x->dim[found],
                    fct_describe(x, d2, sizeof d2));
            return 0;
        }
    }
    return 1;
}

static int check_float(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *t)
{
    if (t->dtype == FC_F32 || t->dtype == FC_F16 || t->dtype == FC_BF16) return 1;
    char d[FCT_DESC_MAX];
    fc_fail(ctx, FC_ERR_DTYPE, "%s: %s is %s; it takes f32, f16 or bf16", op, what, fct_describe(t, d, sizeof d));
    return 0;
}

/* *axis_out: the (interned) softmax axis, *scale_out: the f32 scale used. */
static fc_tensor *softmax_impl(fc_ctx *ctx, const char *op, fc_tensor *x, const char *axis,
                               const fc_softmax_options *opt, int log, const char **axis_out, float *scale_out)
{
    if (!ctx || !x) return NULL;
    static const fc_softmax_options defaults = {0};
    if (!opt) opt = &defaults;
    if (!check_float(ctx, op, "x", x)) return NULL;
    int a = fct_axis(ctx, op, x, axis);
    if (a < 0) return NULL;
    const char *an = x->axis[a];
    char d[FCT_DESC_MAX];

    sm_job j;
    memset(&j, 0, sizeof j);
    j.K = fck_kernels();
    j.log = log;
    j.dt = x->dtype;
    j.scale = 1.0f;
    j.q_out = j.k_out = -1;
    if (!log) {
        double scale = opt->scale == 0.0 ? 1.0 : opt->scale;
        if (!isfinite(scale) || !isfinite((float)scale))
            return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: scale %g along axis \"%s\" is not a finite f32", op, scale,
                           an);
        j.scale = (float)scale;
        if (opt->mask) {
            if (opt->mask->dtype != FC_F32)
                return fc_fail(ctx, FC_ERR_DTYPE, "%s: the mask %s for axis \"%s\" must be f32", op,
                               fct_describe(opt->mask, d, sizeof d), an);
            if (!check_broadcast(ctx, op, "mask", opt->mask, x, NULL)) return NULL;
        }
        if (opt->sinks) {
            if (!check_float(ctx, op, "sinks", opt->sinks)) return NULL;
            if (!check_broadcast(ctx, op, "sinks", opt->sinks, x, an)) return NULL;
        }
        if (opt->causal) {
            int qa = fct_axis(ctx, op, x, opt->query_axis ? opt->query_axis : "seq");
            if (qa < 0) return NULL;
            int ka = opt->key_axis ? fct_axis(ctx, op, x, opt->key_axis) : a;
            if (ka < 0) return NULL;
            if (qa == ka)
                return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: causal query and key axes are both \"%s\" in %s", op,
                               x->axis[qa], fct_describe(x, d, sizeof d));
            j.causal = 1;
            j.q_offset = opt->q_offset;
            /* outer indices are x's axes without `a`, in order */
            j.q_out = qa == a ? -1 : (qa < a ? qa : qa - 1);
            j.k_out = ka == a ? -1 : (ka < a ? ka : ka - 1);
        }
    }

    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    if (!y) return NULL;
    j.xb = fct_ptr(x);
    j.yb = fct_ptr(y);
    j.mb = (!log && opt->mask) ? (const float *)fct_ptr(opt->mask) : NULL;
    j.sb = (!log && opt->sinks) ? fct_ptr(opt->sinks) : NULL;
    j.sink_dt = (!log && opt->sinks) ? opt->sinks->dtype : FC_F32;
    const fc_tensor *ops[N_OPS] = {x, y, j.mb ? opt->mask : NULL, j.sb ? opt->sinks : NULL};
    fct_rows_init(&j.R, x, a, N_OPS, ops);
    j.R.ist[OP_X] = x->stride[a];
    j.R.ist[OP_Y] = y->stride[a];

    if (!fct_rows_prepare(ctx, &j.R, NN_SOFTMAX_PARALLEL_MIN, 2 * (j.R.n + 1), 0)) {
        fc_discard(ctx, y);
        return NULL;
    }
    fct_rows_run(ctx, &j.R, sm_row, &j);
    *axis_out = an;
    *scale_out = j.scale;
    return y;
}

/* The backward record: operands x, mask, sinks (the user's tensors; the
 * VJP reads mask and sinks from there), the axis, the scale and the output
 * (the VJP needs only y: causal masking and the mask are already in it). */
static void record(fc_ctx *ctx, fcg_op op, const char *name, fc_tensor *y, fc_tensor *x, const fc_softmax_options *opt,
                   const char *axis, float scale)
{
    fc_tensor *in[3] = {x, opt ? opt->mask : NULL, opt ? opt->sinks : NULL};
    fcg_node *n = fcg_record(ctx, y, op, name, in, op == FCG_SOFTMAX ? 3 : 1);
    if (!n) return;
    fcg_set_axes(n, &axis, 1);
    n->p.d[0] = (double)scale;
    fcg_save_output(ctx, n, 0, y);
}

fc_tensor *fc_softmax(fc_ctx *ctx, fc_tensor *x, const char *axis, const fc_softmax_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_softmax", NULL, x);
    const char *an = NULL;
    float scale = 1.0f;
    fc_tensor *y = softmax_impl(ctx, "fc_softmax", x, axis, opt, 0, &an, &scale);
    record(ctx, FCG_SOFTMAX, "fc_softmax", y, x, opt, an, scale);
    return y;
}

fc_tensor *fc_log_softmax(fc_ctx *ctx, fc_tensor *x, const char *axis)
{
    FCT_NO_BLOCKS(ctx, "fc_log_softmax", NULL, x);
    const char *an = NULL;
    float scale = 1.0f;
    fc_tensor *y = softmax_impl(ctx, "fc_log_softmax", x, axis, NULL, 1, &an, &scale);
    record(ctx, FCG_LOG_SOFTMAX, "fc_log_softmax", y, x, NULL, an, scale);
    return y;
}
