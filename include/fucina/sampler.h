/* SPDX-License-Identifier: MIT */
/* Fucina: the token sampler, stage for stage llama.cpp's default chain.
 *
 * fc_sampler_sample runs, in llama.cpp's order (common_params_sampling's
 * default list with DRY, top-n-sigma, typical and XTC disabled):
 *
 *   penalties -> top-k -> top-p -> min-p -> temperature -> dist
 *
 * Temperature comes AFTER the truncations, as in llama.cpp: top-p and min-p
 * see the untempered distribution. temp <= 0 is llama.cpp's greedy: every
 * logit but the first maximum becomes -inf, so dist picks the argmax (it
 * still consumes one RNG draw, as llama.cpp's does, keeping seeds aligned).
 * dist is llama.cpp's: std::mt19937 seeded with `seed`, one
 * std::uniform_real_distribution<double>(0,1) draw per token (libstdc++'s
 * generate_canonical: two 32-bit outputs), softmax in float, summed in
 * double, first index whose running sum reaches sum * u. A seeded sampler
 * therefore picks the same tokens as llama.cpp's chain given the same logits.
 *
 * The per-stage functions (fc_sample_*) act on a candidates array with
 * llama.cpp's llama_token_data_array semantics, including the `sorted` flag:
 * whether a stage sorts, and which order the survivors keep, follows
 * llama.cpp, because later stages' arithmetic (the order of float sums)
 * depends on it. Sorting is by logit descending; among EQUAL logits we order
 * by id ascending (llama.cpp's order among ties is whatever std::partial_sort
 * leaves, so at a cut between tied logits the kept ids may differ; the
 * kept logits never do).
 *
 * NaN logits are rejected by fc_sampler_sample (llama.cpp's comparison sorts
 * are undefined on NaN); the fc_sample_* functions require NaN-free input.
 *
 * A sampler is single-threaded; any number of samplers may run at once. */
#ifndef FUCINA_SAMPLER_H
#define FUCINA_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* llama.cpp's LLAMA_DEFAULT_SEED: draw a seed from the clock. */
#define FC_SAMPLER_SEED_RANDOM 0xFFFFFFFFu

typedef struct fc_sampler_params {
    uint32_t seed;          /* FC_SAMPLER_SEED_RANDOM: from the clock */
    float temp;             /* finite; <= 0: greedy; 1: unchanged */
    int32_t top_k;          /* >= 0; 0: disabled */
    float top_p;            /* in (0, 1]; 1: disabled */
    float min_p;            /* in [0, 1]; 0: disabled */
    size_t min_keep;        /* top-p and min-p keep at least this many (0 = 1) */
    int32_t penalty_last_n; /* >= 0: tokens of history penalized; 0: disabled */
    float penalty_repeat;   /* > 0, finite; 1: disabled */
    float penalty_freq;     /* finite; 0: disabled */
    float penalty_present;  /* finite; 0: disabled */
} fc_sampler_params;

/* llama.cpp's defaults (common_params_sampling): random seed, temp 0.8,
 * top_k 40, top_p 0.95, min_p 0.05, min_keep 0, last_n 64, repeat 1, freq 0,
 * present 0. */
FC_API fc_sampler_params fc_sampler_default_params(void);

typedef struct fc_sampler fc_sampler;

/* NULL + error in ctx for a bad parameter (named, with the reason). ctx
 * receives the errors of later calls too and must outlive the sampler. */
FC_API fc_sampler *fc_sampler_new(fc_ctx *ctx, const fc_sampler_params *p);
FC_API void fc_sampler_free(fc_sampler *s);

/* Run the chain on logits[0..n_vocab) (token id = index) and return the
 * token; FC_TOKEN_NONE + error in ctx on NULL logits, n_vocab <= 0 or a NaN
 * logit. Does NOT accept the token: call fc_sampler_accept with the token
 * actually used (llama.cpp's llama_sampler_sample accepts it itself). */
FC_API fc_token fc_sampler_sample(fc_sampler *s, const float *logits, int32_t n_vocab);
/* Append a token to the penalty history (the last penalty_last_n are kept). */
FC_API void fc_sampler_accept(fc_sampler *s, fc_token token);
/* Clear the history and re-seed the RNG (a random seed is drawn anew). */
FC_API void fc_sampler_reset(fc_sampler *s);
/* The seed in use (the drawn one when FC_SAMPLER_SEED_RANDOM was asked). */
FC_API uint32_t fc_sampler_seed(const fc_sampler *s);

/* ---- stages on a candidates array (llama_token_data{,_array} layout) ---- */

typedef struct fc_token_data {
    fc_token id;
    float logit;
    float p;
} fc_token_data;

typedef struct fc_candidates {
    fc_token_data *data;
    size_t size;
    int64_t selected; /* index into data (not a token id); -1: none */
    bool sorted;      /* data is in descending logit order */
} fc_candidates;

/* Repeat penalty divides positive logits and multiplies the others; then
 * count*freq + (count>0)*present is subtracted; count = occurrences of the
 * id in hist[0..n_hist). No-op when all three are neutral; otherwise the
 * array is marked unsorted. */
FC_API void fc_sample_penalties(fc_candidates *c, const fc_token *hist, size_t n_hist,
                                float repeat, float freq, float present);
/* Keep the k highest logits, sorted. k <= 0: no-op. */
FC_API void fc_sample_top_k(fc_candidates *c, int32_t k);
/* Softmax (p), then keep the smallest sorted prefix whose p sum reaches p
 * (and at least min_keep). p >= 1: no-op. */
FC_API void fc_sample_top_p(fc_candidates *c, float p, size_t min_keep);
/* Keep logits >= max + logf(p) (at least min_keep); an unsorted array
 * keeps its order. p <= 0: no-op. */
FC_API void fc_sample_min_p(fc_candidates *c, float p, size_t min_keep);
/* logit /= temp; temp <= 0: all but the first maximum become -inf. */
FC_API void fc_sample_temp(fc_candidates *c, float temp);
/* selected = first index of the maximum logit. */
FC_API void fc_sample_greedy(fc_candidates *c);
/* llama.cpp's dist given its uniform draw u in [0,1): sets p (softmax) and
 * selected. Size 0: selected = -1. */
FC_API void fc_sample_dist(fc_candidates *c, double u);

#ifdef __cplusplus
}
#endif
#endif
