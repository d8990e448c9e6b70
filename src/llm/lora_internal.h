/* SPDX-License-Identifier: MIT */
/* Fucina llm: a loaded LoRA adapter (internal; src/llm/lora.c loads it,
 * lora_merge.c reads its pairs). */
#ifndef FC_LLM_LORA_INTERNAL_H
#define FC_LLM_LORA_INTERNAL_H

#include "fucina/gguf.h"
#include "fucina/lora.h"
#include "llm/model.h"

/* One adapted weight: the base tensor's name and model tensor, lora_a
 * [rank, n_in] and lora_b [n_out, rank] (our order, GGUF's reversed; for
 * token_embd see embd). */
typedef struct fc_llm_lora_pair {
    char name[FC_GGUF_MAX_NAME + 1];
    const fc_tensor *w;
    fc_tensor *a, *b;
    int64_t rank;
    int embd; /* token_embd.weight: a [vocab, rank], b [embd, rank] (llama.cpp's layout for it) */
} fc_llm_lora_pair;

struct fc_llm_lora {
    const fc_llm_model *m; /* the model it was checked against */
    float alpha;
    size_t n;
    fc_llm_lora_pair *p;
};

/* llama.cpp's scale of a pair: user x alpha / rank, or user when alpha is 0 (float arithmetic, as its get_scale). */
static inline float fc_llm_lora_scale(float user, float alpha, int64_t rank)
{
    return alpha != 0.0f ? user * alpha / (float)rank : user;
}

/* The pair adapting the tensor named name, NULL when none. */
const fc_llm_lora_pair *fc_llm_lora_pair_of(const fc_llm_lora *a, const char *name);

#endif
