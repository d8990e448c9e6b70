/* SPDX-License-Identifier: MIT */
/* Fucina llm: hidden states and pooled embeddings (fucina/embed.h).
 *
 * The hidden states come out of the one forward (src/llm/forward.c) as a
 * second output beside the logits: the output-normed rows it would project.
 * Pooling and normalization are here, on the host, in double where they
 * sum (a mean over n rows, a norm over n_embd values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/embed.h"
#include "llm/model.h"
#include "llm/session.h"

const char *fc_llm_pooling_name(fc_llm_pooling p)
{
    switch (p) {
    case FC_LLM_POOLING_MODEL: return "model";
    case FC_LLM_POOLING_NONE: return "none";
    case FC_LLM_POOLING_MEAN: return "mean";
    case FC_LLM_POOLING_CLS: return "cls";
    case FC_LLM_POOLING_LAST: return "last";
    }
    return NULL;
}

fc_status fc_llm_model_pooling(fc_ctx *ctx, const fc_llm_model *m, fc_llm_pooling *out)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!m || !out) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_model_pooling: NULL %s", !m ? "model" : "output");
        return FC_ERR_INVALID_ARG;
    }
    /* llama.cpp's enum llama_pooling_type; absent is its hparams default, none */
    switch (m->pooling_type) {
    case -1:
    case 0: *out = FC_LLM_POOLING_NONE; return FC_OK;
    case 1: *out = FC_LLM_POOLING_MEAN; return FC_OK;
    case 2: *out = FC_LLM_POOLING_CLS; return FC_OK;
    case 3: *out = FC_LLM_POOLING_LAST; return FC_OK;
    default: break;
    }
    fc_fail(ctx, FC_ERR_UNSUPPORTED,
            "the model's %s.pooling_type is %lld%s; Fucina pools by none (0), mean (1), cls (2) or last (3): give "
            "the pooling explicitly",
            fc_llm_arch_name(m->hp.arch), (long long)m->pooling_type, m->pooling_type == 4 ? " (rank)" : "");
    return FC_ERR_UNSUPPORTED;
}

fc_status fc_llm_session_eval_hidden(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                     fc_llm_logits which, float *logits, float *hidden)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!hidden && which != FC_LLM_LOGITS_NONE) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_eval_hidden: NULL hidden");
        return FC_ERR_INVALID_ARG;
    }
    return fc_llm_session_eval_out(ctx, s, seq, tokens, n, which, logits, hidden);
}

/* The pooling opt asks for, the model's resolved; FC_OK or an error. */
static fc_status resolve(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_embed_options *opt, fc_llm_pooling *p)
{
    const fc_llm_pooling want = opt ? opt->pooling : FC_LLM_POOLING_MODEL;
    switch (want) {
    case FC_LLM_POOLING_MODEL: return fc_llm_model_pooling(ctx, m, p);
    case FC_LLM_POOLING_NONE:
    case FC_LLM_POOLING_MEAN:
    case FC_LLM_POOLING_CLS:
    case FC_LLM_POOLING_LAST: *p = want; return FC_OK;
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_embed: unknown pooling %d", (int)want);
    return FC_ERR_INVALID_ARG;
}

static fc_status check_norm(fc_ctx *ctx, const char *fn, fc_llm_embd_norm norm, int p)
{
    switch (norm) {
    case FC_LLM_EMBD_NORM_EUCLIDEAN:
    case FC_LLM_EMBD_NORM_NONE:
    case FC_LLM_EMBD_NORM_MAX_ABS: return FC_OK;
    case FC_LLM_EMBD_NORM_P:
        if (p >= 1) return FC_OK;
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: p-norm with p %d; p must be >= 1", fn, p);
        return FC_ERR_INVALID_ARG;
    }
    fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown normalization %d", fn, (int)norm);
    return FC_ERR_INVALID_ARG;
}

fc_status fc_llm_embd_normalize(fc_ctx *ctx, const float *in, float *out, int64_t n, fc_llm_embd_norm norm, int norm_p)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    fc_status st = check_norm(ctx, "fc_llm_embd_normalize", norm, norm_p);
    if (st != FC_OK) return st;
    if (n < 0 || (n > 0 && (!in || !out))) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_embd_normalize: %s", n < 0 ? "negative length" : "NULL vector");
        return FC_ERR_INVALID_ARG;
    }
    double sum = 0.0;
    switch (norm) {
    case FC_LLM_EMBD_NORM_NONE: sum = 1.0; break;
    case FC_LLM_EMBD_NORM_MAX_ABS:
        for (int64_t i = 0; i < n; i++)
            if (fabs((double)in[i]) > sum) sum = fabs((double)in[i]);
        sum /= 32760.0; /* the int16 range, as llama-embedding scales it */
        break;
    case FC_LLM_EMBD_NORM_EUCLIDEAN:
        for (int64_t i = 0; i < n; i++) sum += (double)in[i] * (double)in[i];
        sum = sqrt(sum);
        break;
    case FC_LLM_EMBD_NORM_P:
        for (int64_t i = 0; i < n; i++) sum += pow(fabs((double)in[i]), (double)norm_p);
        sum = pow(sum, 1.0 / (double)norm_p);
        break;
    }
    /* a zero vector stays zero (no division by zero) */
    const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * scale;
    return FC_OK;
}

int64_t fc_llm_embed_rows(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_embed_options *opt, size_t n)
{
    if (!ctx) return 0;
    fc_llm_pooling p;
    if (!m) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_embed_rows: NULL model");
        return 0;
    }
    if (resolve(ctx, m, opt, &p) != FC_OK) return 0;
    return p == FC_LLM_POOLING_NONE ? (int64_t)n : 1;
}

fc_status fc_llm_embed(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                       const fc_llm_embed_options *opt, float *out)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !out) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_embed: NULL %s", !s ? "session" : "output");
        return FC_ERR_INVALID_ARG;
    }
    fc_llm_pooling p;
    fc_status st = resolve(ctx, s->m, opt, &p);
    if (st != FC_OK) return st;
    const fc_llm_embd_norm norm = opt ? opt->norm : FC_LLM_EMBD_NORM_EUCLIDEAN;
    const int norm_p = opt ? opt->norm_p : 0;
    if ((st = check_norm(ctx, "fc_llm_embed", norm, norm_p)) != FC_OK) return st;
    const int64_t E = s->m->hp.n_embd;
    /* none: every row straight into out; last: the one row; mean and cls:
     * every row into a scratch (cls keeps the first, mean sums them) */
    float *rows = out;
    fc_llm_logits which = FC_LLM_LOGITS_ALL;
    if (p == FC_LLM_POOLING_LAST) which = FC_LLM_LOGITS_LAST;
    if (p == FC_LLM_POOLING_MEAN || p == FC_LLM_POOLING_CLS) {
        rows = n ? malloc(n * (size_t)E * sizeof *rows) : NULL;
        if (n && !rows) {
            fc_fail(ctx, FC_ERR_OOM, "fc_llm_embed: out of memory for %zu hidden states", n);
            return FC_ERR_OOM;
        }
    }
    st = fc_llm_session_eval_out(ctx, s, seq, tokens, n, which, NULL, rows);
    if (st == FC_OK) {
        int64_t n_out = 1;
        switch (p) {
        case FC_LLM_POOLING_MODEL: /* resolved above */
        case FC_LLM_POOLING_NONE: n_out = (int64_t)n; break;
        case FC_LLM_POOLING_LAST: break;
        case FC_LLM_POOLING_CLS: memcpy(out, rows, (size_t)E * sizeof *out); break;
        case FC_LLM_POOLING_MEAN:
            for (int64_t j = 0; j < E; j++) {
                double acc = 0.0;
                for (size_t i = 0; i < n; i++) acc += (double)rows[i * (size_t)E + (size_t)j];
                out[j] = (float)(acc / (double)n);
            }
            break;
        }
        for (int64_t r = 0; r < n_out && st == FC_OK; r++)
            st = fc_llm_embd_normalize(ctx, out + r * E, out + r * E, E, norm, norm_p);
    }
    if (rows != out) free(rows);
    return st;
}
