/* SPDX-License-Identifier: MIT */
/* Fucina llm: the random-weight model writer's vocabularies (internal).
 *
 * Three layouts, each a complete tokenizer that llama.cpp and fc_tokenizer
 * load identically:
 * - mm_vocab_build: byte-level BPE, Qwen2/Qwen3 style (model "gpt2",
 *   pre "qwen2");
 * - mm_vocab_build_llama3: byte-level BPE, Llama 3 style (model "gpt2",
 *   pre "llama-bpe", <|begin_of_text|> ... specials);
 * - mm_spm_vocab_build: SentencePiece, Llama 2 style (model "llama",
 *   scores, <0xXX> byte fallback, Gemma / Mistral / Phi-3 chat tokens).
 * mm_vocab_write puts any of them into a GGUF writer as tokenizer.ggml.*
 * keys, so the model writer needs no per-layout code. */
#ifndef FUCINA_LLM_MAKE_MODEL_H
#define FUCINA_LLM_MAKE_MODEL_H

#include <stdint.h>

#include "fucina/gguf.h"
#include "fucina/llm.h"

/* Which tokenizer a vocabulary is for (tokenizer.ggml.model). */
typedef enum mm_vocab_kind {
    MM_VOCAB_BPE = 0, /* "gpt2": byte-level BPE with merges */
    MM_VOCAB_SPM = 1, /* "llama": SentencePiece with scores */
} mm_vocab_kind;

typedef struct mm_vocab {
    char **tok;
    int32_t *type;   /* fc_token_type per token */
    int n, cap;
    char **merge;    /* "left right" (BPE only) */
    int n_merges, merge_cap;
    int32_t *hash;   /* open addressing over tok, -1 empty */
    uint32_t hash_cap;
    /* Set by every builder (a zeroed struct is a BPE vocabulary with no
     * special ids, for code that fills tok/type by hand). */
    mm_vocab_kind kind;
    float *score;    /* SPM: one per token (tokenizer.ggml.scores); NULL for BPE */
    const char *pre; /* tokenizer.ggml.pre ("qwen2", "llama-bpe"); NULL: not written (SPM) */
    int32_t bos, eos, unk, pad; /* token ids, -1: not written */
    int add_bos, add_eos;       /* tokenizer.ggml.add_{bos,eos}_token */
    int add_space_prefix;       /* SPM: tokenizer.ggml.add_space_prefix */
} mm_vocab;

/* n_vocab 0: the small vocabulary (256 byte tokens, the merges of a few
 * English words, 3 control tokens). Otherwise exactly n_vocab tokens laid out
 * as Qwen's: normal tokens up to id 151642 (the byte tokens, the word merges,
 * then letter extensions of word tokens), Qwen's 26 special tokens from
 * 151643, then "[PADn]" unused tokens. pre "qwen2"; BOS = PAD =
 * <|endoftext|>, EOS = <|im_end|>, add_bos false. Returns 0, or -1 when out
 * of memory or n_vocab is too small for that layout. */
int mm_vocab_build(mm_vocab *v, int64_t n_vocab);
/* The smallest n_vocab of the Qwen layout (151643 normal + 26 added). */
#define MM_QWEN_MIN_VOCAB 151669

/* A Llama-3-style byte-level BPE vocabulary (pre "llama-bpe"): the small
 * vocabulary's 256 byte tokens and word merges, then Llama 3's control
 * tokens <|begin_of_text|> (BOS), <|end_of_text|>, <|start_header_id|>,
 * <|end_header_id|>, <|eot_id|> (EOS), <|eom_id|>, <|python_tag|> and two
 * <|reserved_special_token_N|>; add_bos true, as Llama 3 files have it.
 * 430 tokens. Returns 0, or -1 when out of memory (v is then empty). */
int mm_vocab_build_llama3(mm_vocab *v);

/* A Llama-2-style SentencePiece vocabulary (model "llama"):
 *   0 <unk> (UNKNOWN), 1 <s> (CONTROL, BOS), 2 </s> (CONTROL, EOS),
 *   3..258 <0x00>..<0xFF> (BYTE, the byte fallback),
 *   then the normal pieces: merges learned (BPE-style, score = -rank, some
 *   ranks tied on purpose) from a built-in English / code / CJK text with
 *   spaces as U+2581, then its single characters (scores below every
 *   merge); "\n" and "\t" have no piece, so they go through <0x0A>/<0x09>;
 *   then chat tokens: <start_of_turn> <end_of_turn> (Gemma), [INST] [/INST]
 *   (Mistral), <|system|> <|end|> (Phi-3) as CONTROL, <|user|> <|assistant|>
 *   (Phi-3) as USER_DEFINED, and one UNUSED token.
 * add_bos true, add_eos false, add_space_prefix true (llama.cpp's SPM
 * defaults, written out). 990 tokens; deterministic. Returns 0, or
 * -1 when out of memory (v is then empty). */
int mm_spm_vocab_build(mm_vocab *v);

/* Token id of s, -1 when absent. */
int mm_vocab_find(const mm_vocab *v, const char *s);
/* Appends token s (copied) of fc_token_type `type`; `score` is kept when
 * v->kind is MM_VOCAB_SPM. The builders' common step. 0, or -1 when out of
 * memory. */
int mm_vocab_add(mm_vocab *v, const char *s, int32_t type, float score);

/* Writes v as tokenizer.ggml.{model, pre, tokens, token_type, scores,
 * merges, bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token,
 * add_space_prefix}: what is set in v (pre NULL, ids < 0, score NULL are
 * left out; SPM also writes add_space_prefix). The chat template is the
 * caller's. Returns the writer's status (FC_OK). */
fc_status mm_vocab_write(fc_gguf_writer *w, const mm_vocab *v);

void mm_vocab_free(mm_vocab *v);

/* The family's metadata keys "<arch>.<suffix>" with hp's values (required
 * ones always, optional ones when set), as converters write them; the
 * random-weight writer and the training model's export (src/llm/lm_export.c). */
struct fc_llm_arch_desc;
fc_status fc_llm_write_keys(fc_gguf_writer *w, const struct fc_llm_arch_desc *d, const fc_llm_hparams *hp);

#endif
