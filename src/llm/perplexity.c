/* SPDX-License-Identifier: MIT */
/* Fucina llm: perplexity and KL divergence by llama-perplexity's method
 * (include/fucina/perplexity.h says what is computed; docs/LLM.md). The
 * arithmetic follows llama.cpp's on purpose (expf per logit, the sum in
 * double, float logits less the max) so our numbers and its agree to the
 * logits' own agreement, not to a difference of formulas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/perplexity.h"
#include "llm/session.h"

int64_t fc_ppl_first(int64_t n_ctx)
{
    return n_ctx / 2;
}

int64_t fc_ppl_n_scored(int64_t n_ctx)
{
    return n_ctx - 1 - n_ctx / 2;
}

int64_t fc_ppl_n_chunks(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks)
{
    if (n_ctx < 1 || n_tokens < 2 * n_ctx) return 0;
    const int64_t n = n_tokens / n_ctx;
    return max_chunks > 0 && max_chunks < n ? max_chunks : n;
}

/* max and log(sum expf(l - max)) of a row, llama-perplexity's way. */
static void row_norm(const float *l, int64_t n, float *max, double *log_sum)
{
    float mx = l[0];
    for (int64_t i = 1; i < n; i++)
        if (l[i] > mx) mx = l[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += expf(l[i] - mx);
    *max = mx;
    *log_sum = log(sum);
}

/* One row's normalisation, once: the NLL of tok (when tok >= 0) and, when
 * out is not NULL, the whole log-softmax. */
static double score_row(const float *l, int64_t n, fc_token tok, float *out)
{
    float mx;
    double ls;
    row_norm(l, n, &mx, &ls);
    const double nll = tok >= 0 ? -((double)(l[tok] - mx) - ls) : 0.0;
    for (int64_t i = 0; out && i < n; i++) out[i] = (float)((double)(l[i] - mx) - ls);
    return nll;
}

double fc_ppl_nll(const float *logits, int64_t n_vocab, fc_token tok)
{
    return score_row(logits, n_vocab, tok, NULL);
}

void fc_ppl_log_softmax(const float *logits, int64_t n_vocab, float *out)
{
    score_row(logits, n_vocab, -1, out);
}

fc_status fc_ppl_eval_chunk(fc_ctx *ctx, fc_llm_session *s, const fc_token *chunk, int64_t n_ctx, fc_ppl_acc *acc,
                            float *logprobs)
{
    if (!s || !chunk) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_ppl_eval_chunk: NULL %s", s ? "chunk" : "session");
        return FC_ERR_INVALID_ARG;
    }
    if (n_ctx < 2 || n_ctx > s->n_ctx) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "fc_ppl_eval_chunk: a chunk of %lld tokens does not fit [2, %lld] (the session's context)",
                (long long)n_ctx, (long long)s->n_ctx);
        return FC_ERR_INVALID_ARG;
    }
    const fc_tokenizer *tok = fc_llm_model_tokenizer(s->m);
    const int64_t nv = fc_llm_model_hparams(s->m)->n_vocab;
    const int64_t first = fc_ppl_first(n_ctx);
    fc_token *t = malloc((size_t)n_ctx * sizeof *t);
    float *rows = malloc((size_t)FC_LLM_CHUNK_ROWS * (size_t)nv * sizeof *rows);
    if (!t || !rows) {
        free(t);
        free(rows);
        fc_fail(ctx, FC_ERR_OOM, "fc_ppl_eval_chunk: out of memory for %lld rows of logits",
                (long long)FC_LLM_CHUNK_ROWS);
        return FC_ERR_OOM;
    }
    memcpy(t, chunk, (size_t)n_ctx * sizeof *t);
    /* llama-perplexity scores every chunk as if it began a document */
    if (tok && fc_tokenizer_add_bos(tok) && fc_tokenizer_bos(tok) != FC_TOKEN_NONE) t[0] = fc_tokenizer_bos(tok);
    fc_llm_session_reset(s);
    fc_status st = FC_OK;
    fc_ppl_acc a = {0};
    for (int64_t p0 = 0; p0 < n_ctx && st == FC_OK; p0 += FC_LLM_CHUNK_ROWS) {
        const int64_t n = n_ctx - p0 < FC_LLM_CHUNK_ROWS ? n_ctx - p0 : FC_LLM_CHUNK_ROWS;
        /* the last row predicts past the chunk: rows first .. n_ctx - 2 score */
        const int scored = p0 + n > first && p0 < n_ctx - 1;
        st = fc_llm_session_eval_ex(ctx, s, t + p0, (size_t)n, scored ? FC_LLM_LOGITS_ALL : FC_LLM_LOGITS_NONE,
                                    scored ? rows : NULL);
        if (st != FC_OK || !scored) continue;
        for (int64_t p = p0 > first ? p0 : first; p < p0 + n && p < n_ctx - 1; p++) {
            const float *l = rows + (size_t)(p - p0) * (size_t)nv;
            const double v = score_row(l, nv, t[p + 1], logprobs ? logprobs + (size_t)(p - first) * (size_t)nv : NULL);
            a.nll += v;
            a.nll2 += v * v;
            a.count++;
        }
    }
    free(t);
    free(rows);
    if (st != FC_OK) return st;
    if (acc) {
        acc->nll += a.nll;
        acc->nll2 += a.nll2;
        acc->count += a.count;
    }
    return FC_OK;
}

/* mean and llama-perplexity's uncertainty of the mean, sqrt(var / (n - 1)) */
static double mean_err(double sum, double sum2, int64_t n, int64_t min_n, double *err)
{
    const double f = sum / (double)n;
    const double var = sum2 / (double)n - f * f;
    *err = var > 0 && n > min_n ? sqrt(var / (double)(n - 1)) : 0.0;
    return f;
}

double fc_ppl_estimate(const fc_ppl_acc *acc, double *err)
{
    if (err) *err = 0;
    if (!acc || acc->count < 1) return NAN;
    double e;
    const double ppl = exp(mean_err(acc->nll, acc->nll2, acc->count, 1, &e));
    if (err) *err = e * ppl;
    return ppl;
}

static int64_t argmax(const float *x, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[k]) k = i;
    return k;
}

double fc_kld_add(fc_kld_acc *acc, const float *base, const float *q, int64_t n_vocab, fc_token tok, double *p_diff)
{
    /* the exact sum over every id: the base's log-probabilities are stored in
     * f32, so llama.cpp's cut at log p < -16 (where its 16-bit codes stop) is
     * not needed */
    double kld = 0;
    for (int64_t i = 0; i < n_vocab; i++) kld += exp((double)base[i]) * ((double)base[i] - (double)q[i]);
    const double nll = -(double)q[tok], nll_base = -(double)base[tok];
    acc->nll += nll;
    acc->nll2 += nll * nll;
    acc->nll_base += nll_base;
    acc->nll_base2 += nll_base * nll_base;
    acc->nll_nll_base += nll * nll_base;
    acc->kld += kld;
    acc->kld2 += kld * kld;
    acc->same_top += argmax(base, n_vocab) == argmax(q, n_vocab);
    acc->count++;
    const double dp = exp(-nll) - exp(-nll_base);
    acc->p_diff += dp;
    acc->p_diff2 += dp * dp;
    acc->p_diff4 += dp * dp * dp * dp;
    if (p_diff) *p_diff = dp;
    return kld;
}

double fc_kld_percentile(const double *sorted, size_t n, float fraction)
{
    if (fraction <= 0) return sorted[0];
    if (fraction >= 1) return sorted[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * sorted[ip] + p * sorted[ip + 1 < n ? ip + 1 : n - 1];
}

fc_kld_stats fc_kld_summary(const fc_kld_acc *acc)
{
    fc_kld_stats r = {0};
    if (!acc || acc->count < 1) return r;
    const int64_t n = acc->count;
    r.count = n;
    /* llama-perplexity gives no uncertainty from 10 values or fewer */
    r.ppl = exp(mean_err(acc->nll, acc->nll2, n, 10, &r.ppl_err));
    r.ppl_err *= r.ppl;
    r.ppl_base = exp(mean_err(acc->nll_base, acc->nll_base2, n, 10, &r.ppl_base_err));
    r.ppl_base_err *= r.ppl_base;
    r.kld = mean_err(acc->kld, acc->kld2, n, 10, &r.kld_err);
    r.same_top = (double)acc->same_top / (double)n;
    r.same_top_err = n > 1 ? sqrt(r.same_top * (1 - r.same_top) / (double)(n - 1)) : 0.0;
    /* llama-perplexity's derived figures: the covariance of the two mean NLLs
     * (0 under 10 positions), and each uncertainty propagated to first order */
    double e_q, e_b;
    const double m_q = mean_err(acc->nll, acc->nll2, n, 10, &e_q), m_b = mean_err(acc->nll_base, acc->nll_base2, n, 10, &e_b);
    const double cov = n < 10 ? 0.0
                              : (acc->nll_nll_base / (double)n - (acc->nll / (double)n) * (acc->nll_base / (double)n)) /
                                    (double)(n - 1);
    r.ln_ppl_cor = e_q > 0 && e_b > 0 ? cov / (e_q * e_b) : 0.0;
    r.ln_ratio = m_q - m_b;
    const double v_ratio = e_q * e_q + e_b * e_b - 2 * cov;
    r.ln_ratio_err = v_ratio > 0 ? sqrt(v_ratio) : 0.0;
    r.ratio = exp(r.ln_ratio);
    r.ratio_err = r.ratio * r.ln_ratio_err;
    r.diff = r.ppl - r.ppl_base;
    const double v_diff = r.ppl_err * r.ppl_err + r.ppl_base_err * r.ppl_base_err - 2 * r.ppl * r.ppl_base * cov;
    r.diff_err = v_diff > 0 ? sqrt(v_diff) : 0.0;
    r.p_diff = mean_err(acc->p_diff, acc->p_diff2, n, 10, &r.p_diff_err);
    double e_mse;
    const double mse = mean_err(acc->p_diff2, acc->p_diff4, n, 10, &e_mse);
    r.p_diff_rms = sqrt(mse > 0 ? mse : 0.0);
    r.p_diff_rms_err = r.p_diff_rms > 0 ? 0.5 / r.p_diff_rms * e_mse : 0.0;
    return r;
}
