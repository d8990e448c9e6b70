/* SPDX-License-Identifier: MIT */
/* RMSNorm (plain and fused with the residual add) and LayerNorm along a
 * named axis.
 *
 * Rows (one index of every other axis, nn_rows.h) go through the generated
 * f32 row kernels: f32 rows contiguous along the axis in x and in the
 * row-major result run in place; others are gathered into a per-worker f32
 * scratch row (f16/bf16 widened exactly), normalized there and scattered back
 * (rounded once). Weight and bias are widened once into a shared f32 row.
 * Rows are independent, so the chunking over threads does not change the
 * bits. */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/nn_rows.h"
#include "tensor/quant_tensor.h"

/* Elements per op below which a norm stays on one thread. */
#define NN_NORM_PARALLEL_MIN 32768

typedef enum norm_kind { NORM_RMS, NORM_RMS_RESIDUAL, NORM_LAYER } norm_kind;

enum { OP_X, OP_R, OP_Y, OP_S, N_OPS };

typedef struct norm_job {
    const fck_table *K;
    norm_kind kind;
    fc_dtype dt;
    float eps;
    fct_rows R;
    char *base[N_OPS];
    const float *w, *b;                 /* f32 rows or NULL */
} norm_job;

static void norm_row(void *arg, const int64_t *idx, const int64_t *off, float *xs)
{
    (void)idx;
    const norm_job *j = arg;
    const int64_t n = j->R.n, es = (int64_t)fc_dtype_size(j->dt);
    const int64_t *ist = j->R.ist;
    char *p[N_OPS];
    for (int k = 0; k < N_OPS; k++) p[k] = j->base[k] ? j->base[k] + off[k] * es : NULL;
    const int f32_rows = fct_rows_in_place(&j->R, j->dt, OP_X, OP_Y);

    switch (j->kind) {
    case NORM_RMS:
        if (f32_rows) {
            j->K->f32_rmsnorm((size_t)n, (const float *)p[OP_X], j->w, j->eps, (float *)p[OP_Y]);
            return;
        }
        fct_rows_gather(j->dt, p[OP_X], ist[OP_X], n, xs);
        j->K->f32_rmsnorm((size_t)n, xs, j->w, j->eps, xs);
        break;
    case NORM_LAYER:
        if (f32_rows) {
            j->K->f32_layernorm((size_t)n, (const float *)p[OP_X], j->w, j->b, j->eps, (float *)p[OP_Y]);
            return;
        }
        fct_rows_gather(j->dt, p[OP_X], ist[OP_X], n, xs);
        j->K->f32_layernorm((size_t)n, xs, j->w, j->b, j->eps, xs);
        break;
    case NORM_RMS_RESIDUAL: {
        float *rs = xs + n;
        fct_rows_gather(j->dt, p[OP_X], ist[OP_X], n, xs);
        fct_rows_gather(j->dt, p[OP_R], ist[OP_R], n, rs);
        j->K->f32_add((size_t)n, xs, rs, xs);
        fct_rows_scatter(j->dt, xs, n, p[OP_S], ist[OP_S]);
        /* normalize the stored (rounded) sum, so y == rmsnorm(s) exactly */
        if (j->dt != FC_F32) fct_rows_gather(j->dt, p[OP_S], ist[OP_S], n, xs);
        j->K->f32_rmsnorm((size_t)n, xs, j->w, j->eps, xs);
        break;
    }
    }
    fct_rows_scatter(j->dt, xs, n, p[OP_Y], ist[OP_Y]);
}

/* A weight or bias: rank 1 over the normalized axis, of x's dtype or f32. */
static int check_param(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *p, const fc_tensor *x, int a)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (p->rank != 1 || p->axis[0] != x->axis[a] || p->dim[0] != x->dim[a]) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: the %s %s must be rank 1 over axis \"%s\" of size %lld (x is %s)", op, what,
                fct_describe(p, d1, sizeof d1), x->axis[a], (long long)x->dim[a], fct_describe(x, d2, sizeof d2));
        return 0;
    }
    if (p->dtype != x->dtype && p->dtype != FC_F32) {
        fc_fail(ctx, FC_ERR_DTYPE, "%s: the %s %s for axis \"%s\" must be %s or f32", op, what,
                fct_describe(p, d1, sizeof d1), x->axis[a], fc_dtype_name(x->dtype));
        return 0;
    }
    return 1;
}

/* Does r have exactly x's named shape (any order)? */
static int same_named_shape(const fc_tensor *r, const fc_tensor *x)
{
    if (r->rank != x->rank) return 0;
    for (int i = 0; i < x->rank; i++) {
        int found = 0;
        for (int k = 0; k < r->rank; k++)
            if (r->axis[k] == x->axis[i] && r->dim[k] == x->dim[i]) found = 1;
        if (!found) return 0;
    }
    return 1;
}

/* The backward records. y's operands are the user's x (residual), weight
 * (bias); the VJP recomputes the row statistics from them, so nothing is
 * saved: p.axes[0] = the normalized axis, p.d[0] = the f32 eps the rows
 * used. The fused step's sum s = x + residual is an addition to autograd
 * (an FC_ADD record over x and residual). */
static void record(fc_ctx *ctx, const char *op, norm_kind kind, fc_tensor *x, fc_tensor *res, fc_tensor *weight,
                   fc_tensor *bias, const char *axis, double eps, fc_tensor *y, fc_tensor *s)
{
    fc_tensor *in[3] = {x, NULL, NULL};
    int n = 0;
    fcg_op id = FCG_RMSNORM;
    switch (kind) {
    case NORM_RMS: in[1] = weight; n = 2; id = FCG_RMSNORM; break;
    case NORM_RMS_RESIDUAL: in[1] = res; in[2] = weight; n = 3; id = FCG_RMSNORM_RESIDUAL; break;
    case NORM_LAYER: in[1] = weight; in[2] = bias; n = 3; id = FCG_LAYERNORM; break;
    }
    fcg_node *nd = fcg_record(ctx, y, id, op, in, n);
    if (nd) {
        fcg_set_axes(nd, &axis, 1);
        nd->p.d[0] = (double)(float)eps;
        nd->work = 8.0 * (double)fct_numel(y);
    }
    fc_tensor *sum_in[2] = {x, res};
    fcg_node *ns = s ? fcg_record(ctx, s, FCG_BINARY, op, sum_in, 2) : NULL;
    if (ns) ns->p.i[0] = FC_ADD;
}

static fc_tensor *norm_impl(fc_ctx *ctx, const char *op, norm_kind kind, fc_tensor *x, fc_tensor *res,
                            fc_tensor *weight, fc_tensor *bias, const char *axis, double eps, fc_tensor **sum_out)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (x->dtype != FC_F32 && x->dtype != FC_F16 && x->dtype != FC_BF16)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: x is %s; it takes f32, f16 or bf16", op, fct_describe(x, d1, sizeof d1));
    int a = fct_axis(ctx, op, x, axis);
    if (a < 0) return NULL;
    if (!(eps >= 0.0) || !isfinite((float)eps))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: eps %g for axis \"%s\" must be a finite f32 >= 0", op, eps,
                       x->axis[a]);
    if (weight && !check_param(ctx, op, "weight", weight, x, a)) return NULL;
    if (bias && !check_param(ctx, op, "bias", bias, x, a)) return NULL;
    if (res) {
        if (res->dtype != x->dtype)
            return fc_fail(ctx, FC_ERR_DTYPE, "%s: the residual %s and x %s differ in dtype (axis \"%s\")", op,
                           fct_describe(res, d1, sizeof d1), fct_describe(x, d2, sizeof d2), x->axis[a]);
        if (!same_named_shape(res, x))
            return fc_fail(ctx, FC_ERR_SHAPE, "%s: the residual %s does not have the shape of x %s (axis \"%s\")", op,
                           fct_describe(res, d1, sizeof d1), fct_describe(x, d2, sizeof d2), x->axis[a]);
    }

    norm_job j;
    memset(&j, 0, sizeof j);
    j.K = fck_kernels();
    j.kind = kind;
    j.dt = x->dtype;
    j.eps = (float)eps;

    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    fc_tensor *s = (y && kind == NORM_RMS_RESIDUAL) ? fct_alloc_like(ctx, x->dtype, x) : NULL;
    if (!y || (kind == NORM_RMS_RESIDUAL && !s)) {
        if (y) fc_discard(ctx, y);
        return NULL;
    }
    j.base[OP_X] = fct_ptr(x);
    j.base[OP_R] = res ? fct_ptr(res) : NULL;
    j.base[OP_Y] = fct_ptr(y);
    j.base[OP_S] = s ? fct_ptr(s) : NULL;
    const fc_tensor *ops[N_OPS] = {x, res, y, s};
    fct_rows_init(&j.R, x, a, N_OPS, ops);
    j.R.ist[OP_X] = x->stride[a];
    j.R.ist[OP_Y] = y->stride[a];

    const int64_t n = j.R.n;
    float *pw = fct_rows_prepare(ctx, &j.R, NN_NORM_PARALLEL_MIN, 2 * n, (weight ? n : 0) + (bias ? n : 0));
    if (!pw) {
        fc_discard(ctx, y);
        if (s) fc_discard(ctx, s);
        return NULL;
    }
    if (weight) {
        fct_rows_gather(weight->dtype, fct_ptr(weight), weight->stride[0], n, pw);
        j.w = pw;
        pw += n;
    }
    if (bias) {
        fct_rows_gather(bias->dtype, fct_ptr(bias), bias->stride[0], n, pw);
        j.b = pw;
    }
    fct_rows_run(ctx, &j.R, norm_row, &j);
    record(ctx, op, kind, x, res, weight, bias, x->axis[a], eps, y, sum_out ? s : NULL);
    if (sum_out) *sum_out = s;
    else if (s) fc_discard(ctx, s);
    return y;
}

fc_tensor *fc_rmsnorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, const char *axis, double eps)
{
    FCT_NO_BLOCKS(ctx, "fc_rmsnorm", NULL, x, weight);
    if (!ctx || !x) return NULL;
    return norm_impl(ctx, "fc_rmsnorm", NORM_RMS, x, NULL, weight, NULL, axis, eps, NULL);
}

fc_tensor *fc_rmsnorm_residual(fc_ctx *ctx, fc_tensor *x, fc_tensor *residual, fc_tensor *weight, const char *axis,
                               double eps, fc_tensor **sum_out)
{
    FCT_NO_BLOCKS(ctx, "fc_rmsnorm_residual", NULL, x, residual, weight);
    if (sum_out) *sum_out = NULL;
    if (!ctx || !x || !residual) return NULL;
    return norm_impl(ctx, "fc_rmsnorm_residual", NORM_RMS_RESIDUAL, x, residual, weight, NULL, axis, eps, sum_out);
}

fc_tensor *fc_layernorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias, const char *axis, double eps)
{
    FCT_NO_BLOCKS(ctx, "fc_layernorm", NULL, x, weight, bias);
    if (!ctx || !x) return NULL;
    return norm_impl(ctx, "fc_layernorm", NORM_LAYER, x, NULL, weight, bias, axis, eps, NULL);
}
