/* SPDX-License-Identifier: MIT */
/* Fucina llm: training data as token rows (internal; src/llm/lm_data.c).
 *
 * TEXT: every document tokenized after a BOS (the tokenizer's, else its
 * EOS: a document boundary the model sees), concatenated into one stream;
 * an item is a window of seq + 1 tokens (seq inputs, seq targets).
 * CHAT: every conversation rendered in the model's chat template and
 * tokenized; an item is one conversation from its start, cut to seq + 1
 * tokens and padded; only assistant turns (their content and the token
 * that ends the turn) are targets.
 *
 * Which items a step takes is a pure function of (seed, step): items are
 * visited in a seeded shuffle, a new one per epoch, so a resumed run and
 * every data-parallel rank agree on the global batch without sharing
 * state. */
#ifndef FC_LLM_LM_DATA_H
#define FC_LLM_LM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/lm_train.h"

typedef struct lm_data {
    fc_lm_data_kind kind;
    int64_t seq;
    fc_token *tok;        /* the stream (TEXT) or the conversations back to back (CHAT) */
    uint8_t *target;      /* CHAT: 1 where tok[i] is a trained target (an assistant token) */
    size_t n_tok;
    size_t *item_off;     /* CHAT: where conversation k starts in tok; item_off[n_items] = n_tok */
    int64_t n_items;      /* windows (TEXT) or conversations (CHAT) */
    int64_t n_docs;       /* documents or conversations read */
    int64_t n_bytes;      /* text bytes read */
    fc_token pad;         /* CHAT padding input (never a target) */
    /* the shuffle of the current epoch */
    uint64_t seed;
    int64_t perm_epoch;
    int64_t *perm;
} lm_data;

/* Read and tokenize files[0..n) for lm's tokenizer (and its chat template,
 * for CHAT). 0, or -1 with an error naming the file, the line and the
 * reason (bad JSON, a missing field, a conversation with no assistant turn,
 * fewer tokens than one window). */
int lm_data_load(fc_ctx *ctx, lm_data *d, const fc_lm *lm, fc_lm_data_kind kind, const char *const *files, int n,
                 const char *field, int64_t seq, uint64_t seed);
void lm_data_free(lm_data *d);

/* The inputs and targets of global-batch row `row` of step `step` (rows
 * step * batch + row in the visiting order): seq inputs into in, seq targets
 * into out (-100: not trained). 0, or -1 (OOM). */
int lm_data_row(lm_data *d, int64_t batch, int64_t step, int64_t row, int32_t *in, int32_t *out);
/* Window k of the stream in order (held-out evaluation, TEXT). */
void lm_data_window(const lm_data *d, int64_t k, int32_t *in, int32_t *out);

#endif
