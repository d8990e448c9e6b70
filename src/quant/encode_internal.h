/* SPDX-License-Identifier: MIT */
/* Fucina: helpers shared by the reference encoders (layer quant, private).
 *
 * Byte identity with ggml's quantize_row_<fmt>_ref hangs on details that look
 * incidental: nearest_int is a float add of 1.5*2^23 (ties to even, not
 * roundf's ties away), a "1/x" is a division but "a/b" inside a loop is not a
 * reciprocal multiply, f16 scales are rounded once to nearest-even. Every
 * helper here keeps ggml's float expression order; the build's
 * -ffp-contract=off keeps the compiler from fusing a*b+c into one rounding. */
#ifndef FUCINA_QUANT_ENCODE_INTERNAL_H
#define FUCINA_QUANT_ENCODE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "fucina/half.h"

/* Round to nearest, ties to even, by adding 1.5*2^23: the sum's low mantissa
 * bits are the integer. Valid for |v| <= 2^22 - 1 (as in ggml, larger values
 * give a wrapped but deterministic result; no UB: the bits go through memcpy). */
static inline int fcq_nearest_int(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* f32 -> binary16 bits as ggml's GGML_FP32_TO_FP16 stores them: nearest-even
 * (fc_f32_to_f16), but every NaN becomes the canonical quiet NaN 0x7e00 with
 * its sign, where fc_f32_to_f16 would keep payload bits. */
static inline uint16_t fcq_f16_bits(float f)
{
    if (f != f) return (uint16_t)(((fc_f32_bits(f) >> 16) & 0x8000u) | 0x7e00u);
    return fc_f32_to_f16(f).bits;
}

static inline float fcq_f16_value(uint16_t h)
{
    fc_f16 v = {h};
    return fc_f16_to_f32(v);
}

/* Stores a 16-bit scale into a (possibly unaligned) block field. */
static inline void fcq_put_f16(uint16_t *field, float f)
{
    uint16_t h = fcq_f16_bits(f);
    memcpy(field, &h, sizeof h);
}

/* A float converted to int as x86's cvttss2si does (truncation; NaN and
 * out-of-range give INT32_MIN), so ggml's (int)/(uint8_t) casts of floats are
 * reproduced without undefined behaviour on any host. */
static inline int32_t fcq_trunc_i32(float f)
{
    if (!(f > -2147483904.f && f < 2147483648.f)) return INT32_MIN;
    return (int32_t)f;
}

/* --- scale searches (encode_search.c); the names are ggml's --------------------------- */

/* Symmetric search for q6_K (nmax 32, rmse_type 1): L[i] in [0, 2*nmax), returns
 * the scale (negative when the largest-magnitude element is positive). An
 * all-zero group (max |x| < 1e-15) gives L = 0 and scale 0. */
float fcq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type);

/* Symmetric search for q3_K with the x^2-weighted coordinate refinement; the
 * all-zero group gives L = 0 (not nmax) and scale 0, as ggml does. */
float fcq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, int do_rmse);

/* Asymmetric scale + min search (q2_K, q4_K, q5_K): L[i] in [0, nmax],
 * *the_min = -min >= 0, returns the scale. Laux is scratch of n bytes. */
float fcq_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad);

/* The importance-weighted searches of ggml's quantize_<fmt> with
 * quant_weights (encode_search.c). make_qx_quants with rmse_type 1 and
 * weights qw in place of x^2. */
float fcq_make_qx_quants_w(int n, int nmax, const float *x, int8_t *L, const float *qw);

/* make_qkx3_quants with weights, squared error (q2_K, q4_K, q5_K, q4_1, q5_1
 * with an imatrix): 37 trial scales against the best (scale, min) so far;
 * *the_min = -min >= 0. Laux is scratch of n bytes. */
float fcq_make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep);

/* make_qp_quants: the super-block quantization of non-negative sub-block
 * scales (or mins) x onto 0..nmax, weighted by qw; returns the step. */
float fcq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw);

/* The 12-byte 6-bit scale/min packing of q4_K and q5_K: sub-block j's scale
 * and min (each 0..63). Reads what fcq_put_scale_min_k4 wrote. */
void fcq_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m);

/* Packs eight (ls, lm) pairs into q (12 bytes, all overwritten). */
void fcq_put_scales_mins_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t q[12]);

#endif
