/* Fucina llm: an evaluation session (internal): the model, the position and
 * the KV cache the forward (src/llm/qwen3.c) reads and appends to. */
#ifndef FC_LLM_SESSION_H
#define FC_LLM_SESSION_H

#include "llm/model.h"

struct fc_llm_session {
    const fc_llm_model *m;
    int64_t n_ctx, pos;
    fc_tensor **k, **v; /* per layer: f32 [kv_seq = n_ctx, kv_head, d] */
};

/* x [seq, kv_head, d] (K after RoPE, or V) written into the cache rows
 * pos..pos+n; returns the view of rows 0..pos+n the attention reads. */
fc_tensor *fc_llm_cache_put(fc_ctx *ctx, fc_tensor *cache, fc_tensor *x, int64_t pos, int64_t n);

#endif
