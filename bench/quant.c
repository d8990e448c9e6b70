/* SPDX-License-Identifier: MIT */
/* `fucina-bench quant`: quantized matmul C = A·Wᵀ (f32 activations, W in a
 * GGML block format) through fc_qmatmul, against ggml's CPU backend on the
 * same weight bytes in the same process (bench/peers/ggml_mulmat.c).
 *
 *   shapes   M in {1, 4, 16, 64, 128, 512} x (K 1024, N 3072) and (K 3072, N 1024)
 *   formats  q8_0, q4_0, q4_K, q5_K, q6_K
 *   sides    ours; ggml with W in the plain CPU buffer; ggml with W in the
 *            CPU "repack" buffer (interleaved rows, what llama.cpp loads
 *            q4_0 / q4_K into on AVX2 machines), where ggml repacks the type
 *
 * W is quantized once by ggml's ggml_quantize_chunk from uniform random rows
 * and both sides read those bytes. For each case, `--rounds` passes
 * alternate the sides (ours, ggml, ggml-repacked, ours, ...), each a
 * calibrated batch of at least --min-ms, median of 3 batches; the table
 * gives the median over passes, in GFLOP/s (2·M·N·K per call), the ratio
 * ours / ggml (the faster of ggml's two layouts: the one llama.cpp runs),
 * and at M = 1 the weight bytes streamed per second against the DRAM read
 * bandwidth of a probe run in every round after the sides (the median over
 * rounds of ours / that round's probe: the VM's bandwidth moves between
 * minutes, so a roofline taken once at the start would compare different
 * machines). At M = 1 both
 * sides rotate over enough copies of W to exceed twice the LLC, so that
 * figure is a DRAM stream, not a cache hit (at larger M, W stays in cache).
 * maxdiff: max |ours - ggml| / max |ggml| over C (both quantize A to the
 * same partner format, so this is float summation order, or a bug). */
#define _GNU_SOURCE
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "exec/qmatmul.h"
#include "exec/workers.h"
#include "fcb.h"
#include "peers/ggml_mulmat.h"
#include "quant/quant.h"

#define MAX_FILTERS 16
#define MAX_THREADS 4
#define MAX_ROUNDS 64
#define MAX_COPIES 256

typedef struct qopts {
    const char *filters[MAX_FILTERS];
    int nfilters;
    int threads[MAX_THREADS];
    int nthreads;
    long rounds;
    double min_ms;
    int peer, roofline;
    int cpu_clock; /* --clock cpu: process CPU time (1 thread only) */
    long ggml_poll; /* --ggml-poll: ggml threadpool polling level, -1 default */
    int64_t m, n, k; /* --shape MxNxK replaces the shape list */
    int custom;
} qopts;

static const fcq_type formats[] = {FCQ_Q8_0, FCQ_Q4_0, FCQ_Q4_K, FCQ_Q5_K, FCQ_Q6_K};
static const int64_t ms[] = {1, 4, 16, 64, 128, 512};
static const int64_t kns[][2] = {{1024, 3072}, {3072, 1024}};

static void help(FILE *f)
{
    fprintf(f, "usage: fucina-bench quant [--threads 1,2] [--rounds N] [--min-ms MS] [--filter P,...]\n"
               "                          [--shape MxNxK] [--no-peer] [--no-roofline] [--force-decode] [--clock wall|cpu]\n"
               "                          [--ggml-poll 0..100]\n"
               "Quantized matmul (fc_qmatmul) against ggml's CPU backend (plain and repacked weights), same\n"
               "bytes, alternating passes; medians. Cases are named <fmt>_m<M>_k<K>_n<N>; --filter keeps\n"
               "cases containing (or glob-matching) a pattern. Defaults: threads 1,2; 5 rounds; 10 ms.\n"
               "Columns: ours-rm = fc_qmatmul on the row-major weights; ours = fc_qmatmul_prepared on\n"
               "weights prepared once (fc_qweights: packed for prefill where the format has a layout;\n"
               "path = the one it takes); ratio and M=1 GB/s are for ours. M=1: DRAM = a read probe run\n"
               "in every round (median GB/s), %%DRAM = median over rounds of ours / that round's probe.\n"
               "--clock cpu (with --threads 1) times process CPU time instead of elapsed time: on a\n"
               "machine shared with other jobs it counts only the time this process ran.\n"
               "--ggml-poll sets the ggml threadpool's polling level (default: ggml's, 50; 0 = workers\n"
               "sleep between graphs, which a machine with more runnable threads than CPUs favours).\n");
}

static int parse(int argc, char **argv, qopts *o)
{
    *o = (qopts){.threads = {1, 2}, .nthreads = 2, .rounds = 5, .min_ms = 10, .peer = 1, .roofline = 1, .ggml_poll = -1};
    fcb_argv a = {argc, 1, argv, "quant"};
    while (a.i < argc) {
        const char *v;
        if (!strcmp(argv[a.i], "--help") || !strcmp(argv[a.i], "-h")) {
            help(stdout);
            return 0;
        }
        if (!strcmp(argv[a.i], "--no-peer")) {
            o->peer = 0;
            a.i++;
        } else if (!strcmp(argv[a.i], "--no-roofline")) {
            o->roofline = 0;
            a.i++;
        } else if (!strcmp(argv[a.i], "--force-decode")) {
            fc_qmatmul_force_decode(1); /* time the f32-decode path for every format */
            a.i++;
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("quant", "--rounds", v, 1, MAX_ROUNDS, &o->rounds)) return -1;
        } else if (fcb_arg_is(&a, "--clock", &v)) {
            if (strcmp(v, "wall") && strcmp(v, "cpu")) {
                fprintf(stderr, "fucina-bench quant: --clock: '%s' is not wall or cpu\n", v);
                return -1;
            }
            o->cpu_clock = !strcmp(v, "cpu");
        } else if (fcb_arg_is(&a, "--ggml-poll", &v)) {
            if (!fcb_parse_int("quant", "--ggml-poll", v, 0, 100, &o->ggml_poll)) return -1;
        } else if (fcb_arg_is(&a, "--min-ms", &v)) {
            if (!fcb_parse_double("quant", "--min-ms", v, 0, 10000, &o->min_ms)) return -1;
        } else if (fcb_arg_is(&a, "--filter", &v)) {
            char *dup = strdup(v);
            for (char *t = strtok(dup, ","); t && o->nfilters < MAX_FILTERS; t = strtok(NULL, ","))
                o->filters[o->nfilters++] = t;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            o->nthreads = 0;
            for (const char *s = v; *s;) {
                char *end;
                long n = strtol(s, &end, 10);
                if (end == s || n < 1 || n > 256 || (*end && *end != ',') || o->nthreads == MAX_THREADS) {
                    fprintf(stderr, "fucina-bench quant: --threads: bad list '%s' (up to %d counts 1..256)\n", v,
                            MAX_THREADS);
                    return -1;
                }
                o->threads[o->nthreads++] = (int)n;
                s = *end ? end + 1 : end;
            }
        } else if (fcb_arg_is(&a, "--shape", &v)) {
            long long m, n, k;
            char tail;
            if (sscanf(v, "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 || k < 1) {
                fprintf(stderr, "fucina-bench quant: --shape: '%s' is not MxNxK with positive sizes\n", v);
                return -1;
            }
            o->m = m, o->n = n, o->k = k, o->custom = 1;
        } else {
            fprintf(stderr, "fucina-bench quant: unknown option '%s' (see --help)\n", argv[a.i]);
            return -1;
        }
    }
    if (o->cpu_clock && (o->nthreads != 1 || o->threads[0] != 1)) {
        fprintf(stderr, "fucina-bench quant: --clock cpu needs --threads 1 (CPU time of several threads "
                        "counts their spinning, not the elapsed time)\n");
        return -1;
    }
    return 1;
}

/* ---- one case -------------------------------------------------------------------- */

typedef struct qcase {
    fc_workers *pool;
    fc_qmatmul_args g;
    unsigned char *w; /* copies x (n rows) */
    size_t w_bytes;   /* one copy */
    int copies, next;
    int rc;
    fc_qweights *qw[MAX_COPIES]; /* each copy prepared (packed) once, as at load time */
    int64_t m;
} qcase;

static void call_ours(void *p)
{
    qcase *c = p;
    c->g.w = c->w + (size_t)c->next * c->w_bytes;
    c->next = c->next + 1 == c->copies ? 0 : c->next + 1;
    c->rc |= fc_qmatmul(c->pool, &c->g);
}

/* The prepared-weights path (fc_qmatmul_prepared: packed at M >= its
 * threshold for formats with a packed layout, else the row-major path). */
static void call_packed(void *p)
{
    qcase *c = p;
    const fc_qweights *qw = c->qw[c->next];
    c->next = c->next + 1 == c->copies ? 0 : c->next + 1;
    c->rc |= fc_qmatmul_prepared(c->pool, qw, c->m, c->g.a, c->g.lda, c->g.c, c->g.ldc);
}

static void call_ggml(void *p)
{
    if (fcb_ggml_mm_run(p) != 0) abort(); /* checked once at setup: a failure now is a ggml bug */
}

/* Median seconds per call over 3 batches of >= min_s (elapsed), after a
 * calibrating warm-up; with cpu, the batches are timed in process CPU time. */
static double now_of(int cpu)
{
    if (!cpu) return fcb_now();
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double measure(fcb_call_fn fn, void *ctx, double min_s, int cpu)
{
    size_t iters = 1;
    for (;;) {
        double t0 = fcb_now();
        for (size_t i = 0; i < iters; i++) fn(ctx);
        double t = fcb_now() - t0;
        if (t >= min_s || iters >= ((size_t)1 << 30)) break;
        double scale = t > 0 ? 1.2 * min_s / t : 100;
        iters = (size_t)((double)iters * (scale < 2 ? 2 : scale > 100 ? 100 : scale)) + 1;
    }
    double per[3];
    for (int r = 0; r < 3; r++) {
        double t0 = now_of(cpu);
        for (size_t i = 0; i < iters; i++) fn(ctx);
        per[r] = (now_of(cpu) - t0) / (double)iters;
    }
    return fcb_median(per, 3);
}

typedef struct row {
    double ours, packed, plain, repack; /* median s per call; NaN when absent */
    char path[32];                      /* fc_qweights_path at this M */
    double maxdiff;
    double dram, pct_dram; /* M = 1: median in-round probe GB/s, median of per-round ours / probe */
} row;

static double maxdiff(const float *a, const float *b, size_t n)
{
    double d = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return mx > 0 ? d / mx : d;
}

static int run_case(const qopts *o, fc_workers *pool, fcb_bw_probe *probe, int threads, fcq_type t, int64_t m,
                    int64_t n, int64_t k, size_t llc, row *r)
{
    const fcq_traits *tr = fcq_traits_of(t);
    size_t rb = fcq_row_bytes(tr, (size_t)k), wb = rb * (size_t)n;
    int copies = 1;
    if (m == 1 && llc) {
        size_t want = (2 * llc + wb - 1) / wb;
        copies = want > MAX_COPIES ? MAX_COPIES : (int)want;
    }
    float *a = fcb_alloc((size_t)(m * k) * sizeof(float)), *wf = fcb_alloc((size_t)(n * k) * sizeof(float));
    float *c = fcb_alloc((size_t)(m * n) * sizeof(float)), *y = fcb_alloc((size_t)(m * n) * sizeof(float));
    unsigned char *w = fcb_alloc(wb * (size_t)copies);
    if (!a || !wf || !c || !y || !w) {
        fprintf(stderr, "fucina-bench quant: out of memory\n");
        return -1;
    }
    fcb_fill("f32", a, (size_t)(m * k), -1, 1, 1 + (uint64_t)m);
    fcb_fill("f32", wf, (size_t)(n * k), -1, 1, 2 + (uint64_t)t);
    /* W: ggml's quantizer when the peer is there (both sides read the same
     * bytes), else src/quant's reference encoder. */
    int have_peer = o->peer && fcb_ggml_mm_available(NULL);
    if (have_peer) fcb_ggml_quantize(t, wf, w, n, k);
    else if (tr->encode)
        for (int64_t j = 0; j < n; j++) tr->encode(wf + j * k, w + (size_t)j * rb, (size_t)k);
    else
        memset(w, 0, wb); /* no encoder yet: timing only */
    for (int cp = 1; cp < copies; cp++) memcpy(w + (size_t)cp * wb, w, wb);

    qcase q = {.pool = pool, .w = w, .w_bytes = wb, .copies = copies};
    q.g = (fc_qmatmul_args){.m = m, .n = n, .k = k, .a = a, .lda = k, .w = w, .wtype = t, .w_row_bytes = rb,
                            .c = c, .ldc = n};
    fcb_ggml_mm *plain = NULL, *rep = NULL;
    const char *why = NULL;
    if (have_peer) {
        plain = fcb_ggml_mm_new(t, m, n, k, w, a, threads, 0, copies, (int)o->ggml_poll, &why);
        if (!plain) fprintf(stderr, "fucina-bench quant: ggml peer (plain): %s\n", why);
        if (fcb_ggml_mm_repackable(t, n)) {
            rep = fcb_ggml_mm_new(t, m, n, k, w, a, threads, 1, copies, (int)o->ggml_poll, &why);
            if (!rep) fprintf(stderr, "fucina-bench quant: ggml peer (repacked): %s\n", why);
        }
    }
    q.m = m;
    for (int cp = 0; cp < copies; cp++)
        if (fc_qweights_prepare(&q.qw[cp], w + (size_t)cp * wb, t, n, k, rb, NULL, 0) != 0) {
            fprintf(stderr, "fucina-bench quant: fc_qweights_prepare failed\n");
            return -1;
        }
    snprintf(r->path, sizeof r->path, "%s", fc_qweights_path(q.qw[0], m));
    /* Agreement: one call each on copy 0 (the peers' setup ran copy 0); the
     * prepared path is compared with them, the row-major one shown by its time. */
    r->maxdiff = NAN;
    call_ours(&q);
    q.next = 0;
    call_packed(&q);
    q.next = 0;
    if (plain) {
        fcb_ggml_mm_result(plain, y);
        r->maxdiff = maxdiff(c, y, (size_t)(m * n));
    }
    if (rep) {
        fcb_ggml_mm_result(rep, y);
        double d = maxdiff(c, y, (size_t)(m * n));
        r->maxdiff = isnan(r->maxdiff) ? d : fmax(r->maxdiff, d);
    }
    /* ggml's setup computed copy 0: its threads poll for work for a while
     * after a graph unless paused, and would take CPUs from our first rounds */
    if (plain) fcb_ggml_mm_pause(plain);
    if (rep) fcb_ggml_mm_pause(rep);
    double to[MAX_ROUNDS], tk[MAX_ROUNDS], tp[MAX_ROUNDS], tr_[MAX_ROUNDS], bw[MAX_ROUNDS], pct[MAX_ROUNDS];
    double min_s = o->min_ms * 1e-3;
    /* M = 1: each round also reads the probe's array, so that ours / probe
     * compares the same minutes of a machine whose bandwidth moves; the
     * probes time elapsed seconds, so no fraction of a CPU-time rate */
    if (m != 1 || o->cpu_clock) probe = NULL;
    for (long p = 0; p < o->rounds; p++) {
        to[p] = measure(call_ours, &q, min_s, o->cpu_clock);
        tk[p] = measure(call_packed, &q, min_s, o->cpu_clock);
        if (plain) {
            tp[p] = measure(call_ggml, plain, min_s, o->cpu_clock);
            fcb_ggml_mm_pause(plain);
        }
        if (rep) {
            tr_[p] = measure(call_ggml, rep, min_s, o->cpu_clock);
            fcb_ggml_mm_pause(rep);
        }
        if (probe) {
            bw[p] = fcb_bw_probe_read(probe, 2);
            pct[p] = 100 * (double)wb / tk[p] * 1e-9 / bw[p];
        }
    }
    r->dram = probe ? fcb_median(bw, (size_t)o->rounds) : NAN;
    r->pct_dram = probe ? fcb_median(pct, (size_t)o->rounds) : NAN;
    r->ours = fcb_median(to, (size_t)o->rounds);
    r->packed = fcb_median(tk, (size_t)o->rounds);
    for (int cp = 0; cp < copies; cp++) fc_qweights_free(q.qw[cp]);
    r->plain = plain ? fcb_median(tp, (size_t)o->rounds) : NAN;
    r->repack = rep ? fcb_median(tr_, (size_t)o->rounds) : NAN;
    fcb_ggml_mm_free(plain);
    fcb_ggml_mm_free(rep);
    fcb_free(a), fcb_free(wf), fcb_free(c), fcb_free(y), fcb_free(w);
    if (q.rc) {
        fprintf(stderr, "fucina-bench quant: fc_qmatmul failed\n");
        return -1;
    }
    return 0;
}

static void gf(char *buf, size_t len, double flops, double s)
{
    if (isnan(s)) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.1f", flops / s * 1e-9);
}

int fcb_cmd_quant(int argc, char **argv)
{
    qopts o;
    int rc = parse(argc, argv, &o);
    if (rc <= 0) return rc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    const fcb_suite_opts start = {.cmd = "quant", .peer_name = "ggml", .peer_available = fcb_ggml_mm_available,
                                  .roofline = o.roofline, .threads = o.threads, .nthreads = o.nthreads};
    fcb_suite_env env;
    if (fcb_suite_start(&start, &o.peer, &env)) return FCB_EXIT_FAIL;
    printf("quantized matmul C = A·Wᵀ vs ggml CPU backend (%s); %ld alternating passes, >= %.0f ms batches; medians; "
           "%s time\n",
           o.peer ? "plain | repacked W" : "peer off", o.rounds, o.min_ms, o.cpu_clock ? "process CPU" : "elapsed");
    printf("GFLOP/s = 2·M·N·K / t; ratio = ours / best ggml layout; M=1: W streamed from DRAM (copies > 2 x LLC)\n");
    if (o.roofline && !o.cpu_clock)
        printf("M=1: DRAM = the read probe run in every round (median GB/s); %%DRAM = median over rounds of ours / "
               "that round's probe\n");
    printf("  %-22s %3s %-12s %9s %9s %9s %9s %7s %8s %6s %7s %9s\n", "case", "thr", "path", "ours-rm", "ours", "ggml",
           "ggml-rp", "ratio", "GB/s", "DRAM", "%DRAM", "maxdiff");
    for (int ti = 0; ti < o.nthreads; ti++) {
        int th = o.threads[ti];
        fc_workers *pool = th > 1 ? fc_workers_new(th) : NULL;
        if (th > 1 && !pool) {
            fprintf(stderr, "fucina-bench quant: cannot start %d threads\n", th);
            return FCB_EXIT_FAIL;
        }
        /* the in-round read probe (M = 1 cases), on this thread count */
        fcb_bw_probe *probe = NULL;
        if (o.roofline && !o.cpu_clock) {
            probe = fcb_bw_probe_new(fcb_default_array_bytes(&env.mach), th, env.cpus, env.ncpus);
            if (!probe) {
                fprintf(stderr, "fucina-bench quant: read probe: no stream_read arm or out of memory\n");
                fc_workers_free(pool);
                return FCB_EXIT_FAIL;
            }
        }
        for (size_t fi = 0; fi < sizeof formats / sizeof formats[0]; fi++) {
            const fcq_traits *tr = fcq_traits_of(formats[fi]);
            size_t nshape = o.custom ? 1 : sizeof kns / sizeof kns[0];
            size_t nm = o.custom ? 1 : sizeof ms / sizeof ms[0];
            for (size_t si = 0; si < nshape; si++)
                for (size_t mi = 0; mi < nm; mi++) {
                    int64_t m = o.custom ? o.m : ms[mi], k = o.custom ? o.k : kns[si][0],
                            n = o.custom ? o.n : kns[si][1];
                    char name[64];
                    snprintf(name, sizeof name, "%s_m%lld_k%lld_n%lld", tr->name, (long long)m, (long long)k,
                             (long long)n);
                    if (!fcb_name_matches(o.filters, o.nfilters, name)) continue;
                    if (k % tr->block_elems) {
                        printf("  %-22s %3d skipped: K is not a multiple of %u\n", name, th, tr->block_elems);
                        continue;
                    }
                    row r;
                    if (run_case(&o, pool, probe, th, formats[fi], m, n, k, env.mach.llc, &r)) return FCB_EXIT_FAIL;
                    double flops = 2.0 * (double)m * (double)n * (double)k;
                    double best = fmin(isnan(r.plain) ? INFINITY : r.plain, isnan(r.repack) ? INFINITY : r.repack);
                    char so[16], sk[16], sp[16], sr[16], ratio[16] = "-", gbs[16] = "-", dr[16] = "-", pct[16] = "-",
                         md[16] = "-";
                    gf(so, sizeof so, flops, r.ours);
                    gf(sk, sizeof sk, flops, r.packed);
                    gf(sp, sizeof sp, flops, r.plain);
                    gf(sr, sizeof sr, flops, r.repack);
                    if (isfinite(best)) snprintf(ratio, sizeof ratio, "%.2fx", best / r.packed);
                    if (m == 1) {
                        double g = (double)fcq_row_bytes(tr, (size_t)k) * (double)n / r.packed * 1e-9;
                        snprintf(gbs, sizeof gbs, "%.1f", g);
                        if (isfinite(r.dram)) snprintf(dr, sizeof dr, "%.1f", r.dram);
                        if (isfinite(r.pct_dram)) snprintf(pct, sizeof pct, "%.0f%%", r.pct_dram);
                    }
                    if (!isnan(r.maxdiff)) snprintf(md, sizeof md, "%.1e", r.maxdiff);
                    printf("  %-22s %3d %-12s %9s %9s %9s %9s %7s %8s %6s %7s %9s\n", name, th, r.path, so, sk, sp,
                           sr, ratio, gbs, dr, pct, md);
                    fflush(stdout);
                }
        }
        fcb_bw_probe_free(probe);
        fc_workers_free(pool);
    }
    fcb_suite_end();
    return FCB_EXIT_OK;
}
