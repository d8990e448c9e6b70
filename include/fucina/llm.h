/* Fucina: LLM models (GGUF, llama.cpp's tensor names and metadata keys).
 *
 * Supported architecture: qwen3 (dense). A model is loaded from a GGUF file:
 * the architecture descriptor (fc_llm_hparams) comes from the metadata keys
 * "<arch>.block_count", ".embedding_length", ... exactly as llama.cpp reads
 * them; the weights are zero-copy tensors over the mapped file (f32, f16 or
 * any block format fc_linear accepts); the tokenizer is built from the same
 * file (fucina/tokenizer.h).
 *
 * Evaluation goes through a session: a KV cache (f32) of n_ctx positions.
 * fc_llm_session_eval appends tokens (a prefill of many, or one decode step)
 * and returns the logits of every appended position. The forward follows
 * llama.cpp's graph (src/models/qwen3.cpp): pre-norm RMSNorm blocks, per-head
 * RMSNorm of Q and K, NeoX RoPE, GQA causal attention scaled by 1/sqrt(d),
 * SiLU-gated FFN, tied output when "output.weight" is absent.
 *
 * Models and sessions own their tensors: create and free them outside any
 * exec scope (fc_scope_begin) of the calling thread. */
#ifndef FUCINA_LLM_H
#define FUCINA_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_llm_arch {
    FC_LLM_ARCH_QWEN3 = 0,
} fc_llm_arch;

/* The architecture descriptor, from the GGUF metadata. */
typedef struct fc_llm_hparams {
    fc_llm_arch arch;
    int64_t n_vocab;     /* rows of token_embd.weight */
    int64_t n_ctx_train; /* <arch>.context_length */
    int64_t n_embd;      /* <arch>.embedding_length */
    int64_t n_ff;        /* <arch>.feed_forward_length */
    int64_t n_layer;     /* <arch>.block_count */
    int64_t n_head;      /* <arch>.attention.head_count */
    int64_t n_head_kv;   /* <arch>.attention.head_count_kv (default n_head) */
    int64_t head_dim;    /* <arch>.attention.key_length (default n_embd / n_head); = value_length */
    int64_t n_rot;       /* <arch>.rope.dimension_count (default head_dim) */
    double rope_theta;   /* <arch>.rope.freq_base (default 10000) */
    double rms_eps;      /* <arch>.attention.layer_norm_rms_epsilon (required) */
    int tied_output;     /* 1 when output.weight is absent (token_embd is reused) */
} fc_llm_hparams;

/* ---- a random-weight model writer ---- */
typedef struct fc_make_model_options {
    const char *arch;   /* NULL: "qwen3" (the only one) */
    const char *preset; /* NULL: "tiny" (the only one: 2 layers, embd 64, 4 heads, 2 kv heads, head dim 32, ff 128) */
    fc_dtype dtype;     /* matrix weights: FC_F32, FC_F16 or FC_Q8_0; 0 (left unset) = FC_F32; norms stay f32 */
    uint64_t seed;      /* weights are a pure function of the seed */
    int untied;         /* 1: write output.weight; 0: tied to token_embd (as Qwen3-0.6B) */
} fc_make_model_options;

/* Write a model with llama.cpp's tensor names and metadata keys and a real
 * byte-level BPE vocabulary (256 byte tokens, a few hundred merges, the
 * Qwen control tokens; tokenizer.ggml.pre = "qwen2"). Weights: token_embd
 * N(0, 1); each matrix N(0, 1/sqrt(in)) so activations stay O(1); norm
 * weights 1 + N(0, 0.1) (not all ones, so a dropped norm weight shows). */
FC_API fc_status fc_llm_make_model(fc_ctx *ctx, const char *path, const fc_make_model_options *opt);

/* ---- loading ---- */
typedef struct fc_llm_model fc_llm_model;

/* NULL + error (naming the file and the key or tensor) on failure: an
 * unsupported general.architecture, a missing key, a tensor of the wrong
 * shape or an unsupported type. */
FC_API fc_llm_model *fc_llm_model_load(fc_ctx *ctx, const char *path);

/* Loading with a progress report: progress(fraction in [0, 1], user) is
 * called as the weights are bound and their pages brought in, ending with 1. */
typedef struct fc_llm_load_options {
    void (*progress)(double fraction, void *user);
    void *progress_user;
} fc_llm_load_options;
FC_API fc_llm_model *fc_llm_model_load_ex(fc_ctx *ctx, const char *path, const fc_llm_load_options *opt);
FC_API void fc_llm_model_free(fc_llm_model *m);
FC_API const fc_llm_hparams *fc_llm_model_hparams(const fc_llm_model *m);
FC_API const fc_tokenizer *fc_llm_model_tokenizer(const fc_llm_model *m);

/* ---- evaluation ---- */
typedef struct fc_llm_session fc_llm_session;

/* A KV cache of n_ctx positions (0: the model's n_ctx_train), f32. */
FC_API fc_llm_session *fc_llm_session_new(fc_ctx *ctx, const fc_llm_model *m, int64_t n_ctx);

typedef struct fc_llm_session_options {
    int64_t n_ctx;    /* positions per sequence; 0: the model's n_ctx_train */
    fc_dtype kv_type; /* FC_F16 (default), FC_F32 or FC_Q8_0 */
    int n_seq;        /* sequences decoded in lockstep; default 1 */
} fc_llm_session_options;
/* {n_ctx 0, kv_type FC_F16, n_seq 1} */
FC_API fc_llm_session_options fc_llm_session_default_options(void);
FC_API fc_llm_session *fc_llm_session_new_ex(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_session_options *opt);
FC_API void fc_llm_session_free(fc_llm_session *s);
/* Positions evaluated so far. */
FC_API int64_t fc_llm_session_pos(const fc_llm_session *s);
/* Forget the cache (position 0 again). */
FC_API void fc_llm_session_reset(fc_llm_session *s);
/* Keep positions 0..n_pos-1 and forget the rest (a rewind: the next eval
 * appends at n_pos). n_pos > the current position is an error. */
FC_API fc_status fc_llm_session_truncate(fc_ctx *ctx, fc_llm_session *s, int64_t n_pos);
/* Evaluate n >= 1 tokens at positions pos..pos+n-1. logits (may be NULL)
 * receives n x n_vocab floats, row i for token i. A token id out of range
 * or a full cache is an FC_ERR_INVALID_ARG error and leaves the session as
 * it was. */
FC_API fc_status fc_llm_session_eval(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n,
                                     float *logits);

/* Which logits an eval computes: every appended position (n x n_vocab), the
 * last one only (1 x n_vocab: a prefill that goes on to decode skips the
 * output projection of the other rows), or none. */
typedef enum fc_llm_logits {
    FC_LLM_LOGITS_ALL = 0,
    FC_LLM_LOGITS_LAST = 1,
    FC_LLM_LOGITS_NONE = 2,
} fc_llm_logits;
FC_API fc_status fc_llm_session_eval_ex(fc_ctx *ctx, fc_llm_session *s, const fc_token *tokens, size_t n,
                                        fc_llm_logits which, float *logits);

#ifdef __cplusplus
}
#endif
#endif
