/* SPDX-License-Identifier: MIT */
/* Fucina llm: the architecture table. One entry per family; the facts are
 * llama.cpp's (src/llama-arch.cpp names, the per-model hparams loaders and
 * graphs), so a GGUF converted for llama.cpp loads here and computes the
 * same function.
 *
 * Tensor order within an entry is the order the model writer emits (and,
 * for qwen3, the order earlier files were written in, so seeds and files
 * stay the same). Dims are ours, [out, in]: GGUF stores them reversed. */
#include <stdlib.h>
#include <string.h>

#include "llm/arch.h"
#include "llm/model.h"

#define L_(nm, fld, d0, d1, when, need) \
    {nm, offsetof(fc_llm_layer, fld), 0, (d1) == FC_DIM_NONE ? 1 : 2, {d0, d1, FC_DIM_NONE}, when, need}
#define LV(nm, fld, d0) L_(nm, fld, d0, FC_DIM_NONE, FC_WHEN_ALWAYS, FC_REQUIRED)          /* required vector */
#define LVO(nm, fld, d0) L_(nm, fld, d0, FC_DIM_NONE, FC_WHEN_ALWAYS, FC_OPTIONAL)        /* optional vector */
#define LM(nm, fld, d0, d1) L_(nm, fld, d0, d1, FC_WHEN_ALWAYS, FC_REQUIRED)              /* required matrix */
#define LD(nm, fld, d0, d1) L_(nm, fld, d0, d1, FC_WHEN_DENSE, FC_REQUIRED)               /* dense FFN matrix */
#define LR(nm, fld, d0, d1) L_(nm, fld, d0, d1, FC_WHEN_MOE, FC_REQUIRED)                 /* the router */
#define LX(nm, fld, views, d1, d2)                                                                                 \
    {nm, offsetof(fc_llm_layer, fld), offsetof(fc_llm_layer, views), 3, {FC_DIM_EXPERT, d1, d2}, FC_WHEN_MOE,      \
     FC_REQUIRED}
#define G_(nm, fld, d0, d1, need) \
    {nm, offsetof(fc_llm_model, fld), 0, (d1) == FC_DIM_NONE ? 1 : 2, {d0, d1, FC_DIM_NONE}, FC_WHEN_ALWAYS, need}
#define N(a) ((int)(sizeof a / sizeof a[0]))

/* ---- tensors -------------------------------------------------------------------- */

/* token_embd, output_norm, then output (absent: tied to token_embd) */
static const fc_llm_tensor_spec k_globals[] = {
    G_("token_embd.weight", tok_embd, FC_DIM_VOCAB, FC_DIM_EMBD, FC_REQUIRED),
    G_("output_norm.weight", output_norm, FC_DIM_EMBD, FC_DIM_NONE, FC_REQUIRED),
    G_("output.weight", output, FC_DIM_VOCAB, FC_DIM_EMBD, FC_OPTIONAL),
};
/* llama: Llama 3.1's frequency divisors too */
static const fc_llm_tensor_spec k_globals_llama[] = {
    G_("token_embd.weight", tok_embd, FC_DIM_VOCAB, FC_DIM_EMBD, FC_REQUIRED),
    G_("output_norm.weight", output_norm, FC_DIM_EMBD, FC_DIM_NONE, FC_REQUIRED),
    G_("output.weight", output, FC_DIM_VOCAB, FC_DIM_EMBD, FC_OPTIONAL),
    G_("rope_freqs.weight", rope_freqs, FC_DIM_ROT_HALF, FC_DIM_NONE, FC_OPTIONAL),
};

#define MOE_FFN                                                                                                    \
    LR("ffn_gate_inp.weight", gate_inp, FC_DIM_EXPERT, FC_DIM_EMBD),                                               \
        LX("ffn_gate_exps.weight", gate_exps, gate_e, FC_DIM_FF_EXP, FC_DIM_EMBD),                                 \
        LX("ffn_up_exps.weight", up_exps, up_e, FC_DIM_FF_EXP, FC_DIM_EMBD),                                       \
        LX("ffn_down_exps.weight", down_exps, down_e, FC_DIM_EMBD, FC_DIM_FF_EXP)
/* the separate Q/K/V projections and the output projection */
#define ATTN_QKVO                                                                                                  \
    LM("attn_q.weight", wq, FC_DIM_Q, FC_DIM_EMBD), LM("attn_k.weight", wk, FC_DIM_KV, FC_DIM_EMBD),               \
        LM("attn_v.weight", wv, FC_DIM_KV, FC_DIM_EMBD), LM("attn_output.weight", wo, FC_DIM_EMBD, FC_DIM_Q)
#define QK_NORM LV("attn_q_norm.weight", q_norm, FC_DIM_HEAD), LV("attn_k_norm.weight", k_norm, FC_DIM_HEAD)
#define DENSE_FFN                                                                                                  \
    LD("ffn_gate.weight", gate, FC_DIM_FF, FC_DIM_EMBD), LD("ffn_up.weight", up, FC_DIM_FF, FC_DIM_EMBD),          \
        LD("ffn_down.weight", down, FC_DIM_EMBD, FC_DIM_FF)

static const fc_llm_tensor_spec k_layer_qwen3[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    ATTN_QKVO,
    QK_NORM,
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    DENSE_FFN,
    MOE_FFN,
};

/* llama: biases optional (llama.cpp loads them when present) */
static const fc_llm_tensor_spec k_layer_llama[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    ATTN_QKVO,
    LVO("attn_q.bias", bq, FC_DIM_Q),
    LVO("attn_k.bias", bk, FC_DIM_KV),
    LVO("attn_v.bias", bv, FC_DIM_KV),
    LVO("attn_output.bias", bo, FC_DIM_EMBD),
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    DENSE_FFN,
    MOE_FFN,
};

static const fc_llm_tensor_spec k_layer_qwen2[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    LM("attn_q.weight", wq, FC_DIM_Q, FC_DIM_EMBD),
    LVO("attn_q.bias", bq, FC_DIM_Q),
    LM("attn_k.weight", wk, FC_DIM_KV, FC_DIM_EMBD),
    LVO("attn_k.bias", bk, FC_DIM_KV),
    LM("attn_v.weight", wv, FC_DIM_KV, FC_DIM_EMBD),
    LVO("attn_v.bias", bv, FC_DIM_KV),
    LM("attn_output.weight", wo, FC_DIM_EMBD, FC_DIM_Q),
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    DENSE_FFN,
};

static const fc_llm_tensor_spec k_layer_gemma3[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    ATTN_QKVO,
    QK_NORM,
    LV("post_attention_norm.weight", attn_post_norm, FC_DIM_EMBD),
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    DENSE_FFN,
    LV("post_ffw_norm.weight", ffn_post_norm, FC_DIM_EMBD),
};

static const fc_llm_tensor_spec k_layer_gemma2[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    ATTN_QKVO,
    LV("post_attention_norm.weight", attn_post_norm, FC_DIM_EMBD),
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    DENSE_FFN,
    LV("post_ffw_norm.weight", ffn_post_norm, FC_DIM_EMBD),
};

/* phi3: the fused attn_qkv (as converted Phi-3 files have), or separate
 * q/k/v (model.c requires one or the other) */
#define LMO(nm, fld, d0, d1) L_(nm, fld, d0, d1, FC_WHEN_ALWAYS, FC_OPTIONAL)
static const fc_llm_tensor_spec k_layer_phi3[] = {
    LV("attn_norm.weight", attn_norm, FC_DIM_EMBD),
    LMO("attn_qkv.weight", wqkv, FC_DIM_QKV, FC_DIM_EMBD),
    LMO("attn_q.weight", wq, FC_DIM_Q, FC_DIM_EMBD),
    LMO("attn_k.weight", wk, FC_DIM_KV, FC_DIM_EMBD),
    LMO("attn_v.weight", wv, FC_DIM_KV, FC_DIM_EMBD),
    LM("attn_output.weight", wo, FC_DIM_EMBD, FC_DIM_Q),
    LV("ffn_norm.weight", ffn_norm, FC_DIM_EMBD),
    LM("ffn_up.weight", up, FC_DIM_FF2, FC_DIM_EMBD),
    LM("ffn_down.weight", down, FC_DIM_EMBD, FC_DIM_FF),
};

/* ---- metadata keys ---------------------------------------------------------------- */

#define KU(s, f, need, d) {s, offsetof(fc_llm_hparams, f), FC_KEY_U32, need, d}
#define KF(s, f, need, d) {s, offsetof(fc_llm_hparams, f), FC_KEY_F32, need, d}
/* a negative default: derived after reading (model.c) */
#define DERIVED (-1.0)

static const fc_llm_key_spec k_common[] = {
    KU("block_count", n_layer, FC_REQUIRED, 0),
    KU("context_length", n_ctx_train, FC_REQUIRED, 0),
    KU("embedding_length", n_embd, FC_REQUIRED, 0),
    KU("feed_forward_length", n_ff, FC_OPTIONAL, 0), /* required for a dense FFN (checked after) */
    KU("attention.head_count", n_head, FC_REQUIRED, 0),
    KU("attention.head_count_kv", n_head_kv, FC_OPTIONAL, DERIVED),
    KU("attention.key_length", head_dim, FC_OPTIONAL, DERIVED),
    KU("rope.dimension_count", n_rot, FC_OPTIONAL, DERIVED),
    KF("rope.freq_base", rope_theta, FC_OPTIONAL, 10000.0),
    KF("attention.layer_norm_rms_epsilon", rms_eps, FC_REQUIRED, 0),
};

static const fc_llm_key_spec k_keys_moe[] = {
    KU("expert_count", n_expert, FC_REQUIRED, 0),
    KU("expert_used_count", n_expert_used, FC_REQUIRED, 0),
    KU("expert_feed_forward_length", n_ff_exp, FC_OPTIONAL, DERIVED),
};
/* llama: experts only when expert_count is set (Mixtral); Mixtral's experts
 * are feed_forward_length wide */
static const fc_llm_key_spec k_keys_llama[] = {
    KU("expert_count", n_expert, FC_OPTIONAL, 0),
    KU("expert_used_count", n_expert_used, FC_OPTIONAL, 0),
    KU("expert_feed_forward_length", n_ff_exp, FC_OPTIONAL, DERIVED),
};
/* gemma3: sliding layers only when sliding_window is set (> 0), every 6th
 * layer global; their RoPE base 10000 unless rope.freq_base_swa says */
static const fc_llm_key_spec k_keys_gemma3[] = {
    KU("attention.sliding_window", n_swa, FC_OPTIONAL, 0),
    KU("attention.sliding_window_pattern", swa_pattern, FC_OPTIONAL, 6),
    KF("rope.freq_base_swa", rope_theta_swa, FC_OPTIONAL, 10000.0),
    KF("final_logit_softcapping", final_softcap, FC_OPTIONAL, 0),
};
/* gemma2: a 4096 window on even layers, the global base on both, softcaps
 * 50 (attention) and 30 (final) unless the file says otherwise */
static const fc_llm_key_spec k_keys_gemma2[] = {
    KU("attention.sliding_window", n_swa, FC_OPTIONAL, 4096),
    KU("attention.sliding_window_pattern", swa_pattern, FC_OPTIONAL, 2),
    KF("rope.freq_base_swa", rope_theta_swa, FC_OPTIONAL, DERIVED),
    KF("attn_logit_softcapping", attn_softcap, FC_OPTIONAL, 50.0),
    KF("final_logit_softcapping", final_softcap, FC_OPTIONAL, 30.0),
};

/* ---- the families ------------------------------------------------------------------- */

static const fc_llm_arch_desc k_archs[] = {
    {.arch = FC_LLM_ARCH_QWEN3, .name = "qwen3", .rope_neox = 1, .qk_norm = 1, .ffn = FC_FFN_DENSE,
     .globals = k_globals, .n_globals = N(k_globals), .layer = k_layer_qwen3,
     .n_layer = N(k_layer_qwen3)},
    {.arch = FC_LLM_ARCH_QWEN3MOE, .name = "qwen3moe", .rope_neox = 1, .qk_norm = 1, .ffn = FC_FFN_MOE,
     .keys = k_keys_moe, .n_keys = N(k_keys_moe), .globals = k_globals,
     .n_globals = N(k_globals), .layer = k_layer_qwen3, .n_layer = N(k_layer_qwen3)},
    {.arch = FC_LLM_ARCH_LLAMA, .name = "llama", .rope_neox = 0, .ffn = FC_FFN_DENSE_OR_MOE,
     .keys = k_keys_llama, .n_keys = N(k_keys_llama), .globals = k_globals_llama, .n_globals = N(k_globals_llama),
     .layer = k_layer_llama, .n_layer = N(k_layer_llama)},
    {.arch = FC_LLM_ARCH_QWEN2, .name = "qwen2", .rope_neox = 1, .attn_bias = 1, .q_is_embd = 1, .ffn = FC_FFN_DENSE,
     .globals = k_globals, .n_globals = N(k_globals), .layer = k_layer_qwen2, .n_layer = N(k_layer_qwen2)},
    {.arch = FC_LLM_ARCH_GEMMA3, .name = "gemma3", .rope_neox = 1, .qk_norm = 1, .post_norms = 1, .ffn_gelu = 1,
     .embd_scale = 1, .scale_rule = FC_SCALE_Q_GEMMA, .scale_embd_layers = 62, .swa_unscaled = 1, .ffn = FC_FFN_DENSE,
     .keys = k_keys_gemma3, .n_keys = N(k_keys_gemma3),
     .globals = k_globals, .n_globals = N(k_globals), .layer = k_layer_gemma3, .n_layer = N(k_layer_gemma3)},
    {.arch = FC_LLM_ARCH_GEMMA2, .name = "gemma2", .rope_neox = 1, .post_norms = 1, .ffn_gelu = 1, .embd_scale = 1,
     .scale_rule = FC_SCALE_Q_GEMMA, .scale_embd_layers = 46, .ffn = FC_FFN_DENSE,
     .keys = k_keys_gemma2, .n_keys = N(k_keys_gemma2), .globals = k_globals, .n_globals = N(k_globals),
     .layer = k_layer_gemma2, .n_layer = N(k_layer_gemma2)},
    {.arch = FC_LLM_ARCH_PHI3, .name = "phi3", .rope_neox = 1, .fused_qkv = 1, .fused_gate_up = 1, .q_is_embd = 1,
     .scale_rule = FC_SCALE_Q_HEAD_DIM, .ffn = FC_FFN_DENSE, .globals = k_globals, .n_globals = N(k_globals),
     .layer = k_layer_phi3, .n_layer = N(k_layer_phi3)},
};

const fc_llm_arch_desc *fc_llm_arch_find(const char *name) {
    for (int i = 0; i < N(k_archs); i++)
        if (!strcmp(k_archs[i].name, name)) return &k_archs[i];
    return NULL;
}

const fc_llm_arch_desc *fc_llm_arch_get(fc_llm_arch arch) {
    switch (arch) {
    case FC_LLM_ARCH_QWEN3:
    case FC_LLM_ARCH_QWEN3MOE:
    case FC_LLM_ARCH_LLAMA:
    case FC_LLM_ARCH_QWEN2:
    case FC_LLM_ARCH_GEMMA3:
    case FC_LLM_ARCH_GEMMA2:
    case FC_LLM_ARCH_PHI3:
        for (int i = 0; i < N(k_archs); i++)
            if (k_archs[i].arch == arch) return &k_archs[i];
        break;
    }
    return NULL;
}

const char *fc_llm_arch_name(fc_llm_arch arch) {
    const fc_llm_arch_desc *d = fc_llm_arch_get(arch);
    return d ? d->name : NULL;
}

const char *fc_llm_arch_names(void) { return "qwen3, qwen3moe, llama, qwen2, gemma3, gemma2, phi3"; }

const fc_llm_key_spec *fc_llm_common_keys(int *n) {
    *n = N(k_common);
    return k_common;
}

int64_t fc_llm_dim_size(fc_llm_dim d, const fc_llm_hparams *hp) {
    switch (d) {
    case FC_DIM_NONE: return 1;
    case FC_DIM_EMBD: return hp->n_embd;
    case FC_DIM_Q: return hp->n_head * hp->head_dim;
    case FC_DIM_KV: return hp->n_head_kv * hp->head_dim;
    case FC_DIM_QKV: return (hp->n_head + 2 * hp->n_head_kv) * hp->head_dim;
    case FC_DIM_HEAD: return hp->head_dim;
    case FC_DIM_FF: return hp->n_ff;
    case FC_DIM_FF2: return 2 * hp->n_ff;
    case FC_DIM_EXPERT: return hp->n_expert;
    case FC_DIM_FF_EXP: return hp->n_ff_exp;
    case FC_DIM_VOCAB: return hp->n_vocab;
    case FC_DIM_ROT_HALF: return hp->n_rot / 2;
    }
    return 0;
}

const char *fc_llm_dim_axis(fc_llm_dim d) {
    switch (d) {
    case FC_DIM_NONE: return NULL;
    case FC_DIM_EMBD: return "embd";
    case FC_DIM_Q: return "q";
    case FC_DIM_KV: return "kv";
    case FC_DIM_QKV: return "qkv";
    case FC_DIM_HEAD: return "d";
    case FC_DIM_FF: return "ff";
    case FC_DIM_FF2: return "ff2";
    case FC_DIM_EXPERT: return "expert";
    case FC_DIM_FF_EXP: return "ff";
    case FC_DIM_VOCAB: return "vocab";
    case FC_DIM_ROT_HALF: return "rot";
    }
    return NULL;
}

int fc_llm_tensor_applies(const fc_llm_tensor_spec *t, const fc_llm_hparams *hp) {
    switch (t->when) {
    case FC_WHEN_ALWAYS: return 1;
    case FC_WHEN_DENSE: return hp->n_expert == 0;
    case FC_WHEN_MOE: return hp->n_expert > 0;
    }
    return 0;
}

const fc_llm_tensor_spec *fc_llm_spec_of(const fc_llm_arch_desc *d, const fc_llm_hparams *hp, const char *name,
                                         long *layer) {
    *layer = -1;
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        const long l = strtol(name + 4, &end, 10);
        if (end == name + 4 || *end != '.' || l < 0) return NULL;
        *layer = l;
        for (int k = 0; k < d->n_layer; k++)
            if (fc_llm_tensor_applies(&d->layer[k], hp) && !strcmp(end + 1, d->layer[k].name)) return &d->layer[k];
        return NULL;
    }
    for (int k = 0; k < d->n_globals; k++)
        if (!strcmp(name, d->globals[k].name)) return &d->globals[k];
    return NULL;
}
