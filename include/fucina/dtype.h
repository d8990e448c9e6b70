/* SPDX-License-Identifier: MIT */
/* Fucina: element types.
 *
 * Casting rules (fc_cast and every conversion inside an op):
 *   - float -> float rounds to nearest-even once (f32 -> f16/bf16 as in half.h);
 *   - float -> integer truncates toward zero and saturates to the target's
 *     range; NaN becomes 0;
 *   - integer -> integer saturates (i64 300 -> u8 255, -5 -> u8 0);
 *   - anything -> bool is (x != 0) (NaN is true); bool -> number is 0 or 1;
 *   - integer -> float rounds to nearest-even (i64 beyond 2^24 -> f32 loses bits).
 * No op promotes implicitly: operands of a binary op have the same dtype.
 *
 * Block-quantized dtypes (FC_Q4_0 ... FC_Q2_0) are GGML's formats: values
 * are stored in blocks of fc_dtype_block_elems(t) elements taking
 * fc_dtype_block_bytes(t) bytes, along the last (contiguous) axis. They have
 * no element size (fc_dtype_size is 0) and are not numbers an op can compute
 * with: a block tensor is a constant that fc_dequantize, fc_get_rows and the
 * contractions (fc_linear, fc_matmul, fc_dot, fc_einsum) read; every other
 * op refuses it with FC_ERR_DTYPE (see docs/API.md, "Block-quantized
 * tensors"). */
#ifndef FUCINA_DTYPE_H
#define FUCINA_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_dtype {
    FC_BOOL = 0, /* one byte, 0 or 1 */
    FC_U8,
    FC_I8,
    FC_I16,
    FC_I32,
    FC_I64,
    FC_F16,  /* fc_f16 storage; computed in f32, rounded once */
    FC_BF16, /* fc_bf16 storage; computed in f32, rounded once */
    FC_F32,
    FC_F64,
    /* GGML block formats, named as ggml spells them ("q4_K", "iq2_xxs"). */
    FC_Q4_0,
    FC_Q4_1,
    FC_Q5_0,
    FC_Q5_1,
    FC_Q8_0,
    FC_Q8_1,
    FC_Q2_K,
    FC_Q3_K,
    FC_Q4_K,
    FC_Q5_K,
    FC_Q6_K,
    FC_Q8_K,
    FC_IQ2_XXS,
    FC_IQ2_XS,
    FC_IQ2_S,
    FC_IQ3_XXS,
    FC_IQ3_S,
    FC_IQ1_S,
    FC_IQ1_M,
    FC_IQ4_NL,
    FC_IQ4_XS,
    FC_TQ1_0,
    FC_TQ2_0,
    FC_MXFP4,
    FC_NVFP4,
    FC_Q1_0,
    FC_Q2_0,
} fc_dtype;

#define FC_DTYPE_COUNT 37
/* The element dtypes FC_BOOL..FC_F64 come first: 0 <= t < FC_DTYPE_PLAIN_COUNT. */
#define FC_DTYPE_PLAIN_COUNT 10

/* Every block dtype as case labels, for exhaustive switches that treat them
 * alike:  switch (dt) { case FC_F32: ...; FC_CASE_BLOCK_DTYPES: return 0; } */
#define FC_CASE_BLOCK_DTYPES                                                                                 \
    case FC_Q4_0: case FC_Q4_1: case FC_Q5_0: case FC_Q5_1: case FC_Q8_0: case FC_Q8_1: case FC_Q2_K:        \
    case FC_Q3_K: case FC_Q4_K: case FC_Q5_K: case FC_Q6_K: case FC_Q8_K: case FC_IQ2_XXS: case FC_IQ2_XS:   \
    case FC_IQ2_S: case FC_IQ3_XXS: case FC_IQ3_S: case FC_IQ1_S: case FC_IQ1_M: case FC_IQ4_NL:            \
    case FC_IQ4_XS: case FC_TQ1_0: case FC_TQ2_0: case FC_MXFP4: case FC_NVFP4: case FC_Q1_0: case FC_Q2_0

/* Bytes per element; 0 for a block dtype (it has no element size: use
 * fc_dtype_block_bytes / fc_dtype_row_bytes) and for an invalid value. */
FC_API size_t fc_dtype_size(fc_dtype t);
/* "f32", "bf16", "bool", "q4_K", "iq2_xxs", ...; "?" for an invalid value. */
FC_API const char *fc_dtype_name(fc_dtype t);
/* Parse a name; returns 0 when unknown. Block names also match in any case
 * ("Q4_K", as GGUF tools print them). */
FC_API int fc_dtype_parse(const char *name, fc_dtype *out);
FC_API int fc_dtype_is_float(fc_dtype t);   /* f16 bf16 f32 f64 (not the block dtypes) */
FC_API int fc_dtype_is_integer(fc_dtype t); /* u8 i8 i16 i32 i64 (not bool) */
FC_API int fc_dtype_is_block(fc_dtype t);   /* the GGML block formats */
/* Elements per block: 1 for an element dtype, 0 when invalid. */
FC_API size_t fc_dtype_block_elems(fc_dtype t);
/* Bytes per block: the element size for an element dtype, 0 when invalid. */
FC_API size_t fc_dtype_block_bytes(fc_dtype t);
/* Bytes of n consecutive elements along the last axis; 0 when n is not a
 * multiple of the block size (or t is invalid, or n < 0). */
FC_API size_t fc_dtype_row_bytes(fc_dtype t, int64_t n);
/* The ggml type id (the number GGUF files store) of t; -1 when ggml has
 * none (bool, u8). */
FC_API int fc_dtype_ggml_type(fc_dtype t);
/* The dtype of a ggml type id; 0 when the id is unknown (or removed). */
FC_API int fc_dtype_from_ggml_type(uint32_t ggml_type, fc_dtype *out);

#ifdef __cplusplus
}
#endif
#endif
