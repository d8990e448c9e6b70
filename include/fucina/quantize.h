/* SPDX-License-Identifier: MIT */
/* Fucina: quantizing GGUF models (llama-quantize's mixes and rules).
 *
 * The block-tensor API is in fucina/qtensor.h.
 *
 * fc_gguf_quantize re-encodes every weight tensor of a GGUF file to the
 * type llama.cpp's rules pick for a mix ("Q4_K_M", "Q8_0", ...), copies the
 * metadata, sets general.file_type and general.quantization_version, and
 * writes the output atomically; the input is streamed. */
#ifndef FUCINA_QUANTIZE_H
#define FUCINA_QUANTIZE_H

#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/gguf.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor of the plan (dry run) or just written. */
typedef struct fc_quantize_progress {
    int64_t index, count;          /* 0-based position in the output, tensor count */
    const char *name;
    uint32_t src_type, dst_type;   /* ggml type ids */
    int n_dims;
    int64_t ne[FC_GGUF_MAX_DIMS];  /* GGUF order */
    uint64_t src_bytes, dst_bytes;
    int fallback;                  /* the type fell back: ne[0] is not a multiple of the block */
    /* with an imatrix, for a tensor that is re-encoded: 1 its rows were
     * encoded with importance weights; 0 the file has no entry for it, or
     * its type takes none (q8_0, f16, ...: see imatrix_missing) */
    int imatrix;
    /* 1: an imatrix was given, the target type takes weights, and the file
     * has no entry for this tensor (llama-quantize: "did not find weights") */
    int imatrix_missing;
} fc_quantize_progress;

typedef struct fc_quantize_options {
    const char *type;              /* the mix, any case ("Q4_K_M", "q8_0") */
    int output_tensor_type;        /* ggml type id for output.weight, -1: the mix's rule */
    int token_embedding_type;      /* ggml type id for token_embd.weight, -1: the mix's rule */
    int pure;                      /* every quantizable tensor gets the mix's base type */
    int dry_run;                   /* plan only: report, write nothing */
    int n_threads;                 /* > 0: an own pool of that size; 0: the context's */
    void (*progress)(void *user, const fc_quantize_progress *p);
    void *progress_user;
    /* 0 (llama-quantize's default): a tensor already in a block format that
     * the mix would re-encode is an FC_ERR_INVALID_ARG error naming it (a
     * second quantization loses what the first kept); 1: re-encode it. */
    int allow_requantize;
    /* 1: output.weight keeps its type (llama-quantize --leave-output-tensor) */
    int leave_output_tensor;
    /* An importance matrix (llama-imatrix's GGUF file, fucina/imatrix.h), as
     * llama-quantize --imatrix: a re-encoded tensor with an entry is encoded
     * with weights in_sum2 / counts (per expert for 3-D tensors), byte for
     * byte as ggml_quantize_chunk with that imatrix; tensors without one are
     * encoded as without a file. The mix rules see that there is one (Q4_0 /
     * Q5_0 ffn_down in the first eighth of the layers become Q4_1 / Q5_1,
     * IQ4_NL / IQ4_XS keep theirs). The output gets quantize.imatrix.file,
     * .dataset, .entries_count and .chunks_count. NULL: none. */
    const char *imatrix_path;
} fc_quantize_options;

typedef struct fc_quantize_summary {
    int ftype;                     /* general.file_type written */
    int64_t n_tensors, n_changed, n_fallback, n_elements;
    uint64_t bytes_in, bytes_out;  /* tensor data */
    int64_t n_imatrix;             /* tensors encoded with importance weights */
    int64_t n_imatrix_missing;     /* re-encoded tensors whose type takes weights but had no entry */
} fc_quantize_summary;

/* Defaults: no type, per-mix output and embedding types (-1), all flags 0. */
FC_API fc_quantize_options fc_quantize_default_options(void);
/* Mix i's name ("Q4_0", ...), NULL past the end. */
FC_API const char *fc_quantize_mix_name(int i);
/* The llama_ftype of a mix name (any case); -1 when unknown. */
FC_API int fc_quantize_mix_ftype(const char *name);

/* Quantize in_path into out_path (not the same file). summary may be NULL. */
FC_API fc_status fc_gguf_quantize(fc_ctx *ctx, const char *in_path, const char *out_path,
                                  const fc_quantize_options *opt, fc_quantize_summary *summary);

#ifdef __cplusplus
}
#endif
#endif
