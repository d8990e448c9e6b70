/* SPDX-License-Identifier: MIT */
/* Learning-rate schedules as closed forms of the step (the formulas of
 * torch.optim.lr_scheduler's LinearLR / LambdaLR, CosineAnnealingLR and
 * StepLR), so a resumed run needs only the step count. */
#include <math.h>
#include <stdio.h>

#include "fucina/optim.h"
#include "tensor/internal.h"

/* The first problem with s, written into why; NULL when there is none. */
static const char *schedule_problem(const fc_lr_schedule *s, char *why, size_t len)
{
    int warm = 0, cosine = 0, step = 0, known = 0;
    switch (s->kind) {
    case FC_LR_CONSTANT: known = 1; break;
    case FC_LR_WARMUP: known = warm = 1; break;
    case FC_LR_COSINE: known = cosine = 1; break;
    case FC_LR_STEP: known = step = 1; break;
    case FC_LR_WARMUP_COSINE: known = warm = cosine = 1; break;
    }
    if (!known) {
        snprintf(why, len, "kind = %d is not an fc_lr_kind", (int)s->kind);
        return why;
    }
    if (!isfinite(s->lr) || s->lr < 0) {
        snprintf(why, len, "lr = %g: must be finite and >= 0", s->lr);
        return why;
    }
    if (warm && s->warmup_steps <= 0) {
        snprintf(why, len, "warmup_steps = %lld: must be > 0", (long long)s->warmup_steps);
        return why;
    }
    if (warm && !(s->warmup_start >= 0 && s->warmup_start <= 1)) {
        snprintf(why, len, "warmup_start = %g: must be in [0, 1]", s->warmup_start);
        return why;
    }
    if (cosine) {
        int64_t min_total = warm ? s->warmup_steps + 1 : 1;
        if (s->total_steps < min_total) {
            snprintf(why, len, "total_steps = %lld: must be >= %lld%s", (long long)s->total_steps, (long long)min_total,
                     warm ? " (more than warmup_steps)" : "");
            return why;
        }
        if (!(s->min_lr >= 0 && s->min_lr <= s->lr)) {
            snprintf(why, len, "min_lr = %g: must be in [0, lr = %g]", s->min_lr, s->lr);
            return why;
        }
    }
    if (step && s->step_size <= 0) {
        snprintf(why, len, "step_size = %lld: must be > 0", (long long)s->step_size);
        return why;
    }
    if (step && !(isfinite(s->gamma) && s->gamma >= 0)) {
        snprintf(why, len, "gamma = %g: must be finite and > 0 (0: 0.1)", s->gamma);
        return why;
    }
    return NULL;
}

fc_status fc_lr_schedule_check(fc_ctx *ctx, const fc_lr_schedule *s)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    char why[160];
    const char *p = s ? schedule_problem(s, why, sizeof why) : "s is NULL";
    if (!p) return FC_OK;
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lr_schedule_check: %s", p);
    return FC_ERR_INVALID_ARG;
}

/* CosineAnnealingLR's closed form, held at min_lr from T on. pi is
 * Python's math.pi (M_PI is not ISO C). */
static double cosine(double lr, double min_lr, int64_t t, int64_t T)
{
    const double pi = 3.141592653589793;
    if (t > T) t = T;
    return min_lr + (lr - min_lr) * (1 + cos(pi * (double)t / (double)T)) / 2;
}

/* LinearLR's closed form: lr (start + (1 - start) min(step, W) / W). */
static double warmup(double lr, double start, int64_t step, int64_t W)
{
    return lr * (start + (1 - start) * (double)step / (double)W);
}

double fc_lr_at(const fc_lr_schedule *s, int64_t step)
{
    char why[160];
    if (!s || step < 0 || schedule_problem(s, why, sizeof why)) return NAN;
    switch (s->kind) {
    case FC_LR_CONSTANT: return s->lr;
    case FC_LR_WARMUP:
        return step < s->warmup_steps ? warmup(s->lr, s->warmup_start, step, s->warmup_steps) : s->lr;
    case FC_LR_COSINE: return cosine(s->lr, s->min_lr, step, s->total_steps);
    case FC_LR_STEP: {
        double gamma = s->gamma == 0 ? 0.1 : s->gamma;
        return s->lr * pow(gamma, (double)(step / s->step_size));
    }
    case FC_LR_WARMUP_COSINE:
        if (step < s->warmup_steps) return warmup(s->lr, s->warmup_start, step, s->warmup_steps);
        return cosine(s->lr, s->min_lr, step - s->warmup_steps, s->total_steps - s->warmup_steps);
    }
    return NAN;
}
