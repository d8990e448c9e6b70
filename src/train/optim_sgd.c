/* SPDX-License-Identifier: MIT */
/* torch.optim.SGD's update (_single_tensor_sgd, PyTorch 1.13), one element
 * at a time: every tensor op there is elementwise, so fusing them into one
 * loop changes no rounding. Each product and sum rounds to f32 (the build
 * has -ffp-contract=off), and the hyper-parameters are rounded to f32 where
 * PyTorch hands them to a kernel as scalars. */
#include "train/optim_internal.h"

void fco_sgd_update(float *p, const float *g, float *buf, int64_t n, const fco_hyper *hp, double lr, double wd,
                    int first)
{
    const float wdf = (float)wd;
    const float mom = (float)hp->momentum;
    const float damp1 = (float)(1.0 - hp->dampening); /* add_(d_p, alpha=1 - dampening) */
    const float neg_lr = (float)-lr;                   /* param.add_(d_p, alpha=-lr) */
    const int use_wd = wd != 0, use_mom = hp->momentum != 0, nesterov = hp->nesterov;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (use_wd) d = d + wdf * p[i]; /* d_p = d_p.add(param, alpha=weight_decay) */
        if (use_mom) {
            /* The buffer starts as a clone of d_p (no dampening on step 1). */
            if (first) buf[i] = d;
            else {
                float b = buf[i] * mom;
                buf[i] = b + damp1 * d;
            }
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] = p[i] + neg_lr * d;
    }
}
