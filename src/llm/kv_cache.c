/* Fucina llm: the KV cache of a session, per layer and sequence, in f32, f16
 * or q8_0 (llama.cpp's cache types; f16 is its default too).
 *
 * f32 and f16 caches are tensors the attention kernel reads in place (it
 * widens f16 exactly). A q8_0 cache keeps each position's row (kv_head * d
 * elements) as q8_0 blocks of 32, quantized once when the row is stored;
 * fc_attention has no q8_0 path, so every put decodes the rows the attention
 * will read into an f32 scratch: O(position) work per layer and token, the
 * price of a cache 3.8x smaller than f32. */
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

/* src [kv_seq, kv_head, d] (any order) quantized into rows pos..pos+n of cache i */
static fc_status q8_store(fc_ctx *ctx, fc_llm_kv *kv, int64_t i, int is_v, fc_tensor *src, int64_t pos, int64_t n) {
    /* rows in [kv_seq, kv_head, d] order, contiguous, to quantize in one run */
    src = fc_contiguous(ctx, fc_permute(ctx, src, FC_AXES("kv_seq", "kv_head", "d")));
    if (!src) return fc_ctx_status(ctx);
    uint8_t *q = is_v ? kv->qv[i] : kv->qk[i];
    fcq_encode_q8_0(fc_tensor_data(src), q + (size_t)pos * kv->row_bytes, (size_t)(n * kv->n_kv_head * kv->head_dim));
    return FC_OK;
}

fc_tensor *fc_llm_kv_put(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, int is_v, fc_tensor *x,
                         int64_t pos, int64_t n) {
    if (!x) return NULL;
    const int64_t i = layer * kv->n_seq + seq;
    fc_tensor *src = fc_rename(ctx, x, "seq", "kv_seq");
    if (!src) return NULL;
    if (kv->type != FC_Q8_0) {
        fc_tensor *cache = is_v ? kv->v[i] : kv->k[i];
        fc_tensor *dst = fc_narrow(ctx, cache, "kv_seq", pos, n);
        if (!dst || fc_copy_into(ctx, dst, src) != FC_OK) return NULL;
        return fc_narrow(ctx, cache, "kv_seq", 0, pos + n);
    }
    if (q8_store(ctx, kv, i, is_v, src, pos, n) != FC_OK) return NULL;
    const uint8_t *q = is_v ? kv->qv[i] : kv->qk[i];
    const int64_t row = kv->n_kv_head * kv->head_dim;
    fc_tensor *deq = is_v ? kv->deq_v : kv->deq_k;
    fcq_decode_q8_0(q, fc_tensor_data(deq), (size_t)((pos + n) * row));
    fc_storage_touch(deq->storage);
    return fc_narrow(ctx, deq, "kv_seq", 0, pos + n);
}

fc_tensor *fc_llm_kv_attend_q8(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, fc_tensor *q, fc_tensor *k,
                               fc_tensor *v, int64_t pos, int64_t n, double scale) {
    if (!q || !k || !v) return NULL;
    const int64_t i = layer * kv->n_seq + seq;
    fc_tensor *ks = fc_rename(ctx, k, "seq", "kv_seq"), *vs = fc_rename(ctx, v, "seq", "kv_seq");
    if (!ks || !vs || q8_store(ctx, kv, i, 0, ks, pos, n) != FC_OK || q8_store(ctx, kv, i, 1, vs, pos, n) != FC_OK)
        return NULL;
    q = fc_contiguous(ctx, fc_permute(ctx, q, FC_AXES("seq", "head", "d")));
    if (!q) return NULL;
    const int64_t n_head = fc_tensor_size(q, "head"), d = kv->head_dim;
    fc_tensor *o = fc_empty(ctx, FC_F32, FC_SHAPE({"seq", n}, {"head", n_head}, {"d", d}));
    if (!o) return NULL;
    const fc_attn_q8_args a = {
        .n_q = n, .n_kv = pos + n, .n_rows = kv->n_rows, .n_head = n_head, .n_kv_head = kv->n_kv_head, .head_dim = d,
        .q = fc_tensor_data(q), .q_ts = n_head * d, .q_hs = d,
        .k = kv->qk[i], .v = kv->qv[i], .row_bytes = kv->row_bytes,
        .o = fc_tensor_data(o), .o_ts = n_head * d, .o_hs = d,
        .scale = (float)scale, .q_pos0 = pos, .scratch = kv->scores};
    if (fc_attention_q8_0(fc_ctx_workers(ctx), &a) != 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: q8_0 attention: bad shape (head dim %lld, %lld/%lld heads)",
                       (long long)d, (long long)n_head, (long long)kv->n_kv_head);
    return o;
}
