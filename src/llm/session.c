/* Fucina llm: a session's KV cache (f32 [kv_seq, kv_head, d] per layer). */
#include <stdlib.h>

#include "exec/ctx.h"
#include "fucina/shape_ops.h"
#include "fucina/ops.h"
#include "llm/session.h"

void fc_llm_session_free(fc_llm_session *s) {
    if (!s) return;
    for (int64_t l = 0; l < s->m->hp.n_layer; l++) {
        if (s->k) fc_release(s->k[l]);
        if (s->v) fc_release(s->v[l]);
    }
    free(s->k);
    free(s->v);
    free(s);
}

fc_llm_session_options fc_llm_session_default_options(void) {
    return (fc_llm_session_options){.n_ctx = 0, .kv_type = FC_F16, .n_seq = 1};
}

fc_llm_session *fc_llm_session_new(fc_ctx *ctx, const fc_llm_model *m, int64_t n_ctx) {
    fc_llm_session_options o = fc_llm_session_default_options();
    o.n_ctx = n_ctx;
    o.kv_type = FC_F32;
    return fc_llm_session_new_ex(ctx, m, &o);
}

fc_llm_session *fc_llm_session_new_ex(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_session_options *opt) {
    if (!ctx) return NULL;
    if (!m) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_new: NULL model");
    fc_llm_session_options o = opt ? *opt : fc_llm_session_default_options();
    const int64_t n_ctx = o.n_ctx;
    if (n_ctx < 0) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_new: n_ctx %lld < 0", (long long)n_ctx);
    if (o.kv_type != FC_F32 || o.n_seq != 1)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_llm_session_new: only an f32 KV cache of one sequence so far");
    const fc_llm_hparams *hp = &m->hp;
    fc_llm_session *s = calloc(1, sizeof *s);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_new: out of memory");
    s->m = m;
    s->n_ctx = n_ctx ? n_ctx : hp->n_ctx_train;
    s->k = calloc((size_t)hp->n_layer, sizeof *s->k);
    s->v = calloc((size_t)hp->n_layer, sizeof *s->v);
    if (!s->k || !s->v) {
        fc_llm_session_free(s);
        return fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_new: out of memory");
    }
    for (int64_t l = 0; l < hp->n_layer; l++) {
        s->k[l] = fc_zeros(ctx, FC_F32, FC_SHAPE({"kv_seq", s->n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        s->v[l] = fc_zeros(ctx, FC_F32, FC_SHAPE({"kv_seq", s->n_ctx}, {"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        if (!s->k[l] || !s->v[l]) {
            fc_llm_session_free(s);
            return NULL;
        }
    }
    return s;
}

int64_t fc_llm_session_pos(const fc_llm_session *s) { return s ? s->pos : 0; }
void fc_llm_session_reset(fc_llm_session *s) {
    if (s) s->pos = 0;
}

/* The rows past n_pos need no clearing: attention reads rows 0..pos only and
 * the next eval overwrites them. */
fc_status fc_llm_session_truncate(fc_ctx *ctx, fc_llm_session *s, int64_t n_pos) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || n_pos < 0 || n_pos > s->pos) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_truncate: %s", !s ? "NULL session" : "position out of range");
        return FC_ERR_INVALID_ARG;
    }
    s->pos = n_pos;
    return FC_OK;
}

fc_tensor *fc_llm_cache_put(fc_ctx *ctx, fc_tensor *cache, fc_tensor *x, int64_t pos, int64_t n) {
    fc_tensor *dst = fc_narrow(ctx, cache, "kv_seq", pos, n);
    fc_tensor *src = fc_rename(ctx, x, "seq", "kv_seq");
    if (!dst || !src) return NULL;
    if (fc_copy_into(ctx, dst, src) != FC_OK) return NULL;
    return fc_narrow(ctx, cache, "kv_seq", 0, pos + n);
}

