/* SPDX-License-Identifier: MIT */
/* Fucina llm: multi-turn conversations (include/fucina/chat.h).
 *
 * KV reuse is by tokens, as llama.cpp's server does it: the whole
 * conversation is rendered and tokenized each turn (fc_chat_tokenize; cheap
 * next to the forward) and compared with the tokens the session holds; the
 * session is truncated to the longest common prefix and only the rest is
 * evaluated.
 * Comparing tokens rather than text matters twice: sampled tokens need not
 * be the canonical BPE of their text, and Qwen3's template re-renders
 * earlier assistant turns without their <think> part; both simply shorten
 * the common prefix. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ctx.h"
#include "llm/chat_internal.h"
#include "fucina/grammar.h"
#include "llm/session.h"

struct fc_chat {
    fc_ctx *ctx; /* the sampler's (it reports errors there) */
    const fc_llm_model *m;
    fc_llm_session *s;
    fc_chat_template tmpl;
    unsigned flags;
    int32_t max_tokens;
    char **stop;
    size_t n_stop;
    fc_sampler *smp;
    fc_grammar_matcher *gm; /* the reply's grammar, when asked for */
    fc_detok_stream *ds;
    fc_chat_message *msgs; /* contents are owned copies */
    size_t n_msgs, cap_msgs;
    fc_token *cache; /* what the session holds: positions 0..n_cache-1 */
    size_t n_cache, cap_cache;
    float *logits; /* n_vocab */
    fc_token eog[FC_CHAT_MAX_EOG_TOKENS]; /* EOS and the family's end-of-turn tokens */
    size_t n_eog;
};

fc_chat_options fc_chat_default_options(void) {
    return (fc_chat_options){.tmpl = FC_CHAT_TEMPLATE_CHATML, .sampling = fc_sampler_default_params()};
}

static void free_msgs(fc_chat *c) {
    for (size_t i = 0; i < c->n_msgs; i++) free((char *)c->msgs[i].content);
    c->n_msgs = 0;
}

void fc_chat_free(fc_chat *c) {
    if (!c) return;
    free_msgs(c);
    free(c->msgs);
    for (size_t i = 0; i < c->n_stop; i++) free(c->stop[i]);
    free(c->stop);
    fc_sampler_free(c->smp);
    fc_grammar_matcher_free(c->gm);
    fc_detok_stream_free(c->ds);
    free(c->cache);
    free(c->logits);
    free(c);
}

static char *dup_str(const char *s) {
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

fc_chat *fc_chat_new(fc_ctx *ctx, const fc_llm_model *m, fc_llm_session *s, const fc_chat_options *opt) {
    if (!ctx) return NULL;
    if (!m || !s) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_new: NULL %s", m ? "session" : "model");
    const fc_chat_options o = opt ? *opt : fc_chat_default_options();
    if (!fc_chat_template_name(o.tmpl))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_new: template %d out of range", (int)o.tmpl);
    if (o.flags & ~(FC_CHAT_ADD_GENERATION_PROMPT | FC_CHAT_NO_THINK | FC_CHAT_SPECIAL_IN_CONTENT))
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "fc_chat_new: unknown flags 0x%x (known: FC_CHAT_NO_THINK, FC_CHAT_SPECIAL_IN_CONTENT)",
                       o.flags & ~(FC_CHAT_ADD_GENERATION_PROMPT | FC_CHAT_NO_THINK | FC_CHAT_SPECIAL_IN_CONTENT));
    if (o.n_stop && !o.stop)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_new: n_stop %zu with NULL stop", o.n_stop);
    for (size_t i = 0; i < o.n_stop; i++)
        if (!o.stop[i]) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_new: stop string %zu is NULL", i);
    fc_chat *c = calloc(1, sizeof *c);
    if (!c) return fc_fail(ctx, FC_ERR_OOM, "fc_chat_new: out of memory");
    c->ctx = ctx;
    c->m = m;
    c->s = s;
    c->tmpl = o.tmpl;
    c->flags = o.flags;
    c->max_tokens = o.max_tokens;
    const fc_tokenizer *tk = fc_llm_model_tokenizer(m);
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    c->logits = malloc((size_t)nv * sizeof *c->logits);
    c->stop = o.n_stop ? calloc(o.n_stop, sizeof *c->stop) : NULL;
    if (!c->logits || (o.n_stop && !c->stop)) goto oom;
    for (size_t i = 0; i < o.n_stop; i++) {
        if (!(c->stop[i] = dup_str(o.stop[i]))) goto oom;
        c->n_stop = i + 1;
    }
    c->smp = fc_sampler_new(ctx, &o.sampling);
    c->ds = c->smp ? fc_detok_stream_new(ctx, tk, 0) : NULL;
    if (!c->smp || !c->ds) {
        fc_chat_free(c);
        return NULL;
    }
    if (fc_chat_template_eog_tokens(ctx, tk, o.tmpl, c->eog, FC_CHAT_MAX_EOG_TOKENS, &c->n_eog) != FC_OK ||
        (o.grammar && !(c->gm = fc_grammar_matcher_new(ctx, o.grammar, tk, c->eog, c->n_eog))) ||
        (c->gm && o.grammar_trigger && fc_grammar_matcher_set_trigger(c->gm, o.grammar_trigger) != FC_OK)) {
        fc_chat_free(c);
        return NULL;
    }
    fc_llm_session_reset(s);
    return c;
oom:
    fc_chat_free(c);
    return fc_fail(ctx, FC_ERR_OOM, "fc_chat_new: out of memory");
}

fc_status fc_chat_add(fc_ctx *ctx, fc_chat *c, fc_chat_role role, const char *content) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!c || !content || !fc_chat_role_name(role)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_add: %s",
                !c         ? "NULL chat"
                : !content ? "NULL content"
                           : "role out of range");
        return FC_ERR_INVALID_ARG;
    }
    if (c->n_msgs == c->cap_msgs) {
        const size_t cap = c->cap_msgs ? 2 * c->cap_msgs : 8;
        fc_chat_message *p = realloc(c->msgs, cap * sizeof *p);
        if (!p) goto oom;
        c->msgs = p;
        c->cap_msgs = cap;
    }
    char *d = dup_str(content);
    if (!d) goto oom;
    c->msgs[c->n_msgs++] = (fc_chat_message){.role = role, .content = d};
    return FC_OK;
oom:
    fc_fail(ctx, FC_ERR_OOM, "fc_chat_add: out of memory");
    return FC_ERR_OOM;
}

const fc_chat_message *fc_chat_messages(const fc_chat *c, size_t *n) {
    if (n) *n = c ? c->n_msgs : 0;
    return c ? c->msgs : NULL;
}

const fc_token *fc_chat_tokens(const fc_chat *c, size_t *n) {
    if (n) *n = c ? c->n_cache : 0;
    return c ? c->cache : NULL;
}

void fc_chat_clear(fc_chat *c) {
    if (!c) return;
    free_msgs(c);
    c->n_cache = 0;
    fc_llm_session_reset(c->s);
    fc_sampler_reset(c->smp);
}

static int is_eog(const fc_chat *c, fc_token t) {
    for (size_t i = 0; i < c->n_eog; i++)
        if (c->eog[i] == t) return 1;
    return 0;
}

/* Append one token to the record of what the session holds. */
static int cache_push(fc_chat *c, fc_token t) {
    if (c->n_cache == c->cap_cache) {
        const size_t cap = c->cap_cache ? 2 * c->cap_cache : 256;
        fc_token *p = realloc(c->cache, cap * sizeof *p);
        if (!p) return -1;
        c->cache = p;
        c->cap_cache = cap;
    }
    c->cache[c->n_cache++] = t;
    return 0;
}

const float *fc_chat_prefill(fc_ctx *ctx, fc_chat *c, fc_chat_stats *stats) {
    if (!ctx) return NULL;
    if (!c) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_prefill: NULL chat");
    if (stats) *stats = (fc_chat_stats){0};
    fc_token *toks = NULL;
    size_t nt = 0;
    const float *ret = NULL;
    /* the template's markup becomes its control tokens; the contents are text
     * (unless FC_CHAT_SPECIAL_IN_CONTENT: llama.cpp parses them too) */
    if (fc_chat_tokenize(ctx, fc_llm_model_tokenizer(c->m), c->tmpl, c->msgs, c->n_msgs,
                         c->flags | FC_CHAT_ADD_GENERATION_PROMPT, &toks, &nt) != FC_OK)
        goto done;
    if (nt == 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_prefill: the rendered conversation has no tokens");
        goto done;
    }
    if ((int64_t)nt > c->s->n_ctx) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "fc_chat_prefill: the conversation (%zu tokens) does not fit the context (%lld)", nt,
                (long long)c->s->n_ctx);
        goto done;
    }
    /* someone else evaluated on the session: what it holds is unknown */
    if (fc_llm_session_pos(c->s) != (int64_t)c->n_cache) {
        fc_llm_session_reset(c->s);
        c->n_cache = 0;
    }
    size_t keep = 0;
    while (keep < c->n_cache && keep < nt && c->cache[keep] == toks[keep]) keep++;
    if (keep == nt) keep = nt - 1; /* the last position is evaluated again for its logits */
    if (fc_llm_session_truncate(ctx, c->s, (int64_t)keep) != FC_OK) goto done;
    c->n_cache = keep;
    if (fc_llm_session_eval_ex(ctx, c->s, toks + keep, nt - keep, FC_LLM_LOGITS_LAST, c->logits) != FC_OK) goto done;
    for (size_t i = keep; i < nt; i++) {
        if (cache_push(c, toks[i])) {
            /* the session holds more than we can record: start over next time */
            fc_llm_session_reset(c->s);
            c->n_cache = 0;
            fc_fail(ctx, FC_ERR_OOM, "fc_chat_prefill: out of memory");
            goto done;
        }
        fc_sampler_accept(c->smp, toks[i]);
    }
    if (stats) {
        stats->n_prompt = (int64_t)nt;
        stats->n_reused = (int64_t)keep;
        stats->n_eval = (int64_t)(nt - keep);
    }
    ret = c->logits;
done:
    fc_tokens_free(toks);
    return ret;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Emit pend[0..n) through the callback; 1 when it asks to stop. */
static int emit(fc_chat_on_text on_text, void *user, const char *p, size_t n) {
    return n && on_text ? on_text(p, n, user) != 0 : 0;
}

fc_status fc_chat_generate(fc_ctx *ctx, fc_chat *c, fc_chat_on_text on_text, void *user, const char **reply,
                           fc_chat_stats *stats) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!c) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_generate: NULL chat");
        return FC_ERR_INVALID_ARG;
    }
    if (reply) *reply = NULL;
    fc_chat_stats st;
    const double t0 = now_ms();
    const float *logits = fc_chat_prefill(ctx, c, &st);
    if (!logits) {
        if (stats) *stats = (fc_chat_stats){0};
        return fc_ctx_status(ctx);
    }
    const double t1 = now_ms();
    st.prompt_ms = t1 - t0;
    const int32_t nv = (int32_t)fc_llm_model_hparams(c->m)->n_vocab;
    const char *const *stop = (const char *const *)c->stop;
    fc_chat_buf text = {0}; /* the reply so far: [0, sent) emitted, the rest held back */
    size_t sent = 0;
    fc_status rc = FC_OK;
    int done = 0;
    st.stop = FC_CHAT_STOP_MAX_TOKENS;
    if (fc_chat_buf_put(&text, "", 0)) goto oom;
    /* the stream may hold an incomplete character from an earlier reply cut short */
    {
        const char *p;
        size_t n;
        if ((rc = fc_detok_stream_flush(ctx, c->ds, &p, &n)) != FC_OK) goto out;
    }
    fc_grammar_matcher_reset(c->gm);
    const fc_token_filter filt = c->gm ? fc_grammar_matcher_filter(c->gm) : (fc_token_filter){0};
    while (!done) {
        const fc_token t = fc_sampler_sample_filtered(c->smp, logits, nv, c->gm ? &filt : NULL);
        if (t == FC_TOKEN_NONE) {
            /* the sampler reports to the ctx the chat was made with */
            if (ctx != c->ctx && fc_ctx_status(ctx) == FC_OK)
                fc_fail(ctx, fc_ctx_status(c->ctx), "%s", fc_ctx_error(c->ctx));
            rc = fc_ctx_status(ctx);
            goto out;
        }
        st.n_gen++;
        fc_sampler_accept(c->smp, t);
        if (c->gm && (rc = fc_grammar_matcher_accept(c->gm, t)) != FC_OK) {
            if (ctx != c->ctx && fc_ctx_status(ctx) == FC_OK) fc_fail(ctx, rc, "%s", fc_ctx_error(c->ctx));
            goto out;
        }
        if (is_eog(c, t)) {
            st.stop = FC_CHAT_STOP_EOG;
            break;
        }
        const char *piece;
        size_t n;
        if ((rc = fc_detok_stream_push(ctx, c->ds, t, &piece, &n)) != FC_OK) goto out;
        if (fc_chat_buf_put(&text, piece, n)) goto oom;
        size_t e;
        const int hit = fc_chat_stop_scan(text.p + sent, text.n - sent, stop, c->n_stop, &e);
        if (emit(on_text, user, text.p + sent, e)) {
            st.stop = FC_CHAT_STOP_CALLBACK;
            text.n = sent + e; /* the reply is what the caller saw */
            done = 1;
        } else if (hit) {
            st.stop = FC_CHAT_STOP_STRING;
            text.n = sent + e;
            done = 1;
        }
        sent += e;
        if (done) break;
        if (c->gm && fc_grammar_matcher_done(c->gm)) { /* only the end token can follow */
            st.stop = FC_CHAT_STOP_EOG;
            break;
        }
        /* the last token is left for the next turn's prefill to evaluate */
        if (c->max_tokens > 0 && st.n_gen >= c->max_tokens) break; /* MAX_TOKENS */
        if (fc_llm_session_pos(c->s) >= c->s->n_ctx) {
            st.stop = FC_CHAT_STOP_CONTEXT;
            break;
        }
        if ((rc = fc_llm_session_eval_ex(ctx, c->s, &t, 1, FC_LLM_LOGITS_LAST, c->logits)) != FC_OK) goto out;
        if (cache_push(c, t)) {
            fc_llm_session_reset(c->s);
            c->n_cache = 0;
            goto oom;
        }
        logits = c->logits;
    }
    {
        /* the end: what the stream holds back is final now, and so is any
         * text held for a stop string that can no longer complete */
        const char *p;
        size_t n;
        if ((rc = fc_detok_stream_flush(ctx, c->ds, &p, &n)) != FC_OK) goto out;
        if (st.stop != FC_CHAT_STOP_STRING && st.stop != FC_CHAT_STOP_CALLBACK) {
            if (fc_chat_buf_put(&text, p, n)) goto oom;
            size_t e;
            if (fc_chat_stop_scan(text.p + sent, text.n - sent, stop, c->n_stop, &e)) {
                st.stop = FC_CHAT_STOP_STRING;
                text.n = sent + e;
            }
            emit(on_text, user, text.p + sent, text.n - sent);
        }
    }
    text.p[text.n] = 0;
    if ((rc = fc_chat_add(ctx, c, FC_CHAT_ASSISTANT, text.p)) != FC_OK) goto out;
    if (reply) *reply = c->msgs[c->n_msgs - 1].content;
    st.gen_ms = now_ms() - t1;
    if (stats) *stats = st;
    goto out;
oom:
    fc_fail(ctx, FC_ERR_OOM, "fc_chat_generate: out of memory");
    rc = FC_ERR_OOM;
out:
    fc_chat_buf_free(&text);
    return rc;
}
