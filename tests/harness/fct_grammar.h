/* SPDX-License-Identifier: MIT */
/* Test helper: sample a text under a grammar from random logits that lean
 * towards closing values after a while, so walks through JSON-like grammars
 * reach the end token (a random-weight model's own logits rarely close a
 * string). Asserts (Criterion) on any sampler or matcher error. */
#ifndef FCT_GRAMMAR_H
#define FCT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/grammar.h"

typedef struct fct_walk {
    uint32_t seed;     /* the sampler's (temperature 1, no truncation) */
    uint64_t rng_seed; /* the random logits' */
    int lean_after;    /* past this many steps, "}", "]", "\"", "0" and the end token gain 6 */
    int max_steps;
} fct_walk;

/* One walk from the matcher's start (reset first): the text in
 * text[0..*n) (cap bytes at most), 1 when the end token came. logits holds
 * the vocabulary's size. */
int fct_grammar_walk(fc_ctx *ctx, fc_grammar_matcher *m, const fc_tokenizer *tok, const fct_walk *w, float *logits,
                     char *text, size_t cap, size_t *n);

#endif
