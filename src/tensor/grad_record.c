/* SPDX-License-Identifier: MIT */
/* Backward records: creation, saving, and iterative release. See
 * grad_record.h. */
#include <stdlib.h>
#include <string.h>

#include "tensor/grad_record.h"
#include "tensor/internal.h"

static _Thread_local int no_grad_depth;

int fcg_enabled(void) { return no_grad_depth == 0; }
void fcg_disable(void) { no_grad_depth++; }
void fcg_enable(void)
{
    if (no_grad_depth > 0) no_grad_depth--;
}

/* --- iterative release ---
 * Releasing a record releases its operands, whose states release their
 * records, and so on down the graph. Done recursively, a long chain would
 * overflow the stack; so a thread that starts freeing records drains a work
 * list, and releases reached while it drains only append to the list. */
static _Thread_local fcg_node *trash;       /* linked through node->engine */
static _Thread_local int draining;

static void node_free(fcg_node *n)
{
    fcg_node_drop_saved(n);
    if (n->gacc) fc_release(n->gacc);
    free(n);
}

void fcg_node_retain(fcg_node *n) { atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed); }

void fcg_node_release(fcg_node *n)
{
    if (!n || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
    n->engine = trash;
    trash = n;
    if (draining) return;
    draining = 1;
    while (trash) {
        fcg_node *m = trash;
        trash = m->engine;
        node_free(m);
    }
    draining = 0;
}

void fcg_node_drop_saved(fcg_node *n)
{
    for (int k = 0; k < FCG_MAX_SAVED; k++) {
        fc_release(n->saved[k]);
        n->saved[k] = NULL;
    }
    for (int i = 0; i < n->n_in; i++) {
        fc_release(n->in[i]);
        n->in[i] = NULL;
    }
}

static void state_release(fc_tensor *t)
{
    fcg_state *s = t->grad;
    t->grad = NULL;
    t->grad_release = NULL;
    if (!s) return;
    fc_tensor *g = s->grad;
    fcg_node *n = s->node;
    pthread_mutex_destroy(&s->lock);
    free(s);
    fc_release(g);
    fcg_node_release(n);
}

static fcg_state *state_new(fc_ctx *ctx, fc_tensor *t)
{
    fcg_state *s = calloc(1, sizeof *s);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "out of memory (autograd state)");
    pthread_mutex_init(&s->lock, NULL);
    s->requires_grad = 1;
    t->grad = s;
    t->grad_release = state_release;
    return s;
}

int fcg_make_leaf(fc_ctx *ctx, fc_tensor *t)
{
    fcg_state *s = fcg_state_of(t);
    if (s) {
        s->requires_grad = 1;
        return 1;
    }
    return state_new(ctx, t) != NULL;
}

fcg_node *fcg_record(fc_ctx *ctx, fc_tensor *out, fcg_op op, const char *name, fc_tensor *const *in, int n)
{
    if (!out || !fcg_enabled() || out->grad || !fc_dtype_is_float(out->dtype)) return NULL;
    int any = 0;
    for (int i = 0; i < n; i++) any |= fcg_requires(in[i]);
    if (!any) return NULL;
    size_t extra = n > FCG_INLINE_IN ? (size_t)n * (sizeof(fc_tensor *) + sizeof(unsigned) + 1) : 0;
    fcg_node *nd = calloc(1, sizeof(fcg_node) + extra);
    if (!nd) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory (backward record)", name);
    atomic_init(&nd->refs, 1);
    atomic_init(&nd->pending, 0);
    nd->op = op;
    nd->name = name;
    nd->n_in = n;
    if (n > FCG_INLINE_IN) {
        nd->in = (fc_tensor **)(nd + 1);
        nd->in_version = (unsigned *)(nd->in + n);
        nd->needs = (unsigned char *)(nd->in_version + n);
    } else {
        nd->in = nd->in_inline;
        nd->in_version = nd->in_version_inline;
        nd->needs = nd->needs_inline;
    }
    for (int i = 0; i < n; i++) {
        nd->in[i] = fc_retain(in[i]);
        if (in[i]) nd->in_version[i] = atomic_load_explicit(&in[i]->storage->version, memory_order_relaxed);
        nd->needs[i] = (unsigned char)fcg_requires(in[i]);
    }
    nd->out_dtype = out->dtype;
    nd->out_rank = out->rank;
    memcpy(nd->out_dim, out->dim, sizeof nd->out_dim);
    memcpy(nd->out_axis, out->axis, sizeof nd->out_axis);
    nd->work = (double)fct_numel(out);
    fcg_state *s = state_new(ctx, out);
    if (!s) {
        fcg_node_release(nd);
        return NULL;
    }
    s->node = nd;
    return nd;
}

void fcg_save(fcg_node *n, int k, fc_tensor *t)
{
    if (!n || !t) return;
    fc_release(n->saved[k]);
    n->saved[k] = fc_retain(t);
    n->saved_version[k] = atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}

void fcg_save_output(fc_ctx *ctx, fcg_node *n, int k, fc_tensor *out)
{
    if (!n || !out) return;
    /* A bare header over the output's storage, owned by the record alone
     * (not by any scope). */
    fc_tensor *v = fct_view(ctx, out);
    if (!v) return;
    fc_retain(v);
    fc_discard(ctx, v);
    fcg_save(n, k, v);
    fc_release(v);
}

void fcg_set_axes(fcg_node *n, const char *const *axes, int count)
{
    if (!n) return;
    if (count > FC_MAX_RANK) count = FC_MAX_RANK;
    for (int i = 0; i < count; i++) n->p.axes[i] = axes[i];
    n->p.n_axes = count;
}
