/* SPDX-License-Identifier: MIT */
/* Helpers shared by the structure, index and sort ops (shape_ops.c,
 * index_ops.c, sort.c): strided byte copies and fills over the loop engine,
 * index tensors loaded as int64 and range-checked. */
#ifndef FC_TENSOR_SHAPE_INTERNAL_H
#define FC_TENSOR_SHAPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/internal.h"

#define FCS_NULLCHK(ctx, t) do { if (!(ctx) || !(t)) return NULL; } while (0)

/* Copy a block of `rank` axes of es-byte elements (byte strides; dst and src
 * must not overlap). Threaded from FCT_PARALLEL_MIN_ELEMWISE elements unless
 * `serial`. */
void fcs_copy(fc_ctx *ctx, int rank, const int64_t *dim, char *dst, const int64_t *dst_st, const char *src,
              const int64_t *src_st, size_t es, int serial);
/* Fill a block with one es-byte value. */
void fcs_fill(fc_ctx *ctx, int rank, const int64_t *dim, char *dst, const int64_t *dst_st, const void *value,
              size_t es);

/* t's strides in bytes, in t's axis order. */
static inline void fcs_byte_strides(const fc_tensor *t, int64_t *out)
{
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++) out[i] = t->stride[i] * es;
}

static inline int fcs_is_index_dtype(fc_dtype dt) { return dt == FC_I32 || dt == FC_I64; }

/* idx's elements (i32 or i64) as int64 in row-major order of idx's own axes,
 * in scratch storage the caller releases. NULL after an error naming `op`,
 * `what` (e.g. "idx") and idx. */
fc_storage *fcs_load_index(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *idx);

/* Every v[i] in [0, limit)? Otherwise records FC_ERR_INVALID_ARG naming op,
 * the offending value and position, `axis` and `t`, and returns 0. */
int fcs_check_range(fc_ctx *ctx, const char *op, const int64_t *v, int64_t n, int64_t limit, const char *axis,
                    const fc_tensor *t);

/* Row-major multi-index of `lin` over dims. */
static inline void fcs_unravel(int64_t lin, int rank, const int64_t *dim, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = lin % dim[d];
        lin /= dim[d];
    }
}

/* Step a row-major multi-index; returns 0 when it wrapped around. */
static inline int fcs_next(int rank, const int64_t *dim, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dim[d]) return 1;
        idx[d] = 0;
    }
    return 0;
}

#endif
