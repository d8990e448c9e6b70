/* SPDX-License-Identifier: MIT */
/* Fucina llm: an evaluation session (internal): the model, the positions of
 * its sequences, the KV cache (src/llm/kv_cache.c) the forward
 * (src/llm/forward.c) reads and appends to, and the rows it computes on. */
#ifndef FC_LLM_SESSION_H
#define FC_LLM_SESSION_H

#include <stdint.h>

#include "llm/model.h"

/* The KV cache of every layer and sequence. f32 and f16 caches are tensors
 * [kv_seq = n_ctx, kv_head, d] the attention reads in place; a q8_0 cache
 * is raw q8_0 blocks (one row of kv_head * d elements per position), decoded
 * into an f32 scratch [kv_seq, kv_head, d] before each attention. */
typedef struct fc_llm_kv {
    fc_dtype type;                 /* FC_F32, FC_F16 or FC_Q8_0 */
    int64_t n_ctx, n_layer, n_seq;
    int64_t n_kv_head, head_dim;   /* a row is n_kv_head * head_dim elements */
    fc_tensor **k, **v;            /* f32/f16: [layer * n_seq + seq]; NULL for q8_0 */
    uint8_t **qk, **qv;            /* q8_0: [layer * n_seq + seq], n_ctx rows of row_bytes */
    size_t row_bytes;              /* q8_0: bytes of one row's blocks */
    int64_t n_rows;                /* q8_0: rows allocated, n_ctx rounded up to 64 */
    fc_tensor *deq_k, *deq_v;      /* q8_0: f32 [kv_seq, kv_head, d] scratch */
    float *scores;                 /* q8_0: head x (n_rows + d) floats for decode attention */
} fc_llm_kv;

/* Allocates the cache (zeroed); FC_OK, or an error naming the reason (a
 * type that is not f32/f16/q8_0, a q8_0 row not a multiple of 32, OOM). */
fc_status fc_llm_kv_init(fc_ctx *ctx, fc_llm_kv *kv, const fc_llm_hparams *hp, int64_t n_ctx, int64_t n_seq,
                         fc_dtype type);
void fc_llm_kv_free(fc_llm_kv *kv);
/* The most rows one pass of the forward computes (llama.cpp's default
 * ubatch): a longer eval runs in chunks of this many, in order. */
#define FC_LLM_CHUNK_ROWS 512

struct fc_llm_session {
    const fc_llm_model *m;
    int64_t n_ctx, n_seq;
    int64_t *pos;        /* [n_seq]: positions evaluated per sequence */
    fc_llm_kv kv;
    /* per-eval scratch, so a steady decode does not allocate */
    int64_t *posv;                /* [FC_LLM_CHUNK_ROWS] positions of a chunk's rows */
    struct fc_llm_seg *chunk_segs; /* [FC_LLM_CHUNK_ROWS] a chunk's segments */
    float *rows;                  /* the forward's rows (forward.c), 64-byte aligned; grown for longer chunks */
    int64_t rows_cap;             /* rows it holds */
};

/* One sequence's run of rows in a forward: rows [row0, row0 + n) of the
 * batch are tokens of sequence seq at positions pos0..; logits says which
 * of its rows get logits (every row, the last, or none). */
typedef struct fc_llm_seg {
    int64_t seq, pos0, n;
    fc_llm_logits logits;
} fc_llm_seg;

/* The forward over n_seg segments (distinct sequences, validated by the
 * caller: positions fit the cache, tokens in range) whose tokens are
 * concatenated in `tokens`; the segments' positions advance on success.
 * logits (may be NULL) receives the rows the segments ask for, in segment
 * order: n rows for FC_LLM_LOGITS_ALL, 1 for LAST, none for NONE. hidden
 * (may be NULL) receives the same rows' final hidden states (n_embd floats
 * each: after the output norm, the LM head's input; src/llm/embed.c). */
fc_status fc_llm_forward(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                         const fc_token *tokens, float *logits, float *hidden);
/* fc_llm_session_eval_seq (its checks and errors) with the hidden states of
 * the rows `which` selects into hidden as well (either output may be NULL). */
fc_status fc_llm_session_eval_out(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                  fc_llm_logits which, float *logits, float *hidden);

#endif
