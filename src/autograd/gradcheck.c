/* SPDX-License-Identifier: MIT */
/* Gradient checking by central finite differences. Each element of each
 * input is moved by +-eps in place (directly in memory, so no version bump
 * and no record), the loss is evaluated with recording off, and the slope is
 * compared with the gradient of one backward pass. */
#include <math.h>
#include <stdlib.h>

#include "fucina/autograd.h"
#include "autograd/vjp.h"

/* Address of row-major element j of t. */
static char *element(const fc_tensor *t, int64_t j)
{
    int64_t off = 0;
    for (int i = t->rank - 1; i >= 0; i--) {
        off += (j % t->dim[i]) * t->stride[i];
        j /= t->dim[i];
    }
    return fct_ptr(t) + off * (int64_t)fc_dtype_size(t->dtype);
}

static int eval_loss(fc_ctx *ctx, fc_loss_fn f, void *user, fc_tensor *const *in, int n, double *out)
{
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *y = f(ctx, user, in, n);
    int ok = y && fct_numel(y) == 1;
    if (ok) *out = fc_tensor_item(y);
    fc_scope_end(ctx, sc);
    fcg_enable();
    return ok;
}

fc_status fc_gradcheck(fc_ctx *ctx, fc_loss_fn f, void *user, fc_tensor *const *in, int n_in,
                       const fc_gradcheck_opts *opts)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!f || !in || n_in < 1) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_gradcheck: needs a loss function and at least one input");
        return FC_ERR_INVALID_ARG;
    }
    char d[FCT_DESC_MAX];
    int all_f64 = 1;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
        if (!fc_tensor_is_leaf(in[i])) {
            fc_fail(ctx, FC_ERR_STATE, "fc_gradcheck: input %d (%s) is not a variable", i, fct_describe(in[i], d, sizeof d));
            return FC_ERR_STATE;
        }
        all_f64 &= in[i]->dtype == FC_F64;
    }
    double eps = opts && opts->eps > 0 ? opts->eps : all_f64 ? 1e-6 : 1e-3;
    double atol = opts && opts->atol > 0 ? opts->atol : all_f64 ? 1e-5 : 1e-3;
    double rtol = opts && opts->rtol > 0 ? opts->rtol : all_f64 ? 1e-4 : 1e-2;

    for (int i = 0; i < n_in; i++) fc_zero_grad(ctx, in[i]);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *y = f(ctx, user, in, n_in);
    fc_status st = FC_OK;
    if (!y) st = fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_STATE;
    else st = fc_backward(ctx, y);
    fc_scope_end(ctx, sc);
    if (st != FC_OK) return st;

    for (int i = 0; i < n_in && st == FC_OK; i++) {
        fc_tensor *x = in[i];
        int64_t numel = fct_numel(x);
        fc_tensor *g = fc_grad(ctx, x);
        double *ga = calloc((size_t)numel, sizeof *ga);
        if (!ga) {
            fc_release(g);
            fc_fail(ctx, FC_ERR_OOM, "fc_gradcheck: out of memory");
            st = FC_ERR_OOM;
            break;
        }
        for (int64_t j = 0; g && j < numel; j++) ga[j] = fct_load(g->dtype, element(g, j));
        fc_release(g);
        for (int64_t j = 0; j < numel && st == FC_OK; j++) {
            char *p = element(x, j);
            double x0 = fct_load(x->dtype, p), lp = 0, lm = 0;
            /* The step actually taken, after rounding to x's dtype. */
            fct_store(x->dtype, p, x0 + eps);
            double xp = fct_load(x->dtype, p);
            int ok = eval_loss(ctx, f, user, in, n_in, &lp);
            fct_store(x->dtype, p, x0 - eps);
            double xm = fct_load(x->dtype, p);
            ok = ok && eval_loss(ctx, f, user, in, n_in, &lm);
            fct_store(x->dtype, p, x0);
            if (!ok) {
                st = fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_STATE;
                if (fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, st, "fc_gradcheck: the loss is not a one-element tensor");
                break;
            }
            double num = (lp - lm) / (xp - xm);
            if (!(fabs(ga[j] - num) <= atol + rtol * fabs(num))) {
                fc_fail(ctx, FC_ERR_STATE,
                        "fc_gradcheck: input %d (%s), element %lld: backward gives %.9g, finite differences %.9g "
                        "(eps %g, atol %g, rtol %g)", i, fct_describe(x, d, sizeof d), (long long)j, ga[j], num, eps,
                        atol, rtol);
                st = FC_ERR_STATE;
            }
        }
        free(ga);
    }
    for (int i = 0; i < n_in; i++) fc_zero_grad(ctx, in[i]);
    return st;
}
