/* SPDX-License-Identifier: MIT */
/* Fucina: importance matrices in llama.cpp's imatrix GGUF format.
 *
 * An importance matrix holds, for each weight matrix W of a model (y = W x),
 * the sum over calibration tokens of the squared input activations of each
 * column, in_sum2[j] = sum x_j^2, and the number of tokens summed (counts).
 * Expert tensors (3-D, one matrix per expert) have one row of sums and one
 * count per expert, summed over the tokens routed to that expert. The
 * quantizer's per-column importance weights are in_sum2 / counts.
 *
 * The file is what llama-imatrix writes (tools/imatrix/imatrix.cpp):
 * general.type = "imatrix", imatrix.datasets (array of strings),
 * imatrix.chunk_count and imatrix.chunk_size (u32); per entry, in name
 * order, "<name>.in_sum2" (F32, ne = [n_cols, n_mat]) and "<name>.counts"
 * (F32, ne = [1, n_mat]), 1-D when n_mat is 1 (ggml's writer drops trailing
 * 1s). A "<name>.in_sum" tensor (newer llama-imatrix,
 * the plain sums) is accepted and ignored. */
#ifndef FUCINA_IMATRIX_H
#define FUCINA_IMATRIX_H

#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/llm.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_imatrix_entry {
    char *name;     /* the weight tensor, "blk.0.attn_q.weight" */
    int64_t n_cols; /* the matrix's input width (GGUF ne[0]) */
    int64_t n_mat;  /* 1, or the expert count */
    float *in_sum2; /* n_mat x n_cols sums of x_j^2 */
    float *counts;  /* n_mat token counts */
} fc_imatrix_entry;

typedef struct fc_imatrix {
    int64_t n_entries;
    fc_imatrix_entry *entries; /* sorted by name (bytewise) */
    int64_t n_datasets;
    char **datasets; /* the calibration text files */
    uint32_t chunk_count, chunk_size;
} fc_imatrix;

/* An empty matrix; NULL when out of memory. */
FC_API fc_imatrix *fc_imatrix_new(void);
FC_API void fc_imatrix_free(fc_imatrix *m);

/* Read an imatrix GGUF file. NULL + an error in ctx naming the file and the
 * reason: not GGUF (llama-imatrix's legacy .dat format is not read), not an
 * imatrix (general.type missing or another type), an in_sum2 without its
 * counts or the reverse, a tensor of the wrong type or shape, a negative or
 * non-finite value. */
FC_API fc_imatrix *fc_imatrix_load(fc_ctx *ctx, const char *path);

/* Write m atomically in llama-imatrix's layout. */
FC_API fc_status fc_imatrix_save(fc_ctx *ctx, const fc_imatrix *m, const char *path);

/* The entry of a weight tensor, NULL when there is none. */
FC_API const fc_imatrix_entry *fc_imatrix_find(const fc_imatrix *m, const char *name);

/* The entry for name, created with zero sums when absent (kept sorted).
 * NULL when out of memory or when it exists with another shape (an error
 * in ctx naming it). */
FC_API fc_imatrix_entry *fc_imatrix_entry_get(fc_ctx *ctx, fc_imatrix *m, const char *name, int64_t n_cols,
                                              int64_t n_mat);

/* Adds a dataset name (copied). */
FC_API fc_status fc_imatrix_add_dataset(fc_imatrix *m, const char *name);

/* The quantizer's weights of matrix k of e (n_cols floats into out):
 * in_sum2 / count as llama-quantize computes them (f32 division), 1 for
 * every column of a matrix that saw no token. */
FC_API void fc_imatrix_weights(const fc_imatrix_entry *e, int64_t k, float *out);

/* ---- collecting (what llama-imatrix does) ----------------------------------------- */

/* While a collector exists, every forward pass of m (any session on it)
 * adds its projections' inputs to `into`: per weight matrix of a layer
 * (attention, FFN, the MoE router; an expert tensor per expert) and, with
 * process_output, output.weight when it is not tied to token_embd. The
 * entries are created (zero) now, named as the GGUF tensors. One collector
 * per model at a time; single-threaded sessions only (the forward's
 * caller thread does the sums). NULL + error in ctx. */
typedef struct fc_imatrix_collector fc_imatrix_collector;
FC_API fc_imatrix_collector *fc_imatrix_collector_new(fc_ctx *ctx, fc_llm_model *m, fc_imatrix *into,
                                                      int process_output);
/* Detaches from the model (the sums stay in `into`). */
FC_API void fc_imatrix_collector_free(fc_imatrix_collector *c);

#ifdef __cplusplus
}
#endif
#endif
