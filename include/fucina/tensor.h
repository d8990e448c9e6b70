/* SPDX-License-Identifier: MIT */
/* Fucina: tensors with named axes.
 *
 * A tensor is a refcounted handle: dtype, rank 0..8 (rank 0 is a scalar),
 * sizes, element strides, an offset into refcounted storage, and one name
 * per axis. Views (narrow, select, permute, broadcast, reshape, split/merge
 * of axes, as_strided) share the storage and keep it alive. No axis has size
 * zero.
 *
 * Axis names are interned strings: at most 31 bytes of [A-Za-z0-9_.], not
 * empty. Shapes are written with names:
 *
 *     fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"batch", 32}, {"in", 784}));
 *
 * Tensors made without names (fc_empty_pos, or FC_SHAPE with NULL names) get
 * the positional names _0, _1, ... in order.
 *
 * Ownership: every function returning fc_tensor * returns a new reference.
 * Inside an exec scope the scope owns it (see ctx.h); outside, the caller
 * releases it with fc_release. fc_keep moves a reference out of the
 * innermost scope (to the enclosing scope, or to the caller at top level). */
#ifndef FUCINA_TENSOR_H
#define FUCINA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FC_MAX_RANK 8
#define FC_AXIS_NAME_MAX 31

typedef struct fc_tensor fc_tensor;

/* One axis of a shape: a name and a size. */
typedef struct fc_dim {
    const char *name;
    int64_t size;
} fc_dim;

/* FC_SHAPE({"batch", 32}, {"in", 784}) expands to two arguments: a pointer to
 * the dims and their count. FC_SCALAR is the rank-0 shape. */
#define FC_SHAPE(...) ((const fc_dim[]){__VA_ARGS__}), \
    ((int)(sizeof((const fc_dim[]){__VA_ARGS__}) / sizeof(fc_dim)))
#define FC_SCALAR ((const fc_dim *)0), 0
/* FC_AXES("batch", "out") expands to a name list and its count. */
#define FC_AXES(...) ((const char *const[]){__VA_ARGS__}), \
    ((int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))
#define FC_NO_AXES ((const char *const *)0), 0

/* --- reference counting --- */
FC_API fc_tensor *fc_retain(fc_tensor *t);
FC_API void fc_release(fc_tensor *t);
/* Move t out of the innermost open scope that holds it (to the enclosing
 * scope, or to the caller when it was the outermost). Returns t. */
FC_API fc_tensor *fc_keep(fc_ctx *ctx, fc_tensor *t);

/* --- creation --- */
FC_API fc_tensor *fc_empty(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank);
FC_API fc_tensor *fc_zeros(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank);
FC_API fc_tensor *fc_full(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, double value);
/* Positional sizes: names _0.._{rank-1}. */
FC_API fc_tensor *fc_empty_pos(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes);
/* A rank-0 tensor holding `value` cast to dt. */
FC_API fc_tensor *fc_scalar(fc_ctx *ctx, fc_dtype dt, double value);
/* A copy of `nbytes` of row-major element data (nbytes must equal the size).
 * For a block dtype (fucina/qtensor.h) the data are the encoded blocks. */
FC_API fc_tensor *fc_from_data(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank,
                               const void *data, size_t nbytes);
/* A tensor over caller memory (e.g. an mmap'd file), not copied. `release`
 * (may be NULL) runs once when the last view of it is gone. `data` must stay
 * valid until then and be aligned to the element size (block dtypes: any
 * alignment, nbytes >= the blocks' size). */
FC_API fc_tensor *fc_wrap(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank,
                          void *data, size_t nbytes,
                          void (*release)(void *user, void *data), void *user);
/* 0, 1, ..., n-1 along one axis. */
FC_API fc_tensor *fc_arange(fc_ctx *ctx, fc_dtype dt, const char *axis, int64_t n);
/* Counter-based random numbers: element i (row-major) depends only on seed
 * and i, so results do not depend on threads or on how the tensor is split. */
FC_API fc_tensor *fc_rand_uniform(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank,
                                  uint64_t seed, double lo, double hi);
FC_API fc_tensor *fc_rand_normal(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank,
                                 uint64_t seed, double mean, double std);

/* --- inspection --- */
FC_API fc_dtype fc_tensor_dtype(const fc_tensor *t);
FC_API int fc_tensor_rank(const fc_tensor *t);
FC_API int64_t fc_tensor_dim(const fc_tensor *t, int i);       /* size of axis i */
FC_API const char *fc_tensor_axis(const fc_tensor *t, int i);  /* name of axis i */
FC_API int64_t fc_tensor_stride(const fc_tensor *t, int i);    /* in elements */
/* Index of a named axis, -1 when absent. */
FC_API int fc_tensor_axis_index(const fc_tensor *t, const char *name);
/* Size of a named axis, 0 when absent. */
FC_API int64_t fc_tensor_size(const fc_tensor *t, const char *name);
FC_API int64_t fc_tensor_numel(const fc_tensor *t);
FC_API size_t fc_tensor_nbytes(const fc_tensor *t); /* numel * element size */
FC_API int fc_tensor_is_contiguous(const fc_tensor *t);
/* The first element. Row-major data only when fc_tensor_is_contiguous. */
FC_API void *fc_tensor_data(const fc_tensor *t);
/* "f32[batch=32, in=784]" into buf; returns buf (writes nothing when buf is
 * NULL or len 0). */
FC_API char *fc_tensor_describe(const fc_tensor *t, char *buf, size_t len);
/* Copy the elements in row-major order into dst (nbytes = fc_tensor_nbytes). */
FC_API fc_status fc_tensor_read(fc_ctx *ctx, const fc_tensor *t, void *dst, size_t nbytes);
/* One element, converted to double; idx has one entry per axis (may be NULL
 * at rank 0). NaN if t is NULL, idx is NULL at rank > 0 or out of range. */
FC_API double fc_tensor_get(const fc_tensor *t, const int64_t *idx);
/* The only element of a one-element tensor, as double (NaN if not one). */
FC_API double fc_tensor_item(const fc_tensor *t);

/* --- views (share storage; keep it alive) --- */
/* Elements [start, start+len) of an axis; negative start counts from the end. */
FC_API fc_tensor *fc_narrow(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t start, int64_t len);
/* Index `index` of an axis; the axis goes away. */
FC_API fc_tensor *fc_select(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t index);
/* Reorder axes: `order` names every axis once. */
FC_API fc_tensor *fc_permute(fc_ctx *ctx, fc_tensor *t, const char *const *order, int n);
FC_API fc_tensor *fc_transpose(fc_ctx *ctx, fc_tensor *t, const char *a, const char *b);
/* Broadcast to `dims` (stride 0): t's axes must appear in dims by name with
 * equal size or size 1; the result has dims' order. */
FC_API fc_tensor *fc_broadcast_to(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank);
/* New shape with the same element count: a view when t is contiguous, a
 * contiguous copy otherwise. */
FC_API fc_tensor *fc_reshape(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank);
/* A checked strided view: every reachable element must lie inside t's
 * storage. Strides and offset in elements, relative to t's first element. */
FC_API fc_tensor *fc_as_strided(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank,
                                const int64_t *strides, int64_t offset);
/* t itself (a new reference) when contiguous, else a row-major copy. */
FC_API fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t);
/* Always a fresh row-major copy. */
FC_API fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t);

/* --- axis names --- */
FC_API fc_tensor *fc_rename(fc_ctx *ctx, fc_tensor *t, const char *from, const char *to);
/* Rename every axis, in order. */
FC_API fc_tensor *fc_rename_all(fc_ctx *ctx, fc_tensor *t, const char *const *names, int n);
/* Split one axis into several (sizes multiply to its size): a view. */
FC_API fc_tensor *fc_split_axis(fc_ctx *ctx, fc_tensor *t, const char *axis, const fc_dim *parts, int n);
/* Merge adjacent axes (in the given order, which must be t's order) into one
 * named `into`: a view when their strides allow it, a copy otherwise. */
FC_API fc_tensor *fc_merge_axes(fc_ctx *ctx, fc_tensor *t, const char *const *axes, int n, const char *into);
/* Insert a size-1 axis named `name` at position `pos` (0..rank). */
FC_API fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *t, const char *name, int pos);
/* Drop a size-1 axis. */
FC_API fc_tensor *fc_squeeze(fc_ctx *ctx, fc_tensor *t, const char *name);

/* --- writing --- */
/* Copy src into dst elementwise (same named shape; src may broadcast by
 * name), converting dtypes by the casting rules. dst may be a view. */
FC_API fc_status fc_copy_into(fc_ctx *ctx, fc_tensor *dst, const fc_tensor *src);
FC_API fc_status fc_fill(fc_ctx *ctx, fc_tensor *dst, double value);

#ifdef __cplusplus
}
#endif
#endif
