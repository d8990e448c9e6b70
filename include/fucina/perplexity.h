/* SPDX-License-Identifier: MIT */
/* Perplexity and KL divergence by llama-perplexity's method
 * (llama.cpp tools/perplexity/perplexity.cpp; docs/LLM.md "Perplexity"):
 *
 * - the text is tokenized with the vocabulary's special tokens added (BOS
 *   when tokenizer.ggml.add_bos_token says so), control-token strings as text;
 * - it is cut into n_chunk = min(--chunks, n_tokens / n_ctx) chunks of n_ctx
 *   tokens; fewer than 2 * n_ctx tokens is refused;
 * - each chunk is evaluated from position 0 of an empty cache, its first
 *   token replaced by BOS when the vocabulary adds BOS;
 * - the logits at positions first = n_ctx / 2 .. n_ctx - 2 score the tokens
 *   that follow them (n_ctx - 1 - first per chunk), so every scored token
 *   has at least n_ctx / 2 tokens of context;
 * - a token's negative log-likelihood is max + log(sum expf(l - max)) - l[tok]
 *   with the sum in double; PPL = exp(mean NLL), its uncertainty
 *   PPL * sqrt((mean of NLL^2 - (mean NLL)^2) / (count - 1)).
 *
 * The KL divergence of a model Q against a base model P at one scored
 * position is sum_i p_i (log p_i - log q_i) over the whole vocabulary, from
 * the base's log-probabilities (saved by the caller, e.g. fucina perplexity
 * --kl-divergence-base) and Q's. */
#ifndef FUCINA_PERPLEXITY_H
#define FUCINA_PERPLEXITY_H

#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/llm.h"
#include "fucina/status.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Running sums of the scored tokens' negative log-likelihoods; zeroed = empty. */
typedef struct fc_ppl_acc {
    double nll;    /* sum of -log p(token) */
    double nll2;   /* sum of its squares */
    int64_t count; /* scored tokens */
} fc_ppl_acc;

/* The first scored position of a chunk of n_ctx tokens (n_ctx / 2) and how
 * many tokens a chunk scores (n_ctx - 1 - n_ctx / 2). */
FC_API int64_t fc_ppl_first(int64_t n_ctx);
FC_API int64_t fc_ppl_n_scored(int64_t n_ctx);

/* The number of chunks of n_ctx tokens in n_tokens tokens, at most max_chunks
 * when max_chunks > 0 (llama-perplexity's --chunks); 0 when n_tokens < 2 * n_ctx
 * (llama-perplexity refuses such a text). */
FC_API int64_t fc_ppl_n_chunks(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks);

/* -log softmax(logits)[tok] over n_vocab logits, as llama-perplexity computes it
 * (expf of each logit less the maximum, summed in double). */
FC_API double fc_ppl_nll(const float *logits, int64_t n_vocab, fc_token tok);

/* log softmax(logits) into out (n_vocab floats; out may be logits). */
FC_API void fc_ppl_log_softmax(const float *logits, int64_t n_vocab, float *out);

/* Evaluate one chunk of n_ctx >= 2 tokens on session s (reset first; its
 * context must hold n_ctx positions): chunk[0] is replaced by the BOS token
 * when the model's vocabulary adds BOS. The NLL of every scored token is added
 * to acc (may be NULL); logprobs (may be NULL) receives the log-softmax of
 * the fc_ppl_n_scored(n_ctx) scored positions, n_vocab floats each (their
 * tokens are chunk[first + 1 .. n_ctx)). The forward runs in the pieces a
 * single eval of the chunk would (FC_LLM_CHUNK_ROWS rows), so at most that
 * many rows of logits are held at once. */
FC_API fc_status fc_ppl_eval_chunk(fc_ctx *ctx, fc_llm_session *s, const fc_token *chunk, int64_t n_ctx,
                                   fc_ppl_acc *acc, float *logprobs);

/* exp(acc->nll / count); *err (may be NULL) its uncertainty as above, 0 when
 * the variance is not positive or count < 2. An empty acc gives NAN. */
FC_API double fc_ppl_estimate(const fc_ppl_acc *acc, double *err);

/* Running sums of a KL-divergence run; zeroed = empty. */
typedef struct fc_kld_acc {
    double nll, nll2;           /* Q's NLL of the scored tokens */
    double nll_base, nll_base2; /* the base's */
    double nll_nll_base;        /* sum of their products (the covariance of ln PPL) */
    double kld, kld2;           /* sum of KL(P || Q) and of its squares */
    int64_t same_top;           /* positions where both argmaxes agree */
    int64_t count;
    /* dp = p_Q(tok) - p_base(tok), the change in the probability of the token that followed */
    double p_diff, p_diff2, p_diff4; /* sums of dp, dp^2, dp^4 */
} fc_kld_acc;

/* Add one scored position: base and q are log-probabilities (log-softmax) of
 * n_vocab ids, tok the token that followed. Returns that position's KLD;
 * *p_diff (may be NULL) receives its dp. */
FC_API double fc_kld_add(fc_kld_acc *acc, const float *base, const float *q, int64_t n_vocab, fc_token tok,
                         double *p_diff);

/* The fraction-quantile (0..1) of sorted[0..n), n >= 1, interpolated between
 * neighbours as llama-perplexity's KLD and dp percentiles are (the fraction
 * and position in float, as it computes them): fraction <= 0 is the first,
 * >= 1 the last. */
FC_API double fc_kld_percentile(const double *sorted, size_t n, float fraction);

/* Means and uncertainties as llama-perplexity reports them: a mean's
 * uncertainty is sqrt(var / (count - 1)) (0 with 10 values or fewer), a PPL's
 * that times the PPL, "Same top p"'s sqrt(p (1 - p) / (count - 1)). */
typedef struct fc_kld_stats {
    int64_t count;
    double ppl, ppl_err;           /* Q's PPL */
    double ppl_base, ppl_base_err; /* the base's */
    double kld, kld_err;           /* mean KL divergence */
    double same_top, same_top_err; /* fraction of positions with the same argmax, 0..1 */
    double ln_ppl_cor;             /* Cor(ln PPL(Q), ln PPL(base)) (0 under 10 positions) */
    double ln_ratio, ln_ratio_err; /* ln(PPL(Q) / PPL(base)), the covariance taken into account */
    double ratio, ratio_err;       /* PPL(Q) / PPL(base) */
    double diff, diff_err;         /* PPL(Q) - PPL(base) */
    double p_diff, p_diff_err;     /* mean dp (a probability, 0..1 scale) */
    double p_diff_rms, p_diff_rms_err; /* RMS of dp */
} fc_kld_stats;
FC_API fc_kld_stats fc_kld_summary(const fc_kld_acc *acc);

#ifdef __cplusplus
}
#endif
#endif
