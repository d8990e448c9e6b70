/* SPDX-License-Identifier: MIT */
/* Fucina: LoRA adapters in llama.cpp's GGUF format, applied at inference
 * and merged into a model.
 *
 * An adapter file (what llama.cpp's convert_lora_to_gguf.py writes and
 * llama_adapter_lora_init reads) has the keys general.type = "adapter",
 * adapter.type = "lora", general.architecture = the base model's and
 * adapter.lora.alpha (f32; absent means 0), and for each adapted weight X of
 * the base two tensors X.lora_a and X.lora_b. In GGUF (ne) order, for a base
 * weight of ne [n_in, n_out], lora_a is [n_in, rank] and lora_b is
 * [rank, n_out]; the weight's product becomes
 *
 *     y = W x + scale * B (A x),   scale = user_scale * alpha / rank   (alpha 0: scale = user_scale)
 *
 * computed as llama.cpp's graph does it (build_lora_mm: after the base
 * product, adapter by adapter in the order attached). Tensors ending in
 * "_norm.weight" are ignored, as llama.cpp ignores them; any other tensor
 * is an error.
 *
 * Accepted here: every 2-D weight that goes through a projection (attention
 * q/k/v/output and fused qkv, dense FFN gate/up/down, the MoE router, an
 * untied output.weight), and token_embd.weight in llama.cpp's layout for it
 * (lora_a ne [rank, n_vocab], lora_b ne [rank, n_embd]: the embedding row of
 * token t gains scale * B A[t], before any embedding scale); A and B in f32,
 * f16 or bf16. Not yet: token_embd of a model whose output is tied to it
 * (llama.cpp's graph would apply the pair to the output product as well),
 * the 3-D expert stacks (llama.cpp's build_lora_mm_id) and quantized A/B
 * (which llama.cpp's inference takes but its export-lora refuses): each is
 * an FC_ERR_UNSUPPORTED error naming the tensor. */
#ifndef FUCINA_LORA_H
#define FUCINA_LORA_H

#include <stddef.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/llm.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_llm_lora fc_llm_lora;

/* Load the adapter at path for model m. Everything is checked before an
 * adapter is returned: the three keys (general.type "adapter", adapter.type
 * "lora", general.architecture equal to m's), adapter.lora.alpha an f32 when
 * present, every X.lora_a paired with an X.lora_b and the reverse, X a
 * weight m has (an output.weight of a tied model is not one, as in
 * llama.cpp), both 2-D, A's n_in and B's n_out equal to X's, the same rank
 * >= 1 in A and B, and their dtypes. NULL + error naming the file, the key or
 * tensor and the reason. The tensors are zero-copy over the file (mapped). */
FC_API fc_llm_lora *fc_llm_lora_load(fc_ctx *ctx, const fc_llm_model *m, const char *path);
/* Safe on NULL, and while the adapter is attached (the model keeps what it
 * needs). */
FC_API void fc_llm_lora_free(fc_llm_lora *a);
/* adapter.lora.alpha (0 when absent) and the number of adapted weights. */
FC_API float fc_llm_lora_alpha(const fc_llm_lora *a);
FC_API size_t fc_llm_lora_n_weights(const fc_llm_lora *a);

/* Set the model's adapters: n adapters (loaded for m) with their user
 * scales, replacing the ones set before (as llama_set_adapters_lora does for
 * a context); n = 0 removes them all. Every session of m computes with the
 * new set from its next eval: call it between evals, not during one, and
 * mind that cached positions keep what they were computed with. An adapter
 * loaded for another model, a NULL adapter or a non-finite scale is an
 * FC_ERR_INVALID_ARG error that leaves the model's set as it was. */
FC_API fc_status fc_llm_model_set_loras(fc_ctx *ctx, fc_llm_model *m, fc_llm_lora *const *adapters, const float *scales,
                                        size_t n);
/* The number of adapters set on m. */
FC_API size_t fc_llm_model_n_loras(const fc_llm_model *m);

/* ---- merging (fucina export-lora; llama.cpp's llama-export-lora) ---- */

typedef struct fc_llm_lora_merge_options {
    /* The dtype of the merged (adapted) tensors. 0 (default): llama.cpp's
     * export-lora choice, f32 where the base tensor is f32 and f16 for any
     * other base type (general.file_type is then MOSTLY_F16, as it writes).
     * Otherwise FC_F32, FC_F16, FC_BF16 or a block dtype with an encoder
     * (FC_Q8_0, FC_Q4_0, FC_Q4_K, ...); general.file_type follows it. The
     * tensors no adapter touches are copied byte for byte. */
    fc_dtype outtype;
} fc_llm_lora_merge_options;

/* Write base_path with W' = W + sum_i scale_i * B_i A_i for every weight the
 * adapters adapt (a quantized W decoded to f32 first; scale_i as above, from
 * scales[i] and adapter i's alpha and rank), all other tensors and the
 * metadata as they are. Unlike llama.cpp, adapters may adapt different sets
 * of weights. The adapters are validated as fc_llm_lora_load does before
 * anything is written; out_path is written atomically (a temporary file,
 * renamed) and must not be the base or an adapter. */
FC_API fc_status fc_llm_lora_merge(fc_ctx *ctx, const char *base_path, const char *const *lora_paths,
                                   const float *scales, size_t n, const char *out_path,
                                   const fc_llm_lora_merge_options *opt);

#ifdef __cplusplus
}
#endif
#endif
