/* Fucina llm: the decode step of a qwen3 (dense or qwen3moe) on raw rows:
 * one token of one sequence, or a lockstep batch of one token per sequence.
 *
 * Decode reads every weight once per token and is bound by memory; between
 * the matmuls the calling thread works alone. Through the tensor layer each
 * small step (a norm, a rope, a residual add, the cache store) is an op that
 * makes a tensor, takes a pool buffer and the context lock and checks named
 * axes: with caches cold from the weight stream, 3-5 us apiece, about 2 ms
 * of a 20 ms token on a 28-layer model. This path runs the same kernels, in
 * the same order and on the same values, on rows the session owns, so its
 * results are the tensor path's bits (the tests compare it with sessions
 * made with tensor_decode, which never take it).
 *
 * Taken for segments of one token each (fc_llm_decode_step_ok) of a qwen3 or
 * qwen3moe whose projections, experts, router and output are row-major
 * matrices (block-quantized, or f32/f16/bf16 for the float GEMM), whose norm
 * weights are f32 and whose KV cache is f16, f32 or q8_0; a batch of several
 * segments only for a dense model with block weights (up to
 * FC_LLM_STEP_MAX_ROWS). Anything else runs the tensor path (qwen3.c). The
 * forward records no gradients either way (inference sessions). */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/attention.h"
#include "exec/attention_q8.h"
#include "exec/ctx.h"
#include "exec/gemm.h"
#include "exec/qmatmul.h"
#include "exec/rope.h"
#include "exec/workers.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/model.h"
#include "llm/session.h"
#include "quant/quant.h"
#include "tensor/quant_tensor.h"

static int f32_row(const fc_tensor *t, int64_t n) {
    return t && fc_tensor_dtype(t) == FC_F32 && fc_tensor_rank(t) == 1 && fc_tensor_dim(t, 0) == n &&
           fc_tensor_is_contiguous(t);
}

/* a projection the step can run: block-quantized (fc_qmatmul) or f32/f16/
 * bf16 (the float GEMM), row-major [rows, cols] */
static int matrix(const fc_tensor *w, int64_t rows, int64_t cols) {
    if (!w || fc_tensor_rank(w) != 2 || fc_tensor_dim(w, 0) != rows || fc_tensor_dim(w, 1) != cols ||
        !fc_tensor_is_contiguous(w))
        return 0;
    const fc_dtype dt = fc_tensor_dtype(w);
    return fc_dtype_is_block(dt) || dt == FC_F32 || dt == FC_F16 || dt == FC_BF16;
}

/* the FFN of layer L as the step runs it: dense, or the experts of a
 * mixture (router and every expert's three matrices) */
static int ffn_ok(const fc_llm_hparams *hp, const fc_llm_layer *L) {
    const int64_t E = hp->n_embd;
    switch (hp->arch) {
    case FC_LLM_ARCH_QWEN3:
        return matrix(L->gate, hp->n_ff, E) && matrix(L->up, hp->n_ff, E) && matrix(L->down, E, hp->n_ff);
    case FC_LLM_ARCH_QWEN3MOE: {
        const int64_t NX = hp->n_expert, FX = hp->n_ff_exp;
        if (NX < 1 || hp->n_expert_used < 1 || hp->n_expert_used > NX || !matrix(L->gate_inp, NX, E) || !L->gate_e ||
            !L->up_e || !L->down_e)
            return 0;
        for (int64_t e = 0; e < NX; e++)
            if (!matrix(L->gate_e[e], FX, E) || !matrix(L->up_e[e], FX, E) || !matrix(L->down_e[e], E, FX)) return 0;
        return 1;
    }
    }
    return 0;
}

/* a weight a lockstep batch (several rows) can take: block-quantized, the
 * product fc_linear runs for it (fct_block_linear) */
static int batch_matrix(const fc_tensor *w, int64_t n_rows) { return n_rows == 1 || fc_dtype_is_block(fc_tensor_dtype(w)); }

int fc_llm_decode_step_ok(const fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    if (n_seg < 1 || n_seg > s->step_rows || !s->step) return 0;
    for (int64_t i = 0; i < n_seg; i++)
        if (segs[i].n != 1) return 0;
    /* several rows: a dense qwen3 with block weights (a mixture batches its
     * rows per expert; float weights take other GEMM shapes) */
    if (n_seg > 1) {
        switch (hp->arch) {
        case FC_LLM_ARCH_QWEN3: break;
        case FC_LLM_ARCH_QWEN3MOE: return 0;
        }
        if (!batch_matrix(m->output, n_seg)) return 0;
        for (int64_t l = 0; l < hp->n_layer; l++) {
            const fc_llm_layer *L = &m->layers[l];
            const fc_tensor *ws[] = {L->wq, L->wk, L->wv, L->wo, L->gate, L->up, L->down};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                if (!ws[i] || !batch_matrix(ws[i], n_seg)) return 0;
        }
    }
    if (s->kv.type != FC_F16 && s->kv.type != FC_F32 && s->kv.type != FC_Q8_0) return 0;
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    if (hp->n_rot < 2 || hp->n_rot % 2 || hp->n_rot > hp->head_dim) return 0;
    if (!f32_row(m->output_norm, E) || !matrix(m->output, hp->n_vocab, E)) return 0;
    for (int64_t l = 0; l < hp->n_layer; l++) {
        const fc_llm_layer *L = &m->layers[l];
        if (!f32_row(L->attn_norm, E) || !f32_row(L->ffn_norm, E) || !f32_row(L->q_norm, hp->head_dim) ||
            !f32_row(L->k_norm, hp->head_dim) || !matrix(L->wq, Q, E) || !matrix(L->wk, KV, E) ||
            !matrix(L->wv, KV, E) || !matrix(L->wo, E, Q) || !ffn_ok(hp, L))
            return 0;
    }
    return 1;
}

/* the FFN's hidden width: the dense n_ff or one expert's */
static int64_t ffn_width(const fc_llm_hparams *hp) {
    switch (hp->arch) {
    case FC_LLM_ARCH_QWEN3: return hp->n_ff;
    case FC_LLM_ARCH_QWEN3MOE: return hp->n_ff_exp;
    }
    return 0;
}

/* a mixture's extra rows: router logits and probabilities, the used
 * experts' weights and ids, and their weighted outputs (one row each) */
static int64_t moe_floats(const fc_llm_hparams *hp) {
    switch (hp->arch) {
    case FC_LLM_ARCH_QWEN3: return 0;
    case FC_LLM_ARCH_QWEN3MOE: return 2 * hp->n_expert + hp->n_expert_used * (2 + hp->n_embd);
    }
    return 0;
}

size_t fc_llm_decode_step_floats(const fc_llm_hparams *hp) {
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    /* x h o f | q qn attn | k kn v | gate up act | cos sin | moe */
    return (size_t)(4 * E + 3 * Q + 3 * KV + 3 * ffn_width(hp) + hp->n_rot + moe_floats(hp));
}

/* y[rows, w rows] = a[rows, cols] · wᵀ for n weights sharing a, as the
 * tensor path runs them. Several rows (a lockstep batch, block weights
 * only): each weight by fct_block_linear, fc_linear's own product. One row:
 * all block-quantized and more than one, one quantized product
 * (fc_llm_linear_n's fused route); otherwise each alone, a block weight by
 * fc_qmatmul and a float one by the GEMM with the arguments fc_linear's
 * contraction passes (A [1, cols] row-major, B = wᵀ: stride 1 along K,
 * cols along N) */
static int project(fc_ctx *ctx, const float *a, int64_t rows_a, int64_t cols, fc_tensor *const *w, float *const *y,
                   int n) {
    fc_workers *wk = fc_ctx_workers(ctx);
    if (rows_a > 1) {
        for (int i = 0; i < n; i++)
            if (!fct_block_linear(ctx, a, rows_a, cols, w[i], fc_tensor_dim(w[i], 0), y[i])) return -1;
        return 0;
    }
    fc_qmatmul_args g[3];
    int all_block = 1;
    for (int i = 0; i < n; i++) {
        const fc_dtype dt = fc_tensor_dtype(w[i]);
        const int64_t rows = fc_tensor_dim(w[i], 0);
        all_block &= fc_dtype_is_block(dt);
        if (fc_dtype_is_block(dt))
            g[i] = (fc_qmatmul_args){.m = 1, .n = rows, .k = cols, .a = a, .lda = cols, .w = fc_tensor_data(w[i]),
                                     .wtype = (uint32_t)fc_dtype_ggml_type(dt),
                                     .w_row_bytes = fc_dtype_row_bytes(dt, cols), .c = y[i], .ldc = rows};
    }
    if (all_block && n > 1) return fc_qmatmul_multi(wk, g, n);
    for (int i = 0; i < n; i++) {
        const fc_dtype dt = fc_tensor_dtype(w[i]);
        if (fc_dtype_is_block(dt)) {
            if (fc_qmatmul(wk, &g[i]) != 0) return -1;
            continue;
        }
        const int64_t rows = fc_tensor_dim(w[i], 0);
        const fc_gemm_args f = {.m = 1, .n = rows, .k = cols, .a = a, .rsa = cols, .csa = 1, .b = fc_tensor_data(w[i]),
                                .btype = dt == FC_F16 ? FC_GEMM_B_F16 : dt == FC_BF16 ? FC_GEMM_B_BF16 : FC_GEMM_B_F32,
                                .rsb = 1, .csb = cols, .c = y[i], .ldc = rows, .accumulate = 0};
        if (fc_gemm_f32(wk, &f) != 0) return -1;
    }
    return 0;
}

/* The mixture-of-experts FFN of one token (fc_llm_moe_ffn for one row):
 * the router as fc_linear, the same routing, each used expert's gate/up
 * (one quantized product: fc_llm_linear_n's bits), swiglu and down into its
 * slot's row, weighted by one multiply, then the slots summed in order. f =
 * the result; scratch: gt/up/act (n_ff_exp each) and mx (moe_floats). */
static int moe_ffn(const fck_table *K, fc_ctx *ctx, const fc_llm_hparams *hp, const fc_llm_layer *L,
                   const float *h, float *f, float *gt, float *up, float *act, float *mx) {
    const int64_t E = hp->n_embd, NX = hp->n_expert, KU = hp->n_expert_used, FX = hp->n_ff_exp;
    float *lg = mx, *probs = lg + NX, *w = probs + NX, *acc = w + KU;
    int32_t *sel = (int32_t *)(acc + KU * E);
    if (project(ctx, h, 1, E, (fc_tensor *const[]){L->gate_inp}, (float *const[]){lg}, 1) != 0) return -1;
    fc_llm_moe_route(lg, NX, KU, probs, sel, w);
    for (int64_t k = 0; k < KU; k++) {
        const int64_t e = sel[k];
        float *y = acc + k * E;
        if (project(ctx, h, 1, E, (fc_tensor *const[]){L->gate_e[e], L->up_e[e]}, (float *const[]){gt, up}, 2) != 0)
            return -1;
        K->f32_swiglu((size_t)FX, gt, up, act);
        if (project(ctx, act, 1, FX, (fc_tensor *const[]){L->down_e[e]}, (float *const[]){y}, 1) != 0) return -1;
        for (int64_t j = 0; j < E; j++) y[j] = y[j] * w[k];
    }
    memcpy(f, acc, (size_t)E * sizeof(float));
    for (int64_t k = 1; k < KU; k++)
        for (int64_t j = 0; j < E; j++) f[j] += acc[k * E + j];
    return 0;
}

/* per-head RMSNorm then RoPE of n_heads rows of hd (as fc_rmsnorm over "d"
 * then fc_rope's direct path): x -> xn -> rotated in place */
static int norm_rope(const fck_table *K, fc_workers *wk, const float *x, float *xn, int64_t n_heads, int64_t hd,
                     const fc_tensor *w, float eps, int64_t n_rot, const float *cs, const float *sn) {
    for (int64_t h = 0; h < n_heads; h++) K->f32_rmsnorm((size_t)hd, x + h * hd, fc_tensor_data(w), eps, xn + h * hd);
    fc_rope_apply_args a;
    memset(&a, 0, sizeof a);
    a.n_tok = 1;
    a.n_head = n_heads;
    a.head_dim = hd;
    a.n_rot = n_rot;
    a.mode = FC_ROPE_NEOX;
    a.cos_tab = cs;
    a.sin_tab = sn;
    a.cs_ts = n_rot / 2;
    a.x = xn;
    a.x_ts = n_heads * hd;
    a.x_hs = hd;
    a.y = xn;
    a.y_ts = n_heads * hd;
    a.y_hs = hd;
    return fc_rope_apply_f32(wk, &a);
}

/* row pos of (layer, seq)'s K or V cache := r (f16: rounded once, as
 * fc_copy_into; q8_0: the blocks kv_cache.c's store encodes) */
static void cache_store(const fck_table *K, fc_llm_kv *kv, int64_t layer, int64_t seq, int is_v, const float *r,
                        int64_t pos) {
    const int64_t i = layer * kv->n_seq + seq, row = kv->n_kv_head * kv->head_dim;
    if (kv->type == FC_Q8_0) {
        fcq_encode_q8_0(r, (is_v ? kv->qv[i] : kv->qk[i]) + (size_t)pos * kv->row_bytes, (size_t)row);
        return;
    }
    fc_tensor *c = is_v ? kv->v[i] : kv->k[i];
    if (kv->type == FC_F16) K->f32_to_f16((size_t)row, r, (fc_f16 *)fc_tensor_data(c) + pos * row);
    else memcpy((float *)fc_tensor_data(c) + pos * row, r, (size_t)row * sizeof(float));
    fc_storage_touch(c->storage);
}

/* Attention of the query row q [n_head, d] over positions 0..pos of cache
 * i into o, with the arguments the tensor path builds: a q8_0 cache read in
 * place (fc_llm_kv_attend_q8's), an f16/f32 one through fc_attention_f32
 * (fc_attention's, for the cache views). 0, -1 (no memory) or -2. */
static int attend(fc_ctx *ctx, fc_workers *wk, const fc_llm_kv *kv, int64_t i, const float *q, int64_t n_head,
                  int64_t pos, float *o) {
    const int64_t d = kv->head_dim, nkv = kv->n_kv_head;
    const float scale = (float)(1.0 / sqrt((double)d));
    if (kv->type == FC_Q8_0) {
        const fc_attn_q8_args a = {
            .n_q = 1, .n_kv = pos + 1, .n_rows = kv->n_rows, .n_head = n_head, .n_kv_head = nkv, .head_dim = d,
            .q = q, .q_ts = n_head * d, .q_hs = d,
            .k = kv->qk[i], .v = kv->qv[i], .row_bytes = kv->row_bytes,
            .o = o, .o_ts = n_head * d, .o_hs = d,
            .scale = scale, .q_pos0 = pos, .scratch = kv->scores};
        return fc_attention_q8_0(wk, &a) != 0 ? -2 : 0;
    }
    fc_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_q = 1;
    a.n_kv = pos + 1;
    a.n_head = n_head;
    a.n_kv_head = nkv;
    a.head_dim = d;
    a.head_dim_v = d;
    a.q = q;
    a.q_ts = n_head * d;
    a.q_hs = d;
    a.kv_type = kv->type == FC_F16 ? FC_ATTN_KV_F16 : FC_ATTN_KV_F32;
    a.k = fc_tensor_data(kv->k[i]);
    a.k_ts = nkv * d;
    a.k_hs = d;
    a.v = fc_tensor_data(kv->v[i]);
    a.v_ts = nkv * d;
    a.v_hs = d;
    a.o = o;
    a.o_ts = n_head * d;
    a.o_hs = d;
    a.scale = scale;
    a.causal = 1;
    a.q_pos0 = pos;
    a.ws = fc_ctx_attn_workspace_acquire(ctx);
    const int rc = fc_attention_f32(wk, &a);
    fc_ctx_attn_workspace_release(ctx, a.ws);
    return rc == -1 ? -1 : rc != 0 ? -2 : 0;
}

fc_status fc_llm_decode_step(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                             const float *x0, fc_llm_logits which, float *logits) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    const fck_table *K = fck_kernels();
    fc_workers *wk = fc_ctx_workers(ctx);
    const int64_t E = hp->n_embd, hd = hp->head_dim, NH = hp->n_head, NKV = hp->n_head_kv, F = ffn_width(hp);
    const int64_t Q = NH * hd, KV = NKV * hd, N = n_seg, R = hp->n_rot / 2;
    const float eps = (float)hp->rms_eps;
    /* one row per segment (token) of each: [N, width] */
    float *x = s->step, *h = x + N * E, *o = h + N * E, *f = o + N * E;
    float *q = f + N * E, *qn = q + N * Q, *att = qn + N * Q;
    float *k = att + N * Q, *kn = k + N * KV, *v = kn + N * KV;
    float *gt = v + N * KV, *up = gt + N * F, *act = up + N * F;
    float *cs = act + N * F, *sn = cs + N * R, *mx = sn + N * R;
    const char *oom = "fc_llm_forward: out of memory for the projections' scratch";

    /* each position's cos/sin tables, as fc_rope builds them */
    fc_rope_params rp;
    fc_rope_params_default(&rp, hp->n_rot);
    rp.theta_base = (float)hp->rope_theta;
    for (int64_t r = 0; r < N; r++)
        if (fc_rope_cache_f32(&rp, &segs[r].pos0, 1, cs + r * R, sn + r * R, R) != 0) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: rope base %g rejected", hp->rope_theta);
            return FC_ERR_INVALID_ARG;
        }
    memcpy(x, x0, (size_t)(N * E) * sizeof(float));
    for (int64_t r = 0; r < N; r++)
        K->f32_rmsnorm((size_t)E, x + r * E, fc_tensor_data(m->layers[0].attn_norm), eps, h + r * E);
    for (int64_t l = 0; l < hp->n_layer; l++) {
        const fc_llm_layer *L = &m->layers[l];
        if (project(ctx, h, N, E, (fc_tensor *const[]){L->wq, L->wk, L->wv}, (float *const[]){q, k, v}, 3) != 0)
            goto nomem;
        fc_llm_prefetch(ctx, L->wo); /* over the norms, rope and attention */
        for (int64_t r = 0; r < N; r++) {
            const fc_llm_seg *g = &segs[r];
            if (norm_rope(K, wk, q + r * Q, qn + r * Q, NH, hd, L->q_norm, eps, hp->n_rot, cs + r * R, sn + r * R) != 0 ||
                norm_rope(K, wk, k + r * KV, kn + r * KV, NKV, hd, L->k_norm, eps, hp->n_rot, cs + r * R, sn + r * R) !=
                    0) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: the rotation was rejected (layer %lld)", (long long)l);
                return FC_ERR_INVALID_ARG;
            }
            cache_store(K, &s->kv, l, g->seq, 0, kn + r * KV, g->pos0);
            cache_store(K, &s->kv, l, g->seq, 1, v + r * KV, g->pos0);
            /* attention over rows 0..pos of the segment's cache: -1 no memory, -2 rejected */
            const int rc = attend(ctx, wk, &s->kv, l * s->kv.n_seq + g->seq, qn + r * Q, NH, g->pos0, att + r * Q);
            if (rc == -1) goto nomem;
            if (rc != 0) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: the attention kernel rejected layer %lld", (long long)l);
                return FC_ERR_INVALID_ARG;
            }
        }
        if (project(ctx, att, N, Q, (fc_tensor *const[]){L->wo}, (float *const[]){o}, 1) != 0) goto nomem;
        fc_llm_ffn_prefetch(ctx, m, L);
        for (int64_t r = 0; r < N; r++) { /* fc_rmsnorm_residual(o, x): s = o + x, then the norm of s */
            K->f32_add((size_t)E, o + r * E, x + r * E, x + r * E);
            K->f32_rmsnorm((size_t)E, x + r * E, fc_tensor_data(L->ffn_norm), eps, h + r * E);
        }
        switch (hp->arch) {
        case FC_LLM_ARCH_QWEN3:
            if (project(ctx, h, N, E, (fc_tensor *const[]){L->gate, L->up}, (float *const[]){gt, up}, 2) != 0)
                goto nomem;
            fc_llm_prefetch(ctx, L->down); /* over the swiglu */
            K->f32_swiglu((size_t)(N * F), gt, up, act);
            if (project(ctx, act, N, F, (fc_tensor *const[]){L->down}, (float *const[]){f}, 1) != 0) goto nomem;
            break;
        case FC_LLM_ARCH_QWEN3MOE: /* one row (fc_llm_decode_step_ok) */
            if (moe_ffn(K, ctx, hp, L, h, f, gt, up, act, mx) != 0) goto nomem;
            break;
        }
        fc_llm_prefetch(ctx, l + 1 < hp->n_layer ? m->layers[l + 1].wq : m->output);
        for (int64_t r = 0; r < N; r++) {
            if (l + 1 < hp->n_layer) {
                K->f32_add((size_t)E, f + r * E, x + r * E, x + r * E);
                K->f32_rmsnorm((size_t)E, x + r * E, fc_tensor_data(m->layers[l + 1].attn_norm), eps, h + r * E);
            } else {
                K->f32_add((size_t)E, x + r * E, f + r * E, x + r * E); /* fc_add(x, f) */
            }
        }
    }
    if (which != FC_LLM_LOGITS_NONE && logits) {
        /* LAST: the last row (one segment); ALL: every row (a batch) */
        const int64_t n_out = which == FC_LLM_LOGITS_LAST ? 1 : N, r0 = N - n_out;
        for (int64_t r = r0; r < N; r++)
            K->f32_rmsnorm((size_t)E, x + r * E, fc_tensor_data(m->output_norm), eps, h + r * E);
        if (project(ctx, h + r0 * E, n_out, E, (fc_tensor *const[]){m->output}, (float *const[]){logits}, 1) != 0)
            goto nomem;
    }
    for (int64_t r = 0; r < N; r++) s->pos[segs[r].seq] += 1;
    return FC_OK;
nomem:
    fc_fail(ctx, FC_ERR_OOM, "%s", oom);
    return FC_ERR_OOM;
}
