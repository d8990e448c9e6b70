/* SPDX-License-Identifier: MIT */
/* Fucina: reference encoders of the 32-element formats q4_0 q4_1 q5_0 q5_1
 * q8_0 q8_1, byte-identical to ggml's quantize_row_<fmt>_ref.
 *
 * What byte-identity takes (each mirrors ggml's reference code):
 *   - the scale is computed in f32 (amax / 127, max / -8, (max - min) / 15 ...)
 *     and its reciprocal id = 1.0f / d is taken from that f32 value, not from
 *     the f16 that is stored; only the stored field is rounded to f16;
 *   - q4/q5 round by adding 8.5 / 16.5 / 0.5 and truncating toward zero (so
 *     halves round up, not to even), then clamp with MIN(15 or 31, .); q8
 *     uses roundf (half away from zero);
 *   - q4_0/q5_0 take the signed value of largest magnitude, the first one on
 *     ties, and divide by -8 / -16 so it maps to quant 0;
 *   - q8_1's s is (float)sum(q) * d with the f32 d, rounded to f16 once.
 * The float-to-integer conversions are those of x86-64 (cvttss2si, then the
 * low byte), which the oracle runs: they only matter when id overflows to
 * Inf (|d| < ~2.9e-39, so every x * id is +-Inf or NaN), where C leaves the
 * conversion undefined; here it is defined as x86 does it, so the same bytes
 * come out on every host. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fucina/half.h"
#include "quant/encode_internal.h"
#include "quant/quant.h"

/* ggml's f32 -> f16: round to nearest-even like fc_f32_to_f16, but every NaN
 * becomes the canonical quiet NaN 0x7E00 (with its sign). */
static inline uint16_t f2h(float f)
{
    if (isnan(f)) return (uint16_t)((fc_f32_bits(f) >> 16 & 0x8000u) | 0x7E00u);
    return fc_f32_to_f16(f).bits;
}

/* x86 cvttss2si: truncation toward zero; NaN and out-of-range give INT32_MIN. */
static inline int32_t trunc_i32(float v)
{
    if (!(v >= -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}

/* (int8_t)v as compiled for x86-64: truncate to int32, keep the low byte (signed). */
static inline int to_i8(float v)
{
    const int b = (int)((uint32_t)trunc_i32(v) & 0xffu);
    return b > 127 ? b - 256 : b;
}

/* (uint8_t)v: the low byte, unsigned. */
static inline unsigned to_u8(float v) { return (uint32_t)trunc_i32(v) & 0xffu; }

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Blocks are built in a local struct and copied out: dst needs no alignment. */
void fcq_encode_q4_0(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q4_0)) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q4_0 b;
        b.d = f2h(d);
        for (int j = 0; j < 16; j++) {
            const unsigned x0 = (uint8_t)imin(15, to_i8(src[j] * id + 8.5f));
            const unsigned x1 = (uint8_t)imin(15, to_i8(src[j + 16] * id + 8.5f));
            b.qs[j] = (uint8_t)(x0 | x1 << 4);
        }
        memcpy(out, &b, sizeof b);
    }
}

/* The minimum and maximum of a block; NaNs are skipped as ggml's compares do. */
static void min_max(const float *x, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

void fcq_encode_q4_1(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q4_1)) {
        float min, max;
        min_max(src, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q4_1 b;
        b.d = f2h(d);
        b.m = f2h(min);
        for (int j = 0; j < 16; j++) {
            const unsigned x0 = (uint8_t)imin(15, to_i8((src[j] - min) * id + 0.5f));
            const unsigned x1 = (uint8_t)imin(15, to_i8((src[j + 16] - min) * id + 0.5f));
            b.qs[j] = (uint8_t)(x0 | x1 << 4);
        }
        memcpy(out, &b, sizeof b);
    }
}

/* The 5th bits go to a little-endian u32: bit j for element j. */
static void store_qh(uint8_t qh[4], uint32_t v)
{
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(v >> (8 * k));
}

void fcq_encode_q5_0(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q5_0)) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q5_0 b;
        b.d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const unsigned x0 = (uint8_t)imin(31, to_i8(src[j] * id + 16.5f));
            const unsigned x1 = (uint8_t)imin(31, to_i8(src[j + 16] * id + 16.5f));
            b.qs[j] = (uint8_t)((x0 & 0x0F) | (x1 & 0x0F) << 4);
            qh |= ((x0 & 0x10u) >> 4) << j;
            qh |= ((x1 & 0x10u) >> 4) << (j + 16);
        }
        store_qh(b.qh, qh);
        memcpy(out, &b, sizeof b);
    }
}

void fcq_encode_q5_1(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q5_1)) {
        float min, max;
        min_max(src, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q5_1 b;
        b.d = f2h(d);
        b.m = f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            /* No clamp here in ggml: (x - min) * id + 0.5 stays below 32. */
            const unsigned x0 = to_u8((src[j] - min) * id + 0.5f);
            const unsigned x1 = to_u8((src[j + 16] - min) * id + 0.5f);
            b.qs[j] = (uint8_t)((x0 & 0x0F) | (x1 & 0x0F) << 4);
            qh |= ((x0 & 0x10u) >> 4) << j;
            qh |= ((x1 & 0x10u) >> 4) << (j + 16);
        }
        store_qh(b.qh, qh);
        memcpy(out, &b, sizeof b);
    }
}

/* amax as ggml's MAX(amax, fabsf(v)) = (amax > |v| ? amax : |v|). */
static float abs_max(const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

void fcq_encode_q8_0(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q8_0)) {
        const float d = abs_max(src) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q8_0 b;
        b.d = f2h(d);
        for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)to_i8(roundf(src[j] * id));
        memcpy(out, &b, sizeof b);
    }
}

void fcq_encode_q8_1(const float *src, void *dst, size_t n)
{
    unsigned char *out = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, out += sizeof(fcq_block_q8_1)) {
        const float d = abs_max(src) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        fcq_block_q8_1 b;
        b.d = f2h(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            b.qs[j] = (int8_t)to_i8(roundf(src[j] * id));
            sum += b.qs[j];
        }
        b.s = f2h((float)sum * d);
        memcpy(out, &b, sizeof b);
    }
}

/* ---- importance-weighted: ggml's quantize_row_<fmt>_impl -------------------------- */

/* The per-element weights of a 32-block: qw * sqrt(sigma2 + x^2), sigma2 the
 * mean x^2 of the whole row (so these encoders take one row at a time). */
static float row_sigma2(const float *x, size_t n)
{
    float sum_x2 = 0;
    for (size_t j = 0; j < n; j++) sum_x2 += x[j] * x[j];
    return sum_x2 / (float)n;
}

static void block_weights(const float *xb, const float *qw, float sigma2, float w[32])
{
    for (int j = 0; j < 32; j++) w[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

void fcq_encode_q4_0_w(const float *src, void *dst, size_t n, const float *qw)
{
    /* make_qx_quants with nmax 8: levels 0..15 straight into the nibbles
     * (a ~0 block gets level 0 and d = 0, where _ref writes 8). */
    unsigned char *out = dst;
    const float sigma2 = row_sigma2(src, n);
    for (size_t i = 0; i < n / 32; i++, out += sizeof(fcq_block_q4_0)) {
        const float *xb = src + 32 * i;
        float w[32];
        int8_t L[32];
        block_weights(xb, qw + 32 * i, sigma2, w);
        fcq_block_q4_0 b;
        b.d = f2h(fcq_make_qx_quants_w(32, 8, xb, L, w));
        for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        memcpy(out, &b, sizeof b);
    }
}

void fcq_encode_q4_1_w(const float *src, void *dst, size_t n, const float *qw)
{
    unsigned char *out = dst;
    const float sigma2 = row_sigma2(src, n);
    for (size_t i = 0; i < n / 32; i++, out += sizeof(fcq_block_q4_1)) {
        const float *xb = src + 32 * i;
        float w[32], min;
        uint8_t L[32], Laux[32];
        block_weights(xb, qw + 32 * i, sigma2, w);
        fcq_block_q4_1 b;
        b.d = f2h(fcq_make_qkx3_quants(32, 15, xb, w, L, &min, Laux, -0.9f, 0.05f, 36));
        b.m = f2h(-min);
        for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        memcpy(out, &b, sizeof b);
    }
}

/* 32 levels 0..31: low nibbles as q4, the 5th bits into the u32 qh. */
static void pack_q5(const uint8_t *L, uint8_t qs[16], uint8_t qh_out[4])
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const unsigned x0 = L[j], x1 = L[j + 16];
        qs[j] = (uint8_t)((x0 & 0x0F) | (x1 & 0x0F) << 4);
        qh |= ((x0 & 0x10u) >> 4) << j;
        qh |= ((x1 & 0x10u) >> 4) << (j + 16);
    }
    store_qh(qh_out, qh);
}

void fcq_encode_q5_0_w(const float *src, void *dst, size_t n, const float *qw)
{
    unsigned char *out = dst;
    const float sigma2 = row_sigma2(src, n);
    for (size_t i = 0; i < n / 32; i++, out += sizeof(fcq_block_q5_0)) {
        const float *xb = src + 32 * i;
        float w[32];
        int8_t L[32];
        uint8_t Lu[32];
        block_weights(xb, qw + 32 * i, sigma2, w);
        fcq_block_q5_0 b;
        b.d = f2h(fcq_make_qx_quants_w(32, 16, xb, L, w));
        for (int j = 0; j < 32; j++) Lu[j] = (uint8_t)L[j];
        pack_q5(Lu, b.qs, b.qh);
        memcpy(out, &b, sizeof b);
    }
}

void fcq_encode_q5_1_w(const float *src, void *dst, size_t n, const float *qw)
{
    unsigned char *out = dst;
    const float sigma2 = row_sigma2(src, n);
    for (size_t i = 0; i < n / 32; i++, out += sizeof(fcq_block_q5_1)) {
        const float *xb = src + 32 * i;
        float w[32], min;
        uint8_t L[32], Laux[32];
        block_weights(xb, qw + 32 * i, sigma2, w);
        fcq_block_q5_1 b;
        b.d = f2h(fcq_make_qkx3_quants(32, 31, xb, w, L, &min, Laux, -0.9f, 0.05f, 36));
        b.m = f2h(-min);
        pack_q5(L, b.qs, b.qh);
        memcpy(out, &b, sizeof b);
    }
}
