/* Fucina llm: an evaluation session (internal): the model, the positions of
 * its sequences and the KV cache (src/llm/kv_cache.c) the forward
 * (src/llm/qwen3.c) reads and appends to. */
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
/* x [seq, kv_head, d] f32 (K after RoPE when is_v = 0, else V) stored in
 * rows pos..pos+n of (layer, seq); returns the view of rows 0..pos+n the
 * attention reads (f32 or f16). NULL + error on failure. */
fc_tensor *fc_llm_kv_put(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, int is_v, fc_tensor *x,
                         int64_t pos, int64_t n);

/* Decode attention straight over a q8_0 cache (exec/attention_q8.h): k, v
 * [seq, kv_head, d] stored in rows pos..pos+n of (layer, seq), then q
 * [seq, head, d] attends over rows 0..pos+n, causal from pos. Returns the
 * [seq, head, d] output. For a few rows (decode); a prefill goes through
 * fc_llm_kv_put and fc_attention. */
fc_tensor *fc_llm_kv_attend_q8(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, fc_tensor *q, fc_tensor *k,
                               fc_tensor *v, int64_t pos, int64_t n, double scale);

struct fc_llm_session {
    const fc_llm_model *m;
    int64_t n_ctx, n_seq;
    int64_t *pos;        /* [n_seq]: positions evaluated per sequence */
    fc_llm_kv kv;
    /* per-eval scratch sized at creation, so an eval does not allocate */
    int32_t *posv;       /* max(n_ctx, n_seq) positions of the rows of one eval */
    fc_tensor **parts;   /* [n_seq] per-sequence attention outputs of a batch */
    float *step;         /* fc_llm_decode_step's rows (decode_step.c), 64-byte aligned */
    int64_t step_rows;   /* segments step has room for: min(n_seq, FC_LLM_STEP_MAX_ROWS) */
};

/* One sequence's run of rows in a forward: rows [row0, row0 + n) of the
 * batch are tokens of sequence seq at positions pos0.. */
typedef struct fc_llm_seg {
    int64_t seq, pos0, n;
} fc_llm_seg;

/* The forward over n_seg segments (distinct sequences, validated by the
 * caller: positions fit the cache, tokens in range) whose tokens are
 * concatenated in `tokens`; the segments' positions advance on success.
 * logits: FC_LLM_LOGITS_ALL every row (in segment order), LAST the last
 * row (one segment only). */
fc_status fc_llm_forward(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                         const fc_token *tokens, fc_llm_logits which, float *logits);

/* The most rows (sequences of a lockstep batch) the raw-row step takes: its
 * buffer is ~90 KB per row for a 0.6B-shaped model. */
#define FC_LLM_STEP_MAX_ROWS 16

/* The one-token decode step on the session's own rows (src/llm/decode_step.c):
 * the same kernels in the same order as the tensor path, so the same bits.
 * _ok: whether the step applies: n_seg segments (at most the session's
 * sequences, FC_LLM_STEP_MAX_ROWS) of one token each, of a qwen3 or qwen3moe with row-major
 * block-quantized or f32/f16/bf16 projections, router, experts and output,
 * f32 norms and an f16, f32 or q8_0 cache; several segments (a lockstep
 * batch) only for a dense qwen3 with block weights. _floats: the rows it
 * needs per segment; the step itself takes the tokens' embedding rows x0
 * [n_seg, n_embd], stores their K/V rows, advances the positions and writes
 * the logits (LAST: the last row; ALL: every row; NONE: none). */
int fc_llm_decode_step_ok(const fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg);
size_t fc_llm_decode_step_floats(const fc_llm_hparams *hp);
fc_status fc_llm_decode_step(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                             const float *x0, fc_llm_logits which, float *logits);

#endif
