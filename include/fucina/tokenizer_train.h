/* SPDX-License-Identifier: MIT */
/* Fucina: training a byte-level BPE tokenizer (GPT-2 / tiktoken style) and
 * writing it as a GGUF that fc_tokenizer_load and llama.cpp load.
 *
 * The algorithm:
 * 1. Each text is cut into words by the pre-tokenizer, exactly as
 *    fc_tokenize cuts it (invalid UTF-8 becomes U+FFFD, one per bad byte; a
 *    word is the UTF-8 bytes of its codepoints). No word crosses two texts.
 *    Special-token strings in the texts are plain text here.
 * 2. Identical words are counted; each starts as its bytes, token ids 0..255
 *    in byte order.
 * 3. Repeatedly, the adjacent pair with the largest count (occurrences summed
 *    over words, each word weighted by its count; "aaa" holds (a, a) twice)
 *    becomes merge k, a new token of id 256 + k, and every occurrence of it
 *    in every word is replaced by the new token, left to right. Ties: the
 *    pair with the smallest (left id, right id), lexicographically.
 *    A pair whose bytes would spell a token that already exists (another
 *    merge's result, or a special token's text read as byte images) is
 *    skipped: a GGUF vocabulary cannot hold one spelling twice.
 * 4. It stops at vocab_size - 256 - n_specials merges, when the best pair
 *    occurs fewer than min_pair_count times, or when no pair is left (the
 *    vocabulary is then smaller than vocab_size).
 * 5. The special tokens take the ids after the merges, in the order given.
 *
 * The file: general.architecture (opt->arch), general.name,
 * tokenizer.ggml.model "gpt2", .pre, .tokens (bytes and merges spelled with
 * GPT-2's byte-to-unicode images, specials as written), .token_type (NORMAL;
 * CONTROL for specials), .merges ("left right" in that spelling, rank =
 * index), .bos/.eos/.padding_token_id, .add_bos_token false, .add_eos_token
 * false, and tokenizer.chat_template (ChatML) when <|im_start|> and
 * <|im_end|> are both specials. BOS = PAD = the first special, EOS = the last
 * (the defaults give <|endoftext|> and <|im_end|>); no ids without specials.
 * The file holds no tensors; llama.cpp loads it with vocab_only. Written
 * atomically: on failure the destination is untouched. */
#ifndef FUCINA_TOKENIZER_TRAIN_H
#define FUCINA_TOKENIZER_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_tokenizer_train_options {
    /* total ids: 256 byte tokens + merges + specials; 0 = 4096 */
    int64_t vocab_size;
    /* the pre-tokenizer and tokenizer.ggml.pre: NULL = "llama-bpe" (GPT-4's split pattern, digits in threes;
     * llama.cpp then takes a word that is a token whole, ignore_merges), "qwen2" (single digits), "gpt2"
     * (written "gpt-2"; also accepted as "gpt-2") */
    const char *pre;
    /* special tokens, CONTROL, ids after the merges. specials NULL = {"<|endoftext|>", "<|im_start|>",
     * "<|im_end|>"} (ChatML); non-NULL with n_specials 0 = none */
    const char *const *specials;
    int n_specials;
    /* general.architecture: NULL = "qwen3" */
    const char *arch;
    /* stop when the best pair occurs fewer times than this; 0 = 2 */
    int64_t min_pair_count;
} fc_tokenizer_train_options;

/* What a training run did (fc_tokenizer_train_ex); may be NULL. */
typedef struct fc_tokenizer_train_stats {
    int64_t n_vocab; /* ids written */
    int64_t n_merges;
    int64_t n_words; /* words after pre-tokenization, with repeats */
    int64_t n_unique_words;
    int64_t n_skipped; /* pairs skipped because their spelling was already a token */
} fc_tokenizer_train_stats;

/* Train on n texts (texts[i] of lens[i] bytes, each one document) and write
 * the tokenizer to out_path. opt NULL or zeroed = the defaults. Errors
 * (FC_ERR_INVALID_ARG unless said): vocab_size below 256 + the specials or
 * above INT32_MAX, an unknown pre-tokenizer, a special that is NULL, empty,
 * given twice or spelled like a byte token, a negative count, NULL texts;
 * FC_ERR_OOM; FC_ERR_IO when the file cannot be written. */
FC_API fc_status fc_tokenizer_train(fc_ctx *ctx, const char *const *texts, const size_t *lens, size_t n,
                                    const char *out_path, const fc_tokenizer_train_options *opt);
/* The same, filling *stats (when not NULL) on success. */
FC_API fc_status fc_tokenizer_train_ex(fc_ctx *ctx, const char *const *texts, const size_t *lens, size_t n,
                                       const char *out_path, const fc_tokenizer_train_options *opt,
                                       fc_tokenizer_train_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
