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
 * llama.cpp side of a comparison is `fucina-bench llm` (bench/llm.c).
 *
 * Every list flag (-p, -n, -d, -t, -b, -ub, -fa) takes comma lists and
 * ranges and appends when repeated; the runs are llama-bench's cross product
 * in its order (-b, -ub, -fa, -t, -d outermost to innermost, then per
 * instance its pp, tg and pg tests), so the records line up with
 * llama-bench's for the same command line. */
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
#include "fc_build_commit.h" /* FC_BUILD_COMMIT, FC_BUILD_NUMBER: cmake/build_commit.cmake */
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"

#define MAX_LIST 64
#define MAX_REPS 1000
#define MAX_RUNS 100000 /* test instances of one command line (the cross product) */

typedef struct int_list {
    int v[MAX_LIST];
    int n;
} int_list;

/* -pg P,G pairs, in flag order */
typedef struct pg_list {
    int p[MAX_LIST], g[MAX_LIST];
    int n;
} pg_list;

typedef enum out_fmt { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL, OUT_SQL } out_fmt;

typedef struct bopts {
    const char *path;
    /* each list starts as its default; the first flag replaces it, later ones append */
    int_list prompts, gens, threads;
    pg_list pgs;     /* -pg, default none */
    int_list depths; /* -d, default {0} */
    int_list batches, ubatches; /* -b, -ub; default {0}: each prompt and depth fill in one evaluation */
    int_list fas;               /* -fa, default {0}: recorded only (one attention implementation) */
    int set_p, set_n, set_t, set_d, set_b, set_ub, set_fa;
    long reps, n_ctx, delay, mmap;
    out_fmt fmt;
    fc_dtype kv[MAX_LIST]; /* -ctk, default {f16} */
    int n_kv, kv_set;      /* kv_set: -ctk given */
    int verbose, progress, no_warmup;
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
            "                    [-t LIST] [-b LIST] [-ub LIST] [-fa LIST] [-r N] [-o md|csv|json|jsonl|sql]\n"
            "                    [--ctx N] [-ctk f16|q8_0|f32] [--delay S] [-mmp 0|1] [--progress]\n"
            "                    [--no-warmup] [-v]\n\n"
            "Prefill and decode speed, as llama-bench measures them (same flags, test names and\n"
            "output fields). Each prompt length P gives a test ppP: P random tokens evaluated from\n"
            "an empty cache (logits of the last row); each generation length N a test tgN: N tokens\n"
            "evaluated one at a time from an empty cache; each -pg P,G a test ppP+tgG: the two in a\n"
            "row, timed together (t/s = (P + G) / time). With -d D every test starts from a cache\n"
            "holding D tokens (their evaluation is not timed; the test is named 'ppP @ dD'). One\n"
            "untimed warm-up run per test, then -r timed ones; t/s = mean ± sample stddev of\n"
            "tokens/second over them. Every LIST flag can be repeated (the values add up); the runs\n"
            "are the cross product of -b, -ub, -fa, -t and -d, in llama-bench's order.\n\n"
            "  -m, --model FILE           the model (or as the first positional argument)\n"
            "  -p, --n-prompt LIST        prompt lengths (default 512; 0 = no pp test)\n"
            "  -n, --n-gen LIST           generated tokens (default 128; 0 = no tg test)\n"
            "  -pg P,G                    a prompt of P tokens then G generated (repeatable; default none)\n"
            "  -d, --n-depth LIST         tokens already in the KV cache before each test (default 0)\n"
            "  -t, --threads LIST         threads (default: FUCINA_THREADS, else the usable cores)\n"
            "  -b, --batch-size LIST      evaluate prompts and depth fills in chunks of this many tokens\n"
            "                             (default: each in one evaluation, recorded as its length)\n"
            "  -ub, --ubatch-size LIST    ... at most this many per evaluation (the chunk is min(b, ub):\n"
            "                             an evaluation is not split further here)\n"
            "  -fa, --flash-attn LIST     0|1, recorded as flash_attn and nothing else: Fucina has one\n"
            "                             attention, fused (no KQ matrix is formed), whatever -fa says\n"
            "  -r, --repetitions N        timed runs per test (default 5)\n"
            "  -o, --output FORMAT        md (default), csv, json, jsonl or sql (llama-bench's table\n"
            "                             llama_bench: CREATE TABLE IF NOT EXISTS + INSERTs), on stdout\n"
            "  -c, --ctx N                KV cache positions (default: each test's depth + P + N)\n"
            "  -ctk, --cache-type-k LIST  KV cache types: f16 (default), q8_0, f32 (one type for K\n"
            "                             and V; -ctv is accepted if it repeats -ctk's list)\n"
            "  --delay S                  seconds to sleep before each test (default 0)\n"
            "  -mmp, --mmap 0|1           1: map the file; 0 (default): read it into 2 MiB pages\n"
            "  --progress                 report each test's steps on stderr\n"
            "  --no-warmup                no untimed run before the timed ones\n"
            "  -v, --verbose              each model load and each run's time on stderr\n"
            "LIST: comma-separated integers and ranges FIRST-LAST, FIRST-LAST+STEP, FIRST-LAST*MULT\n"
            "(e.g. -p 1,4,16 or -p 16-512*2). build_commit is the git commit this binary was built\n"
            "from ('unknown' outside a git checkout). Exit status: 0 done, 1 failure, 2 bad usage.\n");
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

/* A -ctk / -ctv LIST (comma separated), appended to l[0..*n). */
static int parse_kv_list(const char *flag, const char *v, fc_dtype *l, int *n)
{
    char item[16];
    for (const char *p = v;;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= sizeof item) {
            fprintf(stderr, "fucina bench: %s: '%.*s' is not f16, q8_0 or f32\n", flag, (int)len, p);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (*n >= MAX_LIST) {
            fprintf(stderr, "fucina bench: %s: more than %d values\n", flag, MAX_LIST);
            return 0;
        }
        if (!parse_kv(flag, item, &l[*n])) return 0;
        (*n)++;
        if (!e) return 1;
        p = e + 1;
    }
}

/* A LIST flag: the first one replaces the default, later ones append (as
 * llama-bench's: -p 4 -p 8 is -p 4,8). */
static int append_list(const char *flag, const char *v, long lo, long hi, int_list *l, int *set)
{
    int_list add;
    if (!parse_list(flag, v, lo, hi, &add)) return 0;
    if (!*set) l->n = 0;
    *set = 1;
    for (int k = 0; k < add.n; k++)
        if (!list_push(flag, l, add.v[k])) return 0;
    return 1;
}

/* 1 parsed, 0 --help, -1 bad usage (message printed). */
static int parse(int argc, char **argv, bopts *o)
{
    *o = (bopts){.prompts = {{512}, 1}, .gens = {{128}, 1}, .threads = {{0}, 1}, .depths = {{0}, 1},
                 .batches = {{0}, 1}, .ubatches = {{0}, 1}, .fas = {{0}, 1}, .reps = 5, .kv = {FC_F16}, .n_kv = 1};
    int n_ctv = 0;
    fc_dtype ctv[MAX_LIST];
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
        /* the switches */
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = 1;
            continue;
        }
        if (!strcmp(a, "--progress")) {
            o->progress = 1;
            continue;
        }
        if (!strcmp(a, "--no-warmup")) {
            o->no_warmup = 1;
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
            if (!append_list(a, v, 0, 1 << 20, &o->prompts, &o->set_p)) return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (!append_list(a, v, 0, 1 << 20, &o->gens, &o->set_n)) return -1;
        } else if (!strcmp(a, "-pg")) {
            if (!parse_pg(a, v, &o->pgs)) return -1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
            if (!append_list(a, v, 0, 1 << 20, &o->depths, &o->set_d)) return -1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!append_list(a, v, 1, 1024, &o->threads, &o->set_t)) return -1;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            if (!append_list(a, v, 1, 1 << 20, &o->batches, &o->set_b)) return -1;
        } else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) {
            if (!append_list(a, v, 1, 1 << 20, &o->ubatches, &o->set_ub)) return -1;
        } else if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
            if (!append_list(a, v, 0, 1, &o->fas, &o->set_fa)) return -1;
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
            if (!o->kv_set) o->n_kv = 0;
            o->kv_set = 1;
            if (!parse_kv_list(a, v, o->kv, &o->n_kv)) return -1;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            if (!parse_kv_list(a, v, ctv, &n_ctv)) return -1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!strcmp(v, "md")) o->fmt = OUT_MD;
            else if (!strcmp(v, "csv")) o->fmt = OUT_CSV;
            else if (!strcmp(v, "json")) o->fmt = OUT_JSON;
            else if (!strcmp(v, "jsonl")) o->fmt = OUT_JSONL;
            else if (!strcmp(v, "sql")) o->fmt = OUT_SQL;
            else {
                fprintf(stderr, "fucina bench: %s: '%s' is not md, csv, json, jsonl or sql\n", a, v);
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
    /* K and V share one type here: -ctv may only repeat -ctk's list */
    if (n_ctv && n_ctv != o->n_kv) {
        fprintf(stderr, "fucina bench: -ctv has %d types, -ctk %d: K and V share one cache type here\n", n_ctv,
                o->n_kv);
        return -1;
    }
    for (int k = 0; k < n_ctv; k++)
        if (ctv[k] != o->kv[k]) {
            fprintf(stderr, "fucina bench: -ctv %s differs from -ctk %s: K and V share one cache type here\n",
                    kv_name(ctv[k]), kv_name(o->kv[k]));
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
    const double runs = (double)o->batches.n * o->ubatches.n * o->n_kv * o->fas.n * o->threads.n * o->depths.n *
                        (o->prompts.n + o->gens.n + o->pgs.n);
    if (runs > MAX_RUNS) {
        fprintf(stderr, "fucina bench: the lists make %.0f tests, more than %d: give shorter lists\n", runs,
                MAX_RUNS);
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
    int n_batch, n_ubatch; /* -b / -ub as given; 0: not given */
    int fa;                /* -fa as given */
    uint64_t samples_ns[MAX_REPS];
    double samples_ts[MAX_REPS];
    int n;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    char time[32];
} btest;

/* The tokens one evaluation takes: min(-b, -ub) of those given, 0 = all. */
static int chunk_of(const btest *t)
{
    if (t->n_batch && t->n_ubatch) return t->n_batch < t->n_ubatch ? t->n_batch : t->n_ubatch;
    return t->n_batch ? t->n_batch : t->n_ubatch;
}

/* The recorded n_batch / n_ubatch: as given, else the largest single
 * evaluation (a prompt or a depth fill: max(P, D, 1)), which is what ran. */
static int rec_batch(const btest *t)
{
    if (t->n_batch) return t->n_batch;
    return t->n_prompt > t->n_depth ? t->n_prompt : t->n_depth > 0 ? t->n_depth : 1;
}

static int rec_ubatch(const btest *t)
{
    return t->n_ubatch ? t->n_ubatch : rec_batch(t);
}

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

/* n random tokens evaluated in evaluations of chunk tokens (0: one), logits
 * of each one's last row (llama-bench's test_prompt, one decode per
 * n_batch); 0 on failure (error in ctx). */
static int eval_random(fc_ctx *ctx, fc_llm_session *s, int n, int chunk, int64_t n_vocab, fc_token *toks,
                       float *logits, uint64_t *seed)
{
    for (int i = 0; i < n; i++) toks[i] = (fc_token)(rng_next(seed) % (uint64_t)n_vocab);
    const int step = chunk > 0 ? chunk : n;
    for (int at = 0; at < n; at += step) {
        const int len = n - at < step ? n - at : step;
        if (fc_llm_session_eval_ex(ctx, s, toks + at, (size_t)len, FC_LLM_LOGITS_LAST, logits) != FC_OK) return 0;
    }
    return 1;
}

/* Fill the cache with t->n_depth random tokens (untimed, once per test);
 * 0 on failure (error in ctx). */
static int fill_depth(fc_ctx *ctx, fc_llm_session *s, const btest *t, int64_t n_vocab, fc_token *toks, float *logits,
                      uint64_t *seed)
{
    fc_llm_session_reset(s);
    return t->n_depth ? eval_random(ctx, s, t->n_depth, chunk_of(t), n_vocab, toks, logits, seed) : 1;
}

/* One run of the test from a cache holding the depth's tokens only (filled
 * by fill_depth; a rewind forgets the previous run's); 0 on failure (error
 * in ctx). */
static int run_once(fc_ctx *ctx, fc_llm_session *s, const btest *t, int64_t n_vocab, fc_token *toks, float *logits,
                    uint64_t *seed)
{
    if (fc_llm_session_truncate(ctx, s, t->n_depth) != FC_OK) return 0;
    if (t->n_prompt && !eval_random(ctx, s, t->n_prompt, chunk_of(t), n_vocab, toks, logits, seed)) return 0;
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

/* llama-bench's field types: how json writes a value, and the SQL column type */
typedef enum ftype { F_STR, F_INT, F_BOOL, F_FLOAT } ftype;

/* The fields, in llama-bench's order, of those that apply to a CPU runtime. */
static const struct {
    const char *name;
    ftype type;
} fields[] = {{"build_commit", F_STR},   {"build_number", F_INT},  {"cpu_info", F_STR},     {"gpu_info", F_STR},
              {"backends", F_STR},       {"model_filename", F_STR}, {"model_type", F_STR},  {"model_size", F_INT},
              {"model_n_params", F_INT}, {"n_batch", F_INT},       {"n_ubatch", F_INT},     {"n_threads", F_INT},
              {"type_k", F_STR},         {"type_v", F_STR},        {"n_gpu_layers", F_INT}, {"flash_attn", F_BOOL},
              {"use_mmap", F_BOOL},      {"n_prompt", F_INT},      {"n_gen", F_INT},        {"n_depth", F_INT},
              {"test_time", F_STR},      {"avg_ns", F_INT},        {"stddev_ns", F_INT},    {"avg_ts", F_FLOAT},
              {"stddev_ts", F_FLOAT}};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))

static const char *sql_type(ftype t)
{
    switch (t) {
    case F_STR: return "TEXT";
    case F_INT:
    case F_BOOL: return "INTEGER";
    case F_FLOAT: return "REAL";
    }
    return "TEXT";
}

/* The header a format prints before its first record. */
static void print_header(out_fmt fmt)
{
    switch (fmt) {
    case OUT_CSV:
        for (int i = 0; i < N_FIELDS; i++) printf("%s%s", fields[i].name, i + 1 < N_FIELDS ? "," : "\n");
        break;
    case OUT_SQL: /* llama-bench's sql_printer: the table, then one INSERT per test */
        printf("CREATE TABLE IF NOT EXISTS llama_bench (\n");
        for (int i = 0; i < N_FIELDS; i++)
            printf("  %s %s%s\n", fields[i].name, sql_type(fields[i].type), i + 1 < N_FIELDS ? "," : "");
        printf(");\n\n");
        break;
    case OUT_MD:
    case OUT_JSON:
    case OUT_JSONL: break;
    }
}

static void print_record(const bopts *o, const model_info *mi, const btest *t, fc_dtype kv, const char *cpu)
{
    char v[N_FIELDS][256];
    snprintf(v[0], sizeof v[0], "%s", FC_BUILD_COMMIT);
    snprintf(v[1], sizeof v[1], "%d", FC_BUILD_NUMBER);
    snprintf(v[2], sizeof v[2], "%s", cpu);
    snprintf(v[3], sizeof v[3], "%s", "");
    snprintf(v[4], sizeof v[4], "CPU");
    snprintf(v[5], sizeof v[5], "%s", o->path);
    snprintf(v[6], sizeof v[6], "%s", mi->type);
    snprintf(v[7], sizeof v[7], "%llu", (unsigned long long)mi->size);
    snprintf(v[8], sizeof v[8], "%llu", (unsigned long long)mi->n_params);
    snprintf(v[9], sizeof v[9], "%d", rec_batch(t));
    snprintf(v[10], sizeof v[10], "%d", rec_ubatch(t));
    snprintf(v[11], sizeof v[11], "%d", t->threads);
    snprintf(v[12], sizeof v[12], "%s", kv_name(kv));
    snprintf(v[13], sizeof v[13], "%s", kv_name(kv));
    snprintf(v[14], sizeof v[14], "0");
    snprintf(v[15], sizeof v[15], "%d", t->fa);
    snprintf(v[16], sizeof v[16], "%d", o->mmap ? 1 : 0);
    snprintf(v[17], sizeof v[17], "%d", t->n_prompt);
    snprintf(v[18], sizeof v[18], "%d", t->n_gen);
    snprintf(v[19], sizeof v[19], "%d", t->n_depth);
    snprintf(v[20], sizeof v[20], "%s", t->time);
    snprintf(v[21], sizeof v[21], "%.0f", t->avg_ns);
    snprintf(v[22], sizeof v[22], "%.0f", t->stddev_ns);
    snprintf(v[23], sizeof v[23], "%f", t->avg_ts);
    snprintf(v[24], sizeof v[24], "%f", t->stddev_ts);
    switch (o->fmt) {
    case OUT_CSV: /* every value quoted, as llama-bench's */
        for (int i = 0; i < N_FIELDS; i++) {
            putchar('"');
            for (const char *c = v[i]; *c; c++) {
                if (*c == '"') putchar('"');
                putchar(*c);
            }
            printf("\"%s", i + 1 < N_FIELDS ? "," : "\n");
        }
        return;
    case OUT_SQL: /* values quoted as llama-bench's, a quote doubled (the column types convert) */
        printf("INSERT INTO llama_bench (");
        for (int i = 0; i < N_FIELDS; i++) printf("%s%s", fields[i].name, i + 1 < N_FIELDS ? ", " : "");
        printf(") VALUES (");
        for (int i = 0; i < N_FIELDS; i++) {
            putchar('\'');
            for (const char *c = v[i]; *c; c++) {
                if (*c == '\'') putchar('\'');
                putchar(*c);
            }
            printf("'%s", i + 1 < N_FIELDS ? ", " : ");\n");
        }
        return;
    case OUT_JSON:
    case OUT_JSONL: break;
    case OUT_MD: return;
    }
    const int jl = o->fmt == OUT_JSONL;
    printf(jl ? "{" : "  {\n");
    for (int i = 0; i < N_FIELDS; i++) {
        printf(jl ? "\"%s\": " : "    \"%s\": ", fields[i].name);
        switch (fields[i].type) {
        case F_STR: json_str(v[i]); break;
        case F_BOOL: printf("%s", strcmp(v[i], "0") ? "true" : "false"); break;
        case F_INT:
        case F_FLOAT: printf("%s", v[i]); break;
        }
        printf(jl ? ", " : ",\n");
    }
    printf(jl ? "\"samples_ns\": [ " : "    \"samples_ns\": [ ");
    for (int i = 0; i < t->n; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)t->samples_ns[i]);
    printf(jl ? " ]," : " ],\n");
    printf(jl ? "\"samples_ts\": [ " : "    \"samples_ts\": [ ");
    for (int i = 0; i < t->n; i++) printf("%s%f", i ? ", " : "", t->samples_ts[i]);
    printf(jl ? " ]}\n" : " ]\n  }");
}

/* The md table's optional columns, as llama-bench shows them: a parameter
 * given other than its default. */
typedef struct md_cols {
    int batch, ubatch, kv, fa;
} md_cols;

static md_cols md_columns(const bopts *o)
{
    const int fa_on = o->fas.n > 1 || o->fas.v[0] != 0;
    const int kv_on = o->kv_set && (o->n_kv > 1 || o->kv[0] != FC_F16);
    return (md_cols){.batch = o->set_b, .ubatch = o->set_ub, .kv = kv_on, .fa = fa_on};
}

static void md_header(md_cols c)
{
    printf("| %-30s | %10s | %10s | %-10s | %7s |", "model", "size", "params", "backend", "threads");
    if (c.batch) printf(" %7s |", "n_batch");
    if (c.ubatch) printf(" %8s |", "n_ubatch");
    if (c.kv) printf(" %6s |", "type_k");
    if (c.fa) printf(" %2s |", "fa");
    printf(" %15s | %20s |\n", "test", "t/s");
    printf("| %s | %s | %s | %s | %s |", "------------------------------", "---------:", "---------:", "----------",
           "------:");
    if (c.batch) printf(" ------: |");
    if (c.ubatch) printf(" -------: |");
    if (c.kv) printf(" -----: |");
    if (c.fa) printf(" -: |");
    printf(" --------------: | -------------------: |\n");
}

static void md_row(const model_info *mi, const btest *t, md_cols c, fc_dtype kv)
{
    char size[32], params[32], name[64], ts[48];
    if (mi->size < 1024ull * 1024 * 1024) snprintf(size, sizeof size, "%.2f MiB", (double)mi->size / 1048576.0);
    else snprintf(size, sizeof size, "%.2f GiB", (double)mi->size / 1073741824.0);
    if (mi->n_params < 1000000000ull) snprintf(params, sizeof params, "%.2f M", (double)mi->n_params / 1e6);
    else snprintf(params, sizeof params, "%.2f B", (double)mi->n_params / 1e9);
    test_name(t, name, sizeof name);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", t->avg_ts, t->stddev_ts);
    printf("| %-30s | %10s | %10s | %-10s | %7d |", mi->type, size, params, "CPU", t->threads);
    if (c.batch) printf(" %7d |", rec_batch(t));
    if (c.ubatch) printf(" %8d |", rec_ubatch(t));
    if (c.kv) printf(" %6s |", kv_name(kv));
    if (c.fa) printf(" %2d |", t->fa);
    printf(" %15s | %21s |\n", name, ts); /* 21: '±' is two bytes */
}

/* ---- driver -------------------------------------------------------------------- */

/* One test of the cross product. */
typedef struct binst {
    int nb, nub, fa, threads, depth, n_prompt, n_gen;
    fc_dtype kv;
} binst;

/* llama-bench's get_cmd_params_instances order, over the parameters we
 * have: -b, -ub, -ctk, -fa, -t, -d, then per combination its pp, tg and pg tests
 * (-p 0, -n 0, -pg 0,0 are no test). Returns the count; out NULL: count only. */
/* The pp, tg and pg tests of one parameter combination b, from out[n] on
 * (out NULL: count only); the new count. */
static int add_tests(const bopts *o, binst b, binst *out, int n)
{
    const int n_tests = o->prompts.n + o->gens.n + o->pgs.n;
    for (int j = 0; j < n_tests; j++) {
        binst x = b;
        if (j < o->prompts.n) x.n_prompt = o->prompts.v[j];
        else if (j < o->prompts.n + o->gens.n) x.n_gen = o->gens.v[j - o->prompts.n];
        else {
            const int k = j - o->prompts.n - o->gens.n;
            x.n_prompt = o->pgs.p[k], x.n_gen = o->pgs.g[k];
        }
        if (x.n_prompt == 0 && x.n_gen == 0) continue;
        if (out) out[n] = x;
        n++;
    }
    return n;
}

static int instances(const bopts *o, binst *out)
{
    int n = 0;
    for (int ib = 0; ib < o->batches.n; ib++)
        for (int iu = 0; iu < o->ubatches.n; iu++)
            for (int ik = 0; ik < o->n_kv; ik++)
                for (int ifa = 0; ifa < o->fas.n; ifa++)
                    for (int it = 0; it < o->threads.n; it++)
                        for (int id = 0; id < o->depths.n; id++) {
                            const binst b = {.nb = o->batches.v[ib], .nub = o->ubatches.v[iu], .fa = o->fas.v[ifa],
                                             .threads = o->threads.v[it], .depth = o->depths.v[id], .kv = o->kv[ik]};
                            n = add_tests(o, b, out, n);
                        }
    return n;
}

/* A context of `threads` threads (0: the default) and the model loaded in
 * it; 0 after printing why. */
static int load(const bopts *o, int threads, fc_ctx **pctx, fc_llm_model **pm)
{
    char err[256];
    fc_ctx_options co = {.threads = threads};
    const uint64_t t0 = now_ns();
    fc_ctx *ctx = fc_ctx_new(threads ? &co : NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina bench: %s\n", err);
        return 0;
    }
    fc_cli_progress bar;
    fc_cli_progress_init(&bar, "loading");
    const fc_llm_load_options lo = {.progress = fc_cli_progress_update, .progress_user = &bar, .mmap = (int)o->mmap};
    fc_llm_model *m = fc_llm_model_load_ex(ctx, o->path, &lo);
    fc_cli_progress_done(&bar);
    if (!m) {
        fprintf(stderr, "fucina bench: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 0;
    }
    if (o->verbose)
        fprintf(stderr, "fucina bench: loaded '%s' (%s) with %d threads in %.1f ms\n", o->path,
                o->mmap ? "mapped" : "read", fc_ctx_threads(ctx), (double)(now_ns() - t0) / 1e6);
    *pctx = ctx;
    *pm = m;
    return 1;
}

/* Runs one test and prints its record. 0 ok, 1 failure (said). */
static int bench_one(const bopts *o, const model_info *mi, fc_ctx *ctx, const fc_llm_model *m, const binst *in,
                     int idx, int n_inst, int *n_printed, const char *cpu)
{
    static btest t; /* the samples: off the stack */
    memset(&t, 0, sizeof t);
    t.threads = fc_ctx_threads(ctx);
    t.n_depth = in->depth, t.n_prompt = in->n_prompt, t.n_gen = in->n_gen;
    t.n_batch = in->nb, t.n_ubatch = in->nub, t.fa = in->fa;
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    const int most = t.n_prompt > t.n_depth ? t.n_prompt : t.n_depth;
    fc_token *toks = malloc((size_t)(most > 1 ? most : 1) * sizeof *toks);
    float *logits = malloc((size_t)nv * sizeof *logits);
    fc_llm_session *s = NULL;
    int rc = 1;
    if (!toks || !logits) {
        fprintf(stderr, "fucina bench: out of memory\n");
        goto done;
    }
    char name[64];
    test_name(&t, name, sizeof name);
    if (o->progress) fprintf(stderr, "fucina bench: benchmark %d/%d: starting (%s)\n", idx, n_inst, name);
    if (o->delay) sleep((unsigned)o->delay);
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = o->n_ctx ? o->n_ctx : t.n_depth + t.n_prompt + t.n_gen;
    so.kv_type = in->kv;
    s = fc_llm_session_new_ex(ctx, m, &so);
    if (!s) goto fail;
    uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)idx;
    if (t.n_depth && o->progress) fprintf(stderr, "fucina bench: benchmark %d/%d: depth run\n", idx, n_inst);
    if (!fill_depth(ctx, s, &t, nv, toks, logits, &seed)) goto fail;
    if (!o->no_warmup) {
        if (o->progress) fprintf(stderr, "fucina bench: benchmark %d/%d: warmup run\n", idx, n_inst);
        if (!run_once(ctx, s, &t, nv, toks, logits, &seed)) goto fail;
    }
    time_t now = time(NULL);
    strftime(t.time, sizeof t.time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    double ns[MAX_REPS];
    for (long r = 0; r < o->reps; r++) {
        if (o->progress) fprintf(stderr, "fucina bench: benchmark %d/%d: run %ld/%ld\n", idx, n_inst, r + 1, o->reps);
        uint64_t t0 = now_ns();
        if (!run_once(ctx, s, &t, nv, toks, logits, &seed)) goto fail;
        uint64_t dt = now_ns() - t0;
        t.samples_ns[t.n] = dt ? dt : 1;
        ns[t.n] = (double)t.samples_ns[t.n];
        t.samples_ts[t.n] = 1e9 * (double)(t.n_prompt + t.n_gen) / ns[t.n];
        if (o->verbose)
            fprintf(stderr, "fucina bench: %s: run %ld/%ld: %llu ns, %.2f tokens/s\n", name, r + 1, o->reps,
                    (unsigned long long)t.samples_ns[t.n], t.samples_ts[t.n]);
        t.n++;
    }
    stats(ns, t.n, &t.avg_ns, &t.stddev_ns);
    stats(t.samples_ts, t.n, &t.avg_ts, &t.stddev_ts);
    if (*n_printed == 0) print_header(o->fmt);
    switch (o->fmt) {
    case OUT_MD:
        if (*n_printed == 0) md_header(md_columns(o));
        md_row(mi, &t, md_columns(o), in->kv);
        break;
    case OUT_JSON:
        printf(*n_printed == 0 ? "[\n" : ",\n");
        print_record(o, mi, &t, in->kv, cpu);
        break;
    case OUT_CSV:
    case OUT_JSONL:
    case OUT_SQL: print_record(o, mi, &t, in->kv, cpu); break;
    }
    fflush(stdout);
    (*n_printed)++;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "fucina bench: %s\n", fc_ctx_error(ctx));
done:
    fc_llm_session_free(s);
    free(logits);
    free(toks);
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
    const int n_inst = instances(&o, NULL);
    binst *ins = malloc((size_t)(n_inst > 0 ? n_inst : 1) * sizeof *ins);
    if (!ins) {
        fprintf(stderr, "fucina bench: out of memory\n");
        return 1;
    }
    instances(&o, ins);
    /* the model is loaded once per run of equal thread counts: the threads
     * are the context's, and the model lives in its context */
    fc_llm_model *m = NULL;
    int n_printed = 0, rc = 0, cur = -1;
    ctx = NULL;
    for (int k = 0; k < n_inst && rc == 0; k++) {
        if (!m || ins[k].threads != cur) {
            fc_llm_model_free(m);
            fc_ctx_free(ctx);
            m = NULL, ctx = NULL;
            if (!load(&o, ins[k].threads, &ctx, &m)) {
                rc = 1;
                break;
            }
            cur = ins[k].threads;
        }
        rc = bench_one(&o, &mi, ctx, m, &ins[k], k + 1, n_inst, &n_printed, cpu);
    }
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    free(ins);
    if (o.fmt == OUT_JSON) printf(n_printed ? "\n]\n" : "[\n]\n");
    if (o.fmt == OUT_MD && n_printed) printf("\nbuild: %s (%d), fucina %s\n", FC_BUILD_COMMIT, FC_BUILD_NUMBER,
                                               FUCINA_VERSION_STRING);
    return rc;
}
