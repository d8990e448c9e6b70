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
 * The products are strided GEMM calls (exec/gemm.h), so no transpose is
 * materialised: X keeps the parameter's layout [r, c], and "the smaller
 * side" s is just which way the Gram matrix A = X X^T (or X^T X) is read;
 * B X is written in X's layout directly (X B^T when s is the columns). The
 * GEMM's results do not depend on the thread count, and the elementwise
 * parts are plain loops, so neither does the update. The new buffer and the
 * parameter are written only once everything has been computed: a failure
 * leaves both as they were. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "exec/gemm.h"
#include "tensor/internal.h"
#include "train/optim_internal.h"

/* torch.lerp with a scalar weight (ATen's Lerp.h): two formulas, picked by
 * |weight| < 0.5 for accuracy, in f32. */
static inline float lerp_f32(float self, float end, float weight)
{
    return fabsf(weight) < 0.5f ? self + weight * (end - self) : end - (end - self) * (1.0f - weight);
}

/* C[m, n] = A · B over element strides (exec/gemm.h's convention). */
static int gemm(fc_workers *w, int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                const float *b, int64_t rsb, int64_t csb, float *c)
{
    const fc_gemm_args g = {.m = m, .n = n, .k = k, .a = a, .rsa = rsa, .csa = csa, .b = b,
                            .btype = FC_GEMM_B_F32, .rsb = rsb, .csb = csb, .c = c, .ldc = n};
    return fc_gemm_f32(w, &g);
}

fc_status fco_muon_update(fc_ctx *ctx, float *p, const float *g, float *buf, int64_t rows, int64_t cols,
                          const fco_hyper *hp, double lr, double wd)
{
    const int64_t n = rows * cols;
    /* s: the smaller side (the Gram matrix is [s, s]), l: the longer one */
    const int wide = rows <= cols;
    const int64_t sz = wide ? rows : cols, l = wide ? cols : rows;
    float *mem = malloc((size_t)(3 * n + 3 * sz * sz) * sizeof(float));
    if (!mem) {
        fc_fail(ctx, FC_ERR_OOM, "fc_optim_step: out of memory for Muon's Newton-Schulz scratch");
        return fc_ctx_status(ctx);
    }
    float *xd = mem, *bd = xd + n, *bx = bd + n, *A = bx + n, *AA = A + sz * sz, *B = AA + sz * sz;
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

    const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
    /* X[s, l] of the small-side-first view: element (i, k) at i * xs + k * xl */
    const int64_t xs = wide ? cols : 1, xl = wide ? 1 : cols;
    fc_workers *w = fc_ctx_workers(ctx);
    int rc = 0;
    for (int k = 0; k < hp->ns_steps && rc == 0; k++) {
        /* A[s, t] = sum over the long side of X[s, .] X[t, .] */
        rc = gemm(w, sz, sz, l, xd, xs, xl, xd, xl, xs, A);
        /* B = b A + (c A) A, as the reference's `b * A + c * A @ A` groups it */
        for (int64_t i = 0; i < sz * sz; i++) B[i] = c * A[i];
        if (rc == 0) rc = gemm(w, sz, sz, sz, B, sz, 1, A, sz, 1, AA);
        for (int64_t i = 0; i < sz * sz; i++) B[i] = b * A[i] + AA[i];
        /* (B X)[s, l], stored in X's own layout */
        if (rc == 0 && wide) rc = gemm(w, sz, l, sz, B, sz, 1, xd, cols, 1, bx);
        else if (rc == 0) rc = gemm(w, l, sz, sz, xd, cols, 1, B, 1, sz, bx);
        for (int64_t i = 0; i < n && rc == 0; i++) xd[i] = a * xd[i] + bx[i];
    }
    if (rc != 0) {
        free(mem);
        fc_fail(ctx, FC_ERR_OOM, "fc_optim_step: out of memory for Muon's products");
        return fc_ctx_status(ctx);
    }

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
    free(mem);
    return FC_OK;
}
