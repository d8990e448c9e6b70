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
    fc_tensor *gate, *up, *down;    /* [ff, embd] [ff, embd] [embd, ff] */
} fc_llm_layer;

struct fc_llm_model {
    fc_llm_hparams hp;
    fc_tokenizer *tok;
    fc_tensor *tok_embd;    /* [vocab, embd] */
    fc_tensor *output_norm; /* [embd] */
    fc_tensor *output;      /* [vocab, embd]: tok_embd itself when tied (another reference) */
    fc_llm_layer *layers;
};

/* The FFN block of layer L (src/llm/ffn.c): h [seq, embd] -> [seq, embd]. */
fc_tensor *fc_llm_ffn(fc_ctx *ctx, const fc_llm_model *m, const fc_llm_layer *L, fc_tensor *h);

#endif
