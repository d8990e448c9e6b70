/* Fucina llm: the tokenizer's internal state, shared by its load, encode
 * and decode units. */
#ifndef FUCINA_LLM_TOKENIZER_INTERNAL_H
#define FUCINA_LLM_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/tokenizer.h"

/* A hash map from byte strings to int32 values. Keys live in one arena; a
 * key may carry a split point (merges: left || right with split = |left|),
 * which is part of its identity. */
typedef struct fctk_map {
    uint32_t *slots;   /* entry index + 1; 0 = empty */
    size_t cap;        /* power of two */
    struct fctk_entry {
        uint64_t hash;
        size_t off;
        uint32_t len;
        uint32_t split;
        int32_t value;
    } *entries;
    size_t n, entries_cap;
    unsigned char *arena;
    size_t arena_len, arena_cap;
} fctk_map;

uint64_t fctk_hash(const void *p, size_t len, uint32_t split);
/* Insert unless present. Returns 1 inserted, 0 present (*existing = its
 * value), -1 out of memory. */
int fctk_map_put(fctk_map *m, const void *key, size_t len, uint32_t split, int32_t value, int32_t *existing);
/* The value, or -1 when absent. */
int32_t fctk_map_get(const fctk_map *m, const void *key, size_t len, uint32_t split);
void fctk_map_free(fctk_map *m);

/* Pre-tokenizers llama.cpp names in tokenizer.ggml.pre that we implement. */
typedef enum fctk_pre { FCTK_PRE_QWEN2 } fctk_pre;

struct fc_tokenizer {
    int32_t n_vocab;
    fctk_pre pre;
    char pre_name[64];
    fc_token bos, eos, pad;
    int add_bos, add_eos;

    uint8_t *type;          /* fc_token_type per token */
    size_t *text_off;       /* vocabulary text of each token in `text` */
    uint32_t *text_len;
    char *text;

    size_t *piece_off;      /* decoded bytes (the special=true rendering) */
    uint32_t *piece_len;
    char *piece;

    fctk_map by_text;       /* vocabulary text -> id */
    fctk_map by_bytes;      /* byte string -> id, for tokens spelled with the byte map */
    fctk_map merges;        /* left bytes || right bytes (split) -> rank */
    fc_token byte_token[256]; /* the token of each single byte, FC_TOKEN_NONE when absent */

    fc_token *specials;     /* control / user-defined / unknown tokens, longest text first */
    int32_t n_specials;
};

/* Word boundaries of a piece of text under a pre-tokenizer: cpts[0..n) in,
 * ends[k] = the end (exclusive, in codepoints) of word k. Returns the word
 * count (ends must hold n entries). */
size_t fctk_pretokenize(fctk_pre pre, const uint32_t *cpts, size_t n, size_t *ends);

#endif
