/* SPDX-License-Identifier: MIT */
#include "fct_grammar.h"

#include <criterion/criterion.h>
#include <string.h>

#include "fct.h"
#include "fucina/fucina.h"
#include "fucina/sampler.h"

int fct_grammar_walk(fc_ctx *ctx, fc_grammar_matcher *m, const fc_tokenizer *tok, const fct_walk *w, float *logits,
                     char *text, size_t cap, size_t *n)
{
    const int32_t nv = fc_tokenizer_n_vocab(tok);
    const fc_token eos = fc_tokenizer_eos(tok);
    fc_grammar_matcher_reset(m);
    fc_sampler_params p = fc_sampler_default_params();
    p.seed = w->seed;
    p.temp = 1.0f;
    p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    fc_sampler *s = fc_sampler_new(ctx, &p);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    fct_rng r = {w->rng_seed};
    int ended = 0;
    *n = 0;
    for (int step = 0; step < w->max_steps && !ended; step++) {
        for (int32_t t = 0; t < nv; t++) {
            size_t len;
            const char *tx = fc_tokenizer_token_text(tok, t, &len);
            logits[t] = (float)fct_uniform(&r, -2, 2);
            if (step > w->lean_after && len == 1 && strchr("}]\"0", tx[0])) logits[t] += 6.0f;
        }
        if (step > w->lean_after) logits[eos] += 6.0f;
        fc_token_filter f = fc_grammar_matcher_filter(m);
        fc_token t = fc_sampler_sample_filtered(s, logits, nv, &f);
        cr_assert_neq(t, FC_TOKEN_NONE, "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_grammar_matcher_accept(m, t), FC_OK, "%s", fc_ctx_error(ctx));
        if (t == eos) {
            ended = 1;
            break;
        }
        const char *piece;
        size_t len;
        cr_assert_eq(fc_token_piece(ctx, tok, t, 0, &piece, &len), FC_OK);
        cr_assert_lt(*n + len, cap);
        memcpy(text + *n, piece, len);
        *n += len;
    }
    fc_sampler_free(s);
    return ended;
}
