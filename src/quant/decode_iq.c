/* SPDX-License-Identifier: MIT */
/* Fucina: reference decoders of the IQ formats (and iq4_xs), bit-identical
 * to ggml's dequantize_row_<fmt>.
 *
 * Codebook formats: groups of 8 (iq2) or 4 (iq3) elements are one grid entry
 * (src/quant/iq_tables.c, derived from ggml's decoders), times a sub-block
 * scale, times a sign (see sgn_mul for NaN scales). The scale expression keeps ggml's
 * order: db = d * (0.5f + s) * 0.25f is (d * (0.5 + s)) * 0.25, y = (db *
 * grid) * sign. Blocks are copied to a local struct (src may be unaligned). */
#include <string.h>

#include "fucina/half.h"
#include "quant/iq_tables.h"
#include "quant/quant.h"

static inline float h2f(uint16_t bits) { return fc_f16_to_f32((fc_f16){bits}); }
/* ggml writes v * (sign ? -1.f : 1.f); its compiled decoder (the oracle) does
 * a sign flip, which differs from a real multiplication only for NaN (a NaN
 * times -1 keeps its sign on x86 and ARM). Negating explicitly gives ggml's
 * bits at every optimisation level, where a written product would depend on
 * whether the compiler folds it. */
static inline float sgn_mul(float v, unsigned signs, int j) { return (signs >> j) & 1 ? -v : v; }

/* iq2_xxs: per 32 elements two u32 words: four 8-bit grid indices, then four
 * 7-bit sign indices (bits 0..27) and a 4-bit scale (bits 28..31). */
void fcq_decode_iq2_xxs(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq2_xxs)) {
        fcq_block_iq2_xxs b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *w = (const uint8_t *)(b.qs + 4 * ib);
            const uint32_t aux1 = (uint32_t)w[4] | (uint32_t)w[5] << 8 | (uint32_t)w[6] << 16 | (uint32_t)w[7] << 24;
            const float db = d * (0.5f + (float)(aux1 >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint8_t *grid = fcq_iq2xxs_grid[w[l]];
                const unsigned signs = fcq_ksigns_iq2xs[(aux1 >> (7 * l)) & 127];
                for (int j = 0; j < 8; j++) dst[j] = sgn_mul(db * (float)grid[j], signs, j);
            }
        }
    }
}

/* iq2_xs: 32 u16 (9-bit grid index | 7-bit sign index << 9), one byte of two
 * 4-bit scales per 32 elements (low nibble for the first 16). */
void fcq_decode_iq2_xs(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq2_xs)) {
        fcq_block_iq2_xs b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (float)(b.scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(b.scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint16_t q = b.qs[4 * ib + l];
                const uint8_t *grid = fcq_iq2xs_grid[q & 511];
                const unsigned signs = fcq_ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) dst[j] = sgn_mul(db[l / 2] * (float)grid[j], signs, j);
            }
        }
    }
}

/* iq2_s: 10-bit grid indices (qs low 8 bits, qh 2 bits per group), explicit
 * 8-bit sign masks in the second half of qs, 4-bit scales as in iq2_xs. */
void fcq_decode_iq2_s(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq2_s)) {
        fcq_block_iq2_s b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        const uint8_t *qs = b.qs, *signs = b.qs + FCQ_QK_K / 8;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            const float db[2] = {d * (0.5f + (float)(b.scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(b.scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint8_t *grid = fcq_iq2s_grid[qs[l] | ((b.qh[ib] >> (2 * l)) & 3) << 8];
                for (int j = 0; j < 8; j++) dst[j] = sgn_mul(db[l / 2] * (float)grid[j], signs[l], j);
            }
        }
    }
}

/* iq3_xxs: 64 8-bit indices into a 4-element grid (two per group of 8), then
 * per 32 elements a u32 of four 7-bit sign indices and a 4-bit scale:
 * db = d * (0.5 + s) * 0.5. */
void fcq_decode_iq3_xxs(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq3_xxs)) {
        fcq_block_iq3_xxs b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        const uint8_t *qs = b.qs, *ss = b.qs + FCQ_QK_K / 4;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint8_t *w = ss + 4 * ib;
            const uint32_t aux = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, dst += 8) {
                const unsigned signs = fcq_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                const uint8_t *g1 = fcq_iq3xxs_grid[qs[2 * l]], *g2 = fcq_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    dst[j] = sgn_mul(db * (float)g1[j], signs, j);
                    dst[j + 4] = sgn_mul(db * (float)g2[j], signs, j + 4);
                }
            }
        }
    }
}

/* iq3_s: 9-bit indices (qs + one qh bit each: bit k of qh[ib] for qs[8ib+k]),
 * explicit sign bytes, 4-bit odd scales db = d * (1 + 2s), one nibble per 32. */
void fcq_decode_iq3_s(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq3_s)) {
        fcq_block_iq3_s b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int ib = 0; ib < 8; ib++) {
            const int s = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            const float db = d * (float)(1 + 2 * s);
            const uint8_t *qs = b.qs + 8 * ib, *signs = b.signs + 4 * ib;
            const unsigned qh = b.qh[ib];
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint8_t *g1 = fcq_iq3s_grid[qs[2 * l] | ((qh >> (2 * l)) & 1) << 8];
                const uint8_t *g2 = fcq_iq3s_grid[qs[2 * l + 1] | ((qh >> (2 * l + 1)) & 1) << 8];
                for (int j = 0; j < 4; j++) {
                    dst[j] = sgn_mul(db * (float)g1[j], signs[l], j);
                    dst[j + 4] = sgn_mul(db * (float)g2[j], signs[l], j + 4);
                }
            }
        }
    }
}

/* iq1_s: 11-bit indices into a {-1, 0, 1} grid (qs low 8 bits, 3 bits per
 * group from qh), per 32 elements a u16 qh: scale in bits 12..14 (dl = d *
 * (2s + 1)), delta sign in bit 15. x = dl * (grid + delta). */
void fcq_decode_iq1_s(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq1_s)) {
        fcq_block_iq1_s b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = b.qh[ib];
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -FCQ_IQ1S_DELTA : FCQ_IQ1S_DELTA;
            for (int l = 0; l < 4; l++, dst += 8) {
                const int8_t *grid = fcq_iq1s_grid[b.qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8];
                for (int j = 0; j < 8; j++) dst[j] = dl * ((float)grid[j] + delta);
            }
        }
    }
}

/* iq1_m: no d field: the f16 scale is the top nibbles of the four
 * little-endian u16 words of scales[], lowest word first. The rest of each
 * word holds four 3-bit sub-scales (two per 32 elements, dl = d * (2s + 1));
 * qh holds 3 index bits and a delta sign bit per group of 8. */
void fcq_decode_iq1_m(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq1_m)) {
        fcq_block_iq1_m b;
        memcpy(&b, p, sizeof b);
        uint16_t sc[4];
        for (int w = 0; w < 4; w++) sc[w] = (uint16_t)(b.scales[2 * w] | b.scales[2 * w + 1] << 8);
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = h2f(dbits);
        for (int ib = 0; ib < 8; ib++) {
            const float dl1 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 7) + 1);
            const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
            const uint8_t *qs = b.qs + 4 * ib, *qh = b.qh + 2 * ib;
            for (int l = 0; l < 4; l++, dst += 8) {
                const unsigned h = qh[l / 2] >> (4 * (l % 2)); /* low nibble for even groups */
                const int8_t *grid = fcq_iq1s_grid[qs[l] | (h & 7) << 8];
                const float delta = h & 0x08 ? -FCQ_IQ1S_DELTA : FCQ_IQ1S_DELTA;
                const float dl = l < 2 ? dl1 : dl2;
                for (int j = 0; j < 8; j++) dst[j] = dl * ((float)grid[j] + delta);
            }
        }
    }
}

/* iq4_xs: iq4_nl values with a 6-bit scale per 32 elements (low 4 bits in
 * scales_l nibbles, high 2 bits in scales_h), biased by 32: dl = d * (ls - 32). */
void fcq_decode_iq4_xs(const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n / FCQ_QK_K; i++, p += sizeof(fcq_block_iq4_xs)) {
        fcq_block_iq4_xs b;
        memcpy(&b, p, sizeof b);
        const float d = h2f(b.d);
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((b.scales_h >> (2 * ib)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t *qs = b.qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)fcq_kvalues_iq4nl[qs[j] & 0xf];
                dst[j + 16] = dl * (float)fcq_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
