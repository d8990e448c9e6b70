/* SPDX-License-Identifier: MIT */
/* The backward engine.
 *
 * 1. Discovery: an iterative walk from the output's record over the
 *    operands that require gradients. Each record reached gets this pass's
 *    id, and its `pending` counter counts the edges into it (how many
 *    consumers will contribute to its output gradient). Every check that can
 *    fail (a record already consumed, a saved tensor or operand modified in
 *    place) happens here, before anything is computed, so a rejected pass
 *    leaves the graph as it was.
 * 2. Execution: the records whose counters have drained form the ready
 *    batch. Their VJPs run either one at a time on the calling thread (each
 *    op then uses the whole worker pool) or, when the batch holds two or more
 *    heavy records, concurrently on the pool (each op then runs inline on its
 *    worker). Either way, the calling thread then adds the gradients into
 *    the operands in batch order and operand order, so the sums, and so the
 *    gradients, are bitwise the same for any thread count.
 * 3. Each record that ran is consumed: its output gradient, saved tensors and
 *    operand references are dropped at once, so memory falls as the pass
 *    proceeds.
 *
 * Gradients of variables accumulate under the variable's lock, so two
 * threads running passes over graphs that share parameters do not race. */
#include <stdlib.h>
#include <string.h>

#include "fucina/autograd.h"
#include "autograd/vjp.h"

/* Records at or above this many flops may run side by side with another. */
#define FCA_HEAVY_WORK (1 << 22)

typedef struct node_list {
    fcg_node **v;
    size_t n, cap;
} node_list;

static int push(node_list *l, fcg_node *x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        fcg_node **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return 0;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
    return 1;
}

static _Atomic uint64_t next_pass = 1;

static fcg_node *node_of(const fc_tensor *t)
{
    fcg_state *s = fcg_state_of(t);
    return s ? s->node : NULL;
}

static int modified(const fc_tensor *t, unsigned version)
{
    return t && atomic_load_explicit(&t->storage->version, memory_order_relaxed) != version;
}

/* Walk the graph from root; fill `all` (retained). 0 after an error. */
static int discover(fc_ctx *ctx, fcg_node *root, uint64_t pass, node_list *all)
{
    char d[FCT_DESC_MAX];
    node_list stack = {0};
    int ok = 1;
    root->pass = pass;
    atomic_store(&root->pending, 0);
    fcg_node_retain(root);
    if (!push(all, root) || !push(&stack, root)) {
        fcg_node_release(root);
        ok = 0;
        fc_fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
    }
    while (ok && stack.n) {
        fcg_node *nd = stack.v[--stack.n];
        if (nd->ran) {
            fc_fail(ctx, FC_ERR_STATE,
                    "fc_backward: the graph through %s was already consumed by a backward pass "
                    "(run the forward again to get a new graph)", nd->name);
            ok = 0;
            break;
        }
        for (int k = 0; k < FCG_MAX_SAVED && ok; k++)
            if (modified(nd->saved[k], nd->saved_version[k])) {
                fc_fail(ctx, FC_ERR_STATE,
                        "fc_backward: %s saved %s for its gradient, and it was modified in place afterwards",
                        nd->name, fct_describe(nd->saved[k], d, sizeof d));
                ok = 0;
            }
        for (int i = 0; i < nd->n_in && ok; i++) {
            if (modified(nd->in[i], nd->in_version[i])) {
                fc_fail(ctx, FC_ERR_STATE,
                        "fc_backward: operand %d of %s (%s) was modified in place after the forward pass", i,
                        nd->name, fct_describe(nd->in[i], d, sizeof d));
                ok = 0;
                break;
            }
            if (!nd->needs[i]) continue;
            fcg_node *c = node_of(nd->in[i]);
            if (!c) continue;
            if (c->pass != pass) {
                c->pass = pass;
                atomic_store(&c->pending, 0);
                fcg_node_retain(c);
                if (!push(all, c) || !push(&stack, c)) {
                    fcg_node_release(c);
                    fc_fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
                    ok = 0;
                    break;
                }
            }
            atomic_fetch_add(&c->pending, 1);
        }
    }
    free(stack.v);
    return ok;
}

/* One record's VJP, in its own scope: gin[] come back owned by the caller. */
typedef struct job {
    fc_ctx *ctx;
    fcg_node *node;
    fc_tensor **gin;
    int ok;
} job;

static void run_job(job *j)
{
    fc_ctx *ctx = j->ctx;
    fcg_node *nd = j->node;
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *g = nd->gacc;
    /* The VJP sees the gradient in the output's axis order. */
    int same = g->rank == nd->out_rank;
    for (int i = 0; same && i < g->rank; i++) same = g->axis[i] == nd->out_axis[i];
    if (!same) g = fc_permute(ctx, g, nd->out_axis, nd->out_rank);
    j->ok = g && fca_vjp(ctx, nd, g, j->gin);
    for (int i = 0; i < nd->n_in; i++) {
        if (!j->ok || !nd->needs[i]) j->gin[i] = NULL;
        fc_retain(j->gin[i]);
    }
    /* Every gradient must be its operand's named shape, in its axis order,
     * in the gradient dtype: a VJP that gets this wrong would otherwise
     * corrupt the sums silently. */
    for (int i = 0; j->ok && i < nd->n_in; i++) {
        if (!nd->needs[i]) continue;
        char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
        const fc_tensor *gi = j->gin[i], *x = nd->in[i];
        int fits = gi && gi->rank == x->rank && gi->dtype == fcg_grad_dtype(x->dtype);
        for (int a = 0; fits && a < x->rank; a++) fits = gi->axis[a] == x->axis[a] && gi->dim[a] == x->dim[a];
        if (!fits) {
            fc_fail(ctx, FC_ERR_STATE, "fc_backward: the gradient of %s for operand %d is %s; want %s in %s", nd->name, i,
                    gi ? fct_describe(gi, d1, sizeof d1) : "missing", fct_describe(x, d2, sizeof d2),
                    fc_dtype_name(fcg_grad_dtype(x->dtype)));
            j->ok = 0;
        }
    }
    fc_scope_end(ctx, sc);
    fcg_enable();
}

static void run_chunk(void *arg, int64_t chunk, int worker)
{
    (void)worker;
    run_job(&((job *)arg)[chunk]);
}

/* g must have t's named shape; returns it in t's axis order and gradient
 * dtype (owned). */
static fc_tensor *conform(fc_ctx *ctx, fc_tensor *g, const fc_tensor *t)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *r = fca_sum_to(ctx, g, t);
    fc_retain(r);
    fc_scope_end(ctx, sc);
    return r;
}

/* Sum of two owned gradients (owned); consumes both. */
static fc_tensor *sum_owned(fc_ctx *ctx, fc_tensor *a, fc_tensor *b)
{
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *s = fc_add(ctx, a, b);
    fc_retain(s);
    fc_scope_end(ctx, sc);
    fcg_enable();
    fc_release(a);
    fc_release(b);
    return s;
}

/* Add an owned gradient g into variable t's gradient. */
static int accumulate_leaf(fc_ctx *ctx, fc_tensor *t, fc_tensor *g)
{
    fcg_state *s = fcg_state_of(t);
    pthread_mutex_lock(&s->lock);
    if (!s->grad) {
        /* Take g over when nobody else can see its memory; else copy it, so
         * the variable's gradient never aliases another tensor. */
        int alone = atomic_load(&g->refs) == 1 && atomic_load(&g->storage->refs) == 1 && fct_is_contiguous(g);
        if (alone) {
            s->grad = g;
        } else {
            fcg_disable();
            fc_scope sc = fc_scope_begin(ctx);
            fc_tensor *c = fc_clone(ctx, g);
            fc_retain(c);
            fc_scope_end(ctx, sc);
            fcg_enable();
            fc_release(g);
            s->grad = c;
        }
    } else {
        s->grad = sum_owned(ctx, s->grad, g);
    }
    int ok = s->grad != NULL;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static fc_status run_pass(fc_ctx *ctx, fc_tensor *out, fc_tensor *seed)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (!fcg_requires(out)) {
        fc_fail(ctx, FC_ERR_STATE, "fc_backward: %s does not require a gradient (no variable reaches it)",
                fct_describe(out, d1, sizeof d1));
        return FC_ERR_STATE;
    }
    /* The seed: ones for a one-element output, else the caller's. */
    fc_tensor *g0 = NULL;
    if (!seed) {
        if (fct_numel(out) != 1) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_backward: %s is not a one-element output; pass a seed gradient "
                    "(fc_backward_with)", fct_describe(out, d1, sizeof d1));
            return FC_ERR_SHAPE;
        }
        fc_scope sc = fc_scope_begin(ctx);
        fc_dim dims[FC_MAX_RANK];
        for (int i = 0; i < out->rank; i++) dims[i] = (fc_dim){out->axis[i], out->dim[i]};
        g0 = fc_retain(fc_full(ctx, fcg_grad_dtype(out->dtype), dims, out->rank, 1.0));
        fc_scope_end(ctx, sc);
    } else {
        int ok = seed->rank == out->rank && fc_dtype_is_float(seed->dtype);
        for (int i = 0; ok && i < out->rank; i++) {
            int j = fc_tensor_axis_index(seed, out->axis[i]);
            ok = j >= 0 && seed->dim[j] == out->dim[i];
        }
        if (!ok) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_backward_with: the seed %s does not match the output %s",
                    fct_describe(seed, d1, sizeof d1), fct_describe(out, d2, sizeof d2));
            return FC_ERR_SHAPE;
        }
        g0 = conform(ctx, seed, out);
    }
    if (!g0) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_OOM;

    fcg_node *root = node_of(out);
    if (!root) { /* the output is a variable itself */
        fc_status st = accumulate_leaf(ctx, out, g0) ? FC_OK : fc_ctx_status(ctx);
        return st;
    }
    uint64_t pass = atomic_fetch_add(&next_pass, 1);
    node_list all = {0};
    if (!discover(ctx, root, pass, &all)) {
        for (size_t i = 0; i < all.n; i++) fcg_node_release(all.v[i]);
        free(all.v);
        fc_release(g0);
        return fc_ctx_status(ctx);
    }

    root->gacc = g0;
    node_list ready = {0}, batch = {0};
    int ok = push(&ready, root);
    int threads = fc_ctx_threads(ctx);
    size_t max_in = 0;
    for (size_t i = 0; i < all.n; i++)
        if ((size_t)all.v[i]->n_in > max_in) max_in = (size_t)all.v[i]->n_in;
    job *jobs = NULL;
    fc_tensor **gins = NULL;
    size_t jobs_cap = 0;
    while (ok && ready.n) {
        node_list t = batch;
        batch = ready;
        ready = t;
        ready.n = 0;
        if (batch.n > jobs_cap) { /* grown, never shrunk: one allocation per pass in a chain */
            free(jobs);
            free(gins);
            jobs_cap = batch.n * 2;
            jobs = malloc(jobs_cap * sizeof *jobs);
            gins = calloc(jobs_cap * (max_in ? max_in : 1), sizeof *gins);
            if (!jobs || !gins) {
                fc_fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
                ok = 0;
                break;
            }
        }
        int heavy = 0;
        for (size_t b = 0; b < batch.n; b++) {
            jobs[b] = (job){ctx, batch.v[b], gins + b * max_in, 0};
            heavy += batch.v[b]->work >= FCA_HEAVY_WORK;
        }
        if (threads > 1 && heavy >= 2) fc_workers_run(fc_ctx_workers(ctx), (int64_t)batch.n, run_chunk, jobs);
        else
            for (size_t b = 0; b < batch.n; b++) run_job(&jobs[b]);
        /* Accumulate in batch order, operand order. */
        for (size_t b = 0; b < batch.n; b++) {
            fcg_node *nd = batch.v[b];
            ok = ok && jobs[b].ok;
            /* The output gradient first: a gradient passed straight through
             * can then be taken over instead of copied. */
            fc_release(nd->gacc);
            nd->gacc = NULL;
            for (int i = 0; i < nd->n_in; i++) {
                fc_tensor *gi = jobs[b].gin[i];
                if (!gi) continue;
                jobs[b].gin[i] = NULL;
                if (!ok) {
                    fc_release(gi);
                    continue;
                }
                fc_tensor *x = nd->in[i];
                fcg_node *c = node_of(x);
                if (!c) {
                    ok = accumulate_leaf(ctx, x, gi);
                    continue;
                }
                c->gacc = c->gacc ? sum_owned(ctx, c->gacc, gi) : gi;
                if (!c->gacc) ok = 0;
                if (atomic_fetch_sub(&c->pending, 1) == 1 && ok && !push(&ready, c)) {
                    fc_fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
                    ok = 0;
                }
            }
            /* Consumed: free the output gradient and what the record kept. */
            nd->ran = 1;
            fcg_node_drop_saved(nd);
        }
    }
    free(jobs);
    free(gins);
    /* On failure, drop partial gradients of records that did not run. */
    for (size_t i = 0; i < all.n; i++) {
        fcg_node *nd = all.v[i];
        if (nd->gacc) {
            fc_release(nd->gacc);
            nd->gacc = NULL;
        }
        fcg_node_release(nd);
    }
    free(all.v);
    free(ready.v);
    free(batch.v);
    return ok ? FC_OK : (fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_STATE);
}

fc_status fc_backward(fc_ctx *ctx, fc_tensor *out)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!out) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    return run_pass(ctx, out, NULL);
}

fc_status fc_backward_with(fc_ctx *ctx, fc_tensor *out, fc_tensor *seed)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!out || !seed) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    return run_pass(ctx, out, seed);
}
