/* SPDX-License-Identifier: MIT */
/* Which ggml type each tensor of a model gets for a quantization mix:
 * llama.cpp's rules (llama_tensor_get_type and its helpers in
 * src/llama-quant.cpp), re-implemented from reading them.
 *
 * The rules keep counters (the how-many-th attn_v, the how-many-th ffn_down)
 * and so depend on the order tensors are visited; llama.cpp visits them in
 * its loader's order (fc_quant_order below), which is also the order it
 * writes them, so the quantizer uses it for both. */
#ifndef FC_IO_GGUF_QUANTIZE_POLICY_H
#define FC_IO_GGUF_QUANTIZE_POLICY_H

#include <stddef.h>
#include <stdint.h>

/* A mix as llama-quantize names it ("Q4_K_M"), its llama_ftype number
 * (general.file_type) and the base ggml type. */
typedef struct fc_quant_mix {
    const char *name;
    int ftype;             /* LLAMA_FTYPE_* */
    uint32_t base;         /* ggml type id */
} fc_quant_mix;

/* NULL when unknown (case-insensitive). */
const fc_quant_mix *fc_quant_mix_find(const char *name);
/* The mixes, NULL-terminated by name (for --help). */
const fc_quant_mix *fc_quant_mix_at(size_t i);

/* What the rules read from the model's hparams. */
typedef struct fc_quant_model {
    int n_layer;        /* {arch}.block_count (else 1 + the largest blk.N) */
    int n_head;         /* {arch}.attention.head_count (layer 0); 0 unknown */
    int n_head_kv;      /* {arch}.attention.head_count_kv (layer 0), default n_head */
    int n_expert;       /* {arch}.expert_count, 0 when absent */
    int is_falcon;      /* general.architecture == "falcon" */
    int is_bailingmoe3; /* general.architecture == "bailingmoe3" */
    int is_70b;         /* llama with 80 layers and grouped KV heads (LLM_TYPE_70B) */
} fc_quant_model;

typedef struct fc_quant_tensor {
    const char *name;
    uint32_t type;      /* source ggml type */
    int n_dims;
    int64_t ne[4];
} fc_quant_tensor;

typedef struct fc_quant_opts {
    int pure;                  /* every quantizable tensor gets the base type */
    int output_type;           /* --output-tensor-type: a ggml id, -1 none */
    int token_embd_type;       /* --token-embedding-type: a ggml id, -1 none */
    int has_imatrix;           /* an importance matrix is given (qs.has_imatrix) */
} fc_quant_opts;

/* llama.cpp's loader order (weight_name_comparer): tensors outside blk.N
 * first, then by layer number, ties by name (bytewise). Fills perm[0..n)
 * with indices into t; 0 when out of memory. */
int fc_quant_order(const fc_quant_tensor *t, size_t n, size_t *perm);

/* The target type of every tensor, visiting them in the order given
 * (t[0], t[1], ...: pass them already ordered). fallback[i] is set when the
 * type was changed because ne[0] is not a multiple of the block size. On an
 * error (a layer number out of range in an MoE model, no fallback for a
 * type) returns 0 with the message in err. */
int fc_quant_policy(const fc_quant_mix *mix, const fc_quant_model *m, const fc_quant_opts *o,
                    const fc_quant_tensor *t, size_t n, uint32_t *out, int *fallback, char *err, size_t errlen);

/* llama.cpp's tensor_allows_quantization (the tensors a mix may change). */
int fc_quant_allows(const fc_quant_tensor *t);

#endif
