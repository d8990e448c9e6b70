/* SPDX-License-Identifier: MIT */
/* Fucina: the tokenizers of GGUF models, token-for-token identical to
 * llama.cpp: byte-level BPE (GPT-2 style: Qwen2/Qwen3, Llama 3) and
 * SentencePiece (Llama 2, Mistral, Gemma, Phi-3).
 *
 * GGUF keys read: tokenizer.ggml.model ("gpt2": byte-level BPE; "llama":
 * SentencePiece, SPM), tokenizer.ggml.pre (BPE only: "qwen2", "llama-bpe",
 * "gpt-2" and llama.cpp's aliases of them), tokenizer.ggml.tokens
 * (strings), tokenizer.ggml.token_type (i32, optional: all normal when
 * absent), tokenizer.ggml.scores (f32 or i32; required for SPM),
 * tokenizer.ggml.merges (BPE: "left right", rank = index),
 * tokenizer.ggml.{bos,eos,unknown,padding}_token_id (u32, optional; SPM
 * defaults 1, 2, 0), tokenizer.ggml.add_{bos,eos}_token (bool; default
 * true / false for SPM and the llama3 pre-tokenizers, false / false
 * otherwise) and tokenizer.ggml.add_space_prefix (bool; default true for
 * SPM). An unknown model or pre-tokenizer, or a missing BPE pre-tokenizer,
 * is an error naming it and listing the supported names, never a guess.
 *
 * Encoding: (1) the text is partitioned by the strings of control and
 * user-defined tokens (longest first; control tokens only when
 * FC_TOKENIZE_PARSE_SPECIAL is given, user-defined ones always, as
 * llama.cpp does); (2) BPE: each remaining piece is split by the
 * pre-tokenizer regex (qwen2: contractions, letter runs with one leading
 * non-letter, single digits, punctuation runs, newlines, whitespace;
 * llama3: the same with digits in threes) and each word's bytes are merged
 * by rank; invalid UTF-8 is tokenized as U+FFFD, one per bad byte.
 * SentencePiece: spaces become U+2581 with one more in front of the first
 * piece and of each piece after a special token (add_space_prefix), and
 * adjacent symbols whose concatenation is a token merge, highest score
 * first; what no token covers becomes <0xXX> byte tokens.
 *
 * Decoding: a token's piece is its bytes (U+2581 back to a space for SPM,
 * <0xXX> to its byte); control tokens render only when asked
 * (FC_DETOKENIZE_UNPARSE_SPECIAL). fc_detokenize and the stream also apply
 * llama.cpp's llama_detokenize rules: the first token's leading space is
 * dropped with add_space_prefix, and the gpt2 / llama3 pre-tokenizers clean
 * up spaces (" ," -> ","; " 's" -> "'s"). The streaming detokenizer takes
 * tokens one at a time and returns only complete UTF-8 characters.
 *
 * A tokenizer is immutable after loading: any number of threads may encode
 * and decode with it at once (each stream is single-threaded). */
#ifndef FUCINA_TOKENIZER_H
#define FUCINA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/gguf.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t fc_token;
#define FC_TOKEN_NONE ((fc_token)-1)

typedef struct fc_tokenizer fc_tokenizer;
typedef struct fc_detok_stream fc_detok_stream;

/* tokenizer.ggml.token_type values (the file's numbers, llama.cpp's
 * llama_token_type). */
typedef enum fc_token_type {
    FC_TOKEN_TYPE_UNDEFINED = 0,
    FC_TOKEN_TYPE_NORMAL = 1,
    FC_TOKEN_TYPE_UNKNOWN = 2,
    FC_TOKEN_TYPE_CONTROL = 3,
    FC_TOKEN_TYPE_USER_DEFINED = 4,
    FC_TOKEN_TYPE_UNUSED = 5,
    FC_TOKEN_TYPE_BYTE = 6,
} fc_token_type;

/* Build from an open GGUF (the tokenizer copies what it needs; g may be
 * closed afterwards). NULL + error in ctx: a missing or mistyped key, an
 * unknown model or pre-tokenizer, a malformed merge, duplicate tokens, a
 * special token id out of range, SPM scores missing or not one per token,
 * a BYTE token not spelled <0xXX>. */
FC_API fc_tokenizer *fc_tokenizer_from_gguf(fc_ctx *ctx, fc_gguf *g);
/* Open `path` and build from it. */
FC_API fc_tokenizer *fc_tokenizer_load(fc_ctx *ctx, const char *path);
FC_API void fc_tokenizer_free(fc_tokenizer *t);

FC_API int32_t fc_tokenizer_n_vocab(const fc_tokenizer *t);
/* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece). */
FC_API const char *fc_tokenizer_model(const fc_tokenizer *t);
/* tokenizer.ggml.pre as written ("qwen2", "llama-bpe"); "" when absent (SPM
 * has no pre-tokenizer and ignores the key). */
FC_API const char *fc_tokenizer_pre(const fc_tokenizer *t);
FC_API fc_token fc_tokenizer_bos(const fc_tokenizer *t);    /* FC_TOKEN_NONE when absent */
FC_API fc_token fc_tokenizer_eos(const fc_tokenizer *t);
FC_API fc_token fc_tokenizer_pad(const fc_tokenizer *t);
FC_API fc_token fc_tokenizer_unk(const fc_tokenizer *t);
FC_API int fc_tokenizer_add_bos(const fc_tokenizer *t);
FC_API int fc_tokenizer_add_eos(const fc_tokenizer *t);
/* SPM: a space is put before the text (and after each special token), and
 * fc_detokenize drops the first token's leading space. */
FC_API int fc_tokenizer_add_space_prefix(const fc_tokenizer *t);
/* tokenizer.ggml.scores[id] (0 when the file has none or id is out of range). */
FC_API float fc_tokenizer_token_score(const fc_tokenizer *t, fc_token id);
/* The token's text as stored in the vocabulary (byte-mapped for normal BPE
 * tokens, with U+2581 for spaces in SPM); NULL when id is out of range. */
FC_API const char *fc_tokenizer_token_text(const fc_tokenizer *t, fc_token id, size_t *len);
/* FC_TOKEN_TYPE_UNDEFINED when id is out of range. */
FC_API fc_token_type fc_tokenizer_token_type(const fc_tokenizer *t, fc_token id);
/* The id of a token by its vocabulary text, FC_TOKEN_NONE when absent. */
FC_API fc_token fc_tokenizer_find(const fc_tokenizer *t, const char *text, size_t len);

/* ---- encoding ---- */
#define FC_TOKENIZE_ADD_SPECIAL 1u   /* add BOS/EOS when the vocabulary asks for them */
#define FC_TOKENIZE_PARSE_SPECIAL 2u /* control-token strings in the text become those tokens */

/* Tokens of text[0..len) into a new array (free it with fc_tokens_free);
 * *n may be 0 (then *tokens is NULL). */
FC_API fc_status fc_tokenize(fc_ctx *ctx, const fc_tokenizer *t, const char *text, size_t len, unsigned flags,
                             fc_token **tokens, size_t *n);
FC_API void fc_tokens_free(fc_token *tokens);

/* ---- decoding ---- */
#define FC_DETOKENIZE_REMOVE_SPECIAL 1u  /* drop a leading BOS / trailing EOS the vocabulary adds
                                          * (then, as in llama.cpp, no leading space is stripped) */
#define FC_DETOKENIZE_UNPARSE_SPECIAL 2u /* render control tokens' text (otherwise they are empty) */

/* The bytes of one token (valid while t lives; llama_token_to_piece with
 * lstrip 0); an id out of range is an FC_ERR_INVALID_ARG error naming it
 * and the vocabulary size. */
FC_API fc_status fc_token_piece(fc_ctx *ctx, const fc_tokenizer *t, fc_token id, int special, const char **piece,
                                size_t *len);
/* All tokens' bytes concatenated into a new NUL-terminated string (free()
 * it); len, when not NULL, is its length. */
FC_API fc_status fc_detokenize(fc_ctx *ctx, const fc_tokenizer *t, const fc_token *tokens, size_t n, unsigned flags,
                               char **text, size_t *len);

/* Streaming: push tokens one at a time; each push returns the bytes that
 * complete UTF-8 characters now (possibly none), holding back a trailing
 * incomplete character until the tokens that finish it arrive. Bytes that
 * can never be part of a valid character (a stray continuation byte, a
 * sequence cut short by another character) are passed through at once, so
 * the concatenation of every push and the flush equals fc_detokenize (the
 * first token pushed is the start of the text: its leading space goes with
 * add_space_prefix; the space clean-up holds back a few ASCII bytes until
 * the next token shows whether they stay). The returned pointer is valid
 * until the next call on the stream.
 * flags: FC_DETOKENIZE_UNPARSE_SPECIAL. */
FC_API fc_detok_stream *fc_detok_stream_new(fc_ctx *ctx, const fc_tokenizer *t, unsigned flags);
FC_API fc_status fc_detok_stream_push(fc_ctx *ctx, fc_detok_stream *s, fc_token id, const char **out, size_t *len);
/* Returns what is held back (an incomplete character, as raw bytes) and
 * resets the stream. */
FC_API fc_status fc_detok_stream_flush(fc_ctx *ctx, fc_detok_stream *s, const char **out, size_t *len);
FC_API void fc_detok_stream_free(fc_detok_stream *s);

#ifdef __cplusplus
}
#endif
#endif
