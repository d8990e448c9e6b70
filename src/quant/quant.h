/* SPDX-License-Identifier: MIT */
/* Fucina: GGML block formats — reference encoders and decoders (layer quant).
 *
 * Formats are named by their GGML type id (the id GGUF files store), so the
 * GGUF reader, the tensor dtypes and the kernels agree on one number. Every
 * function here is the scalar reference: decoders bit-identical to ggml's
 * dequantize_row_<fmt>, encoders byte-identical to ggml's
 * quantize_row_<fmt>_ref (checked against ggml itself by
 * tests/runtime/test_quant_*.c). n is the element count, a multiple of the
 * format's block size; src and dst need no alignment. */
#ifndef FUCINA_QUANT_QUANT_H
#define FUCINA_QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"

typedef enum fcq_type {
    FCQ_Q4_0 = 2,
    FCQ_Q4_1 = 3,
    FCQ_Q5_0 = 6,
    FCQ_Q5_1 = 7,
    FCQ_Q8_0 = 8,
    FCQ_Q8_1 = 9,
    FCQ_Q2_K = 10,
    FCQ_Q3_K = 11,
    FCQ_Q4_K = 12,
    FCQ_Q5_K = 13,
    FCQ_Q6_K = 14,
    FCQ_Q8_K = 15,
    FCQ_IQ2_XXS = 16,
    FCQ_IQ2_XS = 17,
    FCQ_IQ3_XXS = 18,
    FCQ_IQ1_S = 19,
    FCQ_IQ4_NL = 20,
    FCQ_IQ3_S = 21,
    FCQ_IQ2_S = 22,
    FCQ_IQ4_XS = 23,
    FCQ_IQ1_M = 29,
    FCQ_TQ1_0 = 34,
    FCQ_TQ2_0 = 35,
    FCQ_MXFP4 = 39,
    FCQ_NVFP4 = 40,
    FCQ_Q1_0 = 41,
    FCQ_Q2_0 = 42,
} fcq_type;

#define FCQ_TYPE_LIMIT 43 /* one past the largest id */

typedef void (*fcq_decode_fn)(const void *src, float *dst, size_t n);
typedef void (*fcq_encode_fn)(const float *src, void *dst, size_t n);

typedef struct fcq_traits {
    fcq_type type;
    const char *name;      /* ggml's spelling: "q4_0", "q4_K", "iq2_xxs" */
    uint32_t block_elems;  /* elements per block */
    uint32_t block_bytes;  /* bytes per block */
    fcq_decode_fn decode;  /* never NULL */
    fcq_encode_fn encode;  /* NULL when there is no reference encoder yet */
    fcq_type dot_partner;  /* activation format of the integer dot: q8_0, q8_1 or q8_K */
} fcq_traits;

/* The traits of a block format, or NULL when id is not one (f32, i8, a gap). */
const fcq_traits *fcq_traits_of(uint32_t id);
/* Parses "q4_K", "Q4_K" (any case); 0 when unknown. */
int fcq_type_parse(const char *name, fcq_type *out);

/* Bytes of n elements (n a multiple of the block size). */
static inline size_t fcq_row_bytes(const fcq_traits *t, size_t n)
{
    return n / t->block_elems * t->block_bytes;
}

/* --- decoders (all formats) ----------------------------------------------------------- */
void fcq_decode_q4_0(const void *src, float *dst, size_t n);
void fcq_decode_q4_1(const void *src, float *dst, size_t n);
void fcq_decode_q5_0(const void *src, float *dst, size_t n);
void fcq_decode_q5_1(const void *src, float *dst, size_t n);
void fcq_decode_q8_0(const void *src, float *dst, size_t n);
void fcq_decode_q8_1(const void *src, float *dst, size_t n);
void fcq_decode_q2_K(const void *src, float *dst, size_t n);
void fcq_decode_q3_K(const void *src, float *dst, size_t n);
void fcq_decode_q4_K(const void *src, float *dst, size_t n);
void fcq_decode_q5_K(const void *src, float *dst, size_t n);
void fcq_decode_q6_K(const void *src, float *dst, size_t n);
void fcq_decode_q8_K(const void *src, float *dst, size_t n);
void fcq_decode_iq2_xxs(const void *src, float *dst, size_t n);
void fcq_decode_iq2_xs(const void *src, float *dst, size_t n);
void fcq_decode_iq2_s(const void *src, float *dst, size_t n);
void fcq_decode_iq3_xxs(const void *src, float *dst, size_t n);
void fcq_decode_iq3_s(const void *src, float *dst, size_t n);
void fcq_decode_iq1_s(const void *src, float *dst, size_t n);
void fcq_decode_iq1_m(const void *src, float *dst, size_t n);
void fcq_decode_iq4_nl(const void *src, float *dst, size_t n);
void fcq_decode_iq4_xs(const void *src, float *dst, size_t n);
void fcq_decode_tq1_0(const void *src, float *dst, size_t n);
void fcq_decode_tq2_0(const void *src, float *dst, size_t n);
void fcq_decode_mxfp4(const void *src, float *dst, size_t n);
void fcq_decode_nvfp4(const void *src, float *dst, size_t n);
void fcq_decode_q1_0(const void *src, float *dst, size_t n);
void fcq_decode_q2_0(const void *src, float *dst, size_t n);

/* --- reference encoders ------------------------------------------------------------- */
/* 32-element formats (src/quant/encode_basic.c) */
void fcq_encode_q4_0(const float *src, void *dst, size_t n);
void fcq_encode_q4_1(const float *src, void *dst, size_t n);
void fcq_encode_q5_0(const float *src, void *dst, size_t n);
void fcq_encode_q5_1(const float *src, void *dst, size_t n);
void fcq_encode_q8_0(const float *src, void *dst, size_t n);
void fcq_encode_q8_1(const float *src, void *dst, size_t n);
/* super-block and non-linear formats (src/quant/encode_k.c, encode_other.c) */
void fcq_encode_q2_K(const float *src, void *dst, size_t n);
void fcq_encode_q3_K(const float *src, void *dst, size_t n);
void fcq_encode_q4_K(const float *src, void *dst, size_t n);
void fcq_encode_q5_K(const float *src, void *dst, size_t n);
void fcq_encode_q6_K(const float *src, void *dst, size_t n);
void fcq_encode_q8_K(const float *src, void *dst, size_t n);
void fcq_encode_iq4_nl(const float *src, void *dst, size_t n);
void fcq_encode_iq4_xs(const float *src, void *dst, size_t n);
/* iq4_nl as ggml_quantize_chunk (and so llama-quantize) makes it without an
 * importance matrix: ggml's quantize_iq4_nl, which tries 7 more scales per
 * block than quantize_row_iq4_nl_ref and re-picks every level against the
 * chosen one. Used by fc_gguf_quantize so files match llama.cpp's. */
void fcq_encode_iq4_nl_search(const float *src, void *dst, size_t n);
void fcq_encode_tq1_0(const float *src, void *dst, size_t n);
void fcq_encode_tq2_0(const float *src, void *dst, size_t n);
void fcq_encode_mxfp4(const float *src, void *dst, size_t n);
void fcq_encode_nvfp4(const float *src, void *dst, size_t n);
void fcq_encode_q1_0(const float *src, void *dst, size_t n);
void fcq_encode_q2_0(const float *src, void *dst, size_t n);


/* --- importance-weighted encoders ---------------------------------------------------- */
/* What ggml_quantize_chunk runs when it is given importance weights (an
 * imatrix): ggml's quantize_row_<fmt>_impl / quantize_<fmt> with
 * quant_weights, byte for byte. src is ONE row of n elements and qw its n
 * weights (the q4_0..q5_1 searches use the row's mean square). */
typedef void (*fcq_encode_w_fn)(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q4_0_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q4_1_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q5_0_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q5_1_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q2_K_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q3_K_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q4_K_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q5_K_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_q6_K_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_iq4_nl_w(const float *src, void *dst, size_t n, const float *qw);
void fcq_encode_iq4_xs_w(const float *src, void *dst, size_t n, const float *qw);
/* The weighted encoder of a format; NULL when ggml ignores the weights for it
 * (q8_0, tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0: their rows are the same
 * with or without an imatrix) or when there is no encoder here at all (the
 * iq1/iq2/iq3 grid formats). */
fcq_encode_w_fn fcq_weighted_encoder(uint32_t id);

#endif
