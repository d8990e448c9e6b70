/* SPDX-License-Identifier: MIT */
/* Fucina: reference decoders of the 256-element K and ternary formats,
 * bit-identical to ggml's dequantize_row_<fmt>.
 *
 * Same float operations in the same order as ggml: the sub-block scale is
 * formed first (d * integer scale, one rounding), then multiplied by the
 * integer quant and the sub-block min subtracted (q2_K, q4_K, q5_K), each
 * its own rounding (-ffp-contract=off). q6_K rounds (d * scale) * q left to
 * right. Blocks are copied to a local struct (src may be unaligned). */
#include <string.h>

#include "fucina/half.h"
#include "quant/quant.h"

static inline float h2f(uint16_t bits) { return fc_f16_to_f32((fc_f16){bits}); }

/* q2_K: 16 sub-blocks of 16; scales[i] = 4-bit scale | 4-bit min << 4. Each
 * group of 32 qs bytes holds four 2-bit planes of 32 elements (shift 0,2,4,6),
 * each plane two sub-blocks (bytes 0..15 and 16..31). */
void fcq_decode_q2_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q2_K)) {
        fcq_block_q2_K b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), min = h2f(b.dmin);
        int is = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = b.scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * (float)((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* The twelve 6-bit-scale bytes of q3_K unpacked to sixteen signed scales
 * (stored biased by 32): low nibbles of bytes 0..7 for scales 0..7, high
 * nibbles for 8..15, the top two bits of each from bytes 8..11. */
static void q3_K_scales(const uint8_t in[12], int sc[16])
{
    for (int j = 0; j < 16; j++) {
        const int low = j < 8 ? in[j] & 0xF : in[j - 8] >> 4;
        const int high = (in[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (low | high << 4) - 32;
    }
}

/* q3_K: 2 low bits in qs (same plane layout as q2_K), the third bit in hmask
 * (bit m of hmask[l] for plane m); a clear high bit subtracts 4. */
void fcq_decode_q3_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q3_K)) {
        fcq_block_q3_K b;
        memcpy(&b, p, sizeof b);
        const float d_all = h2f(b.d);
        int sc[16];
        q3_K_scales(b.scales, sc);
        int is = 0, m = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2, m++) {
                for (int part = 0; part < 2; part++) {
                    const float dl = d_all * (float)sc[is++];
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] >> m) & 1 ? 0 : 4);
                        *dst++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* q4_K / q5_K: 8 sub-blocks of 32, 6-bit scale and min each, packed in 12
 * bytes: j < 4 in the low 6 bits of bytes j (scale) and j+4 (min); j >= 4
 * as a nibble of byte j+4 plus the top 2 bits of bytes j-4 (scale) and j (min). */
static void k4_scale_min(int j, const uint8_t q[12], uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* q4_K: each 32-byte group of qs holds two sub-blocks: low nibbles then high. */
void fcq_decode_q4_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q4_K)) {
        fcq_block_q4_K b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), min = h2f(b.dmin);
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = b.qs + 32 * g;
            uint8_t sc, m;
            k4_scale_min(2 * g, b.scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            k4_scale_min(2 * g + 1, b.scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* q5_K: q4_K plus a fifth bit: bit 2g (low nibbles) / 2g+1 (high) of qh[l]. */
void fcq_decode_q5_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q5_K)) {
        fcq_block_q5_K b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d), min = h2f(b.dmin);
        for (int g = 0; g < 4; g++) {
            const uint8_t *ql = b.qs + 32 * g;
            uint8_t sc, m;
            k4_scale_min(2 * g, b.scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            k4_scale_min(2 * g + 1, b.scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((ql[l] & 0xF) + ((b.qh[l] >> (2 * g)) & 1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((ql[l] >> 4) + ((b.qh[l] >> (2 * g + 1)) & 1 ? 16 : 0)) - m2;
        }
    }
}

/* q6_K: per 128 elements, 64 ql bytes (low nibbles: elements 0..31 and
 * 32..63, high nibbles: 64..127) and 32 qh bytes (2 bits for each of the four
 * 32-element rows); 16 int8 scales, one per 16 elements. x = (d * sc) * (q - 32). */
void fcq_decode_q6_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q6_K)) {
        fcq_block_q6_K b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int h = 0; h < 2; h++, dst += 128) {
            const uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
            const int8_t *sc = b.scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* q8_K: f32 scale, x = d * q (bsums are a dot-product shortcut). */
void fcq_decode_q8_K(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_q8_K), dst += FCQ_QK_K) {
        fcq_block_q8_K b;
        memcpy(&b, p, sizeof b);
        for (int j = 0; j < FCQ_QK_K; j++) dst[j] = b.d * (float)b.qs[j];
    }
}

/* A ternary digit of a tq1_0 byte: the byte is a base-3 fixed-point fraction
 * (value * 256 / 243 rounded up at encode), so digit k is the integer part of
 * 3 * frac after k shifts: ((uint8)(q * 3^k) * 3) >> 8, in {0, 1, 2}. Any
 * byte value is legal and decodes this way. */
static inline float trit(uint8_t q, unsigned pow3, float d)
{
    const uint8_t s = (uint8_t)(q * pow3);
    const int xi = (s * 3) >> 8;
    return (float)(xi - 1) * d;
}

/* tq1_0: qs[0..31] give 5 digits x 32 elements (digit-major), qs[32..47]
 * 5 x 16, then qh[0..3] 4 x 4: 160 + 80 + 16 = 256. */
void fcq_decode_tq1_0(const void *src, float *dst, size_t n)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_tq1_0)) {
        fcq_block_tq1_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 32; m++) *dst++ = trit(b.qs[m], pow3[k], d);
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 16; m++) *dst++ = trit(b.qs[32 + m], pow3[k], d);
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 4; m++) *dst++ = trit(b.qh[m], pow3[k], d);
    }
}

/* tq2_0: 2-bit codes, per 32 bytes four planes (shift 0, 2, 4, 6) of 32
 * elements; x = (q - 1) * d (code 3 gives 2d: any pattern is legal). */
void fcq_decode_tq2_0(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_tq2_0)) {
        fcq_block_tq2_0 b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *dst++ = (float)(((b.qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}
