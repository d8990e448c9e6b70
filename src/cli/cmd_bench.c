/* SPDX-License-Identifier: MIT */
/* fucina bench: prefill and decode tokens/s of a GGUF model, with
 * llama-bench's flags, test names (pp<N>, tg<N>), statistics and output
 * formats (md, csv, json, jsonl; the same field names), so that scripts
 * written for llama-bench read our numbers.
 *
 * What is timed is what llama-bench times (tools/llama-bench): ppN = one
 * evaluation of N random tokens from an empty cache, logits of the last row
 * only; tgN = N single-token evaluations from an empty cache, each with its
 * logits; ppP+tgG (-pg P,G) = the two back to back, timed as one. With a
 * depth D (-d) the cache first holds D random tokens, evaluated untimed once
 * per test and rewound to before every run (llama-bench restores a saved
 * state instead: the same cache contents, also untimed). Each test runs once untimed (the warm-up: pages of the mapped
 * weights, the thread pool, the allocator's pool) and then -r times; t/s is
 * the mean and sample stddev of (N / seconds) over those repetitions. The
 * llama.cpp side of a comparison is `fucina-bench llm` (bench/llm.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"

#define MAX_LIST 64
#define MAX_REPS 1000

typedef struct int_list {
    int v[MAX_LIST];
    int n;
} int_list;

/* -pg P,G pairs, in flag order */
typedef struct pg_list {
    int p[MAX_LIST], g[MAX_LIST];
    int n;
} pg_list;

typedef enum out_fmt { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL } out_fmt;

typedef struct bopts {
    const char *path;
    int_list prompts, gens, threads;
    pg_list pgs;     /* -pg, default none */
    int_list depths; /* -d, default {0}; repeated -d flags append, as llama-bench's */
    long reps, n_ctx, delay, mmap;
    out_fmt fmt;
    fc_dtype kv;
    int kv_set; /* -ctk given: the md table shows the type column */
} bopts;

typedef struct model_info {
    char type[128]; /* llama_model_desc-like: "<arch> <params> <file type>" */
    uint64_t size;  /* bytes of every tensor (llama_model_size) */
    uint64_t n_params;
} model_info;

static void help(FILE *f)
{
    fprintf(f,
            "usage: fucina bench MODEL.gguf [-m MODEL.gguf] [-p LIST] [-n LIST] [-pg P,G]... [-d LIST]\n"
            "                    [-t LIST] [-r N] [-o md|csv|json|jsonl] [--ctx N] [-ctk f16|q8_0|f32]\n"
            "                    [--delay S] [-mmp 0|1]\n\n"
            "Prefill and decode speed, as llama-bench measures them (same flags, test names and\n"
            "output fields). Each prompt length P gives a test ppP: P random tokens evaluated from\n"
            "an empty cache (logits of the last row); each generation length N a test tgN: N tokens\n"
            "evaluated one at a time from an empty cache; each -pg P,G a test ppP+tgG: the two in a\n"
            "row, timed together (t/s = (P + G) / time). With -d D every test starts from a cache\n"
            "holding D tokens (their evaluation is not timed; the test is named 'ppP @ dD'). One\n"
            "untimed warm-up run per test, then -r timed ones; t/s = mean ± sample stddev of\n"
            "tokens/second over them.\n\n"
            "  -m, --model FILE           the model (or as the first positional argument)\n"
            "  -p, --n-prompt LIST        prompt lengths (default 512; 0 = no pp test)\n"
            "  -n, --n-gen LIST           generated tokens (default 128; 0 = no tg test)\n"
            "  -pg P,G                    a prompt of P tokens then G generated (repeatable; default none)\n"
            "  -d, --n-depth LIST         tokens already in the KV cache before each test (default 0;\n"
            "                             repeatable: the lists add up; every test runs at every depth)\n"
            "  -t, --threads LIST         threads (default: FUCINA_THREADS, else the usable cores)\n"
            "  -r, --repetitions N        timed runs per test (default 5)\n"
            "  -o, --output FORMAT        md (default), csv, json or jsonl, on stdout\n"
            "  -c, --ctx N                KV cache positions (default: each test's depth + P + N)\n"
            "  -ctk, --cache-type-k TYPE  KV cache type: f16 (default), q8_0 or f32 (one type for K\n"
            "                             and V; -ctv is accepted if equal)\n"
            "  --delay S                  seconds to sleep before each test (default 0)\n"
            "  -mmp, --mmap 0|1           1: map the file; 0 (default): read it into 2 MiB pages\n"
            "LIST: comma-separated integers and ranges FIRST-LAST, FIRST-LAST+STEP, FIRST-LAST*MULT\n"
            "(e.g. -p 1,4,16 or -p 16-512*2). Exit status: 0 done, 1 failure, 2 bad usage or input.\n");
}

/* ---- flags ------------------------------------------------------------------------ */

/* A whole decimal integer in [lo, hi]; "12x", "" or out of range is an error. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "fucina bench: %s: '%s' is not an integer in [%ld, %ld]\n", flag, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

static int list_push(const char *flag, int_list *l, long v)
{
    if (l->n == MAX_LIST) {
        fprintf(stderr, "fucina bench: %s: more than %d values\n", flag, MAX_LIST);
        return 0;
    }
    l->v[l->n++] = (int)v;
    return 1;
}

/* llama-bench's parse_int_range: "A", "A-B", "A-B+S", "A-B*M", comma-separated. */
static int parse_list(const char *flag, const char *s, long lo, long hi, int_list *l)
{
    l->n = 0;
    char buf[512];
    if (!*s || strlen(s) >= sizeof buf) {
        fprintf(stderr, "fucina bench: %s: '%s' is not a list of integers\n", flag, s);
        return 0;
    }
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = 0; /* an empty item ("1,,2", "1,") fails to parse below */
        char *dash = strchr(tok + 1, '-'); /* tok + 1: a leading '-' is a sign, rejected below */
        if (!dash) {
            long v;
            if (!parse_long(flag, tok, lo, hi, &v) || !list_push(flag, l, v)) return 0;
            continue;
        }
        *dash = 0;
        char *rest = dash + 1, *op = strpbrk(rest, "+*");
        char kind = op ? *op : '+';
        if (op) *op = 0;
        long a, b, step = 1;
        if (!parse_long(flag, tok, lo, hi, &a) || !parse_long(flag, rest, lo, hi, &b) ||
            (op && !parse_long(flag, op + 1, kind == '*' ? 2 : 1, 1L << 20, &step)))
            return 0;
        if (b < a) {
            fprintf(stderr, "fucina bench: %s: range %ld-%ld ends before it starts\n", flag, a, b);
            return 0;
        }
        if (kind == '*' && a == 0) {
            fprintf(stderr, "fucina bench: %s: a multiplied range cannot start at 0\n", flag);
            return 0;
        }
        for (long v = a; v <= b; v = kind == '*' ? v * step : v + step)
            if (!list_push(flag, l, v)) return 0;
    }
    return 1;
}

/* llama-bench's -pg: exactly "P,G", two whole integers. */
static int parse_pg(const char *flag, const char *s, pg_list *l)
{
    const char *comma = strchr(s, ',');
    char p[32];
    if (!comma || strchr(comma + 1, ',') || (size_t)(comma - s) >= sizeof p) {
        fprintf(stderr, "fucina bench: %s: '%s' is not PP,TG (two integers: prompt and generated tokens)\n", flag, s);
        return 0;
    }
    snprintf(p, sizeof p, "%.*s", (int)(comma - s), s);
    long a, b;
    if (!parse_long(flag, p, 0, 1 << 20, &a) || !parse_long(flag, comma + 1, 0, 1 << 20, &b)) return 0;
    if (l->n == MAX_LIST) {
        fprintf(stderr, "fucina bench: %s: more than %d pairs\n", flag, MAX_LIST);
        return 0;
    }
    l->p[l->n] = (int)a;
    l->g[l->n++] = (int)b;
    return 1;
}

static int parse_kv(const char *flag, const char *s, fc_dtype *out)
{
    if (!strcmp(s, "f16")) *out = FC_F16;
    else if (!strcmp(s, "f32")) *out = FC_F32;
    else if (!strcmp(s, "q8_0")) *out = FC_Q8_0;
    else {
        fprintf(stderr, "fucina bench: %s: '%s' is not f16, q8_0 or f32\n", flag, s);
        return 0;
    }
    return 1;
}

static const char *kv_name(fc_dtype t)
{
    return t == FC_F32 ? "f32" : t == FC_Q8_0 ? "q8_0" : "f16";
}

/* 1 parsed, 0 --help, -1 bad usage (message printed). */
static int parse(int argc, char **argv, bopts *o)
{
    *o = (bopts){.prompts = {{512}, 1}, .gens = {{128}, 1}, .threads = {{0}, 1}, .depths = {{0}, 1}, .reps = 5,
                 .kv = FC_F16};
    int have_ctv = 0, have_depth = 0;
    fc_dtype ctv = FC_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        }
        if (a[0] != '-') {
            if (o->path) {
                fprintf(stderr, "fucina bench: unexpected argument '%s' (one model only)\n", a);
                return -1;
            }
            o->path = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "fucina bench: %s needs a value (see --help)\n", a);
            return -1;
        }
        const char *v = argv[++i];
        long n;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (o->path) {
                fprintf(stderr, "fucina bench: '%s': one model only\n", v);
                return -1;
            }
            o->path = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (!parse_list(a, v, 0, 1 << 20, &o->prompts)) return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (!parse_list(a, v, 0, 1 << 20, &o->gens)) return -1;
        } else if (!strcmp(a, "-pg")) {
            if (!parse_pg(a, v, &o->pgs)) return -1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
            int_list d;
            if (!parse_list(a, v, 0, 1 << 20, &d)) return -1;
            if (!have_depth) o->depths.n = 0; /* the first -d replaces the default 0 */
            have_depth = 1;
            for (int k = 0; k < d.n; k++)
                if (!list_push(a, &o->depths, d.v[k])) return -1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_list(a, v, 1, 1024, &o->threads)) return -1;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (!parse_long(a, v, 1, MAX_REPS, &o->reps)) return -1;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            if (!parse_long(a, v, 1, 1L << 24, &n)) return -1;
            o->n_ctx = n;
        } else if (!strcmp(a, "--delay")) {
            if (!parse_long(a, v, 0, 3600, &o->delay)) return -1;
        } else if (!strcmp(a, "-mmp") || !strcmp(a, "--mmap")) {
            if (!parse_long(a, v, 0, 1, &o->mmap)) return -1;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            if (!parse_kv(a, v, &o->kv)) return -1;
            o->kv_set = 1;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            if (!parse_kv(a, v, &ctv)) return -1;
            have_ctv = 1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!strcmp(v, "md")) o->fmt = OUT_MD;
            else if (!strcmp(v, "csv")) o->fmt = OUT_CSV;
            else if (!strcmp(v, "json")) o->fmt = OUT_JSON;
            else if (!strcmp(v, "jsonl")) o->fmt = OUT_JSONL;
            else {
                fprintf(stderr, "fucina bench: %s: '%s' is not md, csv, json or jsonl\n", a, v);
                return -1;
            }
        } else {
            fprintf(stderr, "fucina bench: unknown option '%s' (see --help)\n", a);
            return -1;
        }
    }
    if (!o->path) {
        fprintf(stderr, "fucina bench: no model given (see --help)\n");
        return -1;
    }
    if (have_ctv && ctv != o->kv) {
        fprintf(stderr, "fucina bench: -ctv %s differs from -ctk %s: K and V share one cache type here\n",
                kv_name(ctv), kv_name(o->kv));
        return -1;
    }
    long need = 0, depth = 0;
    for (int i = 0; i < o->prompts.n; i++) need = o->prompts.v[i] > need ? o->prompts.v[i] : need;
    for (int i = 0; i < o->gens.n; i++) need = o->gens.v[i] > need ? o->gens.v[i] : need;
    for (int i = 0; i < o->pgs.n; i++) need = o->pgs.p[i] + o->pgs.g[i] > need ? o->pgs.p[i] + o->pgs.g[i] : need;
    for (int i = 0; i < o->depths.n; i++) depth = o->depths.v[i] > depth ? o->depths.v[i] : depth;
    if (o->n_ctx && o->n_ctx < need + depth) {
        fprintf(stderr, "fucina bench: --ctx %ld is smaller than the longest test (%ld tokens%s)\n", o->n_ctx,
                need + depth, depth ? " with its depth" : "");
        return -1;
    }
    return 1;
}

/* ---- the model's description (llama-bench's model_type, model_size, model_n_params) */

static const char *ftype_name(uint32_t ft)
{
    switch (ft) { /* llama_ftype_name (src/llama-model-loader.cpp) for the types we write or read */
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 12: return "Q3_K - Medium";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return "?";
    }
}

static int describe(fc_ctx *ctx, const char *path, model_info *mi)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return 0;
    memset(mi, 0, sizeof *mi);
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        uint64_t ne = 1;
        for (int d = 0; d < ti.n_dims; d++) ne *= (uint64_t)ti.ne[d];
        mi->size += ti.nbytes;
        mi->n_params += ne;
    }
    const char *arch = "?";
    size_t len = 1;
    if (fc_gguf_get_str(g, "general.architecture", &arch, &len) != FC_OK) arch = "?", len = 1;
    uint32_t ft = 1000;
    if (fc_gguf_find_kv(g, "general.file_type") < 0 || fc_gguf_get_u32(g, "general.file_type", &ft) != FC_OK) ft = 1000;
    fc_ctx_clear_error(ctx);
    char label[32];
    /* llama.cpp names sizes from a per-architecture table (LLM_TYPE_0_6B, ...);
     * a size label from the parameter count reads the same for real shapes. */
    if (mi->n_params >= 100000000ull) snprintf(label, sizeof label, "%.1fB", (double)mi->n_params / 1e9);
    else if (mi->n_params >= 1000000ull) snprintf(label, sizeof label, "%.0fM", (double)mi->n_params / 1e6);
    else snprintf(label, sizeof label, "%.0fK", (double)mi->n_params / 1e3);
    snprintf(mi->type, sizeof mi->type, "%.*s %s %s", (int)len, arch, label, ftype_name(ft));
    fc_gguf_close(g);
    return 1;
}

/* ---- timing -------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

typedef struct btest {
    int n_prompt, n_gen, n_depth, threads;
    uint64_t samples_ns[MAX_REPS];
    double samples_ts[MAX_REPS];
    int n;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    char time[32];
} btest;

/* llama-bench's avg and stdev (sample stddev, n - 1). */
static void stats(const double *v, int n, double *avg, double *sd)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i], q += v[i] * v[i];
    *avg = n ? s / n : 0;
    *sd = n > 1 ? sqrt(fmax(0, q / (n - 1) - *avg * *avg * n / (n - 1))) : 0;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Fill the cache with t->n_depth random tokens (untimed, once per test);
 * 0 on failure (error in ctx). */
static int fill_depth(fc_ctx *ctx, fc_llm_session *s, const btest *t, int64_t n_vocab, fc_token *toks, float *logits,
                      uint64_t *seed)
{
    fc_llm_session_reset(s);
    if (!t->n_depth) return 1;
    for (int i = 0; i < t->n_depth; i++) toks[i] = (fc_token)(rng_next(seed) % (uint64_t)n_vocab);
    return fc_llm_session_eval_ex(ctx, s, toks, (size_t)t->n_depth, FC_LLM_LOGITS_LAST, logits) == FC_OK;
}

/* One run of the test from a cache holding the depth's tokens only (filled
 * by fill_depth; a rewind forgets the previous run's); 0 on failure (error
 * in ctx). */
static int run_once(fc_ctx *ctx, fc_llm_session *s, const btest *t, int64_t n_vocab, fc_token *toks, float *logits,
                    uint64_t *seed)
{
    if (fc_llm_session_truncate(ctx, s, t->n_depth) != FC_OK) return 0;
    if (t->n_prompt) {
        for (int i = 0; i < t->n_prompt; i++) toks[i] = (fc_token)(rng_next(seed) % (uint64_t)n_vocab);
        if (fc_llm_session_eval_ex(ctx, s, toks, (size_t)t->n_prompt, FC_LLM_LOGITS_LAST, logits) != FC_OK) return 0;
    }
    for (int i = 0; i < t->n_gen; i++) {
        fc_token tok = (fc_token)(rng_next(seed) % (uint64_t)n_vocab);
        if (fc_llm_session_eval_ex(ctx, s, &tok, 1, FC_LLM_LOGITS_LAST, logits) != FC_OK) return 0;
    }
    return 1;
}

/* ---- output -------------------------------------------------------------------- */

static void cpu_info(char *buf, size_t len)
{
    snprintf(buf, len, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ') v++;
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    fclose(f);
}

static void test_name(const btest *t, char *buf, size_t len)
{
    int n;
    if (t->n_gen == 0) n = snprintf(buf, len, "pp%d", t->n_prompt);
    else if (t->n_prompt == 0) n = snprintf(buf, len, "tg%d", t->n_gen);
    else n = snprintf(buf, len, "pp%d+tg%d", t->n_prompt, t->n_gen);
    if (t->n_depth > 0 && n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " @ d%d", t->n_depth);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* The fields, in llama-bench's order, of those that apply to a CPU runtime. */
static const char *const csv_fields[] = {"build_commit", "build_number", "cpu_info", "gpu_info", "backends",
                                         "model_filename", "model_type", "model_size", "model_n_params", "n_batch",
                                         "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers", "flash_attn",
                                         "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns",
                                         "avg_ts", "stddev_ts"};

static void print_record(const bopts *o, const model_info *mi, const btest *t, fc_dtype kv, const char *cpu)
{
    char v[24][160];
    /* one eval per prompt and per depth fill: the largest batch */
    const int n_batch = t->n_prompt > t->n_depth ? t->n_prompt : t->n_depth > 0 ? t->n_depth : 1;
    snprintf(v[0], 160, "%s", FUCINA_VERSION_STRING);
    snprintf(v[1], 160, "0");
    snprintf(v[2], 160, "%s", cpu);
    snprintf(v[3], 160, "%s", "");
    snprintf(v[4], 160, "CPU");
    snprintf(v[5], 160, "%s", o->path);
    snprintf(v[6], 160, "%s", mi->type);
    snprintf(v[7], 160, "%llu", (unsigned long long)mi->size);
    snprintf(v[8], 160, "%llu", (unsigned long long)mi->n_params);
    snprintf(v[9], 160, "%d", n_batch);
    snprintf(v[10], 160, "%d", n_batch);
    snprintf(v[11], 160, "%d", t->threads);
    snprintf(v[12], 160, "%s", kv_name(kv));
    snprintf(v[13], 160, "%s", kv_name(kv));
    snprintf(v[14], 160, "0");
    snprintf(v[15], 160, "0");
    snprintf(v[16], 160, "%d", t->n_prompt);
    snprintf(v[17], 160, "%d", t->n_gen);
    snprintf(v[18], 160, "%d", t->n_depth);
    snprintf(v[19], 160, "%s", t->time);
    snprintf(v[20], 160, "%.0f", t->avg_ns);
    snprintf(v[21], 160, "%.0f", t->stddev_ns);
    snprintf(v[22], 160, "%f", t->avg_ts);
    snprintf(v[23], 160, "%f", t->stddev_ts);
    static const int is_str[24] = {1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
    const int nf = (int)(sizeof csv_fields / sizeof csv_fields[0]);
    if (o->fmt == OUT_CSV) {
        for (int i = 0; i < nf; i++) {
            putchar('"');
            for (const char *c = v[i]; *c; c++) {
                if (*c == '"') putchar('"');
                putchar(*c);
            }
            printf("\"%s", i + 1 < nf ? "," : "\n");
        }
        return;
    }
    const int jl = o->fmt == OUT_JSONL;
    printf(jl ? "{" : "  {\n");
    for (int i = 0; i < nf; i++) {
        printf(jl ? "\"%s\": " : "    \"%s\": ", csv_fields[i]);
        if (is_str[i]) json_str(v[i]);
        else printf("%s", v[i]);
        printf(jl ? ", " : ",\n");
    }
    printf(jl ? "\"samples_ns\": [ " : "    \"samples_ns\": [ ");
    for (int i = 0; i < t->n; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)t->samples_ns[i]);
    printf(jl ? " ]," : " ],\n");
    printf(jl ? "\"samples_ts\": [ " : "    \"samples_ts\": [ ");
    for (int i = 0; i < t->n; i++) printf("%s%f", i ? ", " : "", t->samples_ts[i]);
    printf(jl ? " ]}\n" : " ]\n  }");
}

static void md_header(int show_kv)
{
    printf("| %-30s | %10s | %10s | %-10s | %7s |", "model", "size", "params", "backend", "threads");
    if (show_kv) printf(" %6s |", "type_k");
    printf(" %15s | %20s |\n", "test", "t/s");
    printf("| %s | %s | %s | %s | %s |", "------------------------------", "---------:", "---------:", "----------",
           "------:");
    if (show_kv) printf(" -----: |");
    printf(" --------------: | -------------------: |\n");
}

static void md_row(const model_info *mi, const btest *t, int show_kv, fc_dtype kv)
{
    char size[32], params[32], name[64], ts[48];
    if (mi->size < 1024ull * 1024 * 1024) snprintf(size, sizeof size, "%.2f MiB", (double)mi->size / 1048576.0);
    else snprintf(size, sizeof size, "%.2f GiB", (double)mi->size / 1073741824.0);
    if (mi->n_params < 1000000000ull) snprintf(params, sizeof params, "%.2f M", (double)mi->n_params / 1e6);
    else snprintf(params, sizeof params, "%.2f B", (double)mi->n_params / 1e9);
    test_name(t, name, sizeof name);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", t->avg_ts, t->stddev_ts);
    printf("| %-30s | %10s | %10s | %-10s | %7d |", mi->type, size, params, "CPU", t->threads);
    if (show_kv) printf(" %6s |", kv_name(kv));
    printf(" %15s | %21s |\n", name, ts); /* 21: '±' is two bytes */
}

/* ---- driver -------------------------------------------------------------------- */

/* Runs every test of one thread count; prints each as it completes. 0 ok, 1 failure. */
static int bench_threads(const bopts *o, const model_info *mi, int threads, fc_dtype *kv, int *n_printed,
                         const char *cpu)
{
    char err[256];
    fc_ctx_options co = {.threads = threads};
    fc_ctx *ctx = fc_ctx_new(threads ? &co : NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina bench: %s\n", err);
        return 1;
    }
    int rc = 1;
    fc_llm_session *s = NULL;
    fc_token *toks = NULL;
    float *logits = NULL;
    fc_cli_progress bar;
    fc_cli_progress_init(&bar, "loading");
    const fc_llm_load_options lo = {.progress = fc_cli_progress_update, .progress_user = &bar, .mmap = (int)o->mmap};
    fc_llm_model *m = fc_llm_model_load_ex(ctx, o->path, &lo);
    fc_cli_progress_done(&bar);
    if (!m) goto fail;
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    int maxp = 1; /* the longest batch: a prompt or a depth fill */
    for (int i = 0; i < o->prompts.n; i++) maxp = o->prompts.v[i] > maxp ? o->prompts.v[i] : maxp;
    for (int i = 0; i < o->pgs.n; i++) maxp = o->pgs.p[i] > maxp ? o->pgs.p[i] : maxp;
    for (int i = 0; i < o->depths.n; i++) maxp = o->depths.v[i] > maxp ? o->depths.v[i] : maxp;
    toks = malloc((size_t)maxp * sizeof *toks);
    logits = malloc((size_t)nv * sizeof *logits);
    if (!toks || !logits) {
        fprintf(stderr, "fucina bench: out of memory\n");
        goto done;
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    /* llama-bench's order: per depth, the pp tests, the tg tests, the pg tests */
    const int n_tests = o->prompts.n + o->gens.n + o->pgs.n;
    for (int k = 0; k < o->depths.n * n_tests; k++) {
        static btest t;
        memset(&t, 0, sizeof t);
        t.threads = fc_ctx_threads(ctx);
        t.n_depth = o->depths.v[k / n_tests];
        const int j = k % n_tests;
        if (j < o->prompts.n) t.n_prompt = o->prompts.v[j];
        else if (j < o->prompts.n + o->gens.n) t.n_gen = o->gens.v[j - o->prompts.n];
        else t.n_prompt = o->pgs.p[j - o->prompts.n - o->gens.n], t.n_gen = o->pgs.g[j - o->prompts.n - o->gens.n];
        if (t.n_prompt == 0 && t.n_gen == 0) continue; /* -p 0 / -n 0 / -pg 0,0: no such test, as llama-bench */
        if (o->delay) sleep((unsigned)o->delay);
        fc_llm_session_options so = fc_llm_session_default_options();
        so.n_ctx = o->n_ctx ? o->n_ctx : t.n_depth + t.n_prompt + t.n_gen;
        so.kv_type = *kv;
        fc_llm_session_free(s);
        s = fc_llm_session_new_ex(ctx, m, &so);
        if (!s) goto fail;
        if (!fill_depth(ctx, s, &t, nv, toks, logits, &seed)) goto fail;
        if (!run_once(ctx, s, &t, nv, toks, logits, &seed)) goto fail; /* warm-up */
        time_t now = time(NULL);
        strftime(t.time, sizeof t.time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        double ns[MAX_REPS];
        for (long r = 0; r < o->reps; r++) {
            uint64_t t0 = now_ns();
            if (!run_once(ctx, s, &t, nv, toks, logits, &seed)) goto fail;
            uint64_t dt = now_ns() - t0;
            t.samples_ns[t.n] = dt ? dt : 1;
            ns[t.n] = (double)t.samples_ns[t.n];
            t.samples_ts[t.n] = 1e9 * (double)(t.n_prompt + t.n_gen) / ns[t.n];
            t.n++;
        }
        stats(ns, t.n, &t.avg_ns, &t.stddev_ns);
        stats(t.samples_ts, t.n, &t.avg_ts, &t.stddev_ts);
        switch (o->fmt) {
        case OUT_MD:
            if (*n_printed == 0) md_header(o->kv_set && *kv != FC_F16);
            md_row(mi, &t, o->kv_set && *kv != FC_F16, *kv);
            break;
        case OUT_CSV:
            if (*n_printed == 0)
                for (size_t i = 0; i < sizeof csv_fields / sizeof csv_fields[0]; i++)
                    printf("%s%s", csv_fields[i], i + 1 < sizeof csv_fields / sizeof csv_fields[0] ? "," : "\n");
            print_record(o, mi, &t, *kv, cpu);
            break;
        case OUT_JSON:
            printf(*n_printed == 0 ? "[\n" : ",\n");
            print_record(o, mi, &t, *kv, cpu);
            break;
        case OUT_JSONL:
            print_record(o, mi, &t, *kv, cpu);
            break;
        }
        fflush(stdout);
        (*n_printed)++;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "fucina bench: %s\n", fc_ctx_error(ctx));
done:
    free(logits);
    free(toks);
    fc_llm_session_free(s);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    return rc;
}

int fc_cmd_bench(int argc, char **argv)
{
    static bopts o; /* large lists: off the stack */
    int pr = parse(argc, argv, &o);
    if (pr <= 0) return pr == 0 ? 0 : 2;
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina bench: %s\n", err);
        return 1;
    }
    model_info mi;
    int ok = describe(ctx, o.path, &mi);
    if (!ok) fprintf(stderr, "fucina bench: %s\n", fc_ctx_error(ctx));
    fc_ctx_free(ctx);
    if (!ok) return 1;
    char cpu[256];
    cpu_info(cpu, sizeof cpu);
    fc_dtype kv = o.kv;
    int n_printed = 0, rc = 0;
    for (int i = 0; i < o.threads.n && rc == 0; i++) rc = bench_threads(&o, &mi, o.threads.v[i], &kv, &n_printed, cpu);
    if (o.fmt == OUT_JSON) printf(n_printed ? "\n]\n" : "[\n]\n");
    if (o.fmt == OUT_MD && n_printed) printf("\nbuild: fucina %s\n", FUCINA_VERSION_STRING);
    return rc;
}
