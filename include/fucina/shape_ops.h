/* SPDX-License-Identifier: MIT */
/* Fucina: structure and index ops.
 *
 * Joining, splitting, padding, tiling and flipping along named axes;
 * embedding lookup, index_select, gather and scatter_add; top-k and
 * argsort. Operands are matched by axis NAME, so they may list their axes
 * in different orders; results take the first operand's order unless said
 * otherwise.
 *
 * Every dtype is accepted where values are only moved (they are copied as
 * bytes). Index tensors are i32 or i64; an index outside its axis is an
 * error (FC_ERR_INVALID_ARG) reported before anything is written, so a
 * failed in-place op leaves its destination untouched. Results are new
 * contiguous tensors except fc_split, which returns views. */
#ifndef FUCINA_SHAPE_OPS_H
#define FUCINA_SHAPE_OPS_H

#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- joining and splitting --- */

/* Join n >= 1 tensors along `axis`. Every operand has the same dtype and
 * the same axes (by name; any order) with equal sizes except along `axis`.
 * The result has tensors[0]'s axis order. */
FC_API fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *tensors, int n, const char *axis);

/* Stack n >= 1 tensors of one named shape (any axis order) along a new axis
 * `new_axis` of size n, inserted at position `pos` (0..rank) of
 * tensors[0]'s axis order. */
FC_API fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *tensors, int n, const char *new_axis, int pos);

/* Split `axis` into n consecutive views of sizes[0..n-1] (each >= 1, summing
 * to the axis size). On success out[0..n-1] get new references; on failure
 * they are set to NULL. Returns FC_OK or the error (NULL ctx:
 * FC_ERR_INVALID_ARG; NULL t: the context's status, nothing recorded). */
FC_API fc_status fc_split(fc_ctx *ctx, fc_tensor *t, const char *axis, const int64_t *sizes, int n,
                          fc_tensor **out);

/* --- padding, tiling, flipping --- */

/* `before` and `after` (>= 0) elements of the constant `value` (converted to
 * t's dtype by the casting rules) around `axis`. */
FC_API fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t before, int64_t after, double value);

/* t tiled `times` (>= 1) times along an existing axis: result[..., i, ...] =
 * t[..., i % size, ...] (torch.Tensor.repeat along one axis). */
FC_API fc_tensor *fc_repeat(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t times);

/* t reversed along `axis`. */
FC_API fc_tensor *fc_flip(fc_ctx *ctx, fc_tensor *t, const char *axis);

/* --- indexing --- */

/* Embedding lookup. The table's FIRST axis is the rows axis; ids (i32/i64,
 * any named shape, rank 0 allowed) pick rows. The result has ids' axes, then
 * the table's remaining axes (the names must not clash): result[i..., j...]
 * = table[ids[i...], j...]. */
FC_API fc_tensor *fc_get_rows(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids);

/* Rows of `axis` picked by a rank-1 i32/i64 idx (any axis name): the axis
 * keeps its name and gets size len(idx); indices may repeat. */
FC_API fc_tensor *fc_index_select(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx);

/* torch.gather by name: idx (i32/i64) has exactly t's axis names (any
 * order), each at most t's size except along `axis`. The result has idx's
 * named shape and t's dtype: result[p] = t[p with `axis` replaced by idx[p]]. */
FC_API fc_tensor *fc_gather(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx);

/* A new tensor: t plus src scattered along `axis` by idx (torch.scatter_add).
 * idx (i32/i64) and src (t's dtype) have t's axis names; idx's sizes are at
 * most src's on every axis and at most t's except along `axis`.
 *   result[p with axis = idx[q]] += src[q]   for every position q of idx.
 * Deterministic: each output row (fixed coordinates off `axis`) accumulates
 * in index order on one thread, each addition rounded to the dtype as in
 * PyTorch (f16/bf16 add in f32; integers wrap; bool is logical or). */
FC_API fc_tensor *fc_scatter_add(fc_ctx *ctx, fc_tensor *t, const char *axis, fc_tensor *idx, fc_tensor *src);

/* In place: dst[..., start : start + len, ...] = src along `axis`, where len
 * is src's size along `axis` (1 when src lacks the axis). src has dst's
 * dtype and broadcasts by name over the other axes; negative `start` counts
 * from the end. Bumps dst's version. src may overlap dst. */
FC_API fc_status fc_set_slice(fc_ctx *ctx, fc_tensor *dst, const char *axis, int64_t start, const fc_tensor *src);

/* --- sorting --- */

/* The k (1..size) largest (or smallest, largest == 0) elements along `axis`,
 * sorted (largest first, or smallest first), ties by lower index; NaN counts
 * as larger than +inf, and -0.0 equals +0.0. Outputs: *values (t's dtype)
 * and *indices (i64), both t's axes with `axis` of size k; either pointer
 * may be NULL when not wanted. Returns FC_OK or the error (outputs NULL). */
FC_API fc_status fc_topk(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t k, int largest,
                         fc_tensor **values, fc_tensor **indices);

/* The i64 permutation that sorts t along `axis` (ascending, or descending
 * when `descending`), stable: equal elements keep their index order. NaN
 * sorts as the largest value. */
FC_API fc_tensor *fc_argsort(fc_ctx *ctx, fc_tensor *t, const char *axis, int descending);

#ifdef __cplusplus
}
#endif
#endif
