/* Fucina llm: the feed-forward block. Dense qwen3: SiLU-gated,
 * down(silu(gate h) * up h), as llama.cpp's build_ffn with LLM_FFN_SILU and
 * LLM_FFN_PAR; qwen3moe: the routed experts of src/llm/moe.c. */
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "llm/model.h"

fc_tensor *fc_llm_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h) {
    switch (m->hp.arch) {
    case FC_LLM_ARCH_QWEN3: break;
    case FC_LLM_ARCH_QWEN3MOE: return fc_llm_moe_ffn(ctx, m, L, h);
    }
    fc_tensor *gu[2] = {NULL, NULL};
    if (!h || !fc_llm_linear_n(ctx, h, (fc_tensor *const[]){L->gate, L->up}, 2, gu)) return NULL;
    fc_tensor *g = gu[0], *u = gu[1];
    fc_llm_prefetch(ctx, L->down); /* over the swiglu */
    return fc_linear(ctx, fc_swiglu(ctx, g, u), L->down, NULL);
}

void fc_llm_ffn_prefetch(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L) {
    switch (m->hp.arch) {
    case FC_LLM_ARCH_QWEN3: fc_llm_prefetch(ctx, L->gate); return;
    case FC_LLM_ARCH_QWEN3MOE: fc_llm_prefetch(ctx, L->gate_inp); return;
    }
}
