/* SPDX-License-Identifier: MIT */
/* Fucina llm: the KV cache of a session, per layer and sequence, in f32, f16
 * or q8_0 (llama.cpp's cache types; f16 is its default too).
 *
 * f32 and f16 caches are tensors the attention kernel reads in place (it
 * widens f16 exactly). A q8_0 cache keeps each position's row (kv_head * d
 * elements) as q8_0 blocks of 32, quantized once when the row is stored;
 * decode steps attend over the blocks in place (exec/attention_q8.h), and a
 * prefill decodes the rows it reads into an f32 scratch (src/llm/forward.c):
 * the price of a cache 3.8x smaller than f32. */
#include <stdlib.h>
#include <string.h>

#include "exec/attention_q8.h"
#include "exec/ctx.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/session.h"
#include "quant/quant.h"

#define QK8_0 32
#define Q8_0_BLOCK 34 /* fp16 scale + 32 int8 */
/* q8_0 rows are allocated in multiples of this (past n_ctx, zeros), so the
 * decode attention's qgemv kernel (nr keys per call, nr <= 64) covers every
 * key: the scores then never depend on where the cache ends. */
#define Q8_ROWS_ALIGN 64

void fc_llm_kv_free(fc_llm_kv *kv) {
    if (!kv) return;
    const int64_t n = kv->n_layer * kv->n_seq;
    for (int64_t i = 0; i < n; i++) {
        if (kv->k) fc_release(kv->k[i]);
        if (kv->v) fc_release(kv->v[i]);
        if (kv->qk) free(kv->qk[i]);
        if (kv->qv) free(kv->qv[i]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->qk);
    free(kv->qv);
    free(kv->scores);
    fc_release(kv->deq_k);
    fc_release(kv->deq_v);
    memset(kv, 0, sizeof *kv);
}

static fc_status kv_oom(fc_ctx *ctx, fc_llm_kv *kv) {
    fc_llm_kv_free(kv);
    if (fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_new: out of memory for the KV cache");
    return fc_ctx_status(ctx);
}

fc_status fc_llm_kv_init(fc_ctx *ctx, fc_llm_kv *kv, const fc_llm_hparams *hp, int64_t n_ctx, int64_t n_seq,
                         fc_dtype type) {
    memset(kv, 0, sizeof *kv);
    const int64_t row = hp->n_head_kv * hp->head_dim;
    /* not a switch: fc_dtype has dozens of values and three are accepted */
    if (type != FC_F32 && type != FC_F16 && type != FC_Q8_0) {
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_llm_session_new: KV cache type %s: use f16, q8_0 or f32", fc_dtype_name(type));
        return FC_ERR_UNSUPPORTED;
    }
    if (type == FC_Q8_0 && row % QK8_0) {
        fc_fail(ctx, FC_ERR_UNSUPPORTED,
                "fc_llm_session_new: a q8_0 KV cache needs kv_head x head_dim (%lld) to be a multiple of 32", (long long)row);
        return FC_ERR_UNSUPPORTED;
    }
    kv->type = type;
    kv->n_ctx = n_ctx;
    kv->n_layer = hp->n_layer;
    kv->n_seq = n_seq;
    kv->n_kv_head = hp->n_head_kv;
    kv->head_dim = hp->head_dim;
    const int64_t n = kv->n_layer * n_seq;
    if (type == FC_Q8_0) {
        kv->row_bytes = (size_t)(row / QK8_0) * Q8_0_BLOCK;
        kv->n_rows = (n_ctx + Q8_ROWS_ALIGN - 1) / Q8_ROWS_ALIGN * Q8_ROWS_ALIGN;
        kv->qk = calloc((size_t)n, sizeof *kv->qk);
        kv->qv = calloc((size_t)n, sizeof *kv->qv);
        if (!kv->qk || !kv->qv) return kv_oom(ctx, kv);
        for (int64_t i = 0; i < n; i++) {
            kv->qk[i] = calloc((size_t)kv->n_rows, kv->row_bytes);
            kv->qv[i] = calloc((size_t)kv->n_rows, kv->row_bytes);
            if (!kv->qk[i] || !kv->qv[i]) return kv_oom(ctx, kv);
        }
        kv->scores = calloc((size_t)(hp->n_head * (kv->n_rows + hp->head_dim)), sizeof *kv->scores);
        if (!kv->scores) return kv_oom(ctx, kv);
        kv->deq_k = fc_empty(ctx, FC_F32, FC_SHAPE({"kv_seq", n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        kv->deq_v = fc_empty(ctx, FC_F32, FC_SHAPE({"kv_seq", n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        if (!kv->deq_k || !kv->deq_v) return kv_oom(ctx, kv);
        return FC_OK;
    }
    kv->k = calloc((size_t)n, sizeof *kv->k);
    kv->v = calloc((size_t)n, sizeof *kv->v);
    if (!kv->k || !kv->v) return kv_oom(ctx, kv);
    /* not zeroed: the attention reads rows below the position only, and
     * pages of a long cache are committed as the positions reach them */
    for (int64_t i = 0; i < n; i++) {
        kv->k[i] = fc_empty(ctx, type, FC_SHAPE({"kv_seq", n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        kv->v[i] = fc_empty(ctx, type, FC_SHAPE({"kv_seq", n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        if (!kv->k[i] || !kv->v[i]) return kv_oom(ctx, kv);
    }
    return FC_OK;
}
