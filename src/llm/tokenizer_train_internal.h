/* SPDX-License-Identifier: MIT */
/* Fucina llm: the BPE trainer's merge loop (tokenizer_train_bpe.c), shared
 * with the entry point that collects words and writes the GGUF
 * (tokenizer_train.c). */
#ifndef FUCINA_LLM_TOKENIZER_TRAIN_INTERNAL_H
#define FUCINA_LLM_TOKENIZER_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "llm/tokenizer_internal.h"

/* The unique words, each a run of symbols (token ids) in sym; merging
 * shortens a word in place, so off stays and len shrinks. */
typedef struct fctt_words {
    size_t n;
    int64_t *count; /* occurrences in the corpus */
    size_t *off;    /* first symbol in sym */
    uint32_t *len;  /* current symbol count */
    int32_t *sym;
} fctt_words;

typedef struct fctt_merge {
    int32_t left, right; /* token ids; the merge's own id is 256 + its index */
} fctt_merge;

/* Token byte strings by id: 0..255 the bytes, then one per merge. */
typedef struct fctt_tokens {
    unsigned char *bytes;
    size_t n_bytes, bytes_cap;
    size_t *off;
    uint32_t *len;
    size_t n, cap;
} fctt_tokens;

/* Runs the merges on w (changed in place) up to max_merges, stopping when the
 * best pair occurs fewer than min_count times. reserved: byte strings that
 * no merge may spell (the specials' texts read as byte images); the byte
 * strings of the tokens made are added to it too. Fills merges (malloc'd,
 * *n_merges entries), toks (ids 0..255 + merges) and *n_skipped. Returns 0,
 * or -1 when out of memory. */
int fctt_bpe(fctt_words *w, int64_t max_merges, int64_t min_count, fctk_map *reserved, fctt_merge **merges,
             int64_t *n_merges, fctt_tokens *toks, int64_t *n_skipped);

void fctt_tokens_free(fctt_tokens *t);

#endif
