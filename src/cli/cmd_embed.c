/* SPDX-License-Identifier: MIT */
/* fucina embed: the embedding of each prompt (fucina/embed.h), printed as
 * llama-embedding prints it: its -p / -f, --pooling, --embd-normalize,
 * --embd-separator and --embd-output-format (plain, array, json). Each
 * prompt is evaluated from an empty cache, as llama-embedding clears it. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_args.h"
#include "fucina/embed.h"
#include "fucina/fucina.h"
#include "io/read_all.h"

static const char *const CMD = "fucina embed";

static void help(FILE *f)
{
    fprintf(f, "usage: fucina embed MODEL.gguf (-p TEXT | -f FILE) [--pooling none|mean|cls|last]\n"
               "                    [--embd-normalize N] [--embd-separator SEP]\n"
               "                    [--embd-output-format plain|array|json|json+] [-t N] [--mmap | --no-mmap]\n\n"
               "Prints the embedding of each prompt: the model's final hidden states (after the output\n"
               "norm, the LM head's input), pooled and normalized as llama-embedding does. The text is\n"
               "cut at each SEP (default a newline) into prompts; each is tokenized (special tokens\n"
               "added, control-token strings parsed) and evaluated from an empty cache.\n\n"
               "  -m, --model FILE         the model (or as the first positional argument)\n"
               "  -p, --prompt TEXT        the text\n"
               "  -f, --file FILE          read the text from FILE (-: standard input); a final SEP\n"
               "                           ends the last prompt\n"
               "  --pooling P              none (one vector per token), mean, cls (the first token's)\n"
               "                           or last; default: the model's <arch>.pooling_type (none when\n"
               "                           the file has none)\n"
               "  --embd-normalize N       -1 none, 0 max absolute to 32760 (int16), 1 taxicab,\n"
               "                           2 Euclidean (default), N > 2 the p-norm\n"
               "  --embd-separator SEP     the prompt separator (default \"\\n\")\n"
               "  --embd-output-format F   plain (default: 'embedding K: v v ...', %%9.6f), array\n"
               "                           ([[v, ...], ...]), json (OpenAI's list of embeddings) or json+\n"
               "                           (json and the cosine similarity of every pair of vectors);\n"
               "                           array and json print every float exactly (%%.9g); plain with\n"
               "                           several prompts ends with their cosine similarity matrix\n"
               "  -t, --threads N          worker threads (default: FUCINA_THREADS or the cores)\n"
               "  --mmap, --no-mmap        map the model file / always read it (as fucina run)\n\n"
               "Vectors are numbered from 0 across the prompts (with --pooling none, one per token).\n"
               "Exit status: 0 done, 1 failure, 2 bad usage or input.\n");
}

typedef enum out_fmt { OUT_PLAIN, OUT_ARRAY, OUT_JSON, OUT_JSON_PLUS } out_fmt;

/* llama.cpp's common_embd_similarity_cos: the cosine of the angle, in double
 * sums; two zero vectors are alike (1), a zero and another vector not (0). */
static double cosine(const float *a, const float *b, int64_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    if (aa == 0 || bb == 0) return aa == 0 && bb == 0 ? 1.0 : 0.0;
    return ab / (sqrt(aa) * sqrt(bb));
}

static int takes_value(const char *a)
{
    static const char *const opts[] = {"-m",
                                       "--model",
                                       "-p",
                                       "--prompt",
                                       "-f",
                                       "--file",
                                       "--pooling",
                                       "--embd-normalize",
                                       "--embd-separator",
                                       "--embd-output-format",
                                       "-t",
                                       "--threads"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(a, opts[i])) return 1;
    return 0;
}

/* The prompts: text cut at every sep (a final empty piece dropped). */
static size_t split(char *text, size_t len, const char *sep, char ***out, size_t **lens)
{
    const size_t sl = strlen(sep);
    size_t cap = 8, n = 0;
    char **p = malloc(cap * sizeof *p);
    size_t *l = malloc(cap * sizeof *l);
    if (!p || !l) goto oom;
    for (size_t at = 0;;) {
        char *hit = NULL;
        for (size_t i = at; i + sl <= len; i++)
            if (!memcmp(text + i, sep, sl)) {
                hit = text + i;
                break;
            }
        const size_t end = hit ? (size_t)(hit - text) : len;
        if (!hit && end == at && n > 0) break; /* a trailing separator */
        if (n == cap) {
            cap *= 2;
            char **p2 = realloc(p, cap * sizeof *p);
            if (p2) p = p2;
            size_t *l2 = realloc(l, cap * sizeof *l);
            if (l2) l = l2;
            if (!p2 || !l2) goto oom;
        }
        p[n] = text + at;
        l[n++] = end - at;
        if (!hit) break;
        at = end + sl;
    }
    *out = p;
    *lens = l;
    return n;
oom:
    free(p);
    free(l);
    return 0;
}

static void print_row(const float *v, int64_t E, out_fmt f, int64_t k, int first)
{
    switch (f) {
    case OUT_PLAIN:
        printf("embedding %lld:", (long long)k);
        for (int64_t i = 0; i < E; i++) printf(" %9.6f", v[i]);
        printf("\n");
        break;
    case OUT_ARRAY:
        printf("%s[", first ? "" : ",");
        for (int64_t i = 0; i < E; i++) printf("%s%.9g", i ? "," : "", v[i]);
        printf("]");
        break;
    case OUT_JSON:
    case OUT_JSON_PLUS:
        printf("%s\n    {\"object\": \"embedding\", \"index\": %lld, \"embedding\": [", first ? "" : ",", (long long)k);
        for (int64_t i = 0; i < E; i++) printf("%s%.9g", i ? ", " : "", v[i]);
        printf("]}");
        break;
    }
}

int fc_cmd_embed(int argc, char **argv)
{
    const char *path = NULL, *prompt_arg = NULL, *prompt_file = NULL, *sep = "\n";
    fc_cli_gen_args g = fc_cli_gen_args_default(0);
    fc_llm_embed_options eo = {0};
    out_fmt fmt = OUT_PLAIN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        long l;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--mmap") || !strcmp(a, "--no-mmap")) {
            const int want = !strcmp(a, "--mmap") ? 1 : -1;
            if (g.mmap && g.mmap != want) return fc_cli_usage_error(CMD, "--mmap and --no-mmap contradict", NULL);
            g.mmap = want;
        } else if (takes_value(a) && !has) {
            char msg[96];
            snprintf(msg, sizeof msg, "%s needs a value", a);
            return fc_cli_usage_error(CMD, msg, NULL);
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (path) return fc_cli_usage_error(CMD, "one model only; a second one", argv[i + 1]);
            path = argv[++i];
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt_arg = argv[++i];
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            prompt_file = argv[++i];
        } else if (!strcmp(a, "--pooling")) {
            const char *v = argv[++i];
            if (!strcmp(v, "none"))
                eo.pooling = FC_LLM_POOLING_NONE;
            else if (!strcmp(v, "mean"))
                eo.pooling = FC_LLM_POOLING_MEAN;
            else if (!strcmp(v, "cls"))
                eo.pooling = FC_LLM_POOLING_CLS;
            else if (!strcmp(v, "last"))
                eo.pooling = FC_LLM_POOLING_LAST;
            else
                return fc_cli_usage_error(CMD, "--pooling takes none, mean, cls or last, not", v);
        } else if (!strcmp(a, "--embd-normalize")) {
            if (fc_cli_parse_long(argv[++i], -1, 1000, &l))
                return fc_cli_usage_error(CMD, "--embd-normalize takes an integer in -1..1000, not", argv[i]);
            eo.norm = l == -1  ? FC_LLM_EMBD_NORM_NONE
                      : l == 0 ? FC_LLM_EMBD_NORM_MAX_ABS
                      : l == 2 ? FC_LLM_EMBD_NORM_EUCLIDEAN
                               : FC_LLM_EMBD_NORM_P;
            eo.norm_p = (int)l;
        } else if (!strcmp(a, "--embd-separator")) {
            sep = argv[++i];
            if (!*sep) return fc_cli_usage_error(CMD, "--embd-separator must not be empty", NULL);
        } else if (!strcmp(a, "--embd-output-format")) {
            const char *v = argv[++i];
            if (!strcmp(v, "plain") || !*v)
                fmt = OUT_PLAIN;
            else if (!strcmp(v, "array"))
                fmt = OUT_ARRAY;
            else if (!strcmp(v, "json"))
                fmt = OUT_JSON;
            else if (!strcmp(v, "json+"))
                fmt = OUT_JSON_PLUS;
            else
                return fc_cli_usage_error(CMD, "--embd-output-format takes plain, array, json or json+, not", v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (fc_cli_parse_long(argv[++i], 1, 1024, &l))
                return fc_cli_usage_error(CMD, "--threads takes an integer in 1..1024, not", argv[i]);
            g.threads = (int)l;
        } else if (a[0] == '-' && a[1]) {
            return fc_cli_usage_error(CMD, "unknown option", a);
        } else if (path) {
            return fc_cli_usage_error(CMD, "one model only; a second one", a);
        } else {
            path = a;
        }
    }
    if (!path) return fc_cli_usage_error(CMD, "no MODEL.gguf given", NULL);
    if (!prompt_arg == !prompt_file) return fc_cli_usage_error(CMD, "give one of -p TEXT or -f FILE", NULL);
    char *text = NULL;
    size_t len = 0;
    if (prompt_file) {
        if (!(text = fc_read_path(prompt_file, 0, &len))) {
            fprintf(stderr, "%s: cannot read the prompt file '%s': %s\n", CMD, prompt_file, strerror(errno));
            return 2;
        }
    } else if (!(text = strdup(prompt_arg))) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        return 1;
    } else {
        len = strlen(text);
    }
    fc_ctx *ctx = fc_cli_ctx_new("embed", &g);
    if (!ctx) {
        free(text);
        return 1;
    }
    int rc = 1;
    char **prompts = NULL;
    size_t *plen = NULL, n_prompts = 0, max_tok = 0;
    fc_token **toks = NULL;
    size_t *nt = NULL;
    float *out = NULL;
    fc_llm_session *s = NULL;
    fc_llm_model *m = fc_cli_model_load(ctx, path, &g);
    if (!m) {
        rc = 2; /* a missing or bad file is bad input */
        goto fail;
    }
    const fc_tokenizer *tk = fc_llm_model_tokenizer(m);
    const int64_t E = fc_llm_model_hparams(m)->n_embd, train = fc_llm_model_hparams(m)->n_ctx_train;
    /* the pooling first: a model whose own pooling we lack fails before any work */
    if (fc_llm_embed_rows(ctx, m, &eo, 1) == 0) {
        rc = 2;
        goto fail;
    }
    n_prompts = split(text, len, sep, &prompts, &plen);
    toks = n_prompts ? calloc(n_prompts, sizeof *toks) : NULL;
    nt = n_prompts ? calloc(n_prompts, sizeof *nt) : NULL;
    if (!n_prompts || !toks || !nt) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto done;
    }
    for (size_t i = 0; i < n_prompts; i++) {
        if (fc_tokenize(ctx, tk, prompts[i], plen[i], FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, &toks[i],
                        &nt[i]) != FC_OK)
            goto fail;
        if (nt[i] == 0) {
            fprintf(stderr, "%s: prompt %zu has no tokens\n", CMD, i);
            rc = 2;
            goto done;
        }
        if ((int64_t)nt[i] > train) {
            fprintf(stderr, "%s: prompt %zu has %zu tokens, more than the model's context (%lld)\n", CMD, i, nt[i],
                    (long long)train);
            rc = 2;
            goto done;
        }
        if (nt[i] > max_tok) max_tok = nt[i];
    }
    fc_llm_session_options so = fc_llm_session_default_options(); /* f16 cache, as llama-embedding's */
    so.n_ctx = (int64_t)max_tok;
    s = fc_llm_session_new_ex(ctx, m, &so);
    /* every vector is kept: the similarity matrix compares them all */
    size_t n_rows = 0;
    for (size_t i = 0; i < n_prompts; i++) n_rows += (size_t)fc_llm_embed_rows(ctx, m, &eo, nt[i]);
    out = malloc(n_rows * (size_t)E * sizeof *out);
    if (!s || !out) {
        if (!out) fprintf(stderr, "%s: out of memory\n", CMD);
        goto fail;
    }
    int64_t k = 0;
    for (size_t i = 0; i < n_prompts; i++) {
        fc_llm_session_reset(s);
        if (fc_llm_embed(ctx, s, 0, toks[i], nt[i], &eo, out + k * E) != FC_OK) goto fail;
        k += fc_llm_embed_rows(ctx, m, &eo, nt[i]);
    }
    if (fmt == OUT_ARRAY) printf("[");
    if (fmt == OUT_JSON || fmt == OUT_JSON_PLUS) printf("{\n  \"object\": \"list\",\n  \"data\": [");
    for (int64_t r = 0; r < k; r++) print_row(out + r * E, E, fmt, r, r == 0);
    if (fmt == OUT_ARRAY) printf("]\n");
    if (fmt == OUT_JSON || fmt == OUT_JSON_PLUS) printf("\n  ]");
    if (fmt == OUT_JSON_PLUS && k > 1) { /* llama-embedding's json+: the cosine of every pair */
        printf(",\n  \"cosineSimilarity\": [");
        for (int64_t a = 0; a < k; a++) {
            printf("%s\n    [", a ? "," : "");
            for (int64_t b = 0; b < k; b++) printf("%s%.9g", b ? ", " : "", cosine(out + a * E, out + b * E, E));
            printf("]");
        }
        printf("\n  ]");
    }
    if (fmt == OUT_JSON || fmt == OUT_JSON_PLUS) printf("\n}\n");
    if (fmt == OUT_PLAIN && n_prompts > 1 && (size_t)k == n_prompts) {
        /* llama-embedding's plain report: the matrix, each column headed by a prompt's first
         * 6 bytes and each row ended by its first 10 */
        printf("\ncosine similarity matrix:\n\n");
        for (size_t a = 0; a < n_prompts; a++) printf("%6.*s ", (int)(plen[a] < 6 ? plen[a] : 6), prompts[a]);
        printf("\n");
        for (size_t a = 0; a < n_prompts; a++) {
            for (size_t b = 0; b < n_prompts; b++) printf("%6.2f ", cosine(out + a * E, out + b * E, E));
            printf("%.*s\n", (int)(plen[a] < 10 ? plen[a] : 10), prompts[a]);
        }
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "%s: %s\n", CMD, fc_ctx_error(ctx));
done:
    free(out);
    fc_llm_session_free(s);
    for (size_t i = 0; toks && i < n_prompts; i++) fc_tokens_free(toks[i]);
    free(toks);
    free(nt);
    free(prompts);
    free(plen);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    free(text);
    return rc;
}
