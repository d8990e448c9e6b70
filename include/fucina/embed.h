/* SPDX-License-Identifier: MIT */
/* Fucina: hidden states and embeddings of a language model (src/llm/embed.c).
 *
 * A token's hidden state is the final one: the output norm's result, the
 * LM head's input, n_embd floats; the same vector llama.cpp returns with
 * embeddings enabled (llama_get_embeddings_ith, pooling none). The forward
 * is the one of every eval (src/llm/forward.c): it copies those rows out
 * where it would hand them to the LM head, and skips the head when no
 * logits are asked for.
 *
 * An embedding pools the hidden states of the tokens one call evaluates:
 * their mean, the first (cls) or the last token's, or none (one per token),
 * then normalizes each vector as llama-embedding's --embd-normalize does
 * (default: Euclidean, unit length). A zeroed fc_llm_embed_options is the
 * default: the pooling the model's GGUF names, Euclidean normalization. */
#ifndef FUCINA_EMBED_H
#define FUCINA_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/llm.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the hidden states of a text become its embedding. Our numbering, not
 * the GGUF's: 0 must be the default. The GGUF key "<arch>.pooling_type"
 * uses llama.cpp's enum (0 none, 1 mean, 2 cls, 3 last, 4 rank). */
typedef enum fc_llm_pooling {
    FC_LLM_POOLING_MODEL = 0, /* what the model's <arch>.pooling_type says (none when absent) */
    FC_LLM_POOLING_NONE = 1,  /* one vector per token */
    FC_LLM_POOLING_MEAN = 2,  /* the mean over the tokens */
    FC_LLM_POOLING_CLS = 3,   /* the first token's */
    FC_LLM_POOLING_LAST = 4,  /* the last token's */
} fc_llm_pooling;

/* "model", "none", "mean", "cls", "last"; NULL out of range. */
FC_API const char *fc_llm_pooling_name(fc_llm_pooling p);

/* The pooling a model's file asks for, resolved as llama.cpp resolves an
 * unspecified one: "<arch>.pooling_type" (every family), none when the
 * file has no such key. A value we do
 * not pool by (rank, 4, or anything else) is FC_ERR_UNSUPPORTED naming it,
 * *out unchanged. */
FC_API fc_status fc_llm_model_pooling(fc_ctx *ctx, const fc_llm_model *m, fc_llm_pooling *out);

/* llama-embedding's --embd-normalize, as an enum whose 0 is its default (2). */
typedef enum fc_llm_embd_norm {
    FC_LLM_EMBD_NORM_EUCLIDEAN = 0, /* --embd-normalize 2: unit L2 norm (default) */
    FC_LLM_EMBD_NORM_NONE = 1,      /* -1: as computed */
    FC_LLM_EMBD_NORM_MAX_ABS = 2,   /* 0: scaled so that the largest |x| is 32760 (an int16 range) */
    FC_LLM_EMBD_NORM_P = 3,         /* N >= 1: unit p-norm with p = norm_p (1: taxicab) */
} fc_llm_embd_norm;

typedef struct fc_llm_embed_options {
    fc_llm_pooling pooling; /* 0: the model's (fc_llm_model_pooling) */
    fc_llm_embd_norm norm;  /* 0: Euclidean */
    int norm_p;             /* FC_LLM_EMBD_NORM_P: p >= 1 */
} fc_llm_embed_options;

/* n tokens appended to sequence seq of s (as fc_llm_session_eval_seq: the
 * same checks, the same errors, the session unchanged on failure), with
 * the final hidden states of the rows `which` selects (n rows for ALL, 1 for
 * LAST, none for NONE; n_embd floats each) into hidden and, when logits is
 * not NULL, the same rows' logits from the same forward. */
FC_API fc_status fc_llm_session_eval_hidden(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                            fc_llm_logits which, float *logits, float *hidden);

/* The rows fc_llm_embed writes for n tokens: n for pooling none, else 1;
 * 0 after an error (an unsupported model pooling or option). */
FC_API int64_t fc_llm_embed_rows(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_embed_options *opt, size_t n);

/* Evaluate n >= 1 tokens appended to sequence seq of s and write their
 * embedding: fc_llm_embed_rows rows of n_embd floats into out, pooled over
 * these n tokens (a text's embedding starts from an empty sequence, as
 * llama-embedding clears the cache for each prompt), each row normalized.
 * opt NULL: the defaults. Errors: as fc_llm_session_eval_seq, an unknown
 * pooling or norm, norm_p < 1, an unsupported model pooling; the session
 * is unchanged on failure. */
FC_API fc_status fc_llm_embed(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                              const fc_llm_embed_options *opt, float *out);

/* out[0..n) = in scaled as norm / norm_p say (llama-embedding's
 * common_embd_normalize: the norm summed in double, a zero vector stays
 * zero). out may be in. FC_ERR_INVALID_ARG for an unknown norm or p < 1. */
FC_API fc_status fc_llm_embd_normalize(fc_ctx *ctx, const float *in, float *out, int64_t n, fc_llm_embd_norm norm,
                                       int norm_p);

#ifdef __cplusplus
}
#endif
#endif
