/* SPDX-License-Identifier: MIT */
/* Fucina: reference decoders of the 32-element GGML formats (and q1_0, q2_0,
 * nvfp4), bit-identical to ggml's dequantize_row_<fmt>.
 *
 * Bit-identity means the same float operations in the same order: an integer
 * quant is converted to float and multiplied by the f32 scale (q4_1/q5_1 then
 * add the min), one rounding per operation (-ffp-contract=off keeps a*b+c from
 * fusing). Elements j and j+16 share byte j in the nibble formats: the low
 * nibble is the first half of the block, the high nibble the second half.
 *
 * Blocks are copied to a local struct first: src needs no alignment and the
 * wire layout is little-endian (so is every host we build for). */
#include <string.h>

#include "fucina/half.h"
#include "quant/iq_tables.h"
#include "quant/quant.h"

static inline float h2f(uint16_t bits) { return fc_f16_to_f32((fc_f16){bits}); }

void fcq_decode_q4_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q4_0), dst += 32) {
        fcq_block_q4_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((b.qs[j] & 0x0F) - 8) * d;
            dst[j + 16] = (float)((b.qs[j] >> 4) - 8) * d;
        }
    }
}

void fcq_decode_q4_1(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q4_1), dst += 32) {
        fcq_block_q4_1 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), m = h2f(b.m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b.qs[j] & 0x0F) * d + m;
            dst[j + 16] = (float)(b.qs[j] >> 4) * d + m;
        }
    }
}

/* The 5th bits: bit j of the little-endian u32 qh for element j (0..31). */
static inline uint32_t load_qh(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void fcq_decode_q5_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q5_0), dst += 32) {
        fcq_block_q5_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        const uint32_t qh = load_qh(b.qh);
        for (int j = 0; j < 16; j++) {
            const int x0 = (int)((b.qs[j] & 0x0F) | (((qh >> j) & 1u) << 4)) - 16;
            const int x1 = (int)((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
            dst[j] = (float)x0 * d;
            dst[j + 16] = (float)x1 * d;
        }
    }
}

void fcq_decode_q5_1(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q5_1), dst += 32) {
        fcq_block_q5_1 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), m = h2f(b.m);
        const uint32_t qh = load_qh(b.qh);
        for (int j = 0; j < 16; j++) {
            const int x0 = (int)((b.qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
            const int x1 = (int)((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
            dst[j] = (float)x0 * d + m;
            dst[j + 16] = (float)x1 * d + m;
        }
    }
}

void fcq_decode_q8_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q8_0), dst += 32) {
        fcq_block_q8_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b.qs[j] * d;
    }
}

/* ggml has no q8_1 decoder (q8_1 is an activation format); x = d * q as for
 * q8_0, the s field (d * sum q) being only a dot-product shortcut. */
void fcq_decode_q8_1(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_q8_1), dst += 32) {
        fcq_block_q8_1 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b.qs[j] * d;
    }
}

void fcq_decode_iq4_nl(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_iq4_nl), dst += 32) {
        fcq_block_iq4_nl b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)fcq_kvalues_iq4nl[b.qs[j] & 0x0F];
            dst[j + 16] = d * (float)fcq_kvalues_iq4nl[b.qs[j] >> 4];
        }
    }
}

/* E8M0 scale, halved (the E2M1 table holds doubled values): 2^(e-128) as an
 * f32 bit pattern; e = 0 and 1 give the subnormals 2^-128 and 2^-127. e = 255
 * (NaN in OCP MX) decodes as 2^127, as ggml does. */
static inline float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return fc_bits_f32(bits);
}

void fcq_decode_mxfp4(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 32; i++, p += sizeof(fcq_block_mxfp4), dst += 32) {
        fcq_block_mxfp4 b;
        memcpy(&b, p, sizeof b);
        const float d = e8m0_half(b.e);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)fcq_kvalues_e2m1x2[b.qs[j] & 0x0F] * d;
            dst[j + 16] = (float)fcq_kvalues_e2m1x2[b.qs[j] >> 4] * d;
        }
    }
}

/* UE4M3 scale, halved: bit 7 is ignored, exponent bias 7, no Inf; 0x00 and
 * 0x7F (the E4M3 NaN) decode as 0, as ggml defines it. Every value is exact. */
static inline float ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (x >> 3) & 0xF, man = x & 0x7;
    float raw;
    if (exp == 0)
        raw = (float)man * 0x1p-9f;
    else
        raw = (1.0f + (float)man / 8.0f) * fc_bits_f32((uint32_t)(exp - 7 + 127) << 23);
    return raw * 0.5f;
}

void fcq_decode_nvfp4(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 64; i++, p += sizeof(fcq_block_nvfp4)) {
        fcq_block_nvfp4 b;
        memcpy(&b, p, sizeof b);
        for (int s = 0; s < 4; s++, dst += 16) {
            const float d = ue4m3_half(b.d[s]);
            for (int j = 0; j < 8; j++) {
                dst[j] = (float)fcq_kvalues_e2m1x2[b.qs[8 * s + j] & 0x0F] * d;
                dst[j + 8] = (float)fcq_kvalues_e2m1x2[b.qs[8 * s + j] >> 4] * d;
            }
        }
    }
}

/* 128 sign bits, element j at bit j%8 of byte j/8: +d when set, -d when clear. */
void fcq_decode_q1_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 128; i++, p += sizeof(fcq_block_q1_0), dst += 128) {
        fcq_block_q1_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), neg_d = -d;
        for (int j = 0; j < 128; j++) dst[j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : neg_d;
    }
}

/* 64 two-bit codes, element j at bits 2*(j%4) of byte j/4: x = (q - 1) * d. */
void fcq_decode_q2_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / 64; i++, p += sizeof(fcq_block_q2_0), dst += 64) {
        fcq_block_q2_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 64; j++) dst[j] = (float)((int)((b.qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}
