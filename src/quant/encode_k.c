/* SPDX-License-Identifier: MIT */
/* Fucina: reference encoders of the K super-block formats (q2_K..q8_K).
 *
 * Byte-identical to ggml's quantize_row_<fmt>_ref: same scale searches
 * (encode_search.c), same float expression order, same f16 rounding of the
 * super-block scales and the same second pass, which re-quantizes every
 * element against the scale the decoder will actually see (the f16 d times
 * the packed integer sub-scale), so encoder and decoder agree on the grid.
 *
 * Traps kept from ggml on purpose:
 *   - a sub-block whose effective scale is 0 keeps the levels of the first
 *     pass (the second pass skips it), so q3_K's all-zero group encodes level
 *     0, which decodes as -4*0 = 0;
 *   - sub-scales are converted with C's truncating int->uint8/int8 casts
 *     before clamping, as ggml does;
 *   - q8_K's all-zero block has d = 0, qs = 0 and bsums = 0 (ggml leaves its
 *     bsums unwritten there). */
#include <math.h>
#include <string.h>

#include "quant/encode_internal.h"
#include "quant/quant.h"

#define QK FCQ_QK_K

static inline int mini(int a, int b) { return a < b ? a : b; }
static inline int maxi(int a, int b) { return a > b ? a : b; }

/* Packs 2-bit levels: byte l of each 32-byte run holds elements l, l+32, l+64,
 * l+96 of the 128-element half in bits 0-1, 2-3, 4-5, 6-7. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < QK; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

void fcq_encode_q8_K(const float *src, void *dst, size_t n)
{
    fcq_block_q8_K *y = dst;
    const float *x = src;
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q8_K b;
        float max = 0, amax = 0;
        for (int j = 0; j < QK; ++j) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (amax == 0.f) {
            memset(&b, 0, sizeof b);
            memcpy(&y[i], &b, sizeof b);
            continue;
        }
        /* -127 (not -128) so the largest magnitude lands on +-127. */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK; ++j) b.qs[j] = (int8_t)mini(127, fcq_nearest_int(iscale * x[j]));
        for (int j = 0; j < QK / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += b.qs[j * 16 + ii];
            b.bsums[j] = (int16_t)sum;
        }
        b.d = 1 / iscale;
        memcpy(&y[i], &b, sizeof b);
    }
}

/* qw: the row's importance weights (ggml's quantize_row_q6_K_impl), or NULL
 * for quantize_row_q6_K_ref; the two differ only in the sub-block search. */
static void encode_q6_K(const float *src, void *dst, size_t n, const float *qw)
{
    fcq_block_q6_K *y = dst;
    const float *x = src;
    int8_t L[QK];
    float scales[QK / 16];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q6_K b;
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK / 16; ++ib) {
            const float scale = qw ? fcq_make_qx_quants_w(16, 32, x + 16 * ib, L + 16 * ib, qw + QK * i + 16 * ib)
                                   : fcq_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < 1e-15f) { /* whole block ~0: all bytes zero */
            memset(&b, 0, sizeof b);
            fcq_put_f16(&b.d, 0.f);
            memcpy(&y[i], &b, sizeof b);
            continue;
        }
        float iscale = -128.f / max_scale;
        fcq_put_f16(&b.d, 1 / iscale);
        for (int ib = 0; ib < QK / 16; ++ib) b.scales[ib] = (int8_t)mini(127, fcq_nearest_int(iscale * scales[ib]));
        const float dall = fcq_f16_value(b.d);
        for (int j = 0; j < QK / 16; ++j) {
            float d = dall * (float)b.scales[j];
            if (d == 0.f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = maxi(-32, mini(31, fcq_nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        /* ql: low nibbles, elements l and l+64 (then l+32 and l+96) of each
         * 128-element half; qh: the top 2 bits of l, l+32, l+64, l+96. */
        uint8_t *ql = b.ql, *qh = b.qh;
        for (int j = 0; j < QK; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q6_K(const float *src, void *dst, size_t n) { encode_q6_K(src, dst, n, NULL); }

void fcq_encode_q6_K_w(const float *src, void *dst, size_t n, const float *qw) { encode_q6_K(src, dst, n, qw); }

/* The second half of q4_K and q5_K, shared by the reference and weighted
 * searches: 6-bit packing of the sub-block scales and mins, the f16 super
 * scales, and the second pass that re-derives levels 0..nmax from the
 * decoded scales. */
static void k_scale_min_finish(const float *x, int nmax, const uint8_t ls[8], const uint8_t lm[8], float d,
                               float dmin, uint16_t *d_out, uint16_t *dmin_out, uint8_t scales_out[12],
                               uint8_t L[QK])
{
    fcq_put_scales_mins_k4(ls, lm, scales_out);
    fcq_put_f16(d_out, d);
    fcq_put_f16(dmin_out, dmin);
    const float dall = fcq_f16_value(*d_out), mall = fcq_f16_value(*dmin_out);
    for (int j = 0; j < QK / 32; ++j) {
        uint8_t sc, m;
        fcq_get_scale_min_k4(j, scales_out, &sc, &m);
        const float dj = dall * (float)sc;
        if (dj == 0.f) continue;
        const float dm = mall * (float)m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = fcq_nearest_int((x[32 * j + ii] + dm) / dj);
            L[32 * j + ii] = (uint8_t)maxi(0, mini(nmax, l));
        }
    }
}

/* The reference (scale, min) search of q4_K and q5_K: per sub-block
 * make_qkx2_quants with weights av_x + |x|, then the scales and mins
 * quantized against their maxima. */
static void encode_k_scale_min(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out, uint16_t *dmin_out,
                               uint8_t scales_out[12], uint8_t L[QK])
{
    uint8_t Laux[32];
    float weights[32], mins[QK / 32], scales[QK / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fcq_make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < QK / 32; ++j) {
        /* ggml truncates to uint8 first, then clamps. */
        uint8_t a = (uint8_t)fcq_nearest_int(inv_scale * scales[j]);
        uint8_t b = (uint8_t)fcq_nearest_int(inv_min * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = b < 63 ? b : 63;
    }
    k_scale_min_finish(x, nmax, ls, lm, max_scale / 63.f, max_min / 63.f, d_out, dmin_out, scales_out, L);
}

/* The weighted search of quantize_row_q4_K_impl / q5_K_impl: weights
 * qw * sqrt(sigma2 + x^2) with sigma2 = 2 * mean(x^2) over the super-block,
 * make_qkx3_quants per sub-block, and the scales and mins quantized by
 * make_qp_quants weighted by each sub-block's weight sum. q5_K clamps the
 * 6-bit levels to 63, q4_K does not (a level make_qp_quants wrapped
 * stays wrapped, as in ggml). */
static void encode_k_scale_min_w(const float *x, const float *qw, int nmax, int clamp63, uint16_t *d_out,
                                 uint16_t *dmin_out, uint8_t scales_out[12], uint8_t L[QK])
{
    uint8_t Laux[32], ls[8], lm[8];
    float weights[32], sw[QK / 32], mins[QK / 32], scales[QK / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK; ++l) sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / QK;
    for (int j = 0; j < QK / 32; ++j) {
        for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = fcq_make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36);
    }
    float d_block = fcq_make_qp_quants(QK / 32, 63, scales, ls, sw);
    float m_block = fcq_make_qp_quants(QK / 32, 63, mins, lm, sw);
    if (clamp63)
        for (int j = 0; j < QK / 32; ++j) {
            ls[j] = ls[j] < 63 ? ls[j] : 63;
            lm[j] = lm[j] < 63 ? lm[j] : 63;
        }
    k_scale_min_finish(x, nmax, ls, lm, d_block, m_block, d_out, dmin_out, scales_out, L);
}

static void encode_q4_K(const float *src, void *dst, size_t n, const float *qw)
{
    fcq_block_q4_K *y = dst;
    const float *x = src;
    uint8_t L[QK];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q4_K b;
        if (qw) encode_k_scale_min_w(x, qw + QK * i, 15, 0, &b.d, &b.dmin, b.scales, L);
        else encode_k_scale_min(x, 15, -1.f, 20, &b.d, &b.dmin, b.scales, L);
        /* Byte l of each 32-byte run: element l (low nibble) and l+32 (high)
         * of the 64-element pair of sub-blocks. */
        uint8_t *q = b.qs;
        for (int j = 0; j < QK; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q4_K(const float *src, void *dst, size_t n) { encode_q4_K(src, dst, n, NULL); }

void fcq_encode_q4_K_w(const float *src, void *dst, size_t n, const float *qw) { encode_q4_K(src, dst, n, qw); }

static void encode_q5_K(const float *src, void *dst, size_t n, const float *qw)
{
    fcq_block_q5_K *y = dst;
    const float *x = src;
    uint8_t L[QK];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q5_K b;
        if (qw) encode_k_scale_min_w(x, qw + QK * i, 31, 1, &b.d, &b.dmin, b.scales, L);
        else encode_k_scale_min(x, 31, -0.5f, 15, &b.d, &b.dmin, b.scales, L);
        /* Low nibbles as in q4_K; the fifth bit of element n+j goes to qh[j]
         * bit 2k (first sub-block of pair k) or 2k+1 (second). */
        uint8_t *qh = b.qh, *ql = b.qs;
        memset(qh, 0, sizeof b.qh);
        uint8_t m1 = 1, m2 = 2;
        for (int nn = 0; nn < QK; nn += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[nn + j];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                int l2 = L[nn + j + 32];
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q5_K(const float *src, void *dst, size_t n) { encode_q5_K(src, dst, n, NULL); }

void fcq_encode_q5_K_w(const float *src, void *dst, size_t n, const float *qw) { encode_q5_K(src, dst, n, qw); }

/* The second pass of q2_K against the stored scales (d, dmin and the 4-bit
 * sub-scales already in b), then the 2-bit packing; shared by both searches. */
static void q2_K_finish(const float *x, fcq_block_q2_K *b, uint8_t L[QK])
{
    const float dall = fcq_f16_value(b->d), mall = fcq_f16_value(b->dmin);
    for (int j = 0; j < QK / 16; ++j) {
        const float d = dall * (float)(b->scales[j] & 0xF);
        if (d == 0.f) continue;
        const float dm = mall * (float)(b->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = fcq_nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)maxi(0, mini(3, l));
        }
    }
    pack_2bit(L, b->qs);
}

void fcq_encode_q2_K(const float *src, void *dst, size_t n)
{
    fcq_block_q2_K *y = dst;
    const float *x = src;
    uint8_t L[QK], Laux[16];
    float weights[16], mins[QK / 16], scales[QK / 16];
    const float q4scale = 15.f;
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q2_K b;
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = fcq_make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* Scale in the low nibble, min in the high nibble of each byte. */
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK / 16; ++j) b.scales[j] = (uint8_t)fcq_nearest_int(iscale * scales[j]);
            fcq_put_f16(&b.d, max_scale / q4scale);
        } else {
            memset(b.scales, 0, sizeof b.scales);
            fcq_put_f16(&b.d, 0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK / 16; ++j)
                b.scales[j] = (uint8_t)(b.scales[j] | (uint8_t)((unsigned)fcq_nearest_int(iscale * mins[j]) << 4));
            fcq_put_f16(&b.dmin, max_min / q4scale);
        } else {
            fcq_put_f16(&b.dmin, 0.f);
        }
        q2_K_finish(x, &b, L);
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q2_K_w(const float *src, void *dst, size_t n, const float *qw)
{
    /* quantize_row_q2_K_impl: weights qw * sqrt(sigma2 + x^2) with sigma2 the
     * super-block's mean x^2 (not twice it, unlike q3_K..q5_K), a
     * make_qkx3_quants search per 16, then make_qp_quants of the scales and
     * of the mins, each weighted by the sub-blocks' weight sums. */
    fcq_block_q2_K *y = dst;
    const float *x = src;
    uint8_t L[QK], Laux[16], Ls[QK / 16], Lm[QK / 16];
    float weight[16], sw[QK / 16], mins[QK / 16], scales[QK / 16];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q2_K b;
        float sumx2 = 0;
        for (int j = 0; j < QK; ++j) sumx2 += x[j] * x[j];
        float sigma2 = sumx2 / QK;
        for (int j = 0; j < QK / 16; ++j) {
            const float *w = qw + QK * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = w[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            sw[j] = 0;
            for (int l = 0; l < 16; ++l) sw[j] += weight[l];
            scales[j] = fcq_make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36);
        }
        float dm = fcq_make_qp_quants(QK / 16, 15, scales, Ls, sw);
        float mm = fcq_make_qp_quants(QK / 16, 15, mins, Lm, sw);
        fcq_put_f16(&b.d, dm);
        fcq_put_f16(&b.dmin, mm);
        for (int j = 0; j < QK / 16; ++j) b.scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, &b, L);
        memcpy(&y[i], &b, sizeof b);
    }
}

/* The second pass of q3_K against the stored scales (d and the packed 6-bit
 * sub-scales already in b), the high-bit mask and the 2-bit packing;
 * shared by both searches. L holds the first-pass levels (0..7), kept for a
 * sub-block whose effective scale is 0. */
static void q3_K_finish(const float *x, fcq_block_q3_K *b, int8_t L[QK])
{
    const float dall = fcq_f16_value(b->d);
    for (int j = 0; j < QK / 16; ++j) {
        int sc = j < 8 ? b->scales[j] & 0xF : b->scales[j - 8] >> 4;
        sc = (sc | (((b->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        float d = dall * (float)sc;
        if (d == 0.f) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = maxi(-4, mini(3, fcq_nearest_int(x[16 * j + ii] / d)));
            L[16 * j + ii] = (int8_t)(l + 4);
        }
    }
    /* hmask: bit 2 of the level; element j goes to byte j%32, bit j/32. */
    memset(b->hmask, 0, sizeof b->hmask);
    uint8_t Lu[QK];
    for (int j = 0; j < QK; ++j) {
        int l = L[j];
        if (l > 3) {
            b->hmask[j % 32] = (uint8_t)(b->hmask[j % 32] | (1u << (j / 32)));
            l -= 4;
        }
        Lu[j] = (uint8_t)l;
    }
    pack_2bit(Lu, b->qs);
}

/* Sub-block j's 6-bit level l (0..63) into the q3_K scale bytes: low
 * nibbles in bytes 0..7, the top 2 bits in byte 8 + j%4 at bit 2*(j/4). */
static void q3_K_put_scale(uint8_t scales[12], int j, int l)
{
    if (j < 8) scales[j] = (uint8_t)(l & 0xF);
    else scales[j - 8] = (uint8_t)(scales[j - 8] | ((l & 0xF) << 4));
    l >>= 4;
    scales[j % 4 + 8] = (uint8_t)(scales[j % 4 + 8] | (l << (2 * (j / 4))));
}

void fcq_encode_q3_K(const float *src, void *dst, size_t n)
{
    fcq_block_q3_K *y = dst;
    const float *x = src;
    int8_t L[QK];
    float scales[QK / 16];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q3_K b;
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK / 16; ++j) {
            scales[j] = fcq_make_q3_quants(16, 4, x + 16 * j, L + 16 * j, 1);
            float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        /* 6-bit signed sub-scales, biased by 32. */
        memset(b.scales, 0, sizeof b.scales);
        if (max_scale != 0.f) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK / 16; ++j) {
                int8_t l8 = (int8_t)fcq_nearest_int(iscale * scales[j]); /* truncated first, as ggml */
                q3_K_put_scale(b.scales, j, maxi(-32, mini(31, l8)) + 32);
            }
            fcq_put_f16(&b.d, 1 / iscale);
        } else {
            fcq_put_f16(&b.d, 0.f);
        }
        q3_K_finish(x, &b, L);
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q3_K_w(const float *src, void *dst, size_t n, const float *qw)
{
    /* quantize_row_q3_K_impl: weights qw * sqrt(sigma2 + x^2), sigma2 twice
     * the super-block's mean x^2; make_qx_quants (not make_q3_quants) per
     * 16, and the 16 signed scales themselves through make_qx_quants with
     * nmax 32 weighted by the sub-blocks' weight sums, whose levels (0..63)
     * are stored as they come. */
    fcq_block_q3_K *y = dst;
    const float *x = src;
    int8_t L[QK], Ls[QK / 16];
    float weight[16], sw[QK / 16], scales[QK / 16];
    for (size_t i = 0; i < n / QK; ++i, x += QK) {
        fcq_block_q3_K b;
        float sumx2 = 0;
        for (int j = 0; j < QK; ++j) sumx2 += x[j] * x[j];
        float sigma2 = 2 * sumx2 / QK;
        for (int j = 0; j < QK / 16; ++j) {
            const float *w = qw + QK * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = w[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = fcq_make_qx_quants_w(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        memset(b.scales, 0, sizeof b.scales);
        float d_block = fcq_make_qx_quants_w(QK / 16, 32, scales, Ls, sw);
        for (int j = 0; j < QK / 16; ++j) q3_K_put_scale(b.scales, j, Ls[j]);
        fcq_put_f16(&b.d, d_block);
        q3_K_finish(x, &b, L);
        memcpy(&y[i], &b, sizeof b);
    }
}
