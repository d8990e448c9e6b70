/* SPDX-License-Identifier: MIT */
/* Reductions along named axes.
 *
 * The reduced axes are moved last (a view); when they then form one
 * contiguous f32 run per output element ("row mode") the row kernels run on
 * the data in place. Reducing leading axes of a contiguous tensor ("column
 * mode": a bias gradient summed over the batch) adds whole rows with the
 * vector add kernel. Anything else, and every f16/bf16 input, is first
 * copied to a contiguous f32 (or f64) tensor in row-mode order.
 *
 * Determinism: a row is summed in blocks of FCT_SUM_BLOCK elements by the
 * sum kernel and the block sums are added in double in order; rows are
 * split between threads whole, so the thread count never changes a result. */
#include <math.h>
#include <string.h>

#include "fucina/ops.h"
#include "dispatch/dispatch.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

#define FCT_SUM_BLOCK 4096

typedef enum red_kind { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_VAR, RED_NORM, RED_LSE, RED_ARGMAX, RED_ARGMIN } red_kind;

static const char *red_name(red_kind k)
{
    switch (k) {
    case RED_SUM: return "fc_sum";
    case RED_MEAN: return "fc_mean";
    case RED_MAX: return "fc_max";
    case RED_MIN: return "fc_min";
    case RED_VAR: return "fc_var";
    case RED_NORM: return "fc_norm";
    case RED_LSE: return "fc_logsumexp";
    case RED_ARGMAX: return "fc_argmax";
    case RED_ARGMIN: return "fc_argmin";
    }
    return "fc_reduce";
}

typedef struct red_job {
    red_kind kind;
    fc_dtype dt;       /* F32 or F64: the working type */
    const char *x;     /* rows of length len, row r at x + r * row_stride elements */
    int64_t len, rows, row_stride;
    char *y;           /* one result per row (f32/f64, or i64 for arg*) */
    int correction;
} red_job;

/* f32 row helpers over the kernels: a reduction kernel run on blocks of
 * FCT_SUM_BLOCK elements, the block results added in double, in order. */
static double blocked(float (*f)(size_t, const float *), const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i += FCT_SUM_BLOCK) {
        int64_t m = n - i < FCT_SUM_BLOCK ? n - i : FCT_SUM_BLOCK;
        s += (double)f((size_t)m, x + i);
    }
    return s;
}
static double sum_f32(const float *x, int64_t n) { return blocked(fck_kernels()->f32_sum, x, n); }
static double sumsq_f32(const float *x, int64_t n) { return blocked(fck_kernels()->f32_sumsq, x, n); }

static double sumsq_dev_f32(const float *x, int64_t n, float mean)
{
    const fck_table *k = fck_kernels();
    _Alignas(64) float tmp[FCT_SUM_BLOCK];
    double s = 0;
    for (int64_t i = 0; i < n; i += FCT_SUM_BLOCK) {
        int64_t m = n - i < FCT_SUM_BLOCK ? n - i : FCT_SUM_BLOCK;
        k->f32_sub_vs((size_t)m, x + i, mean, tmp);
        s += (double)k->f32_sumsq((size_t)m, tmp);
    }
    return s;
}


static int64_t argext_f64(const double *x, int64_t n, int want_max)
{
    int64_t best = 0;
    double m = x[0];
    if (m != m) return 0;
    for (int64_t i = 1; i < n; i++) {
        if (x[i] != x[i]) return i;
        if (want_max ? x[i] > m : x[i] < m) { m = x[i]; best = i; }
    }
    return best;
}

static int64_t argmin_f32(const float *x, int64_t n)
{
    int64_t best = 0;
    float m = x[0];
    if (m != m) return 0;
    for (int64_t i = 1; i < n; i++) {
        if (x[i] != x[i]) return i;
        if (x[i] < m) { m = x[i]; best = i; }
    }
    return best;
}

static void red_row_f32(const red_job *j, int64_t r)
{
    const fck_table *k = fck_kernels();
    const float *x = (const float *)j->x + r * j->row_stride;
    int64_t n = j->len;
    float *y = (float *)j->y;
    switch (j->kind) {
    case RED_SUM: y[r] = (float)sum_f32(x, n); return;
    case RED_MEAN: y[r] = (float)(sum_f32(x, n) / (double)n); return;
    case RED_MAX: y[r] = k->f32_reduce_max((size_t)n, x); return;
    case RED_MIN: y[r] = k->f32_reduce_min((size_t)n, x); return;
    case RED_VAR: {
        float mean = (float)(sum_f32(x, n) / (double)n);
        double d = (double)n - j->correction;
        y[r] = d > 0 ? (float)(sumsq_dev_f32(x, n, mean) / d) : NAN;
        return;
    }
    case RED_NORM: y[r] = (float)sqrt(sumsq_f32(x, n)); return;
    case RED_LSE: y[r] = k->f32_logsumexp((size_t)n, x); return;
    case RED_ARGMAX: ((int64_t *)j->y)[r] = (int64_t)k->f32_argmax((size_t)n, x); return;
    case RED_ARGMIN: ((int64_t *)j->y)[r] = argmin_f32(x, n); return;
    }
}

static void red_row_f64(const red_job *j, int64_t r)
{
    const double *x = (const double *)j->x + r * j->row_stride;
    int64_t n = j->len;
    double *y = (double *)j->y;
    double s = 0, m;
    switch (j->kind) {
    case RED_SUM: case RED_MEAN:
        for (int64_t i = 0; i < n; i++) s += x[i];
        y[r] = j->kind == RED_MEAN ? s / (double)n : s;
        return;
    case RED_MAX: case RED_MIN:
        m = x[argext_f64(x, n, j->kind == RED_MAX)];
        y[r] = m;
        return;
    case RED_VAR: {
        for (int64_t i = 0; i < n; i++) s += x[i];
        double mean = s / (double)n, q = 0;
        for (int64_t i = 0; i < n; i++) q += (x[i] - mean) * (x[i] - mean);
        double d = (double)n - j->correction;
        y[r] = d > 0 ? q / d : NAN;
        return;
    }
    case RED_NORM:
        for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
        y[r] = sqrt(s);
        return;
    case RED_LSE:
        m = x[argext_f64(x, n, 1)];
        if (isinf(m) || isnan(m)) { y[r] = m; return; }
        for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
        y[r] = m + log(s);
        return;
    case RED_ARGMAX: ((int64_t *)j->y)[r] = argext_f64(x, n, 1); return;
    case RED_ARGMIN: ((int64_t *)j->y)[r] = argext_f64(x, n, 0); return;
    }
}

/* Integer (and bool) rows, widened to i64: sums wrap like i64 arithmetic;
 * max/min/argmax/argmin are exact. */
static void red_row_i64(const red_job *j, int64_t r)
{
    const int64_t *x = (const int64_t *)j->x + r * j->row_stride;
    int64_t n = j->len, best = 0;
    int64_t *y = (int64_t *)j->y;
    uint64_t s = 0;
    switch (j->kind) {
    case RED_SUM:
        for (int64_t i = 0; i < n; i++) s += (uint64_t)x[i];
        y[r] = (int64_t)s;
        return;
    case RED_MAX: case RED_ARGMAX:
        for (int64_t i = 1; i < n; i++) if (x[i] > x[best]) best = i;
        y[r] = j->kind == RED_MAX ? x[best] : best;
        return;
    case RED_MIN: case RED_ARGMIN:
        for (int64_t i = 1; i < n; i++) if (x[i] < x[best]) best = i;
        y[r] = j->kind == RED_MIN ? x[best] : best;
        return;
    case RED_MEAN: case RED_VAR: case RED_NORM: case RED_LSE: return;
    }
}

static void red_chunk(void *arg, int64_t chunk, int worker)
{
    (void)worker;
    const red_job *j = arg;
    int64_t per = (j->rows + 63) / 64;
    int64_t r0 = chunk * per, r1 = r0 + per > j->rows ? j->rows : r0 + per;
    for (int64_t r = r0; r < r1; r++) {
        if (j->dt == FC_F64) red_row_f64(j, r);
        else if (j->dt == FC_I64) red_row_i64(j, r);
        else red_row_f32(j, r);
    }
}

/* Column mode for sums of f32: y[c] = sum over leading rows of x[row, c]. */
typedef struct col_job { const float *x; int64_t rows, cols; float *y; int mean; } col_job;

static void col_chunk(void *arg, int64_t chunk, int worker)
{
    (void)worker;
    const col_job *j = arg;
    const fck_table *k = fck_kernels();
    int64_t c0 = chunk * 1024, c1 = c0 + 1024 > j->cols ? j->cols : c0 + 1024;
    int64_t m = c1 - c0;
    float *y = j->y + c0;
    memcpy(y, j->x + c0, (size_t)m * 4);
    for (int64_t r = 1; r < j->rows; r++) k->f32_add((size_t)m, y, j->x + r * j->cols + c0, y);
    if (j->mean) k->f32_scale((size_t)m, y, 1.0f / (float)j->rows, y);
}

static fc_tensor *reduce_impl(fc_ctx *ctx, red_kind kind, fc_tensor *x, const char *const *axes, int n, int correction)
{
    const char *op = red_name(kind);
    if (!ctx || !x) return NULL;
    if (n > 0 && !axes) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the axis list is NULL (n = %d)", op, n);
    char d[FCT_DESC_MAX];
    int integer = !fc_dtype_is_float(x->dtype);
    if (integer && kind != RED_SUM && kind != RED_MAX && kind != RED_MIN && kind != RED_ARGMAX && kind != RED_ARGMIN)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: float input only, not %s (cast first)", op, fct_describe(x, d, sizeof d));
    int red[FC_MAX_RANK] = {0};
    int nred = 0;
    if (n == 0) {
        for (int i = 0; i < x->rank; i++) red[i] = 1;
        nred = x->rank;
    }
    for (int i = 0; i < n; i++) {
        int a = fct_axis(ctx, op, x, axes[i]);
        if (a < 0) return NULL;
        if (red[a]) return fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" is named twice for %s", op, axes[i], fct_describe(x, d, sizeof d));
        red[a] = 1;
        nred++;
    }
    /* Output: kept axes in order. */
    int64_t osz[FC_MAX_RANK];
    const char *onm[FC_MAX_RANK];
    int orank = 0;
    int64_t rows = 1, len = 1;
    for (int i = 0; i < x->rank; i++) {
        if (red[i]) { len *= x->dim[i]; continue; }
        osz[orank] = x->dim[i];
        onm[orank++] = x->axis[i];
        rows *= x->dim[i];
    }
    int arg = kind == RED_ARGMAX || kind == RED_ARGMIN;
    /* Working type: f32 (f16/bf16 widen), f64, or i64 for integers and bool. */
    fc_dtype wt = integer ? FC_I64 : x->dtype == FC_F64 ? FC_F64 : FC_F32;
    /* Integer sums are i64; integer max/min keep the input dtype (cast back below). */
    fc_dtype ot = arg ? FC_I64 : wt;
    fc_tensor *y = fct_alloc(ctx, ot, orank, osz, onm);
    if (!y) return NULL;

    /* Column mode: contiguous f32, sum/mean over a leading block of axes. */
    int leading = 1, seen_kept = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) seen_kept = 1;
        else if (seen_kept) leading = 0;
    }
    if ((kind == RED_SUM || kind == RED_MEAN) && x->dtype == FC_F32 && fct_is_contiguous(x) && leading && nred > 0 &&
        nred < x->rank && len > 1) {
        col_job cj = {(const float *)fct_ptr(x), len, rows, (float *)fct_ptr(y), kind == RED_MEAN};
        int64_t chunks = (rows + 1023) / 1024;
        if (rows * len >= FCT_PARALLEL_MIN_ELEMWISE) fc_workers_run(fc_ctx_workers(ctx), chunks, col_chunk, &cj);
        else for (int64_t c = 0; c < chunks; c++) col_chunk(&cj, c, 0);
        return y;
    }

    /* Row mode: kept axes first, reduced last; contiguous in the working type. */
    const char *order[FC_MAX_RANK];
    int k = 0;
    for (int i = 0; i < x->rank; i++) if (!red[i]) order[k++] = x->axis[i];
    for (int i = 0; i < x->rank; i++) if (red[i]) order[k++] = x->axis[i];
    fc_tensor *p = fc_permute(ctx, x, order, x->rank);
    fc_tensor *src = NULL;
    if (p && p->dtype == wt && fct_is_contiguous(p)) {
        src = p;
    } else if (p) {
        src = fct_alloc_like(ctx, wt, p);
        if (src && fc_copy_into(ctx, src, p) != FC_OK) { fc_discard(ctx, src); src = NULL; }
        fc_discard(ctx, p);
    }
    if (!src) {
        fc_discard(ctx, y);
        return NULL;
    }
    red_job j = {kind, wt, fct_ptr(src), len, rows, len, fct_ptr(y), correction};
    int64_t chunks = rows < 64 ? rows : 64;
    int64_t per = (rows + 63) / 64;
    chunks = (rows + per - 1) / per;
    if (rows * len >= FCT_PARALLEL_MIN_ELEMWISE && rows > 1) fc_workers_run(fc_ctx_workers(ctx), chunks, red_chunk, &j);
    else for (int64_t c = 0; c < chunks; c++) red_chunk(&j, c, 0);
    fc_discard(ctx, src);
    if (integer && (kind == RED_MAX || kind == RED_MIN) && x->dtype != FC_I64) {
        fc_tensor *z = fc_cast(ctx, y, x->dtype); /* exact: the values came from x */
        fc_discard(ctx, y);
        return z;
    }
    return y;
}

/* The reduction, and its backward record for the float kinds: the reduced
 * axes are the ones of x the result lacks. */
static fc_tensor *reduce(fc_ctx *ctx, red_kind kind, fc_tensor *x, const char *const *axes, int n, int correction)
{
    FCT_NO_BLOCKS(ctx, red_name(kind), NULL, x);
    fc_tensor *y = reduce_impl(ctx, kind, x, axes, n, correction);
    if (!y || !fcg_requires(x)) return y;
    fcg_reduce_kind rk = FCG_RED_SUM;
    switch (kind) {
    case RED_SUM: rk = FCG_RED_SUM; break;
    case RED_MEAN: rk = FCG_RED_MEAN; break;
    case RED_MAX: rk = FCG_RED_MAX; break;
    case RED_MIN: rk = FCG_RED_MIN; break;
    case RED_VAR: rk = FCG_RED_VAR; break;
    case RED_NORM: rk = FCG_RED_NORM; break;
    case RED_LSE: rk = FCG_RED_LSE; break;
    case RED_ARGMAX: case RED_ARGMIN: return y; /* indices: no gradient */
    }
    fcg_node *nd = fcg_record(ctx, y, FCG_REDUCE, red_name(kind), &x, 1);
    if (!nd) return y;
    nd->p.i[0] = rk;
    nd->p.i[1] = correction;
    const char *red[FC_MAX_RANK];
    int nr = 0;
    for (int i = 0; i < x->rank; i++) {
        int kept = 0;
        for (int j = 0; j < y->rank; j++) kept |= y->axis[j] == x->axis[i];
        if (!kept) red[nr++] = x->axis[i];
    }
    fcg_set_axes(nd, red, nr);
    if (rk == FCG_RED_MAX || rk == FCG_RED_MIN || rk == FCG_RED_NORM || rk == FCG_RED_LSE) fcg_save_output(ctx, nd, 0, y);
    return y;
}

fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_SUM, x, axes, n, 0); }
fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_MEAN, x, axes, n, 0); }
fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_MAX, x, axes, n, 0); }
fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_MIN, x, axes, n, 0); }
fc_tensor *fc_norm(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_NORM, x, axes, n, 0); }
fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n) { return reduce(ctx, RED_LSE, x, axes, n, 0); }

fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n, int correction)
{
    if (ctx && correction < 0) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_var: correction %d is negative", correction);
    return reduce(ctx, RED_VAR, x, axes, n, correction);
}

fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, const char *axis)
{
    const char *a[1] = {axis};
    if (ctx && !axis) return fc_fail(ctx, FC_ERR_AXIS, "fc_argmax: the axis is NULL");
    return reduce(ctx, RED_ARGMAX, x, a, 1, 0);
}

fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, const char *axis)
{
    const char *a[1] = {axis};
    if (ctx && !axis) return fc_fail(ctx, FC_ERR_AXIS, "fc_argmin: the axis is NULL");
    return reduce(ctx, RED_ARGMIN, x, a, 1, 0);
}

/* --- cumsum: sequential along the axis, in f32 (f64 for f64) --- */
typedef struct cum_arg { fc_dtype in, out; int64_t len, sin, sout; } cum_arg;

static void cum_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const cum_arg *c = arg;
    for (int64_t i = 0; i < n; i++) { /* each "element" of the loop is one scan line */
        const char *x = p[1] + i * st[1];
        char *y = p[0] + i * st[0];
        if (c->out == FC_F64) {
            double s = 0;
            for (int64_t t = 0; t < c->len; t++) {
                s += fct_load(c->in, x + t * c->sin);
                memcpy(y + t * c->sout, &s, 8);
            }
        } else {
            float s = 0;
            for (int64_t t = 0; t < c->len; t++) {
                s += (float)fct_load(c->in, x + t * c->sin);
                memcpy(y + t * c->sout, &s, 4);
            }
        }
    }
}

fc_tensor *fc_cumsum(fc_ctx *ctx, fc_tensor *x, const char *axis)
{
    if (!ctx || !x) return NULL;
    char d[FCT_DESC_MAX];
    if (!fc_dtype_is_float(x->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_cumsum: float input only, not %s", fct_describe(x, d, sizeof d));
    int a = fct_axis(ctx, "fc_cumsum", x, axis);
    if (a < 0) return NULL;
    fc_dtype ot = x->dtype == FC_F64 ? FC_F64 : FC_F32;
    fc_tensor *y = fct_alloc_like(ctx, ot, x);
    if (!y) return NULL;
    /* Iterate over every axis but `a` (set to size 1); each call scans one line. */
    int64_t dims[FC_MAX_RANK], strides[2][FC_MAX_RANK];
    int64_t ies = (int64_t)fc_dtype_size(x->dtype), oes = (int64_t)fc_dtype_size(ot);
    for (int i = 0; i < x->rank; i++) {
        dims[i] = i == a ? 1 : x->dim[i];
        strides[0][i] = y->stride[i] * oes;
        strides[1][i] = x->stride[i] * ies;
    }
    char *base[2] = {fct_ptr(y), fct_ptr(x)};
    fct_loop L;
    fct_loop_init(&L, x->rank, dims, 2, base, strides);
    cum_arg c = {x->dtype, ot, x->dim[a], x->stride[a] * ies, y->stride[a] * oes};
    fct_loop_run(ctx, &L, cum_row, &c, FCT_PARALLEL_MIN_ELEMWISE / (x->dim[a] > 0 ? x->dim[a] : 1));
    fcg_node *nd = fcg_record(ctx, y, FCG_CUMSUM, "fc_cumsum", &x, 1);
    fcg_set_axes(nd, &x->axis[a], 1);
    return y;
}
