/* SPDX-License-Identifier: MIT */
/* `fucina-bench ops`, second part: runtime ops through the public API,
 * against the hardware limits measured in the same run (peak FMA rate, DRAM
 * read bandwidth).
 *
 *   add64            a 64-element f32 add (fc_add + fc_release): the fixed
 *                    cost of one small op (validation, broadcasting by name,
 *                    pool allocation, dispatch, scope bookkeeping)
 *   softmax_rows     fc_softmax over 4096 rows of 4096 f32 (64 MiB in, 64 out)
 *   rmsnorm_rows     fc_rmsnorm with a weight, same shape
 *   attn_prefill     fc_attention, 512 tokens, 16 heads, 8 KV heads, d 128,
 *                    causal; FLOPs counted as 4 * d * visible (q, k) pairs
 *   attn_decode      fc_attention, one query over 4096 cached positions (f32
 *                    and f16 K/V): bytes = the K and V read once
 *
 * Each case runs on a context of 1 and of 2 threads; the table gives the
 * median per call over the rounds, and the fraction of the roofline: GFLOP/s
 * over the measured peak FMA rate of that many cores, or GB/s over the
 * measured DRAM read bandwidth of that many threads. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fcb.h"
#include "ops_runtime.h"

typedef struct rt_case {
    const char *name;
    int kind;        /* 0 add64, 1 softmax, 2 rmsnorm, 3 prefill, 4 decode f32, 5 decode f16 */
} rt_case;

static const rt_case cases[] = {
    {"add64", 0}, {"softmax_rows", 1}, {"rmsnorm_rows", 2},
    {"attn_prefill", 3}, {"attn_decode_f32", 4}, {"attn_decode_f16", 5},
};

typedef struct rt_state {
    fc_ctx *ctx;
    int kind;
    fc_tensor *a, *b, *c; /* operands */
    fc_attention_options ao;
} rt_state;

static void rt_call(void *p)
{
    rt_state *s = p;
    fc_tensor *y = NULL;
    switch (s->kind) {
    case 0: y = fc_add(s->ctx, s->a, s->b); break;
    case 1: y = fc_softmax(s->ctx, s->a, "vocab", NULL); break;
    case 2: y = fc_rmsnorm(s->ctx, s->a, s->b, "d", 1e-6); break;
    default: y = fc_attention(s->ctx, s->a, s->b, s->c, &s->ao); break;
    }
    if (!y) {
        fprintf(stderr, "fucina-bench ops: %s\n", fc_ctx_error(s->ctx));
        exit(FCB_EXIT_FAIL);
    }
    fc_release(y);
}

static int setup(rt_state *s, int kind)
{
    fc_ctx *c = s->ctx;
    s->kind = kind;
    memset(&s->ao, 0, sizeof s->ao);
    switch (kind) {
    case 0:
        s->a = fc_rand_uniform(c, FC_F32, FC_SHAPE({"n", 64}), 1, -1, 1);
        s->b = fc_rand_uniform(c, FC_F32, FC_SHAPE({"n", 64}), 2, -1, 1);
        break;
    case 1:
        s->a = fc_rand_normal(c, FC_F32, FC_SHAPE({"row", 4096}, {"vocab", 4096}), 3, 0, 3);
        break;
    case 2:
        s->a = fc_rand_normal(c, FC_F32, FC_SHAPE({"row", 4096}, {"d", 4096}), 4, 0, 1);
        s->b = fc_rand_uniform(c, FC_F32, FC_SHAPE({"d", 4096}), 5, 0.5, 1.5);
        break;
    case 3:
        s->a = fc_rand_normal(c, FC_F32, FC_SHAPE({"seq", 512}, {"head", 16}, {"d", 128}), 6, 0, 1);
        s->b = fc_rand_normal(c, FC_F32, FC_SHAPE({"kv_seq", 512}, {"kv_head", 8}, {"d", 128}), 7, 0, 1);
        s->c = fc_rand_normal(c, FC_F32, FC_SHAPE({"kv_seq", 512}, {"kv_head", 8}, {"d", 128}), 8, 0, 1);
        s->ao.causal = 1;
        break;
    case 4: case 5: {
        fc_dtype kv = kind == 5 ? FC_F16 : FC_F32;
        s->a = fc_rand_normal(c, FC_F32, FC_SHAPE({"seq", 1}, {"head", 16}, {"d", 128}), 9, 0, 1);
        s->b = fc_rand_normal(c, kv, FC_SHAPE({"kv_seq", 4096}, {"kv_head", 8}, {"d", 128}), 10, 0, 1);
        s->c = fc_rand_normal(c, kv, FC_SHAPE({"kv_seq", 4096}, {"kv_head", 8}, {"d", 128}), 11, 0, 1);
        s->ao.causal = 1;
        s->ao.q_pos0 = 4095;
        break;
    }
    default: return -1;
    }
    return fc_ctx_status(c) == FC_OK ? 0 : -1;
}

static void teardown(rt_state *s)
{
    fc_release(s->a);
    fc_release(s->b);
    fc_release(s->c);
    s->a = s->b = s->c = NULL;
}

/* Work per call: flops and bytes. */
static void work(int kind, double *flops, double *bytes)
{
    *flops = 0;
    *bytes = 0;
    switch (kind) {
    case 0: *bytes = 3 * 64 * 4; break;
    case 1: case 2: *bytes = 2.0 * 4096 * 4096 * 4; break;
    case 3: *flops = 4.0 * 128 * 16 * (512.0 * 513 / 2); break;
    case 4: *bytes = 2.0 * 4096 * 8 * 128 * 4; *flops = 4.0 * 128 * 16 * 4096; break;
    case 5: *bytes = 2.0 * 4096 * 8 * 128 * 2; *flops = 4.0 * 128 * 16 * 4096; break;
    default: break;
    }
}

static int keep(const fcb_ops_cfg *cfg, const char *name) { return fcb_name_matches(cfg->filters, cfg->nfilters, name); }

int fcb_ops_runtime(const fcb_ops_cfg *cfg, fcb_ops_result *res, size_t max, size_t *n)
{
    *n = 0;
    int any = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) any |= keep(cfg, cases[i].name);
    if (!any) return 0;
    /* The roofline of this run: peak FMA (1 and all threads) and DRAM read. */
    int cpus[256];
    int ncpus = fcb_cpu_list(cpus, 256);
    fcb_probe_opts po = {.threads = ncpus, .repeats = cfg->quick ? 2 : 3, .fma_time = 0.02,
                         .array_bytes = (size_t)256 * FCB_MIB, .all_fma_arms = 0, .copy = 0};
    fcb_roofline rl;
    if (fcb_probe_run(&po, cpus, ncpus, &rl)) return -1;
    fprintf(cfg->out, "\nruntime ops through the public API; roofline measured now: peak FMA %.1f GFLOP/s (1 thread), "
                      "%.1f (%d threads); DRAM read %.1f GB/s (1 thread), %.1f (%d)\n",
            rl.peak_1, rl.peak_all, ncpus, rl.read.gbps_1, rl.read.gbps_all, ncpus);
    fprintf(cfg->out, "  %-18s %3s %12s %10s %9s %12s\n", "op", "thr", "median", "GFLOP/s", "GB/s", "of roofline");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!keep(cfg, cases[i].name)) continue;
        for (int t = 0; t < cfg->nthreads && *n < max; t++) {
            char err[256];
            fc_ctx_options o = {.threads = cfg->threads[t]};
            rt_state s = {0};
            s.ctx = fc_ctx_new(&o, err, sizeof err);
            if (!s.ctx) {
                fprintf(stderr, "fucina-bench ops: %s\n", err);
                return -1;
            }
            if (setup(&s, cases[i].kind)) {
                fprintf(stderr, "fucina-bench ops: %s: %s\n", cases[i].name, fc_ctx_error(s.ctx));
                return -1;
            }
            fcb_timing tm = fcb_measure(rt_call, &s, (int)cfg->rounds, cfg->min_ms * 1e-3, 0);
            double flops, bytes;
            work(cases[i].kind, &flops, &bytes);
            fcb_ops_result *r = &res[(*n)++];
            memset(r, 0, sizeof *r);
            r->name = cases[i].name;
            r->threads = cfg->threads[t];
            r->median_ns = tm.median_s * 1e9;
            r->cv = tm.cv;
            r->gflops = flops > 0 ? flops / tm.median_s * 1e-9 : NAN;
            r->gbps = bytes / tm.median_s * 1e-9;
            double peak = r->threads == 1 ? rl.peak_1 : rl.peak_all * (double)r->threads / ncpus;
            double bw = r->threads == 1 ? rl.read.gbps_1 : rl.read.gbps_all;
            /* Compute-bound cases are judged against the FMA peak, the rest against DRAM. */
            r->frac = cases[i].kind == 3 ? r->gflops / peak : cases[i].kind == 0 ? NAN : r->gbps / bw;
            r->roof = cases[i].kind == 3 ? "peak FMA" : cases[i].kind == 0 ? "-" : "DRAM read";
            char med[32], gf[16], gb[16], fr[32];
            if (r->median_ns < 1e4) snprintf(med, sizeof med, "%.0f ns", r->median_ns);
            else snprintf(med, sizeof med, "%.3f ms", r->median_ns * 1e-6);
            if (isfinite(r->gflops)) snprintf(gf, sizeof gf, "%.1f", r->gflops); else snprintf(gf, sizeof gf, "-");
            snprintf(gb, sizeof gb, "%.1f", r->gbps);
            if (isfinite(r->frac)) snprintf(fr, sizeof fr, "%.0f%% %s", 100 * r->frac, r->roof);
            else snprintf(fr, sizeof fr, "-");
            fprintf(cfg->out, "  %-18s %3d %12s %10s %9s %12s\n", r->name, r->threads, med, gf, gb, fr);
            fflush(cfg->out);
            teardown(&s);
            fc_ctx_free(s.ctx);
        }
    }
    return 0;
}

void fcb_ops_runtime_json(fcb_json *j, const fcb_ops_result *res, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const fcb_ops_result *r = &res[i];
        fcb_json_begin(j, NULL, '{');
        fcb_json_str(j, "op", r->name);
        fcb_json_int(j, "threads", r->threads);
        fcb_json_num(j, "median_ns", r->median_ns);
        fcb_json_num(j, "cv", r->cv);
        fcb_json_num(j, "gflops", r->gflops);
        fcb_json_num(j, "gbps", r->gbps);
        fcb_json_num(j, "fraction_of_roofline", r->frac);
        fcb_json_str(j, "roofline", r->roof);
        fcb_json_end(j, '}');
    }
}
