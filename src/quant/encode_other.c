/* SPDX-License-Identifier: MIT */
/* Fucina: reference encoders of the non-linear and ternary/binary formats
 * (iq4_nl, iq4_xs, tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0).
 *
 * Byte-identical to ggml's quantize_row_<fmt>_ref (same float order, same
 * tie rules), with one documented exception: an iq4_nl block whose largest
 * magnitude is below 1e-15 gets d = 0 and every nibble 8 (level +1, so it
 * decodes to +0). ggml writes d = 0 too but leaves that block's nibbles to
 * whatever its level buffer held (the previous block's, or stack garbage
 * for the first block of a call), which no encoder can reproduce and which
 * would make the output depend on how a row is split across threads. */
#include <math.h>
#include <string.h>

#include "quant/encode_internal.h"
#include "quant/quant.h"

#define FCQ_GROUP_MAX_EPS 1e-15f

/* ggml's kvalues_iq4nl: the 16 non-linear levels of iq4_nl and iq4_xs. */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/* E2M1 values doubled (kvalues_mxfp4 in ggml), shared by mxfp4 and nvfp4:
 * index 8 is -0, stored as 0, so ties between 0 and 8 go to 0. */
static const int8_t kvalues_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* --- iq4_nl / iq4_xs ------------------------------------------------------------------ */

/* The nearest level of a sorted table by bisection; a value exactly halfway
 * between two levels goes to the upper one (strict < on the lower distance). */
static int best_index_int8(int n, const int8_t *val, float x)
{
    if (x <= (float)val[0]) return 0;
    if (x >= (float)val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < (float)val[mav]) mu = mav;
        else ml = mav;
    }
    return x - (float)val[mu - 1] < (float)val[mu] - x ? mu - 1 : mu;
}

/* One 32-element sub-block, weights x^2 (no importance matrix): levels from
 * the scale that maps the largest magnitude onto the outer level, the
 * least-squares scale for those levels, then (ntry > 0) 2*ntry+1 more trial
 * scales. Returns 0 with Lb untouched when the sub-block is ~0. */
static float iq4_subblock_w(const float *xb, uint8_t *Lb, int ntry, const float *weight);

static float iq4_subblock(const float *xb, uint8_t *Lb, int ntry)
{
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    return iq4_subblock_w(xb, Lb, ntry, weight);
}

/* The search with any per-element weights (an imatrix's qw * sqrt(sigma2 +
 * x^2), or x^2 above). */
static float iq4_subblock_w(const float *xb, uint8_t *Lb, int ntry, const float *weight)
{
    const int8_t *values = kvalues_iq4nl;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        float ax = fabsf(xb[j]);
        if (ax > amax) { amax = ax; max = xb[j]; }
    }
    if (amax < FCQ_GROUP_MAX_EPS) return 0.f;
    float d = ntry > 0 ? -max / (float)values[0] : max / (float)values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        float al = id * xb[j];
        int l = best_index_int8(16, values, al);
        Lb[j] = (uint8_t)l;
        float q = (float)values[l];
        float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        id = (float)(itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            float al = id * xb[j];
            int l = best_index_int8(16, values, al);
            float q = (float)values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 levels into 16 bytes: element j in the low nibble, j+16 in the high. */
static void pack_iq4(const uint8_t *L, uint8_t *q4, int n)
{
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void fcq_encode_iq4_nl(const float *src, void *dst, size_t n)
{
    fcq_block_iq4_nl *y = dst;
    for (size_t i = 0; i < n / 32; ++i) {
        fcq_block_iq4_nl b;
        uint8_t L[32];
        memset(L, 8, sizeof L); /* see the file comment: the ~0 block */
        /* ggml's _ref passes ntry = -1: no trial scales, and no re-quantization
         * against the stored scale. */
        float d = iq4_subblock(src + 32 * i, L, -1);
        fcq_put_f16(&b.d, d);
        pack_iq4(L, b.qs, 32);
        memcpy(&y[i], &b, sizeof b);
    }
}

/* The importance weights of one sub-block: qw * sqrt(sigma2 + x^2), sigma2
 * twice the mean x^2 of the super-block (32 elements for iq4_nl, 256 for
 * iq4_xs); ggml scales the sum by 2/size, a power of two, so exactly. */
static float iq4_sigma2(const float *x, int size)
{
    float sigma2 = 0;
    for (int j = 0; j < size; ++j) sigma2 += x[j] * x[j];
    return sigma2 * (2.f / (float)size);
}

static void iq4_weights(const float *xb, const float *qw, float sigma2, float w[32])
{
    for (int j = 0; j < 32; ++j) w[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

static void encode_iq4_nl_search(const float *src, void *dst, size_t n, const float *qw)
{
    fcq_block_iq4_nl *y = dst;
    for (size_t i = 0; i < n / 32; ++i) {
        const float *xb = src + 32 * i;
        fcq_block_iq4_nl b;
        uint8_t L[32];
        float w[32];
        /* ggml's quantize_iq4_nl: ntry = 7, then every level re-chosen against
         * the f32 scale (1/0 -> 0, so a ~0 block gets the level nearest 0,
         * index 8: defined, unlike _ref's leftover nibbles). */
        float d;
        if (qw) {
            iq4_weights(xb, qw + 32 * i, iq4_sigma2(xb, 32), w);
            d = iq4_subblock_w(xb, L, 7, w);
        } else {
            d = iq4_subblock(xb, L, 7);
        }
        fcq_put_f16(&b.d, d);
        float id = d != 0.f ? 1 / d : 0.f;
        for (int j = 0; j < 32; ++j) L[j] = (uint8_t)best_index_int8(16, kvalues_iq4nl, id * xb[j]);
        pack_iq4(L, b.qs, 32);
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_iq4_nl_search(const float *src, void *dst, size_t n) { encode_iq4_nl_search(src, dst, n, NULL); }

void fcq_encode_iq4_nl_w(const float *src, void *dst, size_t n, const float *qw)
{
    encode_iq4_nl_search(src, dst, n, qw);
}

static void encode_iq4_xs(const float *src, void *dst, size_t n, const float *qw)
{
    const int8_t *values = kvalues_iq4nl;
    fcq_block_iq4_xs *y = dst;
    for (size_t i = 0; i < n / FCQ_QK_K; ++i) {
        const float *x = src + FCQ_QK_K * i;
        fcq_block_iq4_xs b;
        uint8_t L[FCQ_QK_K];
        float scales[FCQ_QK_K / 32], w[32];
        float max_scale = 0, amax_scale = 0;
        const float sigma2 = qw ? iq4_sigma2(x, FCQ_QK_K) : 0.f;
        for (int ib = 0; ib < FCQ_QK_K / 32; ++ib) {
            if (qw) {
                iq4_weights(x + 32 * ib, qw + FCQ_QK_K * i + 32 * ib, sigma2, w);
                scales[ib] = iq4_subblock_w(x + 32 * ib, L + 32 * ib, 7, w);
            } else {
                scales[ib] = iq4_subblock(x + 32 * ib, L + 32 * ib, 7);
            }
            float abs_d = fabsf(scales[ib]);
            if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = scales[ib]; }
        }
        /* Super-scale: 6-bit signed sub-scales times d = -max_scale/32 (an
         * all-~0 block stores -0). Levels are re-chosen against d*l computed
         * from the f32 d, not its f16 rounding, as ggml does. */
        uint16_t scales_h = 0;
        memset(b.scales_l, 0, sizeof b.scales_l);
        float d = -max_scale / 32;
        fcq_put_f16(&b.d, d);
        float id = d != 0.f ? 1 / d : 0.f;
        for (int ib = 0; ib < FCQ_QK_K / 32; ++ib) {
            int l = fcq_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * (float)l;
            float idl = dl != 0.f ? 1 / dl : 0.f;
            uint8_t *Lb = L + 32 * ib;
            const float *xb = x + 32 * ib;
            for (int j = 0; j < 32; ++j) Lb[j] = (uint8_t)best_index_int8(16, values, idl * xb[j]);
            l += 32;
            if (ib % 2 == 0) b.scales_l[ib / 2] = (uint8_t)(l & 0xf);
            else b.scales_l[ib / 2] = (uint8_t)(b.scales_l[ib / 2] | ((l & 0xf) << 4));
            scales_h = (uint16_t)(scales_h | ((l >> 4) << (2 * (ib % 8))));
        }
        memcpy(&b.scales_h, &scales_h, sizeof scales_h);
        pack_iq4(L, b.qs, FCQ_QK_K);
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_iq4_xs(const float *src, void *dst, size_t n) { encode_iq4_xs(src, dst, n, NULL); }

void fcq_encode_iq4_xs_w(const float *src, void *dst, size_t n, const float *qw) { encode_iq4_xs(src, dst, n, qw); }

/* --- ternary: tq1_0, tq2_0 ------------------------------------------------------------ */

/* The trit of x: round-half-away(x/amax) + 1 in {0, 1, 2}. */
static inline int trit(float x, float id) { return (int)lroundf(x * id) + 1; }

/* amax with ggml's MAX macro: a NaN element propagates (the comparison fails
 * and the element wins). */
static inline float block_amax_macro(const float *x, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

/* Five trits read as a base-3 number q (first trit most significant), stored
 * as ceil(q * 256 / 243) so the decoder recovers trit k as the top digit of
 * (byte * 3^k) * 3 >> 8. */
static inline uint8_t trits_to_byte(unsigned q) { return (uint8_t)(((q & 0xffu) * 256u + 242u) / 243u); }

void fcq_encode_tq1_0(const float *src, void *dst, size_t n)
{
    fcq_block_tq1_0 *y = dst;
    const float *x = src;
    for (size_t i = 0; i < n / FCQ_QK_K; ++i) {
        fcq_block_tq1_0 b;
        const float d = block_amax_macro(x, FCQ_QK_K);
        const float id = d != 0.f ? 1.0f / d : 0.0f;
        fcq_put_f16(&b.d, d);
        /* qs[0..32): elements m + 32*k of the first 160, k = 0..4. */
        for (int m = 0; m < 32; ++m) {
            uint8_t q = 0;
            for (int k = 0; k < 5; ++k) q = (uint8_t)(q * 3 + trit(x[m + k * 32], id));
            b.qs[m] = trits_to_byte(q);
        }
        x += 160;
        /* qs[32..48): elements m + 16*k of the next 80. */
        for (int m = 0; m < 16; ++m) {
            uint8_t q = 0;
            for (int k = 0; k < 5; ++k) q = (uint8_t)(q * 3 + trit(x[m + k * 16], id));
            b.qs[32 + m] = trits_to_byte(q);
        }
        x += 80;
        /* qh[0..4): elements j + 4*k of the last 16, k = 0..3, then a zero trit. */
        for (int j = 0; j < 4; ++j) {
            uint8_t q = 0;
            for (int k = 0; k < 4; ++k) q = (uint8_t)(q * 3 + trit(x[j + k * 4], id));
            q = (uint8_t)(q * 3);
            b.qh[j] = trits_to_byte(q);
        }
        x += 16;
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_tq2_0(const float *src, void *dst, size_t n)
{
    fcq_block_tq2_0 *y = dst;
    const float *x = src;
    for (size_t i = 0; i < n / FCQ_QK_K; ++i) {
        fcq_block_tq2_0 b;
        const float d = block_amax_macro(x, FCQ_QK_K);
        const float id = d != 0.f ? 1.0f / d : 0.0f;
        fcq_put_f16(&b.d, d);
        /* Byte m of each 32-byte run: elements m + 32*k (k = 0..3) of its
         * 128, two bits each, k-th pair at bit 2k. */
        for (int j = 0; j < 64; j += 32) {
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int k = 0; k < 4; ++k) q = (uint8_t)(q + ((trit(x[m + k * 32], id) & 3) << (2 * k)));
                b.qs[j + m] = q;
            }
            x += 128;
        }
        memcpy(&y[i], &b, sizeof b);
    }
}

/* --- FP4: mxfp4, nvfp4 ---------------------------------------------------------------- */

/* Nearest of the 16 doubled E2M1 values times e; the first index wins ties. */
static int best_index_fp4(float x, float e)
{
    int best_index = 0;
    float best_err = fabsf((float)kvalues_fp4[0] * e - x);
    for (int i = 1; i < 16; ++i) {
        float err = fabsf((float)kvalues_fp4[i] * e - x);
        if (err < best_err) {
            best_index = i;
            best_err = err;
        }
    }
    return best_index;
}

/* 2^(e-128): half the E8M0 value, since the table is doubled. */
static float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return fc_bits_f32(bits);
}

void fcq_encode_mxfp4(const float *src, void *dst, size_t n)
{
    fcq_block_mxfp4 *y = dst;
    for (size_t i = 0; i < n / 32; ++i) {
        const float *x = src + 32 * i;
        fcq_block_mxfp4 b;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        /* Shared exponent e = floor(log2 amax) - 2 (biased by 127): amax
         * falls in the top E2M1 binade [4, 8) * 2^(e-127). floor(log2f) is
         * libm's, as in ggml, so a value just below a power of two whose
         * log2f rounds up to the integer takes the higher exponent here too.
         * The float->uint8 cast is x86's (truncate to int32, keep the low
         * byte), which a subnormal amax reaches. */
        const uint8_t e = amax > 0.0f ? (uint8_t)fcq_trunc_i32(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = e8m0_half(e);
        b.e = e;
        for (int j = 0; j < 16; ++j) {
            const int x0 = best_index_fp4(x[j], d), x1 = best_index_fp4(x[16 + j], d);
            b.qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
        memcpy(&y[i], &b, sizeof b);
    }
}

/* UE4M3 (4 exponent bits, bias 7, 3 mantissa bits, no sign) decoded and
 * halved to match the doubled table; 0 and 0x7f decode to 0. */
static float ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F) return 0.0f;
    int exp = (x >> 3) & 0xF, man = x & 0x7;
    float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return raw * 0.5f;
}

/* f32 -> UE4M3 as ggml rounds it: clamp to 448, round half up on the first
 * dropped mantissa bit (not nearest-even), subnormals by x*512 + 0.5
 * truncated, overflow to 0x7e. */
static uint8_t f32_to_ue4m3(float x)
{
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits = fc_f32_bits(x);
    int fp32_exp = (int)((bits >> 23) & 0xFF) - 127;
    int fp32_man = (int)((bits >> 20) & 0x7);
    int ue_exp = fp32_exp + 7;
    if (ue_exp <= 0) {
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        if (man < 1) return 0;
        return (uint8_t)man;
    }
    if (ue_exp >= 15) return 0x7E;
    int ue_man = fp32_man + (int)((bits >> 19) & 1);
    if (ue_man > 7) {
        ue_man = 0;
        ue_exp++;
        if (ue_exp >= 15) return 0x7E;
    }
    return (uint8_t)((ue_exp << 3) | ue_man);
}

void fcq_encode_nvfp4(const float *src, void *dst, size_t n)
{
    fcq_block_nvfp4 *y = dst;
    for (size_t i = 0; i < n / 64; ++i) {
        fcq_block_nvfp4 b;
        for (int s = 0; s < 4; ++s) {
            const float *xb = src + 64 * i + 16 * s;
            float amax = 0.0f;
            for (int j = 0; j < 16; ++j)
                if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
            /* amax/6 maps the largest E2M1 value (6) onto amax. */
            const uint8_t ue = f32_to_ue4m3(amax / 6.0f);
            b.d[s] = ue;
            const float d = ue4m3_half(ue);
            for (int j = 0; j < 8; ++j) {
                const int x0 = best_index_fp4(xb[j], d), x1 = best_index_fp4(xb[8 + j], d);
                b.qs[8 * s + j] = (uint8_t)(x0 | (x1 << 4));
            }
        }
        memcpy(&y[i], &b, sizeof b);
    }
}

/* --- binary and 2-bit: q1_0, q2_0 ----------------------------------------------------- */

void fcq_encode_q1_0(const float *src, void *dst, size_t n)
{
    fcq_block_q1_0 *y = dst;
    for (size_t i = 0; i < n / 128; ++i) {
        const float *x = src + 128 * i;
        fcq_block_q1_0 b;
        /* d = mean |x| (sequential sum, then one division); bit = x >= 0, so
         * -0 sets the bit and NaN clears it. */
        float sum_abs = 0.0f;
        for (int j = 0; j < 128; ++j) sum_abs += fabsf(x[j]);
        fcq_put_f16(&b.d, sum_abs / 128);
        memset(b.qs, 0, sizeof b.qs);
        for (int j = 0; j < 128; ++j)
            if (x[j] >= 0.0f) b.qs[j / 8] = (uint8_t)(b.qs[j / 8] | (1u << (j % 8)));
        memcpy(&y[i], &b, sizeof b);
    }
}

void fcq_encode_q2_0(const float *src, void *dst, size_t n)
{
    fcq_block_q2_0 *y = dst;
    for (size_t i = 0; i < n / 64; ++i) {
        const float *x = src + 64 * i;
        fcq_block_q2_0 b;
        float amax = 0.0f;
        for (int j = 0; j < 64; ++j) {
            const float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        const float d = amax;
        const float id = d > 0.0f ? 1.0f / d : 0.0f;
        fcq_put_f16(&b.d, d);
        memset(b.qs, 0, sizeof b.qs);
        /* Levels -1, 0, 1, 2 stored +1; roundf ties away from zero. */
        for (int j = 0; j < 64; ++j) {
            int q = fcq_trunc_i32(roundf(x[j] * id)) + 1;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            b.qs[j / 4] = (uint8_t)(b.qs[j / 4] | (q << (2 * (j % 4))));
        }
        memcpy(&y[i], &b, sizeof b);
    }
}
