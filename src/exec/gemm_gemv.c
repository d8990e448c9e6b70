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
 * f16 / bf16 B is widened exactly into per-worker scratch, a row (dot) or a
 * row segment (axpy) at a time, right before use. */
#include <string.h>

#include "exec/gemm_internal.h"

/* At most this many rows of A take this path. Measured (1 thread, 3072x1024
 * weights, ratio to OpenBLAS in the same process): M = 1, 2 stream faster
 * here (2.5-3.1x, 1.8-1.9x) than packed (1.2-1.3x, 1.4x); at M = 3 the two
 * paths tie and from M = 4 the packed path wins (1.4-1.9x vs 1.1-1.4x). */
#define GEMV_MAX_M 2
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

/* The problem as seen from fc_gemm_args: normal, or transposed for N == 1. */
static void setup(gv *v, const fc_gemm_args *g)
{
    memset(v, 0, sizeof *v);
    v->k = (size_t)g->k;
    v->accumulate = g->accumulate;
    if (g->m <= GEMV_MAX_M && (g->rsb == 1 || g->csb == 1)) {
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
}

int fc_gemm_gemv_fits(const fc_gemm_args *g)
{
    if (g->m <= GEMV_MAX_M && (g->rsb == 1 || g->csb == 1)) return 1;
    return g->n == 1 && (g->csa == 1 || g->rsa == 1);
}

static size_t worker_floats(const gv *v)
{
    return v->dot ? (v->bt == FC_GEMM_B_F32 ? 0 : v->k) : v->chunk * (v->m + (v->bt == FC_GEMM_B_F32 ? 0 : 1));
}

int fc_gemm_gemv_reserve(const fc_gemm_args *g, fc_gemm_scratch *s, int nworkers)
{
    gv v;
    setup(&v, g);
    return fc_gemm_scratch_reserve(s, nworkers, v.m * v.k, 0, 0, worker_floats(&v), 0);
}

static void store(const gv *v, size_t i, size_t j, float x)
{
    float *p = v->c + (int64_t)i * v->rsc + (int64_t)j * v->csc;
    *p = v->accumulate ? *p + x : x;
}

static void dot_chunk(void *arg, int64_t chunk, int worker)
{
    const gv *v = arg;
    const fck_table *kt = fck_kernels();
    float *t = v->s->w[worker].t;
    size_t j0 = (size_t)chunk * v->chunk, j1 = min_sz(j0 + v->chunk, v->n);
    for (size_t j = j0; j < j1; j++) {
        const void *col = at(v->b, v->bt, (int64_t)j * v->csb);
        const float *bj = col;
        if (v->bt != FC_GEMM_B_F32) {
            fc_gemm_widen(v->bt, col, v->k, t);
            bj = t;
        }
        for (size_t i = 0; i < v->m; i++) store(v, i, j, kt->f32_dot(v->k, v->s->b + i * v->k, bj));
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
    size_t chunks = (v.n + v.chunk - 1) / v.chunk;
    fc_workers_run(w, (int64_t)chunks, v.dot ? dot_chunk : axpy_chunk, &v);
}
