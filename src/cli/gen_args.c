/* SPDX-License-Identifier: MIT */
/* Options shared by `fucina run` and `fucina chat` (src/cli/gen_args.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/gen_args.h"
#include "cli/progress.h"
#include "fucina/grammar.h"
#include "fucina/lora.h"
#include "io/read_all.h"

const char fc_cli_gen_args_help[] =
    "  -m, --model FILE     the model (or as the first positional argument)\n"
    "  -n, --n-predict N    tokens to generate (-1: until the end token or a full context)\n"
    "  --temp T             temperature (default 0: greedy)\n"
    "  --top-k K            keep the K most likely tokens (default 40; 0: off)\n"
    "  --top-p P            keep the smallest set of probability mass P (default 0.95; 1: off)\n"
    "  --min-p P            drop tokens below P x the top probability (default 0.05; 0: off)\n"
    "  --repeat-penalty R   divide a repeated token's positive logit by R, multiply a negative\n"
    "                       one (default 1: off)\n"
    "  --presence-penalty P subtract P from the logit of every token seen (default 0: off)\n"
    "  --frequency-penalty F  subtract F x its count from a seen token's logit (default 0: off)\n"
    "  --repeat-last-n N    the penalties look at the last N tokens, prompt included (default 64;\n"
    "                       0: off; -1: the whole context)\n"
    "  -s, --seed S         sampler seed (default 0; the same seed draws the same tokens;\n"
    "                       -1: a random seed, printed on stderr)\n"
    "  -t, --threads N      worker threads (default: FUCINA_THREADS or the cores)\n"
    "  -c, --ctx-size N     context length in tokens (the KV cache's size; --ctx is the same)\n"
    "  -ctk, --cache-type-k T  KV cache type: f16 (default), q8_0 or f32 (--cache-type)\n"
    "  -ctv, --cache-type-v T  accepted when equal to -ctk: K and V share one cache type\n"
    "  -fa, --flash-attn on|off|auto  accepted for llama-cli's command lines: attention here is\n"
    "                       always fused (no KQ matrix is formed), whatever the value\n"
    "  --mmap               map the model file (pages loaded on first touch, shared with the\n"
    "                       page cache) instead of reading it\n"
    "  --no-mmap            read the model into private 2 MiB pages, even when the file is\n"
    "                       more than half the memory (default: read it unless it is)\n"
    "  --grammar GBNF       constrain the output to a GBNF grammar (llama.cpp's dialect)\n"
    "  --grammar-file FILE  ... read from FILE\n"
    "  -j, --json-schema S  constrain the output to JSON valid under the JSON Schema S\n"
    "  -jf, --json-schema-file FILE  ... read from FILE\n"
    "  --lora FILE          apply a LoRA adapter (llama.cpp's GGUF format; repeatable)\n"
    "  --lora-scaled FILE S ... with the user scale S (repeatable; --lora is S = 1)\n";

fc_cli_gen_args fc_cli_gen_args_default(long n_gen) {
    fc_cli_gen_args g = {.sp = fc_sampler_default_params(), .n_gen = n_gen, .kv_type = FC_F16};
    g.sp.temp = 0.0f;
    g.sp.seed = 0; /* reproducible by default; llama.cpp draws one from the clock */
    return g;
}

int fc_cli_parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int fc_cli_parse_float(const char *s, double lo, double hi, float *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return -1;
    *out = (float)v;
    return 0;
}

int fc_cli_gen_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_gen_args *g) {
    /* every spelling of an option with a value, ours and llama-cli's */
    enum opt {
        O_N, O_TEMP, O_TOP_K, O_TOP_P, O_MIN_P, O_REPEAT, O_SEED, O_THREADS, O_CTX, O_CTK, O_GRAMMAR,
        O_LAST_N, O_PRESENCE, O_FREQUENCY, O_CTV, O_MODEL, O_FA
    };
    static const struct {
        const char *name;
        enum opt o;
    } names[] = {{"-n", O_N},
                 {"--n-predict", O_N},
                 {"--predict", O_N},
                 {"--temp", O_TEMP},
                 {"--top-k", O_TOP_K},
                 {"--top-p", O_TOP_P},
                 {"--min-p", O_MIN_P},
                 {"--repeat-penalty", O_REPEAT},
                 {"--repeat-last-n", O_LAST_N},
                 {"--presence-penalty", O_PRESENCE},
                 {"--frequency-penalty", O_FREQUENCY},
                 {"-s", O_SEED},
                 {"--seed", O_SEED},
                 {"-t", O_THREADS},
                 {"--threads", O_THREADS},
                 {"-c", O_CTX},
                 {"--ctx-size", O_CTX},
                 {"--ctx", O_CTX},
                 {"-ctk", O_CTK},
                 {"--cache-type", O_CTK},
                 {"--cache-type-k", O_CTK},
                 {"-ctv", O_CTV},
                 {"--cache-type-v", O_CTV},
                 {"-fa", O_FA},
                 {"--flash-attn", O_FA},
                 {"-m", O_MODEL},
                 {"--model", O_MODEL},
                 {"--grammar", O_GRAMMAR},
                 {"--grammar-file", O_GRAMMAR},
                 {"-j", O_GRAMMAR},
                 {"--json-schema", O_GRAMMAR},
                 {"-jf", O_GRAMMAR},
                 {"--json-schema-file", O_GRAMMAR}};
    const char *a = argv[*i];
    /* The switches (no value). Contradicting an earlier one is an error, not
     * "the last wins": a script that says both means one of them by mistake. */
    const int want_mmap = !strcmp(a, "--mmap") ? 1 : !strcmp(a, "--no-mmap") ? -1 : 0;
    if (want_mmap) {
        if (g->mmap == -want_mmap) {
            fprintf(stderr, "fucina %s: %s contradicts %s given before\n", cmd, a,
                    want_mmap > 0 ? "--no-mmap" : "--mmap");
            return -1;
        }
        g->mmap = want_mmap;
        return 1;
    }
    const int lora = !strcmp(a, "--lora") ? 1 : !strcmp(a, "--lora-scaled") ? 2 : 0;
    if (lora) { /* a FILE, and with --lora-scaled its SCALE */
        if (*i + lora >= argc) {
            fprintf(stderr, "fucina %s: %s needs %s\n", cmd, a, lora == 1 ? "a FILE" : "a FILE and a SCALE");
            return -1;
        }
        if (g->n_lora == FC_CLI_MAX_LORA) {
            fprintf(stderr, "fucina %s: %s: at most %d adapters\n", cmd, a, FC_CLI_MAX_LORA);
            return -1;
        }
        const char *file = argv[*i + 1];
        float scale = 1.0f;
        if (lora == 2 && fc_cli_parse_float(argv[*i + 2], -1e6, 1e6, &scale)) {
            fprintf(stderr, "fucina %s: %s %s: the scale '%s' is not a number in [-1e6, 1e6]\n", cmd, a, file,
                    argv[*i + 2]);
            return -1;
        }
        g->lora[g->n_lora].path = file;
        g->lora[g->n_lora++].scale = scale;
        *i += lora;
        return 1;
    }
    int k = -1;
    for (int j = 0; j < (int)(sizeof names / sizeof names[0]); j++)
        if (!strcmp(a, names[j].name)) k = j;
    if (k < 0) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "fucina %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    long l = 0;
    int bad = 0;
    const char *want = "";
    switch (names[k].o) {
    case O_N:
        bad = fc_cli_parse_long(v, -1, 1L << 30, &g->n_gen), want = "an integer in -1..1073741824 (-1: no limit)";
        break;
    case O_TEMP: bad = fc_cli_parse_float(v, 0.0, 1e6, &g->sp.temp), want = "a number >= 0"; break;
    case O_TOP_K:
        bad = fc_cli_parse_long(v, 0, 1L << 30, &l), want = "an integer in 0..1073741824";
        g->sp.top_k = (int32_t)l;
        break;
    case O_TOP_P: bad = fc_cli_parse_float(v, 1e-9, 1.0, &g->sp.top_p), want = "a number in (0, 1]"; break;
    case O_MIN_P: bad = fc_cli_parse_float(v, 0.0, 1.0, &g->sp.min_p), want = "a number in [0, 1]"; break;
    case O_REPEAT: bad = fc_cli_parse_float(v, 1e-9, 1e6, &g->sp.penalty_repeat), want = "a number > 0"; break;
    case O_LAST_N:
        bad = fc_cli_parse_long(v, -1, 1L << 24, &l), want = "an integer in -1..16777216 (-1: the context size)";
        g->sp.penalty_last_n = (int32_t)(l < 0 ? 0 : l);
        g->last_n_ctx = l < 0;
        break;
    case O_PRESENCE:
        bad = fc_cli_parse_float(v, -1e6, 1e6, &g->sp.penalty_present), want = "a number in [-1e6, 1e6]";
        break;
    case O_FREQUENCY:
        bad = fc_cli_parse_float(v, -1e6, 1e6, &g->sp.penalty_freq), want = "a number in [-1e6, 1e6]";
        break;
    case O_SEED:
        /* -1 is llama.cpp's LLAMA_DEFAULT_SEED: a random seed */
        bad = fc_cli_parse_long(v, -1, 0xFFFFFFFEL, &l), want = "an integer in 0..4294967294, or -1 (random)";
        g->sp.seed = (uint32_t)(l < 0 ? 0 : l);
        g->seed_random = l < 0;
        break;
    case O_THREADS:
        bad = fc_cli_parse_long(v, 1, 1024, &l), want = "an integer in 1..1024";
        g->threads = (int)l;
        break;
    case O_CTX: bad = fc_cli_parse_long(v, 0, 1L << 24, &g->n_ctx), want = "an integer in 0..16777216"; break;
    case O_CTK:
    case O_CTV: {
        fc_dtype t = FC_F16;
        want = "one of f16, q8_0, f32";
        if (!strcmp(v, "f16")) t = FC_F16;
        else if (!strcmp(v, "q8_0")) t = FC_Q8_0;
        else if (!strcmp(v, "f32")) t = FC_F32;
        else bad = 1;
        if (names[k].o == O_CTK) g->kv_type = t;
        else g->kv_type_v = t, g->kv_v_set = 1;
        break;
    }
    case O_FA:
        /* llama-cli's -fa on|off|auto: accepted so its command lines run; attention here is
         * always the fused one (no KQ matrix is formed), whatever the value */
        want = "one of on, off, auto";
        bad = strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto");
        break;
    case O_MODEL:
        if (g->model) {
            fprintf(stderr, "fucina %s: %s '%s': the model is already '%s' (one model only)\n", cmd, a, v, g->model);
            return -1;
        }
        g->model = v;
        break;
    case O_GRAMMAR:
        if (g->grammar_opt) {
            fprintf(stderr, "fucina %s: %s and %s both constrain the output: give one\n", cmd, g->grammar_opt, a);
            return -1;
        }
        g->grammar_opt = a;
        g->grammar_arg = v;
        break;
    }
    if (bad) {
        fprintf(stderr, "fucina %s: %s '%s' is not %s\n", cmd, a, v, want);
        return -1;
    }
    return 1;
}

int fc_cli_help_arg(const char *a, void (*help)(FILE *))
{
    if (strcmp(a, "--help") && strcmp(a, "-h")) return 0;
    help(stdout);
    return 1;
}

int fc_cli_model_arg(const char *cmd, const char *a, const char **path) {
    if (a[0] == '-' && a[1]) { /* "-" alone is a path (it names no option) */
        fprintf(stderr, "fucina %s: unknown option '%s' (see --help)\n", cmd, a);
        return -1;
    }
    if (*path) {
        fprintf(stderr, "fucina %s: unexpected argument '%s' (the model is '%s')\n", cmd, a, *path);
        return -1;
    }
    *path = a;
    return 0;
}

int fc_cli_gen_args_finish(const char *cmd, fc_cli_gen_args *g, const char **path) {
    if (g->model && *path) {
        fprintf(stderr, "fucina %s: two models, '%s' and -m '%s' (one model only; see --help)\n", cmd, *path,
                g->model);
        return -1;
    }
    if (!*path) *path = g->model;
    /* the session has one cache type for K and V (fc_llm_session_options.kv_type) */
    if (g->kv_v_set && g->kv_type_v != g->kv_type) {
        fprintf(stderr, "fucina %s: -ctv %s differs from -ctk %s: K and V share one cache type here (see --help)\n",
                cmd, fc_dtype_name(g->kv_type_v), fc_dtype_name(g->kv_type));
        return -1;
    }
    return 0;
}

void fc_cli_gen_args_set_ctx(fc_cli_gen_args *g, int64_t n_ctx) {
    if (g->last_n_ctx) g->sp.penalty_last_n = (int32_t)n_ctx;
}

void fc_cli_seed_resolve(const char *cmd, fc_cli_gen_args *g) {
    if (!g->seed_random) return;
    /* the kernel's entropy, else the clock; never FC_SAMPLER_SEED_RANDOM,
     * whose draw the sampler would make again where nobody sees it */
    uint32_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint32_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    }
    if (f) fclose(f);
    if (s == FC_SAMPLER_SEED_RANDOM) s--;
    g->sp.seed = s;
    g->seed_random = 0;
    fprintf(stderr, "fucina %s: seed %lu (random; -s %lu repeats this run)\n", cmd, (unsigned long)s,
            (unsigned long)s);
}

double fc_cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

void fc_cli_perf_print(const char *cmd, double load_ms, double prompt_ms, long n_prompt, double gen_ms, long n_gen,
                       double total_ms) {
    /* llama_perf_context_print's layout, so that what reads llama-cli's
     * report (grep "prompt eval time") reads ours; "eval" counts the
     * generated tokens (llama.cpp's counts decode calls: one fewer when the
     * last token is not evaluated) */
    fprintf(stderr, "fucina %s:        load time = %10.2f ms\n", cmd, load_ms);
    static const char per[] = "(%8.2f ms per token, %8.2f tokens per second)\n";
    fprintf(stderr, "fucina %s: prompt eval time = %10.2f ms / %5ld tokens ", cmd, prompt_ms, n_prompt);
    fprintf(stderr, per, n_prompt ? prompt_ms / (double)n_prompt : 0.0,
            prompt_ms > 0 ? 1e3 * (double)n_prompt / prompt_ms : 0.0);
    fprintf(stderr, "fucina %s:        eval time = %10.2f ms / %5ld tokens ", cmd, gen_ms, n_gen);
    fprintf(stderr, per, n_gen ? gen_ms / (double)n_gen : 0.0, gen_ms > 0 ? 1e3 * (double)n_gen / gen_ms : 0.0);
    fprintf(stderr, "fucina %s:       total time = %10.2f ms / %5ld tokens\n", cmd, total_ms, n_prompt + n_gen);
}

fc_ctx *fc_cli_ctx_new(const char *cmd, const fc_cli_gen_args *g) {
    char err[256];
    const fc_ctx_options co = {.threads = g->threads};
    fc_ctx *ctx = fc_ctx_new(g->threads > 0 ? &co : NULL, err, sizeof err);
    if (!ctx) fprintf(stderr, "fucina %s: %s\n", cmd, err);
    return ctx;
}

fc_llm_model *fc_cli_model_load(fc_ctx *ctx, const char *path, const fc_cli_gen_args *g) {
    fc_cli_progress bar;
    fc_cli_progress_init(&bar, "loading");
    const fc_llm_load_options lo = {.progress = fc_cli_progress_update, .progress_user = &bar, .mmap = g->mmap};
    fc_llm_model *m = fc_llm_model_load_ex(ctx, path, &lo);
    fc_cli_progress_done(&bar);
    if (!m || !g->n_lora) return m;
    fc_llm_lora *ad[FC_CLI_MAX_LORA] = {0};
    float scales[FC_CLI_MAX_LORA];
    int ok = 1;
    for (int i = 0; i < g->n_lora && ok; i++) {
        scales[i] = g->lora[i].scale;
        ok = (ad[i] = fc_llm_lora_load(ctx, m, g->lora[i].path)) != NULL;
    }
    ok = ok && fc_llm_model_set_loras(ctx, m, ad, scales, (size_t)g->n_lora) == FC_OK;
    for (int i = 0; i < g->n_lora; i++) fc_llm_lora_free(ad[i]); /* the model keeps what it needs */
    if (ok) return m;
    fc_llm_model_free(m);
    return NULL;
}

fc_llm_session *fc_cli_session_new(fc_ctx *ctx, const fc_llm_model *m, const fc_cli_gen_args *g, int64_t n_ctx) {
    fc_llm_session_options o = fc_llm_session_default_options();
    o.n_ctx = n_ctx;
    o.kv_type = g->kv_type;
    return fc_llm_session_new_ex(ctx, m, &o);
}

/* The whole of a file into a NUL-terminated buffer (a grammar or schema is
 * small: more than 16 MiB is refused). */
static char *read_small_file(const char *path, size_t *len, char *why, size_t cap) {
    errno = 0;
    char *b = fc_read_path(path, 16u << 20, len);
    if (!b && errno == EFBIG) snprintf(why, cap, "'%s' is larger than 16 MiB", path);
    else if (!b && errno == ENOMEM) snprintf(why, cap, "out of memory reading '%s'", path);
    else if (!b) snprintf(why, cap, "cannot read '%s': %s", path, strerror(errno));
    return b;
}

fc_grammar *fc_cli_grammar_load(const char *cmd, fc_ctx *ctx, const fc_cli_gen_args *g, int *failed) {
    *failed = 0;
    if (!g->grammar_opt) return NULL;
    const char *o = g->grammar_opt;
    const int from_file = !strcmp(o, "--grammar-file") || !strcmp(o, "-jf") || !strcmp(o, "--json-schema-file");
    const int schema = !strcmp(o, "-j") || !strcmp(o, "--json-schema") || !strcmp(o, "-jf") ||
                       !strcmp(o, "--json-schema-file");
    char why[1024] = "";
    size_t len = strlen(g->grammar_arg);
    char *text = from_file ? read_small_file(g->grammar_arg, &len, why, sizeof why) : NULL;
    if (from_file && !text) {
        fprintf(stderr, "fucina %s: %s: %s\n", cmd, o, why);
        *failed = 1;
        return NULL;
    }
    const char *t = from_file ? text : g->grammar_arg;
    fc_grammar *gr = schema ? fc_grammar_from_json_schema(ctx, t, len) : fc_grammar_parse(ctx, t, len, NULL);
    free(text);
    if (!gr) {
        fprintf(stderr, "fucina %s: %s: %s\n", cmd, o, fc_ctx_error(ctx));
        *failed = 1;
    }
    return gr;
}
