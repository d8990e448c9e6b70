/* RMSNorm (plain and fused with the residual add) and LayerNorm along a
 * named axis.
 *
 * Rows (one index of every other axis) go through the generated f32 row
 * kernels: f32 rows contiguous along the axis in x and in the row-major
 * result run in place; others are gathered into a per-worker f32 scratch row
 * (f16/bf16 widened exactly), normalized there and scattered back (rounded
 * once). Weight and bias are widened once into a shared f32 row. Rows are
 * independent, so the chunking over threads does not change the bits. */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fucina/half.h"
#include "fucina/nn.h"
#include "tensor/internal.h"

/* Elements per op below which a norm stays on one thread. */
#define NN_NORM_PARALLEL_MIN 32768

typedef enum norm_kind { NORM_RMS, NORM_RMS_RESIDUAL, NORM_LAYER } norm_kind;

enum { OP_X, OP_R, OP_Y, OP_S, N_OPS };

typedef struct norm_job {
    const fck_table *K;
    norm_kind kind;
    fc_dtype dt;
    int64_t n;
    float eps;
    int nout;
    int64_t odim[FC_MAX_RANK];
    int64_t ost[N_OPS][FC_MAX_RANK];
    int64_t ist[N_OPS];
    char *base[N_OPS];
    const float *w, *b;                 /* f32 rows or NULL */
    int64_t rows, rows_per_chunk;
    float *scratch;
    int64_t slot;
} norm_job;

static void gather(fc_dtype dt, const char *p, int64_t st, int64_t n, float *out)
{
    if (st == 1) {
        fct_convert(dt, p, FC_F32, out, n);
        return;
    }
    switch (dt) {
    case FC_F32:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)p)[i * st];
        break;
    case FC_F16:
        for (int64_t i = 0; i < n; i++) out[i] = fc_f16_to_f32(((const fc_f16 *)p)[i * st]);
        break;
    case FC_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = fc_bf16_to_f32(((const fc_bf16 *)p)[i * st]);
        break;
    case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: case FC_F64:
        break; /* rejected before */
    }
}

static void scatter(fc_dtype dt, const float *in, int64_t n, char *p, int64_t st)
{
    if (st == 1) {
        fct_convert(FC_F32, in, dt, p, n);
        return;
    }
    switch (dt) {
    case FC_F32:
        for (int64_t i = 0; i < n; i++) ((float *)p)[i * st] = in[i];
        break;
    case FC_F16:
        for (int64_t i = 0; i < n; i++) ((fc_f16 *)p)[i * st] = fc_f32_to_f16(in[i]);
        break;
    case FC_BF16:
        for (int64_t i = 0; i < n; i++) ((fc_bf16 *)p)[i * st] = fc_f32_to_bf16(in[i]);
        break;
    case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: case FC_F64:
        break;
    }
}

static void norm_row(const norm_job *j, const int64_t *idx, float *xs)
{
    int64_t off[N_OPS] = {0};
    for (int d = 0; d < j->nout; d++)
        for (int k = 0; k < N_OPS; k++) off[k] += idx[d] * j->ost[k][d];
    const int64_t n = j->n, es = (int64_t)fc_dtype_size(j->dt);
    char *p[N_OPS];
    for (int k = 0; k < N_OPS; k++) p[k] = j->base[k] ? j->base[k] + off[k] * es : NULL;
    const int f32_rows = j->dt == FC_F32 && j->ist[OP_X] == 1 && j->ist[OP_Y] == 1;

    switch (j->kind) {
    case NORM_RMS:
        if (f32_rows) {
            j->K->f32_rmsnorm((size_t)n, (const float *)p[OP_X], j->w, j->eps, (float *)p[OP_Y]);
            return;
        }
        gather(j->dt, p[OP_X], j->ist[OP_X], n, xs);
        j->K->f32_rmsnorm((size_t)n, xs, j->w, j->eps, xs);
        break;
    case NORM_LAYER:
        if (f32_rows) {
            j->K->f32_layernorm((size_t)n, (const float *)p[OP_X], j->w, j->b, j->eps, (float *)p[OP_Y]);
            return;
        }
        gather(j->dt, p[OP_X], j->ist[OP_X], n, xs);
        j->K->f32_layernorm((size_t)n, xs, j->w, j->b, j->eps, xs);
        break;
    case NORM_RMS_RESIDUAL: {
        float *rs = xs + n;
        gather(j->dt, p[OP_X], j->ist[OP_X], n, xs);
        gather(j->dt, p[OP_R], j->ist[OP_R], n, rs);
        j->K->f32_add((size_t)n, xs, rs, xs);
        scatter(j->dt, xs, n, p[OP_S], j->ist[OP_S]);
        /* normalize the stored (rounded) sum, so y == rmsnorm(s) exactly */
        if (j->dt != FC_F32) gather(j->dt, p[OP_S], j->ist[OP_S], n, xs);
        j->K->f32_rmsnorm((size_t)n, xs, j->w, j->eps, xs);
        break;
    }
    }
    scatter(j->dt, xs, n, p[OP_Y], j->ist[OP_Y]);
}

static void norm_chunk(void *arg, int64_t chunk, int worker)
{
    const norm_job *j = arg;
    int64_t r0 = chunk * j->rows_per_chunk, r1 = r0 + j->rows_per_chunk;
    if (r1 > j->rows) r1 = j->rows;
    int64_t idx[FC_MAX_RANK] = {0}, rem = r0;
    for (int d = j->nout - 1; d >= 0; d--) {
        idx[d] = rem % j->odim[d];
        rem /= j->odim[d];
    }
    float *ws = j->scratch + (int64_t)worker * j->slot;
    for (int64_t r = r0; r < r1; r++) {
        norm_row(j, idx, ws);
        for (int d = j->nout - 1; d >= 0; d--) {
            if (++idx[d] < j->odim[d]) break;
            idx[d] = 0;
        }
    }
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

static int64_t stride_of(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == name) return t->dim[i] == 1 ? 0 : t->stride[i];
    return 0;
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
    j.n = x->dim[a];
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
    for (int k = 0; k < N_OPS; k++) j.ist[k] = ops[k] ? stride_of(ops[k], x->axis[a]) : 0;
    j.ist[OP_X] = x->stride[a];
    j.ist[OP_Y] = y->stride[a];
    j.rows = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i == a) continue;
        int o = j.nout++;
        j.odim[o] = x->dim[i];
        for (int k = 0; k < N_OPS; k++) j.ost[k][o] = ops[k] ? stride_of(ops[k], x->axis[i]) : 0;
        j.rows *= x->dim[i];
    }

    int threads = fc_ctx_threads(ctx);
    int64_t chunks = 1;
    if (threads > 1 && j.rows > 1 && j.rows * j.n >= NN_NORM_PARALLEL_MIN) {
        chunks = (int64_t)threads * 4;
        if (chunks > j.rows) chunks = j.rows;
    }
    j.rows_per_chunk = (j.rows + chunks - 1) / chunks;
    chunks = (j.rows + j.rows_per_chunk - 1) / j.rows_per_chunk;
    fc_workers *w = fc_ctx_workers(ctx);
    int slots = chunks > 1 ? fc_workers_count(w) : 1;
    j.slot = (2 * j.n + 15) & ~(int64_t)15;
    int64_t params = (weight ? j.n : 0) + (bias ? j.n : 0);
    fc_storage *st = fc_storage_new(ctx, (size_t)(j.slot * slots + params) * sizeof(float));
    if (!st) {
        fc_discard(ctx, y);
        if (s) fc_discard(ctx, s);
        return NULL;
    }
    j.scratch = st->data;
    float *pw = j.scratch + j.slot * slots;
    if (weight) {
        gather(weight->dtype, fct_ptr(weight), weight->stride[0], j.n, pw);
        j.w = pw;
        pw += j.n;
    }
    if (bias) {
        gather(bias->dtype, fct_ptr(bias), bias->stride[0], j.n, pw);
        j.b = pw;
    }
    if (chunks > 1)
        fc_workers_run(w, chunks, norm_chunk, &j);
    else
        norm_chunk(&j, 0, 0);
    fc_storage_release(st);
    if (sum_out) *sum_out = s;
    else if (s) fc_discard(ctx, s);
    return y;
}

fc_tensor *fc_rmsnorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, const char *axis, double eps)
{
    if (!ctx || !x) return NULL;
    return norm_impl(ctx, "fc_rmsnorm", NORM_RMS, x, NULL, weight, NULL, axis, eps, NULL);
}

fc_tensor *fc_rmsnorm_residual(fc_ctx *ctx, fc_tensor *x, fc_tensor *residual, fc_tensor *weight, const char *axis,
                               double eps, fc_tensor **sum_out)
{
    if (sum_out) *sum_out = NULL;
    if (!ctx || !x || !residual) return NULL;
    return norm_impl(ctx, "fc_rmsnorm_residual", NORM_RMS_RESIDUAL, x, residual, weight, NULL, axis, eps, sum_out);
}

fc_tensor *fc_layernorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias, const char *axis, double eps)
{
    if (!ctx || !x) return NULL;
    return norm_impl(ctx, "fc_layernorm", NORM_LAYER, x, NULL, weight, bias, axis, eps, NULL);
}
