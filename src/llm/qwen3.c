/* Fucina llm: the qwen3 forward pass over a KV-cache session.
 *
 * The graph is llama.cpp's (src/models/qwen3.cpp), op for op:
 *   x = token_embd[ids]
 *   per layer: h = rmsnorm(x) * attn_norm
 *              q = rmsnorm_d(h Wq) * q_norm, k = rmsnorm_d(h Wk) * k_norm  (per head, over d)
 *              q, k = rope_neox(q, k, pos, freq_base)     (LLAMA_ROPE_TYPE_NEOX for qwen3)
 *              v = h Wv;  a = attention(q, k, v) (GQA, causal, scale 1/sqrt(d))
 *              x = x + a Wo
 *              h = rmsnorm(x) * ffn_norm;  x = x + (silu(h Wgate) * (h Wup)) Wdown
 *   logits = (rmsnorm(x) * output_norm) Woutput   (Woutput = token_embd when tied)
 * K (after RoPE) and V of every position are kept in the session's cache
 * (src/llm/kv_cache.c: f16, q8_0 or f32), so a later eval attends over all
 * earlier positions; the FFN block is src/llm/ffn.c.
 *
 * A forward runs segments: runs of rows that belong to one sequence each
 * (one segment: a prefill or a decode step; several: a lockstep decode of
 * several sequences, one row each). Everything but attention treats the
 * rows as one batch, so each weight matrix is streamed once per forward;
 * attention runs per segment over its sequence's cache rows. The public
 * entry points (validation) are in src/llm/session.c. */
#include <math.h>
#include <string.h>

#include "exec/ctx.h"
#include "exec/qmatmul.h"
#include "exec/workers.h"
#include "fucina/autograd.h"
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/model.h"
#include "llm/session.h"

/* x [seq, q|kv] viewed as [seq, head, d] (the weight rows are head-major, as
 * llama.cpp's ggml_reshape_3d of the projection reads them). */
static fc_tensor *heads(fc_ctx *ctx, fc_tensor *x, const char *axis, const char *head, int64_t n_head, int64_t d) {
    return fc_split_axis(ctx, x, axis, FC_SHAPE({head, n_head}, {"d", d}));
}

/* Rows of a segment up to which a q8_0 cache is read in place (decode);
 * longer runs (prefill) decode the rows to f32 for the blocked kernel. */
#define Q8_DIRECT_MAX_ROWS 4

/* Attention of every segment over its own sequence's cache; the K and V
 * rows of the batch are stored first. One segment (a prefill or a single
 * decode) attends directly; several (a lockstep decode) are concatenated
 * back into one [seq, head, d] batch for the output projection. */
static fc_tensor *attend(fc_ctx *ctx, fc_llm_session *s, int64_t l, const fc_llm_seg *segs, int64_t n_seg,
                         fc_tensor *q, fc_tensor *k, fc_tensor *v, const fc_attention_options *ao0) {
    if (!q || !k || !v) return NULL;
    int64_t row = 0;
    for (int64_t i = 0; i < n_seg; i++) {
        const fc_llm_seg *g = &segs[i];
        const int one = n_seg == 1;
        fc_tensor *qi = one ? q : fc_narrow(ctx, q, "seq", row, g->n);
        fc_tensor *ki = one ? k : fc_narrow(ctx, k, "seq", row, g->n);
        fc_tensor *vi = one ? v : fc_narrow(ctx, v, "seq", row, g->n);
        if (s->kv.type == FC_Q8_0 && g->n <= Q8_DIRECT_MAX_ROWS) {
            /* decode over a q8_0 cache: read the blocks in place */
            fc_tensor *a = fc_llm_kv_attend_q8(ctx, &s->kv, l, g->seq, qi, ki, vi, g->pos0, g->n, ao0->scale);
            if (one || !a) return a;
            s->parts[i] = a;
            row += g->n;
            continue;
        }
        fc_tensor *kall = fc_llm_kv_put(ctx, &s->kv, l, g->seq, 0, ki, g->pos0, g->n);
        fc_tensor *vall = fc_llm_kv_put(ctx, &s->kv, l, g->seq, 1, vi, g->pos0, g->n);
        if (!qi || !kall || !vall) return NULL;
        fc_attention_options ao = *ao0;
        ao.q_pos0 = g->pos0;
        fc_tensor *a = fc_attention(ctx, qi, kall, vall, &ao); /* [seq, head, d] */
        if (one || !a) return a;
        s->parts[i] = a;
        row += g->n;
    }
    return fc_concat(ctx, s->parts, (int)n_seg, "seq");
}

int fc_llm_linear_n(fc_ctx *ctx, fc_tensor *h, fc_tensor *const *w, int n, fc_tensor **out) {
    /* one row of h (decode) and block weights [out, embd] over h's last axis:
     * one quantized product for all n; anything else: fc_linear each */
    /* (not when h is on a gradient path: the fused product records no VJP) */
    int fused = n <= 8 && fc_tensor_rank(h) == 2 && fc_tensor_dim(h, 0) == 1 && fc_tensor_dtype(h) == FC_F32 &&
                fc_tensor_is_contiguous(h) && !(fc_grad_enabled() && fc_tensor_requires_grad(h));
    for (int i = 0; i < n && fused; i++)
        fused = fc_dtype_is_block(fc_tensor_dtype(w[i])) && fc_tensor_rank(w[i]) == 2 && fc_tensor_is_contiguous(w[i]) &&
                fc_tensor_dim(w[i], 1) == fc_tensor_dim(h, 1) && !strcmp(fc_tensor_axis(w[i], 1), fc_tensor_axis(h, 1));
    if (!fused) {
        for (int i = 0; i < n; i++)
            if (!(out[i] = fc_linear(ctx, h, w[i], NULL))) return 0;
        return 1;
    }
    const int64_t k = fc_tensor_dim(h, 1);
    fc_qmatmul_args g[8];
    for (int i = 0; i < n; i++) {
        const fc_dtype dt = fc_tensor_dtype(w[i]);
        const int64_t nw = fc_tensor_dim(w[i], 0);
        out[i] = fc_empty(ctx, FC_F32, FC_SHAPE({fc_tensor_axis(h, 0), 1}, {fc_tensor_axis(w[i], 0), nw}));
        if (!out[i]) return 0;
        g[i] = (fc_qmatmul_args){.m = 1, .n = nw, .k = k, .a = fc_tensor_data(h), .lda = k, .w = fc_tensor_data(w[i]),
                                 .wtype = (uint32_t)fc_dtype_ggml_type(dt), .w_row_bytes = fc_dtype_row_bytes(dt, k),
                                 .c = fc_tensor_data(out[i]), .ldc = nw};
    }
    if (fc_qmatmul_multi(fc_ctx_workers(ctx), g, n) != 0) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_forward: out of memory for the quantized projections' scratch");
        return 0;
    }
    return 1;
}

void fc_llm_prefetch(fc_ctx *ctx, const fc_tensor *w) {
    const size_t n = fc_tensor_nbytes(w);
    fc_workers_prefetch(fc_ctx_workers(ctx), fc_tensor_data(w), n < LLM_PREFETCH_BYTES ? n : LLM_PREFETCH_BYTES);
}

fc_status fc_llm_forward(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                         const fc_token *tokens, fc_llm_logits which, float *logits) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    int64_t N = 0;
    for (int64_t i = 0; i < n_seg; i++)
        for (int64_t j = 0; j < segs[i].n; j++) s->posv[N++] = (int32_t)(segs[i].pos0 + j);
    const double eps = hp->rms_eps;
    fc_status st = FC_OK;
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), tokens, (size_t)N * sizeof *tokens);
    fc_tensor *pos = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), s->posv, (size_t)N * sizeof *s->posv);
    fc_tensor *x = fc_get_rows(ctx, m->tok_embd, ids); /* [seq, embd] */
    if (x && fc_tensor_dtype(x) != FC_F32) x = fc_cast(ctx, x, FC_F32);
    if (x && fc_llm_decode_step_ok(s, segs, n_seg)) { /* one token per segment: the raw-row step, same bits */
        x = fc_contiguous(ctx, x);
        st = x ? fc_llm_decode_step(ctx, s, segs, n_seg, fc_tensor_data(x), which, logits) : fc_ctx_status(ctx);
        goto done;
    }
    const fc_rope_options ro = {.style = FC_ROPE_STYLE_NEOX, .n_rot = hp->n_rot, .theta = hp->rope_theta};
    const fc_attention_options ao = {
        .scale = 1.0 / sqrt((double)hp->head_dim), .causal = 1, .q_pos0 = 0, .head_axis = "head",
        .kv_head_axis = "kv_head"};
    /* pre-norm residual steps: x + (block output) and the next norm are
     * one pass (fc_rmsnorm_residual, the same bits as fc_add then
     * fc_rmsnorm); h is the current block's normed input */
    fc_tensor *h = x && hp->n_layer > 0 ? fc_rmsnorm(ctx, x, m->layers[0].attn_norm, "embd", eps) : NULL;
    for (int64_t l = 0; l < hp->n_layer && x; l++) {
        const fc_llm_layer *L = &m->layers[l];
        fc_tensor *qkv[3] = {NULL, NULL, NULL};
        if (h) fc_llm_linear_n(ctx, h, (fc_tensor *const[]){L->wq, L->wk, L->wv}, 3, qkv);
        fc_tensor *q = heads(ctx, qkv[0], "q", "head", hp->n_head, hp->head_dim);
        fc_tensor *k = heads(ctx, qkv[1], "kv", "kv_head", hp->n_head_kv, hp->head_dim);
        fc_tensor *v = heads(ctx, qkv[2], "kv", "kv_head", hp->n_head_kv, hp->head_dim);
        fc_llm_prefetch(ctx, L->wo); /* over the norms, rope and attention */
        q = fc_rope(ctx, fc_rmsnorm(ctx, q, L->q_norm, "d", eps), pos, &ro);
        fc_rope_options rk = ro;
        rk.head_axis = "kv_head";
        k = fc_rope(ctx, fc_rmsnorm(ctx, k, L->k_norm, "d", eps), pos, &rk);
        fc_tensor *a = attend(ctx, s, l, segs, n_seg, q, k, v, &ao);
        a = fc_merge_axes(ctx, a, FC_AXES("head", "d"), "q");
        fc_tensor *o = fc_linear(ctx, a, L->wo, NULL);
        fc_llm_ffn_prefetch(ctx, m, L);
        h = o ? fc_rmsnorm_residual(ctx, o, x, L->ffn_norm, "embd", eps, &x) : NULL;
        if (!h) x = NULL;
        fc_tensor *f = x ? fc_llm_ffn(ctx, m, L, h) : NULL;
        fc_llm_prefetch(ctx, l + 1 < hp->n_layer ? m->layers[l + 1].wq : m->output);
        if (!f) x = NULL;
        else if (l + 1 < hp->n_layer) {
            h = fc_rmsnorm_residual(ctx, f, x, m->layers[l + 1].attn_norm, "embd", eps, &x);
            if (!h) x = NULL;
        } else
            x = fc_add(ctx, x, f);
    }
    const int want = which != FC_LLM_LOGITS_NONE && logits;
    /* LAST: the last row (callers pass LAST with one segment only; a batch
     * of several has one row per segment and asks for ALL) */
    const int64_t n_out = which == FC_LLM_LOGITS_LAST ? 1 : N;
    if (x && want && n_out < N) x = fc_narrow(ctx, x, "seq", N - 1, 1);
    fc_tensor *out = x && want ? fc_linear(ctx, fc_rmsnorm(ctx, x, m->output_norm, "embd", eps), m->output, NULL) : x;
    if (out && want) out = fc_contiguous(ctx, fc_permute(ctx, out, FC_AXES("seq", "vocab")));
    if (!out) {
        st = fc_ctx_status(ctx);
        if (st == FC_OK) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: forward failed");
            st = FC_ERR_INVALID_ARG;
        }
        goto done;
    }
    if (want) {
        st = fc_tensor_read(ctx, out, logits, (size_t)n_out * (size_t)hp->n_vocab * sizeof(float));
        if (st != FC_OK) goto done;
    }
    for (int64_t i = 0; i < n_seg; i++) s->pos[segs[i].seq] += segs[i].n;
done:
    fc_scope_end(ctx, sc);
    return st;
}
