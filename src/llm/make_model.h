/* Fucina llm: the random-weight model writer's vocabulary (internal). */
#ifndef FUCINA_LLM_MAKE_MODEL_H
#define FUCINA_LLM_MAKE_MODEL_H

#include <stdint.h>

typedef struct mm_vocab {
    char **tok;
    int32_t *type;
    int n, cap;
    char **merge; /* "left right" */
    int n_merges, merge_cap;
    int32_t *hash; /* open addressing over tok, -1 empty */
    uint32_t hash_cap;
} mm_vocab;

/* n_vocab 0: the small vocabulary (256 byte tokens, the merges of a few
 * English words, 3 control tokens). Otherwise exactly n_vocab tokens laid out
 * as Qwen's: normal tokens up to id 151642 (the byte tokens, the word merges,
 * then letter extensions of word tokens), Qwen's 26 special tokens from
 * 151643, then "[PADn]" unused tokens. Returns 0, or -1 when out of memory or
 * n_vocab is too small for that layout. */
int mm_vocab_build(mm_vocab *v, int64_t n_vocab);
/* The smallest n_vocab of the Qwen layout (151643 normal + 26 added). */
#define MM_QWEN_MIN_VOCAB 151669
/* Token id of s, -1 when absent. */
int mm_vocab_find(const mm_vocab *v, const char *s);
void mm_vocab_free(mm_vocab *v);

#endif
