/* SPDX-License-Identifier: MIT */
/* Index ops: get_rows (embedding), index_select, gather, scatter_add. Every
 * index is checked before anything is written. */
#include <string.h>

#include "fucina/half.h"
#include "fucina/shape_ops.h"
#include "tensor/grad_record.h"
#include "tensor/quant_tensor.h"
#include "tensor/shape_internal.h"

/* ---- copies of whole slices picked along one axis ------------------------ */

/* dst slice j (rank axes, `dim`) = src slice idx[j]. */
typedef struct sel_job {
    fc_ctx *ctx;
    int rank;
    const int64_t *dim;
    char *dst;
    const int64_t *dst_st;
    int64_t dst_j;
    const char *src;
    const int64_t *src_st;
    int64_t src_a;
    const int64_t *idx;
    int64_t n, per_chunk;
    size_t es;
    int serial;
} sel_job;

static void sel_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const sel_job *j = arg;
    int64_t j0 = c * j->per_chunk, j1 = j0 + j->per_chunk;
    if (j1 > j->n) j1 = j->n;
    for (int64_t i = j0; i < j1; i++)
        fcs_copy(j->ctx, j->rank, j->dim, j->dst + i * j->dst_j, j->dst_st, j->src + j->idx[i] * j->src_a, j->src_st,
                 j->es, j->serial);
}

static void select_slices(fc_ctx *ctx, sel_job *j)
{
    int64_t block = 1;
    for (int i = 0; i < j->rank; i++) block *= j->dim[i];
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || j->n * block < FCT_PARALLEL_MIN_ELEMWISE || j->n < 2 * threads) {
        /* Few slices: one after another, each copy threaded on its own. */
        j->serial = 0;
        j->per_chunk = j->n;
        sel_chunk(j, 0, 0);
        return;
    }
    j->serial = 1;
    int64_t chunks = (int64_t)threads * 4;
    if (chunks > j->n) chunks = j->n;
    j->per_chunk = (j->n + chunks - 1) / chunks;
    fc_workers_run(fc_ctx_workers(ctx), (j->n + j->per_chunk - 1) / j->per_chunk, sel_chunk, j);
}

fc_tensor *fc_get_rows(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids)
{
    if (!ctx || !table || !ids) return NULL;
    if (fc_dtype_is_block(table->dtype)) return fct_block_get_rows(ctx, table, ids); /* decodes the picked rows */
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (table->rank < 1)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_get_rows: the table %s has no rows axis", fct_describe(table, d1, sizeof d1));
    const char *rows = table->axis[0];
    if (!fcs_is_index_dtype(ids->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_get_rows: ids %s must be i32 or i64 (rows axis \"%s\" of %s)",
                       fct_describe(ids, d1, sizeof d1), rows, fct_describe(table, d2, sizeof d2));
    int rank = ids->rank + table->rank - 1;
    if (rank > FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_get_rows: ids %s and table %s (rows axis \"%s\") give rank %d > %d",
                       fct_describe(ids, d1, sizeof d1), fct_describe(table, d2, sizeof d2), rows, rank, FC_MAX_RANK);
    int64_t dim[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    for (int i = 0; i < ids->rank; i++) {
        dim[i] = ids->dim[i];
        names[i] = ids->axis[i];
        for (int k = 1; k < table->rank; k++)
            if (table->axis[k] == ids->axis[i])
                return fc_fail(ctx, FC_ERR_AXIS, "fc_get_rows: axis \"%s\" is in both ids %s and table %s", ids->axis[i],
                               fct_describe(ids, d1, sizeof d1), fct_describe(table, d2, sizeof d2));
    }
    for (int k = 1; k < table->rank; k++) {
        dim[ids->rank + k - 1] = table->dim[k];
        names[ids->rank + k - 1] = table->axis[k];
    }
    fc_storage *is = fcs_load_index(ctx, "fc_get_rows", "ids", ids);
    if (!is) return NULL;
    int64_t n = fct_numel(ids);
    if (!fcs_check_range(ctx, "fc_get_rows", is->data, n, table->dim[0], rows, table)) {
        fc_storage_release(is);
        return NULL;
    }
    fc_tensor *out = fct_alloc(ctx, table->dtype, rank, dim, names);
    if (!out) {
        fc_storage_release(is);
        return NULL;
    }
    size_t es = fc_dtype_size(table->dtype);
    int64_t dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    int64_t row = 1;
    for (int k = 1; k < table->rank; k++) {
        dst_st[k - 1] = out->stride[ids->rank + k - 1] * (int64_t)es;
        src_st[k - 1] = table->stride[k] * (int64_t)es;
        row *= table->dim[k];
    }
    sel_job j = {ctx, table->rank - 1, table->dim + 1, fct_ptr(out), dst_st, row * (int64_t)es, fct_ptr(table),
                 src_st, table->stride[0] * (int64_t)es, is->data, n, 0, es, 0};
    select_slices(ctx, &j);
    fc_storage_release(is);
    /* ids is an operand (kept alive, and checked for in-place changes)
     * that never needs a gradient. */
    fc_tensor *in[2] = {table, ids};
    fcg_record(ctx, out, FCG_GET_ROWS, "fc_get_rows", in, 2);
    return out;
}

fc_tensor *fc_index_select(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx)
{
    FCT_NO_BLOCKS(ctx, "fc_index_select", NULL, t);
    if (!ctx || !t || !idx) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int a = fct_axis(ctx, "fc_index_select", t, axis);
    if (a < 0) return NULL;
    if (idx->rank != 1)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_index_select: idx %s must have rank 1 (axis \"%s\" of %s)",
                       fct_describe(idx, d1, sizeof d1), axis, fct_describe(t, d2, sizeof d2));
    fc_storage *is = fcs_load_index(ctx, "fc_index_select", "idx", idx);
    if (!is) return NULL;
    int64_t n = idx->dim[0];
    if (!fcs_check_range(ctx, "fc_index_select", is->data, n, t->dim[a], t->axis[a], t)) {
        fc_storage_release(is);
        return NULL;
    }
    int64_t dim[FC_MAX_RANK];
    memcpy(dim, t->dim, sizeof dim);
    dim[a] = n;
    fc_tensor *out = fct_alloc(ctx, t->dtype, t->rank, dim, t->axis);
    if (!out) {
        fc_storage_release(is);
        return NULL;
    }
    size_t es = fc_dtype_size(t->dtype);
    int64_t odim[FC_MAX_RANK], dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    for (int i = 0, r = 0; i < t->rank; i++) {
        if (i == a) continue;
        odim[r] = t->dim[i];
        dst_st[r] = out->stride[i] * (int64_t)es;
        src_st[r] = t->stride[i] * (int64_t)es;
        r++;
    }
    sel_job j = {ctx, t->rank - 1, odim, fct_ptr(out), dst_st, out->stride[a] * (int64_t)es, fct_ptr(t), src_st,
                 t->stride[a] * (int64_t)es, is->data, n, 0, es, 0};
    select_slices(ctx, &j);
    fc_storage_release(is);
    fc_tensor *in[2] = {t, idx};
    fcg_node *nd = fcg_record(ctx, out, FCG_INDEX_SELECT, "fc_index_select", in, 2);
    if (nd) fcg_set_axes(nd, &t->axis[a], 1);
    return out;
}

/* ---- gather --------------------------------------------------------------- */

/* Does idx have exactly t's axis names? perm[d] = t's axis for idx's axis d. */
static int match_names(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *t, const fc_tensor *x,
                       const char *axis, int *perm)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    for (int d = 0; d < x->rank; d++) {
        perm[d] = -1;
        for (int i = 0; i < t->rank; i++)
            if (t->axis[i] == x->axis[d]) perm[d] = i;
        if (perm[d] < 0) {
            fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" of %s %s is not in %s (axis \"%s\")", op, x->axis[d], what,
                    fct_describe(x, d1, sizeof d1), fct_describe(t, d2, sizeof d2), axis);
            return 0;
        }
    }
    if (x->rank != t->rank) {
        for (int i = 0; i < t->rank; i++) {
            int found = 0;
            for (int d = 0; d < x->rank; d++)
                if (perm[d] == i) found = 1;
            if (!found) {
                fc_fail(ctx, FC_ERR_AXIS, "%s: %s %s lacks axis \"%s\" of %s (axis \"%s\")", op, what,
                        fct_describe(x, d1, sizeof d1), t->axis[i], fct_describe(t, d2, sizeof d2), axis);
                return 0;
            }
        }
    }
    return 1;
}

static inline void copy_elem(char *d, const char *s, size_t es)
{
    switch (es) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
    }
}

typedef struct gather_job {
    int rank, ad;
    const int64_t *dim; /* idx's dims */
    int64_t tst[FC_MAX_RANK]; /* t's byte stride for each of idx's axes */
    const char *t;
    char *out;
    const int64_t *idx;
    int64_t n, per_chunk;
    size_t es;
} gather_job;

static void gather_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const gather_job *g = arg;
    int64_t l0 = c * g->per_chunk, l1 = l0 + g->per_chunk;
    if (l1 > g->n) l1 = g->n;
    if (l0 >= l1) return;
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(l0, g->rank, g->dim, mi);
    for (int64_t l = l0; l < l1; l++) {
        int64_t off = 0;
        for (int d = 0; d < g->rank; d++) off += (d == g->ad ? g->idx[l] : mi[d]) * g->tst[d];
        copy_elem(g->out + l * (int64_t)g->es, g->t + off, g->es);
        fcs_next(g->rank, g->dim, mi);
    }
}

fc_tensor *fc_gather(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx)
{
    FCT_NO_BLOCKS(ctx, "fc_gather", NULL, t);
    if (!ctx || !t || !idx) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int a = fct_axis(ctx, "fc_gather", t, axis);
    if (a < 0) return NULL;
    if (!fcs_is_index_dtype(idx->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_gather: idx %s must be i32 or i64 (axis \"%s\" of %s)",
                       fct_describe(idx, d1, sizeof d1), axis, fct_describe(t, d2, sizeof d2));
    int perm[FC_MAX_RANK];
    if (!match_names(ctx, "fc_gather", "idx", t, idx, axis, perm)) return NULL;
    int ad = -1;
    for (int d = 0; d < idx->rank; d++) {
        if (perm[d] == a) {
            ad = d;
            continue;
        }
        if (idx->dim[d] > t->dim[perm[d]])
            return fc_fail(ctx, FC_ERR_SHAPE, "fc_gather: axis \"%s\" has size %lld in idx %s but %lld in %s (gather axis \"%s\")",
                           idx->axis[d], (long long)idx->dim[d], fct_describe(idx, d1, sizeof d1),
                           (long long)t->dim[perm[d]], fct_describe(t, d2, sizeof d2), axis);
    }
    fc_storage *is = fcs_load_index(ctx, "fc_gather", "idx", idx);
    if (!is) return NULL;
    int64_t n = fct_numel(idx);
    if (!fcs_check_range(ctx, "fc_gather", is->data, n, t->dim[a], t->axis[a], t)) {
        fc_storage_release(is);
        return NULL;
    }
    fc_tensor *out = fct_alloc(ctx, t->dtype, idx->rank, idx->dim, idx->axis);
    if (!out) {
        fc_storage_release(is);
        return NULL;
    }
    gather_job g = {idx->rank, ad, idx->dim, {0}, fct_ptr(t), fct_ptr(out), is->data, n, n, fc_dtype_size(t->dtype)};
    for (int d = 0; d < idx->rank; d++) g.tst[d] = t->stride[perm[d]] * (int64_t)g.es;
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || n < FCT_PARALLEL_MIN_ELEMWISE) {
        gather_chunk(&g, 0, 0);
    } else {
        int64_t chunks = (int64_t)threads * 4;
        g.per_chunk = (n + chunks - 1) / chunks;
        fc_workers_run(fc_ctx_workers(ctx), (n + g.per_chunk - 1) / g.per_chunk, gather_chunk, &g);
    }
    fc_storage_release(is);
    fc_tensor *in[2] = {t, idx};
    fcg_node *nd = fcg_record(ctx, out, FCG_GATHER, "fc_gather", in, 2);
    if (nd) fcg_set_axes(nd, &t->axis[a], 1);
    return out;
}

/* ---- scatter_add ---------------------------------------------------------- */

/* *d += *s in dtype dt, rounded as one PyTorch addition. */
static inline void add_elem(fc_dtype dt, char *d, const char *s)
{
    switch (dt) {
    case FC_BOOL: *d = (char)((*d != 0) | (*s != 0)); return;
    case FC_U8: *(uint8_t *)d = (uint8_t)(*(uint8_t *)d + *(const uint8_t *)s); return;
    case FC_I8: *(uint8_t *)d = (uint8_t)(*(uint8_t *)d + *(const uint8_t *)s); return;
    case FC_I16: {
        uint16_t x, y;
        memcpy(&x, d, 2); memcpy(&y, s, 2);
        x = (uint16_t)(x + y);
        memcpy(d, &x, 2);
        return;
    }
    case FC_I32: {
        uint32_t x, y;
        memcpy(&x, d, 4); memcpy(&y, s, 4);
        x += y;
        memcpy(d, &x, 4);
        return;
    }
    case FC_I64: {
        uint64_t x, y;
        memcpy(&x, d, 8); memcpy(&y, s, 8);
        x += y;
        memcpy(d, &x, 8);
        return;
    }
    case FC_F16: {
        fc_f16 x, y;
        memcpy(&x, d, 2); memcpy(&y, s, 2);
        x = fc_f32_to_f16(fc_f16_to_f32(x) + fc_f16_to_f32(y));
        memcpy(d, &x, 2);
        return;
    }
    case FC_BF16: {
        fc_bf16 x, y;
        memcpy(&x, d, 2); memcpy(&y, s, 2);
        x = fc_f32_to_bf16(fc_bf16_to_f32(x) + fc_bf16_to_f32(y));
        memcpy(d, &x, 2);
        return;
    }
    case FC_F32: {
        float x, y;
        memcpy(&x, d, 4); memcpy(&y, s, 4);
        x += y;
        memcpy(d, &x, 4);
        return;
    }
    case FC_F64: {
        double x, y;
        memcpy(&x, d, 8); memcpy(&y, s, 8);
        x += y;
        memcpy(d, &x, 8);
        return;
    }
    FC_CASE_BLOCK_DTYPES: return; /* refused before */
    }
}

typedef struct scatter_job {
    fc_dtype dt;
    int rank, ad;
    int64_t rdim[FC_MAX_RANK]; /* idx's dims with the scatter axis at 1 */
    int64_t ost[FC_MAX_RANK], sst[FC_MAX_RANK], ist[FC_MAX_RANK]; /* bytes / elements per idx axis */
    int64_t len;               /* idx's size along the scatter axis */
    char *out;
    const char *src;
    const int64_t *idx;
    int64_t rows, per_chunk;
} scatter_job;

static void scatter_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const scatter_job *s = arg;
    int64_t r0 = c * s->per_chunk, r1 = r0 + s->per_chunk;
    if (r1 > s->rows) r1 = s->rows;
    if (r0 >= r1) return;
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(r0, s->rank, s->rdim, mi);
    for (int64_t r = r0; r < r1; r++) {
        int64_t ob = 0, sb = 0, ib = 0;
        for (int d = 0; d < s->rank; d++) {
            ob += mi[d] * s->ost[d];
            sb += mi[d] * s->sst[d];
            ib += mi[d] * s->ist[d];
        }
        for (int64_t j = 0; j < s->len; j++)
            add_elem(s->dt, s->out + ob + s->idx[ib + j * s->ist[s->ad]] * s->ost[s->ad], s->src + sb + j * s->sst[s->ad]);
        fcs_next(s->rank, s->rdim, mi);
    }
}

fc_tensor *fc_scatter_add(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx, fc_tensor *src)
{
    FCT_NO_BLOCKS(ctx, "fc_scatter_add", NULL, t, src);
    if (!ctx || !t || !idx || !src) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int a = fct_axis(ctx, "fc_scatter_add", t, axis);
    if (a < 0) return NULL;
    if (!fcs_is_index_dtype(idx->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_scatter_add: idx %s must be i32 or i64 (axis \"%s\" of %s)",
                       fct_describe(idx, d1, sizeof d1), axis, fct_describe(t, d2, sizeof d2));
    if (src->dtype != t->dtype)
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_scatter_add: src %s and %s (axis \"%s\") differ in dtype",
                       fct_describe(src, d1, sizeof d1), fct_describe(t, d2, sizeof d2), axis);
    int perm[FC_MAX_RANK], sperm[FC_MAX_RANK];
    if (!match_names(ctx, "fc_scatter_add", "idx", t, idx, axis, perm)) return NULL;
    if (!match_names(ctx, "fc_scatter_add", "src", t, src, axis, sperm)) return NULL;
    int ad = -1;
    for (int d = 0; d < idx->rank; d++) {
        if (perm[d] == a) ad = d;
        int64_t ssz = src->dim[fc_tensor_axis_index(src, idx->axis[d])];
        if (idx->dim[d] > ssz)
            return fc_fail(ctx, FC_ERR_SHAPE, "fc_scatter_add: axis \"%s\" has size %lld in idx %s but %lld in src %s (scatter axis \"%s\")",
                           idx->axis[d], (long long)idx->dim[d], fct_describe(idx, d1, sizeof d1), (long long)ssz,
                           fct_describe(src, d2, sizeof d2), axis);
        if (perm[d] != a && idx->dim[d] > t->dim[perm[d]])
            return fc_fail(ctx, FC_ERR_SHAPE, "fc_scatter_add: axis \"%s\" has size %lld in idx %s but %lld in %s (scatter axis \"%s\")",
                           idx->axis[d], (long long)idx->dim[d], fct_describe(idx, d1, sizeof d1),
                           (long long)t->dim[perm[d]], fct_describe(t, d2, sizeof d2), axis);
    }
    fc_storage *is = fcs_load_index(ctx, "fc_scatter_add", "idx", idx);
    if (!is) return NULL;
    int64_t n = fct_numel(idx);
    if (!fcs_check_range(ctx, "fc_scatter_add", is->data, n, t->dim[a], t->axis[a], t)) {
        fc_storage_release(is);
        return NULL;
    }
    fc_tensor *out = fct_alloc_like(ctx, t->dtype, t);
    if (!out) {
        fc_storage_release(is);
        return NULL;
    }
    size_t es = fc_dtype_size(t->dtype);
    int64_t ost[FC_MAX_RANK], tst[FC_MAX_RANK];
    fcs_byte_strides(out, ost);
    fcs_byte_strides(t, tst);
    fcs_copy(ctx, t->rank, t->dim, fct_ptr(out), ost, fct_ptr(t), tst, es, 0);

    scatter_job s = {.dt = t->dtype, .rank = idx->rank, .ad = ad, .len = idx->dim[ad], .out = fct_ptr(out),
                     .src = fct_ptr(src), .idx = is->data};
    int64_t ist = 1;
    for (int d = idx->rank - 1; d >= 0; d--) {
        s.rdim[d] = d == ad ? 1 : idx->dim[d];
        s.ost[d] = out->stride[perm[d]] * (int64_t)es;
        s.sst[d] = src->stride[fc_tensor_axis_index(src, idx->axis[d])] * (int64_t)es;
        s.ist[d] = ist;
        ist *= idx->dim[d];
    }
    s.rows = n / s.len;
    s.per_chunk = s.rows;
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || n < FCT_PARALLEL_MIN_ELEMWISE || s.rows < 2) {
        scatter_chunk(&s, 0, 0);
    } else {
        int64_t chunks = (int64_t)threads * 4;
        if (chunks > s.rows) chunks = s.rows;
        s.per_chunk = (s.rows + chunks - 1) / chunks;
        fc_workers_run(fc_ctx_workers(ctx), (s.rows + s.per_chunk - 1) / s.per_chunk, scatter_chunk, &s);
    }
    fc_storage_release(is);
    fc_tensor *in[3] = {t, idx, src};
    fcg_node *nd = fcg_record(ctx, out, FCG_SCATTER_ADD, "fc_scatter_add", in, 3);
    if (nd) fcg_set_axes(nd, &t->axis[a], 1);
    return out;
}
