/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: the engine (engine.h). */
#include "serve/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "fucina/chat.h"
#include "fucina/fucina.h"
#include "fucina/tokenizer.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- requests ---- */
srv_req *srv_req_new(fc_token *prompt, size_t n_prompt, const srv_gen_params *gp) {
    srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    r->gp = *gp;
    r->slot = -1;
    r->stop_index = -1;
    r->refs = 1;
    atomic_init(&r->cancelled, 0);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

void srv_req_release(srv_req *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    const int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    free(r->prompt);
    fc_grammar_free(r->gp.grammar);
    for (size_t i = 0; i < r->gp.n_stop; i++) free(r->gp.stop[i]);
    free(r->text);
    free(r->lp);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void srv_req_cancel(srv_req *r) { atomic_store(&r->cancelled, 1); }

static void req_retain(srv_req *r) {
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

/* ---- the engine ---- */
typedef enum slot_state { SLOT_IDLE = 0, SLOT_PREFILL = 1, SLOT_GEN = 2 } slot_state;

typedef struct slot {
    int id;
    slot_state state;
    srv_req *req;
    fc_token *cache; /* the tokens the slot's KV cache holds */
    size_t n_cache, cap_cache;
    size_t n_done; /* prompt tokens the cache holds */
    fc_sampler *smp;
    fc_grammar_matcher *gm; /* the request's grammar over the vocabulary, when it has one */
    fc_detok_stream *ds;
    char *pend; /* generated text held back: it may still become a stop string */
    size_t n_pend, cap_pend;
    fc_token next; /* sampled, to be evaluated at the next decode step */
    uint64_t last_used;
    double t_start, t_first;
} slot;

struct srv_engine {
    const fc_llm_model *m;
    const fc_tokenizer *tok;
    fc_ctx *ctx;
    fc_llm_session *s;
    int n_slots, n_batch, queue_cap;
    int64_t n_ctx;
    int32_t n_vocab;
    fc_token *eog;
    size_t n_eog;
    slot *slots;
    float *logits; /* n_slots x n_vocab */
    fc_llm_batch_entry *batch; /* one step's entries: at most one per slot */

    pthread_t thread;
    pthread_mutex_t mu; /* the queue, stopping, the stats and the slots' public view */
    pthread_cond_t cv;
    srv_req **queue; /* a ring of queue_cap */
    size_t q_head, q_n;
    int stopping;
    srv_stats st;
    uint64_t tick;
};

int64_t srv_engine_n_ctx(const srv_engine *e) { return e->n_ctx; }
int srv_engine_n_slots(const srv_engine *e) { return e->n_slots; }

int srv_engine_submit(srv_engine *e, srv_req *r) {
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    if (e->stopping) rc = -2;
    else if (e->q_n == (size_t)e->queue_cap) rc = -1;
    if (!rc) {
        req_retain(r);
        e->queue[(e->q_head + e->q_n++) % (size_t)e->queue_cap] = r;
        e->st.queued = (int)e->q_n;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void srv_engine_stats(srv_engine *e, srv_stats *st, srv_slot_info *slots) {
    pthread_mutex_lock(&e->mu);
    *st = e->st;
    if (slots)
        for (int i = 0; i < e->n_slots; i++) {
            const slot *sl = &e->slots[i];
            slots[i] = (srv_slot_info){.id = i, .busy = sl->state != SLOT_IDLE, .n_cache = (int64_t)sl->n_cache};
            if (sl->req) {
                slots[i].req_id = sl->req->id;
                slots[i].n_prompt = (int64_t)sl->req->n_prompt;
                slots[i].n_gen = sl->req->n_gen;
            }
        }
    pthread_mutex_unlock(&e->mu);
}

/* ---- output to a request ---- */
static void req_emit(srv_req *r, const char *s, size_t n) {
    if (!n) return;
    pthread_mutex_lock(&r->mu);
    if (!fc_grow((void **)&r->text, &r->cap_text, r->n_text + n + 1, 1)) {
        memcpy(r->text + r->n_text, s, n);
        r->n_text += n;
        r->text[r->n_text] = 0;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void req_finish(srv_req *r, srv_finish f, const char *error) {
    pthread_mutex_lock(&r->mu);
    r->finish = f;
    if (error) snprintf(r->error, sizeof r->error, "%s", error);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* ---- slots ---- */
static int cache_push(slot *sl, const fc_token *t, size_t n) {
    if (fc_grow((void **)&sl->cache, &sl->cap_cache, sl->n_cache + n, sizeof *t)) return -1;
    memcpy(sl->cache + sl->n_cache, t, n * sizeof *t);
    sl->n_cache += n;
    return 0;
}

/* End the slot's request (the slot keeps its cache for the next one). */
static void note_stop(srv_req *r, const char *pend, size_t n, size_t at);

static void slot_end(srv_engine *e, slot *sl, srv_finish f, const char *error) {
    srv_req *r = sl->req;
    const double t = now_ms();
    if (f == SRV_FINISH_STOP || f == SRV_FINISH_LENGTH) {
        /* what the detokenizer and the stop-string scan hold back is final now */
        const char *p;
        size_t n;
        int hit = 0;
        if (fc_detok_stream_flush(e->ctx, sl->ds, &p, &n) == FC_OK && n &&
            !fc_grow((void **)&sl->pend, &sl->cap_pend, sl->n_pend + n, 1)) {
            memcpy(sl->pend + sl->n_pend, p, n);
            sl->n_pend += n;
        }
        size_t emit = sl->n_pend;
        hit = fc_chat_stop_scan(sl->pend, sl->n_pend, (const char *const *)r->gp.stop, r->gp.n_stop, &emit);
        if (!hit) emit = sl->n_pend;
        else f = SRV_FINISH_STOP, note_stop(r, sl->pend, sl->n_pend, emit);
        req_emit(r, sl->pend, emit);
    }
    sl->n_pend = 0;
    pthread_mutex_lock(&r->mu);
    r->t_gen_ms = sl->t_first > 0 ? t - sl->t_first : 0;
    pthread_mutex_unlock(&r->mu);
    fc_sampler_free(sl->smp);
    fc_grammar_matcher_free(sl->gm);
    sl->gm = NULL;
    sl->smp = NULL;
    fc_detok_stream_free(sl->ds);
    sl->ds = NULL;
    pthread_mutex_lock(&e->mu);
    if (f == SRV_FINISH_ERROR && atomic_load(&r->cancelled)) e->st.requests_cancelled++;
    else e->st.requests_done++;
    e->st.predicted_tokens += (uint64_t)r->n_gen;
    e->st.predicted_ms += r->t_gen_ms;
    e->st.busy_slots--;
    sl->state = SLOT_IDLE;
    sl->req = NULL;
    sl->last_used = ++e->tick;
    pthread_mutex_unlock(&e->mu);
    req_finish(r, f, error);
    srv_req_release(r);
}

static int common_prefix(const fc_token *a, size_t na, const fc_token *b, size_t nb) {
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    return (int)k;
}

/* Give r the idle slot whose cache shares the longest prefix with its
 * prompt (the least recently used among equals). Called with e->mu held;
 * returns the slot or NULL when none is idle. */
static slot *pick_slot(srv_engine *e, const srv_req *r) {
    slot *best = NULL;
    int best_k = -1;
    for (int i = 0; i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        if (sl->state != SLOT_IDLE) continue;
        const int k = common_prefix(sl->cache, sl->n_cache, r->prompt, r->n_prompt);
        if (k > best_k || (k == best_k && sl->last_used < best->last_used)) {
            best = sl;
            best_k = k;
        }
    }
    return best;
}

/* Start r on sl (outside e->mu). 0, or -1 after ending the request. */
static int slot_start(srv_engine *e, slot *sl, srv_req *r) {
    size_t keep = r->gp.no_cache ? 0 : (size_t)common_prefix(sl->cache, sl->n_cache, r->prompt, r->n_prompt);
    if (keep == r->n_prompt) keep--; /* the last position is evaluated again for its logits */
    char why[300] = {0};
    fc_ctx_clear_error(e->ctx);
    if (fc_llm_session_truncate_seq(e->ctx, e->s, sl->id, (int64_t)keep) != FC_OK) {
        snprintf(why, sizeof why, "%s", fc_ctx_error(e->ctx));
        keep = 0;
        fc_llm_session_truncate_seq(e->ctx, e->s, sl->id, 0);
    }
    sl->n_cache = keep;
    sl->n_done = keep;
    sl->smp = fc_sampler_new(e->ctx, &r->gp.sp);
    /* Mistral's calls open with the [TOOL_CALLS] control token: its text goes into the reply,
     * where the tool splitter reads it (serve/tools.c) */
    sl->ds = fc_detok_stream_new(e->ctx, e->tok,
                                 r->gp.tool_format == (int)FC_CHAT_TOOLS_MISTRAL ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0);
    sl->gm = r->gp.grammar ? fc_grammar_matcher_new(e->ctx, r->gp.grammar, e->tok, e->eog, e->n_eog) : NULL;
    if (sl->gm && r->gp.trigger && fc_grammar_matcher_set_trigger(sl->gm, r->gp.trigger) != FC_OK) {
        fc_grammar_matcher_free(sl->gm);
        sl->gm = NULL;
    }
    sl->n_pend = 0;
    sl->t_start = now_ms();
    sl->t_first = 0;
    pthread_mutex_lock(&r->mu);
    r->started = 1;
    r->slot = sl->id;
    r->n_cached = (int64_t)keep;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&e->mu);
    e->st.cached_tokens += keep;
    pthread_mutex_unlock(&e->mu);
    if (!sl->smp || !sl->ds || (r->gp.grammar && !sl->gm)) {
        snprintf(why, sizeof why, "%s", fc_ctx_error(e->ctx));
        slot_end(e, sl, SRV_FINISH_ERROR, why);
        return -1;
    }
    /* penalties see the prompt, as in llama.cpp's server */
    for (size_t i = 0; i < r->n_prompt; i++) fc_sampler_accept(sl->smp, r->prompt[i]);
    sl->state = SLOT_PREFILL;
    return 0;
}

static void record_logprobs(srv_req *r, const float *row, int32_t nv, fc_token t) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < nv; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < nv; i++) sum += exp((double)row[i] - mx);
    const double lse = mx + log(sum);
    srv_logprob lp = {.token = t, .logprob = (float)(row[t] - lse)};
    /* the top alternatives by insertion into a short sorted list */
    const int k = r->gp.top_logprobs;
    for (int32_t i = 0; i < nv && k > 0; i++) {
        const float v = row[i];
        if (lp.n_top == k && v <= lp.top[k - 1].logprob) continue;
        int j = lp.n_top < k ? lp.n_top++ : k - 1;
        while (j > 0 && lp.top[j - 1].logprob < v) {
            lp.top[j] = lp.top[j - 1];
            j--;
        }
        lp.top[j] = (srv_top){i, v};
    }
    for (int j = 0; j < lp.n_top; j++) lp.top[j].logprob = (float)(lp.top[j].logprob - lse);
    pthread_mutex_lock(&r->mu);
    if (!fc_grow((void **)&r->lp, &r->cap_lp, r->n_lp + 1, sizeof lp)) r->lp[r->n_lp++] = lp;
    pthread_mutex_unlock(&r->mu);
}

static int is_eog(const srv_engine *e, fc_token t) {
    for (size_t i = 0; i < e->n_eog; i++)
        if (e->eog[i] == t) return 1;
    return 0;
}

/* Which stop string starts at pend[at] (the scan cut the text there). */
static void note_stop(srv_req *r, const char *pend, size_t n, size_t at) {
    for (size_t k = 0; k < r->gp.n_stop; k++) {
        const size_t m = strlen(r->gp.stop[k]);
        if (at + m <= n && !memcmp(pend + at, r->gp.stop[k], m)) {
            pthread_mutex_lock(&r->mu);
            r->stop_index = (int)k;
            pthread_mutex_unlock(&r->mu);
            return;
        }
    }
}

/* Sample the slot's next token from its logits row and route the text. */
static void slot_sample(srv_engine *e, slot *sl, const float *row) {
    srv_req *r = sl->req;
    const fc_token_filter filt = sl->gm ? fc_grammar_matcher_filter(sl->gm) : (fc_token_filter){0};
    const fc_token t = fc_sampler_sample_filtered(sl->smp, row, e->n_vocab, sl->gm ? &filt : NULL);
    if (t == FC_TOKEN_NONE || (sl->gm && fc_grammar_matcher_accept(sl->gm, t) != FC_OK)) {
        slot_end(e, sl, SRV_FINISH_ERROR, fc_ctx_error(e->ctx));
        return;
    }
    fc_sampler_accept(sl->smp, t);
    if (!sl->t_first) sl->t_first = now_ms();
    if (r->gp.logprobs) record_logprobs(r, row, e->n_vocab, t);
    pthread_mutex_lock(&r->mu);
    r->n_gen++;
    pthread_mutex_unlock(&r->mu);
    if (is_eog(e, t)) {
        slot_end(e, sl, SRV_FINISH_STOP, NULL);
        return;
    }
    const char *piece;
    size_t n;
    if (fc_detok_stream_push(e->ctx, sl->ds, t, &piece, &n) != FC_OK ||
        fc_grow((void **)&sl->pend, &sl->cap_pend, sl->n_pend + n + 1, 1)) {
        slot_end(e, sl, SRV_FINISH_ERROR, "detokenizing failed (out of memory)");
        return;
    }
    memcpy(sl->pend + sl->n_pend, piece, n);
    sl->n_pend += n;
    size_t emit;
    const int hit = fc_chat_stop_scan(sl->pend, sl->n_pend, (const char *const *)r->gp.stop, r->gp.n_stop, &emit);
    req_emit(r, sl->pend, emit);
    memmove(sl->pend, sl->pend + emit, sl->n_pend - emit);
    sl->n_pend -= emit;
    if (hit) {
        /* the stop string and what follows are never shown: drop them and
         * whatever the detokenizer still holds */
        note_stop(r, sl->pend, sl->n_pend, 0);
        sl->n_pend = 0;
        fc_detok_stream_flush(e->ctx, sl->ds, &piece, &n);
        slot_end(e, sl, SRV_FINISH_STOP, NULL);
        return;
    }
    if (sl->gm && fc_grammar_matcher_done(sl->gm)) { /* only the end token can follow */
        slot_end(e, sl, SRV_FINISH_STOP, NULL);
        return;
    }
    if ((r->gp.max_tokens > 0 && r->n_gen >= r->gp.max_tokens) || (int64_t)sl->n_cache >= e->n_ctx) {
        slot_end(e, sl, SRV_FINISH_LENGTH, NULL);
        return;
    }
    sl->next = t;
    sl->state = SLOT_GEN;
}

/* One forward for the step: a decode row for every generating slot and, in
 * the rows left of n_batch, the next prompt chunks of the slots still
 * reading their prompts (the oldest request first). The weights are read
 * once for all of them. */
static void step(srv_engine *e) {
    size_t n = 0;
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].state == SLOT_GEN)
            e->batch[n++] = (fc_llm_batch_entry){.seq = i, .tokens = &e->slots[i].next, .n = 1,
                                                 .logits = FC_LLM_LOGITS_LAST};
    const size_t n_dec = n;
    int budget = e->n_batch > (int)n_dec ? e->n_batch - (int)n_dec : 1;
    for (;;) {
        slot *sl = NULL;
        for (int i = 0; i < e->n_slots; i++) {
            slot *c = &e->slots[i];
            int taken = 0;
            for (size_t k = n_dec; k < n && !taken; k++) taken = e->batch[k].seq == i;
            if (c->state == SLOT_PREFILL && !taken && (!sl || c->req->id < sl->req->id)) sl = c;
        }
        if (!sl || budget <= 0) break;
        size_t k = sl->req->n_prompt - sl->n_done;
        if (k > (size_t)budget) k = (size_t)budget;
        const int last = sl->n_done + k == sl->req->n_prompt;
        e->batch[n++] = (fc_llm_batch_entry){.seq = sl->id, .tokens = sl->req->prompt + sl->n_done, .n = k,
                                             .logits = last ? FC_LLM_LOGITS_LAST : FC_LLM_LOGITS_NONE};
        budget -= (int)k;
    }
    if (!n) return;
    fc_ctx_clear_error(e->ctx);
    if (fc_llm_session_eval_batch(e->ctx, e->s, e->batch, n, e->logits) != FC_OK) {
        /* the session is as it was: every slot of the step ends */
        char why[300];
        snprintf(why, sizeof why, "evaluation failed: %s", fc_ctx_error(e->ctx));
        for (size_t k = 0; k < n; k++) slot_end(e, &e->slots[e->batch[k].seq], SRV_FINISH_ERROR, why);
        return;
    }
    const float *row = e->logits;
    for (size_t k = 0; k < n; k++) {
        const fc_llm_batch_entry *b = &e->batch[k];
        slot *sl = &e->slots[b->seq];
        const float *lg = row;
        if (b->logits == FC_LLM_LOGITS_LAST) row += e->n_vocab;
        if (cache_push(sl, b->tokens, b->n)) {
            /* the cache holds tokens we cannot record: forget the slot's prefix */
            fc_llm_session_truncate_seq(e->ctx, e->s, sl->id, 0);
            sl->n_cache = 0;
            slot_end(e, sl, SRV_FINISH_ERROR, "out of memory");
            continue;
        }
        if (k < n_dec) {
            slot_sample(e, sl, lg);
            continue;
        }
        sl->n_done += b->n;
        pthread_mutex_lock(&e->mu);
        e->st.prompt_tokens += b->n;
        pthread_mutex_unlock(&e->mu);
        if (b->logits == FC_LLM_LOGITS_LAST) {
            const double t = now_ms();
            srv_req *r = sl->req;
            pthread_mutex_lock(&r->mu);
            r->t_prompt_ms = t - sl->t_start;
            pthread_mutex_unlock(&r->mu);
            pthread_mutex_lock(&e->mu);
            e->st.prompt_ms += t - sl->t_start;
            pthread_mutex_unlock(&e->mu);
            slot_sample(e, sl, lg);
        }
    }
}

/* Drop cancelled requests from the queue (with e->mu held). */
static void queue_sweep(srv_engine *e) {
    size_t w = 0;
    for (size_t i = 0; i < e->q_n; i++) {
        srv_req *r = e->queue[(e->q_head + i) % (size_t)e->queue_cap];
        if (atomic_load(&r->cancelled)) {
            e->st.requests_cancelled++;
            req_finish(r, SRV_FINISH_ERROR, "cancelled");
            srv_req_release(r);
            continue;
        }
        e->queue[(e->q_head + w++) % (size_t)e->queue_cap] = r;
    }
    e->q_n = w;
    e->st.queued = (int)w;
}

static void *engine_main(void *arg) {
    srv_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->stopping) break;
        queue_sweep(e);
        /* requests join between steps */
        srv_req *start_r[256];
        slot *start_s[256];
        int n_start = 0;
        while (e->q_n) {
            slot *sl = pick_slot(e, e->queue[e->q_head]);
            if (!sl) break;
            srv_req *r = e->queue[e->q_head];
            e->q_head = (e->q_head + 1) % (size_t)e->queue_cap;
            e->q_n--;
            sl->state = SLOT_PREFILL; /* reserved: pick_slot must not give it twice */
            sl->req = r;
            e->st.busy_slots++;
            start_r[n_start] = r;
            start_s[n_start++] = sl;
        }
        e->st.queued = (int)e->q_n;
        int active = 0;
        for (int i = 0; i < e->n_slots; i++) active += e->slots[i].state != SLOT_IDLE;
        if (!active) {
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        for (int k = 0; k < n_start; k++) slot_start(e, start_s[k], start_r[k]);
        for (int i = 0; i < e->n_slots; i++) {
            slot *sl = &e->slots[i];
            if (sl->state != SLOT_IDLE && atomic_load(&sl->req->cancelled))
                slot_end(e, sl, SRV_FINISH_ERROR, "cancelled");
        }
        step(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    /* shutting down: everything still here ends now */
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].state != SLOT_IDLE) {
            srv_req_cancel(e->slots[i].req);
            slot_end(e, &e->slots[i], SRV_FINISH_ERROR, "the server is shutting down");
        }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->q_n; i++) {
        srv_req *r = e->queue[(e->q_head + i) % (size_t)e->queue_cap];
        req_finish(r, SRV_FINISH_ERROR, "the server is shutting down");
        srv_req_release(r);
    }
    e->q_n = 0;
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void engine_free(srv_engine *e) {
    if (!e) return;
    for (int i = 0; e->slots && i < e->n_slots; i++) {
        free(e->slots[i].cache);
        free(e->slots[i].pend);
        fc_sampler_free(e->slots[i].smp);
        fc_grammar_matcher_free(e->slots[i].gm);
        fc_detok_stream_free(e->slots[i].ds);
    }
    free(e->slots);
    if (e->s) fc_llm_session_free(e->s);
    if (e->ctx) fc_ctx_free(e->ctx);
    free(e->logits);
    free(e->batch);
    free(e->queue);
    free(e->eog);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

srv_engine *srv_engine_start(const fc_llm_model *m, const srv_engine_options *opt, char *err, size_t errlen) {
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    e->m = m;
    e->tok = fc_llm_model_tokenizer(m);
    e->n_slots = opt->n_slots > 0 ? opt->n_slots : 1;
    e->n_batch = opt->n_batch > 0 ? opt->n_batch : 512;
    e->queue_cap = opt->queue_cap > 0 ? opt->queue_cap : 64;
    e->n_ctx = opt->n_ctx > 0 ? opt->n_ctx : hp->n_ctx_train;
    e->n_vocab = (int32_t)hp->n_vocab;
    if (e->n_slots > 256) {
        snprintf(err, errlen, "%d slots: at most 256", e->n_slots);
        engine_free(e);
        return NULL;
    }
    fc_ctx_options co = {.threads = opt->threads};
    e->ctx = fc_ctx_new(&co, err, errlen);
    if (!e->ctx) {
        engine_free(e);
        return NULL;
    }
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = e->n_ctx;
    so.n_seq = e->n_slots;
    if (opt->kv_type) so.kv_type = opt->kv_type;
    e->s = fc_llm_session_new_ex(e->ctx, m, &so);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->logits = malloc((size_t)e->n_slots * (size_t)e->n_vocab * sizeof *e->logits);
    e->batch = malloc((size_t)e->n_slots * sizeof *e->batch);
    e->queue = malloc((size_t)e->queue_cap * sizeof *e->queue);
    e->eog = malloc((opt->n_eog + 1) * sizeof *e->eog);
    if (!e->s) {
        snprintf(err, errlen, "%s", fc_ctx_error(e->ctx));
        engine_free(e);
        return NULL;
    }
    if (!e->slots || !e->logits || !e->batch || !e->queue || !e->eog) {
        snprintf(err, errlen, "out of memory");
        engine_free(e);
        return NULL;
    }
    if (opt->n_eog) memcpy(e->eog, opt->eog, opt->n_eog * sizeof *e->eog);
    e->n_eog = opt->n_eog;
    for (int i = 0; i < e->n_slots; i++) e->slots[i].id = i;
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        snprintf(err, errlen, "cannot start the engine's thread");
        engine_free(e);
        return NULL;
    }
    return e;
}

void srv_engine_stop(srv_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    const int was = e->stopping;
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (!was) pthread_join(e->thread, NULL);
}

void srv_engine_free(srv_engine *e) {
    srv_engine_stop(e);
    engine_free(e);
}
