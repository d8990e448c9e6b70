/* SPDX-License-Identifier: MIT */
/* Adam and AdamW (_single_tensor_adam / _single_tensor_adamw, PyTorch 1.13,
 * amsgrad off), one element at a time: every tensor op there is
 * elementwise. The kernels' own arithmetic is kept:
 *   add_(x, alpha)        self + alpha * x
 *   addcmul_(a, b, value) self + value * a * b    ((value * a) * b)
 *   addcdiv_(a, b, value) self + value * a / b    ((value * a) / b)
 * with scalars rounded to f32, and the bias corrections computed in double
 * as Python does (1 - beta ** step, lr / bc1, math.sqrt(bc2)). */
#include <math.h>

#include "train/optim_internal.h"

/* One element's update after the gradient has been formed (the part every
 * variant shares). */
static inline void adam_elem(float *restrict p, float *restrict m, float *restrict v, int64_t i, float gi, float b1,
                             float omb1, float b2, float omb2, float bc2_sqrt, float epsf, float neg_step_size)
{
    float mi = m[i] * b1;
    mi = mi + omb1 * gi;
    float vi = v[i] * b2;
    vi = vi + (omb2 * gi) * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / bc2_sqrt;
    denom = denom + epsf;
    p[i] = p[i] + (neg_step_size * mi) / denom;
}

void fco_adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                     int64_t step, double beta1, double beta2, double eps, double lr, double wd, int decoupled)
{
    const float b1 = (float)beta1, b2 = (float)beta2;
    const float omb1 = (float)(1.0 - beta1), omb2 = (float)(1.0 - beta2);
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const float neg_step_size = (float)-(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float epsf = (float)eps;
    const float wdf = (float)wd;
    /* AdamW: param.mul_(1 - lr * weight_decay), done even when it is 1. */
    const float decay = (float)(1.0 - lr * wd);
    const int l2 = !decoupled && wd != 0;
    /* Three branch-free loops, so the compiler vectorizes each. */
    if (decoupled) {
        for (int64_t i = 0; i < n; i++) {
            p[i] = p[i] * decay;
            adam_elem(p, m, v, i, g[i], b1, omb1, b2, omb2, bc2_sqrt, epsf, neg_step_size);
        }
    } else if (l2) {
        for (int64_t i = 0; i < n; i++) /* grad = grad.add(param, alpha=weight_decay) */
            adam_elem(p, m, v, i, g[i] + wdf * p[i], b1, omb1, b2, omb2, bc2_sqrt, epsf, neg_step_size);
    } else {
        for (int64_t i = 0; i < n; i++)
            adam_elem(p, m, v, i, g[i], b1, omb1, b2, omb2, bc2_sqrt, epsf, neg_step_size);
    }
}
