/* SPDX-License-Identifier: MIT */
/* Fucina llm: the training model's layout (internal), shared by
 * lm_model.c (making and loading), lm_graph.c (the differentiable forward),
 * lm_export.c (the GGUF writer) and the training loop (lm_train.c). */
#ifndef FC_LLM_LM_INTERNAL_H
#define FC_LLM_LM_INTERNAL_H

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
};

/* Is the family's graph one the training forward computes? 0, or -1 with
 * an error naming what it lacks (who: the calling function or file). */
int fc_lm_check_family(fc_ctx *ctx, const char *who, const fc_llm_hparams *hp, const struct fc_llm_arch_desc *d);

/* Collect m's parameters (every bound slot of the entry but rope_freqs;
 * the tied output once) into lm->params / lm->names. 0, or -1 (OOM). */
int fc_lm_collect_params(fc_ctx *ctx, fc_lm *lm);

#endif
