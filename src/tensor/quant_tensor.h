/* SPDX-License-Identifier: MIT */
/* Block-quantized tensors inside the tensor layer (public side:
 * fucina/qtensor.h). A block tensor is contiguous and row-major over
 * storage it starts at (offset 0); strides are kept in elements like any
 * tensor's, but it has no element size, so every op that addresses
 * elements must refuse it first: fct_block_refuse. */
#ifndef FC_TENSOR_QUANT_TENSOR_H
#define FC_TENSOR_QUANT_TENSOR_H

#include <stddef.h>

#include "tensor/internal.h"

/* 1 when t is a block tensor, after recording FC_ERR_DTYPE naming op, the
 * dtype and t ("fc_add: q4_K is a block-quantized dtype: dequantize it
 * first (fc_dequantize): q4_K[out=64, in=256]"); 0 otherwise (NULL too). */
int fct_block_refuse(fc_ctx *ctx, const char *op, const fc_tensor *t);
/* The first of ts[0..n) that is a block tensor is refused as above; NULL
 * entries are skipped. */
int fct_block_refuse_n(fc_ctx *ctx, const char *op, int n, const fc_tensor *const *ts);
/* At an op's entry: return `ret` when any listed operand is a block tensor.
 *     FCT_NO_BLOCKS(ctx, "fc_rmsnorm", NULL, x, weight); */
#define FCT_NO_BLOCKS(ctx, op, ret, ...)                                                                     \
    do {                                                                                                     \
        const fc_tensor *const fct_nb_[] = {__VA_ARGS__};                                                    \
        if ((ctx) && fct_block_refuse_n((ctx), (op), (int)(sizeof fct_nb_ / sizeof fct_nb_[0]), fct_nb_))    \
            return ret;                                                                                      \
    } while (0)
/* The same for a dtype argument (fc_empty, fc_full ... of a block dtype). */
int fct_block_refuse_dtype(fc_ctx *ctx, const char *op, fc_dtype dt);

/* Bytes of t's elements laid out contiguously: numel * element size, or
 * for a block tensor rows * the row's blocks. */
size_t fct_nbytes(const fc_tensor *t);

/* A block tensor of dtype dt and shape dims over `data`: copied (copy = 1:
 * nbytes must equal the size, as fc_from_data) or wrapped zero-copy
 * (copy = 0: nbytes >= the size, `release` as fc_wrap). op names the
 * public call in messages. */
fc_tensor *fct_block_new(fc_ctx *ctx, const char *op, fc_dtype dt, const fc_dim *dims, int rank, void *data,
                         size_t nbytes, void (*release)(void *user, void *data), void *user, int copy);

/* fc_get_rows with a block table (rank >= 2): the picked rows decoded to f32. */
fc_tensor *fct_block_get_rows(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids);

/* fc_einsum when a or b is a block tensor (contract_block.c); the names are
 * validated and interned by the caller. No gradient record. */
fc_tensor *fct_einsum_block(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n);

/* C[m, n] = A[m, k] · W^T for a row-major block matrix w [n, k] and f32 rows
 * a (k apart), c (n apart): what fc_linear computes for such a weight (the
 * packed copy cached with w's storage when m >= fc_qweights_min_m()). 1,
 * or 0 with the error in ctx. */
int fct_block_linear(fc_ctx *ctx, const float *a, int64_t m, int64_t k, const fc_tensor *w, int64_t n, float *c);

/* Decode rows [r0, r1) of block tensor t (rows of its last axis) into dst,
 * row r at dst + (r - r0) * cols. Threaded over rows for big slices. */
void fct_block_decode_rows(fc_ctx *ctx, const fc_tensor *t, int64_t r0, int64_t r1, float *dst);

#endif
