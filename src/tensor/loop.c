/* SPDX-License-Identifier: MIT */
/* The strided loop engine: merge axes, then hand rows to a row function,
 * threaded over contiguous ranges of rows. */
#include <string.h>

#include "tensor/internal.h"

void fct_loop_init(fct_loop *L, int rank, const int64_t *dim, int nops,
                   char *const *base, const int64_t strides[][FC_MAX_RANK])
{
    L->nops = nops;
    for (int k = 0; k < nops; k++) L->base[k] = base[k];
    /* Drop size-1 axes, then merge axis d into d+1 when every operand has
     * stride[d] == stride[d+1] * dim[d+1]. */
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dim[d] == 1) continue;
        L->dim[r] = dim[d];
        for (int k = 0; k < nops; k++) L->stride[k][r] = strides[k][d];
        r++;
    }
    int m = 0;
    for (int d = 0; d < r; d++) {
        if (m > 0) {
            int mergeable = 1;
            for (int k = 0; k < nops; k++)
                if (L->stride[k][m - 1] != L->stride[k][d] * L->dim[d]) mergeable = 0;
            if (mergeable) {
                L->dim[m - 1] *= L->dim[d];
                for (int k = 0; k < nops; k++) L->stride[k][m - 1] = L->stride[k][d];
                continue;
            }
        }
        L->dim[m] = L->dim[d];
        for (int k = 0; k < nops; k++) L->stride[k][m] = L->stride[k][d];
        m++;
    }
    if (m == 0) { /* one element */
        L->dim[0] = 1;
        for (int k = 0; k < nops; k++) L->stride[k][0] = 0;
        m = 1;
    }
    L->rank = m;
}

typedef struct loop_job {
    const fct_loop *L;
    fct_row_fn fn;
    void *arg;
    int64_t rows, rows_per_chunk;
    int64_t segs, seg_len; /* > 1 segs: each row is split into column segments */
} loop_job;

/* Row r as an index over the outer axes (all but the innermost). */
static void row_index(const fct_loop *L, int64_t r, int64_t *idx)
{
    for (int d = L->rank - 2; d >= 0; d--) {
        idx[d] = r % L->dim[d];
        r /= L->dim[d];
    }
}

static void run_rows(const fct_loop *L, int64_t r0, int64_t r1, fct_row_fn fn, void *arg, int worker)
{
    int outer = L->rank - 1;
    int64_t n = L->dim[outer];
    int64_t inner[FCT_MAX_OPS];
    for (int k = 0; k < L->nops; k++) inner[k] = L->stride[k][outer];
    int64_t idx[FC_MAX_RANK] = {0};
    row_index(L, r0, idx); /* then stepped row by row */
    char *p[FCT_MAX_OPS];
    for (int64_t r = r0; r < r1; r++) {
        for (int k = 0; k < L->nops; k++) {
            char *q = L->base[k];
            for (int d = 0; d < outer; d++) q += idx[d] * L->stride[k][d];
            p[k] = q;
        }
        fn(arg, n, p, inner, worker);
        for (int d = outer - 1; d >= 0; d--) {
            if (++idx[d] < L->dim[d]) break;
            idx[d] = 0;
        }
    }
}

/* One column segment [c0, c1) of row r. */
static void run_segment(const fct_loop *L, int64_t r, int64_t c0, int64_t c1, fct_row_fn fn, void *arg, int worker)
{
    int outer = L->rank - 1;
    int64_t idx[FC_MAX_RANK] = {0};
    row_index(L, r, idx);
    char *p[FCT_MAX_OPS];
    int64_t inner[FCT_MAX_OPS];
    for (int k = 0; k < L->nops; k++) {
        char *q = L->base[k];
        for (int d = 0; d < outer; d++) q += idx[d] * L->stride[k][d];
        inner[k] = L->stride[k][outer];
        p[k] = q + c0 * inner[k];
    }
    fn(arg, c1 - c0, p, inner, worker);
}

static void loop_chunk(void *arg, int64_t chunk, int worker)
{
    loop_job *j = arg;
    if (j->segs > 1) {
        int64_t r = chunk / j->segs, s = chunk % j->segs;
        int64_t n = j->L->dim[j->L->rank - 1];
        int64_t c0 = s * j->seg_len, c1 = c0 + j->seg_len;
        if (c1 > n) c1 = n;
        if (c0 < c1) run_segment(j->L, r, c0, c1, j->fn, j->arg, worker);
        return;
    }
    int64_t r0 = chunk * j->rows_per_chunk;
    int64_t r1 = r0 + j->rows_per_chunk;
    if (r1 > j->rows) r1 = j->rows;
    run_rows(j->L, r0, r1, j->fn, j->arg, worker);
}

void fct_loop_run(fc_ctx *ctx, const fct_loop *L, fct_row_fn fn, void *arg, int64_t parallel_min)
{
    int64_t rows = 1;
    for (int d = 0; d < L->rank - 1; d++) rows *= L->dim[d];
    int64_t total = rows * L->dim[L->rank - 1];
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || total < parallel_min) {
        run_rows(L, 0, rows, fn, arg, 0);
        return;
    }
    /* A few chunks per thread balance uneven rows without tiny chunks. */
    int64_t chunks = (int64_t)threads * 4;
    if (rows < chunks) {
        /* Few long rows: split rows into column segments (multiples of 64
         * elements, so vector kernels keep whole vectors). */
        int64_t n = L->dim[L->rank - 1];
        int64_t segs = (chunks + rows - 1) / rows;
        int64_t seg_len = ((n + segs - 1) / segs + 63) & ~(int64_t)63;
        segs = (n + seg_len - 1) / seg_len;
        loop_job j = {L, fn, arg, rows, 1, segs, seg_len};
        fc_workers_run(fc_ctx_workers(ctx), rows * segs, loop_chunk, &j);
        return;
    }
    if (chunks > rows) chunks = rows;
    loop_job j = {L, fn, arg, rows, (rows + chunks - 1) / chunks, 1, 0};
    int64_t n_chunks = (rows + j.rows_per_chunk - 1) / j.rows_per_chunk;
    fc_workers_run(fc_ctx_workers(ctx), n_chunks, loop_chunk, &j);
}

void fct_strides_for(const fc_tensor *t, int rank, const char *const *names, int64_t *out)
{
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    for (int d = 0; d < rank; d++) {
        out[d] = 0;
        for (int i = 0; i < t->rank; i++)
            if (t->axis[i] == names[d] && t->dim[i] != 1) out[d] = t->stride[i] * es;
    }
}

void fct_loop_unary(fct_loop *L, fc_tensor *y, const fc_tensor *x)
{
    int64_t strides[2][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(x->dtype);
    for (int i = 0; i < x->rank; i++) {
        strides[0][i] = y->stride[i] * es;
        strides[1][i] = x->stride[i] * es;
    }
    char *base[2] = {fct_ptr(y), fct_ptr(x)};
    fct_loop_init(L, x->rank, x->dim, 2, base, strides);
}
