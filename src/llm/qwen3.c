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
 * (src/llm/session.c), so a later eval attends over all earlier positions;
 * the FFN block is src/llm/ffn.c. */
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "exec/ctx.h"
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

fc_status fc_llm_session_eval(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n, float *logits) {
    return fc_llm_session_eval_ex(ctx, s, tokens, n, FC_LLM_LOGITS_ALL, logits);
}

fc_status fc_llm_session_eval_ex(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n,
                                 fc_llm_logits which, float *logits) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    switch (which) {
    case FC_LLM_LOGITS_ALL:
    case FC_LLM_LOGITS_LAST:
    case FC_LLM_LOGITS_NONE:
        break;
    default:
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: unknown logits selection %d", (int)which);
        return FC_ERR_INVALID_ARG;
    }
    if (!s || !tokens || n == 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: %s", !s ? "NULL session" : !tokens ? "NULL tokens" : "no tokens");
        return FC_ERR_INVALID_ARG;
    }
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    if ((int64_t)n > s->n_ctx - s->pos) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: %zu tokens at position %lld overflow the %lld-position cache",
                n, (long long)s->pos, (long long)s->n_ctx);
        return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: token %zu id %d out of range [0, %lld)", i,
                    (int)tokens[i], (long long)hp->n_vocab);
            return FC_ERR_INVALID_ARG;
        }
    const int64_t N = (int64_t)n, pos0 = s->pos;
    const double eps = hp->rms_eps;
    fc_status st = FC_OK;
    fc_scope sc = fc_scope_begin(ctx);
    int32_t *posv = malloc(n * sizeof *posv);
    if (!posv) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_eval: out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) posv[i] = (int32_t)(pos0 + (int64_t)i);
    fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), tokens, n * sizeof *tokens);
    fc_tensor *pos = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), posv, n * sizeof *posv);
    fc_tensor *x = fc_get_rows(ctx, m->tok_embd, ids); /* [seq, embd] */
    if (x && fc_tensor_dtype(x) != FC_F32) x = fc_cast(ctx, x, FC_F32);
    const fc_rope_options ro = {.style = FC_ROPE_STYLE_NEOX, .n_rot = hp->n_rot, .theta = hp->rope_theta};
    const fc_attention_options ao = {
        .scale = 1.0 / sqrt((double)hp->head_dim), .causal = 1, .q_pos0 = pos0, .head_axis = "head",
        .kv_head_axis = "kv_head"};
    for (int64_t l = 0; l < hp->n_layer && x; l++) {
        const fc_llm_layer *L = &m->layers[l];
        fc_tensor *h = fc_rmsnorm(ctx, x, L->attn_norm, "embd", eps);
        fc_tensor *q = heads(ctx, fc_linear(ctx, h, L->wq, NULL), "q", "head", hp->n_head, hp->head_dim);
        fc_tensor *k = heads(ctx, fc_linear(ctx, h, L->wk, NULL), "kv", "kv_head", hp->n_head_kv, hp->head_dim);
        fc_tensor *v = heads(ctx, fc_linear(ctx, h, L->wv, NULL), "kv", "kv_head", hp->n_head_kv, hp->head_dim);
        q = fc_rope(ctx, fc_rmsnorm(ctx, q, L->q_norm, "d", eps), pos, &ro);
        fc_rope_options rk = ro;
        rk.head_axis = "kv_head";
        k = fc_rope(ctx, fc_rmsnorm(ctx, k, L->k_norm, "d", eps), pos, &rk);
        fc_tensor *kall = k ? fc_llm_cache_put(ctx, s->k[l], k, pos0, N) : NULL;
        fc_tensor *vall = v ? fc_llm_cache_put(ctx, s->v[l], v, pos0, N) : NULL;
        fc_tensor *a = fc_attention(ctx, q, kall, vall, &ao); /* [seq, head, d] */
        a = fc_merge_axes(ctx, a, FC_AXES("head", "d"), "q");
        x = fc_add(ctx, x, fc_linear(ctx, a, L->wo, NULL));
        h = fc_rmsnorm(ctx, x, L->ffn_norm, "embd", eps);
        x = fc_add(ctx, x, fc_llm_ffn(ctx, m, L, h));
    }
    const int want = which != FC_LLM_LOGITS_NONE && logits;
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
    s->pos += N;
done:
    fc_scope_end(ctx, sc);
    free(posv);
    return st;
}
