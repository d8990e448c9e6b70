/* SPDX-License-Identifier: MIT */
/* topk and argsort: each row along the axis is sorted on its own by a
 * stable merge sort of (key, index) pairs, where the key is a uint64 whose
 * unsigned order is the value order of the dtype (NaN above +inf, -0.0 equal
 * to +0.0). Rows run in parallel; a row's result does not depend on which
 * thread sorts it. */
#include <math.h>
#include <string.h>

#include "fucina/shape_ops.h"
#include "tensor/grad_record.h"
#include "tensor/shape_internal.h"
#include "tensor/quant_tensor.h"

typedef struct kv { uint64_t key; int64_t idx; } kv;

static inline uint64_t float_key(double v)
{
    if (isnan(v)) return UINT64_MAX;
    if (v == 0.0) v = 0.0; /* -0.0 sorts with +0.0 */
    uint64_t b;
    memcpy(&b, &v, 8);
    return (b >> 63) ? ~b : b | ((uint64_t)1 << 63);
}

static inline uint64_t elem_key(fc_dtype dt, const char *p)
{
    const uint64_t flip = (uint64_t)1 << 63;
    switch (dt) {
    case FC_BOOL: return *(const uint8_t *)p != 0;
    case FC_U8: return *(const uint8_t *)p;
    case FC_I8: return (uint64_t)(int64_t)*(const int8_t *)p ^ flip;
    case FC_I16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v ^ flip; }
    case FC_I32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v ^ flip; }
    case FC_I64: { int64_t v; memcpy(&v, p, 8); return (uint64_t)v ^ flip; }
    case FC_F16:
    case FC_BF16:
    case FC_F32:
    case FC_F64: return float_key(fct_load(dt, p));
    FC_CASE_BLOCK_DTYPES: return 0; /* refused before */
    }
    return 0;
}

static inline int kv_less(const kv *a, const kv *b)
{
    return a->key < b->key || (a->key == b->key && a->idx < b->idx);
}

/* Sort v[0..n) using tmp[0..n); returns the array holding the result. */
static kv *merge_sort(kv *v, kv *tmp, int64_t n)
{
    /* Insertion-sort runs of 16, then merge bottom-up. */
    const int64_t run = 16;
    for (int64_t s = 0; s < n; s += run) {
        int64_t e = s + run < n ? s + run : n;
        for (int64_t i = s + 1; i < e; i++) {
            kv x = v[i];
            int64_t j = i;
            while (j > s && kv_less(&x, &v[j - 1])) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    }
    kv *a = v, *b = tmp;
    for (int64_t w = run; w < n; w *= 2) {
        for (int64_t s = 0; s < n; s += 2 * w) {
            int64_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;
            int64_t i = s, j = m, k = s;
            while (i < m && j < e) b[k++] = kv_less(&a[j], &a[i]) ? a[j++] : a[i++];
            while (i < m) b[k++] = a[i++];
            while (j < e) b[k++] = a[j++];
        }
        kv *t = a;
        a = b;
        b = t;
    }
    return a;
}

typedef struct sort_job {
    fc_dtype dt;
    size_t es;
    int orank;                 /* axes other than the sorted one */
    int64_t odim[FC_MAX_RANK];
    int64_t tst[FC_MAX_RANK], vst[FC_MAX_RANK], ist[FC_MAX_RANK]; /* bytes, outer axes */
    int64_t tst_a, vst_a, ist_a;
    const char *t;
    char *vals, *inds;         /* either may be NULL */
    int64_t n, k;
    int desc;
    kv *scratch;               /* 2n per worker */
    int64_t rows, per_chunk;
} sort_job;

static void sort_chunk(void *arg, int64_t c, int worker)
{
    const sort_job *s = arg;
    int64_t r0 = c * s->per_chunk, r1 = r0 + s->per_chunk;
    if (r1 > s->rows) r1 = s->rows;
    if (r0 >= r1) return;
    kv *v = s->scratch + (int64_t)worker * 2 * s->n, *tmp = v + s->n;
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(r0, s->orank, s->odim, mi);
    for (int64_t r = r0; r < r1; r++) {
        int64_t tb = 0, vb = 0, ib = 0;
        for (int d = 0; d < s->orank; d++) {
            tb += mi[d] * s->tst[d];
            vb += mi[d] * s->vst[d];
            ib += mi[d] * s->ist[d];
        }
        const char *row = s->t + tb;
        for (int64_t i = 0; i < s->n; i++) {
            uint64_t key = elem_key(s->dt, row + i * s->tst_a);
            v[i].key = s->desc ? ~key : key;
            v[i].idx = i;
        }
        kv *sorted = merge_sort(v, tmp, s->n);
        for (int64_t i = 0; i < s->k; i++) {
            if (s->vals) memcpy(s->vals + vb + i * s->vst_a, row + sorted[i].idx * s->tst_a, s->es);
            if (s->inds) memcpy(s->inds + ib + i * s->ist_a, &sorted[i].idx, 8);
        }
        fcs_next(s->orank, s->odim, mi);
    }
}

/* Sort every row of t along axis a into vals / inds (contiguous, t's axes
 * with a of size k). Returns 0 after recording an error. */
static int sort_rows(fc_ctx *ctx, const fc_tensor *t, int a, int64_t k, int desc, fc_tensor *vals, fc_tensor *inds)
{
    sort_job s = {.dt = t->dtype, .es = fc_dtype_size(t->dtype), .t = fct_ptr(t), .n = t->dim[a], .k = k,
                  .desc = desc, .vals = vals ? fct_ptr(vals) : NULL, .inds = inds ? fct_ptr(inds) : NULL};
    int64_t vst[FC_MAX_RANK] = {0}, ist[FC_MAX_RANK] = {0};
    if (vals) fcs_byte_strides(vals, vst);
    if (inds) fcs_byte_strides(inds, ist);
    s.rows = 1;
    for (int i = 0, r = 0; i < t->rank; i++) {
        if (i == a) continue;
        s.odim[r] = t->dim[i];
        s.tst[r] = t->stride[i] * (int64_t)s.es;
        s.vst[r] = vst[i];
        s.ist[r] = ist[i];
        s.rows *= t->dim[i];
        r++;
    }
    s.orank = t->rank - 1;
    s.tst_a = t->stride[a] * (int64_t)s.es;
    s.vst_a = vst[a];
    s.ist_a = ist[a];
    int threads = fc_ctx_threads(ctx);
    int parallel = threads > 1 && s.rows > 1 && s.rows * s.n >= FCT_PARALLEL_MIN_ELEMWISE / 4;
    int workers = parallel ? fc_workers_count(fc_ctx_workers(ctx)) : 1;
    fc_storage *sc = fc_storage_new(ctx, (size_t)workers * 2 * (size_t)s.n * sizeof(kv));
    if (!sc) return 0;
    s.scratch = sc->data;
    if (!parallel) {
        s.per_chunk = s.rows;
        sort_chunk(&s, 0, 0);
    } else {
        int64_t chunks = (int64_t)threads * 4;
        if (chunks > s.rows) chunks = s.rows;
        s.per_chunk = (s.rows + chunks - 1) / chunks;
        fc_workers_run(fc_ctx_workers(ctx), (s.rows + s.per_chunk - 1) / s.per_chunk, sort_chunk, &s);
    }
    fc_storage_release(sc);
    return 1;
}

fc_status fc_topk(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t k, int largest, fc_tensor **values,
                  fc_tensor **indices)
{
    FCT_NO_BLOCKS(ctx, "fc_topk", FC_ERR_DTYPE, t);
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    if (!t) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    int a = fct_axis(ctx, "fc_topk", t, axis);
    if (a < 0) return fc_ctx_status(ctx);
    if (k < 1 || k > t->dim[a]) {
        char d[FCT_DESC_MAX];
        fc_fail(ctx, FC_ERR_SHAPE, "fc_topk: k = %lld is outside 1..%lld for axis \"%s\" of %s", (long long)k,
                (long long)t->dim[a], axis, fct_describe(t, d, sizeof d));
        return FC_ERR_SHAPE;
    }
    int64_t dim[FC_MAX_RANK];
    memcpy(dim, t->dim, sizeof dim);
    dim[a] = k;
    /* The values' gradient goes back to the positions the indices name, so
     * a recording call computes the indices even when they are not wanted. */
    int want_ix = indices || (values && fcg_enabled() && fcg_requires(t));
    fc_tensor *v = NULL, *ix = NULL;
    if (values && !(v = fct_alloc(ctx, t->dtype, t->rank, dim, t->axis))) return fc_ctx_status(ctx);
    if (want_ix && !(ix = fct_alloc(ctx, FC_I64, t->rank, dim, t->axis))) {
        if (v) fc_discard(ctx, v);
        return fc_ctx_status(ctx);
    }
    if (!sort_rows(ctx, t, a, k, largest != 0, v, ix)) {
        if (v) fc_discard(ctx, v);
        if (ix) fc_discard(ctx, ix);
        return fc_ctx_status(ctx);
    }
    fcg_node *nd = fcg_record(ctx, v, FCG_TOPK, "fc_topk", &t, 1);
    if (nd) {
        fcg_set_axes(nd, &t->axis[a], 1);
        fcg_save(nd, 0, ix);
    }
    if (values) *values = v;
    if (indices) {
        *indices = ix;
    } else if (ix) {
        fc_discard(ctx, ix); /* the record holds its own reference */
    }
    return FC_OK;
}

fc_tensor *fc_argsort(fc_ctx *ctx, fc_tensor *t, const char *axis, int descending)
{
    FCT_NO_BLOCKS(ctx, "fc_argsort", NULL, t);
    FCS_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_argsort", t, axis);
    if (a < 0) return NULL;
    fc_tensor *ix = fct_alloc(ctx, FC_I64, t->rank, t->dim, t->axis);
    if (!ix) return NULL;
    if (!sort_rows(ctx, t, a, t->dim[a], descending != 0, NULL, ix)) {
        fc_discard(ctx, ix);
        return NULL;
    }
    return ix;
}
