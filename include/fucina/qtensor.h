/* SPDX-License-Identifier: MIT */
/* Fucina: block-quantized tensors (GGML formats: q4_0, q8_0, q4_K, iq2_xxs ...).
 *
 * A block tensor has a block dtype (fc_dtype_is_block) and is a constant:
 *   - contiguous and row-major, rank >= 1; the last axis is a multiple of
 *     the block size (fc_dtype_block_elems), and each row of it is
 *     (cols / block_elems) blocks of fc_dtype_block_bytes bytes exactly as
 *     ggml stores them: fc_tensor_nbytes = rows * fc_dtype_row_bytes(dt, cols);
 *   - it never requires a gradient (fc_requires_grad refuses it);
 *   - it is made by fc_quantize, by fc_from_data (a copy of the raw blocks),
 *     by fc_wrap (zero-copy over caller memory, no alignment needed) or by
 *     fc_gguf_tensor (zero-copy over the file);
 *   - it is read by fc_dequantize, fc_cast(t, FC_F32) (the same thing),
 *     fc_get_rows (decodes only the rows picked), the contractions fc_linear,
 *     fc_matmul, fc_dot and fc_einsum (below), fc_tensor_read (the raw
 *     blocks), fc_tensor_describe; fc_rename / fc_rename_all relabel it.
 *     Every other op refuses it with FC_ERR_DTYPE, naming the op and dtype.
 *
 * Contractions. When the block tensor is the right operand and its last
 * (contiguous) axis is the one contracted axis — fc_linear(x[..., in],
 * w[out, in]), fc_dot(x, w, "in") — the product runs on the quantized weights
 * (src/exec/qmatmul.h): like ggml, each activation row is first quantized to
 * the format's 8-bit partner (q8_0, q8_1 or q8_K), so the result differs
 * from an f32 product with the dequantized weights by that rounding (about
 * amax(block) / 254 per activation element, times |w|). Any other layout (a
 * block left operand, fc_matmul(x, w[k, n]) contracting the rows, a batch
 * axis) decodes the block operand to f32, a slice of rows at a time where it
 * can, and runs the f32 GEMM: exact up to f32 summation order. That second
 * form is also how fc_linear(x, w_block) gives x its gradient (dx = dy · w). */
#ifndef FUCINA_QTENSOR_H
#define FUCINA_QTENSOR_H

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x (f32, rank >= 1, last axis a multiple of the block size; any strides)
 * encoded row by row with the format's reference encoder (byte-identical to
 * ggml's quantize_row_<fmt>_ref). A format without an encoder yet gives
 * FC_ERR_UNSUPPORTED. The result has x's named shape and no gradient. */
FC_API fc_tensor *fc_quantize(fc_ctx *ctx, fc_tensor *x, fc_dtype dt);

/* t decoded to f32 (bit-identical to ggml's dequantize_row_<fmt>), same
 * named shape. A tensor of an element dtype is cast to f32 (fc_cast). */
FC_API fc_tensor *fc_dequantize(fc_ctx *ctx, fc_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
