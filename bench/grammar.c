/* SPDX-License-Identifier: MIT */
/* `fucina-bench grammar`: what constrained decoding costs, on a real model.
 *
 *   free         decode --gen tokens one at a time with the sampler
 *                (temperature 1, no truncation: the grammar's mask matters
 *                most when every token is a candidate), from the same prompt
 *   constrained  the same under a grammar (JSON by default, --schema FILE
 *                for a JSON Schema, --grammar FILE for GBNF): the sampler's
 *                sample-check-resample path, the matcher's accept; when the
 *                grammar is complete the matcher starts over, so every pass
 *                decodes the same number of tokens
 *
 * Passes alternate (free, constrained, free, ...) for --rounds rounds. The
 * grammar's own cost per token is timed inside the constrained pass: the
 * filter's calls (the check of the sampled token and, when it is refused,
 * the vocabulary mask) plus the accept. Reported: the median decode step
 * of the free passes, the median and 90th percentile grammar cost per
 * token and its share of that step, the share of tokens that needed a mask,
 * and constrained tokens/s against free tokens/s (each the median over the
 * rounds). The matcher's construction (the vocabulary trie) is timed
 * separately: a server pays it once per request. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcb.h"
#include "fucina/fucina.h"
#include "fucina/grammar.h"
#include "fucina/llm.h"
#include "fucina/sampler.h"

#define GB_MAX_ROUNDS 64

typedef struct gopts {
    const char *model, *schema, *gbnf;
    long gen, rounds, threads;
} gopts;

static void help(FILE *f)
{
    fprintf(f, "usage: fucina-bench grammar MODEL.gguf [--schema FILE | --grammar FILE] [--gen N] [--rounds N]\n"
               "                            [--threads N]\n"
               "Decode --gen tokens (default 64) free and under a grammar (default: any JSON object), alternating\n"
               "for --rounds rounds (default 5); prints the grammar's cost per token against the decode step\n"
               "and constrained tokens/s against free tokens/s.\n");
}

static int parse(int argc, char **argv, gopts *o)
{
    *o = (gopts){.gen = 64, .rounds = 5};
    fcb_argv a = {.argc = argc, .argv = argv, .i = 1, .cmd = "grammar"};
    while (a.i < argc) {
        const char *v;
        if (!strcmp(argv[a.i], "--help") || !strcmp(argv[a.i], "-h")) {
            help(stdout);
            return 0;
        } else if (fcb_arg_is(&a, "--schema", &v)) {
            o->schema = v;
        } else if (fcb_arg_is(&a, "--grammar", &v)) {
            o->gbnf = v;
        } else if (fcb_arg_is(&a, "--gen", &v)) {
            if (!fcb_parse_int("grammar", "--gen", v, 1, 100000, &o->gen)) return -1;
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("grammar", "--rounds", v, 1, GB_MAX_ROUNDS, &o->rounds)) return -1;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!fcb_parse_int("grammar", "--threads", v, 1, 1024, &o->threads)) return -1;
        } else if (argv[a.i][0] == '-') {
            fprintf(stderr, "fucina-bench grammar: unknown option '%s'\n", argv[a.i]);
            return -1;
        } else if (!o->model) {
            o->model = argv[a.i++];
        } else {
            fprintf(stderr, "fucina-bench grammar: one model only ('%s' and '%s')\n", o->model, argv[a.i]);
            return -1;
        }
    }
    if (!o->model) {
        help(stderr);
        return -1;
    }
    if (o->schema && o->gbnf) {
        fprintf(stderr, "fucina-bench grammar: --schema and --grammar: give one\n");
        return -1;
    }
    return 1;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    size_t cap = 0, len = 0, k;
    do {
        if (len + 4096 > cap) {
            char *nb = realloc(b, cap = (cap + 4096) * 2);
            if (!nb) {
                free(b);
                fclose(f);
                return NULL;
            }
            b = nb;
        }
        k = fread(b + len, 1, cap - len - 1, f);
        len += k;
    } while (k > 0);
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

/* The filter, timed. */
typedef struct timed {
    fc_token_filter inner;
    double t;  /* seconds in the filter this token */
    int masks; /* masks computed this token */
} timed;

static int timed_allows(void *u, fc_token tok)
{
    timed *t = u;
    double t0 = fcb_now();
    int r = t->inner.allows(t->inner.user, tok);
    t->t += fcb_now() - t0;
    return r;
}

static int timed_mask(void *u, float *l, int32_t n)
{
    timed *t = u;
    double t0 = fcb_now();
    int r = t->inner.mask(t->inner.user, l, n);
    t->t += fcb_now() - t0;
    t->masks++;
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct pass {
    double seconds;      /* the whole pass */
    double *step;        /* per token: eval + sample (free passes) */
    double *cost;        /* per token: the grammar's time */
    long masked;         /* tokens that needed a mask */
} pass;

/* One pass of o->gen tokens; m NULL: free. */
static int run_pass(fc_ctx *ctx, fc_llm_session *s, const fc_token *prompt, size_t n_prompt, int32_t nv,
                    fc_grammar_matcher *m, uint32_t seed, long gen, pass *out, float *logits)
{
    fc_sampler_params sp = fc_sampler_default_params();
    sp.seed = seed, sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0.0f;
    fc_sampler *smp = fc_sampler_new(ctx, &sp);
    if (!smp) return -1;
    fc_llm_session_reset(s);
    if (m) fc_grammar_matcher_reset(m);
    double t_all = fcb_now();
    if (fc_llm_session_eval_ex(ctx, s, prompt, n_prompt, FC_LLM_LOGITS_LAST, logits) != FC_OK) goto fail;
    out->masked = 0;
    timed tf = {0};
    fc_token_filter f = {0};
    if (m) {
        tf.inner = fc_grammar_matcher_filter(m);
        f = (fc_token_filter){.user = &tf, .allows = timed_allows, .mask = timed_mask};
    }
    for (long k = 0; k < gen; k++) {
        double t0 = fcb_now();
        tf.t = 0, tf.masks = 0;
        fc_token t = fc_sampler_sample_filtered(smp, logits, nv, m ? &f : NULL);
        if (t == FC_TOKEN_NONE) goto fail;
        if (m) {
            double a0 = fcb_now();
            if (fc_grammar_matcher_accept(m, t) != FC_OK) goto fail;
            if (fc_grammar_matcher_done(m)) fc_grammar_matcher_reset(m); /* start another document */
            tf.t += fcb_now() - a0;
            out->cost[k] = tf.t;
            out->masked += tf.masks > 0;
        }
        fc_sampler_accept(smp, t);
        if (fc_llm_session_eval_ex(ctx, s, &t, 1, FC_LLM_LOGITS_LAST, logits) != FC_OK) goto fail;
        out->step[k] = fcb_now() - t0;
    }
    out->seconds = fcb_now() - t_all;
    fc_sampler_free(smp);
    return 0;
fail:
    fprintf(stderr, "fucina-bench grammar: %s\n", fc_ctx_error(ctx));
    fc_sampler_free(smp);
    return -1;
}

int fcb_cmd_grammar(int argc, char **argv)
{
    gopts o;
    int prc = parse(argc, argv, &o);
    if (prc <= 0) return prc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    fcb_machine mach;
    fcb_machine_probe(&mach);
    fcb_machine_print(stdout, &mach);
    char err[256];
    fc_ctx_options co = {.threads = (int)o.threads};
    fc_ctx *ctx = fc_ctx_new(o.threads ? &co : NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina-bench grammar: %s\n", err);
        return FCB_EXIT_FAIL;
    }
    int rc = FCB_EXIT_FAIL;
    fc_llm_model *model = NULL;
    fc_llm_session *s = NULL;
    fc_grammar *g = NULL;
    fc_grammar_matcher *m = NULL;
    fc_token *prompt = NULL;
    size_t n_prompt = 0;
    float *logits = NULL;
    pass fr[GB_MAX_ROUNDS] = {{0}}, cr[GB_MAX_ROUNDS] = {{0}};
    char *text = NULL;
    model = fc_llm_model_load(ctx, o.model);
    if (!model) goto fail;
    const fc_tokenizer *tok = fc_llm_model_tokenizer(model);
    const int32_t nv = (int32_t)fc_llm_model_hparams(model)->n_vocab;
    size_t n = 0;
    if (o.schema || o.gbnf) {
        text = slurp(o.schema ? o.schema : o.gbnf, &n);
        if (!text) {
            fprintf(stderr, "fucina-bench grammar: cannot read %s\n", o.schema ? o.schema : o.gbnf);
            goto done;
        }
        g = o.schema ? fc_grammar_from_json_schema(ctx, text, n) : fc_grammar_parse(ctx, text, n, NULL);
    } else {
        g = fc_grammar_json(ctx, true);
    }
    if (!g) goto fail;
    double t0 = fcb_now();
    m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    double t_new = fcb_now() - t0;
    if (!m) goto fail;
    static const char ptxt[] = "Reply with one JSON object describing a city: its name, country and population.";
    if (fc_tokenize(ctx, tok, ptxt, sizeof ptxt - 1, FC_TOKENIZE_ADD_SPECIAL, &prompt, &n_prompt) != FC_OK) goto fail;
    s = fc_llm_session_new(ctx, model, (int64_t)n_prompt + o.gen + 8);
    logits = malloc((size_t)nv * sizeof *logits);
    if (!s || !logits) goto fail;
    for (long r = 0; r < o.rounds; r++) {
        fr[r].step = calloc((size_t)o.gen, sizeof(double));
        cr[r].step = calloc((size_t)o.gen, sizeof(double));
        cr[r].cost = calloc((size_t)o.gen, sizeof(double));
        if (!fr[r].step || !cr[r].step || !cr[r].cost) goto fail;
    }
    /* one untimed pass of each, then the rounds */
    pass warm = {.step = fr[0].step, .cost = cr[0].cost};
    if (run_pass(ctx, s, prompt, n_prompt, nv, NULL, 1, o.gen, &warm, logits) ||
        run_pass(ctx, s, prompt, n_prompt, nv, m, 1, o.gen, &warm, logits))
        goto done;
    for (long r = 0; r < o.rounds; r++) {
        if (run_pass(ctx, s, prompt, n_prompt, nv, NULL, (uint32_t)r + 2, o.gen, &fr[r], logits) ||
            run_pass(ctx, s, prompt, n_prompt, nv, m, (uint32_t)r + 2, o.gen, &cr[r], logits))
            goto done;
    }
    const size_t N = (size_t)(o.rounds * o.gen);
    double *steps = malloc(N * sizeof *steps), *costs = malloc(N * sizeof *costs);
    double tf[GB_MAX_ROUNDS], tc[GB_MAX_ROUNDS], ratio[GB_MAX_ROUNDS];
    long masked = 0;
    if (!steps || !costs) {
        free(steps), free(costs);
        goto fail;
    }
    for (long r = 0; r < o.rounds; r++) {
        for (long k = 0; k < o.gen; k++) steps[r * o.gen + k] = fr[r].step[k], costs[r * o.gen + k] = cr[r].cost[k];
        tf[r] = (double)o.gen / fr[r].seconds;
        tc[r] = (double)o.gen / cr[r].seconds;
        ratio[r] = tc[r] / tf[r];
        masked += cr[r].masked;
    }
    qsort(costs, N, sizeof *costs, cmp_double);
    const double step_ms = fcb_median(steps, N) * 1e3, cost_ms = costs[N / 2] * 1e3,
                 p90_ms = costs[(size_t)(0.9 * (double)(N - 1))] * 1e3;
    printf("\n%s: vocabulary %d, grammar %s; %ld tokens x %ld rounds, threads %ld\n", o.model, (int)nv,
           o.schema ? o.schema : o.gbnf ? o.gbnf : "JSON object", o.gen, o.rounds, o.threads);
    printf("  matcher construction (vocabulary trie)  %8.2f ms (once per request)\n", t_new * 1e3);
    printf("  decode step, free (median)               %8.3f ms\n", step_ms);
    printf("  grammar cost per token  median           %8.3f ms  (%.2f%% of a step; goal < 5%%)\n", cost_ms,
           100.0 * cost_ms / step_ms);
    printf("                          p90              %8.3f ms\n", p90_ms);
    printf("  tokens needing a mask                    %7.1f%%\n", 100.0 * (double)masked / (double)N);
    printf("  tokens/s free %.2f, constrained %.2f: constrained / free %.3f (median of rounds; goal >= 0.9)\n",
           fcb_median(tf, (size_t)o.rounds), fcb_median(tc, (size_t)o.rounds), fcb_median(ratio, (size_t)o.rounds));
    free(steps), free(costs);
    rc = FCB_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "fucina-bench grammar: %s\n", fc_ctx_error(ctx)[0] ? fc_ctx_error(ctx) : "out of memory");
done:
    for (long r = 0; r < o.rounds; r++) free(fr[r].step), free(cr[r].step), free(cr[r].cost);
    free(text);
    free(logits);
    fc_tokens_free(prompt);
    fc_llm_session_free(s);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    fc_llm_model_free(model);
    fc_ctx_free(ctx);
    return rc;
}
