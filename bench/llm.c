/* SPDX-License-Identifier: MIT */
/* `fucina-bench llm`: whole-model prefill and decode speed of our runtime
 * (fucina/llm.h) against llama.cpp (bench/peers/llama_llm.c) on the same
 * GGUF file, in one process.
 *
 *   tests    ppP for P in --prompts (default 1,4,16,64,128,512): P random
 *            tokens evaluated from an empty cache, logits of the last row;
 *            tgN for N in --gen (default 32): N tokens evaluated one at a
 *            time from an empty cache (what llama-bench times)
 *   engines  ours (a session with --ctk's KV type) and llama.cpp (a context
 *            with the same n_threads, n_ctx, KV type, n_batch = n_ubatch =
 *            the prompt length, a persistent threadpool, flash attention on
 *            llama.cpp's "auto")
 *
 * Each test: one untimed run per engine (warm-up), then --rounds passes
 * that alternate the engines (ours, llama.cpp, ours, ...), each pass a
 * batch of runs lasting at least --min-ms; the table gives each engine's
 * median tokens/s over the passes, the ratio ours / llama.cpp, and for
 * decode the weight bytes streamed per second (every tensor but the token
 * embedding table, which decode reads one row of, unless it is the tied
 * output matrix) against the DRAM read bandwidth of a probe run in every
 * round after the engines (median over rounds of ours / that round's probe:
 * a shared VM's bandwidth moves between minutes). */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fcb.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "peers/llama_llm.h"

#define MAX_MODELS 8
#define MAX_LIST 16
#define MAX_ROUNDS 64

typedef struct lopts {
    const char *models[MAX_MODELS];
    int nmodels;
    int threads[MAX_LIST], nthreads;
    int prompts[MAX_LIST], nprompts;
    int gens[MAX_LIST], ngens;
    long rounds, n_ctx;
    double min_ms;
    fc_dtype kv;
    int peer, roofline, cpu_clock;
    const char *json;
} lopts;

static void help(FILE *f)
{
    fprintf(f, "usage: fucina-bench llm MODEL.gguf [MODEL.gguf ...] [--threads 1,2] [--prompts 1,4,...] [--gen 32]\n"
               "                        [--rounds N] [--min-ms MS] [--ctk f16|q8_0|f32] [--ctx N] [--no-peer]\n"
               "                        [--no-roofline] [--clock wall|cpu] [--json FILE]\n"
               "Prefill (ppP: P tokens from an empty cache, last row's logits) and decode (tgN: N single-token\n"
               "steps from an empty cache) of each model, ours against llama.cpp's libllama on the same file,\n"
               "alternating passes in one process; medians of --rounds passes (default 3), each >= --min-ms\n"
               "(default 0: one run). Defaults: --threads 2, --prompts 1,4,16,64,128,512, --gen 32, --ctk f16\n"
               "(both engines use the same KV type),\n"
               "--ctx = the longest test. Decode: weight GB/s and %% of the DRAM read bandwidth of a probe\n"
               "run in every round (--no-roofline: neither). --clock cpu (with --threads 1 only) times process\n"
               "CPU time, which on a shared machine counts only the time this process ran.\n"
               "llama.cpp's threadpool spins and collapses when its threads exceed the free CPUs: 2-thread\n"
               "figures want an idle machine. Exit status: 0 ok, 1 run-time failure, 2 bad command line.\n");
}

static int parse(int argc, char **argv, lopts *o)
{
    *o = (lopts){.threads = {2}, .nthreads = 1, .prompts = {1, 4, 16, 64, 128, 512}, .nprompts = 6, .gens = {32},
                 .ngens = 1, .rounds = 3, .kv = FC_F16, .peer = 1, .roofline = 1};
    fcb_argv a = {argc, 1, argv, "llm"};
    while (a.i < argc) {
        const char *v, *arg = argv[a.i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            help(stdout);
            return 0;
        }
        if (!strcmp(arg, "--no-peer")) {
            o->peer = 0;
            a.i++;
        } else if (!strcmp(arg, "--no-roofline")) {
            o->roofline = 0;
            a.i++;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!fcb_parse_int_list("llm", "--threads", v, 1, 256, o->threads, MAX_LIST, &o->nthreads)) return -1;
        } else if (fcb_arg_is(&a, "--prompts", &v)) {
            if (!fcb_parse_int_list("llm", "--prompts", v, 1, 1 << 16, o->prompts, MAX_LIST, &o->nprompts)) return -1;
        } else if (fcb_arg_is(&a, "--gen", &v)) {
            if (!fcb_parse_int_list("llm", "--gen", v, 1, 1 << 16, o->gens, MAX_LIST, &o->ngens)) return -1;
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("llm", "--rounds", v, 1, MAX_ROUNDS, &o->rounds)) return -1;
        } else if (fcb_arg_is(&a, "--ctx", &v)) {
            if (!fcb_parse_int("llm", "--ctx", v, 1, 1L << 24, &o->n_ctx)) return -1;
        } else if (fcb_arg_is(&a, "--min-ms", &v)) {
            if (!fcb_parse_double("llm", "--min-ms", v, 0, 100000, &o->min_ms)) return -1;
        } else if (fcb_arg_is(&a, "--json", &v)) {
            o->json = v;
        } else if (fcb_arg_is(&a, "--ctk", &v)) {
            if (!strcmp(v, "f16")) o->kv = FC_F16;
            else if (!strcmp(v, "f32")) o->kv = FC_F32;
            else if (!strcmp(v, "q8_0")) o->kv = FC_Q8_0;
            else {
                fprintf(stderr, "fucina-bench llm: --ctk: '%s' is not f16, q8_0 or f32\n", v);
                return -1;
            }
        } else if (fcb_arg_is(&a, "--clock", &v)) {
            if (strcmp(v, "wall") && strcmp(v, "cpu")) {
                fprintf(stderr, "fucina-bench llm: --clock: '%s' is not wall or cpu\n", v);
                return -1;
            }
            o->cpu_clock = !strcmp(v, "cpu");
        } else if (arg[0] == '-') {
            fprintf(stderr, "fucina-bench llm: unknown option '%s' (see --help)\n", arg);
            return -1;
        } else {
            if (o->nmodels == MAX_MODELS) {
                fprintf(stderr, "fucina-bench llm: more than %d models\n", MAX_MODELS);
                return -1;
            }
            o->models[o->nmodels++] = arg;
            a.i++;
        }
    }
    if (!o->nmodels) {
        fprintf(stderr, "fucina-bench llm: no model given (see --help)\n");
        return -1;
    }
    if (o->cpu_clock && (o->nthreads != 1 || o->threads[0] != 1)) {
        fprintf(stderr, "fucina-bench llm: --clock cpu needs --threads 1 (CPU time of several threads counts "
                        "their spinning, not the elapsed time)\n");
        return -1;
    }
    int need = 0;
    for (int i = 0; i < o->nprompts; i++) need = o->prompts[i] > need ? o->prompts[i] : need;
    for (int i = 0; i < o->ngens; i++) need = o->gens[i] > need ? o->gens[i] : need;
    if (o->n_ctx && o->n_ctx < need) {
        fprintf(stderr, "fucina-bench llm: --ctx %ld is smaller than the longest test (%d tokens)\n", o->n_ctx, need);
        return -1;
    }
    if (!o->n_ctx) o->n_ctx = need;
    return 1;
}

static const char *kv_name(fc_dtype t) { return t == FC_F32 ? "f32" : t == FC_Q8_0 ? "q8_0" : "f16"; }
static int kv_ggml(fc_dtype t) { return t == FC_F32 ? 0 : t == FC_Q8_0 ? 8 : 1; }

/* Bytes a decode step reads from the weights; 0 on failure (error in ctx).
 * A mixture of experts reads only the experts a token is routed to: the
 * 3-D expert tensors (*_exps) count expert_used_count / expert_count of
 * their bytes. */
static double weight_bytes_per_token(fc_ctx *ctx, const char *path)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return 0;
    const int tied = fc_gguf_find_tensor(g, "output.weight") < 0;
    const char *arch = NULL;
    double used_frac = 1;
    if (fc_gguf_get_str(g, "general.architecture", &arch, NULL) == FC_OK) {
        char kc[96], ku[96];
        uint32_t n_exp = 0, n_used = 0;
        snprintf(kc, sizeof kc, "%s.expert_count", arch);
        snprintf(ku, sizeof ku, "%s.expert_used_count", arch);
        if (fc_gguf_find_kv(g, kc) >= 0 && fc_gguf_find_kv(g, ku) >= 0 && fc_gguf_get_u32(g, kc, &n_exp) == FC_OK &&
            fc_gguf_get_u32(g, ku, &n_used) == FC_OK && n_exp > 0 && n_used <= n_exp)
            used_frac = (double)n_used / (double)n_exp;
    }
    fc_ctx_clear_error(ctx);
    double b = 0;
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        if (!tied && !strcmp(ti.name, "token_embd.weight")) continue; /* one row per token */
        b += (double)ti.nbytes * (strstr(ti.name, "_exps.") ? used_frac : 1.0);
    }
    fc_gguf_close(g);
    return b;
}

/* ---- one test ------------------------------------------------------------------ */

static double now_of(int cpu)
{
    if (!cpu) return fcb_now();
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct side {
    /* ours */
    fc_ctx *ctx;
    fc_llm_session *s;
    float *logits;
    /* llama.cpp */
    fcb_llama_ctx *lc;
    /* the test */
    const fc_token *toks;
    int n_prompt, n_gen;
    int fail;
} side;

static void run_ours(side *d)
{
    fc_llm_session_reset(d->s);
    if (d->n_prompt) {
        if (fc_llm_session_eval_ex(d->ctx, d->s, d->toks, (size_t)d->n_prompt, FC_LLM_LOGITS_LAST, d->logits) != FC_OK)
            d->fail = 1;
        return;
    }
    for (int i = 0; i < d->n_gen && !d->fail; i++)
        if (fc_llm_session_eval_ex(d->ctx, d->s, d->toks + i, 1, FC_LLM_LOGITS_LAST, d->logits) != FC_OK) d->fail = 1;
}

static void run_llama(side *d)
{
    int rc = d->n_prompt ? fcb_llama_prefill(d->lc, d->toks, d->n_prompt) : fcb_llama_decode(d->lc, d->toks, d->n_gen);
    if (rc) d->fail = 2;
}

/* Seconds per run: a batch of `iters` runs, timed. */
static double pass(void (*fn)(side *), side *d, int iters, int cpu)
{
    double t0 = now_of(cpu);
    for (int i = 0; i < iters; i++) fn(d);
    return (now_of(cpu) - t0) / iters;
}

typedef struct result {
    char name[24];
    int threads, n_tokens, decode;
    double ours_ts, llama_ts, ours_cv, llama_cv; /* tokens/s medians; NaN when absent */
    double gbps, pct_dram; /* decode: weight GB/s; median over rounds of ours / that round's read probe */
    double dram;           /* decode: median GB/s of the read probe run in each round */
} result;

static int run_test(const lopts *o, fc_ctx *ctx, const fc_llm_model *m, fcb_llama_model *lm, fc_dtype kv, int threads,
                    int n_prompt, int n_gen, const fc_token *toks, fcb_bw_probe *probe, double wbytes, result *r)
{
    memset(r, 0, sizeof *r);
    r->threads = threads;
    r->decode = n_prompt == 0;
    r->n_tokens = n_prompt ? n_prompt : n_gen;
    snprintf(r->name, sizeof r->name, n_prompt ? "pp%d" : "tg%d", r->n_tokens);
    r->llama_ts = r->llama_cv = NAN;
    side d = {.ctx = ctx, .toks = toks, .n_prompt = n_prompt, .n_gen = n_gen};
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = o->n_ctx;
    so.kv_type = kv;
    d.s = fc_llm_session_new_ex(ctx, m, &so);
    d.logits = malloc((size_t)fc_llm_model_hparams(m)->n_vocab * sizeof *d.logits);
    if (!d.s || !d.logits) {
        fprintf(stderr, "fucina-bench llm: session: %s\n", d.s ? "out of memory" : fc_ctx_error(ctx));
        fc_llm_session_free(d.s);
        free(d.logits);
        return -1;
    }
    if (lm) {
        const char *why = NULL;
        d.lc = fcb_llama_ctx_new(lm, threads, (int)o->n_ctx, n_prompt ? n_prompt : 1, kv_ggml(kv), &why);
        if (!d.lc) fprintf(stderr, "fucina-bench llm: llama.cpp context: %s\n", why);
        else fcb_llama_pause(d.lc); /* its new threads would poll for work during our warm-up */
    }
    /* warm-up, and the batch size that lasts >= min_ms */
    double t = pass(run_ours, &d, 1, 0);
    int iters = o->min_ms > 0 && t > 0 ? (int)ceil(o->min_ms * 1e-3 / t) : 1;
    iters = iters < 1 ? 1 : iters > 100000 ? 100000 : iters;
    if (d.lc) {
        pass(run_llama, &d, 1, 0);
        fcb_llama_pause(d.lc);
    }
    double to[MAX_ROUNDS], tl[MAX_ROUNDS], bw[MAX_ROUNDS], pct[MAX_ROUNDS];
    /* decode: each round also reads the probe's array, so ours / probe
     * compares the same minutes of a machine whose bandwidth moves (the
     * probe times elapsed seconds: no fraction of a CPU-time rate) */
    if (n_prompt || o->cpu_clock) probe = NULL;
    for (long p = 0; p < o->rounds && !d.fail; p++) {
        to[p] = (double)r->n_tokens / pass(run_ours, &d, iters, o->cpu_clock);
        if (d.lc) {
            tl[p] = (double)r->n_tokens / pass(run_llama, &d, iters, o->cpu_clock);
            fcb_llama_pause(d.lc);
        }
        if (probe) {
            bw[p] = fcb_bw_probe_read(probe, 2);
            pct[p] = 100 * wbytes * to[p] * 1e-9 / bw[p];
        }
    }
    r->dram = probe && !d.fail ? fcb_median(bw, (size_t)o->rounds) : NAN;
    r->pct_dram = probe && !d.fail ? fcb_median(pct, (size_t)o->rounds) : NAN;
    if (d.fail) {
        fprintf(stderr, "fucina-bench llm: %s failed%s%s\n", d.fail == 1 ? "our eval" : "llama_decode",
                d.fail == 1 ? ": " : "", d.fail == 1 ? fc_ctx_error(ctx) : "");
        fcb_llama_ctx_free(d.lc);
        fc_llm_session_free(d.s);
        free(d.logits);
        return -1;
    }
    r->ours_ts = fcb_median(to, (size_t)o->rounds);
    r->ours_cv = fcb_cv(to, (size_t)o->rounds);
    if (d.lc) {
        r->llama_ts = fcb_median(tl, (size_t)o->rounds);
        r->llama_cv = fcb_cv(tl, (size_t)o->rounds);
    }
    fcb_llama_ctx_free(d.lc);
    fc_llm_session_free(d.s);
    free(d.logits);
    return 0;
}

/* ---- the command ---------------------------------------------------------------- */

int fcb_cmd_llm(int argc, char **argv)
{
    static lopts o;
    int prc = parse(argc, argv, &o);
    if (prc <= 0) return prc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    const fcb_suite_opts start = {.cmd = "llm", .peer_name = "llama.cpp", .peer_available = fcb_llama_available,
                                  .roofline = o.roofline, .threads = o.threads, .nthreads = o.nthreads};
    fcb_suite_env env;
    if (fcb_suite_start(&start, &o.peer, &env)) return FCB_EXIT_FAIL;
    fcb_json j = {0};
    if (o.json) {
        if (fcb_json_open(&j, o.json)) {
            fprintf(stderr, "fucina-bench llm: cannot write %s\n", o.json);
            return FCB_EXIT_FAIL;
        }
        fcb_json_begin(&j, NULL, '{');
        fcb_json_str(&j, "suite", "llm");
        fcb_json_machine(&j, &env.mach);
        if (o.roofline) fcb_roofline_json(&j, &env.rl);
        fcb_json_str(&j, "clock", o.cpu_clock ? "cpu" : "wall");
        fcb_json_int(&j, "rounds", o.rounds);
        fcb_json_num(&j, "min_ms", o.min_ms);
        fcb_json_num(&j, "load_average_start", env.load_start);
        fcb_json_begin(&j, "models", '[');
    }
    int rc = FCB_EXIT_OK;
    for (int mi = 0; mi < o.nmodels && rc == FCB_EXIT_OK; mi++) {
        const char *path = o.models[mi];
        char err[256];
        fc_ctx *c0 = fc_ctx_new(NULL, err, sizeof err);
        if (!c0) {
            fprintf(stderr, "fucina-bench llm: %s\n", err);
            return FCB_EXIT_FAIL;
        }
        double wbytes = weight_bytes_per_token(c0, path);
        if (wbytes <= 0) {
            fprintf(stderr, "fucina-bench llm: %s\n", fc_ctx_error(c0));
            fc_ctx_free(c0);
            rc = FCB_EXIT_FAIL;
            break;
        }
        fc_ctx_free(c0);
        fcb_llama_model *lm = NULL;
        char desc[128] = "";
        if (o.peer) {
            const char *why = NULL;
            lm = fcb_llama_model_load(path, &why);
            if (!lm) printf("llama.cpp peer skipped for %s: %s\n", path, why);
            else fcb_llama_model_desc(lm, desc, sizeof desc);
        }
        if (o.json) {
            fcb_json_begin(&j, NULL, '{');
            fcb_json_str(&j, "model", path);
            fcb_json_str(&j, "llama_desc", desc);
            fcb_json_num(&j, "weight_bytes_per_token", wbytes);
            fcb_json_begin(&j, "tests", '[');
        }
        printf("\n%s (%s): weights read per decode step %.1f MiB\n", path, desc[0] ? desc : "no peer",
               wbytes / 1048576.0);
        int header = 0;
        for (int ti = 0; ti < o.nthreads && rc == FCB_EXIT_OK; ti++) {
            const int th = o.threads[ti];
            fc_ctx_options co = {.threads = th};
            fc_ctx *ctx = fc_ctx_new(&co, err, sizeof err);
            if (!ctx) {
                fprintf(stderr, "fucina-bench llm: %s\n", err);
                rc = FCB_EXIT_FAIL;
                break;
            }
            fc_llm_model *m = fc_llm_model_load(ctx, path);
            if (!m) {
                fprintf(stderr, "fucina-bench llm: %s\n", fc_ctx_error(ctx));
                fc_ctx_free(ctx);
                rc = FCB_EXIT_FAIL;
                break;
            }
            const fc_dtype kv = o.kv; /* both engines use it */
            if (!header) {
                printf("KV %s, n_ctx %ld; %ld alternating passes (ours, llama.cpp), median tokens/s; %s time\n",
                       kv_name(kv), o.n_ctx, o.rounds, o.cpu_clock ? "process CPU" : "elapsed");
                printf("decode: DRAM = the read probe run in every round (median GB/s); %%DRAM = median over rounds of "
                       "ours / that round's probe\n");
                printf("  %-8s %3s %10s %10s %7s %7s %7s %7s %6s %6s\n", "test", "thr", "ours t/s", "llama t/s", "ratio",
                       "cv-ours", "cv-llm", "GB/s", "DRAM", "%DRAM");
                header = 1;
            }
            const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
            int maxn = 1;
            for (int i = 0; i < o.nprompts; i++) maxn = o.prompts[i] > maxn ? o.prompts[i] : maxn;
            for (int i = 0; i < o.ngens; i++) maxn = o.gens[i] > maxn ? o.gens[i] : maxn;
            fc_token *toks = malloc((size_t)maxn * sizeof *toks);
            if (!toks) {
                rc = FCB_EXIT_FAIL;
            } else {
                uint64_t s = 0x2545f4914f6cdd1dull;
                for (int i = 0; i < maxn; i++) {
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                    toks[i] = (fc_token)(s % (uint64_t)nv);
                }
            }
            /* the read probe interleaved with the decode tests' rounds */
            fcb_bw_probe *probe = NULL;
            if (o.roofline && !o.cpu_clock && o.ngens > 0 &&
                !(probe = fcb_bw_probe_new(fcb_default_array_bytes(&env.mach), th, env.cpus, env.ncpus))) {
                fprintf(stderr, "fucina-bench llm: read probe: no stream_read arm or out of memory\n");
                rc = FCB_EXIT_FAIL;
            }
            for (int k = 0; k < o.nprompts + o.ngens && rc == FCB_EXIT_OK; k++) {
                const int np = k < o.nprompts ? o.prompts[k] : 0, ng = k < o.nprompts ? 0 : o.gens[k - o.nprompts];
                result r;
                if (run_test(&o, ctx, m, lm, kv, th, np, ng, toks, probe, wbytes, &r)) {
                    rc = FCB_EXIT_FAIL;
                    break;
                }
                if (r.decode) r.gbps = wbytes * r.ours_ts * 1e-9;
                char lt[16] = "-", ratio[16] = "-", cvl[16] = "-", gbs[16] = "-", dr[16] = "-", pct[16] = "-";
                if (!isnan(r.llama_ts)) {
                    snprintf(lt, sizeof lt, "%.2f", r.llama_ts);
                    snprintf(ratio, sizeof ratio, "%.2fx", r.ours_ts / r.llama_ts);
                    snprintf(cvl, sizeof cvl, "%.1f%%", 100 * r.llama_cv);
                }
                if (r.decode) snprintf(gbs, sizeof gbs, "%.2f", r.gbps);
                if (isfinite(r.dram)) snprintf(dr, sizeof dr, "%.1f", r.dram);
                if (isfinite(r.pct_dram)) snprintf(pct, sizeof pct, "%.0f%%", r.pct_dram);
                printf("  %-8s %3d %10.2f %10s %7s %6.1f%% %7s %7s %6s %6s\n", r.name, th, r.ours_ts, lt, ratio,
                       100 * r.ours_cv, cvl, gbs, dr, pct);
                fflush(stdout);
                if (o.json) {
                    fcb_json_begin(&j, NULL, '{');
                    fcb_json_str(&j, "test", r.name);
                    fcb_json_int(&j, "threads", th);
                    fcb_json_int(&j, "n_prompt", np);
                    fcb_json_int(&j, "n_gen", ng);
                    fcb_json_str(&j, "type_k", kv_name(kv));
                    fcb_json_int(&j, "n_ctx", o.n_ctx);
                    fcb_json_num(&j, "ours_ts", r.ours_ts);
                    fcb_json_num(&j, "llama_ts", r.llama_ts);
                    fcb_json_num(&j, "ratio", r.ours_ts / r.llama_ts);
                    fcb_json_num(&j, "ours_cv", r.ours_cv);
                    fcb_json_num(&j, "llama_cv", r.llama_cv);
                    if (r.decode) {
                        fcb_json_num(&j, "weight_gbps", r.gbps);
                        fcb_json_num(&j, "pct_dram", r.pct_dram);
                        fcb_json_num(&j, "probe_gbps", r.dram);
                    }
                    fcb_json_end(&j, '}');
                }
            }
            free(toks);
            fcb_bw_probe_free(probe);
            fc_llm_model_free(m);
            fc_ctx_free(ctx);
        }
        fcb_llama_model_free(lm);
        if (o.json) {
            fcb_json_end(&j, ']');
            fcb_json_end(&j, '}');
        }
    }
    const double load_end = fcb_suite_end();
    if (o.json) {
        fcb_json_end(&j, ']');
        fcb_json_num(&j, "load_average_end", load_end);
        fcb_json_end(&j, '}');
        if (fcb_json_close(&j)) {
            fprintf(stderr, "fucina-bench llm: cannot write %s\n", o.json);
            return FCB_EXIT_FAIL;
        }
    }
    return rc;
}
