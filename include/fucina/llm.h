/* SPDX-License-Identifier: MIT */
/* Fucina: LLM models (GGUF, llama.cpp's tensor names and metadata keys).
 *
 * Families (fc_llm_arch; src/llm/arch.c holds one table entry per family):
 * qwen3 and qwen3moe, llama (Llama 2/3.x, Mistral, and Mixtral when the file
 * has experts), qwen2 (Qwen2/2.5), gemma3, gemma2 and phi3. A model is loaded
 * from a GGUF file: the architecture descriptor (fc_llm_hparams) comes from
 * the metadata keys "<arch>.block_count", ".embedding_length", ... exactly as
 * llama.cpp reads them, with the family's graph switches; the weights are
 * zero-copy tensors over the file's bytes in memory (f32, f16, bf16 or any
 * block format fc_linear accepts); the tokenizer is built from the same file
 * (fucina/tokenizer.h).
 *
 * Evaluation goes through a session: a KV cache (f16 by default, f32 or
 * q8_0) of n_ctx positions per sequence, for one or several sequences.
 * fc_llm_session_eval appends tokens (a prefill of many, or one decode step)
 * and returns the logits of every appended position. The forward follows
 * llama.cpp's graph of the family (src/models/<arch>.cpp), one layer
 * description for all of them (src/llm/forward.c): pre-norm RMSNorm blocks,
 * optional per-head Q/K norms and Q/K/V biases, NeoX or normal RoPE, GQA
 * causal attention with optional softcap and sliding window, optional
 * post-norms, SiLU- or GELU-gated FFN or routed experts, tied output when
 * "output.weight" is absent.
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

/* The model families (src/llm/arch.c holds one table entry per family:
 * its GGUF name, metadata keys, tensors and graph switches). */
typedef enum fc_llm_arch {
    FC_LLM_ARCH_QWEN3 = 0,
    FC_LLM_ARCH_QWEN3MOE = 1, /* qwen3 attention; the FFN is a top-k mixture of experts */
    FC_LLM_ARCH_LLAMA = 2,    /* Llama 2/3.x, Mistral; Mixtral when <arch>.expert_count is set */
    FC_LLM_ARCH_QWEN2 = 3,    /* Qwen2 / Qwen2.5: Q/K/V biases */
    FC_LLM_ARCH_GEMMA3 = 4,   /* scaled embeddings, GELU gating, post-norms, interleaved sliding window */
    FC_LLM_ARCH_GEMMA2 = 5,   /* gemma3's switches without q/k norms, with attention and final softcaps */
    FC_LLM_ARCH_PHI3 = 6,     /* fused QKV and gate/up projections */
} fc_llm_arch;

/* The GGUF name of an architecture ("llama", ...); NULL out of range. */
FC_API const char *fc_llm_arch_name(fc_llm_arch arch);

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
    /* qwen3moe (0 for dense models): */
    int64_t n_expert;      /* <arch>.expert_count */
    int64_t n_expert_used; /* <arch>.expert_used_count (top-k per token) */
    int64_t n_ff_exp;      /* <arch>.expert_feed_forward_length (default n_ff / n_expert_used) */
    /* The graph's switches: the family's (src/llm/arch.c) as the file sets them. */
    int rope_neox;          /* 1: NeoX rotate-half pairs; 0: llama.cpp's "normal" adjacent pairs */
    double rope_freq_scale; /* 1 / <arch>.rope.scaling.factor (linear or YaRN scaling; 1: none) */
    double rope_attn_factor; /* <arch>.rope.scaling.attn_factor: the rotation's magnitude (default 1) */
    int64_t n_ctx_orig;     /* <arch>.rope.scaling.original_context_length (YaRN; default n_ctx_train) */
    double rope_ext_factor; /* YaRN's extrapolation mix: 1 with rope.scaling.type = yarn, else 0 */
    double yarn_beta_fast, yarn_beta_slow; /* <arch>.rope.scaling.yarn_beta_fast / _slow (default 32 / 1) */
    double rope_freq_scale_swa; /* the frequency scale of sliding layers (gemma3: 1, unscaled) */
    int has_rope_freqs;     /* rope_freqs.weight divides the frequencies (Llama 3.1 and later) */
    int qk_norm;            /* per-head RMSNorm of Q and K */
    int attn_bias;          /* Q/K/V projections have biases */
    int post_norms;         /* RMSNorm of the attention and FFN outputs before the residual adds */
    int ffn_gelu;           /* 1: GELU(tanh)-gated FFN; 0: SiLU-gated */
    double embd_scale;      /* token embeddings multiplied by this (gemma: sqrt(n_embd)); 1: none */
    double attn_scale;      /* the attention's query scale (1/sqrt(head_dim) unless the family says otherwise) */
    int attn_prescale;      /* 1: Q is multiplied by attn_scale before the attention (gemma, phi3), as their graphs do */
    double attn_softcap;    /* <arch>.attn_logit_softcapping (0: none) */
    double final_softcap;   /* <arch>.final_logit_softcapping (0: none) */
    int64_t n_swa;          /* <arch>.attention.sliding_window: keys per query on sliding layers (0: none) */
    int64_t swa_pattern;    /* layer l slides when l % swa_pattern < swa_pattern - 1 (0: no layer slides) */
    double rope_theta_swa;  /* the RoPE base of sliding layers */
} fc_llm_hparams;

/* ---- a random-weight model writer ---- */
typedef struct fc_make_model_options {
    /* NULL: "qwen3"; or any family of fc_llm_arch by its GGUF name ("qwen3moe": presets tiny and
     * small have 8 experts, 2 used; "llama", "qwen2", "gemma3", "gemma2", "phi3"). The tensors
     * and keys are the family's table entry (src/llm/arch.c), its switches as llama.cpp reads them. */
    const char *arch;
    /* NULL: "tiny" (2 layers, embd 64, 4 heads, 2 kv heads, head dim 32, ff 128, moe ff 32);
     * "small" (2 layers, embd 256, 4 heads, 2 kv heads, head dim 64, ff 768, moe ff 256: every
     * row width a multiple of 256, so K-quants apply to every matrix); "0.6b" (Qwen3-0.6B's
     * shapes: 28 layers, embd 1024, 16/8 heads of 128, ff 3072, vocab 151936; as qwen3moe: 16 experts of 768, 4 used).
     * tiny and small have a ~600-token vocabulary, 0.6b Qwen's 151936-id layout;
     * "llama-1b" (Llama-3.2-1B's shapes) and "gemma3-1b" (Gemma-3-1B's) for benchmarks. */
    const char *preset;
    /* matrix weights: FC_F32, FC_F16, FC_BF16, FC_Q8_0, FC_Q4_0, FC_Q4_K, FC_Q5_K or FC_Q6_K;
     * 0 (left unset) = FC_F32. Norms and the MoE router stay f32. A matrix whose row width is
     * not a whole number of blocks falls back as llama-quantize does (Q4_K -> Q5_0, Q5_K ->
     * Q5_1, Q6_K -> Q8_0). */
    fc_dtype dtype;
    uint64_t seed;      /* weights are a pure function of the seed */
    int untied;         /* 1: write output.weight; 0: tied to token_embd (as Qwen3-0.6B) */
    /* non-NULL: a llama-quantize mix ("Q4_K_M", "Q6_K", ...; fc_quantize_mix_name) applied
     * with llama.cpp's per-tensor rules to an f32 model written next to path (removed
     * after); dtype is then ignored. */
    const char *mix;
    /* 0: the preset's vocabulary. Otherwise, for the Qwen families (qwen3, qwen3moe, qwen2), Qwen3's
     * id layout with this many ids (>= 151669, e.g. 151936), for any preset: a tiny model with the
     * real vocabulary is a cheap tokenizer and output-layer test; for the others, the family's own
     * test vocabulary (llama: Llama 3's byte-level BPE; Mixtral, gemma, phi3: SentencePiece) padded
     * with unused tokens to this many ids. */
    int64_t n_vocab;
    int moe;        /* llama: the Mixtral variant (the preset's experts, each feed_forward_length wide) */
    int rope_freqs; /* llama: write rope_freqs.weight (Llama 3.1's frequency divisors) */
    /* NULL: no RoPE scaling keys; "linear" or "yarn": rope.scaling.type, .factor =
     * rope_scaling_factor (> 0; 0 means 4) and .original_context_length = the preset's
     * context / factor */
    const char *rope_scaling;
    double rope_scaling_factor;
    /* non-NULL: called with the fraction of the tensor data written so far (0..1, ending with 1)
     * after each slab of rows, as fc_llm_load_options.progress is (fc_cli_progress_update fits) */
    void (*progress)(double fraction, void *user);
    void *progress_user;
    /* NULL: the family's own chat template (Mixtral: mistral-v1). Otherwise a template family's
     * name (fc_chat_template_from_name: "mistral-v3", "chatml", ...), whose reference text is
     * written; for llama a mistral or llama2 family also gives it the SentencePiece vocabulary
     * (Mistral 7B's and Llama 2's layout, with Mistral's tool tokens). */
    const char *chat_template;
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
    /* How the weights reach memory. 0 (default): read into private memory
     * in 2 MiB pages (decode streams the weights every token, and 4 KiB
     * page-cache pages stall the hardware prefetchers), unless the file is
     * more than half the physical memory; then, or with 1, mmap it (pages
     * shared with the page cache and loaded on first touch). -1: always
     * read, whatever the file's size (llama.cpp's --no-mmap: a file that
     * does not fit in memory then ends in the kernel's OOM killer). */
    int mmap;
} fc_llm_load_options;
FC_API fc_llm_model *fc_llm_model_load_ex(fc_ctx *ctx, const char *path, const fc_llm_load_options *opt);
FC_API void fc_llm_model_free(fc_llm_model *m);
FC_API const fc_llm_hparams *fc_llm_model_hparams(const fc_llm_model *m);
FC_API const fc_tokenizer *fc_llm_model_tokenizer(const fc_llm_model *m);

/* ---- evaluation ---- */
typedef struct fc_llm_session fc_llm_session;

/* A KV cache of n_ctx positions (0: the model's n_ctx_train), f32, one
 * sequence. NULL + error on failure (OOM). */
FC_API fc_llm_session *fc_llm_session_new(fc_ctx *ctx, const fc_llm_model *m, int64_t n_ctx);

typedef struct fc_llm_session_options {
    int64_t n_ctx;    /* positions per sequence; 0: the model's n_ctx_train */
    fc_dtype kv_type; /* FC_F16 (default), FC_F32 or FC_Q8_0 */
    int n_seq;        /* sequences with their own cache and position (1..4096); default 1 */
} fc_llm_session_options;
/* {n_ctx 0, kv_type FC_F16, n_seq 1} */
FC_API fc_llm_session_options fc_llm_session_default_options(void);
/* A session with n_seq independent sequences, each with an n_ctx-position
 * cache of kv_type (opt NULL: the defaults). NULL + error naming the reason
 * (another kv_type: FC_ERR_UNSUPPORTED; a q8_0 cache when kv_head x head_dim
 * is not a multiple of 32; n_seq out of range; OOM). Free with
 * fc_llm_session_free before the model. */
FC_API fc_llm_session *fc_llm_session_new_ex(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_session_options *opt);
FC_API void fc_llm_session_free(fc_llm_session *s);
/* Positions evaluated so far (of sequence 0). */
FC_API int64_t fc_llm_session_pos(const fc_llm_session *s);
/* Positions evaluated so far in sequence seq (0 when seq is out of range). */
FC_API int64_t fc_llm_session_seq_pos(const fc_llm_session *s, int seq);
FC_API int fc_llm_session_n_seq(const fc_llm_session *s);
FC_API fc_dtype fc_llm_session_kv_type(const fc_llm_session *s);
/* Forget the cache of every sequence (position 0 again). */
FC_API void fc_llm_session_reset(fc_llm_session *s);
/* Keep positions 0..n_pos-1 (of sequence 0) and forget the rest (a rewind:
 * the next eval appends at n_pos). n_pos < 0 or > the current position is
 * an FC_ERR_INVALID_ARG error that leaves the session as it was. */
FC_API fc_status fc_llm_session_truncate(fc_ctx *ctx, fc_llm_session *s, int64_t n_pos);
/* The same for sequence seq (out of range: FC_ERR_INVALID_ARG). */
FC_API fc_status fc_llm_session_truncate_seq(fc_ctx *ctx, fc_llm_session *s, int seq, int64_t n_pos);
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
/* fc_llm_session_eval_ex on sequence seq of the session (its own positions
 * and cache rows): a prefill, or a decode step of one sequence. seq out of
 * range is FC_ERR_INVALID_ARG. */
FC_API fc_status fc_llm_session_eval_seq(fc_ctx *ctx, fc_llm_session *s, int seq, const fc_token *tokens, size_t n,
                                         fc_llm_logits which, float *logits);
/* Lockstep decode: one token for each of n distinct sequences (seqs[i], or
 * i when seqs is NULL) in one forward: the weights are read once for all n
 * rows; each row attends over its own sequence's cache at its own position.
 * logits (may be NULL) receives n x n_vocab floats, row i for seqs[i]. A
 * repeated or out-of-range sequence, a full sequence or a token out of
 * range is an FC_ERR_INVALID_ARG error that leaves the session as it was. */
FC_API fc_status fc_llm_session_decode_batch(fc_ctx *ctx, fc_llm_session *s, const int *seqs, const fc_token *tokens,
                                             size_t n, float *logits);

/* One entry of a mixed batch: n >= 1 tokens appended to sequence seq. */
typedef struct fc_llm_batch_entry {
    int seq;
    const fc_token *tokens;
    size_t n;
    fc_llm_logits logits; /* which of the entry's rows get logits */
} fc_llm_batch_entry;
/* Continuous batching: several sequences' tokens in one forward — prefill
 * chunks of some beside decode steps of others — the weights read once for
 * all rows; each row attends over its own sequence's cache. Entries name
 * distinct sequences. logits (may be NULL) receives, entry after entry, n
 * rows for FC_LLM_LOGITS_ALL, 1 for LAST, none for NONE. A repeated or
 * out-of-range sequence, an entry that overflows its sequence's cache or a
 * token out of range is an FC_ERR_INVALID_ARG error naming the entry and
 * leaving the session as it was. A one-row product and a many-row one may
 * take different kernels that sum in different orders, so a row's logits
 * may differ by rounding from the same row evaluated in another batch. */
FC_API fc_status fc_llm_session_eval_batch(fc_ctx *ctx, fc_llm_session *s, const fc_llm_batch_entry *b, size_t n,
                                           float *logits);

/* ---- session state files (src/llm/session_file.c) ----
 * A session's state: every sequence's position and its K/V cache rows in
 * the cache's own encoding (so a restored session continues with the same
 * bits as one never saved), the tokens sequence 0 evaluated, and the model's
 * identity (architecture, geometry, a hash of its weights and LoRA
 * adapters) and the KV type, which a load must match. */

/* Write s's state to path atomically (a temporary file renamed over it: a
 * reader sees the old file or the whole new one). tokens are sequence 0's,
 * n_tokens = its position (fc_llm_session_pos). FC_ERR_INVALID_ARG for a
 * count that differs or a token out of range, FC_ERR_IO naming the path. */
FC_API fc_status fc_llm_session_save(fc_ctx *ctx, const fc_llm_session *s, const char *path, const fc_token *tokens,
                                     size_t n_tokens);
/* Replace s's state with the file's. s must be a session of the same model
 * (with the same adapters), KV type and n_seq, with room for the saved
 * positions (its n_ctx may differ). tokens (may be NULL, with n_tokens)
 * receives a copy of sequence 0's tokens (free with fc_tokens_free). A file
 * that is missing, not a state file, of another version, model, geometry or
 * KV type, truncated or corrupted is an error naming the file and the
 * reason, and s is left as it was. */
FC_API fc_status fc_llm_session_load(fc_ctx *ctx, fc_llm_session *s, const char *path, fc_token **tokens,
                                     size_t *n_tokens);
/* fc_llm_session_load keeping of sequence 0 only the longest common prefix
 * of its tokens and prompt[0..n_prompt) (a prompt cache: evaluate the rest);
 * *n_reused (may be NULL) = that prefix's length, which may be 0. The saved
 * sequence 0 may be longer than s's cache. */
FC_API fc_status fc_llm_session_load_prefix(fc_ctx *ctx, fc_llm_session *s, const char *path, const fc_token *prompt,
                                            size_t n_prompt, size_t *n_reused);

#ifdef __cplusplus
}
#endif
#endif
