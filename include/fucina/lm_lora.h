/* SPDX-License-Identifier: MIT */
/* Fucina: LoRA fine-tuning of a GGUF model into an adapter llama.cpp applies.
 *
 * A LoRA model is an fc_lm (fucina/lm_train.h) whose base weights are the
 * inference loader's tensors in their own format (f32, f16, bf16 or any
 * block format: Q8_0, Q4_K, ...), frozen constants of the graph, and whose
 * parameters are, for each targeted projection W [out, in], a pair of f32
 * variables A [rank, in] and B [out, rank]. The training forward computes
 * each targeted product as
 *
 *     y = W x + (alpha / rank) * B (A x)
 *
 * (the scale rounded to f32 as llama.cpp's get_scale does), every other
 * product as it is; gradients flow to A and B only (through a block W as dx
 * = dy W, src/tensor/contract_block.c). A starts like PEFT's
 * (Kaiming-uniform with a = sqrt 5: U(-1/sqrt(in), 1/sqrt(in))) and B at
 * zero, so step 0 is the base model exactly.
 *
 *     fc_lm *lm = fc_lm_lora_new(ctx, "base.gguf", &(fc_lm_lora_config){.rank = 16});
 *     fc_lm_train(ctx, lm, &(fc_lm_train_options){.data = FC_LM_DATA_CHAT, ...});  // AdamW on A and B
 *     fc_lm_save_lora(ctx, lm, "adapter.gguf", FC_F32);   // fucina run --lora, llama.cpp --lora
 *
 * fc_lm_train trains a LoRA model with AdamW alone (fc_lm_train_options
 * .lora_lr; betas 0.9 / 0.999, eps 1e-8, no weight decay: PEFT's Trainer
 * defaults); its checkpoints hold the A/B pairs and their AdamW state and
 * resume bit for bit. fc_lm_model(lm) is the base with the pairs attached
 * as an adapter (fc_llm_model_set_loras), read in place, so sessions
 * evaluate and sample the fine-tuned model as it trains. fc_lm_save_gguf
 * refuses a LoRA model: write the adapter, or merge it (fc_llm_lora_merge,
 * fucina/lora.h). Errors name the function, the thing and the reason. */
#ifndef FUCINA_LM_LORA_H
#define FUCINA_LM_LORA_H

#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/lm_train.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_lm_lora_config {
    int64_t rank; /* 0: 8 (PEFT's default r) */
    double alpha; /* 0: the rank (scale 1, PEFT's default lora_alpha = r); written as adapter.lora.alpha */
    /* The projections adapted in every layer, by their GGUF names
     * (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down)
     * or short names (q, k, v, o, gate, up, down); "output" adapts the
     * untied output head. NULL / 0: the seven attention and FFN
     * projections (QLoRA's choice: every linear layer of the blocks). An
     * unknown name, or one the model has no tensor for, is an error naming
     * it. */
    const char *const *targets;
    int n_targets;
    uint64_t seed; /* A's initial values are a pure function of it */
} fc_lm_lora_config;

/* A LoRA model over the GGUF at base_path (qwen3, llama or qwen2 dense;
 * fc_lm_load's family checks; weights in any format the loader reads,
 * mapped). NULL + error naming the file, option or target. */
FC_API fc_lm *fc_lm_lora_new(fc_ctx *ctx, const char *base_path, const fc_lm_lora_config *cfg);
/* 1 when lm was made by fc_lm_lora_new. */
FC_API int fc_lm_is_lora(const fc_lm *lm);
/* The rank and alpha the model was made with (0 for a model without LoRA). */
FC_API int64_t fc_lm_lora_rank(const fc_lm *lm);
FC_API double fc_lm_lora_alpha(const fc_lm *lm);

/* Write the adapter as llama.cpp's GGUF adapter (fucina/lora.h):
 * general.type "adapter", adapter.type "lora", general.architecture the
 * base's, adapter.lora.alpha (f32), and per adapted weight X the tensors
 * X.lora_a (ne [in, rank]) and X.lora_b (ne [rank, out]) as dtype (FC_F32,
 * or FC_F16 / FC_BF16; 0: f32), in the layers' order. Atomic. */
FC_API fc_status fc_lm_save_lora(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
