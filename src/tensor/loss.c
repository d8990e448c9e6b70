/* SPDX-License-Identifier: MIT */
/* Losses: cross entropy (log_softmax row kernel per row) and mean squared
 * error. Per-element work runs in parallel; reductions add per-row (or
 * per-block) partial results in index order on one thread, so results do
 * not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "fucina/loss.h"
#include "dispatch/dispatch.h"
#include "tensor/grad_record.h"
#include "tensor/shape_internal.h"
#include "tensor/quant_tensor.h"

static int loss_float_dtype(fc_dtype dt) { return dt == FC_F32 || dt == FC_F16 || dt == FC_BF16; }

static int valid_reduction(fc_reduction r) { return r == FC_REDUCE_MEAN || r == FC_REDUCE_SUM || r == FC_REDUCE_NONE; }

/* ---- cross entropy ------------------------------------------------------ */

typedef struct ce_job {
    fc_dtype dt;
    int orank;
    int64_t odim[FC_MAX_RANK];
    int64_t lst[FC_MAX_RANK]; /* logits byte strides of the outer axes */
    int64_t lst_c;            /* byte stride along the classes */
    int64_t C;
    const char *logits;
    const int64_t *target;
    int64_t ignore;
    int smooth;               /* compute the smoothing term */
    float *scratch;           /* 2C floats per worker */
    double *nll, *sm;
    int64_t rows, per_chunk;
} ce_job;

static void ce_chunk(void *arg, int64_t c, int worker)
{
    const ce_job *j = arg;
    int64_t r0 = c * j->per_chunk, r1 = r0 + j->per_chunk;
    if (r1 > j->rows) r1 = j->rows;
    if (r0 >= r1) return;
    float *xbuf = j->scratch + (int64_t)worker * 2 * j->C, *y = xbuf + j->C;
    const fck_table *k = fck_kernels();
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(r0, j->orank, j->odim, mi);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0;
        for (int d = 0; d < j->orank; d++) off += mi[d] * j->lst[d];
        fcs_next(j->orank, j->odim, mi);
        int64_t t = j->target[r];
        if (t == j->ignore) {
            j->nll[r] = 0.0;
            j->sm[r] = 0.0;
            continue;
        }
        const char *row = j->logits + off;
        const float *x = fct_row_f32(j->dt, row, j->C, j->lst_c, xbuf);
        k->f32_log_softmax((size_t)j->C, x, y);
        j->nll[r] = -(double)y[t];
        double s = 0.0;
        if (j->smooth)
            for (int64_t i = 0; i < j->C; i++) s += y[i];
        j->sm[r] = -s;
    }
}

fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets, const char *class_axis,
                            const fc_ce_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_cross_entropy", NULL, logits, targets);
    if (!ctx || !logits || !targets) return NULL;
    static const fc_ce_options defaults = {FC_REDUCE_MEAN, 0.0f, FC_CE_IGNORE_DEFAULT, 1};
    if (!opt) opt = &defaults;
    const char *op = "fc_cross_entropy";
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int c = fct_axis(ctx, op, logits, class_axis);
    if (c < 0) return NULL;
    if (!loss_float_dtype(logits->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: logits %s must be f32, f16 or bf16 (class axis \"%s\")", op,
                       fct_describe(logits, d1, sizeof d1), class_axis);
    if (!fcs_is_index_dtype(targets->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: targets %s must be i32 or i64 (class axis \"%s\" of %s)", op,
                       fct_describe(targets, d1, sizeof d1), class_axis, fct_describe(logits, d2, sizeof d2));
    if (!valid_reduction(opt->reduction))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: reduction %d is not an fc_reduction (class axis \"%s\")", op,
                       (int)opt->reduction, class_axis);
    if (!(opt->label_smoothing >= 0.0f && opt->label_smoothing <= 1.0f))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: label_smoothing %g is outside [0, 1] (class axis \"%s\")", op,
                       (double)opt->label_smoothing, class_axis);
    /* targets: exactly the logits' axes other than the class axis. */
    for (int i = 0; i < targets->rank; i++) {
        int k = -1;
        for (int j = 0; j < logits->rank; j++)
            if (logits->axis[j] == targets->axis[i]) k = j;
        if (k < 0 || k == c)
            return fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" of targets %s is not a non-class axis of logits %s (class axis \"%s\")",
                           op, targets->axis[i], fct_describe(targets, d1, sizeof d1),
                           fct_describe(logits, d2, sizeof d2), class_axis);
        if (logits->dim[k] != targets->dim[i])
            return fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld in targets %s but %lld in logits %s", op,
                           targets->axis[i], (long long)targets->dim[i], fct_describe(targets, d1, sizeof d1),
                           (long long)logits->dim[k], fct_describe(logits, d2, sizeof d2));
    }
    if (targets->rank != logits->rank - 1) {
        for (int j = 0; j < logits->rank; j++)
            if (j != c && fc_tensor_axis_index(targets, logits->axis[j]) < 0)
                return fc_fail(ctx, FC_ERR_AXIS, "%s: targets %s lack axis \"%s\" of logits %s (class axis \"%s\")", op,
                               fct_describe(targets, d1, sizeof d1), logits->axis[j],
                               fct_describe(logits, d2, sizeof d2), class_axis);
    }
    int64_t ignore = opt->set_ignore_index ? opt->ignore_index : FC_CE_IGNORE_DEFAULT;
    int64_t C = logits->dim[c];
    size_t es = fc_dtype_size(logits->dtype);

    ce_job j = {.dt = logits->dtype, .orank = logits->rank - 1, .lst_c = logits->stride[c] * (int64_t)es, .C = C,
                .logits = fct_ptr(logits), .ignore = ignore, .smooth = opt->label_smoothing > 0.0f};
    const char *onames[FC_MAX_RANK];
    int64_t tst[FC_MAX_RANK];
    j.rows = 1;
    for (int i = 0, r = 0; i < logits->rank; i++) {
        if (i == c) continue;
        j.odim[r] = logits->dim[i];
        j.lst[r] = logits->stride[i] * (int64_t)es;
        onames[r] = logits->axis[i];
        j.rows *= logits->dim[i];
        r++;
    }
    /* Targets in the logits' row order, as int64. */
    int64_t rows = j.rows;
    fc_storage *ts = fc_storage_new(ctx, (size_t)rows * 3 * 8);
    if (!ts) return NULL;
    int64_t *tv = ts->data;
    j.nll = (double *)(tv + rows);
    j.sm = j.nll + rows;
    fct_strides_for(targets, j.orank, onames, tst);
    {
        int64_t mi[FC_MAX_RANK] = {0};
        const char *tb = fct_ptr(targets);
        for (int64_t r = 0; r < rows; r++) {
            int64_t off = 0;
            for (int d = 0; d < j.orank; d++) off += mi[d] * tst[d];
            if (targets->dtype == FC_I32) {
                int32_t v;
                memcpy(&v, tb + off, 4);
                tv[r] = v;
            } else {
                memcpy(&tv[r], tb + off, 8);
            }
            fcs_next(j.orank, j.odim, mi);
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        if (tv[r] != ignore && (tv[r] < 0 || tv[r] >= C)) {
            fc_storage_release(ts);
            return fc_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: target %lld (row %lld) is outside class axis \"%s\" (size %lld) of %s and is not the ignore index %lld",
                           op, (long long)tv[r], (long long)r, class_axis, (long long)C,
                           fct_describe(logits, d1, sizeof d1), (long long)ignore);
        }
    }
    j.target = tv;

    int threads = fc_ctx_threads(ctx);
    int parallel = threads > 1 && rows > 1 && rows * C >= FCT_PARALLEL_MIN_ELEMWISE / 4;
    int workers = parallel ? fc_workers_count(fc_ctx_workers(ctx)) : 1;
    fc_storage *sc = fc_storage_new(ctx, (size_t)workers * 2 * (size_t)C * sizeof(float));
    if (!sc) {
        fc_storage_release(ts);
        return NULL;
    }
    j.scratch = sc->data;
    if (!parallel) {
        j.per_chunk = rows;
        ce_chunk(&j, 0, 0);
    } else {
        int64_t chunks = (int64_t)threads * 4;
        if (chunks > rows) chunks = rows;
        j.per_chunk = (rows + chunks - 1) / chunks;
        fc_workers_run(fc_ctx_workers(ctx), (rows + j.per_chunk - 1) / j.per_chunk, ce_chunk, &j);
    }
    fc_storage_release(sc);

    double eps = opt->label_smoothing, w_nll = 1.0 - eps, w_sm = eps / (double)C;
    fc_tensor *out;
    if (opt->reduction == FC_REDUCE_NONE) {
        out = fct_alloc(ctx, FC_F32, j.orank, j.odim, onames);
        if (out) {
            float *o = (float *)(void *)fct_ptr(out);
            for (int64_t r = 0; r < rows; r++)
                o[r] = tv[r] == ignore ? 0.0f : (float)(w_nll * j.nll[r] + w_sm * j.sm[r]);
        }
    } else {
        double s_nll = 0.0, s_sm = 0.0;
        int64_t count = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (tv[r] == ignore) continue;
            s_nll += j.nll[r];
            s_sm += j.sm[r];
            count++;
        }
        double v = w_nll * s_nll + w_sm * s_sm;
        if (opt->reduction == FC_REDUCE_MEAN) v = count ? w_nll * (s_nll / (double)count) + w_sm * (s_sm / (double)count) : NAN;
        out = fct_alloc(ctx, FC_F32, 0, NULL, NULL);
        if (out) *(float *)(void *)fct_ptr(out) = (float)v;
    }
    /* The gradient needs the options and, for MEAN, the divisor: the rows
     * that are not ignored. */
    int64_t kept = 0;
    for (int64_t r = 0; r < rows; r++) kept += tv[r] != ignore;
    fc_storage_release(ts);
    fc_tensor *in[2] = {logits, targets};
    fcg_node *nd = fcg_record(ctx, out, FCG_CROSS_ENTROPY, op, in, 2);
    if (nd) {
        nd->p.i[0] = opt->reduction;
        nd->p.i[1] = ignore;
        nd->p.i[2] = kept;
        nd->p.d[0] = opt->label_smoothing;
        fcg_set_axes(nd, &logits->axis[c], 1);
        nd->work = (double)rows * (double)C * 8.0;
    }
    return out;
}

/* ---- mean squared error ----------------------------------------------- */

typedef struct mse_row_arg { fc_dtype dt; } mse_row_arg;

static inline float load_f(fc_dtype dt, const char *p)
{
    if (dt == FC_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    return (float)fct_load(dt, p);
}

static void mse_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    fc_dtype dt = ((const mse_row_arg *)arg)->dt;
    for (int64_t i = 0; i < n; i++) {
        float d = load_f(dt, p[1] + i * st[1]) - load_f(dt, p[2] + i * st[2]);
        float v = d * d;
        memcpy(p[0] + i * st[0], &v, 4);
    }
}

#define MSE_BLOCK 16384

typedef struct mse_job {
    fc_dtype dt;
    int rank;
    int64_t dim[FC_MAX_RANK], sa[FC_MAX_RANK], sb[FC_MAX_RANK];
    const char *a, *b;
    int64_t n;
    double *part;
} mse_job;

static void mse_block(void *arg, int64_t blk, int worker)
{
    (void)worker;
    const mse_job *m = arg;
    int64_t l0 = blk * MSE_BLOCK, l1 = l0 + MSE_BLOCK;
    if (l1 > m->n) l1 = m->n;
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(l0, m->rank, m->dim, mi);
    double s = 0.0;
    int last = m->rank - 1;
    int64_t l = l0;
    while (l < l1) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < m->rank; d++) {
            oa += mi[d] * m->sa[d];
            ob += mi[d] * m->sb[d];
        }
        /* The rest of the innermost row, within the block. */
        int64_t cnt = last >= 0 ? m->dim[last] - mi[last] : 1;
        if (cnt > l1 - l) cnt = l1 - l;
        int64_t ia = last >= 0 ? m->sa[last] : 0, ib = last >= 0 ? m->sb[last] : 0;
        for (int64_t i = 0; i < cnt; i++) {
            float d = load_f(m->dt, m->a + oa + i * ia) - load_f(m->dt, m->b + ob + i * ib);
            s += (double)(d * d);
        }
        l += cnt;
        if (last >= 0) {
            mi[last] += cnt - 1;
            fcs_next(m->rank, m->dim, mi);
        }
    }
    m->part[blk] = s;
}

/* p.i[1] = the broadcast element count, MEAN's divisor. */
static fc_tensor *record_mse(fc_ctx *ctx, fc_tensor *out, fc_tensor *a, fc_tensor *b, fc_reduction reduction,
                             int64_t count)
{
    fc_tensor *in[2] = {a, b};
    fcg_node *nd = fcg_record(ctx, out, FCG_MSE, "fc_mse", in, 2);
    if (nd) {
        nd->p.i[0] = reduction;
        nd->p.i[1] = count;
        nd->work = (double)count * 4.0;
    }
    return out;
}

fc_tensor *fc_mse(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_reduction reduction)
{
    FCT_NO_BLOCKS(ctx, "fc_mse", NULL, a, b);
    if (!ctx || !a || !b) return NULL;
    const char *op = "fc_mse";
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (a->dtype != b->dtype || !loss_float_dtype(a->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: %s and %s must have one dtype, f32, f16 or bf16", op,
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    if (!valid_reduction(reduction))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: reduction %d is not an fc_reduction", op, (int)reduction);
    /* The broadcast shape: by name, or from the right when both operands
     * have positional names only. */
    int positional = 1;
    for (int i = 0; i < a->rank; i++) positional &= fc_axis_is_positional(a->axis[i]);
    for (int i = 0; i < b->rank; i++) positional &= fc_axis_is_positional(b->axis[i]);
    int rank = 0;
    const char *names[FC_MAX_RANK];
    int ia[FC_MAX_RANK], ib[FC_MAX_RANK]; /* operand axis per result axis, -1 when absent */
    if (positional) {
        rank = a->rank > b->rank ? a->rank : b->rank;
        for (int d = 0; d < rank; d++) {
            names[d] = fc_axis_positional(d);
            ia[d] = d - (rank - a->rank);
            ib[d] = d - (rank - b->rank);
            if (ia[d] < 0) ia[d] = -1;
            if (ib[d] < 0) ib[d] = -1;
        }
    } else {
        for (int i = 0; i < a->rank; i++) {
            names[rank] = a->axis[i];
            ia[rank] = i;
            ib[rank] = fc_tensor_axis_index(b, a->axis[i]);
            rank++;
        }
        for (int i = 0; i < b->rank; i++) {
            if (fc_tensor_axis_index(a, b->axis[i]) >= 0) continue;
            if (rank == FC_MAX_RANK)
                return fc_fail(ctx, FC_ERR_SHAPE, "%s: %s and %s broadcast to more than %d axes (axis \"%s\")", op,
                               fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2), FC_MAX_RANK, b->axis[i]);
            names[rank] = b->axis[i];
            ia[rank] = -1;
            ib[rank] = i;
            rank++;
        }
    }
    mse_job m = {.dt = a->dtype, .rank = rank, .a = fct_ptr(a), .b = fct_ptr(b)};
    size_t es = fc_dtype_size(a->dtype);
    m.n = 1;
    for (int d = 0; d < rank; d++) {
        int64_t na = ia[d] >= 0 ? a->dim[ia[d]] : 1, nb = ib[d] >= 0 ? b->dim[ib[d]] : 1;
        if (na != nb && na != 1 && nb != 1)
            return fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld in %s and %lld in %s", op, names[d],
                           (long long)na, fct_describe(a, d1, sizeof d1), (long long)nb, fct_describe(b, d2, sizeof d2));
        m.dim[d] = na > nb ? na : nb;
        m.sa[d] = na > 1 ? a->stride[ia[d]] * (int64_t)es : 0;
        m.sb[d] = nb > 1 ? b->stride[ib[d]] * (int64_t)es : 0;
        m.n *= m.dim[d];
    }
    if (reduction == FC_REDUCE_NONE) {
        fc_tensor *out = fct_alloc(ctx, FC_F32, rank, m.dim, names);
        if (!out) return NULL;
        int64_t strides[3][FC_MAX_RANK];
        for (int d = 0; d < rank; d++) {
            strides[0][d] = out->stride[d] * 4;
            strides[1][d] = m.sa[d];
            strides[2][d] = m.sb[d];
        }
        char *base[3] = {fct_ptr(out), fct_ptr(a), fct_ptr(b)};
        fct_loop L;
        fct_loop_init(&L, rank, m.dim, 3, base, strides);
        mse_row_arg ra = {a->dtype};
        fct_loop_run(ctx, &L, mse_row, &ra, FCT_PARALLEL_MIN_ELEMWISE);
        return record_mse(ctx, out, a, b, reduction, m.n);
    }
    int64_t nblk = (m.n + MSE_BLOCK - 1) / MSE_BLOCK;
    fc_storage *ps = fc_storage_new(ctx, (size_t)nblk * sizeof(double));
    if (!ps) return NULL;
    m.part = ps->data;
    if (fc_ctx_threads(ctx) <= 1 || m.n < FCT_PARALLEL_MIN_ELEMWISE) {
        for (int64_t i = 0; i < nblk; i++) mse_block(&m, i, 0);
    } else {
        fc_workers_run(fc_ctx_workers(ctx), nblk, mse_block, &m);
    }
    double s = 0.0;
    for (int64_t i = 0; i < nblk; i++) s += m.part[i];
    fc_storage_release(ps);
    if (reduction == FC_REDUCE_MEAN) s /= (double)m.n;
    fc_tensor *out = fct_alloc(ctx, FC_F32, 0, NULL, NULL);
    if (out) *(float *)(void *)fct_ptr(out) = (float)s;
    return record_mse(ctx, out, a, b, reduction, m.n);
}
