/* SPDX-License-Identifier: MIT */
/* Fucina llm: collecting an importance matrix (include/fucina/imatrix.h)
 * over a model's forward passes, as llama-imatrix does
 * (tools/imatrix/imatrix.cpp, IMatrixCollector::collect_imatrix).
 *
 * The collector sets the model's activation observer (fc_llm_act_hook):
 * the forward's project() hands it every weight with the rows it is about
 * to multiply. A table from the weight (its fc_tensor, an expert's 2-D view
 * for an expert) to its entry and expert index is built once from the
 * architecture entry's tensor specs, which also name the tensors as the
 * GGUF file does. For each row x of the input: in_sum2[j] += x_j^2 in f32,
 * in row order, and the count += 1; for an expert, on its own row of sums
 * and its own count, over the tokens routed to it. Which weights: every
 * matrix of a layer (llama-imatrix's "blk." names, the MoE router
 * included), and output.weight only when asked (--process-output) and not
 * tied to token_embd (llama.cpp names a tied head's product token_embd,
 * which it does not collect). llama-imatrix ignores products of fewer than
 * 16 rows, which its chunks (one batch of n_ctx tokens) never are; every
 * row is collected here, whatever pieces the forward cuts a chunk into. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/imatrix.h"
#include "fucina/llm.h"
#include "llm/arch.h"
#include "llm/model.h"

typedef struct slot {
    const fc_tensor *w; /* NULL: empty */
    fc_imatrix_entry *e;
    int64_t expert;
} slot;

struct fc_imatrix_collector {
    fc_llm_model *m;
    fc_imatrix *into;
    fc_llm_act_hook hook;
    size_t cap; /* a power of two, at least twice the weights */
    slot *slots;
};

static size_t slot_of(const fc_tensor *w, size_t cap)
{
    /* Fibonacci hashing of the pointer (the low bits are alignment) */
    return (size_t)(((uint64_t)(uintptr_t)w * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static const slot *find(const fc_imatrix_collector *c, const fc_tensor *w)
{
    for (size_t i = slot_of(w, c->cap);; i = (i + 1) & (c->cap - 1)) {
        if (c->slots[i].w == w) return &c->slots[i];
        if (!c->slots[i].w) return NULL;
    }
}

static void put(fc_imatrix_collector *c, const fc_tensor *w, fc_imatrix_entry *e, int64_t expert)
{
    size_t i = slot_of(w, c->cap);
    while (c->slots[i].w && c->slots[i].w != w) i = (i + 1) & (c->cap - 1);
    c->slots[i] = (slot){w, e, expert};
}

static void observe(void *user, const fc_tensor *w, const float *a, int64_t n_rows, int64_t cols)
{
    const fc_imatrix_collector *c = user;
    const slot *s = find(c, w);
    if (!s || cols != s->e->n_cols) return; /* token_embd as a tied head; a shape no entry has */
    float *sum = s->e->in_sum2 + s->expert * cols;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = a + r * cols;
        for (int64_t j = 0; j < cols; j++) sum[j] += x[j] * x[j];
    }
    s->e->counts[s->expert] += (float)n_rows;
}

/* The weights the collector watches, with their GGUF names; the entries
 * are created now (pointers into m->into stay valid: nothing else adds). */
typedef struct watch {
    const fc_tensor *w;
    char name[96];
    int64_t n_cols, n_mat, expert;
} watch;

static int list_weights(const fc_llm_model *m, int process_output, watch **out, size_t *n_out)
{
    const fc_llm_arch_desc *d = m->desc;
    const fc_llm_hparams *hp = &m->hp;
    size_t cap = 64, n = 0;
    watch *w = malloc(cap * sizeof *w);
    if (!w) return 0;
#define ADD(t, nm, nmat, ex)                                                                        \
    do {                                                                                            \
        if (n == cap) {                                                                             \
            watch *g = realloc(w, 2 * cap * sizeof *w);                                             \
            if (!g) {                                                                               \
                free(w);                                                                            \
                return 0;                                                                           \
            }                                                                                       \
            w = g, cap *= 2;                                                                        \
        }                                                                                           \
        w[n].w = (t), w[n].n_cols = fc_tensor_dim((t), fc_tensor_rank(t) - 1), w[n].n_mat = (nmat); \
        w[n].expert = (ex);                                                                         \
        snprintf(w[n].name, sizeof w[n].name, "%s", (nm));                                          \
        n++;                                                                                        \
    } while (0)
    char name[96];
    for (int64_t l = 0; l < hp->n_layer; l++) {
        fc_llm_layer *L = &m->layers[l];
        for (int i = 0; i < d->n_layer; i++) {
            const fc_llm_tensor_spec *t = &d->layer[i];
            if (t->rank < 2 || !fc_llm_tensor_applies(t, hp)) continue;
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, t->name);
            if (t->rank == 3 && t->views) {
                fc_tensor **views = *(fc_tensor ***)((char *)L + t->views);
                for (int64_t e = 0; views && e < hp->n_expert; e++)
                    if (views[e]) ADD(views[e], name, hp->n_expert, e);
            } else {
                const fc_tensor *tw = *fc_llm_slot(L, t->field);
                if (tw) ADD(tw, name, 1, 0);
            }
        }
    }
    if (process_output && m->output && m->output != m->tok_embd) ADD(m->output, "output.weight", 1, 0);
#undef ADD
    *out = w;
    *n_out = n;
    return 1;
}

fc_imatrix_collector *fc_imatrix_collector_new(fc_ctx *ctx, fc_llm_model *m, fc_imatrix *into, int process_output)
{
    if (!ctx) return NULL;
    if (!m || !into)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_imatrix_collector_new: NULL %s", m ? "imatrix" : "model");
    if (m->act_hook)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_imatrix_collector_new: the model already has a collector");
    watch *w = NULL;
    size_t n = 0;
    fc_imatrix_collector *c = calloc(1, sizeof *c);
    if (!c || !list_weights(m, process_output, &w, &n)) {
        free(c);
        return fc_fail(ctx, FC_ERR_OOM, "fc_imatrix_collector_new: out of memory");
    }
    c->cap = 16;
    while (c->cap < 2 * n + 2) c->cap *= 2;
    c->slots = calloc(c->cap, sizeof *c->slots);
    if (!c->slots) goto oom;
    /* entries first (sorted insertion moves them), then the pointers */
    for (size_t i = 0; i < n; i++)
        if (!fc_imatrix_entry_get(ctx, into, w[i].name, w[i].n_cols, w[i].n_mat)) {
            free(w);
            free(c->slots);
            free(c);
            return NULL; /* an existing entry of another shape: the message names it */
        }
    for (size_t i = 0; i < n; i++) put(c, w[i].w, (fc_imatrix_entry *)fc_imatrix_find(into, w[i].name), w[i].expert);
    free(w);
    c->m = m;
    c->into = into;
    c->hook = (fc_llm_act_hook){.fn = observe, .user = c};
    m->act_hook = &c->hook;
    return c;
oom:
    free(w);
    free(c->slots);
    free(c);
    return fc_fail(ctx, FC_ERR_OOM, "fc_imatrix_collector_new: out of memory");
}

void fc_imatrix_collector_free(fc_imatrix_collector *c)
{
    if (!c) return;
    if (c->m && c->m->act_hook == &c->hook) c->m->act_hook = NULL;
    free(c->slots);
    free(c);
}
