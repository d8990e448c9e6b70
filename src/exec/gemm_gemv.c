/* SPDX-License-Identifier: MIT */
/* Skinny GEMM: a few rows of A (or one column of B) against a matrix that is
 * streamed from memory exactly once, through the generated dot and axpy
 * kernels. Packing would double the traffic of what is a memory-bound
 * product (LLM decoding: y = x·Wᵀ with one token).
 *
 *   B with K contiguous ([N, K], weights):  C[m, j] = dot(A[m, :], B[:, j])
 *   B with N contiguous ([K, N]):           C[m, j0..j1] = sum_k A[m, k] * B[k, j0..j1]
 *                                           (axpy over k in order, into an
 *                                           L1-resident accumulator row)
 *
 * Both are threaded over chunks of N; every output is computed by one call
 * sequence whatever the chunking, so the bits do not depend on the threads.
 * N == 1 is the same problem transposed (Cᵀ = Bᵀ·Aᵀ) with a strided C.
 * f16 / bf16 B in the dot layout goes through the generated dot_x1..dot_x8
 * kernels (registry/dot_rows.yaml): one call widens a weight row in
 * registers once and dots it against up to 8 rows of A, so up to
 * GEMV_HALF_MAX_M rows of A take this path (weights read from memory once,
 * then from L2 for the next group of 8 rows). Row r of C has the same bits
 * whichever group size computed it (the kernels' contract). In the axpy
 * layout, f16 / bf16 B is widened exactly into per-worker scratch, a row
 * segment at a time, right before use. */
#include <pthread.h>
#include <string.h>

#include "exec/gemm_internal.h"

/* At most this many rows of A take this path. Measured (1 thread, 3072x1024
 * weights, ratio to OpenBLAS in the same process): M = 1, 2 stream faster
 * here (2.5-3.1x, 1.8-1.9x) than packed (1.2-1.3x, 1.4x); at M = 3 the two
 * paths tie and from M = 4 the packed path wins (1.4-1.9x vs 1.1-1.4x). */
#define GEMV_MAX_M 2
/* f16 / bf16 B with K contiguous (weights [N, K]): packing would widen B into
 * f32 panels, an extra pass over twice the bytes, so the fused kernels win
 * further. Measured (1 thread, CPU time, loaded machine, f16 weights
 * 3072x1024 and 1024x3072, time of the packed path / this one): M = 3-8
 * 2.2-3.8x, 16 1.3-1.8x, 20 1.1-1.5x, 24 0.93-1.1x, 40-64 0.6-0.9x
 * (docs/BENCHMARK.md). */
#define GEMV_HALF_MAX_M 20
/* Outputs per chunk: dot path (B columns of K floats each) / axpy path. */
#define DOT_CHUNK 32
#define AXPY_CHUNK 512

typedef struct gv {
    size_t m, n, k;
    const void *a; /* the few rows: element (i, p) at a + i*rsa + p*csa, type at */
    fc_gemm_btype at;
    int64_t rsa, csa;
    const void *b; /* the streamed matrix: element (p, j) at b + p*rsb + j*csb, type bt */
    fc_gemm_btype bt;
    int64_t rsb, csb;
    float *c; /* element (i, j) at c + i*rsc + j*csc */
    int64_t rsc, csc;
    int accumulate;
    int dot;               /* 1: rsb == 1 (dot path); 0: csb == 1 (axpy path) */
    size_t chunk;          /* outputs per chunk */
    size_t most;           /* rows of A per half-kernel call, at most (max_group) */
    fc_gemm_scratch *s;    /* s->b: the rows of A, contiguous f32 (m x k) */
} gv;

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static size_t esize(fc_gemm_btype t) { return t == FC_GEMM_B_F32 ? sizeof(float) : sizeof(fc_f16); }

static const void *at(const void *base, fc_gemm_btype t, int64_t off)
{
    return (const char *)base + off * (int64_t)esize(t);
}

static float load(const void *base, fc_gemm_btype t, int64_t off)
{
    switch (t) {
    case FC_GEMM_B_F32: return ((const float *)base)[off];
    case FC_GEMM_B_F16: return fc_f16_to_f32(((const fc_f16 *)base)[off]);
    case FC_GEMM_B_BF16: return fc_bf16_to_f32(((const fc_bf16 *)base)[off]);
    }
    return 0.0f;
}

/* The largest group of rows of A one half-kernel call takes: 8, or 4 where
 * dot_x8 runs on AVX2 (16 ymm registers: its 16 accumulators spill, and it
 * measured slower than two dot_x4 passes). Re-read on every call: tests
 * re-resolve dispatch with an ISA cap. */
static size_t slot_x8;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

static void find_slot(void) { slot_x8 = fck_dispatch_slot_index("f16_dot_x8"); }

static size_t max_group(void)
{
    pthread_once(&slot_once, find_slot);
    if (slot_x8 >= FCK_SLOT_COUNT) return 4;
    /* by name: the fck_isa enum differs between architectures */
    return strcmp(fck_isa_table[fck_dispatch_chosen_isa(slot_x8)].name, "avx2") == 0 ? 4 : 8;
}

/* Whether the rows of A are few enough to stream B once as it is. */
static int few_rows(const fc_gemm_args *g)
{
    if (g->m <= GEMV_MAX_M && (g->rsb == 1 || g->csb == 1)) return 1;
    return g->btype != FC_GEMM_B_F32 && g->rsb == 1 && g->m <= GEMV_HALF_MAX_M;
}

/* The problem as seen from fc_gemm_args: normal, or transposed for N == 1. */
static void setup(gv *v, const fc_gemm_args *g)
{
    memset(v, 0, sizeof *v);
    v->k = (size_t)g->k;
    v->accumulate = g->accumulate;
    if (few_rows(g)) {
        v->m = (size_t)g->m;
        v->n = (size_t)g->n;
        v->a = g->a;
        v->at = FC_GEMM_B_F32;
        v->rsa = g->rsa;
        v->csa = g->csa;
        v->b = g->b;
        v->bt = g->btype;
        v->rsb = g->rsb;
        v->csb = g->csb;
        v->c = g->c;
        v->rsc = g->ldc;
        v->csc = 1;
    } else { /* N == 1: Cᵀ[1, M] = Bᵀ[1, K] · Aᵀ[K, M] */
        v->m = 1;
        v->n = (size_t)g->m;
        v->a = g->b;
        v->at = g->btype;
        v->rsa = 0;
        v->csa = g->rsb;
        v->b = g->a;
        v->bt = FC_GEMM_B_F32;
        v->rsb = g->csa;
        v->csb = g->rsa;
        v->c = g->c;
        v->rsc = 0;
        v->csc = g->ldc;
    }
    v->dot = v->rsb == 1;
    v->chunk = v->dot ? DOT_CHUNK : AXPY_CHUNK;
    v->most = max_group();
}

int fc_gemm_gemv_fits(const fc_gemm_args *g)
{
    if (few_rows(g)) return 1;
    return g->n == 1 && (g->csa == 1 || g->rsa == 1);
}

/* The kernel (8, 4, 2 or 1 rows) for the next group when `left` rows of A
 * remain and groups have at most `most` rows (8 or 4): 3 rows take dot_x4
 * and 5..7 dot_x8, the missing rows being zero rows of the scratch copy of A
 * whose outputs are dropped (one pass over the weights costs more than the
 * extra multiply-adds). */
static size_t group_rows(size_t left, size_t most)
{
    if (left >= most) return most;
    return left > 4 ? 8 : left == 3 ? 4 : left;
}

/* Rows of the scratch copy of A: m plus the zero rows of the last group. */
static size_t padded_rows(size_t m, size_t most)
{
    size_t p = 0;
    while (m > p) p += group_rows(m - p, most);
    return p;
}

/* Rows of the scratch copy of A the run reads (the half kernels' padding). */
static size_t a_rows(const gv *v)
{
    return v->dot && v->bt != FC_GEMM_B_F32 ? padded_rows(v->m, v->most) : v->m;
}

static size_t worker_floats(const gv *v)
{
    return v->dot ? 0 : v->chunk * (v->m + (v->bt == FC_GEMM_B_F32 ? 0 : 1));
}

int fc_gemm_gemv_reserve(const fc_gemm_args *g, fc_gemm_scratch *s, int nworkers)
{
    gv v;
    setup(&v, g);
    return fc_gemm_scratch_reserve(s, nworkers, a_rows(&v) * v.k, 0, 0, worker_floats(&v), 0);
}

static void store(const gv *v, size_t i, size_t j, float x)
{
    float *p = v->c + (int64_t)i * v->rsc + (int64_t)j * v->csc;
    *p = v->accumulate ? *p + x : x;
}

/* y[r] = dot(w[0..k), x + r*ldx) for r < rows (1, 2, 4 or 8), w in half storage. */
static void half_dots(const fck_table *kt, fc_gemm_btype bt, size_t rows, size_t k, const void *w, const float *x,
                      size_t ldx, float *y)
{
    switch (bt) {
    case FC_GEMM_B_F16:
        if (rows == 8) kt->f16_dot_x8(k, w, x, ldx, y);
        else if (rows == 4) kt->f16_dot_x4(k, w, x, ldx, y);
        else if (rows == 2) kt->f16_dot_x2(k, w, x, ldx, y);
        else kt->f16_dot_x1(k, w, x, ldx, y);
        return;
    case FC_GEMM_B_BF16:
        if (rows == 8) kt->bf16_dot_x8(k, w, x, ldx, y);
        else if (rows == 4) kt->bf16_dot_x4(k, w, x, ldx, y);
        else if (rows == 2) kt->bf16_dot_x2(k, w, x, ldx, y);
        else kt->bf16_dot_x1(k, w, x, ldx, y);
        return;
    case FC_GEMM_B_F32: break; /* not called: f32 B takes f32_dot */
    }
}

static void dot_chunk(void *arg, int64_t chunk, int worker)
{
    const gv *v = arg;
    const fck_table *kt = fck_kernels();
    (void)worker;
    size_t j0 = (size_t)chunk * v->chunk, j1 = min_sz(j0 + v->chunk, v->n);
    if (v->bt == FC_GEMM_B_F32) {
        for (size_t j = j0; j < j1; j++) {
            const float *bj = at(v->b, v->bt, (int64_t)j * v->csb);
            for (size_t i = 0; i < v->m; i++) store(v, i, j, kt->f32_dot(v->k, v->s->b + i * v->k, bj));
        }
        return;
    }
    /* Groups of rows of A outside, the chunk's weight rows inside: the
     * chunk (DOT_CHUNK rows of K halves) comes from memory for the first
     * group and from L2 for the next ones. (Blocking K so that a group's
     * rows of A stay in L1 measured no faster at K = 3072.) */
    float y[8] = {0};
    for (size_t i0 = 0; i0 < v->m;) {
        size_t rows = group_rows(v->m - i0, v->most), real = min_sz(rows, v->m - i0);
        for (size_t j = j0; j < j1; j++) {
            half_dots(kt, v->bt, rows, v->k, at(v->b, v->bt, (int64_t)j * v->csb), v->s->b + i0 * v->k, v->k, y);
            for (size_t r = 0; r < real; r++) store(v, i0 + r, j, y[r]);
        }
        i0 += rows;
    }
}

static void axpy_chunk(void *arg, int64_t chunk, int worker)
{
    const gv *v = arg;
    const fck_table *kt = fck_kernels();
    size_t j0 = (size_t)chunk * v->chunk, w = min_sz(v->chunk, v->n - j0);
    float *y = v->s->w[worker].t, *t = y + v->m * v->chunk;
    const float *arows = v->s->b;
    memset(y, 0, v->m * v->chunk * sizeof(float));
    for (size_t p = 0; p < v->k; p++) {
        const void *row = at(v->b, v->bt, (int64_t)p * v->rsb + (int64_t)j0);
        const float *bp = row;
        if (v->bt != FC_GEMM_B_F32) {
            fc_gemm_widen(v->bt, row, w, t);
            bp = t;
        }
        for (size_t i = 0; i < v->m; i++) kt->f32_axpy(w, bp, arows[i * v->k + p], y + i * v->chunk);
    }
    for (size_t i = 0; i < v->m; i++)
        for (size_t j = 0; j < w; j++) store(v, i, j0 + j, y[i * v->chunk + j]);
}

void fc_gemm_gemv_run(fc_workers *w, const fc_gemm_args *g, fc_gemm_scratch *s)
{
    gv v;
    setup(&v, g);
    v.s = s;
    /* The few rows of A, contiguous and widened (cheap: m*k elements). */
    for (size_t i = 0; i < v.m; i++) {
        float *o = s->b + i * v.k;
        if (v.csa == 1) fc_gemm_widen(v.at, at(v.a, v.at, (int64_t)i * v.rsa), v.k, o);
        else
            for (size_t p = 0; p < v.k; p++) o[p] = load(v.a, v.at, (int64_t)i * v.rsa + (int64_t)p * v.csa);
    }
    memset(s->b + v.m * v.k, 0, (a_rows(&v) - v.m) * v.k * sizeof(float));
    size_t chunks = (v.n + v.chunk - 1) / v.chunk;
    fc_workers_run(w, (int64_t)chunks, v.dot ? dot_chunk : axpy_chunk, &v);
}
