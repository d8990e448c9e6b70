/* SPDX-License-Identifier: MIT */
/* Fucina llm: sessions: options, the per-sequence positions, truncate, and
 * the public eval entry points (validation; the forward is src/llm/forward.c,
 * the cache src/llm/kv_cache.c). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/ops.h"
#include "llm/forward.h"
#include "llm/session.h"

void fc_llm_session_free(fc_llm_session *s) {
    if (!s) return;
    fc_llm_kv_free(&s->kv);
    free(s->pos);
    free(s->posv);
    free(s->chunk_segs);
    free(s->rows);
    free(s);
}

fc_llm_session_options fc_llm_session_default_options(void) {
    return (fc_llm_session_options){.n_ctx = 0, .kv_type = FC_F16, .n_seq = 1};
}

fc_llm_session *fc_llm_session_new(fc_ctx *ctx, const fc_llm_model *m, int64_t n_ctx) {
    fc_llm_session_options o = fc_llm_session_default_options();
    o.n_ctx = n_ctx;
    o.kv_type = FC_F32;
    return fc_llm_session_new_ex(ctx, m, &o);
}

fc_llm_session *fc_llm_session_new_ex(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_session_options *opt) {
    if (!ctx) return NULL;
    if (!m) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_new: NULL model");
    fc_llm_session_options o = opt ? *opt : fc_llm_session_default_options();
    if (o.n_ctx < 0) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_new: n_ctx %lld < 0", (long long)o.n_ctx);
    if (o.n_seq < 1 || o.n_seq > 4096)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_new: n_seq %d out of range [1, 4096]", o.n_seq);
    const fc_llm_hparams *hp = &m->hp;
    fc_llm_session *s = calloc(1, sizeof *s);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_new: out of memory");
    s->m = m;
    s->n_ctx = o.n_ctx ? o.n_ctx : hp->n_ctx_train;
    s->n_seq = o.n_seq;
    s->pos = calloc((size_t)s->n_seq, sizeof *s->pos);
    s->posv = calloc(FC_LLM_CHUNK_ROWS, sizeof *s->posv);
    s->chunk_segs = calloc(FC_LLM_CHUNK_ROWS, sizeof *s->chunk_segs);
    /* rows for a lockstep decode of every sequence (up to a chunk), so decode
     * steps never allocate; a prefill grows them once */
    const int64_t rows = s->n_seq < FC_LLM_CHUNK_ROWS ? s->n_seq : FC_LLM_CHUNK_ROWS;
    const size_t bytes = (fc_llm_forward_floats(hp, rows) * sizeof(float) + 63) / 64 * 64;
    s->rows = aligned_alloc(64, bytes);
    s->rows_cap = rows;
    if (!s->pos || !s->posv || !s->chunk_segs || !s->rows) {
        fc_llm_session_free(s);
        return fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_new: out of memory");
    }
    if (fc_llm_kv_init(ctx, &s->kv, hp, s->n_ctx, s->n_seq, o.kv_type) != FC_OK) {
        fc_llm_session_free(s);
        return NULL;
    }
    return s;
}

int64_t fc_llm_session_pos(const fc_llm_session *s) { return s ? s->pos[0] : 0; }
int64_t fc_llm_session_seq_pos(const fc_llm_session *s, int seq) {
    return s && seq >= 0 && seq < s->n_seq ? s->pos[seq] : 0;
}
int fc_llm_session_n_seq(const fc_llm_session *s) { return s ? (int)s->n_seq : 0; }
fc_dtype fc_llm_session_kv_type(const fc_llm_session *s) { return s ? s->kv.type : FC_F32; }

void fc_llm_session_reset(fc_llm_session *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n_seq; i++) s->pos[i] = 0;
}

/* The rows past n_pos need no clearing: attention reads rows 0..pos only and
 * the next eval overwrites them. */
fc_status fc_llm_session_truncate_seq(fc_ctx *ctx, fc_llm_session *s, int seq, int64_t n_pos) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_truncate: NULL session");
        return FC_ERR_INVALID_ARG;
    }
    if (seq < 0 || seq >= s->n_seq) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_truncate: sequence %lld out of range [0, %lld)", (long long)seq,
                (long long)s->n_seq);
        return FC_ERR_INVALID_ARG;
    }
    if (n_pos < 0 || n_pos > s->pos[seq]) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_truncate: position %lld out of range [0, %lld] (sequence %d)",
                (long long)n_pos, (long long)s->pos[seq], seq);
        return FC_ERR_INVALID_ARG;
    }
    s->pos[seq] = n_pos;
    return FC_OK;
}

fc_status fc_llm_session_truncate(fc_ctx *ctx, fc_llm_session *s, int64_t n_pos) {
    return fc_llm_session_truncate_seq(ctx, s, 0, n_pos);
}

static fc_status bad(fc_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static fc_status bad(fc_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fc_failv(ctx, FC_ERR_INVALID_ARG, fmt, ap);
    va_end(ap);
    return FC_ERR_INVALID_ARG;
}

/* Tokens in range; FC_OK or an error naming the first bad one. */
static fc_status check_tokens(fc_ctx *ctx, const fc_llm_session *s, const fc_token *tokens, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->hp.n_vocab)
            return bad(ctx, "fc_llm_session_eval: token %lld id %lld out of range [0, %lld)",
                       (long long)i, (long long)tokens[i], (long long)s->m->hp.n_vocab);
    return FC_OK;
}

static fc_status check_which(fc_ctx *ctx, fc_llm_logits which) {
    switch (which) {
    case FC_LLM_LOGITS_ALL:
    case FC_LLM_LOGITS_LAST:
    case FC_LLM_LOGITS_NONE:
        return FC_OK;
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: unknown logits selection %d", (int)which);
    return FC_ERR_INVALID_ARG;
}

fc_status fc_llm_session_eval_out(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                  fc_llm_logits which, float *logits, float *hidden) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    fc_status st = check_which(ctx, which);
    if (st != FC_OK) return st;
    if (!s || !tokens || n == 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval: %s", !s ? "NULL session" : !tokens ? "NULL tokens" : "no tokens");
        return FC_ERR_INVALID_ARG;
    }
    if (seq < 0 || seq >= s->n_seq)
        return bad(ctx, "fc_llm_session_eval: sequence %lld out of range [0, %lld)", (long long)seq,
                   (long long)s->n_seq);
    if ((int64_t)n > s->n_ctx - s->pos[seq])
        return bad(ctx, "fc_llm_session_eval: %lld tokens at position %lld overflow the %lld-position cache",
                   (long long)n, (long long)s->pos[seq], (long long)s->n_ctx);
    if ((st = check_tokens(ctx, s, tokens, n)) != FC_OK) return st;
    const fc_llm_seg seg = {.seq = seq, .pos0 = s->pos[seq], .n = (int64_t)n, .logits = which};
    return fc_llm_forward(ctx, s, &seg, 1, tokens, logits, hidden);
}

fc_status fc_llm_session_eval_seq(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                  fc_llm_logits which, float *logits) {
    return fc_llm_session_eval_out(ctx, s, seq, tokens, n, which, logits, NULL);
}

fc_status fc_llm_session_eval_ex(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n,
                                 fc_llm_logits which, float *logits) {
    return fc_llm_session_eval_seq(ctx, s, 0, tokens, n, which, logits);
}

fc_status fc_llm_session_eval(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n, float *logits) {
    return fc_llm_session_eval_seq(ctx, s, 0, tokens, n, FC_LLM_LOGITS_ALL, logits);
}

/* Segments live on the stack up to this many sequences; more come from the
 * heap (a batch that large is not a steady-state decode worth counting). */
#define SEGS_ON_STACK 64

fc_status fc_llm_session_decode_batch(fc_ctx *ctx, fc_llm_session *s, const int *seqs, const fc_token *tokens,
                                      size_t n, float *logits) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !tokens || n == 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_decode_batch: %s",
                !s ? "NULL session" : !tokens ? "NULL tokens" : "no sequences");
        return FC_ERR_INVALID_ARG;
    }
    if ((int64_t)n > s->n_seq)
        return bad(ctx, "fc_llm_session_decode_batch: %lld sequences, the session has %lld",
                   (long long)n, (long long)s->n_seq);
    fc_llm_seg stack[SEGS_ON_STACK], *segs = n <= SEGS_ON_STACK ? stack : malloc(n * sizeof *segs);
    if (!segs) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_decode_batch: out of memory");
        return FC_ERR_OOM;
    }
    fc_status st = check_tokens(ctx, s, tokens, n);
    for (size_t i = 0; i < n && st == FC_OK; i++) {
        const int64_t q = seqs ? seqs[i] : (int64_t)i;
        if (q < 0 || q >= s->n_seq) {
            st = bad(ctx, "fc_llm_session_decode_batch: entry %lld: sequence %lld out of range [0, %lld)",
                     (long long)i, (long long)q, (long long)s->n_seq);
            break;
        }
        for (size_t j = 0; j < i; j++)
            if (segs[j].seq == q) {
                st = bad(ctx, "fc_llm_session_decode_batch: sequence %lld appears twice (entries %lld and %lld)",
                         (long long)q, (long long)j, (long long)i);
                break;
            }
        if (st == FC_OK && s->pos[q] >= s->n_ctx)
            st = bad(ctx, "fc_llm_session_decode_batch: sequence %lld is full (the cache holds %lld positions)",
                     (long long)q, (long long)s->n_ctx);
        segs[i] = (fc_llm_seg){.seq = q, .pos0 = s->pos[q], .n = 1, .logits = FC_LLM_LOGITS_LAST};
    }
    if (st == FC_OK) st = fc_llm_forward(ctx, s, segs, (int64_t)n, tokens, logits, NULL);
    if (segs != stack) free(segs);
    return st;
}

fc_status fc_llm_session_eval_batch(fc_ctx *ctx, fc_llm_session *s, const fc_llm_batch_entry *b, size_t n,
                                    float *logits) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !b || n == 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval_batch: %s",
                !s ? "NULL session" : !b ? "NULL entries" : "no entries");
        return FC_ERR_INVALID_ARG;
    }
    if ((int64_t)n > s->n_seq)
        return bad(ctx, "fc_llm_session_eval_batch: %lld entries, the session has %lld sequences", (long long)n,
                   (long long)s->n_seq);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const fc_llm_batch_entry *e = &b[i];
        if (e->seq < 0 || e->seq >= s->n_seq)
            return bad(ctx, "fc_llm_session_eval_batch: entry %lld: sequence %lld out of range [0, %lld)",
                       (long long)i, (long long)e->seq, (long long)s->n_seq);
        if (!e->tokens || e->n == 0)
            return bad(ctx, "fc_llm_session_eval_batch: entry %lld: %s", (long long)i,
                       !e->tokens ? "NULL tokens" : "no tokens");
        fc_status st = check_which(ctx, e->logits);
        if (st != FC_OK) return st;
        for (size_t j = 0; j < i; j++)
            if (b[j].seq == e->seq)
                return bad(ctx, "fc_llm_session_eval_batch: sequence %lld appears twice (entries %lld and %lld)",
                           (long long)e->seq, (long long)j, (long long)i);
        if ((int64_t)e->n > s->n_ctx - s->pos[e->seq])
            return bad(ctx, "fc_llm_session_eval_batch: entry %lld: %lld tokens at position %lld overflow the "
                            "%lld-position cache of sequence %lld",
                       (long long)i, (long long)e->n, (long long)s->pos[e->seq], (long long)s->n_ctx,
                       (long long)e->seq);
        if ((st = check_tokens(ctx, s, e->tokens, e->n)) != FC_OK) return st;
        total += e->n;
    }
    fc_llm_seg *segs = malloc(n * sizeof *segs);
    fc_token *toks = malloc(total * sizeof *toks);
    fc_status st = FC_OK;
    if (!segs || !toks) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_eval_batch: out of memory");
        st = FC_ERR_OOM;
    } else {
        for (size_t i = 0, r = 0; i < n; r += b[i].n, i++) {
            segs[i] = (fc_llm_seg){.seq = b[i].seq, .pos0 = s->pos[b[i].seq], .n = (int64_t)b[i].n,
                                   .logits = b[i].logits};
            memcpy(toks + r, b[i].tokens, b[i].n * sizeof *toks);
        }
        st = fc_llm_forward(ctx, s, segs, (int64_t)n, toks, logits, NULL);
    }
    free(segs);
    free(toks);
    return st;
}
