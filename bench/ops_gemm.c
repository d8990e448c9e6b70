/* SPDX-License-Identifier: MIT */
/* `fucina-bench ops`: fc_gemm_f32 against OpenBLAS cblas_sgemm, in the same
 * run, on the same buffers, alternating (ours, theirs, ours, theirs, ...) so
 * that load from other processes hits both alike; medians over the rounds.
 *
 * Shapes: squares (row-major A and B) and LLM projections y = x·Wᵀ with the
 * weight W stored [N, K] (B read transposed), at 1 and 2 threads. OpenBLAS
 * is linked as a peer whenever CMake found it (FCB_HAVE_OPENBLAS),
 * independent of FUCINA_BLAS; our side runs with the provider forced to
 * "own", so the comparison is of our kernels, not of the provider rule. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gemm.h"
#include "exec/workers.h"
#include "fcb.h"
#include "ops_runtime.h"

#ifdef FCB_HAVE_OPENBLAS
#include <cblas.h>
extern void openblas_set_num_threads(int num_threads);
#endif

#define MAX_FILTERS 16
#define MAX_THREADS 8
#define MAX_ROUNDS 64

typedef struct shape {
    const char *name;
    int64_t m, n, k;
    int weights; /* B stored [N, K] (y = x·Wᵀ) */
} shape;

static const shape shapes[] = {
    {"square256", 256, 256, 256, 0},
    {"square512", 512, 512, 512, 0},
    {"square1024", 1024, 1024, 1024, 0},
    {"square2048", 2048, 2048, 2048, 0},
    {"llm_m1_k1024_n3072", 1, 3072, 1024, 1},
    {"llm_m8_k1024_n3072", 8, 3072, 1024, 1},
    {"llm_m32_k1024_n3072", 32, 3072, 1024, 1},
    {"llm_m128_k1024_n3072", 128, 3072, 1024, 1},
    {"llm_m512_k1024_n3072", 512, 3072, 1024, 1},
    {"llm_m1_k3072_n1024", 1, 1024, 3072, 1},
    {"llm_m8_k3072_n1024", 8, 1024, 3072, 1},
    {"llm_m32_k3072_n1024", 32, 1024, 3072, 1},
    {"llm_m128_k3072_n1024", 128, 1024, 3072, 1},
    {"llm_m512_k3072_n1024", 512, 1024, 3072, 1},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct opts {
    const char *filters[MAX_FILTERS];
    int nfilters;
    int threads[MAX_THREADS];
    int nthreads;
    long rounds;
    double min_ms;
    int quick;
    const char *json;
    int64_t m, n, k; /* --shape MxNxK (replaces the list), weights layout */
    int custom;
} opts;

/* The table: stdout, or stderr when the JSON goes to stdout. */
static FILE *out_f;

typedef struct result {
    const shape *s;
    int threads;
    double ours_s, theirs_s; /* median seconds per call; theirs NaN when absent */
    double ours_gflops, theirs_gflops, ratio, ours_gbps, theirs_gbps;
    const char *provider;
    double max_rel_diff; /* |ours - theirs| / max|theirs|, NaN when absent */
} result;

static void help(FILE *f)
{
    fprintf(f,
            "usage: fucina-bench ops [--filter PATTERN[,PATTERN...]] [--threads N[,N...]] [--rounds R]\n"
            "                        [--min-time MS] [--shape MxNxK] [--quick] [--json FILE]\n"
            "\n"
            "f32 GEMM: fc_gemm_f32 (own kernels: provider forced to 'own') against OpenBLAS\n"
            "cblas_sgemm when this build found OpenBLAS (else the peer columns say n/a). Per shape and\n"
            "thread count, R rounds alternate one batch of ours and one of OpenBLAS (ABAB...), each\n"
            "batch calibrated to last --min-time; the table gives medians per call: GFLOP/s of both,\n"
            "ours/OpenBLAS (a rate ratio: > 1 is faster), and for M = 1 the GB/s of weight streaming.\n"
            "Our pool: fc_workers_new(N); OpenBLAS: openblas_set_num_threads(N).\n"
            "\n"
            "Shapes: square 256..2048 (row-major A, B) and LLM projections y = x.W^T, M in\n"
            "{1, 8, 32, 128, 512} x (K=1024, N=3072 | K=3072, N=1024), W stored [N, K].\n"
            "\n"
            "Then runtime ops through the public API, against the peak FMA rate and DRAM read\n"
            "bandwidth measured in the same run: add64 (a 64-element add: the fixed cost of a small\n"
            "op), softmax_rows and rmsnorm_rows (4096 x 4096 f32), attn_prefill (512 tokens, 16\n"
            "heads, 8 KV heads, d 128, causal), attn_decode_f32/_f16 (one query, 4096 positions).\n"
            "--filter applies to these names too.\n"
            "\n"
            "  --filter P,...   keep shapes whose name contains P or matches the glob P\n"
            "  --threads N,...  thread counts (default 1,2)\n"
            "  --rounds R       alternating rounds (default 7; --quick 3)\n"
            "  --min-time MS    minimum duration of one batch (default 20; --quick 5)\n"
            "  --shape MxNxK    one custom shape instead of the list (B stored [N, K])\n"
            "  --quick          3 rounds of >= 5 ms, squares up to 1024\n"
            "  --json FILE      also write the results as JSON (FILE '-' is stdout)\n"
            "  -h, --help       this text\n");
}

static int filter_ok(const opts *o, const char *name) { return fcb_name_matches(o->filters, o->nfilters, name); }

static int parse_list(const char *s, int *out, int max, int *count)
{
    *count = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256 || *count >= max) return 0;
        out[(*count)++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return 0;
        s = end;
    }
    return *count > 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->threads[0] = 1;
    o->threads[1] = 2;
    o->nthreads = 2;
    int rounds_set = 0, min_set = 0;
    fcb_argv a = {argc, 1, argv, "ops"};
    while (a.i < a.argc) {
        const char *v;
        if (!strcmp(argv[a.i], "-h") || !strcmp(argv[a.i], "--help")) {
            help(stdout);
            return 0;
        } else if (fcb_arg_is(&a, "--quick", NULL)) {
            o->quick = 1;
        } else if (fcb_arg_is(&a, "--filter", &v)) {
            char *dup = strdup(v);
            for (char *tok = strtok(dup, ","); tok && o->nfilters < MAX_FILTERS; tok = strtok(NULL, ","))
                o->filters[o->nfilters++] = tok;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!parse_list(v, o->threads, MAX_THREADS, &o->nthreads)) {
                fprintf(stderr, "fucina-bench ops: --threads '%s': want N[,N...], each in [1, 256]\n", v);
                return -1;
            }
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("ops", "--rounds", v, 1, MAX_ROUNDS, &o->rounds)) return -1;
            rounds_set = 1;
        } else if (fcb_arg_is(&a, "--min-time", &v)) {
            if (!fcb_parse_double("ops", "--min-time", v, 0, 1e5, &o->min_ms)) return -1;
            min_set = 1;
        } else if (fcb_arg_is(&a, "--json", &v)) {
            o->json = v;
        } else if (fcb_arg_is(&a, "--shape", &v)) {
            long long m, n, k;
            char tail;
            if (sscanf(v, "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 || k < 1 || m > 65536 ||
                n > 65536 || k > 65536) {
                fprintf(stderr, "fucina-bench ops: --shape '%s': want MxNxK, each in [1, 65536]\n", v);
                return -1;
            }
            o->m = m;
            o->n = n;
            o->k = k;
            o->custom = 1;
        } else {
            fprintf(stderr, "fucina-bench ops: unknown flag '%s' (see fucina-bench ops --help)\n", argv[a.i]);
            return -1;
        }
    }
    if (!rounds_set) o->rounds = o->quick ? 3 : 7;
    if (!min_set) o->min_ms = o->quick ? 5 : 20;
    return 1;
}

/* ---- one shape ------------------------------------------------------------------ */

typedef struct bufs {
    float *a, *b, *c, *c2;
} bufs;

typedef struct call {
    const shape *s;
    bufs *bf;
    fc_workers *w;
    fc_gemm_args g;
} call;

static void run_ours(call *c)
{
    if (fc_gemm_f32(c->w, &c->g)) {
        fprintf(stderr, "fucina-bench ops: fc_gemm_f32 failed (out of memory)\n");
        exit(FCB_EXIT_FAIL);
    }
}

#ifdef FCB_HAVE_OPENBLAS
static void run_theirs(call *c)
{
    const shape *s = c->s;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s->weights ? CblasTrans : CblasNoTrans, (int)s->m, (int)s->n, (int)s->k,
                1.0f, c->bf->a, (int)s->k, c->bf->b, s->weights ? (int)s->k : (int)s->n, 0.0f, c->bf->c2, (int)s->n);
}
#endif

static double time_batch(call *c, int theirs, size_t iters)
{
    double t0 = fcb_now();
    for (size_t i = 0; i < iters; i++) {
#ifdef FCB_HAVE_OPENBLAS
        if (theirs) {
            run_theirs(c);
            continue;
        }
#else
        (void)theirs;
#endif
        run_ours(c);
    }
    return fcb_now() - t0;
}

static size_t calibrate(call *c, int theirs, double min_s)
{
    size_t iters = 1;
    double t = time_batch(c, theirs, 1); /* warm-up: scratch, pages, pool */
    t = time_batch(c, theirs, 1);
    while (t < min_s && iters < ((size_t)1 << 30)) {
        double scale = t > 0 ? 1.2 * min_s / t : 100;
        if (scale < 2) scale = 2;
        if (scale > 100) scale = 100;
        iters = (size_t)ceil((double)iters * scale);
        t = time_batch(c, theirs, iters);
    }
    return iters;
}

static void fill(float *p, size_t n, uint64_t seed)
{
    fcb_fill("f32", p, n, -1.0, 1.0, seed);
}

static int run_shape(const opts *o, const shape *s, int threads, result *r)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    r->threads = threads;
    r->theirs_s = r->theirs_gflops = r->ratio = r->theirs_gbps = r->max_rel_diff = NAN;
    size_t m = (size_t)s->m, n = (size_t)s->n, k = (size_t)s->k;
    bufs bf = {fcb_alloc(m * k * 4), fcb_alloc(k * n * 4), fcb_alloc(m * n * 4), fcb_alloc(m * n * 4)};
    if (!bf.a || !bf.b || !bf.c || !bf.c2) {
        fcb_free(bf.a);
        fcb_free(bf.b);
        fcb_free(bf.c);
        fcb_free(bf.c2);
        return -1;
    }
    fill(bf.a, m * k, 11);
    fill(bf.b, k * n, 12);
    memset(bf.c, 0, m * n * 4);
    memset(bf.c2, 0, m * n * 4);
    fc_workers *w = fc_workers_new(threads);
    if (!w) {
        fprintf(stderr, "fucina-bench ops: cannot start %d threads\n", threads);
        return -1;
    }
    call c = {s, &bf, w, {0}};
    c.g.m = s->m;
    c.g.n = s->n;
    c.g.k = s->k;
    c.g.a = bf.a;
    c.g.rsa = s->k;
    c.g.csa = 1;
    c.g.b = bf.b;
    c.g.btype = FC_GEMM_B_F32;
    c.g.rsb = s->weights ? 1 : s->n;
    c.g.csb = s->weights ? s->k : 1;
    c.g.c = bf.c;
    c.g.ldc = s->n;
    c.g.accumulate = 0;
    fc_gemm_set_provider("own");
    r->provider = fc_gemm_provider_for(&c.g);
    int have_theirs = 0;
#ifdef FCB_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
    have_theirs = 1;
#endif
    double min_s = o->min_ms * 1e-3;
    size_t it_ours = calibrate(&c, 0, min_s), it_theirs = have_theirs ? calibrate(&c, 1, min_s) : 0;
    double t_ours[MAX_ROUNDS], t_theirs[MAX_ROUNDS];
    for (long i = 0; i < o->rounds; i++) {
        t_ours[i] = time_batch(&c, 0, it_ours) / (double)it_ours;
        if (have_theirs) t_theirs[i] = time_batch(&c, 1, it_theirs) / (double)it_theirs;
    }
    double flops = 2.0 * (double)m * (double)n * (double)k, wbytes = 4.0 * (double)n * (double)k;
    r->ours_s = fcb_median(t_ours, (size_t)o->rounds);
    r->ours_gflops = flops / r->ours_s * 1e-9;
    r->ours_gbps = wbytes / r->ours_s * 1e-9;
    if (have_theirs) {
        r->theirs_s = fcb_median(t_theirs, (size_t)o->rounds);
        r->theirs_gflops = flops / r->theirs_s * 1e-9;
        r->theirs_gbps = wbytes / r->theirs_s * 1e-9;
        r->ratio = r->theirs_s / r->ours_s;
        double dmax = 0, vmax = 0;
        for (size_t i = 0; i < m * n; i++) {
            double d = fabs((double)bf.c[i] - (double)bf.c2[i]), v = fabs((double)bf.c2[i]);
            if (d > dmax) dmax = d;
            if (v > vmax) vmax = v;
        }
        r->max_rel_diff = vmax > 0 ? dmax / vmax : dmax;
    }
    fc_gemm_set_provider("auto");
    fc_workers_free(w);
    fcb_free(bf.a);
    fcb_free(bf.b);
    fcb_free(bf.c);
    fcb_free(bf.c2);
    return 0;
}

static void fmt(char *buf, size_t len, const char *f, double v)
{
    if (isfinite(v)) snprintf(buf, len, f, v);
    else snprintf(buf, len, "n/a");
}

static void print_row(const result *r)
{
    char og[16], tg[16], ra[16], ob[16], tb[16];
    fmt(og, sizeof og, "%.1f", r->ours_gflops);
    fmt(tg, sizeof tg, "%.1f", r->theirs_gflops);
    fmt(ra, sizeof ra, "%.2fx", r->ratio);
    if (r->s->m == 1) {
        fmt(ob, sizeof ob, "%.1f", r->ours_gbps);
        fmt(tb, sizeof tb, "%.1f", r->theirs_gbps);
    } else {
        snprintf(ob, sizeof ob, "-");
        snprintf(tb, sizeof tb, "-");
    }
    fprintf(out_f, "  %-22s %3d %13s %10s %12s %9s %9s %11s  %s\n", r->s->name, r->threads, og, tg, ra, ob, tb,
           r->provider, isfinite(r->max_rel_diff) && r->max_rel_diff > 1e-4 ? "(results differ!)" : "");
    fflush(out_f);
}

int fcb_cmd_ops(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc <= 0) return rc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    out_f = o.json && !strcmp(o.json, "-") ? stderr : stdout;
    fcb_machine mach;
    fcb_machine_probe(&mach);
    fcb_machine_print(out_f, &mach);
#ifdef FCB_HAVE_OPENBLAS
    const char *peer = "OpenBLAS";
#else
    const char *peer = "OpenBLAS (not found at configure time: n/a)";
#endif
    fprintf(out_f, "f32 GEMM, ours (fc_gemm_f32, provider 'own') vs %s; %ld alternating rounds, batches >= %.0f ms\n",
           peer, o.rounds, o.min_ms);
    fprintf(out_f, "  %-22s %3s %13s %10s %12s %9s %9s %11s\n", "shape", "thr", "ours GFLOP/s", "OpenBLAS", "ours/OpenBLAS",
           "ours GB/s", "OB GB/s", "path");
    shape custom = {"custom", o.m, o.n, o.k, 1};
    result res[2 * N_SHAPES * MAX_THREADS];
    size_t nres = 0;
    for (size_t i = 0; i < (o.custom ? 1 : N_SHAPES); i++) {
        const shape *s = o.custom ? &custom : &shapes[i];
        if (!o.custom && !filter_ok(&o, s->name)) continue;
        if (!o.custom && o.quick && s->m == 2048) continue;
        for (int t = 0; t < o.nthreads; t++) {
            if (run_shape(&o, s, o.threads[t], &res[nres])) {
                fprintf(stderr, "fucina-bench ops: out of memory at %s\n", s->name);
                return FCB_EXIT_FAIL;
            }
            print_row(&res[nres++]);
        }
    }
    fcb_ops_cfg rc_cfg = {out_f, o.filters, o.nfilters, o.threads, o.nthreads, o.rounds, o.min_ms, o.quick};
    static fcb_ops_result rt[FCB_OPS_RUNTIME_MAX];
    size_t nrt = 0;
    if (!o.custom && fcb_ops_runtime(&rc_cfg, rt, FCB_OPS_RUNTIME_MAX, &nrt)) {
        fprintf(stderr, "fucina-bench ops: the runtime-op cases failed\n");
        return FCB_EXIT_FAIL;
    }
    if (o.json) {
        fcb_json j;
        if (fcb_json_open(&j, o.json)) {
            fprintf(stderr, "fucina-bench ops: cannot write '%s'\n", o.json);
            return FCB_EXIT_FAIL;
        }
        fcb_json_begin(&j, NULL, '{');
        fcb_json_begin(&j, "header", '{');
        fcb_json_str(&j, "tool", "fucina-bench");
        fcb_json_str(&j, "command", "ops");
        fcb_json_int(&j, "rounds", o.rounds);
        fcb_json_num(&j, "min_time_ms", o.min_ms);
        fcb_json_bool(&j, "quick", o.quick);
#ifdef FCB_HAVE_OPENBLAS
        fcb_json_bool(&j, "openblas", 1);
#else
        fcb_json_bool(&j, "openblas", 0);
#endif
        fcb_json_machine(&j, &mach);
        fcb_json_end(&j, '}');
        fcb_json_begin(&j, "records", '[');
        for (size_t i = 0; i < nres; i++) {
            const result *r = &res[i];
            fcb_json_begin(&j, NULL, '{');
            fcb_json_str(&j, "op", "gemm_f32");
            fcb_json_str(&j, "shape", r->s->name);
            fcb_json_int(&j, "m", r->s->m);
            fcb_json_int(&j, "n", r->s->n);
            fcb_json_int(&j, "k", r->s->k);
            fcb_json_str(&j, "b_layout", r->s->weights ? "nk" : "kn");
            fcb_json_int(&j, "threads", r->threads);
            fcb_json_str(&j, "path", r->provider);
            fcb_json_num(&j, "ours_median_ns", r->ours_s * 1e9);
            fcb_json_num(&j, "ours_gflops", r->ours_gflops);
            fcb_json_num(&j, "openblas_median_ns", r->theirs_s * 1e9);
            fcb_json_num(&j, "openblas_gflops", r->theirs_gflops);
            fcb_json_num(&j, "ratio_ours_over_openblas", r->ratio);
            fcb_json_num(&j, "ours_weight_gbps", r->s->m == 1 ? r->ours_gbps : NAN);
            fcb_json_num(&j, "openblas_weight_gbps", r->s->m == 1 ? r->theirs_gbps : NAN);
            fcb_json_num(&j, "max_rel_diff", r->max_rel_diff);
            fcb_json_end(&j, '}');
        }
        fcb_ops_runtime_json(&j, rt, nrt);
        fcb_json_end(&j, ']');
        fcb_json_end(&j, '}');
        if (fcb_json_close(&j)) {
            fprintf(stderr, "fucina-bench ops: error writing '%s'\n", o.json);
            return FCB_EXIT_FAIL;
        }
    }
    return FCB_EXIT_OK;
}
