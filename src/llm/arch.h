/* SPDX-License-Identifier: MIT */
/* Fucina llm: the architecture table (internal).
 *
 * A model family is one entry of k_archs (src/llm/arch.c), in the manner of
 * llama.cpp's llama-arch tables but holding the graph's switches too: the
 * GGUF architecture name (also the metadata key prefix), the metadata keys
 * beyond the common ones, the tensors (name, axes, required or optional,
 * and when they apply) and the switches the one forward (src/llm/forward.c)
 * reads: q/k norms, RoPE pairs, biases, post-norms, embedding scale,
 * softcaps, sliding window pattern and base, FFN activation, fused
 * projections. Loading (src/llm/model.c) and the model writer
 * (src/llm/make_model.c) both walk the entry, so a family that needs no new
 * block is data only. */
#ifndef FC_LLM_ARCH_H
#define FC_LLM_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/llm.h"

/* The sizes a tensor's axes are made of; each has one axis name (the
 * forward and the tests contract by it), see fc_llm_dim_axis. */
typedef enum fc_llm_dim {
    FC_DIM_NONE = 0, /* unused trailing axis */
    FC_DIM_EMBD,     /* n_embd: "embd" */
    FC_DIM_Q,        /* n_head * head_dim: "q" */
    FC_DIM_KV,       /* n_head_kv * head_dim: "kv" */
    FC_DIM_QKV,      /* q + 2 kv, a fused projection's rows: "qkv" */
    FC_DIM_HEAD,     /* head_dim: "d" */
    FC_DIM_FF,       /* n_ff: "ff" */
    FC_DIM_FF2,      /* 2 n_ff, a fused gate/up projection's rows: "ff2" */
    FC_DIM_EXPERT,   /* n_expert: "expert" */
    FC_DIM_FF_EXP,   /* n_ff_exp: "ff" */
    FC_DIM_VOCAB,    /* n_vocab: "vocab" */
    FC_DIM_ROT_HALF, /* n_rot / 2, the frequency factors: "rot" */
} fc_llm_dim;

/* When a tensor is part of the model. */
typedef enum fc_llm_when {
    FC_WHEN_ALWAYS = 0,
    FC_WHEN_DENSE,   /* the FFN is dense (no experts) */
    FC_WHEN_MOE,     /* the FFN is a mixture of experts */
} fc_llm_when;

typedef enum fc_llm_need {
    FC_REQUIRED = 0,
    FC_OPTIONAL,     /* absent: NULL (a missing bias, an untied output) */
} fc_llm_need;

/* One tensor: "blk.%d.<name>" for a layer's (field is an offset into
 * fc_llm_layer), "<name>" for a global one (into fc_llm_model). A rank-3
 * tensor is a stack of experts [expert, rows, cols] with one zero-copy 2-D
 * view per expert (views: the offset of its fc_tensor ** array). Dims are
 * in our order, [out, in] for a matrix (GGUF's reversed). */
typedef struct fc_llm_tensor_spec {
    const char *name;
    size_t field;
    size_t views;
    int rank;
    fc_llm_dim dims[3];
    fc_llm_when when;
    fc_llm_need need;
} fc_llm_tensor_spec;

/* A metadata key "<arch>.<suffix>" read into an fc_llm_hparams field. */
typedef enum fc_llm_key_type { FC_KEY_U32, FC_KEY_F32 } fc_llm_key_type;
typedef struct fc_llm_key_spec {
    const char *suffix;
    size_t field;            /* offsetof(fc_llm_hparams, ...): an int64_t (U32) or a double (F32) */
    fc_llm_key_type type;
    fc_llm_need need;
    double dflt;             /* when optional and absent (derived defaults are set after reading) */
} fc_llm_key_spec;

/* The FFN of a family. */
typedef enum fc_llm_ffn_kind {
    FC_FFN_DENSE = 0,        /* always dense */
    FC_FFN_MOE,              /* always experts (expert_count required) */
    FC_FFN_DENSE_OR_MOE,     /* experts when <arch>.expert_count is set (llama: Mixtral) */
} fc_llm_ffn_kind;

/* How the attention scale is chosen. */
typedef enum fc_llm_scale_rule {
    FC_SCALE_HEAD_DIM = 0,   /* 1 / sqrt(head_dim) inside the attention */
    FC_SCALE_Q_HEAD_DIM,     /* Q multiplied by 1 / sqrt(head_dim) before the attention (scale 1), as ggml_scale on Q */
    FC_SCALE_Q_GEMMA,        /* the same, but 1 / sqrt(n_embd / n_head) for the largest model (scale_embd_layers) */
} fc_llm_scale_rule;

typedef struct fc_llm_arch_desc {
    fc_llm_arch arch;
    const char *name;                  /* general.architecture and the key prefix */
    /* switches */
    int rope_neox;                     /* NeoX rotate-half pairs, else llama.cpp's normal (adjacent) */
    int qk_norm, attn_bias, post_norms, ffn_gelu;
    int fused_qkv, fused_gate_up;      /* attn_qkv.weight; ffn_up.weight of 2 n_ff rows (gate first) */
    int embd_scale;                    /* multiply the embeddings by sqrt(n_embd) */
    fc_llm_scale_rule scale_rule;
    fc_llm_ffn_kind ffn;
    int swa_unscaled;                  /* sliding layers take no RoPE scaling (gemma3) */
    int scale_embd_layers;             /* FC_SCALE_Q_GEMMA: the block count of the model scaled by n_embd / n_head */
    int q_is_embd;                     /* llama.cpp's graph takes Q and the output projection n_embd wide */
    /* family-specific metadata keys, beyond k_common_keys */
    const fc_llm_key_spec *keys;
    int n_keys;
    /* the tensors, global and per layer, in llama.cpp's loader order */
    const fc_llm_tensor_spec *globals;
    int n_globals;
    const fc_llm_tensor_spec *layer;
    int n_layer;
} fc_llm_arch_desc;

/* The entry for a GGUF architecture name, NULL when none. */
const fc_llm_arch_desc *fc_llm_arch_find(const char *name);
/* The entry of an enum value (never NULL for a value of the enum). */
const fc_llm_arch_desc *fc_llm_arch_get(fc_llm_arch arch);
/* The supported names, comma-separated, for error messages. */
const char *fc_llm_arch_names(void);
/* The keys every family reads ("block_count", ...). */
const fc_llm_key_spec *fc_llm_common_keys(int *n);
/* A dimension's size under hp, and its axis name. */
int64_t fc_llm_dim_size(fc_llm_dim d, const fc_llm_hparams *hp);
const char *fc_llm_dim_axis(fc_llm_dim d);
/* Whether the tensor applies to a model with these hparams. */
int fc_llm_tensor_applies(const fc_llm_tensor_spec *t, const fc_llm_hparams *hp);
/* The spec of entry d a GGUF tensor name stands for: "blk.L.<name>" a layer
 * tensor that applies under hp (*layer = L, which the caller compares with
 * the block count), anything else a global (*layer = -1). NULL when d has no
 * such tensor (a "blk." name whose layer does not parse included). */
const fc_llm_tensor_spec *fc_llm_spec_of(const fc_llm_arch_desc *d, const fc_llm_hparams *hp, const char *name,
                                         long *layer);

#endif
