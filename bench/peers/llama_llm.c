/* SPDX-License-Identifier: MIT */
/* The `llm` suite's peer: llama.cpp through the oracle's libllama API
 * (oracle/llama_abi.h) and ggml's threadpool (oracle/ggml_oracle.h). Set up
 * the way tools/llama-bench sets up a test: one context per test with
 * n_batch = n_ubatch = the prompt length, a ggml threadpool attached (else
 * ggml would start and join threads for every graph), cache cleared before
 * each run, logits of the last prompt row, a sync after each decode step. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_oracle.h"
#include "llama_abi.h"
#include "peers/llama_llm.h"

/* mirrored from ggml/include/ggml.h (passed by pointer, filled by ggml) */
#define GGML_MAX_N_THREADS 512
struct ggml_threadpool_params {
    bool cpumask[GGML_MAX_N_THREADS];
    int n_threads;
    int prio;
    uint32_t poll;
    bool strict_cpu;
    bool paused;
};

static struct {
    const fco_llama_api *L;
    fcb_ggml_threadpool tp;
    const char *why;
    int tried, ok;
} P;

const fco_llama_api *fcb_llama_api(void) { return P.L; }
const fcb_ggml_threadpool *fcb_llama_threadpool(void) { return &P.tp; }

struct fcb_llama_model {
    struct llama_model *m;
};

struct fcb_llama_ctx {
    struct llama_context *lc;
    void *tp;
    llama_batch b;
    int cap;
};

int fcb_llama_available(const char **why)
{
    if (!P.tried) {
        P.tried = 1;
        P.L = fco_llama_load(&P.why);
        if (P.L) {
            *(void **)&P.tp.params_init = fco_ggml_sym("ggml_threadpool_params_init");
            *(void **)&P.tp.create = fco_ggml_sym("ggml_threadpool_new");
            *(void **)&P.tp.free = fco_ggml_sym("ggml_threadpool_free");
            *(void **)&P.tp.pause = fco_ggml_sym("ggml_threadpool_pause");
            if (!P.tp.params_init || !P.tp.create || !P.tp.free || !P.tp.pause)
                P.why = "the ggml oracle does not export the ggml_threadpool_* functions";
            else
                P.ok = 1;
        }
    }
    if (!P.ok && why) *why = P.why;
    return P.ok;
}

fcb_llama_model *fcb_llama_model_load(const char *path, const char **why)
{
    if (!fcb_llama_available(why)) return NULL;
    fcb_llama_model *m = calloc(1, sizeof *m);
    if (!m) {
        *why = "out of memory";
        return NULL;
    }
    m->m = P.L->load(path, P.L->model_defaults());
    if (!m->m) {
        free(m);
        *why = "llama.cpp cannot load the model (FCT_LLAMA_VERBOSE=1 shows its log)";
        return NULL;
    }
    return m;
}

void fcb_llama_model_free(fcb_llama_model *m)
{
    if (!m) return;
    P.L->model_free(m->m);
    free(m);
}

void fcb_llama_model_desc(const fcb_llama_model *m, char *buf, size_t len)
{
    if (P.L->model_desc(m->m, buf, len) < 0 && len) buf[0] = 0;
}

fcb_llama_ctx *fcb_llama_ctx_new(fcb_llama_model *m, int n_threads, int n_ctx, int n_batch, int kv_type,
                                 const char **why)
{
    fcb_llama_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        *why = "out of memory";
        return NULL;
    }
    struct llama_context_params cp = P.L->ctx_defaults();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)(n_batch > 0 ? n_batch : 1);
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = cp.type_v = kv_type;
    cp.no_perf = true;
    c->lc = P.L->init(m->m, cp);
    if (!c->lc) {
        free(c);
        *why = "llama_init_from_model failed";
        return NULL;
    }
    struct ggml_threadpool_params tpp;
    P.tp.params_init(&tpp, n_threads); /* poll 50, as llama-bench's default */
    c->tp = P.tp.create(&tpp);
    if (!c->tp) {
        fcb_llama_ctx_free(c);
        *why = "ggml_threadpool_new failed";
        return NULL;
    }
    P.L->attach_threadpool(c->lc, c->tp, NULL);
    c->cap = n_batch > 0 ? n_batch : 1;
    c->b = P.L->batch_init(c->cap, 0, 1);
    return c;
}

static int run(fcb_llama_ctx *c, const int32_t *tokens, int n, int pos)
{
    c->b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        c->b.token[i] = tokens[i];
        c->b.pos[i] = pos + i;
        c->b.n_seq_id[i] = 1;
        c->b.seq_id[i][0] = 0;
        c->b.logits[i] = i == n - 1;
    }
    return P.L->decode(c->lc, c->b) == 0 ? 0 : -1;
}

int fcb_llama_prefill(fcb_llama_ctx *c, const int32_t *tokens, int n)
{
    if (n > c->cap) return -1;
    P.L->memory_clear(P.L->get_memory(c->lc), false);
    int rc = run(c, tokens, n, 0);
    P.L->synchronize(c->lc);
    return rc;
}

int fcb_llama_decode(fcb_llama_ctx *c, const int32_t *tokens, int n)
{
    P.L->memory_clear(P.L->get_memory(c->lc), false);
    for (int i = 0; i < n; i++) {
        if (run(c, tokens + i, 1, i)) return -1;
        P.L->synchronize(c->lc);
    }
    return 0;
}

void fcb_llama_pause(fcb_llama_ctx *c) { P.tp.pause(c->tp); }

void fcb_llama_ctx_free(fcb_llama_ctx *c)
{
    if (!c) return;
    if (c->b.token) P.L->batch_free(c->b);
    if (c->lc) {
        P.L->detach_threadpool(c->lc);
        P.L->free_ctx(c->lc);
    }
    if (c->tp) P.tp.free(c->tp);
    free(c);
}
