/* SPDX-License-Identifier: MIT */
/* The blocked GEMM (BLIS-style loops around the generated micro-kernel).
 *
 *   for ms over M by SUPER_ROWS:              A super-block
 *     for pc over K by KC:                    the K order: fixed, ascending
 *       for jc over N by NC:                  B block columns
 *         pack B[pc.., jc..] (KC x NC)        shared; chunks of columns in parallel,
 *         (and, at jc = 0, A[ms.., pc..])     with the M blocks of A in the same loop
 *         for each task (M block x N sub-block) in parallel:
 *           for each NR panel of B, for each MR panel of A:
 *             micro-kernel, accumulate = (pc > 0 || caller's accumulate)
 *
 * So A and B are each packed once (B once per super-block), at the cost of
 * two barriers per (pc, jc) block.
 *
 * When M fits one block (M <= MC: LLM prefill chunks, small batches) there
 * is no shared B: each task owns a range of C's columns for the whole K loop
 * and packs A and its own B columns (owned_columns), so a product is one
 * parallel loop with no barrier and B is streamed from memory once.
 *
 * Every element of C is computed by exactly one task per (jc, pc) block, by
 * the same kernel calls in the same pc order whatever the thread count or the
 * task grid (task edges fall on multiples of MR and NR, so a tile is an edge
 * tile only at the edge of C): results are bitwise independent of threads.
 * Edge tiles run into a per-worker MR x NR scratch tile (accumulate = 0) and
 * the valid part is stored as tile or C + tile, the same single rounding the
 * kernel's own accumulate does. */
#include <string.h>

#include "exec/gemm_internal.h"

/* Columns of B packed per chunk of the packing loop (rounded to NR). */
#define PACK_CHUNK_COLS 256
/* Tasks per thread to aim for when the M blocks alone are too few. */
#define TASKS_PER_THREAD 4
/* Narrowest N sub-block of a task (per-task overhead, B panel reuse). */
#define MIN_TASK_COLS 128
/* Rows of A packed at once (the shared packed A: SUPER_ROWS x KC floats,
 * 3 MiB, in L3); B is packed once per super-block. */
#define SUPER_ROWS 1536

typedef struct blk {
    const fc_gemm_args *g;
    const fc_gemm_geom *geo;
    fc_gemm_scratch *s;
    size_t ms0, ms;        /* the current M super-block: rows [ms0, ms0 + ms) */
    size_t jc, nc, pc, kc; /* the current N and K blocks */
    int acc;               /* micro-kernel accumulate flag for this pc */
    int pack_a;            /* this packing loop also packs the A super-block */
    float *apk, *bpk;      /* shared packed A super-block (KC deep), B block */
    size_t bw;             /* columns per packing chunk (multiple of nr) */
    size_t mt_rows, n_mt;  /* task grid: M blocks (multiple of mr) ... */
    size_t nt_cols, n_nt;  /* ... x N sub-blocks of the current nc (multiple of nr) */
} blk;

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

/* ---- packing B ------------------------------------------------------------- */

/* Panels of nr columns straight from any strides (and any B type). */
static void gather_b(const fc_gemm_args *g, size_t nr, int64_t k0, size_t kc, int64_t j0, size_t w, float *dst)
{
    for (size_t q = 0; q < w; q += nr) {
        size_t n = min_sz(nr, w - q);
        float *o = dst + q * kc;
        for (size_t p = 0; p < kc; p++, o += nr) {
            size_t j = 0;
            for (; j < n; j++) o[j] = fc_gemm_b_at(g, k0 + (int64_t)p, j0 + (int64_t)(q + j));
            for (; j < nr; j++) o[j] = 0.0f;
        }
    }
}

/* Pack columns [j, j + w) of B rows [pc, pc + kc) into ceil(w/nr) panels at dst. */
static void pack_b_cols(const fc_gemm_args *g, const fc_gemm_geom *geo, size_t pc, size_t kc, size_t j, size_t w,
                        float *dst, float *t)
{
    int64_t k = (int64_t)pc, jj = (int64_t)j;
    if (g->btype == FC_GEMM_B_F32) {
        if (g->csb == 1 && g->rsb >= 0) geo->pack_b(kc, w, fc_gemm_b_ptr(g, k, jj), (size_t)g->rsb, dst);
        else if (g->rsb == 1 && g->csb >= 0) geo->pack_bt(kc, w, fc_gemm_b_ptr(g, k, jj), (size_t)g->csb, dst);
        else gather_b(g, geo->nr, k, kc, jj, w, dst);
        return;
    }
    /* f16 / bf16: widen the block exactly into contiguous scratch t, then pack. */
    if (g->csb == 1) {
        for (size_t p = 0; p < kc; p++) fc_gemm_widen(g->btype, fc_gemm_b_ptr(g, k + (int64_t)p, jj), w, t + p * w);
        geo->pack_b(kc, w, t, w, dst);
    } else if (g->rsb == 1) {
        for (size_t q = 0; q < w; q++) fc_gemm_widen(g->btype, fc_gemm_b_ptr(g, k, jj + (int64_t)q), kc, t + q * kc);
        geo->pack_bt(kc, w, t, kc, dst);
    } else {
        gather_b(g, geo->nr, k, kc, jj, w, dst);
    }
}

/* ---- packing A and the micro-kernel loops ------------------------------------ */

static void pack_a_block(const fc_gemm_args *g, const fc_gemm_geom *geo, size_t i0, size_t rows, size_t pc, size_t kc,
                         float *dst)
{
    if (g->csa == 1 && g->rsa >= 0) {
        geo->pack_a(rows, kc, g->a + (int64_t)i0 * g->rsa + (int64_t)pc, (size_t)g->rsa, dst);
        return;
    }
    /* Transposed (rsa == 1: the inner loop reads contiguously) or strided A. */
    size_t mr = geo->mr;
    for (size_t r = 0; r < rows; r += mr) {
        size_t m = min_sz(mr, rows - r);
        const float *src = g->a + (int64_t)(i0 + r) * g->rsa + (int64_t)pc * g->csa;
        float *o = dst + r * kc;
        for (size_t p = 0; p < kc; p++, o += mr) {
            const float *sp = src + (int64_t)p * g->csa;
            size_t i = 0;
            for (; i < m; i++) o[i] = sp[(int64_t)i * g->rsa];
            for (; i < mr; i++) o[i] = 0.0f;
        }
    }
}

/* C[i0 .. i0+rows, j .. j+ncols] (+)= packed A block x packed B columns
 * (bpk: panels of the columns starting at j). */
static void multiply(const fc_gemm_args *g, const fc_gemm_geom *geo, const float *apk, size_t i0, size_t rows,
                     const float *bpk, size_t j, size_t ncols, size_t kc, int acc, float *tile)
{
    size_t mr = geo->mr, nr = geo->nr, ldc = (size_t)g->ldc;
    /* B micro-panel outer (reused across the A panels of the block), A
     * micro-panel inner: measured >= the other order. */
    for (size_t jr = 0; jr < ncols; jr += nr) {
        const float *bp = bpk + jr * kc;
        size_t n = min_sz(nr, ncols - jr);
        for (size_t ir = 0; ir < rows; ir += mr) {
            const float *ap = apk + ir * kc;
            size_t m = min_sz(mr, rows - ir);
            float *cp = g->c + (i0 + ir) * ldc + j + jr;
            if (m == mr && n == nr) {
                geo->kernel(kc, ap, bp, cp, ldc, acc);
                continue;
            }
            geo->kernel(kc, ap, bp, tile, nr, 0);
            for (size_t i = 0; i < m; i++) {
                float *ci = cp + i * ldc;
                const float *ti = tile + i * nr;
                if (acc)
                    for (size_t q = 0; q < n; q++) ci[q] = ci[q] + ti[q];
                else
                    memcpy(ci, ti, n * sizeof(float));
            }
        }
    }
}

/* Packing loop of the shared mode: chunks [0, n_mt) pack the M blocks of
 * the A super-block (when pack_a), the rest pack B columns in bw chunks. */
static void pack_chunk(void *arg, int64_t chunk, int worker)
{
    const blk *b = arg;
    size_t c = (size_t)chunk;
    if (b->pack_a) {
        if (c < b->n_mt) {
            size_t i0 = c * b->mt_rows, rows = min_sz(b->mt_rows, b->ms - i0);
            pack_a_block(b->g, b->geo, b->ms0 + i0, rows, b->pc, b->kc, b->apk + i0 * b->kc);
            return;
        }
        c -= b->n_mt;
    }
    size_t j0 = c * b->bw, w = min_sz(b->bw, b->nc - j0);
    /* j0 is a multiple of nr: its panels start at panel j0/nr */
    pack_b_cols(b->g, b->geo, b->pc, b->kc, b->jc + j0, w, b->bpk + j0 * b->kc, b->s->w[worker].t);
}

static void compute_task(void *arg, int64_t task, int worker)
{
    const blk *b = arg;
    size_t mi = (size_t)task / b->n_nt, ni = (size_t)task % b->n_nt;
    size_t i0 = mi * b->mt_rows, rows = min_sz(b->mt_rows, b->ms - i0);
    size_t j0 = ni * b->nt_cols, j1 = min_sz(j0 + b->nt_cols, b->nc);
    multiply(b->g, b->geo, b->apk + i0 * b->kc, b->ms0 + i0, rows, b->bpk + j0 * b->kc, b->jc + j0, j1 - j0, b->kc,
             b->acc, b->s->w[worker].tile);
}

/* One M block (M <= MC): a task owns columns [c*bw, (c+1)*bw) of C over the
 * whole K loop, packing A and its own B columns into its worker's scratch:
 * one parallel loop per product, no barrier, B streamed once. */
static void owned_columns(void *arg, int64_t chunk, int worker)
{
    const blk *b = arg;
    const fc_gemm_args *g = b->g;
    const fc_gemm_geom *geo = b->geo;
    fc_gemm_wscratch *ws = &b->s->w[worker];
    size_t m = (size_t)g->m, k = (size_t)g->k;
    size_t j = (size_t)chunk * b->bw, w = min_sz(b->bw, (size_t)g->n - j);
    for (size_t pc = 0; pc < k; pc += geo->kc) {
        size_t kc = min_sz(geo->kc, k - pc);
        pack_a_block(g, geo, 0, m, pc, kc, ws->a);
        pack_b_cols(g, geo, pc, kc, j, w, ws->b, ws->t);
        multiply(g, geo, ws->a, 0, m, ws->b, j, w, kc, pc > 0 || g->accumulate, ws->tile);
    }
}

/* ---- the driver --------------------------------------------------------------- */

/* Columns per task in the owned-columns mode: PACK_CHUNK_COLS, narrowed
 * (down to 64) until every thread gets TASKS_PER_THREAD tasks. */
static size_t owned_width(size_t n, size_t nr, int threads)
{
    size_t bw = round_up(PACK_CHUNK_COLS, nr), lo = round_up(64, nr);
    while (threads > 1 && cdiv(n, bw) < (size_t)(TASKS_PER_THREAD * threads) && bw / 2 >= lo)
        bw = round_up(bw / 2, nr);
    return bw;
}

int fc_gemm_blocked_reserve(const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s, int nworkers)
{
    size_t kc = min_sz(geo->kc, (size_t)g->k);
    size_t mt = round_up(min_sz(geo->mc, (size_t)g->m), geo->mr);
    size_t bw = round_up(PACK_CHUNK_COLS, geo->nr); /* the widest owned_width */
    size_t t = g->btype == FC_GEMM_B_F32 ? 0 : kc * bw;
    if ((size_t)g->m <= geo->mc) /* owned columns: A and B packed per worker */
        return fc_gemm_scratch_reserve(s, nworkers, 0, mt * kc, kc * bw, t, geo->mr * geo->nr);
    size_t nc = round_up(min_sz(geo->nc, (size_t)g->n), geo->nr);
    size_t ms = round_up(min_sz(SUPER_ROWS, (size_t)g->m), geo->mr);
    return fc_gemm_scratch_reserve(s, nworkers, kc * nc + kc * ms, 0, 0, t, geo->mr * geo->nr);
}

void fc_gemm_blocked_run(fc_workers *w, const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s)
{
    size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
    int threads = fc_workers_count(w);
    blk b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.geo = geo;
    b.s = s;
    if (m <= geo->mc) {
        b.bw = owned_width(n, geo->nr, threads);
        fc_workers_run(w, (int64_t)cdiv(n, b.bw), owned_columns, &b);
        return;
    }
    b.bw = round_up(PACK_CHUNK_COLS, geo->nr);
    b.bpk = s->b;
    b.apk = s->b + round_up(min_sz(geo->nc, n), geo->nr) * min_sz(geo->kc, k);
    size_t min_cols = round_up(MIN_TASK_COLS, geo->nr);
    for (b.ms0 = 0; b.ms0 < m; b.ms0 += SUPER_ROWS) {
        b.ms = min_sz(SUPER_ROWS, m - b.ms0);
        /* M blocks of near-equal size (multiples of mr), at most mc rows. */
        b.n_mt = cdiv(b.ms, geo->mc);
        b.mt_rows = round_up(cdiv(b.ms, b.n_mt), geo->mr);
        b.n_mt = cdiv(b.ms, b.mt_rows);
        for (b.pc = 0; b.pc < k; b.pc += geo->kc) {
            b.kc = min_sz(geo->kc, k - b.pc);
            b.acc = b.pc > 0 || g->accumulate;
            for (b.jc = 0; b.jc < n; b.jc += geo->nc) {
                b.nc = min_sz(geo->nc, n - b.jc);
                /* Split the N block too when the M blocks alone cannot keep
                 * the threads busy (the split never changes what a task
                 * computes). */
                b.nt_cols = round_up(b.nc, geo->nr);
                while (threads > 1 && b.n_mt * cdiv(b.nc, b.nt_cols) < (size_t)(TASKS_PER_THREAD * threads) &&
                       b.nt_cols / 2 >= min_cols)
                    b.nt_cols = round_up(b.nt_cols / 2, geo->nr);
                b.n_nt = cdiv(b.nc, b.nt_cols);
                b.pack_a = b.jc == 0;
                fc_workers_run(w, (int64_t)((b.pack_a ? b.n_mt : 0) + cdiv(b.nc, b.bw)), pack_chunk, &b);
                fc_workers_run(w, (int64_t)(b.n_mt * b.n_nt), compute_task, &b);
            }
        }
    }
}
