/* SPDX-License-Identifier: MIT */
/* Fucina llm: the routing of a mixture of experts (qwen3moe, Mixtral); the
 * experts themselves run in src/llm/forward.c.
 *
 * llama.cpp's build_moe_ffn for QWEN3MOE and LLAMA (src/llama-graph.cpp:
 * softmax gating, no bias, no groups, norm_w true, no scale):
 *   p = softmax(h Wrouter)                 per token over the experts
 *   sel = the n_expert_used largest p, in descending order
 *   w_k = p[sel_k] / max(sum_k p[sel_k], 2^-14)
 *   y_k = down_e(silu(gate_e h) * up_e h) for e = sel_k
 *   out = ((y_0 w_0 + y_1 w_1) + y_2 w_2) + ...   (slot order, as ggml adds)
 * The routing is a few floats per token, done on the host. */
#include <math.h>
#include <string.h>

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

