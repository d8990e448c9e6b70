/* SPDX-License-Identifier: MIT */
/* The commands that run a model over a text in chunks of n_ctx tokens, as
 * llama-perplexity and llama-imatrix do (fucina perplexity, fucina imatrix):
 * their shared options (-m, -f, -c, --chunks, -t), the text's tokens, the
 * context and chunk count, the context and the model. Messages start with
 * the command's name ("fucina perplexity: ..."); a usage error returns 2. */
#ifndef FC_CLI_TEXT_CHUNKS_H
#define FC_CLI_TEXT_CHUNKS_H

#include <stddef.h>

#include "fucina/fucina.h"

typedef struct fc_cli_chunk_opts {
    const char *model, *file;
    long long n_ctx;   /* -c (0: the default, fc_cli_chunk_ctx) */
    long long chunks;  /* --chunks (0: all; -1 is accepted for all, as llama.cpp's) */
    long long threads; /* -t (0: the default) */
} fc_cli_chunk_opts;

/* A count in [1, max] (strict decimal), or -1. */
long long fc_cli_parse_count(const char *v, long long max);

/* If argv[*i] is one of the shared options, or the positional model: take it
 * (and its value, advancing *i) and return 1; 0 when it is none of them; 2
 * after printing a usage error. */
int fc_cli_chunk_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_chunk_opts *o);

/* The tokens of the text at path as llama-perplexity takes them (special
 * tokens added, control-token strings as text): 0, or 2 with the reason
 * printed (unreadable, empty, untokenizable). */
int fc_cli_chunk_text(fc_ctx *ctx, const char *cmd, const fc_llm_model *m, const char *path, fc_token **toks,
                      size_t *nt);

/* The chunks of n_ctx tokens the nt - skip tokens after the first skip make
 * (at most chunks; 0: all): > 0, or 0 after printing that the text at path
 * is too short. */
int64_t fc_cli_chunk_count(const char *cmd, const char *path, size_t nt, size_t skip, int64_t n_ctx, long long chunks);

/* -c, or the default: the model's training context when below 512, else 512
 * (llama-perplexity's default); a -c beyond the training context is said. */
int64_t fc_cli_chunk_ctx(const char *cmd, const fc_llm_model *m, long long n_ctx);

/* The context with -t's threads: NULL after printing why. */
fc_ctx *fc_cli_chunk_ctx_new(const char *cmd, const fc_cli_chunk_opts *o);

/* The model: NULL after printing "cannot load the model" and why. */
fc_llm_model *fc_cli_chunk_model(fc_ctx *ctx, const char *cmd, const fc_cli_chunk_opts *o);

#endif
