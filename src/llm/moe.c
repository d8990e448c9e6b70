/* Fucina llm: the qwen3moe feed-forward block (a routed mixture of experts).
 *
 * llama.cpp's build_moe_ffn for QWEN3MOE (src/llama-graph.cpp: softmax
 * gating, no bias, no groups, norm_w true, no scale):
 *   p = softmax(h Wrouter)                 per token over the experts
 *   sel = the n_expert_used largest p, in descending order
 *   w_k = p[sel_k] / max(sum_k p[sel_k], 2^-14)
 *   y_k = down_e(silu(gate_e h) * up_e h) for e = sel_k
 *   out = ((y_0 w_0 + y_1 w_1) + y_2 w_2) + ...   (slot order, as ggml adds)
 * The routing is a few floats per token, done on the host. The experts run
 * batched per expert instead of per token: the rows routed to expert e are
 * gathered into one [c, embd] matrix and go through one fc_linear per
 * weight (the quantized matmul for block weights, the float GEMM
 * otherwise), so a prefill reads each used expert's weights once. The
 * results are scattered back per (token, slot), weighted, and summed in
 * slot order. All scratch is scoped pool tensors (no malloc per call), so a
 * steady-state decode step allocates nothing of its own. */
#include <math.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/model.h"

/* Softmax over n logits as ggml_soft_max_f32 does it (max subtracted, the
 * sum accumulated in double, one scale by 1/sum). */
static void softmax_row(const float *x, float *p, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        p[i] = expf(x[i] - mx);
        sum += (double)p[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) p[i] *= inv;
}

/* The k largest of p[0..n) in descending order (ties: lower index first). */
static void top_k(const float *p, int64_t n, int64_t k, int32_t *sel) {
    for (int64_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int64_t i = 0; i < n; i++) {
            int taken = 0;
            for (int64_t q = 0; q < j && !taken; q++) taken = sel[q] == (int32_t)i;
            if (!taken && (best < 0 || p[i] > p[best])) best = (int32_t)i;
        }
        sel[j] = best;
    }
}

void fc_llm_moe_route(const float *logits, int64_t n_expert, int64_t k, float *probs, int32_t *sel, float *w) {
    softmax_row(logits, probs, n_expert);
    top_k(probs, n_expert, k, sel);
    double sum = 0; /* ggml_sum_rows accumulates in ggml_float (double) */
    for (int64_t j = 0; j < k; j++) {
        w[j] = probs[sel[j]];
        sum += (double)w[j];
    }
    float s = (float)sum;
    if (!(s >= 6.103515625e-5f)) s = 6.103515625e-5f; /* ggml_clamp(sum, 2^-14, inf) */
    for (int64_t j = 0; j < k; j++) w[j] /= s;
}

/* An f32 / i32 scratch tensor of n elements in the current scope: buffer
 * pool memory, so a steady-state decode step allocates nothing. */
static void *scratch(fc_ctx *ctx, fc_dtype dt, int64_t n) {
    fc_tensor *t = fc_empty(ctx, dt, FC_SHAPE({"n", n > 0 ? n : 1}));
    return t ? fc_tensor_data(t) : NULL;
}

fc_tensor *fc_llm_moe_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h) {
    if (!h) return NULL;
    const fc_llm_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NX = hp->n_expert, K = hp->n_expert_used;
    if (fc_tensor_rank(h) != 2 || strcmp(fc_tensor_axis(h, 1), "embd") || fc_tensor_dim(h, 1) != E ||
        fc_tensor_dtype(h) != FC_F32)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_llm_moe_ffn: expected f32 [rows, embd=%lld]", (long long)E);
    const char *row_axis = fc_tensor_axis(h, 0);
    const int64_t T = fc_tensor_dim(h, 0);
    /* the result lives in the caller's scope; everything else in ours */
    fc_tensor *out = fc_empty(ctx, FC_F32, FC_SHAPE({row_axis, T}, {"embd", E}));
    if (!out) return NULL;
    float *o = fc_tensor_data(out);
    fc_scope sc = fc_scope_begin(ctx);
    fc_status st = FC_ERR_OOM;
    fc_tensor *hc = fc_contiguous(ctx, h);
    fc_tensor *lg = hc ? fc_linear(ctx, hc, L->gate_inp, NULL) : NULL; /* [rows, expert] */
    const char *lg_order[2] = {row_axis, "expert"};
    lg = lg ? fc_contiguous(ctx, fc_permute(ctx, lg, lg_order, 2)) : NULL;
    float *probs = scratch(ctx, FC_F32, NX), *w = scratch(ctx, FC_F32, T * K);
    float *gath = scratch(ctx, FC_F32, T * E), *acc = scratch(ctx, FC_F32, T * K * E);
    int32_t *sel_all = scratch(ctx, FC_I32, T * K), *rows = scratch(ctx, FC_I32, T * K);
    if (!lg || !probs || !w || !gath || !acc || !sel_all || !rows) goto done;
    const float *x = fc_tensor_data(hc), *logits = fc_tensor_data(lg);

    for (int64_t t = 0; t < T; t++) fc_llm_moe_route(logits + t * NX, NX, K, probs, sel_all + t * K, w + t * K);

    /* experts, one batch each */
    for (int64_t e = 0; e < NX; e++) {
        int64_t c = 0;
        for (int64_t i = 0; i < T * K; i++)
            if (sel_all[i] == (int32_t)e) rows[c++] = (int32_t)i; /* (token, slot) = (i / K, i % K) */
        if (!c) continue;
        for (int64_t r = 0; r < c; r++) memcpy(gath + r * E, x + (rows[r] / K) * E, (size_t)E * sizeof(float));
        fc_scope se = fc_scope_begin(ctx);
        fc_tensor *xe = fc_from_data(ctx, FC_F32, FC_SHAPE({row_axis, c}, {"embd", E}), gath,
                                     (size_t)(c * E) * sizeof(float));
        fc_tensor *g = fc_linear(ctx, xe, L->gate_e[e], NULL), *u = fc_linear(ctx, xe, L->up_e[e], NULL);
        fc_tensor *y = fc_linear(ctx, fc_swiglu(ctx, g, u), L->down_e[e], NULL); /* [rows, embd] */
        const char *y_order[2] = {row_axis, "embd"};
        y = y ? fc_contiguous(ctx, fc_permute(ctx, y, y_order, 2)) : NULL;
        if (y) {
            const float *yd = fc_tensor_data(y);
            for (int64_t r = 0; r < c; r++) {
                const int64_t i = rows[r];
                const float wk = w[i];
                float *dst = acc + i * E;
                const float *src = yd + r * E;
                for (int64_t j = 0; j < E; j++) dst[j] = src[j] * wk;
            }
        }
        fc_scope_end(ctx, se);
        if (!y) goto done;
    }

    /* the slots summed in order, as ggml adds them */
    for (int64_t t = 0; t < T; t++) {
        float *ot = o + t * E;
        memcpy(ot, acc + (t * K) * E, (size_t)E * sizeof(float));
        for (int64_t k = 1; k < K; k++) {
            const float *src = acc + (t * K + k) * E;
            for (int64_t j = 0; j < E; j++) ot[j] += src[j];
        }
    }
    st = FC_OK;
done:
    if (st != FC_OK && fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, FC_ERR_OOM, "fc_llm_moe_ffn: out of memory");
    fc_scope_end(ctx, sc);
    if (st != FC_OK) {
        fc_discard(ctx, out);
        return NULL;
    }
    return out;
}
