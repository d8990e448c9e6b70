/* Fucina llm: a loaded model (internal). Weights carry axis names the
 * forward contracts by: matrices [out, in] as fc_linear wants them. */
#ifndef FC_LLM_MODEL_H
#define FC_LLM_MODEL_H

#include "fucina/llm.h"
#include "fucina/tensor.h"

typedef struct fc_llm_layer {
    fc_tensor *attn_norm;           /* [embd] */
    fc_tensor *wq, *wk, *wv, *wo;   /* [q, embd] [kv, embd] [kv, embd] [embd, q] */
    fc_tensor *q_norm, *k_norm;     /* [d] */
    fc_tensor *ffn_norm;            /* [embd] */
    fc_tensor *gate, *up, *down;    /* dense: [ff, embd] [ff, embd] [embd, ff]; NULL for MoE */
    /* qwen3moe: the router [expert, embd], the 3-D expert weights as in the
     * file ([expert, ff, embd], [expert, ff, embd], [expert, embd, ff]; they
     * own the mapped bytes) and one zero-copy 2-D view per expert into them
     * (the per-expert weight fc_linear takes, quantized or not). */
    fc_tensor *gate_inp;
    fc_tensor *gate_exps, *up_exps, *down_exps;
    fc_tensor **gate_e, **up_e, **down_e; /* [n_expert] each */
} fc_llm_layer;

struct fc_llm_model {
    fc_llm_hparams hp;
    fc_tokenizer *tok;
    fc_tensor *tok_embd;    /* [vocab, embd] */
    fc_tensor *output_norm; /* [embd] */
    fc_tensor *output;      /* [vocab, embd]: tok_embd itself when tied (another reference) */
    fc_llm_layer *layers;
};

/* The FFN block of layer L (src/llm/ffn.c): h [seq, embd] -> [seq, embd];
 * dense or mixture of experts by the architecture. */
fc_tensor *fc_llm_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h);
/* out[i] = fc_linear(ctx, h, w[i], NULL) for i < n (n <= 8). For one row of
 * h and block-quantized weights: one quantized product for all of them
 * (exec/qmatmul.h fc_qmatmul_multi: h quantized once, one fork/join), the
 * same bits. 1, or 0 with the error in ctx. */
int fc_llm_linear_n(fc_ctx *ctx, fc_tensor *h, fc_tensor *const *w, int n, fc_tensor **out);
/* Decode reads every weight once per token: before a stretch of serial
 * steps (norms, rope, attention bookkeeping, swiglu) the forward posts the
 * first LLM_PREFETCH_BYTES of the next matmul's weights to an idle worker
 * (fc_workers_prefetch), so they stream while the calling thread works
 * alone and the matmul starts warm. A hint: results do not depend on it. */
#define LLM_PREFETCH_BYTES ((size_t)256 << 10)
void fc_llm_prefetch(fc_ctx *ctx, const fc_tensor *w);
/* The hint for the first weights the FFN block of L reads (src/llm/ffn.c). */
void fc_llm_ffn_prefetch(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L);
/* One token's routing (src/llm/moe.c): the softmax of its n_expert router
 * logits (probs: n_expert floats of scratch), the k most probable experts
 * in descending order in sel, their weights renormalized in w, as
 * llama.cpp's qwen3moe graph. */
void fc_llm_moe_route(const float *logits, int64_t n_expert, int64_t k, float *probs, int32_t *sel, float *w);
/* The qwen3moe FFN (src/llm/moe.c), same contract. */
fc_tensor *fc_llm_moe_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h);

#endif
