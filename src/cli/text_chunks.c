/* SPDX-License-Identifier: MIT */
/* The shared parts of the commands that run a model over a text in chunks
 * (cli/text_chunks.h): fucina perplexity and fucina imatrix. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/text_chunks.h"
#include "fucina/perplexity.h"
#include "io/read_all.h"

long long fc_cli_parse_count(const char *v, long long max)
{
    char *end = NULL;
    errno = 0;
    const long long n = v && *v ? strtoll(v, &end, 10) : -1;
    if (!v || !*v || *end || errno || n < 1 || n > max) return -1;
    return n;
}

int fc_cli_chunk_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_chunk_opts *o)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!v) return fc_cli_usage_error(cmd, "-m needs a model file", NULL);
        o->model = argv[++*i];
    } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
        if (!v) return fc_cli_usage_error(cmd, "-f needs a text file", NULL);
        o->file = argv[++*i];
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
        if ((o->n_ctx = fc_cli_parse_count(v, 1 << 20)) < 3)
            return fc_cli_usage_error(cmd, "-c needs a context of at least 3 tokens (one scored per chunk), not",
                                      v ? v : "");
        ++*i;
    } else if (!strcmp(a, "--chunks")) {
        /* llama.cpp's -1 (all) is accepted too */
        if (v && !strcmp(v, "-1"))
            o->chunks = 0;
        else if ((o->chunks = fc_cli_parse_count(v, INT32_MAX)) < 0)
            return fc_cli_usage_error(cmd, "--chunks needs a positive count, not", v ? v : "");
        ++*i;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if ((o->threads = fc_cli_parse_count(v, 1024)) < 0)
            return fc_cli_usage_error(cmd, "-t needs a thread count in [1, 1024], not", v ? v : "");
        ++*i;
    } else if (a[0] == '-' && a[1]) {
        return 0; /* the command's own, or unknown */
    } else if (!o->model) {
        o->model = a;
    } else {
        return fc_cli_usage_error(cmd, "unexpected argument", a);
    }
    return 1;
}

int fc_cli_chunk_text(fc_ctx *ctx, const char *cmd, const fc_llm_model *m, const char *path, fc_token **toks,
                      size_t *nt)
{
    size_t n = 0;
    char *text = fc_read_path(path, 0, &n);
    if (!text) {
        fprintf(stderr, "%s: cannot read the text '%s': %s\n", cmd, path, strerror(errno));
        return 2;
    }
    if (n == 0) {
        free(text);
        fprintf(stderr, "%s: the text '%s' is empty\n", cmd, path);
        return 2;
    }
    const fc_status st = fc_tokenize(ctx, fc_llm_model_tokenizer(m), text, n, FC_TOKENIZE_ADD_SPECIAL, toks, nt);
    free(text);
    if (st != FC_OK) {
        fprintf(stderr, "%s: cannot tokenize '%s': %s\n", cmd, path, fc_ctx_error(ctx));
        return 2;
    }
    return 0;
}

int64_t fc_cli_chunk_count(const char *cmd, const char *path, size_t nt, size_t skip, int64_t n_ctx, long long chunks)
{
    const int64_t n_chunk = fc_ppl_n_chunks((int64_t)(nt - skip), n_ctx, chunks);
    if (!n_chunk)
        fprintf(stderr,
                "%s: the text '%s' tokenizes to only %zu tokens; a context of %lld needs at least %lld (-c "
                "sets it)\n",
                cmd, path, nt, (long long)n_ctx, (long long)(2 * n_ctx));
    return n_chunk;
}

int64_t fc_cli_chunk_ctx(const char *cmd, const fc_llm_model *m, long long n_ctx)
{
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    if (!n_ctx) return hp->n_ctx_train > 0 && hp->n_ctx_train < 512 ? hp->n_ctx_train : 512;
    if (hp->n_ctx_train > 0 && n_ctx > hp->n_ctx_train)
        fprintf(stderr, "%s: warning: -c %lld is beyond the model's training context of %lld\n", cmd, n_ctx,
                (long long)hp->n_ctx_train);
    return n_ctx;
}

fc_ctx *fc_cli_chunk_ctx_new(const char *cmd, const fc_cli_chunk_opts *o)
{
    char err[256];
    const fc_ctx_options co = {.threads = (int)o->threads};
    fc_ctx *ctx = fc_ctx_new(o->threads > 0 ? &co : NULL, err, sizeof err);
    if (!ctx) fprintf(stderr, "%s: %s\n", cmd, err);
    return ctx;
}

fc_llm_model *fc_cli_chunk_model(fc_ctx *ctx, const char *cmd, const fc_cli_chunk_opts *o)
{
    fc_llm_model *m = fc_llm_model_load(ctx, o->model);
    if (!m) fprintf(stderr, "%s: cannot load the model '%s': %s\n", cmd, o->model, fc_ctx_error(ctx));
    return m;
}
