/* SPDX-License-Identifier: MIT */
/* A reference forward for qwen3 and qwen3moe on tensor ops, for the bitwise
 * tests of test_llm_session.c: llama.cpp's qwen3 graph composed from the
 * public ops (fc_linear, fc_rmsnorm, fc_rope, fc_attention, fc_swiglu,
 * fc_rmsnorm_residual, fc_concat), over a session's own KV cache. The
 * library's forward (src/llm/forward.c) runs the same kernels on raw rows
 * in the same order; these tests hold it to the tensor layer's bits, for
 * prefills, decode steps and lockstep batches. It is test code: the
 * library has one forward.
 *
 * Header-only (static); it uses the library's internal model and session
 * structs (src/llm/model.h, session.h). */
#ifndef FCT_LLM_TENSOR_REF_H
#define FCT_LLM_TENSOR_REF_H

#include <math.h>
#include <string.h>

#include "exec/attention_q8.h"
#include "exec/ctx.h"
#include "exec/qmatmul.h"
#include "fucina/autograd.h"
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/model.h"
#include "llm/session.h"
#include "quant/quant.h"

/* x [seq, kv_head, d] into rows pos..pos+n of (layer, seq)'s cache; the
 * view of rows 0..pos+n the attention reads (q8_0: decoded to f32). */
static fc_tensor *ref_kv_put(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, int is_v, fc_tensor *x,
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
    src = fc_contiguous(ctx, fc_permute(ctx, src, FC_AXES("kv_seq", "kv_head", "d")));
    if (!src) return NULL;
    uint8_t *q = is_v ? kv->qv[i] : kv->qk[i];
    const int64_t row = kv->n_kv_head * kv->head_dim;
    fcq_encode_q8_0(fc_tensor_data(src), q + (size_t)pos * kv->row_bytes, (size_t)(n * row));
    fc_tensor *deq = fc_empty(ctx, FC_F32, FC_SHAPE({"kv_seq", pos + n}, {"kv_head", kv->n_kv_head}, {"d", kv->head_dim}));
    if (!deq) return NULL;
    fcq_decode_q8_0(q, fc_tensor_data(deq), (size_t)((pos + n) * row));
    return deq;
}

/* Decode over a q8_0 cache read in place (a few rows). */
static fc_tensor *ref_kv_attend_q8(fc_ctx *ctx, fc_llm_kv *kv, int64_t layer, int64_t seq, fc_tensor *q, fc_tensor *k,
                                   fc_tensor *v, int64_t pos, int64_t n, double scale) {
    if (!q || !k || !v) return NULL;
    const int64_t i = layer * kv->n_seq + seq;
    if (!ref_kv_put(ctx, kv, layer, seq, 0, k, pos, n) || !ref_kv_put(ctx, kv, layer, seq, 1, v, pos, n)) return NULL;
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
    return fc_attention_q8_0(fc_ctx_workers(ctx), &a) == 0 ? o : NULL;
}

/* out[i] = fc_linear(h, w[i]); for one row of h and block weights, one
 * quantized product for all (as the library's decode runs it). */
static int ref_linear_n(fc_ctx *ctx, fc_tensor *h, fc_tensor *const *w, int n, fc_tensor **out) {
    int fused = n <= 8 && fc_tensor_rank(h) == 2 && fc_tensor_dim(h, 0) == 1 && fc_tensor_dtype(h) == FC_F32 &&
                fc_tensor_is_contiguous(h);
    for (int i = 0; i < n && fused; i++) fused = fc_dtype_is_block(fc_tensor_dtype(w[i])) && fc_tensor_is_contiguous(w[i]);
    if (!fused || n == 1) {
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
    return fc_qmatmul_multi(fc_ctx_workers(ctx), g, n) == 0;
}

/* The mixture: routing on the host, experts batched per expert through
 * fc_linear, weighted, slots summed in order. */
static fc_tensor *ref_moe_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h) {
    if (!h) return NULL;
    const fc_llm_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NX = hp->n_expert, K = hp->n_expert_used;
    const char *row_axis = fc_tensor_axis(h, 0);
    const int64_t T = fc_tensor_dim(h, 0);
    fc_tensor *out = fc_zeros(ctx, FC_F32, FC_SHAPE({row_axis, T}, {"embd", E}));
    fc_tensor *hc = fc_contiguous(ctx, h);
    fc_tensor *lg = hc ? fc_linear(ctx, hc, L->gate_inp, NULL) : NULL;
    const char *lg_order[2] = {row_axis, "expert"};
    lg = lg ? fc_contiguous(ctx, fc_permute(ctx, lg, lg_order, 2)) : NULL;
    fc_tensor *tp = fc_empty(ctx, FC_F32, FC_SHAPE({"n", NX})), *tw = fc_empty(ctx, FC_F32, FC_SHAPE({"n", T * K}));
    fc_tensor *ts = fc_empty(ctx, FC_I32, FC_SHAPE({"n", T * K})), *tr = fc_empty(ctx, FC_I32, FC_SHAPE({"n", T * K}));
    fc_tensor *tg = fc_empty(ctx, FC_F32, FC_SHAPE({"n", T * E})), *ta = fc_empty(ctx, FC_F32, FC_SHAPE({"n", T * K * E}));
    if (!out || !lg || !tp || !tw || !ts || !tr || !tg || !ta) return NULL;
    float *probs = fc_tensor_data(tp), *w = fc_tensor_data(tw), *gath = fc_tensor_data(tg), *acc = fc_tensor_data(ta);
    int32_t *sel = fc_tensor_data(ts), *rows = fc_tensor_data(tr);
    const float *x = fc_tensor_data(hc), *logits = fc_tensor_data(lg);
    float *o = fc_tensor_data(out);
    for (int64_t t = 0; t < T; t++) fc_llm_moe_route(logits + t * NX, NX, K, probs, sel + t * K, w + t * K);
    for (int64_t e = 0; e < NX; e++) {
        int64_t c = 0;
        for (int64_t i = 0; i < T * K; i++)
            if (sel[i] == (int32_t)e) rows[c++] = (int32_t)i;
        if (!c) continue;
        for (int64_t r = 0; r < c; r++) memcpy(gath + r * E, x + (rows[r] / K) * E, (size_t)E * sizeof(float));
        fc_tensor *xe = fc_from_data(ctx, FC_F32, FC_SHAPE({row_axis, c}, {"embd", E}), gath, (size_t)(c * E) * sizeof(float));
        fc_tensor *gu[2] = {NULL, NULL};
        if (!xe || !ref_linear_n(ctx, xe, (fc_tensor *const[]){L->gate_e[e], L->up_e[e]}, 2, gu)) return NULL;
        fc_tensor *y = fc_linear(ctx, fc_swiglu(ctx, gu[0], gu[1]), L->down_e[e], NULL);
        const char *y_order[2] = {row_axis, "embd"};
        y = y ? fc_contiguous(ctx, fc_permute(ctx, y, y_order, 2)) : NULL;
        if (!y) return NULL;
        const float *yd = fc_tensor_data(y);
        for (int64_t r = 0; r < c; r++)
            for (int64_t j = 0; j < E; j++) acc[rows[r] * E + j] = yd[r * E + j] * w[rows[r]];
    }
    for (int64_t t = 0; t < T; t++) {
        memcpy(o + t * E, acc + (t * K) * E, (size_t)E * sizeof(float));
        for (int64_t k = 1; k < K; k++)
            for (int64_t j = 0; j < E; j++) o[t * E + j] += acc[(t * K + k) * E + j];
    }
    return out;
}

static fc_tensor *ref_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h) {
    if (L->gate_inp) return ref_moe_ffn(ctx, m, L, h);
    fc_tensor *gu[2] = {NULL, NULL};
    if (!h || !ref_linear_n(ctx, h, (fc_tensor *const[]){L->gate, L->up}, 2, gu)) return NULL;
    return fc_linear(ctx, fc_swiglu(ctx, gu[0], gu[1]), L->down, NULL);
}

/* The forward over n_seg segments (one per sequence) of a qwen3/qwen3moe
 * session; advances the positions. Rows of a segment up to 4 read a q8_0
 * cache in place, as the library does. */
static fc_status ref_forward(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                             const fc_token *tokens, fc_llm_logits which, float *logits) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    int64_t N = 0;
    int32_t posv[512];
    for (int64_t i = 0; i < n_seg; i++)
        for (int64_t j = 0; j < segs[i].n; j++) posv[N++] = (int32_t)(segs[i].pos0 + j);
    const double eps = hp->rms_eps;
    fc_status st = FC_OK;
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), tokens, (size_t)N * sizeof *tokens);
    fc_tensor *pos = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", N}), posv, (size_t)N * sizeof *posv);
    fc_tensor *x = fc_get_rows(ctx, m->tok_embd, ids);
    if (x && fc_tensor_dtype(x) != FC_F32) x = fc_cast(ctx, x, FC_F32);
    const fc_rope_options ro = {.style = FC_ROPE_STYLE_NEOX, .n_rot = hp->n_rot, .theta = hp->rope_theta};
    const fc_attention_options ao = {.scale = 1.0 / sqrt((double)hp->head_dim), .causal = 1, .head_axis = "head",
                                     .kv_head_axis = "kv_head"};
    fc_tensor *parts[64];
    fc_tensor *h = x ? fc_rmsnorm(ctx, x, m->layers[0].attn_norm, "embd", eps) : NULL;
    for (int64_t l = 0; l < hp->n_layer && x; l++) {
        const fc_llm_layer *L = &m->layers[l];
        fc_tensor *qkv[3] = {NULL, NULL, NULL};
        if (h) ref_linear_n(ctx, h, (fc_tensor *const[]){L->wq, L->wk, L->wv}, 3, qkv);
        fc_tensor *q = fc_split_axis(ctx, qkv[0], "q", FC_SHAPE({"head", hp->n_head}, {"d", hp->head_dim}));
        fc_tensor *k = fc_split_axis(ctx, qkv[1], "kv", FC_SHAPE({"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        fc_tensor *v = fc_split_axis(ctx, qkv[2], "kv", FC_SHAPE({"kv_head", hp->n_head_kv}, {"d", hp->head_dim}));
        q = fc_rope(ctx, fc_rmsnorm(ctx, q, L->q_norm, "d", eps), pos, &ro);
        fc_rope_options rk = ro;
        rk.head_axis = "kv_head";
        k = fc_rope(ctx, fc_rmsnorm(ctx, k, L->k_norm, "d", eps), pos, &rk);
        fc_tensor *a = NULL;
        for (int64_t i = 0, row = 0; i < n_seg && q && k && v; row += segs[i].n, i++) {
            const fc_llm_seg *g = &segs[i];
            const int one = n_seg == 1;
            fc_tensor *qi = one ? q : fc_narrow(ctx, q, "seq", row, g->n);
            fc_tensor *ki = one ? k : fc_narrow(ctx, k, "seq", row, g->n);
            fc_tensor *vi = one ? v : fc_narrow(ctx, v, "seq", row, g->n);
            if (s->kv.type == FC_Q8_0 && g->n <= 4) {
                a = ref_kv_attend_q8(ctx, &s->kv, l, g->seq, qi, ki, vi, g->pos0, g->n, ao.scale);
            } else {
                fc_tensor *kall = ref_kv_put(ctx, &s->kv, l, g->seq, 0, ki, g->pos0, g->n);
                fc_tensor *vall = ref_kv_put(ctx, &s->kv, l, g->seq, 1, vi, g->pos0, g->n);
                fc_attention_options aoi = ao;
                aoi.q_pos0 = g->pos0;
                a = qi && kall && vall ? fc_attention(ctx, qi, kall, vall, &aoi) : NULL;
            }
            parts[i] = a;
        }
        if (n_seg > 1 && a) a = fc_concat(ctx, parts, (int)n_seg, "seq");
        a = fc_merge_axes(ctx, a, FC_AXES("head", "d"), "q");
        fc_tensor *o = fc_linear(ctx, a, L->wo, NULL);
        h = o ? fc_rmsnorm_residual(ctx, o, x, L->ffn_norm, "embd", eps, &x) : NULL;
        if (!h) x = NULL;
        fc_tensor *f = x ? ref_ffn(ctx, m, L, h) : NULL;
        if (!f) x = NULL;
        else if (l + 1 < hp->n_layer) {
            h = fc_rmsnorm_residual(ctx, f, x, m->layers[l + 1].attn_norm, "embd", eps, &x);
            if (!h) x = NULL;
        } else
            x = fc_add(ctx, x, f);
    }
    const int want = which != FC_LLM_LOGITS_NONE && logits;
    const int64_t n_out = which == FC_LLM_LOGITS_LAST ? 1 : N;
    if (x && want && n_out < N) x = fc_narrow(ctx, x, "seq", N - 1, 1);
    fc_tensor *out = x && want ? fc_linear(ctx, fc_rmsnorm(ctx, x, m->output_norm, "embd", eps), m->output, NULL) : x;
    if (out && want) out = fc_contiguous(ctx, fc_permute(ctx, out, FC_AXES("seq", "vocab")));
    if (!out) st = fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    else if (want) st = fc_tensor_read(ctx, out, logits, (size_t)n_out * (size_t)hp->n_vocab * sizeof(float));
    if (st == FC_OK)
        for (int64_t i = 0; i < n_seg; i++) s->pos[segs[i].seq] += segs[i].n;
    fc_scope_end(ctx, sc);
    return st;
}

/* fc_llm_session_eval_seq / decode_batch through the reference (valid input only). */
static fc_status ref_eval_seq(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *t, size_t n, fc_llm_logits which,
                              float *logits) {
    const fc_llm_seg g = {.seq = seq, .pos0 = s->pos[seq], .n = (int64_t)n};
    return ref_forward(ctx, s, &g, 1, t, which, logits);
}
static fc_status ref_decode_batch(fc_ctx *ctx, fc_llm_session *s, const fc_token *t, size_t n, float *logits) {
    fc_llm_seg g[64];
    for (size_t i = 0; i < n; i++) g[i] = (fc_llm_seg){.seq = (int64_t)i, .pos0 = s->pos[i], .n = 1};
    return ref_forward(ctx, s, g, (int64_t)n, t, FC_LLM_LOGITS_ALL, logits);
}

#endif
