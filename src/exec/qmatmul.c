/* SPDX-License-Identifier: MIT */
/* fc_qmatmul: argument checks, activation quantization, the tiled integer
 * path and the decode-to-f32 fallback (see qmatmul.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gemm.h"
#include "exec/gemm_internal.h"
#include "exec/qmatmul.h"
#include "exec/qmatmul_internal.h"

/* Weight rows per task of the integer path: about this many bytes of W, so a
 * task's rows stay in L2 while the M tiles of A pass over them. */
#define QM_W_TASK_BYTES ((size_t)128 * 1024)
/* One activation row (decode): a task first hints this many bytes of its
 * weight rows into L1. The decode kernels prefetch the bytes past the tile
 * they work on, which at a task's end are the next task's, taken by
 * whichever thread claims it: a task otherwise starts cold and its first
 * tiles wait for DRAM (measured, 2 threads, q4_K/q6_K M = 1: 86-91% -> 91-95%
 * of the read probe). The kernels' own distance (FCK_QGEMV_PF). */
#define QM_TASK_WARM_BYTES ((size_t)1024)
/* Activation rows per task when M is large (rounded up to a multiple of MR). */
#define QM_M_TASK 64
/* One activation row, several threads: each thread streams its own
 * contiguous share of W (its home range) in claims of about this many bytes,
 * then helps the others from the front of what they have left. A thread's
 * consecutive claims continue one stream, so the kernels' prefetch past a
 * tile lands in the same thread's next claim; claims are small so the
 * threads end within one claim of each other (the two cores of this machine
 * stream at different speeds: 3-9 us apart over an 85 us read of 1.8 MB).
 * Against 128 KiB tasks claimed in turn, q4_K 1024 x 3072 ran 3-5% faster
 * (alternated); home ranges without the help, 2-4%. */
#define QM_W_CLAIM_BYTES ((size_t)64 * 1024)
#define QM_MAX_RANGES 64
/* What a spinning helper reads of its first range while A is quantized. */
#define QM_HELPER_WARM_BYTES ((size_t)16 * 1024)
/* Weight rows decoded per chunk on the fallback path: fixed by the shape
 * (not the thread count), since the f32 GEMM's bits depend on its N. */
#define QM_DEC_ROWS_SMALL_M 64
#define QM_DEC_ROWS_LARGE_M 256
/* Below this many multiply-adds the call stays on the calling thread. */
#define QM_SERIAL_MACS ((int64_t)1 << 18)

void fc_qmatmul_force_decode(int on) { fc_qm_force_decode_flag = on != 0; }

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int fc_qmatmul_check(const fc_qmatmul_args *g, char *err, size_t len)
{
    if (!g) return fail(err, len, "fc_qmatmul: args is NULL");
    if (g->m < 0) return fail(err, len, "fc_qmatmul: m = %lld is negative", (long long)g->m);
    if (g->n < 0) return fail(err, len, "fc_qmatmul: n = %lld is negative", (long long)g->n);
    if (g->k < 0) return fail(err, len, "fc_qmatmul: k = %lld is negative", (long long)g->k);
    const fcq_traits *t = fcq_traits_of(g->wtype);
    if (!t) return fail(err, len, "fc_qmatmul: wtype %lld is not a block-quantized format", (long long)g->wtype);
    if (g->k % t->block_elems)
        return fail(err, len, "fc_qmatmul: k = %lld is not a multiple of the %s block size %u", (long long)g->k,
                    t->name, t->block_elems);
    if (g->m == 0 || g->n == 0) return 0;
    if (g->lda < g->k) return fail(err, len, "fc_qmatmul: lda = %lld is smaller than k", (long long)g->lda);
    if (g->ldc < g->n) return fail(err, len, "fc_qmatmul: ldc = %lld is smaller than n", (long long)g->ldc);
    if (!g->c) return fail(err, len, "fc_qmatmul: c is NULL");
    if (g->k == 0) return 0;
    if (!g->a) return fail(err, len, "fc_qmatmul: a is NULL");
    if (!g->w) return fail(err, len, "fc_qmatmul: w is NULL");
    size_t need = fcq_row_bytes(t, (size_t)g->k);
    if (g->w_row_bytes < need)
        return fail(err, len, "fc_qmatmul: w_row_bytes = %zu is smaller than the %zu bytes of %lld %s elements",
                    g->w_row_bytes, need, (long long)g->k, t->name);
    return 0;
}

const char *fc_qmatmul_path(uint32_t wtype)
{
    static _Thread_local char buf[32];
    fc_qm_plan p;
    if (fc_qm_plan_for(wtype, &p) != 0) return "bad";
    if (p.ntiles == 0) return "f32-decode";
    memcpy(buf, p.name, sizeof buf);
    return buf;
}

static int nworkers(fc_workers *w) { return w ? fc_workers_count(w) : 1; }

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* ---- integer path ------------------------------------------------------------------ */

typedef struct int_job {
    const fc_qmatmul_args *g;
    const fc_qm_plan *p;
    size_t nb;           /* weight blocks per row */
    unsigned char *qa;   /* quantized activations, mpad rows of a_row bytes */
    size_t a_row;
    size_t w_task, m_task; /* rows of W / of A per task */
    int64_t n_ntasks, n_mtasks;
    size_t w_align;      /* every NR of the plan's tiles divides it: task edges */
    unsigned char *scratch; /* per worker: NR weight rows (wedge_bytes), then an MR x NR tile */
    size_t scratch_stride, wedge_bytes;
    int64_t q_rows;      /* activation rows per quantization chunk */
} int_job;

/* A home range of weight rows (one activation row): claimed from its front
 * by its owner, then by threads that finished theirs. */
typedef struct w_range {
    _Alignas(64) _Atomic size_t next; /* first row not yet claimed */
    size_t end;
} w_range;

static void quant_chunk(void *arg, int64_t chunk, int worker)
{
    (void)worker;
    const int_job *j = arg;
    int64_t i0 = chunk * j->q_rows, i1 = i0 + j->q_rows < j->g->m ? i0 + j->q_rows : j->g->m;
    for (int64_t i = i0; i < i1; i++)
        j->p->quant((size_t)j->g->k, j->g->a + i * j->g->lda, j->qa + (size_t)i * j->a_row);
}

/* The weight rows [j0, j1) of a task against the activation rows [i0, i1).
 * Row tiles: the largest MR that fits the rows left, or that they fill more
 * than half of (over the zero rows under A: measured with an 8x4 q4_0 tile,
 * 5 or 6 rows padded to 8 ran 1.6-2x faster than 5-6 qgemv passes, 4 rows
 * 0.9x), then qgemv's MR = 1 for the rest. Column tiles of the tile's NR; the last partial
 * group of W (only at N: task edges are multiples of every NR) is copied to
 * scratch with its last row repeated, into a scratch C tile. Which kernel
 * computes C[i, j] depends only on M and i, never on the thread count. */
static void tile_rows(const int_job *jb, size_t j0, size_t j1, size_t i0, size_t i1, int worker)
{
    const fc_qmatmul_args *g = jb->g;
    const fc_qm_plan *p = jb->p;
    size_t wrb = g->w_row_bytes;
    unsigned char *wedge = jb->scratch + (size_t)worker * jb->scratch_stride;
    float *tile = (float *)(wedge + jb->wedge_bytes);
    const unsigned char *w = g->w;
    int edge_of = -1; /* the tile whose edge group wedge holds */
    for (size_t i = i0; i < i1;) {
        int ti = p->ntiles - 1;
        for (int t = 0; t < p->ntiles; t++)
            if (p->tile[t].mr <= i1 - i || 2 * (i1 - i) > p->tile[t].mr) {
                ti = t;
                break;
            }
        size_t mr = p->tile[ti].mr, nr = p->tile[ti].nr, rows = i1 - i < mr ? i1 - i : mr;
        fc_qgemm_fn fn = p->tile[ti].fn;
        size_t jfull = j0 + (j1 - j0) / nr * nr;
        if (jfull < j1 && edge_of != ti) {
            for (size_t r = 0; r < nr; r++) memcpy(wedge + r * wrb, w + (jfull + r < j1 ? jfull + r : j1 - 1) * wrb, wrb);
            edge_of = ti;
        }
        const unsigned char *ap = jb->qa + i * jb->a_row;
        float *cp = g->c + i * (size_t)g->ldc;
        for (size_t j = j0; j < j1; j += nr) {
            size_t cols = j1 - j < nr ? j1 - j : nr;
            const unsigned char *wp = j < jfull ? w + j * wrb : wedge;
            if (rows == mr && cols == nr) {
                fn(jb->nb, wp, wrb, ap, jb->a_row, cp + j, (size_t)g->ldc);
                continue;
            }
            fn(jb->nb, wp, wrb, ap, jb->a_row, tile, nr);
            for (size_t r = 0; r < rows; r++) memcpy(cp + r * (size_t)g->ldc + j, tile + r * nr, cols * sizeof(float));
        }
        i += rows;
    }
}

/* One activation row: hint the first bytes of rows [j0, j1) into L1. */
static void warm_rows(const int_job *jb, size_t j0, size_t j1)
{
    const size_t wrb = jb->g->w_row_bytes;
    const size_t bytes = (j1 - j0) * wrb < QM_TASK_WARM_BYTES ? (j1 - j0) * wrb : QM_TASK_WARM_BYTES;
    const unsigned char *w = (const unsigned char *)jb->g->w + j0 * wrb;
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(w + o, 0, 3);
}

static void tile_task(void *arg, int64_t task, int worker)
{
    const int_job *jb = arg;
    const size_t n = (size_t)jb->g->n, m = (size_t)jb->g->m;
    int64_t ni = task / jb->n_mtasks, mi = task % jb->n_mtasks;
    size_t j0 = (size_t)ni * jb->w_task, j1 = j0 + jb->w_task < n ? j0 + jb->w_task : n;
    size_t i0 = (size_t)mi * jb->m_task, i1 = i0 + jb->m_task < m ? i0 + jb->m_task : m;
    if (m == 1) warm_rows(jb, j0, j1);
    tile_rows(jb, j0, j1, i0, i1, worker);
}

/* Claim rows of *r in jb->w_task steps until none are left; *last is the
 * row after this thread's previous claim (a claim that continues it needs
 * no warm-up: the kernels prefetched it). */
static void drain_range(const int_job *jb, w_range *r, size_t *last, int worker)
{
    for (;;) {
        size_t j0 = atomic_fetch_add_explicit(&r->next, jb->w_task, memory_order_relaxed);
        if (j0 >= r->end) return;
        size_t j1 = j0 + jb->w_task < r->end ? j0 + jb->w_task : r->end;
        if (j0 != *last) warm_rows(jb, j0, j1);
        tile_rows(jb, j0, j1, 0, 1, worker);
        *last = j1;
    }
}

/* The home-range split of n products (one activation row), nr ranges each:
 * range h of every product is thread slot h's, the others' once h's is
 * done, product after product (no product waits for another). */
typedef struct range_job {
    const int_job *jobs;
    w_range *ranges; /* product i's range h at ranges[i * nr + h] */
    int n, nr;
} range_job;

static void range_task(void *arg, int64_t chunk, int worker)
{
    const range_job *rj = arg;
    /* home = the thread, not the chunk: run_ranges' hint warmed worker 1's
     * range for worker 1 (a thread that runs a second chunk finds its home
     * drained and helps the others: every range is drained either way) */
    const int home = worker % rj->nr;
    (void)chunk;
    size_t last = (size_t)-1;
    for (int i = 0; i < rj->n; i++)
        for (int k = 0; k < rj->nr; k++) {
            if (k > 0) last = (size_t)-1; /* another range: another stream */
            drain_range(&rj->jobs[i], &rj->ranges[i * rj->nr + (home + k) % rj->nr], &last, worker);
        }
}

/* Split each product's rows into nr home ranges (edges at multiples of every
 * NR, the last range ending at N) and run them on the pool. */
static void split_ranges(const int_job *jobs, int n, int nr, w_range *ranges)
{
    for (int i = 0; i < n; i++) {
        size_t rows = (size_t)jobs[i].g->n, align = jobs[i].w_align;
        for (int h = 0; h < nr; h++) {
            size_t a = rows * (size_t)h / (size_t)nr / align * align, b = rows * (size_t)(h + 1) / (size_t)nr / align * align;
            atomic_init(&ranges[i * nr + h].next, a);
            ranges[i * nr + h].end = h == nr - 1 ? rows : b;
        }
    }
}

/* Before A is quantized (the threads wait for it): a spinning worker reads
 * the head of worker 1's first range into its L2 meanwhile. */
static void hint_helper(fc_workers *w, const int_job *jb, const w_range *ranges)
{
    const size_t wrb = jb->g->w_row_bytes, start = atomic_load_explicit(&ranges[1].next, memory_order_relaxed);
    const size_t bytes = (ranges[1].end - start) * wrb;
    fc_workers_prefetch(w, (const unsigned char *)jb->g->w + start * wrb,
                        bytes < QM_HELPER_WARM_BYTES ? bytes : QM_HELPER_WARM_BYTES);
}

static void run_ranges(fc_workers *w, const int_job *jobs, int n, int nr, w_range *ranges)
{
    range_job rj = {jobs, ranges, n, nr};
    fc_workers_run(w, nr, range_task, &rj);
}

static size_t gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The task geometry of one product (everything but its buffers): nw is the
 * thread count it is split for. Returns the rows of A with the zero rows
 * under the last tile (the quantized A buffer's height). */
static size_t int_job_init(int_job *j, const fc_qmatmul_args *g, const fc_qm_plan *p, int nw)
{
    *j = (int_job){.g = g, .p = p};
    size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
    size_t mr_max = p->tile[0].mr, nr_max = 0, nr_lcm = 1;
    for (int t = 0; t < p->ntiles; t++) {
        size_t nr = p->tile[t].nr;
        nr_max = nr > nr_max ? nr : nr_max;
        nr_lcm = nr_lcm / gcd(nr_lcm, nr) * nr;
    }
    j->nb = k / p->wt->block_elems;
    j->a_row = fcq_row_bytes(p->at, k);

    /* Tasks: W rows in groups of about QM_W_TASK_BYTES (multiples of every
     * NR), at least 4 groups per thread at small M so that dynamic claiming
     * balances; A rows in QM_M_TASK blocks when M is large. Every C element
     * is one kernel call over all of K, so none of this changes bits. */
    j->w_align = nr_lcm;
    size_t wt = (m == 1 && nw > 1 ? QM_W_CLAIM_BYTES : QM_W_TASK_BYTES) / g->w_row_bytes / nr_lcm * nr_lcm;
    if (wt < nr_lcm) wt = nr_lcm;
    j->m_task = m > 2 * QM_M_TASK ? round_up(QM_M_TASK, mr_max) : m; /* whole MR tiles per task */
    j->n_mtasks = (int64_t)((m + j->m_task - 1) / j->m_task);
    size_t want = (size_t)nw * 4 / (size_t)j->n_mtasks;
    if (nw > 1 && want > 1 && (n + wt - 1) / wt < want) {
        size_t t = round_up((n + want - 1) / want, nr_lcm);
        wt = t < wt ? t : wt;
    }
    j->w_task = wt;
    j->n_ntasks = (int64_t)((n + wt - 1) / wt);
    j->wedge_bytes = round_up(nr_max * g->w_row_bytes, 64);
    j->scratch_stride = j->wedge_bytes + round_up(mr_max * nr_max * sizeof(float), 64);
    j->q_rows = 4;
    return m + mr_max;
}

/* Quantize A into j->qa (mpad rows, the ones past m zero), on the pool when
 * M is large. */
static void int_job_quantize(fc_workers *w, int_job *j, size_t mpad)
{
    const size_t m = (size_t)j->g->m;
    memset(j->qa + m * j->a_row, 0, (mpad - m) * j->a_row);
    int64_t qchunks = (j->g->m + j->q_rows - 1) / j->q_rows;
    if (w && j->g->m >= 16) fc_workers_run(w, qchunks, quant_chunk, j);
    else
        for (int64_t c = 0; c < qchunks; c++) quant_chunk(j, c, 0);
}

static int run_int(fc_workers *w, const fc_qmatmul_args *g, const fc_qm_plan *p)
{
    int nw = nworkers(w);
    if (g->m * g->n * g->k < QM_SERIAL_MACS) w = NULL, nw = 1;
    int_job j;
    size_t mpad = int_job_init(&j, g, p, nw);
    size_t qa_bytes = round_up(mpad * j.a_row, 64);
    fc_gemm_scratch *scr = fc_gemm_scratch_acquire();
    unsigned char *mem = scr ? fc_gemm_scratch_bytes(scr, qa_bytes + j.scratch_stride * (size_t)nw) : NULL;
    if (!mem) {
        fc_gemm_scratch_release(scr);
        return -1;
    }
    j.qa = mem;
    j.scratch = mem + qa_bytes;
    const int ranged = w && g->m == 1 && nw > 1 && nw <= QM_MAX_RANGES;
    w_range ranges[QM_MAX_RANGES];
    if (ranged) {
        split_ranges(&j, 1, nw, ranges);
        hint_helper(w, &j, ranges);
    }
    int_job_quantize(w, &j, mpad);

    int64_t tasks = j.n_ntasks * j.n_mtasks;
    if (ranged) run_ranges(w, &j, 1, nw, ranges);
    else if (w && tasks > 1) fc_workers_run(w, tasks, tile_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++) tile_task(&j, t, 0);
    fc_gemm_scratch_release(scr);
    return 0;
}

/* Several products over one A: their tasks in one loop, product after
 * product (task t of the loop: the product whose range holds it). */
typedef struct multi_job {
    int_job *jobs;
    int64_t *first; /* first loop task of each product; first[n] = total */
    int n;
} multi_job;

static void multi_task(void *arg, int64_t task, int worker)
{
    const multi_job *mj = arg;
    int i = 0;
    while (task >= mj->first[i + 1]) i++;
    tile_task(&mj->jobs[i], task - mj->first[i], worker);
}

/* ---- decode fallback ------------------------------------------------------------------ */

typedef struct dec_job {
    const fc_qmatmul_args *g;
    const fcq_traits *wt, *at;
    const float *a; /* activations after quantize + decode (or g->a) */
    int64_t lda;
    float *aq;
    unsigned char *qrow; /* per worker: one quantized activation row */
    size_t qrow_stride;
    float *wdec;         /* per worker: rows x k decoded weights */
    int64_t rows;
    int failed;          /* set by a chunk whose f32 GEMM failed */
} dec_job;

static void dec_quant_row(void *arg, int64_t i, int worker)
{
    dec_job *d = arg;
    size_t k = (size_t)d->g->k;
    unsigned char *q = d->qrow + (size_t)worker * d->qrow_stride;
    d->at->encode(d->g->a + i * d->g->lda, q, k);
    d->at->decode(q, d->aq + (size_t)i * k, k);
}

static void dec_chunk(void *arg, int64_t chunk, int worker)
{
    dec_job *d = arg;
    const fc_qmatmul_args *g = d->g;
    size_t k = (size_t)g->k;
    int64_t j0 = chunk * d->rows, nrow = g->n - j0 < d->rows ? g->n - j0 : d->rows;
    float *b = d->wdec + (size_t)worker * (size_t)d->rows * k;
    for (int64_t r = 0; r < nrow; r++)
        d->wt->decode((const unsigned char *)g->w + (size_t)(j0 + r) * g->w_row_bytes, b + (size_t)r * k, k);
    fc_gemm_args ga = {.m = g->m, .n = nrow, .k = g->k, .a = d->a, .rsa = d->lda, .csa = 1, .b = b,
                       .btype = FC_GEMM_B_F32, .rsb = 1, .csb = g->k, .c = g->c + j0, .ldc = g->ldc};
    if (fc_gemm_f32(NULL, &ga) != 0) d->failed = 1;
}

static int run_decode(fc_workers *w, const fc_qmatmul_args *g, const fc_qm_plan *p)
{
    dec_job d = {.g = g, .wt = p->wt, .at = p->at, .a = g->a, .lda = g->lda};
    size_t m = (size_t)g->m, k = (size_t)g->k;
    int nw = nworkers(w);
    if (g->m * g->n * g->k < QM_SERIAL_MACS) w = NULL, nw = 1;
    d.rows = g->m <= 16 ? QM_DEC_ROWS_SMALL_M : QM_DEC_ROWS_LARGE_M;
    if (d.rows > g->n) d.rows = g->n;
    int quant = p->at && p->at->encode != NULL;
    size_t aq_bytes = quant ? round_up(m * k * sizeof(float), 64) : 0;
    d.qrow_stride = quant ? round_up(fcq_row_bytes(p->at, k), 64) : 0;
    size_t dec_bytes = round_up((size_t)d.rows * k * sizeof(float) * (size_t)nw, 64);
    fc_gemm_scratch *scr = fc_gemm_scratch_acquire();
    unsigned char *mem = scr ? fc_gemm_scratch_bytes(scr, dec_bytes + aq_bytes + d.qrow_stride * (size_t)nw + 64) : NULL;
    if (!mem) {
        fc_gemm_scratch_release(scr);
        return -1;
    }
    d.wdec = (float *)mem;
    if (quant) {
        d.aq = (float *)(mem + dec_bytes);
        d.qrow = mem + dec_bytes + aq_bytes;
        if (w && g->m >= 16) fc_workers_run(w, g->m, dec_quant_row, &d);
        else
            for (int64_t i = 0; i < g->m; i++) dec_quant_row(&d, i, 0);
        d.a = d.aq;
        d.lda = g->k;
    }
    int64_t chunks = (g->n + d.rows - 1) / d.rows;
    if (w && chunks > 1) fc_workers_run(w, chunks, dec_chunk, &d);
    else
        for (int64_t c = 0; c < chunks; c++) dec_chunk(&d, c, 0);
    fc_gemm_scratch_release(scr);
    return d.failed ? -1 : 0;
}

int fc_qmatmul(fc_workers *w, const fc_qmatmul_args *g)
{
    if (fc_qmatmul_check(g, NULL, 0) != 0) return -1;
    if (g->m == 0 || g->n == 0) return 0;
    if (g->k == 0) {
        for (int64_t i = 0; i < g->m; i++) memset(g->c + i * g->ldc, 0, (size_t)g->n * sizeof(float));
        return 0;
    }
    fc_qm_plan p;
    if (fc_qm_plan_for(g->wtype, &p) != 0) return -1;
    return p.ntiles ? run_int(w, g, &p) : run_decode(w, g, &p);
}

int fc_qmatmul_multi(fc_workers *w, const fc_qmatmul_args *g, int n)
{
    enum { MAX = 8 };
    fc_qm_plan p[MAX];
    int fused = n >= 2 && n <= MAX;
    for (int i = 0; i < n && fused; i++) {
        if (fc_qmatmul_check(&g[i], NULL, 0) != 0) return -1;
        fused = g[i].m == g[0].m && g[i].k == g[0].k && g[i].a == g[0].a && g[i].lda == g[0].lda && g[i].m > 0 &&
                g[i].n > 0 && g[i].k > 0 && fc_qm_plan_for(g[i].wtype, &p[i]) == 0 && p[i].ntiles > 0 &&
                p[i].at == p[0].at && p[i].quant == p[0].quant;
    }
    if (!fused) {
        for (int i = 0; i < n; i++)
            if (fc_qmatmul(w, &g[i]) != 0) return -1;
        return 0;
    }
    int64_t macs = 0;
    for (int i = 0; i < n; i++) macs += g[i].m * g[i].n * g[i].k;
    int nw = nworkers(w);
    if (macs < QM_SERIAL_MACS) w = NULL, nw = 1;
    int_job jobs[MAX];
    int64_t first[MAX + 1] = {0};
    size_t mpad = 0, stride = 0;
    for (int i = 0; i < n; i++) {
        size_t mp = int_job_init(&jobs[i], &g[i], &p[i], nw);
        mpad = mp > mpad ? mp : mpad;
        stride = jobs[i].scratch_stride > stride ? jobs[i].scratch_stride : stride;
        first[i + 1] = first[i] + jobs[i].n_ntasks * jobs[i].n_mtasks;
    }
    /* one quantized A (the same partner format) and one set of per-worker
     * scratch slots, each as large as the largest product needs */
    size_t qa_bytes = round_up(mpad * jobs[0].a_row, 64);
    fc_gemm_scratch *scr = fc_gemm_scratch_acquire();
    unsigned char *mem = scr ? fc_gemm_scratch_bytes(scr, qa_bytes + stride * (size_t)nw) : NULL;
    if (!mem) {
        fc_gemm_scratch_release(scr);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        jobs[i].qa = mem;
        jobs[i].scratch = mem + qa_bytes;
        jobs[i].scratch_stride = stride;
    }
    const int ranged = w && g[0].m == 1 && nw > 1 && nw * n <= QM_MAX_RANGES;
    w_range ranges[QM_MAX_RANGES];
    if (ranged) {
        split_ranges(jobs, n, nw, ranges);
        hint_helper(w, &jobs[0], ranges);
    }
    int_job_quantize(w, &jobs[0], mpad);
    multi_job mj = {jobs, first, n};
    if (ranged) run_ranges(w, jobs, n, nw, ranges);
    else if (w && first[n] > 1) fc_workers_run(w, first[n], multi_task, &mj);
    else
        for (int64_t t = 0; t < first[n]; t++) multi_task(&mj, t, 0);
    fc_gemm_scratch_release(scr);
    return 0;
}
