/* SPDX-License-Identifier: MIT */
/* The public side of autograd state: variables, their gradients, detach and
 * no-grad regions. */
#include "fucina/autograd.h"
#include "autograd/vjp.h"

fc_status fc_requires_grad(fc_ctx *ctx, fc_tensor *t, int on)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    char d[FCT_DESC_MAX];
    if (!fc_dtype_is_float(t->dtype)) {
        fc_fail(ctx, FC_ERR_DTYPE, "fc_requires_grad: only float tensors take gradients, not %s",
                fct_describe(t, d, sizeof d));
        return FC_ERR_DTYPE;
    }
    fcg_state *s = fcg_state_of(t);
    if (s && s->node) {
        fc_fail(ctx, FC_ERR_STATE, "fc_requires_grad: %s was made by %s, not a leaf (fc_detach it first)",
                fct_describe(t, d, sizeof d), s->node->name);
        return FC_ERR_STATE;
    }
    if (!on) {
        if (s) s->requires_grad = 0;
        return FC_OK;
    }
    return fcg_make_leaf(ctx, t) ? FC_OK : fc_ctx_status(ctx);
}

int fc_tensor_requires_grad(const fc_tensor *t) { return fcg_requires(t); }

int fc_tensor_is_leaf(const fc_tensor *t)
{
    fcg_state *s = fcg_state_of(t);
    return s && s->requires_grad && !s->node;
}

fc_tensor *fc_grad(fc_ctx *ctx, fc_tensor *t)
{
    if (!ctx || !t) return NULL;
    fcg_state *s = fcg_state_of(t);
    if (!s) return NULL;
    pthread_mutex_lock(&s->lock);
    fc_tensor *g = s->grad ? fct_view(ctx, s->grad) : NULL;
    pthread_mutex_unlock(&s->lock);
    return g;
}

void fc_zero_grad(fc_ctx *ctx, fc_tensor *t)
{
    (void)ctx;
    fcg_state *s = fcg_state_of(t);
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    fc_tensor *g = s->grad;
    s->grad = NULL;
    pthread_mutex_unlock(&s->lock);
    fc_release(g);
}

fc_status fc_set_grad(fc_ctx *ctx, fc_tensor *t, fc_tensor *g)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t || !g) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    fcg_state *s = fcg_state_of(t);
    int ok = s && s->requires_grad && !s->node;
    if (!ok) {
        fc_fail(ctx, FC_ERR_STATE, "fc_set_grad: %s is not a variable", fct_describe(t, d1, sizeof d1));
        return FC_ERR_STATE;
    }
    ok = g->rank == t->rank && fc_dtype_is_float(g->dtype);
    for (int i = 0; ok && i < t->rank; i++) {
        int j = fc_tensor_axis_index(g, t->axis[i]);
        ok = j >= 0 && g->dim[j] == t->dim[i];
    }
    if (!ok) {
        fc_fail(ctx, FC_ERR_SHAPE, "fc_set_grad: the gradient %s does not match %s", fct_describe(g, d1, sizeof d1),
                fct_describe(t, d2, sizeof d2));
        return FC_ERR_SHAPE;
    }
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *c = fc_clone(ctx, fca_sum_to(ctx, g, t));
    fc_retain(c);
    fc_scope_end(ctx, sc);
    fcg_enable();
    if (!c) return fc_ctx_status(ctx);
    pthread_mutex_lock(&s->lock);
    fc_tensor *old = s->grad;
    s->grad = c;
    pthread_mutex_unlock(&s->lock);
    fc_release(old);
    return FC_OK;
}

fc_tensor *fc_detach(fc_ctx *ctx, fc_tensor *t)
{
    if (!ctx || !t) return NULL;
    return fct_view(ctx, t);
}

void fc_no_grad_begin(void) { fcg_disable(); }
void fc_no_grad_end(void) { fcg_enable(); }
int fc_grad_enabled(void) { return fcg_enabled(); }
