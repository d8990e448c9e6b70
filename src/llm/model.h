/* SPDX-License-Identifier: MIT */
/* Fucina llm: a loaded model (internal). Weights carry axis names the
 * forward contracts by: matrices [out, in] as fc_linear wants them. */
#ifndef FC_LLM_MODEL_H
#define FC_LLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/llm.h"
#include "fucina/tensor.h"

typedef struct fc_llm_layer {
    fc_tensor *attn_norm;           /* [embd] */
    fc_tensor *wq, *wk, *wv, *wo;   /* [q, embd] [kv, embd] [kv, embd] [embd, q]; wq/wk/wv NULL when fused */
    fc_tensor *wqkv;                /* fused [qkv, embd] (phi3): Q rows, then K, then V */
    fc_tensor *bq, *bk, *bv, *bo;   /* [q] [kv] [kv] [embd] or NULL */
    fc_tensor *q_norm, *k_norm;     /* [d] or NULL */
    fc_tensor *attn_post_norm;      /* [embd] or NULL (gemma) */
    fc_tensor *ffn_norm;            /* [embd] */
    fc_tensor *gate, *up, *down;    /* dense: [ff, embd] [ff, embd] [embd, ff]; NULL for MoE;
                                     * fused gate/up (phi3): up is [ff2, embd], gate rows first, gate NULL */
    fc_tensor *ffn_post_norm;       /* [embd] or NULL (gemma) */
    /* mixtures: the router [expert, embd], the 3-D expert weights as in the
     * file ([expert, ff, embd], [expert, ff, embd], [expert, embd, ff]; they
     * own the mapped bytes) and one zero-copy 2-D view per expert into them
     * (the per-expert weight fc_linear takes, quantized or not). */
    fc_tensor *gate_inp;
    fc_tensor *gate_exps, *up_exps, *down_exps;
    fc_tensor **gate_e, **up_e, **down_e; /* [n_expert] each */
    int swa;                        /* this layer attends over a sliding window (its own RoPE base) */
} fc_llm_layer;

struct fc_llm_model {
    fc_llm_hparams hp;
    const struct fc_llm_arch_desc *desc; /* the family's table entry (src/llm/arch.c) */
    fc_tokenizer *tok;
    fc_tensor *tok_embd;    /* [vocab, embd] */
    fc_tensor *output_norm; /* [embd] */
    fc_tensor *output;      /* [vocab, embd]: tok_embd itself when tied (another reference) */
    fc_tensor *rope_freqs;  /* [rot] frequency divisors or NULL */
    fc_llm_layer *layers;
    struct fc_llm_lora_set *lora; /* the adapters set (fc_llm_model_set_loras), NULL when none */
    int64_t pooling_type;   /* <arch>.pooling_type in llama.cpp's numbers; -1 absent */
    const struct fc_llm_act_hook *act_hook; /* an imatrix collector's observer, NULL when none */
};

/* An observer of the projections' inputs (src/llm/imatrix.c): the forward's
 * project() calls fn for every weight it multiplies (an expert's 2-D view
 * for an expert), with the rows a[n_rows, cols] it multiplies it by, on the
 * calling thread. NULL, the default, costs the forward one test. */
typedef struct fc_llm_act_hook {
    void (*fn)(void *user, const fc_tensor *w, const float *a, int64_t n_rows, int64_t cols);
    void *user;
} fc_llm_act_hook;

/* One LoRA delta of a weight (src/llm/lora.c): y += scale * (x A^T) B^T over
 * a's [rank, in] and b's [out, rank] (GGUF's lora_a / lora_b, dims reversed),
 * both f32, f16 or bf16 and retained by the set; the weight's deltas in the
 * order the adapters were set. token_embd's are llama.cpp's other layout:
 * a [vocab, rank] (a row per token), b [embd, rank]; the embedding row of
 * token t gains scale * b · a[t]. */
typedef struct fc_llm_lora_delta {
    fc_tensor *a, *b;
    int64_t rank;
    float scale; /* user scale x alpha / rank (alpha 0: the user scale) */
    const struct fc_llm_lora_delta *next;
} fc_llm_lora_delta;

/* The adapters set on a model: an open-addressing table from a weight (its
 * fc_tensor, the pointer project() receives) to its first delta. */
typedef struct fc_llm_lora_set {
    size_t cap;               /* a power of two, at least twice the adapted weights */
    const fc_tensor **keys;   /* [cap], NULL: empty */
    fc_llm_lora_delta **first; /* [cap] */
    fc_llm_lora_delta *deltas; /* all of them, one allocation */
    size_t n_deltas, n_adapters;
    /* token_embd's deltas, apart: a tied model's output is the same tensor,
     * and its product must not take them */
    const fc_llm_lora_delta *tok_embd;
} fc_llm_lora_set;

/* The table slot a weight hashes to (Fibonacci hashing of the pointer: the
 * low bits of heap addresses are alignment). */
static inline size_t fc_llm_lora_slot(const fc_tensor *w, size_t cap)
{
    return (size_t)(((uint64_t)(uintptr_t)w * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}
/* The deltas of weight w, NULL when it has none (src/llm/lora_apply.c). */
const fc_llm_lora_delta *fc_llm_lora_find(const fc_llm_lora_set *s, const fc_tensor *w);
/* y[n_rows, n_out] += each delta of the list applied to a[n_rows, cols],
 * through the GEMM. 0, or -1 (out of memory). */
int fc_llm_lora_apply(fc_ctx *ctx, const fc_llm_lora_delta *d, const float *a, int64_t n_rows, int64_t cols,
                      float *y, int64_t n_out);
/* x[i] (n rows of embd) += the token_embd deltas of token tok[i], as
 * llama.cpp's build_inp_embd adds them (before any embedding scale). 0, or
 * -1 (out of memory). */
int fc_llm_lora_embd(fc_ctx *ctx, const fc_llm_lora_delta *d, const int32_t *tok, int64_t n, float *x, int64_t embd);
void fc_llm_lora_set_free(fc_llm_lora_set *s);

/* Decode reads every weight once per token: before a stretch of serial
 * steps (norms, rope, attention bookkeeping, the activation) the forward
 * posts the first LLM_PREFETCH_BYTES of the next matmul's weights to an
 * idle worker (fc_workers_prefetch), so they stream while the calling
 * thread works alone and the matmul starts warm. A hint: results do not
 * depend on it. */
/* The tensor slot at byte offset off of a model or layer (a spec's field). */
static inline fc_tensor **fc_llm_slot(void *base, size_t off) { return (fc_tensor **)((char *)base + off); }

/* The family's switches and the values derived from the metadata keys
 * already in hp (src/llm/model.c; the loader and the training model). */
void fc_llm_hparams_switches(fc_llm_hparams *hp, const struct fc_llm_arch_desc *d);

#define LLM_PREFETCH_BYTES ((size_t)256 << 10)
void fc_llm_prefetch(fc_ctx *ctx, const fc_tensor *w);
/* One token's routing (src/llm/moe.c): the softmax of its n_expert router
 * logits (probs: n_expert floats of scratch), the k most probable experts
 * in descending order in sel, their weights renormalized in w, as
 * llama.cpp's qwen3moe graph. */
void fc_llm_moe_route(const float *logits, int64_t n_expert, int64_t k, float *probs, int32_t *sel, float *w);
#endif
