/* SPDX-License-Identifier: MIT */
/* Muon's update of a 2-D parameter (Keller Jordan's reference algorithm,
 * with the Newton-Schulz iteration in f32 instead of bf16; see
 * tests/goldens/gen_optim_goldens.py for the transcription the tests
 * compare with):
 *
 *   buf = lerp(buf, g, 1 - momentum);  u = nesterov ? lerp(g, buf, momentum) : buf
 *   X = u / (|u|_F + 1e-7), X = X^T when rows > cols
 *   ns_steps times: A = X X^T;  B = b A + (c A) A;  X = a X + B X
 *   p *= 1 - lr wd;  p -= lr sqrt(max(1, rows / cols)) X
 *
 * The products are fc_einsum calls over named axes, so no transpose is
 * materialised: X keeps the parameter's layout [r, c], and "the smaller
 * side" is just which axis the Gram matrix A keeps. fc_einsum's results do
 * not depend on the thread count, and the elementwise parts are plain loops,
 * so neither does the update. The new buffer and the parameter are written
 * only once everything has been computed: a failure leaves both as they
 * were. */
#include <math.h>
#include <string.h>

#include "fucina/ops.h"
#include "tensor/internal.h"
#include "train/optim_internal.h"

/* torch.lerp with a scalar weight (ATen's Lerp.h): two formulas, picked by
 * |weight| < 0.5 for accuracy, in f32. */
static inline float lerp_f32(float self, float end, float weight)
{
    return fabsf(weight) < 0.5f ? self + weight * (end - self) : end - (end - self) * (1.0f - weight);
}

fc_status fco_muon_update(fc_ctx *ctx, float *p, const float *g, float *buf, int64_t rows, int64_t cols,
                          const fco_hyper *hp, double lr, double wd)
{
    const int64_t n = rows * cols;
    fc_tensor *x = fc_empty(ctx, FC_F32, FC_SHAPE({"r", rows}, {"c", cols}));
    fc_tensor *nb = fc_empty(ctx, FC_F32, FC_SHAPE({"r", rows}, {"c", cols}));
    if (!x || !nb) return fc_ctx_status(ctx);
    float *xd = fc_tensor_data(x), *bd = fc_tensor_data(nb);
    const float w_buf = (float)(1.0 - hp->momentum); /* momentum.lerp_(grad, 1 - beta) */
    const float w_nes = (float)hp->momentum;         /* grad.lerp_(momentum, beta) */
    for (int64_t i = 0; i < n; i++) {
        bd[i] = lerp_f32(buf[i], g[i], w_buf);
        xd[i] = hp->nesterov ? lerp_f32(g[i], bd[i], w_nes) : bd[i];
    }
    /* X / (X.norm() + 1e-7): the norm summed in double in element order
     * (PyTorch's f32 reduction differs by an ulp at most), then f32. */
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)xd[i] * (double)xd[i];
    const float den = (float)sqrt(ss) + 1e-7f;
    for (int64_t i = 0; i < n; i++) xd[i] = xd[i] / den;

    const double a = 3.4445, b = -4.7750, c = 2.0315;
    const char *small = rows <= cols ? "r" : "c";
    const char *const xo[2] = {"r", "c"};
    const char *const gram[2] = {small, "t"};
    for (int k = 0; k < hp->ns_steps && x; k++) {
        /* A[s, t] = sum over the long side of X[s, .] X[t, .]. */
        fc_tensor *xt = fc_rename(ctx, x, small, "t");
        fc_tensor *A = fc_einsum(ctx, x, xt, gram, 2);
        /* (c A) A, as the reference's `c * A @ A` groups it. */
        fc_tensor *cA = fc_rename(ctx, fc_mul_scalar(ctx, A, c), "t", "u");
        fc_tensor *AA = fc_einsum(ctx, cA, fc_rename(ctx, A, small, "u"), gram, 2);
        fc_tensor *B = fc_add(ctx, fc_mul_scalar(ctx, A, b), AA);
        /* (B X)[s, l] = sum_t B[s, t] X[t, l], laid out as X. */
        fc_tensor *BX = fc_einsum(ctx, B, xt, xo, 2);
        x = fc_add(ctx, fc_mul_scalar(ctx, x, a), BX);
    }
    if (!x) return fc_ctx_status(ctx);
    if (!fc_tensor_is_contiguous(x)) x = fc_contiguous(ctx, x);
    if (!x) return fc_ctx_status(ctx);
    xd = fc_tensor_data(x);

    /* update *= max(1, rows / cols) ** 0.5; p.mul_(1 - lr * wd);
     * p.add_(update, alpha=-lr). */
    const float scale = (float)sqrt(fmax(1.0, (double)rows / (double)cols));
    const float decay = (float)(1.0 - lr * wd);
    const float neg_lr = (float)-lr;
    memcpy(buf, bd, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float u = xd[i] * scale;
        float q = p[i] * decay;
        p[i] = q + neg_lr * u;
    }
    return FC_OK;
}
