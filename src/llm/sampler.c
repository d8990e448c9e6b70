/* SPDX-License-Identifier: MIT */
/* The sampler object: parameter checks, the penalty history and llama.cpp's
 * default chain order (see include/fucina/sampler.h). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ctx.h"
#include "fucina/grammar.h"
#include "fucina/sampler.h"
#include "llm/sampler_rng.h"

struct fc_sampler {
    fc_ctx *ctx;
    fc_sampler_params p;
    uint32_t seed_cur; /* the seed actually used */
    fc_mt19937 rng;
    fc_token *hist; /* ring of the last penalty_last_n accepted tokens */
    size_t hist_n, hist_first;
    fc_token *hist_lin; /* the ring unrolled for fc_sample_penalties */
    fc_token_data *cand;
    size_t cand_cap;
    float *masked; /* the logits a filter has masked, for the second pass */
    size_t masked_cap;
};

fc_sampler_params fc_sampler_default_params(void) {
    fc_sampler_params p = {
        .seed = FC_SAMPLER_SEED_RANDOM,
        .temp = 0.80f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .min_keep = 0,
        .penalty_last_n = 64,
        .penalty_repeat = 1.0f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
    };
    return p;
}

/* llama.cpp's get_rng_seed: LLAMA_DEFAULT_SEED means "any seed" (it asks
 * std::random_device or the clock). We use the clock's nanoseconds. */
static uint32_t rng_seed(uint32_t seed) {
    if (seed != FC_SAMPLER_SEED_RANDOM) return seed;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

fc_sampler *fc_sampler_new(fc_ctx *ctx, const fc_sampler_params *p) {
    const char *fn = "fc_sampler_new";
    if (!p) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: params is NULL", fn);
    if (!isfinite(p->temp))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: temp is %g, must be finite (<= 0: greedy)", fn,
                       (double)p->temp);
    if (p->top_k < 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: top_k is %d, must be >= 0 (0: disabled)", fn,
                       (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: top_p is %g, must be in (0, 1] (1: disabled)",
                       fn, (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: min_p is %g, must be in [0, 1] (0: disabled)",
                       fn, (double)p->min_p);
    if (p->penalty_last_n < 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "%s: penalty_last_n is %d, must be >= 0 (0: disabled; llama.cpp's -1 = "
                       "context size is the caller's to resolve)",
                       fn, (int)p->penalty_last_n);
    if (!(p->penalty_repeat > 0.0f) || !isfinite(p->penalty_repeat))
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "%s: penalty_repeat is %g, must be finite and > 0 (1: disabled)", fn,
                       (double)p->penalty_repeat);
    if (!isfinite(p->penalty_freq) || !isfinite(p->penalty_present))
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "%s: penalty_freq (%g) and penalty_present (%g) must be finite", fn,
                       (double)p->penalty_freq, (double)p->penalty_present);
    fc_sampler *s = calloc(1, sizeof *s);
    size_t nh = (size_t)p->penalty_last_n;
    if (s && nh) {
        s->hist = malloc(nh * sizeof *s->hist);
        s->hist_lin = malloc(nh * sizeof *s->hist_lin);
    }
    if (!s || (nh && (!s->hist || !s->hist_lin))) {
        fc_sampler_free(s);
        return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
    }
    s->ctx = ctx;
    s->p = *p;
    fc_sampler_reset(s);
    return s;
}

void fc_sampler_free(fc_sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->hist_lin);
    free(s->cand);
    free(s->masked);
    free(s);
}

void fc_sampler_reset(fc_sampler *s) {
    if (!s) return;
    s->hist_n = s->hist_first = 0;
    s->seed_cur = rng_seed(s->p.seed);
    fc_mt19937_seed(&s->rng, s->seed_cur);
}

uint32_t fc_sampler_seed(const fc_sampler *s) { return s ? s->seed_cur : 0; }

void fc_sampler_accept(fc_sampler *s, fc_token token) {
    size_t cap = s ? (size_t)s->p.penalty_last_n : 0;
    if (cap == 0) return;
    if (s->hist_n < cap) {
        s->hist[(s->hist_first + s->hist_n++) % cap] = token;
    } else { /* full: the oldest leaves */
        s->hist[s->hist_first] = token;
        s->hist_first = (s->hist_first + 1) % cap;
    }
}

fc_token fc_sampler_sample(fc_sampler *s, const float *logits, int32_t n_vocab) {
    const char *fn = "fc_sampler_sample";
    if (!s) return FC_TOKEN_NONE;
    if (!logits) {
        fc_fail(s->ctx, FC_ERR_INVALID_ARG, "%s: logits is NULL", fn);
        return FC_TOKEN_NONE;
    }
    if (n_vocab <= 0) {
        fc_fail(s->ctx, FC_ERR_INVALID_ARG, "%s: n_vocab is %d, must be > 0", fn, (int)n_vocab);
        return FC_TOKEN_NONE;
    }
    if ((size_t)n_vocab > s->cand_cap) {
        fc_token_data *d = realloc(s->cand, (size_t)n_vocab * sizeof *d);
        if (!d) {
            fc_fail(s->ctx, FC_ERR_OOM, "%s: out of memory for %d candidates", fn, (int)n_vocab);
            return FC_TOKEN_NONE;
        }
        s->cand = d;
        s->cand_cap = (size_t)n_vocab;
    }
    /* llama_sampler_sample's array: id = index, p = 0, unsorted. */
    for (int32_t i = 0; i < n_vocab; i++) {
        if (isnan(logits[i])) {
            fc_fail(s->ctx, FC_ERR_INVALID_ARG, "%s: logit %d is NaN", fn, (int)i);
            return FC_TOKEN_NONE;
        }
        s->cand[i] = (fc_token_data){.id = i, .logit = logits[i], .p = 0.0f};
    }
    fc_candidates c = {.data = s->cand, .size = (size_t)n_vocab, .selected = -1, .sorted = false};

    /* llama.cpp's order. Penalties first, on raw logits; top-k sorts (and
     * makes the later stages cheap); top-p's probabilities and min-p's
     * threshold are computed BEFORE temperature; dist last. */
    if (s->p.penalty_last_n > 0) {
        size_t cap = (size_t)s->p.penalty_last_n;
        for (size_t i = 0; i < s->hist_n; i++) s->hist_lin[i] = s->hist[(s->hist_first + i) % cap];
        fc_sample_penalties(&c, s->hist_lin, s->hist_n, s->p.penalty_repeat, s->p.penalty_freq,
                            s->p.penalty_present);
    }
    fc_sample_top_k(&c, s->p.top_k);
    fc_sample_top_p(&c, s->p.top_p, s->p.min_keep);
    fc_sample_min_p(&c, s->p.min_p, s->p.min_keep);
    fc_sample_temp(&c, s->p.temp); /* llama.cpp's temp_ext with delta 0 */
    fc_sample_dist(&c, fc_mt19937_uniform01(&s->rng)); /* one draw per token, always */
    return c.selected >= 0 ? c.data[c.selected].id : FC_TOKEN_NONE;
}

fc_token fc_sampler_sample_filtered(fc_sampler *s, const float *logits, int32_t n_vocab, const fc_token_filter *f) {
    const char *fn = "fc_sampler_sample_filtered";
    fc_token t = fc_sampler_sample(s, logits, n_vocab);
    if (!f || t == FC_TOKEN_NONE) return t;
    if (!f->allows || !f->mask) {
        fc_fail(s->ctx, FC_ERR_INVALID_ARG, "%s: the filter lacks its allows or mask function", fn);
        return FC_TOKEN_NONE;
    }
    int ok = f->allows(f->user, t);
    if (ok < 0) return FC_TOKEN_NONE;
    if (ok) return t;
    /* Rejected: mask every token the filter refuses, then the whole chain
     * again on what is left (llama.cpp's resampling: a second RNG draw). */
    if ((size_t)n_vocab > s->masked_cap) {
        float *m = realloc(s->masked, (size_t)n_vocab * sizeof *m);
        if (!m) {
            fc_fail(s->ctx, FC_ERR_OOM, "%s: out of memory for %d logits", fn, (int)n_vocab);
            return FC_TOKEN_NONE;
        }
        s->masked = m;
        s->masked_cap = (size_t)n_vocab;
    }
    memcpy(s->masked, logits, (size_t)n_vocab * sizeof *s->masked);
    if (f->mask(f->user, s->masked, n_vocab) < 0) return FC_TOKEN_NONE;
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab; i++)
        if (s->masked[i] != -INFINITY && (best < 0 || s->masked[i] > s->masked[best])) best = i;
    if (best < 0) {
        fc_fail(s->ctx, FC_ERR_STATE, "%s: the filter allows no token of the %d", fn, (int)n_vocab);
        return FC_TOKEN_NONE;
    }
    t = fc_sampler_sample(s, s->masked, n_vocab);
    if (t == FC_TOKEN_NONE) return t;
    /* A draw of exactly 0 over an unsorted array can land on a p = 0 entry:
     * never hand out a refused token, take the best allowed one instead. */
    if (s->masked[t] == -INFINITY) t = best;
    return t;
}
