/* SPDX-License-Identifier: MIT */
/* llama.cpp's model-quantization entry points, as the prebuilt libllama of
 * the oracle exports them (declared from include/llama.h of the matching
 * release; llama_model_quantize_params is returned by value, so the layout
 * must be exact). Used by tests/runtime/test_quantize.c and bench/quantize.c
 * through fco_llama_sym. */
#ifndef FUCINA_LLAMA_QUANTIZE_ABI_H
#define FUCINA_LLAMA_QUANTIZE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct llama_model_quantize_params {
    int32_t nthread;
    int ftype;                /* enum llama_ftype */
    int output_tensor_type;   /* enum ggml_type */
    int token_embedding_type; /* enum ggml_type */
    bool allow_requantize;
    bool quantize_output_tensor;
    bool only_copy;
    bool pure;
    bool keep_split;
    bool dry_run;
    const void *imatrix;
    const void *kv_overrides;
    const void *tt_overrides;
    const int32_t *prune_layers;
    size_t max_buf_size;
} llama_model_quantize_params;

typedef llama_model_quantize_params (*llama_quantize_default_params_fn)(void);
/* llama_model_quantize(in, out, params): 0 on success. */
typedef uint32_t (*llama_quantize_fn)(const char *, const char *, const llama_model_quantize_params *);
typedef void (*llama_log_cb)(int level, const char *text, void *user);
typedef void (*llama_log_set_fn)(llama_log_cb cb, void *user);

#define FCO_GGML_LOG_LEVEL_ERROR 4

#endif
