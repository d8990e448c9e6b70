/* SPDX-License-Identifier: MIT */
/* The roofline probes: peak f32 FMA rate and DRAM bandwidth, measured with
 * generated arms (registry/bench.yaml, templates/peak_fma/) on 1 thread and
 * on a pinned team. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fcb.h"
#include "fucina/dispatch.h"

const fcb_arm *fcb_dispatched_arm(const char *slot)
{
    for (size_t i = 0; i < fc_kernel_slot_count(); i++) {
        fc_kernel_slot s;
        if (fc_kernel_slot_get(i, &s) != FC_OK || strcmp(s.slot, slot) != 0) continue;
        for (size_t k = 0; k < fcb_arm_count; k++)
            if (strcmp(fcb_arms[k].symbol, s.symbol) == 0) return &fcb_arms[k];
    }
    return NULL;
}

size_t fcb_default_array_bytes(const fcb_machine *m)
{
    size_t b = 512 * FCB_MIB;
    if (m->llc && 8 * m->llc > b) b = 8 * m->llc;
    if (m->mem_available && b > m->mem_available / 2) b = m->mem_available / 2 / FCB_MIB * FCB_MIB;
    return b;
}

/* ---- peak FMA ------------------------------------------------------------ */

typedef struct fma_ctx {
    const fcb_arm *arm;
    size_t iters;
    float seeds[34];
    double sinks[64 * 8]; /* one cache line per thread */
} fma_ctx;

static void fma_work(int tid, int nthreads, void *p)
{
    (void)nthreads;
    fma_ctx *c = p;
    fcb_args a;
    memset(&a, 0, sizeof a);
    a.n = c->iters;
    a.x = c->seeds;
    a.sink = &c->sinks[(tid % 64) * 8];
    c->arm->run(&a);
}

static double fma_flops_per_iter(const fcb_arm *arm) { return arm->flops; }

/* The iteration count for one call of about `seconds` on one thread. */
static size_t fma_calibrate(fma_ctx *c, double seconds)
{
    c->iters = 1000;
    for (;;) {
        double t0 = fcb_now();
        fma_work(0, 1, c);
        double t = fcb_now() - t0;
        if (t >= 0.2 * seconds || c->iters >= ((size_t)1 << 40)) {
            double want = t > 0 ? (double)c->iters * seconds / t : (double)c->iters;
            return want < 1 ? 1 : (size_t)want;
        }
        double scale = t > 0 ? ceil(0.3 * seconds / t) : 100;
        c->iters *= (size_t)(scale < 100 ? scale : 100);
    }
}

static int measure_fma(const fcb_probe_opts *o, const int *cpus, int ncpus, fcb_fma_result *res, int *pinned)
{
    static fma_ctx c; /* 4 KiB of sinks: not on the stack */
    memset(&c, 0, sizeof c);
    c.arm = res->arm;
    for (int i = 0; i < 16; i++) c.seeds[i] = c.seeds[i + 16] = 0.5f + (float)i / 16;
    c.seeds[32] = 1.0f - 0x1p-10f; /* fixed point c / (1 - m) = 1: chains stay normal */
    c.seeds[33] = 0x1p-10f;
    double times[FCB_MAX_REPEATS];
    int reps = o->repeats;
    fcb_pin_self(cpus[0]);
    c.iters = fma_calibrate(&c, o->fma_time);
    fcb_unpin_self();
    double flops = fma_flops_per_iter(res->arm) * (double)c.iters;
    fcb_team_job j = {1, cpus, ncpus, reps, NULL, fma_work, &c, times, 0};
    if (fcb_team_run(&j) != 0) return -1;
    *pinned = j.pinned;
    res->gflops_1 = flops / fcb_min(times, (size_t)reps) * 1e-9;
    res->med_1 = flops / fcb_median(times, (size_t)reps) * 1e-9;
    if (o->threads > 0) {
        j.nthreads = o->threads;
        if (fcb_team_run(&j) != 0) return -1;
        *pinned = *pinned && j.pinned;
        res->gflops_all = o->threads * flops / fcb_min(times, (size_t)reps) * 1e-9;
        res->med_all = o->threads * flops / fcb_median(times, (size_t)reps) * 1e-9;
    }
    return 0;
}

/* ---- bandwidth ----------------------------------------------------------- */

typedef struct bw_ctx {
    const fcb_arm *arm;
    float *x, *y;
    size_t n; /* elements of each array */
    double sinks[64 * 8];
} bw_ctx;

static void slice(size_t n, int tid, int nthreads, size_t *lo, size_t *hi)
{
    /* 16-element (64-byte) aligned slices */
    size_t blocks = n / 16, per = blocks / (size_t)nthreads, extra = blocks % (size_t)nthreads;
    size_t t = (size_t)tid;
    *lo = 16 * (t * per + (t < extra ? t : extra));
    *hi = 16 * ((t + 1) * per + (t + 1 < extra ? t + 1 : extra));
    if (tid == nthreads - 1) *hi = n;
}

static void bw_touch(int tid, int nthreads, void *p)
{
    bw_ctx *c = p;
    size_t lo, hi;
    slice(c->n, tid, nthreads, &lo, &hi);
    fcb_fill("f32", c->x + lo, hi - lo, 0.5, 2.0, 1234 + (uint64_t)tid);
    if (c->y) fcb_fill("f32", c->y + lo, hi - lo, 0.5, 2.0, 4321 + (uint64_t)tid);
}

static void bw_work(int tid, int nthreads, void *p)
{
    bw_ctx *c = p;
    size_t lo, hi;
    slice(c->n, tid, nthreads, &lo, &hi);
    fcb_args a;
    memset(&a, 0, sizeof a);
    a.n = a.cols = hi - lo;
    a.rows = 1;
    a.x = c->x + lo;
    a.y = c->y ? c->y + lo : NULL;
    a.sink = &c->sinks[(tid % 64) * 8];
    c->arm->run(&a);
}

static int measure_bw(const fcb_probe_opts *o, const int *cpus, int ncpus, bw_ctx *c, fcb_bw_result *res,
                      int *pinned)
{
    double times[FCB_MAX_REPEATS];
    int reps = o->repeats;
    /* First touch by the team that will read (page placement), untimed. */
    fcb_team_job touch = {o->threads > 0 ? o->threads : 1, cpus, ncpus, 1, bw_touch, bw_work, c, times, 0};
    if (fcb_team_run(&touch) != 0) return -1;
    fcb_team_job j = {1, cpus, ncpus, reps, NULL, bw_work, c, times, 0};
    if (fcb_team_run(&j) != 0) return -1;
    *pinned = *pinned && j.pinned;
    res->gbps_1 = res->bytes / fcb_min(times, (size_t)reps) * 1e-9;
    res->med_1 = res->bytes / fcb_median(times, (size_t)reps) * 1e-9;
    if (o->threads > 0) {
        j.nthreads = o->threads;
        if (fcb_team_run(&j) != 0) return -1;
        *pinned = *pinned && j.pinned;
        res->gbps_all = res->bytes / fcb_min(times, (size_t)reps) * 1e-9;
        res->med_all = res->bytes / fcb_median(times, (size_t)reps) * 1e-9;
    }
    return 0;
}

int fcb_probe_run(const fcb_probe_opts *o, const int *cpus, int ncpus, fcb_roofline *r)
{
    memset(r, 0, sizeof *r);
    r->threads = o->threads;
    r->pinned = 1;
    r->peak_1 = r->peak_all = NAN;

    /* Peak FMA: every peak_fma arm of this build (or the best runnable one). */
    const fcb_arm *best = NULL;
    for (size_t i = 0; i < fcb_arm_count && r->n_fma < 16; i++) {
        const fcb_arm *a = &fcb_arms[i];
        if (a->shape != FCB_SHAPE_PROBE || strcmp(a->kernel, "peak_fma") != 0) continue;
        fcb_fma_result *f = &r->fma[r->n_fma++];
        f->arm = a;
        f->runnable = fck_isa_supported(a->isa);
        f->why = f->runnable ? NULL : fck_isa_missing_features(a->isa);
        f->gflops_1 = f->gflops_all = f->med_1 = f->med_all = NAN;
        if (f->runnable && (!best || fck_isa_table[a->isa].rank > fck_isa_table[best->isa].rank)) best = a;
    }
    for (int i = 0; i < r->n_fma; i++) {
        fcb_fma_result *f = &r->fma[i];
        if (!f->runnable || (!o->all_fma_arms && f->arm != best)) continue;
        if (measure_fma(o, cpus, ncpus, f, &r->pinned) != 0) return 1;
        if (!(f->gflops_1 <= r->peak_1)) {
            r->peak_1 = f->gflops_1;
            r->peak_arm = f->arm;
        }
        if (!(f->gflops_all <= r->peak_all)) r->peak_all = f->gflops_all;
    }

    /* Bandwidth: the dispatched stream_read arm over the whole array set;
     * copy-style: the dispatched f32_neg arm (read x, write y). */
    r->array_bytes = o->array_bytes;
    r->read.arm = fcb_dispatched_arm("f32_stream_read");
    r->copy.arm = o->copy ? fcb_dispatched_arm("f32_neg") : NULL;
    r->read.gbps_1 = r->read.gbps_all = r->read.med_1 = r->read.med_all = NAN;
    r->copy.gbps_1 = r->copy.gbps_all = r->copy.med_1 = r->copy.med_all = NAN;
    if (!r->read.arm && !r->copy.arm) return 0;
    size_t n = o->array_bytes / sizeof(float);
    float *x = fcb_alloc(n * sizeof(float));
    if (!x) return 1;
    int rc = 0;
    static bw_ctx c; /* sinks: not on the stack */
    if (r->read.arm) {
        memset(&c, 0, sizeof c);
        c = (bw_ctx){.arm = r->read.arm, .x = x, .y = NULL, .n = n};
        r->read.bytes = (double)n * sizeof(float);
        rc = measure_bw(o, cpus, ncpus, &c, &r->read, &r->pinned);
    }
    if (rc == 0 && r->copy.arm) {
        memset(&c, 0, sizeof c);
        c = (bw_ctx){.arm = r->copy.arm, .x = x, .y = x + n / 2, .n = n / 2};
        r->copy.bytes = 2.0 * (double)(n / 2) * sizeof(float);
        rc = measure_bw(o, cpus, ncpus, &c, &r->copy, &r->pinned);
    }
    fcb_free(x);
    return rc ? 1 : 0;
}

/* ---- the interleaved read probe --------------------------------------------- */

struct fcb_bw_probe {
    bw_ctx c;
    int threads, ncpus;
    const int *cpus;
};

fcb_bw_probe *fcb_bw_probe_new(size_t array_bytes, int threads, const int *cpus, int ncpus)
{
    const fcb_arm *arm = fcb_dispatched_arm("f32_stream_read");
    if (!arm) return NULL;
    fcb_bw_probe *p = calloc(1, sizeof *p);
    size_t n = array_bytes / sizeof(float);
    float *x = p ? fcb_alloc(n * sizeof(float)) : NULL;
    if (!x) {
        free(p);
        return NULL;
    }
    p->c = (bw_ctx){.arm = arm, .x = x, .y = NULL, .n = n};
    p->threads = threads > 0 ? threads : 1;
    p->cpus = cpus;
    p->ncpus = ncpus;
    /* first touch by the team that will read (page placement), untimed */
    double t;
    fcb_team_job touch = {p->threads, cpus, ncpus, 1, bw_touch, bw_work, &p->c, &t, 0};
    if (fcb_team_run(&touch) != 0) {
        fcb_bw_probe_free(p);
        return NULL;
    }
    return p;
}

double fcb_bw_probe_read(fcb_bw_probe *p, int passes)
{
    double times[FCB_MAX_REPEATS];
    if (passes < 1) passes = 1;
    if (passes > FCB_MAX_REPEATS) passes = FCB_MAX_REPEATS;
    fcb_team_job j = {p->threads, p->cpus, p->ncpus, passes, NULL, bw_work, &p->c, times, 0};
    int rc = fcb_team_run(&j);
    return rc ? NAN : (double)p->c.n * sizeof(float) / fcb_min(times, (size_t)passes) * 1e-9;
}

void fcb_bw_probe_free(fcb_bw_probe *p)
{
    if (!p) return;
    fcb_free(p->c.x);
    free(p);
}
