/* SPDX-License-Identifier: MIT */
/* Fucina llm: the training model's layout (internal), shared by
 * lm_model.c (making and loading), lm_lora.c (the LoRA model and its
 * adapter file), lm_graph.c (the differentiable forward), lm_export.c (the
 * GGUF writer of the model and of the adapter) and the training loop (lm_train.c). */
#ifndef FC_LLM_LM_INTERNAL_H
#define FC_LLM_LM_INTERNAL_H

#include "fucina/gguf.h"
#include "fucina/lm_train.h"
#include "llm/model.h"

#define FC_LM_NAME_MAX 96

struct fc_lm {
    /* The weights, bound into the inference model's slots by the family's
     * table entry: each parameter is an f32 contiguous variable, so
     * sessions read the training values in place. rope_freqs (a constant)
     * is not a parameter. */
    fc_llm_model *m;
    /* The GGUF the tokenizer came from: the export copies its tokenizer.*
     * keys (the tokenizer is not re-serialised from memory). */
    char *tok_path;
    int n_params;
    fc_tensor **params;            /* borrowed from m's slots */
    char (*names)[FC_LM_NAME_MAX]; /* GGUF names */
    /* One per layer: what a checkpointed layer recomputes from in backward
     * (src/llm/lm_graph.c), so it outlives the forward call; a forward's
     * backward runs before the model's next forward. */
    struct fc_lm_layer_job *jobs;
    /* A LoRA model (src/llm/lm_lora.c): m's weights are the loader's
     * tensors, frozen; params are the pairs' A and B (owned here, in
     * lora[] order: A then B), NULL / 0 otherwise. */
    struct fc_lm_lora_w *lora;
    int n_lora;
    int64_t lora_rank;
    double lora_alpha;
};

/* One adapted weight of a LoRA model: the base tensor in m's slots (a
 * layer's field offset, or the global output head), its A [rank, in] and B
 * [out, rank] variables, and the scale alpha / rank as llama.cpp rounds it. */
typedef struct fc_lm_lora_w {
    int64_t layer;  /* -1: a global (output.weight) */
    size_t field;   /* offset into fc_llm_layer, or into fc_llm_model for a global */
    const fc_tensor *w;
    fc_tensor *a, *b;
    float scale;
} fc_lm_lora_w;

/* y + scale * B (A x) (A x scaled first, as the inference forward's
 * src/llm/lora_apply.c): the one LoRA step of every adapted projection. */
fc_tensor *fc_lm_lora_add(fc_ctx *ctx, fc_tensor *y, fc_tensor *x, fc_tensor *a, fc_tensor *b, float scale);

/* Is the family's graph one the training forward computes? 0, or -1 with
 * an error naming what it lacks (who: the calling function or file). */
int fc_lm_check_family(fc_ctx *ctx, const char *who, const fc_llm_hparams *hp, const struct fc_llm_arch_desc *d);

/* The keys (and any tensor before the parameters) of a GGUF the model
 * writes, dt its matrices' dtype: FC_OK or the first failure. */
typedef fc_status (*fc_lm_gguf_head_fn)(fc_ctx *ctx, fc_gguf_writer *w, const fc_lm *lm, fc_dtype dt);

/* Write lm as a GGUF at path (src/llm/lm_export.c): head's keys, then the
 * parameters in order under their GGUF names, matrices in dt (f32, f16 or
 * bf16: the caller checks), vectors f32. The model's file (fc_lm_save_gguf)
 * and the LoRA adapter's (fc_lm_save_lora). */
fc_status fc_lm_write_gguf(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dt, fc_lm_gguf_head_fn head);

/* Collect m's parameters (every bound slot of the entry but rope_freqs;
 * the tied output once) into lm->params / lm->names. 0, or -1 (OOM). */
int fc_lm_collect_params(fc_ctx *ctx, fc_lm *lm);

#endif
