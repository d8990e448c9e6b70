/* SPDX-License-Identifier: MIT */
/* Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_),
 * written into the live gradients that fc_grad returns. Norms are summed
 * on one thread in element order, parameters in the order given, so the
 * result does not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "fucina/autograd.h"
#include "fucina/ops.h"
#include "tensor/internal.h"
#include "train/optim_internal.h"

static int check_params(fc_ctx *ctx, const char *fn, fc_tensor *const *params, int n)
{
    if (n < 0 || (n > 0 && !params)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n = %d with params %s", fn, n, params ? "given" : "NULL");
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (!params[i]) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: params[%d] is NULL", fn, i);
            return 0;
        }
    return 1;
}

/* sqrt(sum g^2), summed in double in element order. */
static double norm_of(fc_ctx *ctx, fc_tensor *g, int *ok)
{
    fc_tensor *c = fc_contiguous(ctx, g);
    if (!c) {
        *ok = 0;
        return 0;
    }
    int64_t n = fct_numel(c);
    double ss = 0;
    if (c->dtype == FC_F64) {
        const double *d = (const double *)fct_ptr(c);
        for (int64_t i = 0; i < n; i++) ss += d[i] * d[i];
    } else {
        /* Gradients are f32 for every other float dtype (autograd.h). */
        const float *d = (const float *)fct_ptr(c);
        for (int64_t i = 0; i < n; i++) ss += (double)d[i] * (double)d[i];
    }
    return sqrt(ss);
}

double fc_clip_grad_norm(fc_ctx *ctx, fc_tensor *const *params, int n, double max_norm)
{
    static const char *fn = "fc_clip_grad_norm";
    if (!ctx) return -1;
    if (!check_params(ctx, fn, params, n)) return -1;
    if (!isfinite(max_norm) || max_norm < 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: max_norm = %g: must be finite and >= 0", fn, max_norm);
        return -1;
    }
    fc_scope s = fc_scope_begin(ctx);
    int ok = 1, all_f32 = 1;
    double sum = 0;
    for (int i = 0; i < n && ok; i++) {
        fc_tensor *g = fc_grad(ctx, params[i]);
        if (!g) continue;
        double nrm = norm_of(ctx, g, &ok);
        /* PyTorch takes each norm in the gradient's dtype, then the norm of
         * the stacked norms. */
        if (g->dtype == FC_F32) nrm = (float)nrm;
        else all_f32 = 0;
        sum += nrm * nrm;
    }
    double total = sqrt(sum);
    double coef;
    if (all_f32) {
        total = (float)total;
        coef = (float)max_norm / ((float)total + 1e-6f); /* max_norm / (total_norm + 1e-6), in f32 */
    } else {
        coef = max_norm / (total + 1e-6);
    }
    /* PyTorch multiplies by min(coef, 1) unconditionally; by 1 changes
     * nothing, so only coef < 1 writes. NaN compares false: a NaN norm
     * leaves the gradients as they are. */
    for (int i = 0; i < n && ok && coef < 1; i++) {
        fc_tensor *g = fc_grad(ctx, params[i]);
        if (!g) continue;
        ok = fc_copy_into(ctx, g, fc_mul_scalar(ctx, g, coef)) == FC_OK;
    }
    fc_scope_end(ctx, s);
    return ok ? total : -1;
}

fc_status fc_clip_grad_value(fc_ctx *ctx, fc_tensor *const *params, int n, double clip)
{
    static const char *fn = "fc_clip_grad_value";
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!check_params(ctx, fn, params, n)) return FC_ERR_INVALID_ARG;
    if (!isfinite(clip) || clip < 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: clip = %g: must be finite and >= 0", fn, clip);
        return FC_ERR_INVALID_ARG;
    }
    fc_scope s = fc_scope_begin(ctx);
    fc_status st = FC_OK;
    for (int i = 0; i < n && st == FC_OK; i++) {
        fc_tensor *g = fc_grad(ctx, params[i]);
        if (g) st = fc_copy_into(ctx, g, fc_clamp(ctx, g, -clip, clip));
    }
    fc_scope_end(ctx, s);
    return st;
}

/* The optimizer's parameters as an array, in the order added. */
static fc_tensor **param_list(fc_optim *opt, const char *fn)
{
    fc_tensor **ps = malloc((size_t)(opt->n_params ? opt->n_params : 1) * sizeof *ps);
    if (!ps) return fc_fail(opt->ctx, FC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; i < opt->n_params; i++) ps[i] = opt->params[i].p;
    return ps;
}

double fc_optim_clip_grad_norm(fc_optim *opt, double max_norm)
{
    if (!opt) return -1;
    fc_tensor **ps = param_list(opt, "fc_optim_clip_grad_norm");
    if (!ps) return -1;
    double r = fc_clip_grad_norm(opt->ctx, ps, opt->n_params, max_norm);
    free(ps);
    return r;
}

fc_status fc_optim_clip_grad_value(fc_optim *opt, double clip)
{
    if (!opt) return FC_ERR_INVALID_ARG;
    fc_tensor **ps = param_list(opt, "fc_optim_clip_grad_value");
    if (!ps) return FC_ERR_OOM;
    fc_status st = fc_clip_grad_value(opt->ctx, ps, opt->n_params, clip);
    free(ps);
    return st;
}
