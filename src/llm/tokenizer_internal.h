/* SPDX-License-Identifier: MIT */
/* Fucina llm: the tokenizer's internal state, shared by its load, encode
 * (byte-level BPE and SentencePiece) and decode units. */
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

/* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece). */
typedef enum fctk_model { FCTK_MODEL_BPE, FCTK_MODEL_SPM } fctk_model;

/* Pre-tokenizers llama.cpp names in tokenizer.ggml.pre that we implement
 * (BPE only; SPM has none). */
typedef enum fctk_pre { FCTK_PRE_NONE, FCTK_PRE_QWEN2, FCTK_PRE_LLAMA3, FCTK_PRE_GPT2 } fctk_pre;

struct fc_tokenizer {
    uint64_t serial;        /* unique in the process (never reused): caches key on it, not on the address */
    int32_t n_vocab;
    fctk_model model;
    fctk_pre pre;
    char pre_name[64];      /* the file's tokenizer.ggml.pre ("" when absent) */
    fc_token bos, eos, pad, unk;
    int add_bos, add_eos;
    int add_space_prefix;   /* SPM: a space before the first text (and after each special token) */
    int ignore_merges;      /* BPE (llama3): a word that is a token is that token, merges or not */
    int clean_spaces;       /* BPE: llama.cpp's clean_up_tokenization_spaces when decoding */

    uint8_t *type;          /* fc_token_type per token */
    float *score;           /* tokenizer.ggml.scores (0 when the file has none) */
    size_t *text_off;       /* vocabulary text of each token in `text` */
    uint32_t *text_len;
    char *text;

    size_t *piece_off;      /* decoded bytes (the special=true rendering) */
    uint32_t *piece_len;
    char *piece;

    fctk_map by_text;       /* vocabulary text -> id */
    fctk_map by_bytes;      /* BPE: byte string -> id, for tokens spelled with the byte map */
    fctk_map merges;        /* BPE: left bytes || right bytes (split) -> rank */
    fc_token byte_token[256]; /* BPE: the token of each single byte; SPM: its byte-fallback token
                               * (<0xXX>, else the one-byte text); FC_TOKEN_NONE when absent */

    fc_token *specials;     /* control / user-defined / unknown tokens, longest text first */
    int32_t n_specials;
};

/* Word boundaries of a piece of text under a pre-tokenizer: cpts[0..n) in,
 * ends[k] = the end (exclusive, in codepoints) of word k. Returns the word
 * count (ends must hold n entries). */
size_t fctk_pretokenize(fctk_pre pre, const uint32_t *cpts, size_t n, size_t *ends);

/* A growable token array. */
typedef struct fctk_tokvec {
    fc_token *v;
    size_t n, cap;
} fctk_tokvec;

/* 0, or -1 when out of memory. */
int fctk_tok_push(fctk_tokvec *o, fc_token id);

/* SentencePiece on one text fragment (llama.cpp's llm_tokenizer_spm):
 * `prefix_space` puts a space in front; spaces become U+2581; the text is
 * cut into UTF-8 characters by their lead bytes alone; adjacent symbols
 * whose concatenation is a token merge, highest score first (leftmost on
 * ties); a final symbol that is no token becomes its byte-fallback tokens.
 * Returns 0, -1 when out of memory, -2 when a byte has no fallback token
 * (*bad_byte is that byte). */
int fctk_spm_encode(const fc_tokenizer *t, const char *text, size_t len, int prefix_space, fctk_tokvec *out,
                    int *bad_byte);

/* A byte range [off, off + len) of a text. */
typedef struct fctk_span {
    size_t off, len;
} fctk_span;

/* fc_tokenize (which is this with no spans and who = "fc_tokenize"), except
 * that with FC_TOKENIZE_PARSE_SPECIAL the string of a control or unknown
 * token is not matched where any of its bytes lies in one of
 * plain[0..n_plain) (sorted by off, disjoint): there the text is read as
 * without the flag (user-defined tokens still match, as they always do).
 * The text pieces between the matched tokens are tokenized whole, spans or
 * not, as fc_tokenize does. `who` names the caller in error messages. */
fc_status fctk_tokenize_spans(fc_ctx *ctx, const char *who, const fc_tokenizer *t, const char *text, size_t len,
                              unsigned flags, const fctk_span *plain, size_t n_plain, fc_token **tokens, size_t *n);

#endif
